// read_hf_config on the fixture configs of public models (tests/fixtures/models) and on broken ones.
//
// Every KV figure is written out by hand from the model's shape: per token, each KV layer adds a K and a
// V row of kv_heads x head_dim values (MLA: one latent row); f16/bf16 2 B a value, fp32 4, fp8 1, q8_0
// 34 B and q4_0 18 B per block of 32 values (rows rounded up to blocks), the seed's q4
// ceil(values x 5898 / 10240). engine_reference.hpp writes every fixture down by hand and computes what
// vLLM and llama.cpp allocate for it, independently of pnmem.
#include "pnmem/model_files/hf_config.hpp"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "../cli/temp_dir.hpp"
#include "engine_reference.hpp"
#include "model_files_support.hpp"
#include "pnmem/model_files/model_json.hpp"

using namespace pnmem;
using namespace pnmem::model_files;
using pnmem::test::full_kv;
using pnmem::test::model_fixture;
using pnmem::test::window_kv;
using pnmem::test::windowed_kv;
using json = nlohmann::json;

namespace {

model_description read_ok(const std::string& text, const engine_rule& engine = exact_engine) {
  const auto r = read_hf_config(text, engine);
  REQUIRE_MESSAGE(r.value.has_value(), r.error);
  CHECK(r.error.empty());
  REQUIRE(r.value->shape.has_value());
  CHECK(r.value->cost == from_shape(*r.value->shape, engine));
  CHECK(r.value->engine == engine);
  CHECK(validate(r.value->cost).empty());
  CHECK(validate(*r.value->shape).empty());
  CHECK(r.value->source == "hf-config");
  return *r.value;
}

model_description fixture(const std::string& name, const engine_rule& engine = exact_engine) {
  return read_ok(model_fixture(name), engine);
}

// A reference model's config: its fixture file, or the config it carries.
model_description fixture(const pnmem::test::ref_model& ref, const engine_rule& engine = exact_engine) {
  return read_ok(ref.config_text.empty() ? model_fixture(ref.fixture) : ref.config_text, engine);
}

constexpr std::size_t at_format(kv_format f) { return static_cast<std::size_t>(f); }

engine_rule rule(kv_engine e) {
  engine_rule r;
  r.engine = e;
  return r;
}

// KV and state of one sequence of n tokens, bf16 KV, no activation (what `pnmem admit --model M
// --activation-anchors 0:0 --kv bf16` prices).
std::uint64_t kv_and_state(model_cost m, std::uint64_t n) {
  m.activation = activation_coefficients(0, 0, 0);
  return host_cost_bytes(m, static_cast<int>(n), kv_format::bf16);
}

// The layers of a kind in a shape, all groups of it together.
std::uint64_t layers_of(const model_shape& s, layer_kind k) {
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < s.n_groups; ++i) n += s.groups[i].kind == k ? s.groups[i].layers : 0;
  return n;
}

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
  return json{{"model_type", "llama"}, {"num_hidden_layers", 4}, {"num_attention_heads", 8},
              {"num_key_value_heads", 2}, {"hidden_size", 512}};
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("every fixture: its layers and state are the ones written down by hand, at every length") {
  for (const pnmem::test::ref_model& ref : pnmem::test::reference_models()) {
    CAPTURE(ref.fixture);
    const model_description d = fixture(ref);
    std::uint64_t per_token = 0;
    for (const auto& l : ref.attention) per_token += l.layers * (l.bytes_per_token + l.side_bytes);
    CHECK(kv_bytes_per_token(d.cost, kv_format::bf16) == per_token);
    CHECK(d.cost.state_bytes_per_seq == ref.state.layers * pnmem::test::state_layer_bytes(ref.state, false));
    CHECK(d.cost.kv_block_tokens == 0);
    for (const std::uint64_t n : {0ULL, 1ULL, 127ULL, 128ULL, 129ULL, 511ULL, 512ULL, 1000ULL, 1024ULL, 2047ULL, 2048ULL,
                                  4096ULL, 4097ULL, 8192ULL, 32768ULL, 131072ULL}) {
      CAPTURE(n);
      CHECK(kv_and_state(d.cost, n) == pnmem::test::exact_bytes(ref, n));
    }
    CHECK(d.cost.kv_bytes_per_encoder_item[at_format(kv_format::bf16)] ==
          ref.cross_layers * ref.cross_bytes_per_token * ref.cross_tokens_per_image);
    pnmem::test::check_json_round_trip(d);
  }
}

TEST_CASE("every fixture under each engine's rule: at least what the engine allocates, at most 15 % above (1k, 32k, 128k)") {
  // The issue's bar, with pnmem's own figures: each is compared with engine_reference.hpp's account of
  // the engine's allocation; they agree to the byte here, the bar allows 15 %.
  int exact_matches = 0;
  int compared = 0;
  for (const pnmem::test::ref_model& ref : pnmem::test::reference_models()) {
    CAPTURE(ref.fixture);
    const model_description v = fixture(ref, rule(kv_engine::vllm));
    const model_description l = fixture(ref, rule(kv_engine::llama_cpp));
    for (const std::uint64_t n : {1024ULL, 32768ULL, 131072ULL}) {
      CAPTURE(n);
      const std::uint64_t want_v = pnmem::test::vllm_bytes(ref, n);
      const std::uint64_t got_v = kv_and_state(v.cost, n);
      CHECK(got_v >= want_v);
      CHECK(static_cast<double>(got_v) <= 1.15 * static_cast<double>(want_v));
      const std::uint64_t want_l = pnmem::test::llama_cpp_bytes(ref, n);
      const std::uint64_t got_l = kv_and_state(l.cost, n);
      CHECK(got_l >= want_l);
      CHECK(static_cast<double>(got_l) <= 1.15 * static_cast<double>(want_l));
      exact_matches += (got_v == want_v ? 1 : 0) + (got_l == want_l ? 1 : 0);
      compared += 2;
    }
  }
  CHECK(compared == 6 * static_cast<int>(pnmem::test::reference_models().size()));
  CHECK(exact_matches == compared);
}

TEST_CASE("vLLM's one page size: a kind of layer with a smaller page gets a larger block, never charged low") {
  // Between the block multiples the 1k/32k/128k points all are. Gemma 4's and MiMo-V2-Flash's full layers
  // (half their sliding layers' bytes a token) are allocated in blocks of 32 where the sliding keep 16,
  // Gemma-4-E2B's sliding layers (half its full layers') likewise: pnmem rounds every layer to the largest
  // block, so it may charge a kind with a smaller block up to one block of every layer more, never less.
  for (const pnmem::test::ref_model& ref : pnmem::test::reference_models()) {
    CAPTURE(ref.fixture);
    const model_description v = fixture(ref, rule(kv_engine::vllm));
    const std::uint64_t one_block = v.cost.kv_block_tokens * kv_bytes_per_token(v.cost, kv_format::bf16);
    for (const std::uint64_t n : {1ULL, 17ULL, 33ULL, 1000ULL, 1040ULL, 1041ULL, 4100ULL, 9000ULL, 9250ULL, 40000ULL}) {
      CAPTURE(n);
      const std::uint64_t want = pnmem::test::vllm_bytes(ref, n);
      const std::uint64_t got = kv_and_state(v.cost, n);
      CHECK(got >= want);
      CHECK(got - want <= one_block);
    }
  }
  // Gemma-4-31B at 1,040 tokens: its 10 full layers (8192 B a token) hold 33 blocks of 32, 1,056 tokens;
  // its 50 sliding layers (16384 B) 65 blocks of 16, 1,040; pnmem charges both 1,056.
  const model_description g = fixture("gemma-4-31b-it.config.json", rule(kv_engine::vllm));
  CHECK(g.cost.kv_block_tokens == 32);
  CHECK(kv_and_state(g.cost, 1040) == 1056ULL * (10 * 8192 + 50 * 16384));
  // Gemma-4-E2B: its sliding layers (1024 B) have the smaller page: blocks of 32, the window counted in them.
  const model_description e2b = fixture("gemma-4-e2b-it.config.json", rule(kv_engine::vllm));
  CHECK(e2b.cost.kv_block_tokens == 32);
  REQUIRE(e2b.cost.n_windows == 1);
  CHECK(e2b.cost.windows[0].window == (pnmem::test::ceil_div(511 + 8192, 32) + 1) * 32);
}

