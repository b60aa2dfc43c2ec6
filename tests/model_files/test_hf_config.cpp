// read_hf_config on the fixture configs of public models (tests/fixtures/models) and on broken ones.
//
// Every KV figure is written out by hand from the model's shape: per token, each KV layer adds a K and a
// V row of kv_heads x head_dim values; f16/bf16 2 B a value, fp32 4, fp8 1, q8_0 34 B and q4_0 18 B per
// block of 32 values (rows rounded up to blocks), the seed's q4 ceil(values x 5898 / 10240).
#include "pnmem/model_files/hf_config.hpp"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "model_files_support.hpp"
#include "pnmem/model_files/model_json.hpp"

using namespace pnmem;
using namespace pnmem::model_files;
using pnmem::test::full_kv;
using pnmem::test::model_fixture;
using pnmem::test::sliding_kv;
using json = nlohmann::json;

namespace {

model_description read_ok(const std::string& text) {
  const auto r = read_hf_config(text);
  REQUIRE_MESSAGE(r.value.has_value(), r.error);
  CHECK(r.error.empty());
  REQUIRE(r.value->shape.has_value());
  CHECK(r.value->cost == from_shape(*r.value->shape));
  CHECK(validate(r.value->cost).empty());
  CHECK(r.value->source == "hf-config");
  return *r.value;
}

model_description fixture(const std::string& name) { return read_ok(model_fixture(name)); }

// The error for a config, which must not also give a value.
std::string read_error(const std::string& text) {
  const auto r = read_hf_config(text);
  CHECK_FALSE(r.value.has_value());
  CHECK_FALSE(r.error.empty());
  return r.error;
}

json fixture_json(const std::string& name) { return json::parse(model_fixture(name)); }

// A small valid config, for the error cases to break one key at a time.
json small() {
  return json{{"num_hidden_layers", 4}, {"num_attention_heads", 8}, {"num_key_value_heads", 2}, {"hidden_size", 512}};
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("Llama-3-8B: 32 layers x 8 KV heads x 128 dims (derived 4096 / 32), bf16") {
  const model_description d = fixture("llama-3-8b.config.json");
  const model_shape& s = *d.shape;
  CHECK(s.layers == 32);
  CHECK(s.sliding_layers == 0);
  CHECK(s.kv_heads == 8);
  CHECK(s.key_dim == 128);
  CHECK(s.value_dim == 128);
  CHECK(s.query_heads == 32);
  CHECK(s.hidden_size == 4096);
  CHECK(d.name == "LlamaForCausalLM");
  const model_cost& m = d.cost;
  CHECK(m.normal_kv == kv_format::bf16);
  CHECK(m.compact_kv == kv_format::q4_0);
  CHECK(full_kv(m, kv_format::f16) == 2 * 32 * 8 * 128 * 2);  // 131072 = 128 KiB
  CHECK(full_kv(m, kv_format::f16) == 131072);
  CHECK(full_kv(m, kv_format::bf16) == 131072);
  CHECK(full_kv(m, kv_format::fp32) == 262144);
  CHECK(full_kv(m, kv_format::fp8) == 65536);
  CHECK(full_kv(m, kv_format::q8_0) == 32 * 2 * (1024 / 32) * 34);  // 69632
  CHECK(full_kv(m, kv_format::q8_0) == 69632);
  CHECK(full_kv(m, kv_format::q4_0) == 32 * 2 * (1024 / 32) * 18);  // 36864
  CHECK(full_kv(m, kv_format::q4_0) == 36864);
  CHECK(full_kv(m, kv_format::q4) == 37748);  // ceil(65536 x 5898 / 10240) = ceil(37747.2)
  for (const kv_format f : all_kv_formats) CHECK(sliding_kv(m, f) == 0);
  CHECK(m.sliding_window == 0);
  CHECK(kv_bytes(m, kv_format::f16, 8192) == 8192ULL * 131072);  // 1 GiB at the full 8K context
  // The activation peak is the shape's formula: 256 MiB + 4096 x 32 B x N + 32 x 4 B x N^2 at the anchors.
  CHECK(activation_peak_bytes(m.activation, 1024) == 256 * MiB + 4096ULL * 32 * 1024 + 128ULL * 1024 * 1024);
}

TEST_CASE("Qwen2.5-7B: 28 layers x 4 KV heads x 128 dims; its sliding_window is off (use_sliding_window false)") {
  const model_description d = fixture("qwen2.5-7b.config.json");
  CHECK(d.shape->layers == 28);
  CHECK(d.shape->kv_heads == 4);
  CHECK(d.shape->key_dim == 128);  // 3584 / 28
  CHECK(d.shape->query_heads == 28);
  const model_cost& m = d.cost;
  CHECK(full_kv(m, kv_format::f16) == 2 * 28 * 4 * 128 * 2);  // 57344
  CHECK(full_kv(m, kv_format::f16) == 57344);
  CHECK(full_kv(m, kv_format::fp32) == 114688);
  CHECK(full_kv(m, kv_format::q8_0) == 28 * 2 * (512 / 32) * 34);  // 30464
  CHECK(full_kv(m, kv_format::q8_0) == 30464);
  CHECK(full_kv(m, kv_format::q4_0) == 28 * 2 * (512 / 32) * 18);  // 16128
  CHECK(full_kv(m, kv_format::q4_0) == 16128);
  CHECK(sliding_kv(m, kv_format::f16) == 0);
  CHECK(m.sliding_window == 0);  // 131072 is in the file, but use_sliding_window is false
  CHECK(m.normal_kv == kv_format::bf16);

  SUBCASE("use_sliding_window true: layers from max_window_layers on slide") {
    json j = fixture_json("qwen2.5-7b.config.json");
    j["use_sliding_window"] = true;
    j["max_window_layers"] = 20;
    const model_description w = read_ok(j.dump());
    CHECK(w.shape->sliding_layers == 8);
    CHECK(full_kv(w.cost, kv_format::f16) == 20 * 2048);
    CHECK(sliding_kv(w.cost, kv_format::f16) == 8 * 2048);
    CHECK(w.cost.sliding_window == 131072);
    j["max_window_layers"] = 28;  // as published: every layer is below max_window_layers
    CHECK(read_ok(j.dump()).shape->sliding_layers == 0);
    j.erase("max_window_layers");
    CHECK(read_ok(j.dump()).shape->sliding_layers == 28);
  }
}

TEST_CASE("Mistral-7B-v0.1: sliding_window 4096 and no pattern: every layer slides") {
  const model_description d = fixture("mistral-7b-v0.1.config.json");
  CHECK(d.shape->layers == 32);
  CHECK(d.shape->sliding_layers == 32);
  const model_cost& m = d.cost;
  CHECK(full_kv(m, kv_format::f16) == 0);
  CHECK(sliding_kv(m, kv_format::f16) == 2 * 32 * 8 * 128 * 2);  // 131072
  CHECK(sliding_kv(m, kv_format::q4_0) == 36864);
  CHECK(m.sliding_window == 4096);
  // The KV stops growing at the window.
  CHECK(kv_bytes(m, kv_format::f16, 1000) == 1000ULL * 131072);
  CHECK(kv_bytes(m, kv_format::f16, 4096) == 4096ULL * 131072);
  CHECK(kv_bytes(m, kv_format::f16, 32768) == 4096ULL * 131072);
}

TEST_CASE("Gemma-2-9B: 42 layers x 8 KV heads x 256 dims, alternating: 21 slide (4096), float32") {
  const model_description d = fixture("gemma-2-9b.config.json");
  CHECK(d.shape->layers == 42);
  CHECK(d.shape->sliding_layers == 21);
  CHECK(d.shape->key_dim == 256);  // given: 3584 / 16 would be 224
  const model_cost& m = d.cost;
  CHECK(m.normal_kv == kv_format::fp32);
  CHECK(full_kv(m, kv_format::f16) == 21 * 2 * 8 * 256 * 2);  // 172032
  CHECK(full_kv(m, kv_format::f16) == 172032);
  CHECK(sliding_kv(m, kv_format::f16) == 172032);
  CHECK(full_kv(m, kv_format::fp32) == 344064);
  CHECK(full_kv(m, kv_format::q8_0) == 21 * 2 * (2048 / 32) * 34);  // 91392
  CHECK(full_kv(m, kv_format::q4_0) == 21 * 2 * (2048 / 32) * 18);  // 48384
  CHECK(m.sliding_window == 4096);
  CHECK(kv_bytes(m, kv_format::f16, 8192) == 8192ULL * 172032 + 4096ULL * 172032);
}

TEST_CASE("Gemma-3-1B: sliding_window_pattern 6: every 6th of 26 layers is full (4), 22 slide (512)") {
  const model_description d = fixture("gemma-3-1b-it.config.json");
  CHECK(d.shape->layers == 26);
  CHECK(d.shape->sliding_layers == 22);
  CHECK(d.shape->kv_heads == 1);
  CHECK(d.shape->key_dim == 256);
  const model_cost& m = d.cost;
  CHECK(full_kv(m, kv_format::bf16) == 4 * 2 * 1 * 256 * 2);  // 4096
  CHECK(full_kv(m, kv_format::bf16) == 4096);
  CHECK(sliding_kv(m, kv_format::bf16) == 22 * 2 * 1 * 256 * 2);  // 22528
  CHECK(sliding_kv(m, kv_format::bf16) == 22528);
  CHECK(full_kv(m, kv_format::q4_0) == 4 * 2 * (256 / 32) * 18);  // 1152
  CHECK(m.sliding_window == 512);
  CHECK(m.normal_kv == kv_format::bf16);
  CHECK(d.name == "Gemma3ForCausalLM");

  SUBCASE("the pattern key decides: 4 -> 26 - 6 = 20 slide; without it Gemma 3's default 6") {
    json j = fixture_json("gemma-3-1b-it.config.json");
    j["sliding_window_pattern"] = 4;
    CHECK(read_ok(j.dump()).shape->sliding_layers == 20);
    j.erase("sliding_window_pattern");
    CHECK(read_ok(j.dump()).shape->sliding_layers == 22);
    j["model_type"] = "llama";  // no Gemma left: Mistral style, all slide
    j["architectures"] = json::array({"LlamaForCausalLM"});
    CHECK(read_ok(j.dump()).shape->sliding_layers == 26);
  }
}

TEST_CASE("Gemma-3-27B (multimodal): the costs are read from text_config; default pattern 6") {
  const model_description d = fixture("gemma-3-27b-it.config.json");
  CHECK(d.shape->layers == 62);
  CHECK(d.shape->sliding_layers == 52);  // 62 - 62 / 6
  CHECK(d.shape->kv_heads == 16);
  CHECK(d.shape->key_dim == 128);
  CHECK(d.shape->query_heads == 32);
  CHECK(d.shape->hidden_size == 5376);
  const model_cost& m = d.cost;
  CHECK(full_kv(m, kv_format::f16) == 10 * 2 * 16 * 128 * 2);  // 81920
  CHECK(sliding_kv(m, kv_format::f16) == 52 * 2 * 16 * 128 * 2);  // 425984
  CHECK(m.sliding_window == 1024);
  CHECK(m.normal_kv == kv_format::bf16);  // torch_dtype at the top level
  CHECK(d.name == "Gemma3ForConditionalGeneration");
}

TEST_CASE("gpt-oss-20b: layer_types alternate sliding (128) and full; head_dim 64 is not 2880 / 64") {
  const model_description d = fixture("gpt-oss-20b.config.json");
  CHECK(d.shape->layers == 24);
  CHECK(d.shape->sliding_layers == 12);
  CHECK(d.shape->key_dim == 64);
  CHECK(d.shape->query_heads == 64);
  const model_cost& m = d.cost;
  CHECK(full_kv(m, kv_format::f16) == 12 * 2 * 8 * 64 * 2);  // 24576
  CHECK(sliding_kv(m, kv_format::f16) == 24576);
  CHECK(full_kv(m, kv_format::q8_0) == 12 * 2 * (512 / 32) * 34);  // 13056
  CHECK(m.sliding_window == 128);
  CHECK(m.normal_kv == kv_format::f16);  // no dtype key in the file: f16
}

TEST_CASE("layer_types: linear attention and Mamba layers keep no KV; without a window nothing slides") {
  json j = small();
  j["layer_types"] = {"linear_attention", "linear_attention", "linear_attention", "full_attention"};
  model_description d = read_ok(j.dump());
  CHECK(d.shape->layers == 1);
  CHECK(full_kv(d.cost, kv_format::f16) == 1 * 2 * 2 * 64 * 2);
  j["layer_types"] = {"mamba", "sliding_attention", "mamba", "full_attention"};
  d = read_ok(j.dump());
  CHECK(d.shape->layers == 2);
  CHECK(d.shape->sliding_layers == 0);  // no sliding_window: the sliding layer costs as a full one
  j["sliding_window"] = 256;
  d = read_ok(j.dump());
  CHECK(d.shape->sliding_layers == 1);
  CHECK(d.cost.sliding_window == 256);
  j["sliding_window"] = nullptr;
  CHECK(read_ok(j.dump()).shape->sliding_layers == 0);
}

TEST_CASE("dtype keys: dtype wins over torch_dtype; float16, float32, absent") {
  json j = small();
  CHECK(read_ok(j.dump()).cost.normal_kv == kv_format::f16);
  j["torch_dtype"] = "float32";
  CHECK(read_ok(j.dump()).cost.normal_kv == kv_format::fp32);
  j["dtype"] = "float16";
  CHECK(read_ok(j.dump()).cost.normal_kv == kv_format::f16);
  j["dtype"] = "bfloat16";
  CHECK(read_ok(j.dump()).cost.normal_kv == kv_format::bf16);
  j["dtype"] = "int4";
  CHECK(contains(read_error(j.dump()), "dtype: \"int4\" is not a dtype"));
}

TEST_CASE("names, head_dim null, num_key_value_heads absent") {
  json j = small();
  j["_name_or_path"] = "meta-llama/Meta-Llama-3-8B";
  j["architectures"] = {"LlamaForCausalLM"};
  j["head_dim"] = nullptr;
  j.erase("num_key_value_heads");
  const model_description d = read_ok(j.dump());
  CHECK(d.name == "meta-llama/Meta-Llama-3-8B");
  CHECK(d.shape->key_dim == 64);   // 512 / 8
  CHECK(d.shape->kv_heads == 8);   // = num_attention_heads
}

TEST_CASE("bad configs: an error naming the key, never a value") {
  CHECK(contains(read_error("{"), "not JSON"));
  CHECK(contains(read_error(""), "not JSON"));
  CHECK(contains(read_error("[1, 2]"), "expected a JSON object"));
  CHECK(contains(read_error("{}"), "num_hidden_layers: missing"));

  auto broken = [](const char* key, const json& v) {
    json j = small();
    if (v.is_discarded()) {
      j.erase(key);
    } else {
      j[key] = v;
    }
    return read_error(j.dump());
  };
  const json erase(json::value_t::discarded);
  CHECK(contains(broken("num_hidden_layers", erase), "num_hidden_layers: missing"));
  CHECK(contains(broken("num_hidden_layers", 0), "num_hidden_layers: 0 is out of range"));
  CHECK(contains(broken("num_hidden_layers", (1 << 20) + 1), "num_hidden_layers: 1048577 is out of range"));
  CHECK(contains(broken("num_hidden_layers", -4), "num_hidden_layers: negative"));
  CHECK(contains(broken("num_hidden_layers", 4.5), "num_hidden_layers: expected an integer"));
  CHECK(contains(broken("num_hidden_layers", "4"), "num_hidden_layers: expected an integer, got string"));
  CHECK(contains(broken("num_attention_heads", 0), "num_attention_heads: 0 is out of range"));
  CHECK(contains(broken("num_attention_heads", erase), "num_attention_heads: missing"));
  CHECK(contains(broken("num_key_value_heads", 0), "num_key_value_heads: 0 is out of range"));
  CHECK(contains(broken("num_key_value_heads", -2), "num_key_value_heads: negative"));
  CHECK(contains(broken("num_key_value_heads", 3), "num_key_value_heads: 3 does not divide num_attention_heads (8)"));
  CHECK(contains(broken("hidden_size", erase), "hidden_size: missing"));
  CHECK(contains(broken("hidden_size", 500), "head_dim: missing, and hidden_size (500) is not a multiple"));
  CHECK(contains(broken("head_dim", 0), "head_dim: 0 is out of range"));
  CHECK(contains(broken("sliding_window", -1), "sliding_window: negative"));
  CHECK(contains(broken("sliding_window", 1ULL << 32), "sliding_window: 4294967296 is out of range"));

  json j = small();
  j["sliding_window"] = 128;
  j["sliding_window_pattern"] = 0;
  CHECK(contains(read_error(j.dump()), "sliding_window_pattern: 0 is out of range"));
  j.erase("sliding_window_pattern");
  j["use_sliding_window"] = "yes";
  CHECK(contains(read_error(j.dump()), "use_sliding_window: expected true or false"));
  j.erase("use_sliding_window");
  j["layer_types"] = {"full_attention", "full_attention"};
  CHECK(contains(read_error(j.dump()), "layer_types: 2 entries for 4 layers"));
  j["layer_types"] = {"mamba", "mamba", "linear_attention", "mamba"};
  CHECK(contains(read_error(j.dump()), "layer_types: no attention layer"));
  j["layer_types"] = {"full_attention", 7, "full_attention", "full_attention"};
  CHECK(contains(read_error(j.dump()), "layer_types[1]: expected a string"));

  // In text_config, the key is named with its prefix.
  json mm = {{"architectures", {"LlavaForConditionalGeneration"}}, {"text_config", small()}};
  CHECK(read_hf_config(mm.dump()).value.has_value());
  mm["text_config"].erase("num_attention_heads");
  CHECK(contains(read_error(mm.dump()), "text_config.num_attention_heads: missing"));
  mm["text_config"] = 3;
  CHECK(contains(read_error(mm.dump()), "text_config: expected an object"));
}

TEST_CASE("round trip: read_hf_config -> write_model_json -> read_model_json gives the same model_cost") {
  for (const char* name : {"llama-3-8b.config.json", "qwen2.5-7b.config.json", "mistral-7b-v0.1.config.json",
                           "gemma-2-9b.config.json", "gemma-3-1b-it.config.json", "gemma-3-27b-it.config.json",
                           "gpt-oss-20b.config.json"}) {
    CAPTURE(name);
    pnmem::test::check_json_round_trip(fixture(name));
  }
}

TEST_CASE("keys pnmem does not read are ignored, however deep") {
  json j = small();
  const std::string text = j.dump();
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  const model_description d = read_ok(text.substr(0, text.size() - 1) + R"(, "vision_config": )" + deep + "}");
  CHECK(d.shape->layers == 4);
}
