// fuzz/model_files_checks.hpp - properties the model-files readers (pnmem/model_files/*.hpp) owe
// whatever they are given.
#pragma once

#include "fuzz_support.hpp"
#include "pnmem/cost_model.hpp"
#include "pnmem/model_files/model_description.hpp"
#include "pnmem/model_shape.hpp"

namespace pnmem_fuzz {

// Two descriptions say the same thing (source included).
inline bool same_description(const pnmem::model_files::model_description& a,
                             const pnmem::model_files::model_description& b) {
  return a.cost == b.cost && a.name == b.name && a.source == b.source && a.shape == b.shape && a.engine == b.engine;
}

// Two reads gave the same answer: both the same description, or both the same error.
inline bool same_read(const pnmem::model_files::read_result<pnmem::model_files::model_description>& a,
                      const pnmem::model_files::read_result<pnmem::model_files::model_description>& b) {
  if (a.value.has_value() != b.value.has_value()) return false;
  return a.value ? same_description(*a.value, *b.value) : a.error == b.error;
}

// A description a reader derived from a model's layer groups (HF config, GGUF): its costs are
// from_shape's under the rule it names, valid, and the groups are within the readers' limits and
// self-consistent: 1 to 8 groups of 1 to 2^20 layers each, attention groups with KV heads and a K dim
// >= 1 (a V dim too unless K-only), windowed and cross groups with a span; the costs have a window
// term exactly when a group slides or is chunked, per-item KV exactly when one is cross-attention,
// and state only when one is recurrent.
inline void check_derived_from_shape(const pnmem::model_files::model_description& d) {
  FUZZ_CHECK(d.shape.has_value());
  const pnmem::model_shape& s = *d.shape;
  FUZZ_CHECK(d.cost == pnmem::from_shape(s, d.engine));
  FUZZ_CHECK(pnmem::validate(d.cost).empty());
  FUZZ_CHECK(pnmem::validate(s).empty());
  FUZZ_CHECK(s.n_groups >= 1 && s.n_groups <= pnmem::max_layer_groups);
  bool windowed = false;
  bool cross = false;
  bool recurrent = false;
  for (std::size_t i = 0; i < s.n_groups; ++i) {
    const pnmem::layer_group& g = s.groups[i];
    FUZZ_CHECK(g.layers >= 1 && g.layers <= (1u << 20));
    if (g.kind == pnmem::layer_kind::recurrent) {
      recurrent = true;
      continue;
    }
    FUZZ_CHECK(g.kv_heads >= 1 && g.key_dim >= 1);
    FUZZ_CHECK(g.k_only || g.value_dim >= 1);
    windowed = windowed || g.kind == pnmem::layer_kind::sliding || g.kind == pnmem::layer_kind::chunked;
    cross = cross || g.kind == pnmem::layer_kind::cross;
  }
  FUZZ_CHECK((d.cost.n_windows != 0) == windowed);
  // An expectation independent of from_shape (issue 42): under the exact rule, a token of the full-attention
  // layers costs, in f16 / bf16 (2 B a value) and fp32 (4 B), layers x KV heads x (K dim + V dim) values,
  // a K-only group (MLA's latent) K dim alone, and the same side bytes (an indexer's keys) in every format.
  if (d.engine == pnmem::exact_engine) {
    std::uint64_t values = 0;
    std::uint64_t side = 0;
    for (std::size_t i = 0; i < s.n_groups; ++i) {
      const pnmem::layer_group& g = s.groups[i];
      if (g.kind != pnmem::layer_kind::full) continue;
      values += std::uint64_t{g.layers} * g.kv_heads * (std::uint64_t{g.key_dim} + (g.k_only ? 0 : g.value_dim));
      side += std::uint64_t{g.layers} * g.side_bytes;
    }
    const auto full = [&](pnmem::kv_format f) { return d.cost.full_kv_bytes_per_token[static_cast<std::size_t>(f)]; };
    FUZZ_CHECK(full(pnmem::kv_format::f16) == 2 * values + side);
    FUZZ_CHECK(full(pnmem::kv_format::bf16) == 2 * values + side);
    FUZZ_CHECK(full(pnmem::kv_format::fp32) == 4 * values + side);
  }
  bool per_item = false;
  for (const std::uint64_t b : d.cost.kv_bytes_per_encoder_item) per_item = per_item || b != 0;
  FUZZ_CHECK(per_item == cross);
  if (d.cost.state_bytes_per_seq != 0) FUZZ_CHECK(recurrent);
}

}  // namespace pnmem_fuzz