TEST_CASE("Llama-3-8B: 32 layers x 8 KV heads x 128 dims (derived 4096 / 32), bf16, every format") {
  const model_description d = fixture("llama-3-8b.config.json");
  REQUIRE(d.shape->n_groups == 1);
  const layer_group& g = d.shape->groups[0];
  CHECK(g.kind == layer_kind::full);
  CHECK(g.layers == 32);
  CHECK(g.kv_heads == 8);
  CHECK(g.key_dim == 128);
  CHECK(g.value_dim == 128);
  CHECK(d.shape->query_heads == 32);
  CHECK(d.shape->hidden_size == 4096);
  CHECK(d.name == "LlamaForCausalLM");
  const model_cost& m = d.cost;
  CHECK(m.normal_kv == kv_format::bf16);
  CHECK(m.compact_kv == kv_format::q4_0);
  CHECK(full_kv(m, kv_format::f16) == 2 * 32 * 8 * 128 * 2);  // 131072 = 128 KiB
  CHECK(full_kv(m, kv_format::fp32) == 262144);
  CHECK(full_kv(m, kv_format::fp8) == 65536);
  CHECK(full_kv(m, kv_format::q8_0) == 32 * 2 * (1024 / 32) * 34);  // 69632
  CHECK(full_kv(m, kv_format::q4_0) == 32 * 2 * (1024 / 32) * 18);  // 36864
  CHECK(full_kv(m, kv_format::q4) == 37748);  // ceil(65536 x 5898 / 10240) = ceil(37747.2)
  CHECK(m.n_windows == 0);
  CHECK(kv_bytes(m, kv_format::f16, 8192) == 8192ULL * 131072);  // 1 GiB at the full 8K context
  // The activation peak is the shape's formula: 256 MiB + 4096 x 32 B x N + 32 x 4 B x N^2 at the anchors.
  CHECK(activation_peak_bytes(m.activation, 1024) == 256 * MiB + 4096ULL * 32 * 1024 + 128ULL * 1024 * 1024);
}

TEST_CASE("Qwen2.5-7B: its sliding_window is off (use_sliding_window false); on, layers from max_window_layers slide") {
  const model_description d = fixture("qwen2.5-7b.config.json");
  CHECK(full_kv(d.cost, kv_format::f16) == 57344);  // 2 x 28 x 4 x 128 x 2
  CHECK(d.cost.n_windows == 0);                     // 131072 is in the file, but use_sliding_window is false
  CHECK(d.cost.normal_kv == kv_format::bf16);
  json j = fixture_json("qwen2.5-7b.config.json");
  j["use_sliding_window"] = true;
  j["max_window_layers"] = 20;
  const model_description w = read_ok(j.dump());
  CHECK(layers_of(*w.shape, layer_kind::sliding) == 8);
  CHECK(full_kv(w.cost, kv_format::f16) == 20 * 2048);
  CHECK(window_kv(w.cost, kv_format::f16, 131072) == 8 * 2048);
  j["max_window_layers"] = 28;  // as published: every layer is below max_window_layers
  CHECK(layers_of(*read_ok(j.dump()).shape, layer_kind::sliding) == 0);
  j.erase("max_window_layers");
  CHECK(layers_of(*read_ok(j.dump()).shape, layer_kind::sliding) == 28);
}

TEST_CASE("Mistral-7B-v0.1 and Phi-3-mini: every layer slides under vLLM's rule, none under llama.cpp's") {
  const model_description d = fixture("mistral-7b-v0.1.config.json");
  CHECK(layers_of(*d.shape, layer_kind::sliding) == 32);
  CHECK(full_kv(d.cost, kv_format::f16) == 0);
  CHECK(window_kv(d.cost, kv_format::f16, 4096) == 131072);
  CHECK(kv_bytes(d.cost, kv_format::f16, 32768) == 4096ULL * 131072);  // the KV stops growing at the window
  CHECK(layers_of(*fixture("mistral-7b-v0.1.config.json", rule(kv_engine::llama_cpp)).shape, layer_kind::full) == 32);
  const model_description phi = fixture("phi-3-mini-4k-instruct.config.json");
  CHECK(window_kv(phi.cost, kv_format::bf16, 2047) == 32 * 12288);  // 32 KV heads x 96 (3072 / 32)
  CHECK(layers_of(*fixture("phi-3-mini-4k-instruct.config.json", rule(kv_engine::llama_cpp)).shape, layer_kind::sliding) == 0);
}

TEST_CASE("Gemma 2 alternates; Gemma 3 slides 5 of 6 (pattern or default); a Gemma 3 text_config relies on defaults") {
  const model_description g2 = fixture("gemma-2-9b.config.json");
  CHECK(g2.cost.normal_kv == kv_format::fp32);
  CHECK(full_kv(g2.cost, kv_format::f16) == 21 * 2 * 8 * 256 * 2);  // head_dim 256 given: 3584 / 16 would be 224
  CHECK(window_kv(g2.cost, kv_format::f16, 4096) == 172032);
  json j = fixture_json("gemma-3-1b-it.config.json");
  j["sliding_window_pattern"] = 4;
  CHECK(layers_of(*read_ok(j.dump()).shape, layer_kind::sliding) == 20);  // 26 - 26 / 4
  j.erase("sliding_window_pattern");
  CHECK(layers_of(*read_ok(j.dump()).shape, layer_kind::sliding) == 22);  // Gemma 3's default 6
  j["model_type"] = "llama";  // no Gemma left, and a Llama does not say which layers slide
  j["architectures"] = json::array({"LlamaForCausalLM"});
  CHECK(contains(read_error(j.dump()), "sliding_window: 512, but which layers of model_type \"llama\" slide is not known"));
  // gemma-3-4b-it's text_config gives only hidden_size, num_hidden_layers and sliding_window.
  const model_description g4 = fixture("gemma-3-4b-it.config.json");
  const json text = fixture_json("gemma-3-4b-it.config.json")["text_config"];
  CHECK_FALSE(text.contains("num_attention_heads"));
  CHECK_FALSE(text.contains("head_dim"));
  CHECK(g4.shape->query_heads == 8);
  CHECK(g4.shape->groups[0].kv_heads == 4);
  CHECK(g4.shape->groups[0].key_dim == 256);
  CHECK(g4.name == "Gemma3ForConditionalGeneration");
  // A Gemma 3 config without sliding_window: Gemma3TextConfig's default window, 4096 (issue 42 item 12), not
  // the 1B's 512 the fixture had.
  json nw = fixture_json("gemma-3-1b-it.config.json");
  REQUIRE(nw["sliding_window"] == 512);
  nw.erase("sliding_window");
  const model_description d = read_ok(nw.dump());
  bool saw_sliding = false;
  for (std::uint32_t i = 0; i < d.shape->n_groups; ++i) {
    const layer_group& g = d.shape->groups[i];
    if (g.kind != layer_kind::sliding) continue;
    saw_sliding = true;
    CHECK(g.span == 4096);
  }
  CHECK(saw_sliding);
}

