// fuzz_model_json: model_files::read_model_json and write_model_json over any bytes (pnmem's model
// description, model_json.hpp).
//
// Properties:
//   - an error XOR a value; an error is a non-empty message; reading twice gives the same answer;
//   - a value's cost is validate()-clean, with 1 to 8 increasing anchors or coefficients;
//   - a value agrees with a reference reading of the JSON (nlohmann's DOM): format "pnmem-model",
//     version 1 or 2, the name and source given, a shape exactly when one is given, and
//     kv_bytes_per_token as one unsigned integer means that figure for every format's full-attention
//     layers and no window;
//   - whitespace appended changes nothing;
//   - a value written (write_model_json, indented and on one line) reads back equal to itself (cost,
//     name, source, the engine rule with the shape, and the shape but for what the format does not
//     carry: value_dim 0 written as key_dim, the fields a group's kind does not use, the formats the
//     costs carry, the activation's fixed bytes), and the text written is a fixed point: written again
//     after reading, it is the same text.
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz_support.hpp"
#include "model_files_checks.hpp"
#include "pnmem/cost_model.hpp"
#include "pnmem/model_files/model_json.hpp"
#include "pnmem/model_shape.hpp"

using namespace pnmem_fuzz;
namespace mf = pnmem::model_files;
using json = nlohmann::json;

namespace {

void check_reference(std::string_view text, const mf::model_description& d) {
  const json j = json::parse(text.begin(), text.end(), nullptr, false);
  FUZZ_CHECK(j.is_object());
  FUZZ_CHECK(j.at("format") == "pnmem-model");
  FUZZ_CHECK(j.at("version").is_number_unsigned());
  const std::uint64_t version = j.at("version").get<std::uint64_t>();
  FUZZ_CHECK(version == 1 || version == 2);
  FUZZ_CHECK(d.name == (j.contains("name") ? j.at("name").get<std::string>() : std::string()));
  FUZZ_CHECK(d.source == (j.contains("source") ? j.at("source").get<std::string>() : std::string()));
  FUZZ_CHECK(d.shape.has_value() == j.contains("shape"));
  const json& kv = j.at("kv_bytes_per_token");
  if (kv.is_number_unsigned()) {
    for (const std::uint64_t b : d.cost.full_kv_bytes_per_token) FUZZ_CHECK(b == kv.get<std::uint64_t>());
    FUZZ_CHECK(d.cost.n_windows == 0);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const exact_text text(as_text(data, size));
  const auto r = mf::read_model_json(text.view());
  FUZZ_CHECK(r.value.has_value() != !r.error.empty());
  FUZZ_CHECK(same_read(r, mf::read_model_json(text.view())));
  if (!r) return 0;

  const mf::model_description& d = *r.value;
  FUZZ_CHECK(pnmem::validate(d.cost).empty());
  const pnmem::activation_model& a = d.cost.activation;
  FUZZ_CHECK(a.n_anchors <= pnmem::max_activation_anchors);
  check_reference(text.view(), d);
  FUZZ_CHECK(same_read(r, mf::read_model_json(std::string(text.view()) + "\r\n ")));

  for (const int indent : {2, -1}) {
    const std::string written = mf::write_model_json(d, indent);
    const auto back = mf::read_model_json(written);
    FUZZ_CHECK(back.value.has_value());
    const mf::model_description& e = *back.value;
    FUZZ_CHECK(e.cost == d.cost);
    FUZZ_CHECK(e.name == d.name && e.source == d.source);
    FUZZ_CHECK(e.shape.has_value() == d.shape.has_value());
    if (d.shape) {
      pnmem::model_shape want = *d.shape;
      for (std::size_t i = 0; i < want.n_groups; ++i) {
        pnmem::layer_group& g = want.groups[i];
        if (g.kind == pnmem::layer_kind::recurrent) {
          g.kv_heads = g.key_dim = g.value_dim = g.span = 0;
          g.k_only = false;
        } else {
          g.conv_state_values = g.ssm_state_values = 0;
          if (g.k_only) g.value_dim = 0;
          else if (g.value_dim == 0) g.value_dim = g.key_dim;
          if (g.kind == pnmem::layer_kind::full) g.span = 0;
        }
      }
      FUZZ_CHECK(*e.shape == want);
      FUZZ_CHECK(e.engine == d.engine);
    }
    FUZZ_CHECK(mf::write_model_json(e, indent) == written);
  }
  return 0;
}
