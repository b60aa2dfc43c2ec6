// fuzz_gguf: model_files::read_gguf / read_gguf_model over any bytes (a GGUF file's first bytes).
//
// Properties:
//   - an error XOR a value; an error is a non-empty message; read_gguf and read_gguf_model agree;
//   - input shorter than the 24-byte header, or not starting with "GGUF", is an error (naming the
//     truncation or the magic);
//   - a value: version 2 or 3; metadata_bytes within the input, at least 24 and at most 64 MiB; its
//     cost is exactly from_shape(shape, engine), validate()-clean; the groups keep the documented
//     invariants (model_files_checks.hpp; the query heads at least every attention group's KV heads,
//     both state formats fp32: llama.cpp's recurrent cache), f16 normal / q4_0 compact, source "gguf";
//   - the reader stops at the end of the metadata: exactly the first metadata_bytes read the same, any
//     bytes appended read the same, and one byte fewer is "truncated at byte <metadata_bytes - 1>";
//   - write_model_json of a value reads back (read_model_json) with the same cost.
#include <cstring>
#include <string>

#include "fuzz_support.hpp"
#include "model_files_checks.hpp"
#include "pnmem/cost_model.hpp"
#include "pnmem/model_files/gguf.hpp"
#include "pnmem/model_files/model_json.hpp"
#include "pnmem/model_shape.hpp"

using namespace pnmem_fuzz;
namespace mf = pnmem::model_files;

namespace {

bool same(const mf::read_result<mf::gguf_model>& a, const mf::read_result<mf::gguf_model>& b) {
  if (a.value.has_value() != b.value.has_value()) return false;
  if (!a.value) return a.error == b.error;
  const mf::gguf_summary& x = a.value->summary;
  const mf::gguf_summary& y = b.value->summary;
  return same_description(a.value->description, b.value->description) && x.version == y.version &&
         x.tensor_count == y.tensor_count && x.metadata_kv_count == y.metadata_kv_count &&
         x.metadata_bytes == y.metadata_bytes && x.architecture == y.architecture && x.context_length == y.context_length;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const exact_text bytes(as_text(data, size));
  const std::string_view b = bytes.view();
  const auto r = mf::read_gguf_model(b);
  FUZZ_CHECK(r.value.has_value() != !r.error.empty());
  const auto plain = mf::read_gguf(b);
  FUZZ_CHECK(plain.value.has_value() == r.value.has_value());
  if (!r) {
    FUZZ_CHECK(plain.error == r.error);
    if (b.size() < 4) FUZZ_CHECK(contains(r.error, "truncated at byte " + std::to_string(b.size()) + " while reading the magic"));
    if (b.size() >= 4 && std::memcmp(b.data(), "GGUF", 4) != 0) FUZZ_CHECK(contains(r.error, "magic"));
    return 0;
  }
  FUZZ_CHECK(b.size() >= 24 && std::memcmp(b.data(), "GGUF", 4) == 0);
  FUZZ_CHECK(plain.value->cost == r.value->description.cost);

  const mf::gguf_summary& sum = r.value->summary;
  const mf::model_description& d = r.value->description;
  FUZZ_CHECK(sum.version == 2 || sum.version == 3);
  FUZZ_CHECK(sum.metadata_bytes >= 24 && sum.metadata_bytes <= b.size() && sum.metadata_bytes <= mf::gguf_max_metadata_bytes);
  FUZZ_CHECK(sum.metadata_kv_count <= mf::gguf_max_kv_count && sum.tensor_count <= mf::gguf_max_tensor_count);
  FUZZ_CHECK(!sum.architecture.empty());
  check_derived_from_shape(d);
  const pnmem::model_shape& s = *d.shape;
  for (std::size_t i = 0; i < s.n_groups; ++i) {
    const pnmem::layer_group& g = s.groups[i];
    if (g.kind != pnmem::layer_kind::recurrent) FUZZ_CHECK(s.query_heads >= g.kv_heads);
  }
  FUZZ_CHECK(s.state_format == pnmem::kv_format::fp32 && s.ssm_state_format == pnmem::kv_format::fp32);
  FUZZ_CHECK(d.cost.normal_kv == pnmem::kv_format::f16 && d.cost.compact_kv == pnmem::kv_format::q4_0);
  FUZZ_CHECK(d.source == "gguf");
  FUZZ_CHECK(!d.name.empty());

  // Exactly the metadata, in a buffer of exactly its size: the same answer.
  const auto meta_len = static_cast<std::size_t>(sum.metadata_bytes);
  const exact_text meta(b.substr(0, meta_len));
  FUZZ_CHECK(same(r, mf::read_gguf_model(meta.view())));
  // One byte fewer: truncated, at that byte.
  const exact_text cut(b.substr(0, meta_len - 1));
  const auto short_read = mf::read_gguf_model(cut.view());
  FUZZ_CHECK(!short_read.value.has_value());
  FUZZ_CHECK(contains(short_read.error, "truncated at byte " + std::to_string(meta_len - 1) + " while reading "));
  // Anything after the metadata is never looked at.
  FUZZ_CHECK(same(r, mf::read_gguf_model(std::string(b) + "\xff\x00GGUF" + std::string(16, '\x09'))));

  const auto back = mf::read_model_json(mf::write_model_json(d));
  FUZZ_CHECK(back.value.has_value());
  FUZZ_CHECK(back.value->cost == d.cost);
  return 0;
}