TEST_CASE("Gemma 4: global layers of their own heads and dims; shared-KV layers keep nothing") {
  const model_description d = fixture("gemma-4-31b-it.config.json");
  CHECK(full_kv(d.cost, kv_format::bf16) == 10 * 2 * 4 * 512 * 2);
  CHECK(window_kv(d.cost, kv_format::bf16, 1024) == 50 * 2 * 16 * 256 * 2);
  json j = fixture_json("gemma-4-31b-it.config.json");
  j["text_config"]["attention_k_eq_v"] = false;  // then the full layers keep num_key_value_heads
  CHECK(full_kv(read_ok(j.dump()).cost, kv_format::bf16) == 10 * 2 * 16 * 512 * 2);
  const model_description e2b = fixture("gemma-4-e2b-it.config.json");
  CHECK(layers_of(*e2b.shape, layer_kind::full) + layers_of(*e2b.shape, layer_kind::sliding) == 15);  // 35 - 20 shared
}

TEST_CASE("MLA: DeepSeek-V3 and Kimi-K2 cache one 576-value latent row per layer: 70,272 B per token, not 1.7 MB") {
  for (const char* name : {"deepseek-v3.config.json", "kimi-k2-instruct.config.json"}) {
    CAPTURE(name);
    const model_description d = fixture(name);
    REQUIRE(d.shape->n_groups == 1);
    CHECK(d.shape->groups[0].k_only);
    CHECK(d.shape->groups[0].key_dim == 576);
    CHECK(full_kv(d.cost, kv_format::bf16) == 70272);
    CHECK(full_kv(d.cost, kv_format::bf16) * 24 < 61ULL * 2 * 128 * 192 * 2);  // vs 128 heads x 192 as plain K/V
    CHECK(full_kv(d.cost, kv_format::fp8) == 61 * 576);
  }
  // Without an indexer, vLLM's dense MLA in fp8 is the plain 576 B row (fp8_ds_mla is the sparse backend's).
  CHECK(full_kv(fixture("deepseek-v3.config.json", rule(kv_engine::vllm)).cost, kv_format::fp8) == 61 * 576);
  // vLLM's FlashMLA block is 64 tokens.
  CHECK(fixture("deepseek-v3.config.json", rule(kv_engine::vllm)).cost.kv_block_tokens == 64);
  json j = fixture_json("deepseek-v2-lite.config.json");
  j.erase("qk_rope_head_dim");
  CHECK(contains(read_error(j.dump()), "qk_rope_head_dim: missing"));
}

TEST_CASE("DeepSeek Sparse Attention: DeepSeek-V3.2 and GLM-5 keep the indexer's keys beside the latent, in every answer") {
  struct dsa_model {
    const char* name;
    std::uint64_t layers;
  };
  for (const dsa_model m : {dsa_model{"deepseek-v3.2.config.json", 61}, dsa_model{"glm-5.config.json", 78}}) {
    CAPTURE(m.name);
    // exact and vLLM: the latent (576 values in the KV's format) + 132 B (128 fp8 + an fp32 scale) a
    // layer, the 132 B the same in every format: rung 4a's 4 bits do not shrink them.
    const model_description d = fixture(m.name);
    REQUIRE(d.shape->n_groups == 1);
    CHECK(d.shape->groups[0].k_only);
    CHECK(d.shape->groups[0].key_dim == 576);
    CHECK(d.shape->groups[0].side_bytes == 132);
    CHECK(full_kv(d.cost, kv_format::bf16) == m.layers * (1152 + 132));
    CHECK(full_kv(d.cost, kv_format::fp8) == m.layers * (576 + 132));
    CHECK(full_kv(d.cost, kv_format::q4_0) == m.layers * (18 * 18 + 132));  // 576 values: 18 blocks of 18 B
    // Without the indexer the price would be 10 % low (GLM-5: 1152 of 1284).
    CHECK(static_cast<double>(m.layers * 1152) < 0.9 * static_cast<double>(full_kv(d.cost, kv_format::bf16)));
    // vLLM: one block table (64 tokens, FlashMLA's) for the latent and the indexer alike.
    const model_description v = fixture(m.name, rule(kv_engine::vllm));
    CHECK(v.cost.kv_block_tokens == 64);
    CHECK(kv_and_state(v.cost, 1000) == 1024 * m.layers * 1284);
    // vLLM in fp8: FlashMLA's sparse backend keeps fp8_ds_mla rows, 656 B (not 576), and the indexer's
    // 132 B beside them; the other formats as under the exact rule. (DeepSeek-V3, no indexer: 576, above.)
    CHECK(full_kv(v.cost, kv_format::fp8) == m.layers * (656 + 132));
    CHECK(full_kv(v.cost, kv_format::bf16) == m.layers * (1152 + 132));
    CHECK(full_kv(v.cost, kv_format::q4_0) == m.layers * (18 * 18 + 132));
    // llama.cpp: a second K-only cache of 128 values in the KV's type (f16: 256 B).
    const model_description l = fixture(m.name, rule(kv_engine::llama_cpp));
    CHECK(l.shape->n_groups == 2);
    CHECK(full_kv(l.cost, kv_format::f16) == m.layers * (1152 + 256));
    CHECK(full_kv(l.cost, kv_format::q8_0) == m.layers * (18 * 34 + 4 * 34));
  }
  // The layers that own an indexer: vLLM's index_topk_freq / index_skip_topk_offset (GLM-5.2's 21 of 78:
  // layers 0, 1, 2, then every 4th from 6), or index_topk_pattern; indexer_types must agree.
  json j = fixture_json("glm-5.config.json");
  j["index_topk_freq"] = 4;
  j["index_skip_topk_offset"] = 3;
  model_description d = read_ok(j.dump());
  std::uint64_t owners = 0;
  for (std::size_t i = 0; i < d.shape->n_groups; ++i) owners += d.shape->groups[i].side_bytes == 132 ? d.shape->groups[i].layers : 0;
  CHECK(owners == 21);
  CHECK(full_kv(d.cost, kv_format::bf16) == 78 * 1152 + 21 * 132);
  std::vector<std::string> types;
  for (int i = 0; i < 78; ++i) types.push_back(i < 3 || (i - 2) % 4 == 0 ? "full" : "shared");
  j["indexer_types"] = types;
  CHECK(read_ok(j.dump()).cost == d.cost);
  types[6] = "shared";
  j["indexer_types"] = types;
  CHECK(contains(read_error(j.dump()), "indexer_types[6]: \"shared\", but index_topk_freq and index_skip_topk_offset"));
  j = fixture_json("deepseek-v3.2.config.json");
  j["index_topk_pattern"] = std::string(60, 'F') + "S";
  CHECK(full_kv(read_ok(j.dump()).cost, kv_format::bf16) == 61 * 1152 + 60 * 132);
  j["index_topk_pattern"] = std::string(61, 'X');
  CHECK(contains(read_error(j.dump()), "index_topk_pattern: character 0 is 'X'"));
  // Nothing guessed: the indexer's width missing, indexer keys without index_topk, a layer type it is not.
  j = fixture_json("deepseek-v3.2.config.json");
  j.erase("index_head_dim");
  CHECK(contains(read_error(j.dump()), "index_head_dim: missing, and index_topk says"));
  j = fixture_json("deepseek-v3.2.config.json");
  j.erase("index_topk");
  CHECK(contains(read_error(j.dump()), "index_head_dim: set (128), but index_topk is not"));
  j = fixture_json("deepseek-v3.2.config.json");
  j["layer_types"] = std::vector<std::string>(61, "deepseek_sparse_attention");
  CHECK(read_ok(j.dump()).cost == fixture("deepseek-v3.2.config.json").cost);
  j["layer_types"] = std::vector<std::string>(61, "full_attention");
  CHECK(contains(read_error(j.dump()), "layer_types[0]: \"full_attention\", but index_topk is set"));
  // An index_* key in a family that has no MLA is not silently dropped either.
  json llama = fixture_json("llama-3-8b.config.json");
  llama["index_head_dim"] = 128;
  CHECK(contains(read_error(llama.dump()), "index_head_dim: set (128), but pnmem does not read it"));
}

