// Layer groups to costs (model_shape.hpp): each kind of group, the engines' rules of what a sequence
// keeps, and the figures worked out by hand from the engines' code (docs/engine-rules-research.md).
#include <doctest/doctest.h>

#include "pnmem/model_shape.hpp"

using namespace pnmem;

namespace {

constexpr std::size_t at(kv_format f) { return static_cast<std::size_t>(f); }

engine_rule rule(kv_engine e) {
  engine_rule r;
  r.engine = e;
  return r;
}

// Qwen3-Next-80B-A3B: 48 layers, every 4th full attention (2 KV heads x 256), 36 gated-delta-net layers
// (conv (4 - 1) x (2 x 16 x 128 + 32 x 128) = 24576 values, state 32 x 128 x 128 = 524288 values), bf16.
model_shape qwen3_next() {
  model_shape s;
  s.add(attention_layers(layer_kind::full, 12, 2, 256));
  s.add(recurrent_layers(36, 3 * (2 * 16 * 128 + 32 * 128), 32 * 128 * 128));
  s.query_heads = 16;
  s.hidden_size = 2048;
  s.normal_kv = kv_format::bf16;
  s.state_format = kv_format::bf16;
  s.ssm_state_format = kv_format::bf16;
  return s;
}

// Full layers and sliding ones (window W) of their own heads x dims, bf16.
model_shape full_and_sliding(std::uint32_t full, std::uint32_t full_heads, std::uint32_t full_dim, std::uint32_t sliding,
                             std::uint32_t sliding_heads, std::uint32_t sliding_dim, std::uint32_t window) {
  model_shape s;
  s.add(attention_layers(layer_kind::full, full, full_heads, full_dim));
  s.add(attention_layers(layer_kind::sliding, sliding, sliding_heads, sliding_dim, sliding_dim, window));
  s.normal_kv = kv_format::bf16;
  return s;
}

}  // namespace

TEST_CASE("a full group: K and V rows of kv_heads x dims per layer and token, in every format") {
  const model_cost m = from_shape(uniform_shape(32, 8, 128, 32, 4096));
  CHECK(m.full_kv_bytes_per_token[at(kv_format::f16)] == 2 * 32 * 8 * 128 * 2);
  CHECK(m.full_kv_bytes_per_token[at(kv_format::q8_0)] == 64 * 32 * 34);
  CHECK(m.n_windows == 0);
  CHECK(m.kv_block_tokens == 0);
  CHECK(m.state_bytes_per_seq == 0);
}

TEST_CASE("MLA: one latent row per layer, K only (DeepSeek-V3: 61 layers x (512 + 64) values)") {
  model_shape s;
  s.add(latent_layers(61, 512 + 64));
  const model_cost m = from_shape(s);
  CHECK(m.full_kv_bytes_per_token[at(kv_format::bf16)] == 61 * 576 * 2);  // 70,272 B: the figure
  CHECK(m.full_kv_bytes_per_token[at(kv_format::bf16)] == 70272);
  CHECK(m.full_kv_bytes_per_token[at(kv_format::fp8)] == 61 * 576);
  CHECK(m.full_kv_bytes_per_token[at(kv_format::q8_0)] == 61 * (576 / 32) * 34);
  // The same layers as plain heads (128 heads x 192 K / 128 V, what a reader that ignores MLA charges).
  model_shape naive;
  naive.add(attention_layers(layer_kind::full, 61, 128, 192, 128));
  CHECK(from_shape(naive).full_kv_bytes_per_token[at(kv_format::bf16)] == 61 * 128 * (192 + 128) * 2);
}

