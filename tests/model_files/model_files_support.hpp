// tests/model_files/model_files_support.hpp - what the model-files tests share: the fixture directory,
// per-format KV lookups, and the round trip through pnmem's JSON description.
#pragma once

#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "pnmem/cost_model.hpp"
#include "pnmem/model_shape.hpp"
#include "pnmem/model_files/model_json.hpp"

namespace pnmem::test {

// tests/fixtures/models (meson sets PNMEM_MODEL_FIXTURES).
inline std::string model_fixture(const std::string& name) {
  const char* dir = std::getenv("PNMEM_MODEL_FIXTURES");
  REQUIRE_MESSAGE(dir != nullptr, "PNMEM_MODEL_FIXTURES is not set (run through meson test)");
  const auto text = model_files::read_text_file(std::string(dir) + "/" + name);
  REQUIRE_MESSAGE(text.value.has_value(), text.error);
  return *text.value;
}

inline std::uint64_t full_kv(const model_cost& m, kv_format f) { return m.full_kv_bytes_per_token[static_cast<std::size_t>(f)]; }
// The bytes per token of the windowed term that keeps `window` tokens (0 when there is none).
inline std::uint64_t window_kv(const model_cost& m, kv_format f, std::uint64_t window) {
  for (std::size_t i = 0; i < m.n_windows && i < max_kv_windows; ++i) {
    if (m.windows[i].window == window) return m.windows[i].bytes_per_token[static_cast<std::size_t>(f)];
  }
  return 0;
}
// All windowed terms' bytes per token.
inline std::uint64_t windowed_kv(const model_cost& m, kv_format f) {
  std::uint64_t b = 0;
  for (std::size_t i = 0; i < m.n_windows && i < max_kv_windows; ++i) b += m.windows[i].bytes_per_token[static_cast<std::size_t>(f)];
  return b;
}

// write_model_json -> read_model_json gives the same costs, name and source (both layouts).
inline void check_json_round_trip(const model_files::model_description& d) {
  for (const int indent : {2, -1}) {
    const std::string text = model_files::write_model_json(d, indent);
    const auto back = model_files::read_model_json(text);
    REQUIRE_MESSAGE(back.value.has_value(), back.error);
    CHECK(back.value->cost == d.cost);
    CHECK(back.value->name == d.name);
    CHECK(back.value->source == d.source);
    CHECK(back.value->shape.has_value() == d.shape.has_value());
    if (d.shape && back.value->shape) {
      CHECK(back.value->shape->n_groups == d.shape->n_groups);
      for (std::size_t i = 0; i < d.shape->n_groups && i < max_layer_groups; ++i) {
        layer_group want = d.shape->groups[i];
        if (want.kind != layer_kind::recurrent && !want.k_only && want.value_dim == 0) want.value_dim = want.key_dim;
        if (want.k_only) want.value_dim = back.value->shape->groups[i].value_dim;  // not written for a K-only group
        CHECK(back.value->shape->groups[i] == want);
      }
      CHECK(back.value->engine == d.engine);
      // Re-derived with the rule written beside it, the shape gives the costs again.
      if (d.cost == from_shape(*d.shape, d.engine)) CHECK(from_shape(*back.value->shape, back.value->engine) == back.value->cost);
    }
    // Written again, the text is the same: the format is a fixed point.
    CHECK(model_files::write_model_json(*back.value, indent) == text);
  }
}

}  // namespace pnmem::test