TEST_CASE("MiMo-V2-Flash: sliding layers of their own KV heads, K and V rows of their own widths") {
  const std::string text = pnmem::test::mimo_v2_flash_config();
  const model_description d = read_ok(text);
  REQUIRE(d.shape->n_groups == 2);
  const layer_group& full = d.shape->groups[0];
  const layer_group& swa = d.shape->groups[1];
  CHECK(full.kind == layer_kind::full);
  CHECK(full.layers == 9);
  CHECK(full.kv_heads == 4);
  CHECK(full.key_dim == 192);
  CHECK(full.value_dim == 128);
  CHECK(swa.kind == layer_kind::sliding);
  CHECK(swa.layers == 39);
  CHECK(swa.kv_heads == 8);
  CHECK(swa.key_dim == 192);
  CHECK(swa.value_dim == 128);
  CHECK(swa.span == 128);
  // K and V each at their own width: 9 x 4 x 320 x 2 B every token, 39 x 8 x 320 x 2 B up to 128 tokens
  // (not 9 x 4 x 384 x 2, V padded to K's width, nor 39 x 4 heads).
  CHECK(kv_and_state(d.cost, 100) == 100 * (9 * 2560 + 39 * 5120));
  CHECK(kv_and_state(d.cost, 4096) == 4096 * 9 * 2560 + 128 * 39 * 5120);
  json j = json::parse(text);
  // layer_types (transformers' spelling) may say the same; not something else.
  std::vector<std::string> types;
  for (const auto& p : j["hybrid_layer_pattern"]) types.push_back(p.get<int>() == 1 ? "sliding_attention" : "full_attention");
  j["layer_types"] = types;
  CHECK(read_ok(j.dump()).cost == d.cost);
  j["layer_types"][0] = "sliding_attention";
  CHECK(contains(read_error(j.dump()), "layer_types[0]: \"sliding_attention\", but hybrid_layer_pattern makes layer 0 a full one"));
  j = json::parse(text);
  j.erase("hybrid_layer_pattern");
  j["layer_types"] = types;
  CHECK(read_ok(j.dump()).cost == d.cost);
  j.erase("layer_types");
  CHECK(contains(read_error(j.dump()), "hybrid_layer_pattern: missing"));
  // Nothing guessed: the sliding layers' KV heads, a window two keys disagree on, a pattern value.
  j = json::parse(text);
  j.erase("swa_num_key_value_heads");
  CHECK(contains(read_error(j.dump()), "swa_num_key_value_heads: missing"));
  j = json::parse(text);
  j["sliding_window"] = 256;
  CHECK(contains(read_error(j.dump()), "sliding_window: 256, but sliding_window_size"));
  j = json::parse(text);
  j["hybrid_layer_pattern"][3] = 2;
  CHECK(contains(read_error(j.dump()), "hybrid_layer_pattern[3]: 2 is out of range"));
  j = json::parse(text);
  j.erase("head_dim");
  CHECK(contains(read_error(j.dump()), "head_dim: missing"));
  // V defaults: full layers' to head_dim, sliding layers' to swa_head_dim.
  j = json::parse(text);
  j.erase("v_head_dim");
  j.erase("swa_v_head_dim");
  const model_description same = read_ok(j.dump());
  CHECK(same.shape->groups[0].value_dim == 192);
  CHECK(same.shape->groups[1].value_dim == 192);
  // v_head_dim in a plain family would be priced as K's width: refused.
  json llama = fixture_json("llama-3-8b.config.json");
  llama["v_head_dim"] = 64;
  CHECK(contains(read_error(llama.dump()), "v_head_dim: set (64), but pnmem does not read it"));
}

TEST_CASE("MiniMax-M2: attn_type_list says every layer is softmax attention; a lightning layer is refused") {
  const model_description d = fixture("minimax-m2.config.json");
  CHECK(full_kv(d.cost, kv_format::bf16) == 62 * 4096);
  json j = fixture_json("minimax-m2.config.json");
  j["attn_type_list"][7] = 0;
  CHECK(contains(read_error(j.dump()), "attn_type_list[7]: 0: a lightning (linear) attention layer"));
  j["attn_type_list"] = std::vector<int>(61, 1);
  CHECK(contains(read_error(j.dump()), "attn_type_list: 61 entries for 62 layers"));
}

TEST_CASE("Llama-3.2-Vision: cross-attention layers hold KV per image, nothing per text token") {
  const model_description d = fixture("llama-3.2-90b-vision-instruct.config.json");
  CHECK(layers_of(*d.shape, layer_kind::cross) == 20);
  CHECK(layers_of(*d.shape, layer_kind::full) == 80);
  CHECK(full_kv(d.cost, kv_format::bf16) == 80 * 4096);
  CHECK(d.cost.kv_bytes_per_encoder_item[at_format(kv_format::bf16)] == 20ULL * 4096 * 6404);  // 524,615,680 B
  CHECK(host_cost_bytes(d.cost, 1000, kv_format::bf16, 2) - host_cost_bytes(d.cost, 1000, kv_format::bf16) == 2 * 20ULL * 4096 * 6404);
  json j = fixture_json("llama-3.2-90b-vision-instruct.config.json");
  j["text_config"]["cross_attention_layers"][1] = 3;
  CHECK(contains(read_error(j.dump()), "text_config.cross_attention_layers[1]: layer 3 listed twice"));
  j = fixture_json("llama-3.2-90b-vision-instruct.config.json");
  j.erase("vision_config");
  CHECK(contains(read_error(j.dump()), "vision_config: missing"));
}