TEST_CASE("caches beside the KV: a group's side bytes count in every format, every rule, windows and blocks alike") {
  // DeepSeek-V3.2: the latent and the indexer's keys, 128 fp8 values + one fp32 scale = 132 B a layer.
  CHECK(dsa_indexer_bytes(128) == 132);
  CHECK(dsa_indexer_bytes(256) == 264);
  model_shape s;
  layer_group g = latent_layers(61, 576);
  g.side_bytes = static_cast<std::uint32_t>(dsa_indexer_bytes(128));
  s.add(g);
  const model_cost m = from_shape(s);
  for (kv_format f : all_kv_formats) {
    CAPTURE(to_string(f));
    model_shape plain;
    plain.add(latent_layers(61, 576));
    CHECK(m.full_kv_bytes_per_token[at(f)] == from_shape(plain).full_kv_bytes_per_token[at(f)] + 61 * 132);
  }
  // vLLM: the same 64-token blocks as the latent.
  const model_cost v = from_shape(s, rule(kv_engine::vllm));
  CHECK(v.kv_block_tokens == 64);
  CHECK(kv_bytes(v, kv_format::bf16, 65) == 128 * 61 * (1152 + 132));
  // A sliding group's side bytes are kept for its window only.
  model_shape w;
  layer_group swa = attention_layers(layer_kind::sliding, 10, 8, 128, 0, 4096);
  swa.side_bytes = 100;
  w.add(swa);
  const model_cost wc = from_shape(w);
  CHECK(wc.n_windows == 1);
  CHECK(kv_bytes(wc, kv_format::f16, 10000) == 4096 * 10 * (2 * 8 * 128 * 2 + 100));
  // A recurrent group has no tokens to keep them for.
  model_shape r;
  layer_group state = recurrent_layers(4, 10, 10);
  state.side_bytes = 1;
  r.add(state);
  CHECK(validate(r) == "a recurrent group with side caches (they are per token)");
}

TEST_CASE("windows: sliding and chunked groups keep their span under the exact rule; equal spans share a term") {
  model_shape s;
  s.add(attention_layers(layer_kind::full, 12, 8, 128));
  s.add(attention_layers(layer_kind::chunked, 36, 8, 128, 128, 8192));
  s.add(attention_layers(layer_kind::sliding, 4, 8, 128, 128, 8192));  // the same span: the same term
  s.add(attention_layers(layer_kind::sliding, 2, 4, 256, 256, 512));
  const model_cost m = from_shape(s);
  REQUIRE(validate(m).empty());
  REQUIRE(m.n_windows == 2);
  CHECK(m.windows[0].window == 512);
  CHECK(m.windows[0].bytes_per_token[at(kv_format::f16)] == 2 * 2 * 4 * 256 * 2);
  CHECK(m.windows[1].window == 8192);
  CHECK(m.windows[1].bytes_per_token[at(kv_format::f16)] == 40 * 2 * 8 * 128 * 2);
  CHECK(m.full_kv_bytes_per_token[at(kv_format::f16)] == 12 * 2 * 8 * 128 * 2);
}

TEST_CASE("more distinct windows than terms: the extra bytes go to a larger window (an over-estimate)") {
  model_shape s;
  for (std::uint32_t w : {100u, 200u, 300u, 400u, 250u, 1000u}) s.add(attention_layers(layer_kind::sliding, 1, 1, 32, 32, w));
  const model_cost m = from_shape(s);
  REQUIRE(validate(m).empty());
  REQUIRE(m.n_windows == max_kv_windows);
  for (std::uint64_t n : {50u, 150u, 260u, 350u, 900u, 5000u}) {
    std::uint64_t exact = 0;
    for (std::uint64_t w : {100u, 200u, 300u, 400u, 250u, 1000u}) exact += 128 * (n < w ? n : w);
    CAPTURE(n);
    CHECK(kv_bytes(m, kv_format::f16, n) >= exact);
  }
  CHECK(kv_bytes(m, kv_format::f16, 5000) == 128 * (100 + 200 + 300 + 300 + 1000 + 1000));  // 250 moved up to 300, 400 to 1000
}

TEST_CASE("vLLM keeps W - 1 + max_batched_tokens (+1 block) on a sliding layer, C + max_batched_tokens on a chunked one") {
  engine_rule v = rule(kv_engine::vllm);
  v.max_batched_tokens = 2048;
  CHECK(kept_tokens(v, layer_kind::sliding, 4096, 16) == (256 + 128 + 1) * 16);  // ceil(6143 / 16) = 384, + 1 block
  CHECK(kept_tokens(v, layer_kind::sliding, 128, 16) == (136 + 1) * 16);  // ceil(2175 / 16) = 136
  CHECK(kept_tokens(v, layer_kind::chunked, 8192, 16) == (8192 + 2048));
  v.max_batched_tokens = 8192;  // the default
  CHECK(engine_rule{}.max_batched_tokens == 8192);
  CHECK(kept_tokens(v, layer_kind::chunked, 8192, 16) == 16384);
  model_shape s;
  s.add(attention_layers(layer_kind::sliding, 21, 8, 256, 256, 4096));
  s.add(attention_layers(layer_kind::full, 21, 8, 256));
  const model_cost m = from_shape(s, v);
  CHECK(m.kv_block_tokens == 16);
  REQUIRE(m.n_windows == 1);
  CHECK(m.windows[0].window == (768 + 1) * 16);  // ceil(12287 / 16) = 768, + 1 block
}

