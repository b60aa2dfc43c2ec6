// read_model_json / write_model_json: the documented format's errors and round trips.
#include "pnmem/model_files/model_json.hpp"

#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "model_files_support.hpp"

using namespace pnmem;
using namespace pnmem::model_files;
using json = nlohmann::json;

namespace {

// A valid description to break one key at a time.
json base() {
  return json{{"format", "pnmem-model"},
              {"version", 1},
              {"name", "tiny"},
              {"kv_bytes_per_token", 4096},
              {"activation", {{"anchors", {{0, 1024}, {1024, "1MiB"}}}}}};
}

std::string read_error(const json& j) {
  const auto r = read_model_json(j.dump());
  CHECK_FALSE(r.value.has_value());
  CHECK_FALSE(r.error.empty());
  return r.error;
}

}  // namespace

TEST_CASE("a minimal description reads: one number for every format, units in strings") {
  const auto r = read_model_json(base().dump());
  REQUIRE_MESSAGE(r.value.has_value(), r.error);
  const model_cost& m = r.value->cost;
  for (const kv_format f : all_kv_formats) {
    CHECK(m.full_kv_bytes_per_token[static_cast<std::size_t>(f)] == 4096);
    CHECK(m.sliding_kv_bytes_per_token[static_cast<std::size_t>(f)] == 0);
  }
  CHECK(m.activation.n_anchors == 2);
  CHECK(m.activation.anchors[1].peak_bytes == MiB);
  CHECK(m.normal_kv == kv_format::fp32);  // the documented defaults
  CHECK(m.compact_kv == kv_format::q4);
  CHECK(r.value->name == "tiny");
  CHECK_FALSE(r.value->shape.has_value());
  pnmem::test::check_json_round_trip(*r.value);
}

TEST_CASE("errors name the key") {
  CHECK(read_model_json("{").error.rfind("not JSON", 0) == 0);

  json j = base();
  j["colour"] = 1;
  CHECK(read_error(j) == "colour: unknown key");

  j = base();
  j["activation"]["anchor"] = 1;
  CHECK(read_error(j) == "activation.anchor: unknown key");

  j = base();
  j.erase("format");
  CHECK(read_error(j).rfind("format: expected \"pnmem-model\"", 0) == 0);
  j["format"] = "pnmem-modle";
  CHECK(read_error(j).rfind("format: expected \"pnmem-model\"", 0) == 0);

  j = base();
  j["version"] = 2;
  CHECK(read_error(j) == "version: 2 is not known to this pnmem (it reads version 1)");
  j["version"] = "1";
  CHECK(read_error(j) == "version: missing or not an integer");
  j.erase("version");
  CHECK(read_error(j) == "version: missing or not an integer");

  j = base();
  j["activation"]["anchors"] = {{1024, 1}, {0, 2}};
  CHECK(read_error(j) == "activation.anchors[1]: tokens must increase (0 after 1024)");
  j["activation"]["anchors"] = {{0, 1}, {0, 2}};
  CHECK(read_error(j) == "activation.anchors[1]: tokens must increase (0 after 0)");
  j["activation"]["anchors"] = {{0, 2}, {10, 1}};
  CHECK(read_error(j) == "activation.anchors[1]: peaks must not decrease (1 after 2)");
  j["activation"]["anchors"] = json::array();
  CHECK(read_error(j) == "activation.anchors: expected 1 to 8 [tokens, peak bytes] pairs");
  j["activation"]["anchors"] = {{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}, {6, 1}, {7, 1}, {8, 1}};
  CHECK(read_error(j) == "activation.anchors: expected 1 to 8 [tokens, peak bytes] pairs");
  j["activation"]["anchors"] = {{0, 1, 2}};
  CHECK(read_error(j).rfind("activation.anchors[0]: expected [tokens, peak bytes]", 0) == 0);
  j["activation"] = {{"anchors", {{0, 1}}}, {"fixed_bytes", 1}};
  CHECK(read_error(j) == "activation: an anchor table or coefficients, not both");
  j["activation"] = json::object();
  CHECK(read_error(j).rfind("activation: give \"anchors\" or the coefficients", 0) == 0);
  j.erase("activation");
  CHECK(read_error(j) == "activation: missing");

  j = base();
  j["kv_bytes_per_token"] = -1;
  CHECK(read_error(j) == "kv_bytes_per_token: negative (-1)");
  j["kv_bytes_per_token"] = 1.5;
  CHECK(read_error(j) == "kv_bytes_per_token: not a whole number of bytes (1.5)");
  j["kv_bytes_per_token"] = "12 parsecs";
  CHECK(read_error(j).rfind("kv_bytes_per_token: \"12 parsecs\": ", 0) == 0);
  j.erase("kv_bytes_per_token");
  CHECK(read_error(j) == "kv_bytes_per_token: missing");

  j = base();
  j["state_bytes_per_seq"] = -5;
  CHECK(read_error(j) == "state_bytes_per_seq: negative (-5)");
  j = base();
  j["activation"] = {{"per_token_bytes", -3}};
  CHECK(read_error(j) == "activation.per_token_bytes: negative (-3)");
  j = base();
  j["activation"]["anchors"] = {{-1, 5}};
  CHECK(read_error(j) == "activation.anchors[0][0]: negative (-1)");

  j = base();
  j["kv_bytes_per_token"] = {{"full", {{"q4", 1}, {"fp32", 1}, {"f16", 1}, {"bf16", 1}, {"fp8", 1}, {"q8_0", 1}}}};
  CHECK(read_error(j) == "kv_bytes_per_token.full.q4_0: missing (a per-format table lists all seven formats)");
  j["kv_bytes_per_token"] = {{"sliding", 1}};
  CHECK(read_error(j) == "kv_bytes_per_token.full: missing");

  j = base();
  j["normal_kv"] = "int3";
  CHECK(read_error(j).rfind("normal_kv: expected a KV format", 0) == 0);
  j = base();
  j["shape"] = {{"layers", -1}};
  CHECK(read_error(j).rfind("shape.layers: expected an integer from 0 to 4294967295", 0) == 0);
  j = base();
  j["name"] = 7;
  CHECK(read_error(j) == "name: expected a string");
}