TEST_CASE("hybrids: the state per sequence of Qwen3-Next, Qwen3.5, Nemotron-H and Jamba, in each engine's format") {
  // Qwen3-Next: 36 x (24576 + 524288) values: 37.69 MiB in bf16 (exact), padded to 544-token pages under
  // vLLM (38.25 MiB), 75.375 MiB in llama.cpp's f32.
  CHECK(fixture("qwen3-next-80b-a3b-thinking.config.json").cost.state_bytes_per_seq == 39518208);
  CHECK(fixture("qwen3-next-80b-a3b-thinking.config.json", rule(kv_engine::vllm)).cost.state_bytes_per_seq == 40108032);
  CHECK(fixture("qwen3-next-80b-a3b-thinking.config.json", rule(kv_engine::llama_cpp)).cost.state_bytes_per_seq == 79036416);
  // Qwen3.5-9B's temporal state is fp32 (mamba_ssm_dtype): 24 x (24576 x 2 + 524288 x 4) B.
  const model_description q35 = fixture("qwen3.5-9b.config.json");
  CHECK(q35.shape->ssm_state_format == kv_format::fp32);
  CHECK(q35.cost.state_bytes_per_seq == 24ULL * (24576 * 2 + 524288 * 4));
  CHECK(q35.cost.normal_kv == kv_format::bf16);  // text_config's dtype
  // Nemotron-3-Nano: 23 Mamba-2 layers, fp32 SSM (mamba_ssm_cache_dtype); 'E' and '-' layers hold nothing.
  const model_description nh = fixture("nemotron-3-nano-30b-a3b.config.json");
  CHECK(layers_of(*nh.shape, layer_kind::recurrent) == 23);
  CHECK(nh.cost.state_bytes_per_seq == 23ULL * (18432 * 2 + 524288 * 4));
  json j = fixture_json("nemotron-3-nano-30b-a3b.config.json");
  j.erase("mamba_ssm_cache_dtype");  // vLLM's default for Nemotron-H is fp32 too
  CHECK(read_ok(j.dump()).cost.state_bytes_per_seq == nh.cost.state_bytes_per_seq);
  j["hybrid_override_pattern"] = std::string(51, 'M') + "X";
  CHECK(contains(read_error(j.dump()), "hybrid_override_pattern: character 51 is 'X'"));
  j["hybrid_override_pattern"] = "M*";
  CHECK(contains(read_error(j.dump()), "hybrid_override_pattern: 2 characters for 52 layers"));
  // Newer transformers' spelling, layers_block_type: read alike, alone or beside the pattern it must match.
  const std::string pattern = fixture_json("nemotron-3-nano-30b-a3b.config.json")["hybrid_override_pattern"];
  std::vector<std::string> kinds;
  for (const char c : pattern) kinds.push_back(c == 'M' ? "linear_attention" : c == '*' ? "full_attention" : c == 'E' ? "moe" : "mlp");
  j = fixture_json("nemotron-3-nano-30b-a3b.config.json");
  j["layers_block_type"] = kinds;
  CHECK(read_ok(j.dump()).cost == nh.cost);
  j.erase("hybrid_override_pattern");
  CHECK(read_ok(j.dump()).cost == nh.cost);
  j["layers_block_type"][0] = "conv";
  CHECK(contains(read_error(j.dump()), "layers_block_type[0]: \"conv\" is not a NemotronH block type"));
  j = fixture_json("nemotron-3-nano-30b-a3b.config.json");
  kinds[0] = kinds[0] == "moe" ? "mlp" : "moe";
  j["layers_block_type"] = kinds;
  CHECK(contains(read_error(j.dump()), "layers_block_type: does not say what hybrid_override_pattern says"));
  // Jamba: Mamba-1 state, attention every 8th layer from 4.
  const model_description jb = fixture("ai21-jamba-1.5-mini.config.json");
  CHECK(layers_of(*jb.shape, layer_kind::full) == 4);
  CHECK(jb.cost.state_bytes_per_seq == 28ULL * (24576 + 131072) * 2);
  // Qwen3-Next's layer_types, when a config has them, decide instead of the interval.
  json q = fixture_json("qwen3-next-80b-a3b-thinking.config.json");
  q["layer_types"] = json::array();
  for (int i = 0; i < 48; ++i) q["layer_types"].push_back(i % 2 == 0 ? "full_attention" : "linear_attention");
  CHECK(layers_of(*read_ok(q.dump()).shape, layer_kind::full) == 24);
  q["layer_types"][5] = "mamba";
  CHECK(contains(read_error(q.dump()), "layer_types[5]: \"mamba\" is not a layer type of model_type \"qwen3_next\""));
}

TEST_CASE("Python's JSON: Mamba-Codestral's Infinity reads; a non-finite value where pnmem reads a number is an error") {
  const std::string text = model_fixture("mamba-codestral-7b-v0.1.config.json");
  REQUIRE(text.find("Infinity") != std::string::npos);
  const model_description d = read_ok(text);
  CHECK(layers_of(*d.shape, layer_kind::recurrent) == 64);
  CHECK(d.cost.state_bytes_per_seq == 64ULL * (30720 + 1048576) * 2);
  CHECK(kv_bytes_per_token(d.cost, kv_format::bf16) == 0);
  for (const char* literal : {"NaN", "Infinity", "-Infinity"}) {
    std::string bad = R"({"model_type": "llama", "num_hidden_layers": 4, "num_attention_heads": 8, "hidden_size": )";
    bad += literal;
    bad += "}";
    CAPTURE(literal);
    CHECK(read_error(bad) == std::string("hidden_size: expected an integer, got ") + literal);
  }
  // Inside strings and keys they are text.
  CHECK(read_ok(R"({"model_type": "llama", "name": "NaN Infinity", "num_hidden_layers": 4, "num_attention_heads": 8, "hidden_size": 512, "x": [Infinity, -Infinity, NaN]})")
            .shape->groups[0].layers == 4);
  CHECK(contains(read_error(R"({"model_type": "llama", "x": Infinityy})"), "not JSON"));
}