TEST_CASE("llama.cpp keeps pad256(W x seqs + ubatch) cells for the sequences sharing a SWA cache") {
  engine_rule l = rule(kv_engine::llama_cpp);
  CHECK(kept_tokens(l, layer_kind::sliding, 4096, 256) == 4608);  // pad256(4096 + 512)
  CHECK(kept_tokens(l, layer_kind::sliding, 1024, 256) == 1536);
  CHECK(kept_tokens(l, layer_kind::sliding, 128, 256) == 768);    // GPT-OSS: pad256(640)
  CHECK(kept_tokens(l, layer_kind::chunked, 8192, 256) == 8704);  // Llama 4
  l.seqs = 4;                                                      // llama-server -np auto: 4 sequences, unified
  CHECK(kept_tokens(l, layer_kind::sliding, 4096, 256) == (4 * 4096 + 512) / 4);
  CHECK(from_shape(uniform_shape(32, 8, 128, 32, 4096), l).kv_block_tokens == 256);  // n_ctx padded to 256
}

TEST_CASE("recurrent state: Qwen3-Next per sequence, as each engine holds it") {
  // exact: the raw state in bf16: 36 x (24576 + 524288) x 2 B.
  CHECK(from_shape(qwen3_next()).state_bytes_per_seq == 36ULL * (24576 + 524288) * 2);
  CHECK(from_shape(qwen3_next()).state_bytes_per_seq == 39518208);  // 37.69 MiB
  CHECK(kv_bytes_per_token(from_shape(qwen3_next()), kv_format::bf16) == 24576);
  // vLLM: the attention block is raised until a page of one attention layer (2048 B a token) holds one
  // layer's state: 16 x ceil(1,097,728 / (16 x 2048)) = 544 tokens; each state is padded to that page.
  const model_cost v = from_shape(qwen3_next(), rule(kv_engine::vllm));
  CHECK(v.kv_block_tokens == 544);
  CHECK(v.state_bytes_per_seq == 36ULL * 544 * 2048);
  CHECK(v.state_bytes_per_seq == 40108032);  // 38.25 MiB
  engine_rule align = rule(kv_engine::vllm);
  align.state_copies = 2;  // prefix caching on a hybrid
  CHECK(from_shape(qwen3_next(), align).state_bytes_per_seq == 2 * 40108032ULL);
  engine_rule fp32_ssm = rule(kv_engine::vllm);
  fp32_ssm.ssm_state_fp32 = true;  // conv bf16 49,152 + SSM fp32 2,097,152 = 2,146,304 -> block 1056
  const model_cost f = from_shape(qwen3_next(), fp32_ssm);
  CHECK(f.kv_block_tokens == 1056);
  CHECK(f.state_bytes_per_seq == 36ULL * 1056 * 2048);
  // llama.cpp: f32 conv and state, unpadded: 36 x (24576 + 524288) x 4 B = 75.375 MiB.
  const model_cost l = from_shape(qwen3_next(), rule(kv_engine::llama_cpp));
  CHECK(l.state_bytes_per_seq == 79036416);
  CHECK(l.kv_block_tokens == 256);
}

TEST_CASE("vLLM's MLA block is at least 64 tokens (FlashMLA)") {
  model_shape s;
  s.add(latent_layers(61, 576));
  CHECK(from_shape(s, rule(kv_engine::vllm)).kv_block_tokens == 64);
  engine_rule big = rule(kv_engine::vllm);
  big.block_tokens = 128;
  CHECK(from_shape(s, big).kv_block_tokens == 128);
}

TEST_CASE("cross-attention: KV per encoder item, nothing per text token") {
  model_shape s = uniform_shape(32, 8, 128, 32, 4096);
  s.add(attention_layers(layer_kind::cross, 8, 8, 128, 128, 4 * 1601));
  const model_cost m = from_shape(s);
  CHECK(m.kv_bytes_per_encoder_item[at(kv_format::bf16)] == 8ULL * 2 * 8 * 128 * 2 * 6404);
  CHECK(m.full_kv_bytes_per_token[at(kv_format::bf16)] == 32ULL * 2 * 8 * 128 * 2);
}

