// fuzz_hf_config: model_files::read_hf_config over any bytes (a Hugging Face config.json).
//
// Properties:
//   - an error XOR a value; an error is a non-empty message; reading twice gives the same answer;
//   - a value has a shape and its cost is exactly from_shape(shape), validate()-clean; the shape keeps
//     the documented invariants: 1 to 2^20 KV layers, sliding layers at most those and present exactly
//     when a window is, KV heads >= 1 dividing the query heads, K dim = V dim >= 1, compact format q4_0,
//     normal format one of f16/bf16/fp32/fp8, source "hf-config";
//   - a value agrees with a reference reading of the config (nlohmann's DOM, written apart from the
//     reader): the level read (text_config when the top has no num_hidden_layers), its query and KV heads,
//     head_dim or hidden_size / heads, KV layers at most num_hidden_layers;
//   - whitespace appended changes nothing;
//   - write_model_json of a value reads back (read_model_json) with the same cost, name and source.
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz_support.hpp"
#include "model_files_checks.hpp"
#include "pnmem/cost_model.hpp"
#include "pnmem/model_files/hf_config.hpp"
#include "pnmem/model_files/model_json.hpp"

using namespace pnmem_fuzz;
namespace mf = pnmem::model_files;
using json = nlohmann::json;

namespace {

// The reference: which object holds the shape, and its integers.
void check_reference(std::string_view text, const mf::model_description& d) {
  const json root = json::parse(text.begin(), text.end(), nullptr, false);
  FUZZ_CHECK(root.is_object());
  const json* l = &root;
  if (!root.contains("num_hidden_layers") || root.at("num_hidden_layers").is_null()) l = &root.at("text_config");
  FUZZ_CHECK(l->is_object());
  const auto u = [&](const char* k) -> std::uint64_t {
    const json& v = l->at(k);
    FUZZ_CHECK(v.is_number_unsigned());
    return v.get<std::uint64_t>();
  };
  const auto has = [&](const char* k) { return l->contains(k) && !l->at(k).is_null(); };
  const pnmem::model_shape& s = *d.shape;
  FUZZ_CHECK(s.layers <= u("num_hidden_layers"));
  FUZZ_CHECK(s.query_heads == u("num_attention_heads"));
  FUZZ_CHECK(s.hidden_size == u("hidden_size"));
  FUZZ_CHECK(s.kv_heads == (has("num_key_value_heads") ? u("num_key_value_heads") : u("num_attention_heads")));
  FUZZ_CHECK(s.key_dim == (has("head_dim") ? u("head_dim") : u("hidden_size") / u("num_attention_heads")));
  if (!has("sliding_window") || u("sliding_window") == 0) FUZZ_CHECK(s.sliding_layers == 0);
  if (s.sliding_layers != 0) FUZZ_CHECK(s.sliding_window == u("sliding_window"));
  if (!has("layer_types")) FUZZ_CHECK(s.layers == u("num_hidden_layers"));
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
  const pnmem::model_shape& s = *d.shape;
  FUZZ_CHECK(s.kv_heads >= 1 && s.query_heads % s.kv_heads == 0);
  FUZZ_CHECK(s.key_dim >= 1 && s.value_dim == s.key_dim);
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