TEST_CASE("families with no real config stored here: Llama 4, Falcon-H1, Zamba2 (configs from transformers' keys)") {
  // No copy of these families' config.json was found in public material reachable here
  // (tests/fixtures/models/README.md): these configs carry the keys transformers' config classes define,
  // with Llama-4-Scout's, Falcon-H1-7B's and Zamba2-2.7B's published sizes.
  json llama4 = {{"architectures", {"Llama4ForConditionalGeneration"}}, {"model_type", "llama4"},
                 {"text_config", {{"model_type", "llama4_text"}, {"num_hidden_layers", 48}, {"num_attention_heads", 40},
                                  {"num_key_value_heads", 8}, {"head_dim", 128}, {"hidden_size", 5120},
                                  {"attention_chunk_size", 8192}, {"torch_dtype", "bfloat16"}}}};
  model_description d = read_ok(llama4.dump());
  CHECK(layers_of(*d.shape, layer_kind::chunked) == 36);  // every 4th layer (3, 7, ...) is full
  CHECK(layers_of(*d.shape, layer_kind::full) == 12);
  CHECK(window_kv(d.cost, kv_format::bf16, 8192) == 36 * 2 * 8 * 128 * 2);
  CHECK(kv_bytes(d.cost, kv_format::bf16, 131072) == 12ULL * 4096 * 131072 + 36ULL * 4096 * 8192);
  // vLLM keeps C + max_num_batched_tokens; llama.cpp pad256(C + 512).
  CHECK(window_kv(read_ok(llama4.dump(), rule(kv_engine::vllm)).cost, kv_format::bf16, 8192 + 8192) == 36 * 4096);
  CHECK(window_kv(read_ok(llama4.dump(), rule(kv_engine::llama_cpp)).cost, kv_format::bf16, 8704) == 36 * 4096);
  json nope = llama4;
  nope["text_config"]["no_rope_layers"] = json::array();
  for (int i = 0; i < 48; ++i) nope["text_config"]["no_rope_layers"].push_back(i < 40 ? 1 : 0);
  CHECK(layers_of(*read_ok(nope.dump()).shape, layer_kind::full) == 8);
  // Llama4TextConfig's rules: an empty no_rope_layers (Llama-4-Scout's text_config writes []) is the
  // default pattern, every no_rope_layer_interval-th layer NoPE and full; the list may be longer than
  // the layers, not shorter; layer_types (transformers 5 writes it) must say what no_rope_layers does.
  nope["text_config"]["no_rope_layers"] = json::array();
  CHECK(layers_of(*read_ok(nope.dump()).shape, layer_kind::full) == 12);
  nope["text_config"]["no_rope_layer_interval"] = 2;
  CHECK(layers_of(*read_ok(nope.dump()).shape, layer_kind::full) == 24);
  nope["text_config"].erase("no_rope_layer_interval");
  for (int i = 0; i < 50; ++i) nope["text_config"]["no_rope_layers"].push_back((i + 1) % 4 != 0 ? 1 : 0);
  CHECK(layers_of(*read_ok(nope.dump()).shape, layer_kind::full) == 12);
  nope["text_config"]["no_rope_layers"] = json::array({1, 1, 1, 0});
  CHECK(contains(read_error(nope.dump()), "text_config.no_rope_layers: 4 entries for 48 layers"));
  nope["text_config"].erase("no_rope_layers");
  json llama_types = json::array();
  for (int i = 0; i < 48; ++i) llama_types.push_back((i + 1) % 4 != 0 ? "chunked_attention" : "full_attention");
  nope["text_config"]["layer_types"] = llama_types;
  CHECK(layers_of(*read_ok(nope.dump()).shape, layer_kind::chunked) == 36);
  nope["text_config"]["layer_types"][3] = "chunked_attention";
  CHECK(contains(read_error(nope.dump()),
                 "text_config.layer_types[3]: \"chunked_attention\", but no_rope_layers' default makes layer 3 a NoPE (full) layer"));
  // Llama-4-Scout-17B-16E's text_config as a public test mirrors it (index file 67267440251: "Mirror the
  // published unsloth/Llama-4-Scout-17B-16E text_config"), with its empty no_rope_layers, which was
  // refused before (0 entries for 48 layers). KV per layer and token in bf16: 2 x 8 x 128 x 2 = 4096 B.
  const json scout = {{"architectures", {"Llama4ForConditionalGeneration"}}, {"model_type", "llama4"},
                      {"text_config", {{"attention_bias", false}, {"attention_chunk_size", 8192}, {"head_dim", 128},
                                       {"hidden_size", 5120}, {"intermediate_size", 8192}, {"intermediate_size_mlp", 16384},
                                       {"max_position_embeddings", 262144}, {"no_rope_layers", json::array()},
                                       {"num_attention_heads", 40}, {"num_experts_per_tok", 1}, {"num_hidden_layers", 48},
                                       {"num_key_value_heads", 8}, {"num_local_experts", 16}, {"rms_norm_eps", 1e-5},
                                       {"rope_theta", 500000.0}, {"torch_dtype", "bfloat16"}, {"use_qk_norm", true},
                                       {"vocab_size", 202048}, {"interleave_moe_layer_step", 1}, {"tie_word_embeddings", false}}}};
  d = read_ok(scout.dump());
  CHECK(kv_bytes(d.cost, kv_format::bf16, 1024) == 48ULL * 4096 * 1024);                          // 201,326,592
  CHECK(kv_bytes(d.cost, kv_format::bf16, 32768) == 12ULL * 4096 * 32768 + 36ULL * 4096 * 8192);   // 2,818,572,288
  CHECK(kv_bytes(d.cost, kv_format::bf16, 131072) == 12ULL * 4096 * 131072 + 36ULL * 4096 * 8192); // 7,650,410,496
  // attention_chunk_size: 8192 when absent (Llama4TextConfig's default), no chunks when null.
  llama4["text_config"].erase("attention_chunk_size");
  d = read_ok(llama4.dump());
  CHECK(layers_of(*d.shape, layer_kind::chunked) == 36);
  CHECK(window_kv(d.cost, kv_format::bf16, 8192) == 36 * 2 * 8 * 128 * 2);
  llama4["text_config"]["attention_chunk_size"] = nullptr;
  CHECK(layers_of(*read_ok(llama4.dump()).shape, layer_kind::full) == 48);

  // Falcon-H1-7B: 44 layers, each attention (2 KV heads x 128) and Mamba-2 (d_ssm 3072 = 24 heads x 128,
  // state 256, 1 group, conv 4): conv 3 x (3072 + 2 x 256) = 10752, SSM 24 x 128 x 256 = 786432. Its
  // sizing keys as three public copies of tiiuae/Falcon-H1-7B(-Instruct)'s config.json agree on
  // (tests/fixtures/models/README.md).
  const json falcon = {{"model_type", "falcon_h1"}, {"num_hidden_layers", 44}, {"hidden_size", 3072},
                       {"num_attention_heads", 12}, {"num_key_value_heads", 2}, {"head_dim", 128},
                       {"mamba_d_ssm", 3072}, {"mamba_n_heads", 24}, {"mamba_d_head", 128}, {"mamba_d_state", 256},
                       {"mamba_n_groups", 1}, {"mamba_d_conv", 4}, {"mamba_expand", 2}, {"torch_dtype", "bfloat16"}};
  d = read_ok(falcon.dump());
  CHECK(layers_of(*d.shape, layer_kind::full) == 44);
  CHECK(layers_of(*d.shape, layer_kind::recurrent) == 44);
  CHECK(full_kv(d.cost, kv_format::bf16) == 44 * 2 * 2 * 128 * 2);
  CHECK(d.cost.state_bytes_per_seq == 44ULL * (10752 + 786432) * 2);  // 70,152,192 B: 66.9 MiB a sequence
  // FalconH1Config's defaults (vLLM reads the config through it): without mamba_d_ssm the inner size is
  // 1024; mamba_d_ssm null means mamba_expand x hidden_size; mamba_d_head "auto" is inner / heads. Heads
  // that do not make up the inner size are refused, as transformers refuses them.
  json f = falcon;
  f.erase("mamba_d_ssm");
  f.erase("mamba_d_head");
  f["mamba_n_heads"] = 16;  // 1024 = 16 x 64
  CHECK(read_ok(f.dump()).cost.state_bytes_per_seq == 44ULL * (3 * (1024 + 2 * 256) + 16 * 64 * 256) * 2);
  f["mamba_d_ssm"] = nullptr;  // 2 x 3072 = 6144 = 16 x 384
  f["mamba_d_head"] = "auto";
  CHECK(read_ok(f.dump()).cost.state_bytes_per_seq == 44ULL * (3 * (6144 + 2 * 256) + 16 * 384 * 256) * 2);
  f.erase("mamba_n_heads");  // 128 heads of 48
  CHECK(read_ok(f.dump()).cost.state_bytes_per_seq == 44ULL * (3 * (6144 + 2 * 256) + 128 * 48 * 256) * 2);
  f = falcon;
  f.erase("mamba_d_ssm");
  f.erase("mamba_d_head");
  CHECK(contains(read_error(f.dump()), "mamba_n_heads: 24 heads do not divide the Mamba inner size 1024 (mamba_d_ssm's default)"));
  f = falcon;
  f["mamba_d_head"] = 100;
  CHECK(contains(read_error(f.dump()), "mamba_d_head: 100 x 24 heads is not the Mamba inner size 3072 (mamba_d_ssm)"));

  // Zamba2-2.7B: 54 Mamba-2 layers (inner 2 x 2560 = 5120 = 80 heads x 64, state 64, 1 group, conv 4), 9 of
  // them hybrid with their own KV of 32 heads x attention_head_dim 160 (2 x 2560 / 32).
  json zamba = {{"model_type", "zamba2"}, {"num_hidden_layers", 54}, {"hidden_size", 2560},
                {"num_attention_heads", 32}, {"n_mamba_heads", 80}, {"mamba_headdim", 64}, {"mamba_d_state", 64},
                {"mamba_ngroups", 1}, {"mamba_d_conv", 4}, {"mamba_expand", 2}, {"torch_dtype", "bfloat16"},
                {"hybrid_layer_ids", {5, 11, 17, 23, 29, 35, 41, 47, 53}}};
  d = read_ok(zamba.dump());
  CHECK(layers_of(*d.shape, layer_kind::recurrent) == 54);
  CHECK(full_kv(d.cost, kv_format::bf16) == 9 * 2 * 32 * 160 * 2);
  CHECK(d.cost.state_bytes_per_seq == 54ULL * (3 * (5120 + 2 * 64) + 80 * 64 * 64) * 2);
  // Zamba2Config's derivations: layers_block_type decides (hybrid_layer_ids must agree with it), and
  // with neither the 54-layer default pattern (hybrid layers 6, 12, ..., 42, 47, 51) applies; the head
  // sizes are derived, so a config that writes others is refused, as is Zyphra's pre-transformers
  // Zamba2-7B config (mamba_headdim 64, but 2 x 3584 / 8 default heads = 896).
  json types = json::array();
  for (int i = 0; i < 54; ++i) types.push_back(i % 6 == 5 ? "hybrid" : "mamba");
  zamba["layers_block_type"] = types;
  CHECK(full_kv(read_ok(zamba.dump()).cost, kv_format::bf16) == 9 * 2 * 32 * 160 * 2);
  zamba["layers_block_type"][5] = "mamba";
  CHECK(contains(read_error(zamba.dump()), "hybrid_layer_ids: does not list the layers that layers_block_type calls \"hybrid\""));
  zamba.erase("hybrid_layer_ids");
  CHECK(full_kv(read_ok(zamba.dump()).cost, kv_format::bf16) == 8 * 2 * 32 * 160 * 2);
  zamba.erase("layers_block_type");
  d = read_ok(zamba.dump());
  CHECK(full_kv(d.cost, kv_format::bf16) == 9 * 2 * 32 * 160 * 2);
  zamba["num_hidden_layers"] = 53;
  CHECK(contains(read_error(zamba.dump()), "layers_block_type: missing (and no hybrid_layer_ids)"));
  zamba["num_hidden_layers"] = 54;
  zamba["mamba_headdim"] = 128;
  CHECK(contains(read_error(zamba.dump()), "mamba_headdim: 128, but Zamba2Config derives mamba_expand x hidden_size / n_mamba_heads = 64"));
  zamba.erase("mamba_headdim");
  zamba["attention_head_dim"] = 80;
  CHECK(contains(read_error(zamba.dump()), "attention_head_dim: 80, but Zamba2Config derives 2 x hidden_size / num_attention_heads = 160"));
  zamba.erase("attention_head_dim");
  zamba.erase("n_mamba_heads");  // Zamba2Config's 8 heads of 5120 / 8 = 640
  CHECK(read_ok(zamba.dump()).cost.state_bytes_per_seq == 54ULL * (3 * (5120 + 2 * 64) + 8 * 640 * 64) * 2);
  const json pre_transformers = {{"architectures", {"Zamba2ForCausalLM"}}, {"model_type", "zamba2"}, {"hidden_size", 3584},
                                 {"num_hidden_layers", 81}, {"num_attention_heads", 32}, {"num_key_value_heads", 32},
                                 {"mamba_headdim", 64}, {"mamba_ngroups", 2}, {"state_size", 64}, {"expansion_factor", 2},
                                 {"kv_channels", 112}, {"num_mem_blocks", 2}};
  CHECK(contains(read_error(pre_transformers.dump()), "mamba_headdim: 64, but Zamba2Config derives mamba_expand x hidden_size / n_mamba_heads = 896"));
}