TEST_CASE("round trips: the seed's model, a preallocating engine's, coefficients, every format apart") {
  model_description seed;
  seed.cost = seed_model_cost;
  seed.shape = seed_model_shape;
  seed.name = "seed";
  pnmem::test::check_json_round_trip(seed);

  model_description pre;
  pre.cost = preallocated_model_cost;
  pnmem::test::check_json_round_trip(pre);

  model_description odd;
  odd.cost.activation = activation_coefficients(1, 2, 3);
  for (const kv_format f : all_kv_formats) {
    odd.cost.full_kv_bytes_per_token[static_cast<std::size_t>(f)] = 1000 + static_cast<std::uint64_t>(f);
    odd.cost.sliding_kv_bytes_per_token[static_cast<std::size_t>(f)] = 2000 + static_cast<std::uint64_t>(f);
  }
  odd.cost.sliding_window = 4096;
  odd.cost.state_bytes_per_seq = 1ULL << 63;
  odd.cost.normal_kv = kv_format::q8_0;
  odd.cost.compact_kv = kv_format::fp8;
  odd.source = "flags";
  pnmem::test::check_json_round_trip(odd);
}

TEST_CASE("regression: a name that is not UTF-8 (any bytes, as GGUF's general.name) is written, not thrown") {
  model_description d;
  d.cost = seed_model_cost;
  d.name = "bad \xff\xfe name";
  std::string text;
  CHECK_NOTHROW(text = write_model_json(d));
  const auto back = read_model_json(text);
  REQUIRE_MESSAGE(back.value.has_value(), back.error);
  CHECK(back.value->cost == d.cost);
  CHECK(back.value->name == "bad \xef\xbf\xbd\xef\xbf\xbd name");  // U+FFFD for each bad byte
}

TEST_CASE("regression: a value nested a million deep is refused by its kind, not dumped (stack overflow)") {
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  json j = base();
  const std::string text = j.dump();
  const std::string with_deep = text.substr(0, text.size() - 1) + R"(, "normal_kv": )" + deep + "}";
  const auto r = read_model_json(with_deep);
  REQUIRE_FALSE(r.value.has_value());
  CHECK(r.error == "normal_kv: expected a KV format (q4, fp32, f16, bf16, fp8, q8_0, q4_0), got an array of 1");
  j["activation"]["anchors"] = {{0, 1}, {{"tokens", 5}}};
  CHECK(read_error(j) == "activation.anchors[1]: expected [tokens, peak bytes], got an object of 1 keys");
  j = base();
  j["compact_kv"] = std::string(100, 'x');
  CHECK(read_error(j).ends_with("got a string of 100 bytes"));
}