TEST_CASE("validate names what is wrong with a shape and a rule") {
  model_shape s;
  CHECK(validate(s).empty());
  s.add(attention_layers(layer_kind::sliding, 2, 1, 64));  // no span
  CHECK(validate(s) == "a sliding, chunked or cross group with a span of 0");
  engine_rule e;
  CHECK(validate(e).empty());
  e.block_tokens = 0;
  CHECK(validate(e) == "block_tokens is 0");
  layer_kind k{};
  CHECK((parse_layer_kind("chunked", k) && k == layer_kind::chunked));
  CHECK_FALSE(parse_layer_kind("mamba", k));
  kv_engine en{};
  CHECK((parse_kv_engine("llama.cpp", en) && en == kv_engine::llama_cpp));
  CHECK((parse_kv_engine("vllm", en) && en == kv_engine::vllm));
  CHECK_FALSE(parse_kv_engine("sglang", en));
}

TEST_CASE("vLLM's hybrid allocator pads each kind of layer to whole groups, and every sequence pays for them") {
  // Gemma-3-4B: 29 sliding + 5 full layers (4 KV heads x 256): group size 5, the sliding kind becomes
  // 6 groups = 30 layers (one padding layer).
  model_shape g;
  g.add(attention_layers(layer_kind::full, 5, 4, 256));
  g.add(attention_layers(layer_kind::sliding, 29, 4, 256, 256, 1024));
  engine_rule v = rule(kv_engine::vllm);
  const model_cost m = from_shape(g, v);
  CHECK(m.full_kv_bytes_per_token[at(kv_format::bf16)] == 5 * 4096);
  REQUIRE(m.n_windows == 1);
  CHECK(m.windows[0].bytes_per_token[at(kv_format::bf16)] == 30 * 4096);
  CHECK(from_shape(g).windows[0].bytes_per_token[at(kv_format::bf16)] == 29 * 4096);  // exact: no padding
  // Two kinds within 1.5x of each other: the group is the larger count, the smaller kind padded to it.
  model_shape near;
  near.add(attention_layers(layer_kind::full, 10, 8, 128));
  near.add(attention_layers(layer_kind::sliding, 12, 8, 128, 128, 4096));
  const model_cost n = from_shape(near, v);
  CHECK(n.full_kv_bytes_per_token[at(kv_format::f16)] == 12 * 4096);
  CHECK(n.windows[0].bytes_per_token[at(kv_format::f16)] == 12 * 4096);
  // Nemotron-3-Nano: 23 Mamba-2 + 6 attention layers: the Mamba kind is paid as 24 layers of state.
  model_shape h;
  h.add(attention_layers(layer_kind::full, 6, 2, 128));
  h.add(recurrent_layers(23, 18432, 524288));
  h.normal_kv = kv_format::bf16;
  h.state_format = kv_format::bf16;
  h.ssm_state_format = kv_format::fp32;
  const model_cost hm = from_shape(h, v);
  // The state page: conv 18432 x 2 B + SSM 524288 x 4 B = 2,134,016 B; an attention layer holds 1024 B
  // a token, so the block is 16 x ceil(2,134,016 / 16,384) = 2096 tokens and a page 2,146,304 B.
  CHECK(hm.kv_block_tokens == 2096);
  CHECK(hm.state_bytes_per_seq == 24ULL * 2096 * 1024);
  // One kind only (a plain model): nothing is padded.
  CHECK(from_shape(uniform_shape(7, 8, 128, 32, 4096), v).full_kv_bytes_per_token[at(kv_format::f16)] == 7 * 4096);
}