TEST_CASE("Nemotron-NAS block_configs: no-op attention blocks keep no KV, the others heads / n_heads_in_group") {
  const model_description d = fixture("llama-3.3-nemotron-super-49b-v1.config.json");
  CHECK(layers_of(*d.shape, layer_kind::full) == 49);
  CHECK(full_kv(d.cost, kv_format::bf16) == 49 * 2 * 8 * 128 * 2);
  json j = fixture_json("llama-3.3-nemotron-super-49b-v1.config.json");
  j["block_configs"][0]["attention"]["n_heads_in_group"] = 16;  // 4 KV heads in layer 0
  const model_description v = read_ok(j.dump());
  CHECK(full_kv(v.cost, kv_format::bf16) == 48 * 4096 + 2048);
  j["block_configs"][0]["attention"]["n_heads_in_group"] = 7;
  CHECK(contains(read_error(j.dump()), "block_configs[0].attention.n_heads_in_group: 7 does not divide num_attention_heads (64)"));
}

TEST_CASE("nothing is guessed: head_dim of an unknown family, keys a family does not read, unknown layer types") {
  // Qwen3's head_dim is 128 by default, not hidden / heads.
  json q3 = fixture_json("qwen3-32b.config.json");
  q3.erase("head_dim");
  CHECK(read_ok(q3.dump()).shape->groups[0].key_dim == 128);
  json j = small();
  j["model_type"] = "brand_new";
  CHECK(contains(read_error(j.dump()), "head_dim: missing, and pnmem does not know the default of model_type \"brand_new\""));
  j["head_dim"] = 64;
  CHECK(read_ok(j.dump()).shape->groups[0].key_dim == 64);  // with head_dim a plain decoder reads
  j["linear_num_key_heads"] = 16;
  CHECK(contains(read_error(j.dump()), "linear_num_key_heads: set (16), but pnmem does not read it for model_type \"brand_new\""));
  j.erase("linear_num_key_heads");
  j["hybrid_override_pattern"] = "MM*M";
  CHECK(contains(read_error(j.dump()), "hybrid_override_pattern: set"));
  j.erase("hybrid_override_pattern");
  j["num_kv_shared_layers"] = 0;  // 0: nothing shared, nothing to read
  CHECK(read_hf_config(j.dump()).value.has_value());
  j["layer_types"] = {"full_attention", "linear_attention", "full_attention", "full_attention"};
  CHECK(contains(read_error(j.dump()), "layer_types[1]: \"linear_attention\" is not a layer type pnmem knows"));
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
  // A multimodal config: the text model's dtype wins over the top level's (the vision tower's, the
  // wrapper's), whichever key either uses (issue 42 item 13).
  json mm = fixture_json("gemma-3-4b-it.config.json");
  mm.erase("torch_dtype");
  mm.erase("dtype");
  mm["text_config"].erase("dtype");
  mm["text_config"]["torch_dtype"] = "bfloat16";
  mm["dtype"] = "float32";
  CHECK(read_ok(mm.dump()).cost.normal_kv == kv_format::bf16);
  mm["text_config"].erase("torch_dtype");
  CHECK(read_ok(mm.dump()).cost.normal_kv == kv_format::fp32);  // none of its own: the top level's
}

TEST_CASE("names, head_dim null, num_key_value_heads absent") {
  json j = small();
  j["_name_or_path"] = "meta-llama/Meta-Llama-3-8B";
  j["architectures"] = {"LlamaForCausalLM"};
  j["head_dim"] = nullptr;
  j.erase("num_key_value_heads");
  const model_description d = read_ok(j.dump());
  CHECK(d.name == "meta-llama/Meta-Llama-3-8B");
  CHECK(d.shape->groups[0].key_dim == 64);   // 512 / 8
  CHECK(d.shape->groups[0].kv_heads == 8);   // = num_attention_heads
}

