// tests/model_files/model_files_support.hpp - what the model-files tests share: the fixture directory,
// per-format KV lookups, and the round trip through pnmem's JSON description.
#pragma once

#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "pnmem/cost_model.hpp"
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
inline std::uint64_t sliding_kv(const model_cost& m, kv_format f) {
  return m.sliding_kv_bytes_per_token[static_cast<std::size_t>(f)];
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
      CHECK(back.value->shape->layers == d.shape->layers);
      CHECK(back.value->shape->sliding_layers == d.shape->sliding_layers);
      CHECK(back.value->shape->kv_heads == d.shape->kv_heads);
      CHECK(back.value->shape->key_dim == d.shape->key_dim);
    }
    // Written again, the text is the same: the format is a fixed point.
    CHECK(model_files::write_model_json(*back.value, indent) == text);
  }
}

}  // namespace pnmem::test
