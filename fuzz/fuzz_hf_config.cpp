// fuzz_hf_config: model_files::read_hf_config over any bytes (a Hugging Face config.json).
//
// Properties:
//   - an error XOR a value; an error is a non-empty message; reading twice gives the same answer;
//   - a value has layer groups and its cost is exactly from_shape(shape, engine), validate()-clean; the
//     groups keep the documented invariants (model_files_checks.hpp), an attention group's K and V dims
//     are equal unless it is K-only (MLA) or the config gives V its own width (MiMo), side bytes only
//     with an indexer (index_head_dim), compact format q4_0, normal format one of f16/bf16/fp32/fp8,
//     source "hf-config";
//   - a value agrees with a reference reading of the config (nlohmann's DOM, written apart from the
//     reader, the non-finite literals first made null): the level read (text_config when the top has no
//     num_hidden_layers and has one), its layer count (only a Gemma 3 config may leave it out, for its
//     default 26), its query heads and hidden size where given, each group's layers and the attention
//     and recurrent groups' totals at most that layer count;
//   - the same config under the vLLM and llama.cpp rules reads (or fails) alike, and costs at least
//     what the exact rule does at 1k and 128k tokens (the engines keep more, never less);
//   - read with the rule's mtp, a value is refused with a reason or costs more KV a token (its MTP layers);
//   - whitespace appended changes nothing;
//   - write_model_json of a value reads back (read_model_json) with the same cost, name and source.
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz_support.hpp"
#include "model_files_checks.hpp"
#include "pnmem/cost_model.hpp"
#include "pnmem/model_files/hf_config.hpp"
#include "pnmem/model_shape.hpp"
#include "pnmem/model_files/model_json.hpp"

using namespace pnmem_fuzz;
namespace mf = pnmem::model_files;
using json = nlohmann::json;

namespace {

// Python's non-finite literals as null, for the reference's parser (outside strings only).
std::string without_nonfinite(std::string_view text) {
  std::string out;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) out += text[++i];
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    bool replaced = false;
    for (const std::string_view w : {std::string_view("-Infinity"), std::string_view("Infinity"), std::string_view("NaN")}) {
      if (text.compare(i, w.size(), w) == 0) {
        out += "null";
        i += w.size() - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += c;
  }
  return out;
}

// The reference: which object holds the groups, and its integers.
void check_reference(std::string_view text, const mf::model_description& d) {
  const std::string strict = without_nonfinite(text);
  const json root = json::parse(strict, nullptr, false);
  if (root.is_discarded()) return;  // a literal the rewrite above cut differently: nothing to compare
  FUZZ_CHECK(root.is_object());
  const json* l = &root;
  const bool top_has_layers = root.contains("num_hidden_layers") && !root.at("num_hidden_layers").is_null();
  if (!top_has_layers && root.contains("text_config")) l = &root.at("text_config");
  FUZZ_CHECK(l->is_object());
  const auto has = [&](const char* k) { return l->contains(k) && l->at(k).is_number_unsigned(); };
  const auto u = [&](const char* k) { return l->at(k).get<std::uint64_t>(); };
  const pnmem::model_shape& s = *d.shape;
  // Without num_hidden_layers only a Gemma 3 config reads (Gemma3TextConfig's default: 26 layers).
  if (!has("num_hidden_layers")) FUZZ_CHECK(text.find("emma3") != std::string_view::npos);
  const std::uint64_t layers = has("num_hidden_layers") ? u("num_hidden_layers") : 26;
  if (has("num_attention_heads") && s.query_heads != 0) FUZZ_CHECK(s.query_heads == u("num_attention_heads"));
  if (has("hidden_size")) FUZZ_CHECK(s.hidden_size == u("hidden_size"));
  std::uint64_t attention = 0;
  std::uint64_t recurrent = 0;
  for (std::size_t i = 0; i < s.n_groups; ++i) {
    FUZZ_CHECK(s.groups[i].layers <= layers);
    (s.groups[i].kind == pnmem::layer_kind::recurrent ? recurrent : attention) += s.groups[i].layers;
  }
  FUZZ_CHECK(attention <= layers && recurrent <= layers);
  // V rows are K's width unless the config gives V (or the sliding layers' K) its own (MiMo's v_head_dim,
  // swa_head_dim, swa_v_head_dim); side caches only where the config has an indexer (index_head_dim).
  const bool own_v = l->contains("v_head_dim") || l->contains("swa_v_head_dim") || l->contains("swa_head_dim");
  for (std::size_t i = 0; i < s.n_groups; ++i) {
    const pnmem::layer_group& g = s.groups[i];
    if (g.kind != pnmem::layer_kind::recurrent && !g.k_only && !own_v) FUZZ_CHECK(g.value_dim == g.key_dim);
    if (g.side_bytes != 0) FUZZ_CHECK(l->contains("index_head_dim"));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const exact_text text(as_text(data, size));
  const auto r = mf::read_hf_config(text.view());
  FUZZ_CHECK(r.value.has_value() != !r.error.empty());
  FUZZ_CHECK(same_read(r, mf::read_hf_config(text.view())));
  if (!r) return 0;

  const mf::model_description& d = *r.value;
  check_derived_from_shape(d);
  FUZZ_CHECK(d.engine == pnmem::exact_engine);
  for (const pnmem::kv_engine e : {pnmem::kv_engine::vllm, pnmem::kv_engine::llama_cpp}) {
    pnmem::engine_rule rule;
    rule.engine = e;
    const auto under = mf::read_hf_config(text.view(), rule);
    if (!under) {
      // Only the engines' own refusals differ (none today): the same config reads under each rule.
      FUZZ_CHECK(false);
      continue;
    }
    check_derived_from_shape(*under.value);
    for (const int n : {1024, 131072}) {
      FUZZ_CHECK(pnmem::kv_bytes(under.value->cost, d.cost.normal_kv, static_cast<std::uint64_t>(n)) >=
                 pnmem::kv_bytes(d.cost, d.cost.normal_kv, static_cast<std::uint64_t>(n)));
    }
  }
  {
    // The rule's mtp: refused with a reason, or the model's layers and its MTP layers: more KV a token.
    pnmem::engine_rule mtp;
    mtp.mtp = true;
    const auto with = mf::read_hf_config(text.view(), mtp);
    FUZZ_CHECK(with.value.has_value() != !with.error.empty());
    if (with) {
      check_derived_from_shape(*with.value);
      FUZZ_CHECK(pnmem::kv_bytes_per_token(with.value->cost, d.cost.normal_kv) >
                 pnmem::kv_bytes_per_token(d.cost, d.cost.normal_kv));
    }
  }
  FUZZ_CHECK(d.cost.compact_kv == pnmem::kv_format::q4_0);
  const pnmem::kv_format n = d.cost.normal_kv;
  FUZZ_CHECK(n == pnmem::kv_format::f16 || n == pnmem::kv_format::bf16 || n == pnmem::kv_format::fp32 ||
             n == pnmem::kv_format::fp8);
  FUZZ_CHECK(d.source == "hf-config");
  check_reference(text.view(), d);

  const std::string spaced = std::string(text.view()) + " \n\t";
  FUZZ_CHECK(same_read(r, mf::read_hf_config(spaced)));

  const auto back = mf::read_model_json(mf::write_model_json(d));
  FUZZ_CHECK(back.value.has_value());
  FUZZ_CHECK(back.value->cost == d.cost);
  FUZZ_CHECK(back.value->name == d.name && back.value->source == d.source);
  return 0;
}