TEST_CASE("read_hf_config_file: a config.json, or a model's directory holding one (a downloaded snapshot)") {
  const pnmem::test::temp_dir dir;
  const std::string text = model_fixture("qwen3-next-80b-a3b-thinking.config.json");
  const std::string file = dir.write("config.json", text);
  engine_rule vllm;
  vllm.engine = kv_engine::vllm;
  const model_description want = read_ok(text, vllm);
  for (const std::string& path : {file, dir.path(""), dir.path(".")}) {
    CAPTURE(path);
    const auto r = read_hf_config_file(path, vllm);
    REQUIRE_MESSAGE(r.value.has_value(), r.error);
    CHECK(r.value->cost == want.cost);
    CHECK(r.value->cost.kv_block_tokens == 544);
  }
  // The errors start with the file read: the one named, or the directory's config.json.
  const std::string bare = dir.path("model");
  std::filesystem::create_directory(bare);
  CHECK(read_hf_config_file(bare).error == bare + "/config.json: No such file or directory");
  CHECK(read_hf_config_file(dir.path("nope.json")).error == dir.path("nope.json") + ": No such file or directory");
  const std::string broken = dir.path("broken");
  std::filesystem::create_directory(broken);
  pnmem::test::temp_dir::write_file(broken + "/config.json", "{\"num_hidden_layers\": 2}");
  CHECK(read_hf_config_file(broken).error == broken + "/config.json: hidden_size: missing");
  pnmem::test::temp_dir::write_file(broken + "/config.json", "{");
  const std::string not_json = read_hf_config_file(broken).error;
  CHECK(not_json.rfind(broken + "/config.json: not JSON: ", 0) == 0);  // the path once, not "config.json: " again
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
  j["layer_types"] = {"full_attention", "full_attention", "chunked_attention", "full_attention"};
  CHECK(contains(read_error(j.dump()), "attention_chunk_size: missing, and layer_types[2] is \"chunked_attention\""));
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

TEST_CASE("round trip under each engine: read_hf_config -> write_model_json -> read_model_json gives the same model_cost") {
  for (const pnmem::test::ref_model& ref : pnmem::test::reference_models()) {
    CAPTURE(ref.fixture);
    pnmem::test::check_json_round_trip(fixture(ref, rule(kv_engine::vllm)));
    pnmem::test::check_json_round_trip(fixture(ref, rule(kv_engine::llama_cpp)));
  }
}

TEST_CASE("keys pnmem does not read are ignored, however deep") {
  json j = small();
  const std::string text = j.dump();
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  const model_description d = read_ok(text.substr(0, text.size() - 1) + R"(, "vision_config": )" + deep + "}");
  CHECK(d.shape->groups[0].layers == 4);
}

TEST_CASE("MTP layers (the rule's mtp): DeepSeek's and GLM-5's latent layers, Qwen3-Next's and Qwen3.5's full ones") {
  engine_rule v = rule(kv_engine::vllm);
  v.mtp = true;
  engine_rule x = exact_engine;
  x.mtp = true;
  // DeepSeek-V3: num_nextn_predict_layers 1: one more 576-value latent, 62 x 1152 = 71,424 B a token.
  const model_description v3 = fixture("deepseek-v3.config.json", x);
  CHECK(kv_bytes_per_token(v3.cost, kv_format::bf16) == 62 * 1152);
  CHECK(kv_bytes_per_token(fixture("deepseek-v3.config.json", v).cost, kv_format::bf16) == 62 * 1152);
  // DeepSeek-V3.2 and GLM-5: the MTP layer attends through an indexer of its own (132 B beside it).
  CHECK(kv_bytes_per_token(fixture("deepseek-v3.2.config.json", x).cost, kv_format::bf16) == 62 * (1152 + 132));
  CHECK(kv_bytes_per_token(fixture("glm-5.config.json", x).cost, kv_format::bf16) ==
        kv_bytes_per_token(fixture("glm-5.config.json").cost, kv_format::bf16) + 1152 + 132);
  // Qwen3.5-9B: mtp_num_hidden_layers 1, a full layer of 4 KV heads x 256 (4096 B).
  const model_description q35 = fixture("qwen3.5-9b.config.json", x);
  CHECK(kv_bytes_per_token(q35.cost, kv_format::bf16) == 9 * 4096);
  // Qwen3-Next-80B: no key; vLLM's Qwen3NextMTP reads num_nextn_predict_layers, 1 when absent. Under vLLM
  // the 13 full layers are the group size: the 36 gated-delta-net layers are paid as 39.
  const model_description qn = fixture("qwen3-next-80b-a3b-thinking.config.json", v);
  const model_description qn_plain = fixture("qwen3-next-80b-a3b-thinking.config.json", rule(kv_engine::vllm));
  CHECK(kv_bytes_per_token(qn.cost, kv_format::bf16) == 13 * 2048);
  CHECK(qn.cost.state_bytes_per_seq == qn_plain.cost.state_bytes_per_seq / 36 * 39);
  json qn_two = fixture_json("qwen3-next-80b-a3b-thinking.config.json");
  qn_two["num_nextn_predict_layers"] = 2;
  CHECK(kv_bytes_per_token(read_ok(qn_two.dump(), x).cost, kv_format::bf16) == 14 * 2048);
  // Off (the default): the same configs price only the model's own layers.
  CHECK(kv_bytes_per_token(fixture("deepseek-v3.config.json").cost, kv_format::bf16) == 61 * 1152);
  // Refused, naming the key: a model with none, a family whose MTP layers pnmem does not know, the
  // llama.cpp rule.
  auto refused = [](const std::string& text, const engine_rule& e) {
    const auto r = read_hf_config(text, e);
    CHECK_FALSE(r.value.has_value());
    return r.error;
  };
  CHECK(contains(refused(model_fixture("kimi-k2-instruct.config.json"), x),
                 "num_nextn_predict_layers: 0: the model has no MTP layers"));
  CHECK(contains(refused(small().dump(), x), "num_nextn_predict_layers: the rule asks for MTP layers (mtp), but pnmem "
                                             "knows none for model_type \"llama\""));
  json no_key = fixture_json("deepseek-v3.config.json");
  no_key.erase("num_nextn_predict_layers");
  CHECK(contains(refused(no_key.dump(), x), "num_nextn_predict_layers: missing, and the rule asks for MTP layers"));
  engine_rule l = rule(kv_engine::llama_cpp);
  l.mtp = true;
  CHECK(contains(refused(model_fixture("deepseek-v3.config.json"), l), "mtp is for the vllm and exact rules"));
  // The description carries the rule: written and read back, the same costs (and "mtp": true).
  pnmem::test::check_json_round_trip(v3);
  CHECK(contains(write_model_json(v3), "\"mtp\": true"));
  CHECK_FALSE(contains(write_model_json(fixture("deepseek-v3.config.json")), "\"mtp\""));
}

TEST_CASE("vLLM with its hybrid KV-cache manager off: Gemma 3's sliding layers hold the whole context; Qwen3-Next refused") {
  engine_rule off = rule(kv_engine::vllm);
  off.hybrid_manager_off = true;
  // Gemma-3-27B: 62 layers of 16 KV heads x 128 (8192 B): all full, one group, no padding layer.
  const model_description g = fixture("gemma-3-27b-it.config.json", off);
  CHECK(g.cost.n_windows == 0);
  CHECK(kv_bytes_per_token(g.cost, kv_format::bf16) == 62 * 8192);
  CHECK(kv_and_state(g.cost, 131072) == 131072ULL * 62 * 8192);
  pnmem::test::check_json_round_trip(g);
  CHECK(contains(write_model_json(g), "\"hybrid_manager_off\": true"));
  const auto r = read_hf_config(model_fixture("qwen3-next-80b-a3b-thinking.config.json"), off);
  CHECK_FALSE(r.value.has_value());
  CHECK(contains(r.error, "engine rule: vLLM does not run a model with recurrent layers beside attention"));
  engine_rule exact_off;
  exact_off.hybrid_manager_off = true;
  CHECK(contains(read_hf_config(model_fixture("gemma-3-27b-it.config.json"), exact_off).error,
                 "hybrid_manager_off is for the vllm rule"));
}