TEST_CASE("vLLM's hybrid allocator keeps one page size: a smaller page gets a larger block, or is padded to the largest") {
  engine_rule v = rule(kv_engine::vllm);
  // Gemma-4-31B's kinds: 10 full layers of 4 KV heads x 512 (8192 B a token in bf16) and 50 sliding
  // (window 1024) of 16 x 256 (16384 B). The full layers' page is half: their block is 32. model_cost
  // rounds every layer to 32; the window is counted in the sliding layers' own blocks of 16.
  const model_cost m = from_shape(full_and_sliding(10, 4, 512, 50, 16, 256, 1024), v);
  CHECK(m.kv_block_tokens == 32);
  REQUIRE(m.n_windows == 1);
  CHECK(m.windows[0].window == (576 + 1) * 16);  // ceil(9215 / 16) = 576, + 1 block
  CHECK(kv_bytes(m, kv_format::bf16, 1040) == 1056ULL * (10 * 8192 + 50 * 16384));
  // A page that does not divide the largest is padded to it: 3 KV heads x 128 (1536 B a token) beside
  // 2 x 128 (1024 B): the smaller page's layers are charged 1536 B a token, in blocks of 16.
  const model_shape odd = full_and_sliding(4, 3, 128, 4, 2, 128, 4096);
  const model_cost o = from_shape(odd, v);
  CHECK(o.kv_block_tokens == 16);
  REQUIRE(o.n_windows == 1);
  CHECK(o.windows[0].bytes_per_token[at(kv_format::bf16)] == 4 * 1536);
  CHECK(o.windows[0].bytes_per_token[at(kv_format::fp8)] == 4 * 768);  // scaled as the normal format's
  CHECK(o.full_kv_bytes_per_token[at(kv_format::bf16)] == 4 * 1536);
  CHECK(from_shape(odd).windows[0].bytes_per_token[at(kv_format::bf16)] == 4 * 1024);  // exact: its own rows
  // Every layer full, rows of two sizes (Nemotron-NAS's blocks): one group (UniformTypeKVCacheSpecs), each
  // layer its own page in blocks of 16: neither a larger block nor padding layers.
  model_shape nas;
  nas.add(attention_layers(layer_kind::full, 7, 8, 128));
  nas.add(attention_layers(layer_kind::full, 2, 4, 128));
  const model_cost n = from_shape(nas, v);
  CHECK(n.kv_block_tokens == 16);
  CHECK(n.full_kv_bytes_per_token[at(kv_format::f16)] == 7 * 4096 + 2 * 2048);
}

TEST_CASE("vLLM with its hybrid KV-cache manager off: sliding and chunked layers hold the whole context, in one group") {
  engine_rule off = rule(kv_engine::vllm);
  off.hybrid_manager_off = true;
  CHECK(validate(off).empty());
  // Gemma-3-4B: 5 full + 29 sliding layers of 4 KV heads x 256 (4096 B in bf16): every layer full, no
  // padding layer (the hybrid manager would pay 30 sliding).
  model_shape g;
  g.add(attention_layers(layer_kind::full, 5, 4, 256));
  g.add(attention_layers(layer_kind::sliding, 29, 4, 256, 256, 1024));
  g.normal_kv = kv_format::bf16;
  const model_cost m = from_shape(g, off);
  CHECK(m.n_windows == 0);
  CHECK(m.full_kv_bytes_per_token[at(kv_format::bf16)] == 34 * 4096);
  CHECK(m.kv_block_tokens == 16);
  CHECK(kv_bytes(m, kv_format::bf16, 100000) == 100000ULL * 34 * 4096);
  CHECK(layout_of(g, off).hybrid == false);
  // Llama 4's chunked layers likewise (vLLM turns the manager off for chunked attention by default in
  // the versions whose log says so).
  model_shape l4;
  l4.add(attention_layers(layer_kind::full, 12, 8, 128));
  l4.add(attention_layers(layer_kind::chunked, 36, 8, 128, 128, 8192));
  l4.normal_kv = kv_format::bf16;
  CHECK(from_shape(l4, off).n_windows == 0);
  CHECK(from_shape(l4, off).full_kv_bytes_per_token[at(kv_format::bf16)] == 48 * 4096);
  CHECK(from_shape(l4, rule(kv_engine::vllm)).n_windows == 1);  // on: the chunk and a prefill chunk
  // Recurrent layers beside attention cannot be held so: vLLM refuses to start, and so do the readers.
  CHECK(rule_problem(qwen3_next(), off).find("recurrent layers beside attention") != std::string_view::npos);
  CHECK(rule_problem(qwen3_next(), rule(kv_engine::vllm)).empty());
  CHECK(rule_problem(g, off).empty());
  // Another rule's: refused by validate.
  engine_rule exact_off;
  exact_off.hybrid_manager_off = true;
  CHECK(validate(exact_off) == "hybrid_manager_off is for the vllm rule");
  engine_rule llama_mtp = rule(kv_engine::llama_cpp);
  llama_mtp.mtp = true;
  CHECK(validate(llama_mtp).find("mtp is for the vllm and exact rules") == 0);
}
