// tests/model_files/engine_reference.hpp - what vLLM and llama.cpp allocate for one sequence, computed
// here from a model written down by hand, independently of pnmem's from_shape.
//
// Each fixture config of a public model (tests/fixtures/models) is described below as its layers' KV
// bytes per token (bf16, from its heads and dims: the arithmetic is in the comments) and its recurrent
// state in values, read off the config by hand. The engines' rules (docs/engine-rules-research.md,
// with the engines' source cited there):
//
//   vLLM       KV in blocks of 16 tokens (64 for MLA: FlashMLA; for a hybrid with recurrent layers the
//              block grows to 16 x ceil(state / (16 x an attention layer's bytes per token)) so that one
//              attention page holds one layer's state, and each state is padded to that page). At its
//              peak, with a prefill chunk of max_num_batched_tokens B in flight, a sliding layer holds
//              min(ceil(n / bs), ceil((W - 1 + B) / bs) + 1) blocks, a chunked one min(ceil(n / bs),
//              ceil((C + B) / bs)). With kinds of layer that keep different tokens (or state beside
//              attention) its hybrid allocator pads each kind to whole groups of group_size layers (the
//              fewest of any kind, or the most when under 1.5x the fewest), and gives a kind whose page
//              (bs x its bytes per token) is smaller than the largest a block as many times larger
//              (kv_cache_utils.py unify_kv_cache_spec_page_size). Recurrent state in the model dtype (the SSM state in fp32 where
//              the config or vLLM's model code says so).
//   llama.cpp  n_ctx = pad256(n) cells in every full layer (MLA: the K row only); a sliding or chunked
//              layer pad256(min(n_ctx, W + ubatch)) cells (one sequence, ubatch 512); Phi-3's and
//              Llama-arch Mistral's windows are not used; recurrent state in f32.
//   exact      n tokens in a full layer, min(n, W) in a sliding one; state in the model dtype.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace pnmem::test {

struct ref_layers {
  enum kind_t { full, sliding, chunked, latent } kind;
  std::uint64_t layers;
  std::uint64_t bytes_per_token;  // one layer's KV per token in bf16
  std::uint64_t span = 0;         // sliding window / chunk
  // DeepSeek Sparse Attention's indexer keys beside the KV, per token and layer: vLLM (and exact) keep
  // index_head_dim fp8 values + an fp32 scale per 128 (bytes, in every KV dtype); llama.cpp a second
  // K-only cache of index_head_dim values in the KV's type (here bf16).
  std::uint64_t side_bytes = 0;
  std::uint64_t llama_cpp_side_bytes = 0;
};

struct ref_state {
  std::uint64_t layers = 0;
  std::uint64_t conv_values = 0;  // per layer
  std::uint64_t ssm_values = 0;   // per layer
  bool ssm_fp32 = false;          // the SSM state is kept in fp32 (vLLM; exact)
};

struct ref_model {
  std::string fixture;  // tests/fixtures/models/<fixture>, or a name for config_text
  std::vector<ref_layers> attention;  // one entry per kind of layer
  ref_state state{};
  std::uint64_t cross_layers = 0;      // cross-attention layers (Mllama)
  std::uint64_t cross_bytes_per_token = 0;
  std::uint64_t cross_tokens_per_image = 0;
  bool llama_cpp_no_swa = false;  // llama.cpp ignores the window (Phi-3; Mistral as the Llama arch)
  std::string config_text{};      // the config itself, for a model with no public copy to keep as a fixture
};

inline std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }
inline std::uint64_t round_up(std::uint64_t a, std::uint64_t b) { return ceil_div(a, b) * b; }

inline std::uint64_t state_layer_bytes(const ref_state& s, bool f32) {
  return s.conv_values * (f32 ? 4 : 2) + s.ssm_values * (f32 || s.ssm_fp32 ? 4 : 2);
}

// The model's own need: n tokens, windows as written, state in bf16 (fp32 SSM where marked).
inline std::uint64_t exact_bytes(const ref_model& m, std::uint64_t n) {
  std::uint64_t b = 0;
  for (const ref_layers& l : m.attention) {
    const std::uint64_t kept = l.kind == ref_layers::sliding || l.kind == ref_layers::chunked ? std::min(n, l.span) : n;
    b += l.layers * (l.bytes_per_token + l.side_bytes) * kept;
  }
  return b + m.state.layers * state_layer_bytes(m.state, false);
}

struct vllm_settings {
  std::uint64_t block = 16;
  std::uint64_t max_batched_tokens = 8192;
};

inline std::uint64_t vllm_bytes(const ref_model& m, std::uint64_t n, vllm_settings v = {}) {
  std::uint64_t bs = v.block;
  std::uint64_t attn_1tok = 0;
  for (const ref_layers& l : m.attention) {
    if (l.kind == ref_layers::latent) bs = round_up(bs, 64);
    attn_1tok = std::max(attn_1tok, l.bytes_per_token + l.side_bytes);
  }
  const std::uint64_t raw_state = state_layer_bytes(m.state, false);
  std::uint64_t state_page = raw_state;
  if (m.state.layers > 0 && attn_1tok > 0) {
    bs = std::max(bs, bs * ceil_div(raw_state, bs * attn_1tok));
    state_page = std::max(raw_state, bs * attn_1tok);
  }
  // The hybrid allocator (kinds of layer that keep different tokens, or state beside attention): its
  // groups, and one page size for all, a kind with a smaller page getting a larger block.
  bool hybrid = m.state.layers > 0 && !m.attention.empty();
  for (const ref_layers& l : m.attention) {
    hybrid = hybrid || l.kind != m.attention.front().kind || l.span != m.attention.front().span;
  }
  std::vector<std::uint64_t> counts;
  for (const ref_layers& l : m.attention) counts.push_back(l.layers);
  if (m.state.layers > 0) counts.push_back(m.state.layers);
  std::uint64_t group = 0;
  if (hybrid && counts.size() > 1) {
    const std::uint64_t fewest = *std::min_element(counts.begin(), counts.end());
    const std::uint64_t most = *std::max_element(counts.begin(), counts.end());
    group = 2 * most < 3 * fewest ? most : fewest;
  }
  auto paid = [&](std::uint64_t layers) { return group == 0 ? layers : round_up(layers, group); };
  std::uint64_t b = 0;
  for (const ref_layers& l : m.attention) {
    const std::uint64_t row = l.bytes_per_token + l.side_bytes;
    // (The fixtures' pages divide the largest: no page is padded.)
    const std::uint64_t kbs = hybrid ? bs * (attn_1tok / row) : bs;
    std::uint64_t blocks = ceil_div(n, kbs);
    if (l.kind == ref_layers::sliding) blocks = std::min(blocks, ceil_div(l.span - 1 + v.max_batched_tokens, kbs) + 1);
    if (l.kind == ref_layers::chunked) blocks = std::min(blocks, ceil_div(l.span + v.max_batched_tokens, kbs));
    b += paid(l.layers) * row * blocks * kbs;
  }
  return b + paid(m.state.layers) * state_page;
}

inline std::uint64_t llama_cpp_bytes(const ref_model& m, std::uint64_t n, std::uint64_t ubatch = 512) {
  const std::uint64_t n_ctx = round_up(n, 256);
  std::uint64_t b = 0;
  for (const ref_layers& l : m.attention) {
    std::uint64_t cells = n_ctx;
    if ((l.kind == ref_layers::sliding || l.kind == ref_layers::chunked) && !m.llama_cpp_no_swa) {
      cells = round_up(std::min(n_ctx, l.span + ubatch), 256);
    }
    b += l.layers * (l.bytes_per_token + l.llama_cpp_side_bytes) * cells;
  }
  return b + m.state.layers * state_layer_bytes(m.state, true);
}

// MiMo-V2-Flash's config (see reference_models): 48 layers, full at 0 and every layer i with (i + 1) % 6 == 0.
inline std::string mimo_v2_flash_config() {
  std::string pattern;
  for (int i = 0; i < 48; ++i) pattern += std::string(i == 0 ? "" : ", ") + (i == 0 || (i + 1) % 6 == 0 ? "0" : "1");
  return R"({"architectures": ["MiMoV2FlashForCausalLM"], "model_type": "mimo_v2_flash", "torch_dtype": "bfloat16",
    "num_hidden_layers": 48, "hidden_size": 4096, "intermediate_size": 16384, "num_attention_heads": 64,
    "num_key_value_heads": 4, "head_dim": 192, "v_head_dim": 128, "vocab_size": 152576,
    "max_position_embeddings": 262144, "rope_theta": 5000000, "partial_rotary_factor": 0.334,
    "hybrid_layer_pattern": [)" + pattern + R"(], "sliding_window_size": 128, "sliding_window": 128,
    "attention_chunk_size": 128, "swa_rope_theta": 10000, "swa_num_key_value_heads": 8,
    "swa_num_attention_heads": 64, "swa_head_dim": 192, "swa_v_head_dim": 128,
    "add_swa_attention_sink_bias": true, "add_full_attention_sink_bias": false, "attention_value_scale": 0.707,
    "n_routed_experts": 256, "moe_intermediate_size": 2048, "num_experts_per_tok": 8})";
}

// --- the fixtures, by hand ------------------------------------------------------------------------------
// A layer of kv_heads x head_dim K and V rows in bf16: 2 x kv_heads x head_dim x 2 B per token.

inline std::vector<ref_model> reference_models() {
  using L = ref_layers;
  std::vector<ref_model> v;
  // Llama-3-8B: 32 layers x 8 KV heads x 128 (4096 / 32): 2 x 8 x 128 x 2 = 4096 B.
  v.push_back({"llama-3-8b.config.json", {{L::full, 32, 4096}}});
  // Qwen2.5-7B: 28 x 4 KV heads x 128 (3584 / 28): 2048 B; sliding_window set but use_sliding_window false.
  v.push_back({"qwen2.5-7b.config.json", {{L::full, 28, 2048}}});
  // Mistral-7B-v0.1: every one of 32 layers slides (4096), 8 KV heads x 128: 4096 B.
  v.push_back({"mistral-7b-v0.1.config.json", {{L::sliding, 32, 4096, 4096}}, {}, 0, 0, 0, true});
  // Devstral-Small-2 (mistral3 / ministral3 text): 40 x 8 KV heads x head_dim 128 (not 5120 / 32 = 160).
  v.push_back({"devstral-small-2-24b-instruct.config.json", {{L::full, 40, 4096}}});
  // Qwen3-32B: 64 x 8 KV heads x 128 (given; 5120 / 64 = 80 would halve it... and more).
  v.push_back({"qwen3-32b.config.json", {{L::full, 64, 4096}}});
  // Qwen3-30B-A3B (MoE): 48 x 4 KV heads x 128: 2048 B.
  v.push_back({"qwen3-30b-a3b.config.json", {{L::full, 48, 2048}}});
  // Phi-4 (phi3): 40 x 10 KV heads x 128 (5120 / 40): 5120 B; no window.
  v.push_back({"phi-4.config.json", {{L::full, 40, 5120}}});
  // Phi-3-mini-4k: 32 x 32 KV heads x 96 (3072 / 32): 12288 B, every layer sliding 2047 (vLLM);
  // llama.cpp disables Phi-3's window.
  v.push_back({"phi-3-mini-4k-instruct.config.json", {{L::sliding, 32, 12288, 2047}}, {}, 0, 0, 0, true});
  // Gemma-2-9B: 42 layers alternating (even ones slide, 4096), 8 KV heads x 256: 8192 B.
  v.push_back({"gemma-2-9b.config.json", {{L::full, 21, 8192}, {L::sliding, 21, 8192, 4096}}});
  // Gemma-3-1B: 26 layers, every 6th full (4), 22 slide (512), 1 KV head x 256: 1024 B.
  v.push_back({"gemma-3-1b-it.config.json", {{L::full, 4, 1024}, {L::sliding, 22, 1024, 512}}});
  // Gemma-3-4B: text_config has no heads: Gemma3TextConfig's 4 KV heads x 256 (4096 B); 34 layers,
  // 5 full (5, 11, 17, 23, 29), 29 sliding (1024).
  v.push_back({"gemma-3-4b-it.config.json", {{L::full, 5, 4096}, {L::sliding, 29, 4096, 1024}}});
  // Gemma-3-27B: 62 layers, 10 full, 52 sliding (1024), 16 KV heads x 128: 8192 B.
  v.push_back({"gemma-3-27b-it.config.json", {{L::full, 10, 8192}, {L::sliding, 52, 8192, 1024}}});
  // Gemma-4-31B: 60 layers, every 6th full (10): 4 global KV heads (attention_k_eq_v) x global_head_dim
  // 512 = 8192 B; 50 sliding (1024): 16 KV heads x 256 = 16384 B.
  v.push_back({"gemma-4-31b-it.config.json", {{L::full, 10, 8192}, {L::sliding, 50, 16384, 1024}}});
  // Gemma-4-E2B: 35 layers, the last 20 share KV (num_kv_shared_layers): of the first 15, every 5th full
  // (4, 9, 14): 1 KV head x 512 = 2048 B; 12 sliding (512): 1 KV head x 256 = 1024 B.
  v.push_back({"gemma-4-e2b-it.config.json", {{L::full, 3, 2048}, {L::sliding, 12, 1024, 512}}});
  // gpt-oss-20b: 24 layers alternating sliding (128) and full, 8 KV heads x 64: 2048 B.
  v.push_back({"gpt-oss-20b.config.json", {{L::sliding, 12, 2048, 128}, {L::full, 12, 2048}}});
  // MLA: one latent row of kv_lora_rank 512 + qk_rope_head_dim 64 = 576 values: 1152 B per layer.
  v.push_back({"deepseek-v2-lite.config.json", {{L::latent, 27, 1152}}});  // 27 layers
  v.push_back({"deepseek-v3.config.json", {{L::latent, 61, 1152}}});       // 61: 70,272 B per token
  v.push_back({"kimi-k2-instruct.config.json", {{L::latent, 61, 1152}}});
  // DeepSeek Sparse Attention: the same latent, and in every layer the lightning indexer's keys,
  // index_head_dim 128: vLLM 128 fp8 + one fp32 scale = 132 B; llama.cpp 128 values of the KV's type,
  // 256 B in bf16. DeepSeek-V3.2: 61 layers (1284 B each under vLLM: 78,324 B per token).
  v.push_back({"deepseek-v3.2.config.json", {{L::latent, 61, 1152, 0, 132, 256}}});
  // GLM-5 (glm_moe_dsa): 78 layers, kv_lora_rank 512 + qk_rope_head_dim 64, index_head_dim 128
  // (its head_dim 64 and v_head_dim 256 are the attention heads', not the cache's).
  v.push_back({"glm-5.config.json", {{L::latent, 78, 1152, 0, 132, 256}}});
  // MiniMax-M2: attn_type_list all 1 (softmax attention), 62 layers x 8 KV heads x head_dim 128: 4096 B.
  v.push_back({"minimax-m2.config.json", {{L::full, 62, 4096}}});
  // gpt-oss-120b: 36 layers alternating sliding (128) and full, 8 KV heads x 64: 2048 B.
  v.push_back({"gpt-oss-120b.config.json", {{L::sliding, 18, 2048, 128}, {L::full, 18, 2048}}});
  // MiMo-V2.5-Pro (model_type mimo_v2, MiMo-V2-Flash's architecture): 70 layers, hybrid_layer_pattern 0
  // (full) at 0, 7, 15, 23, 31, 39, 47, 55, 62, 69: 10 full layers of 8 KV heads x (K 192 + V 128) =
  // 8 x 320 x 2 = 5120 B, 60 sliding (sliding_window_size 128) of swa_num_key_value_heads 8 x (192 + 128):
  // 5120 B.
  v.push_back({"mimo-v2.5-pro.config.json", {{L::full, 10, 5120}, {L::sliding, 60, 5120, 128}}});
  // MiMo-V2-Flash: 48 layers, hybrid_layer_pattern 0 (full) at 0, 5, 11, ..., 47: 9 full layers of 4
  // KV heads x (K 192 + V 128) = 4 x 320 x 2 = 2560 B; 39 sliding (128 tokens) of 8 KV heads x (192 + 128):
  // 5120 B. No public copy of its config.json was found to keep as a fixture (tests/fixtures/models/
  // README.md): the config below holds the keys of a public test's copy (NVIDIA Megatron-Bridge's
  // _MIMO_V2_FLASH_CONFIG, cut to 6 layers there) with the 48-layer values that public copies agree on.
  v.push_back({"mimo-v2-flash (assembled)", {{L::full, 9, 2560}, {L::sliding, 39, 5120, 128}}, {}, 0, 0, 0, false,
               mimo_v2_flash_config()});
  // Llama-3.2-90B-Vision: 100 layers, 20 of them cross-attention (3, 8, ..., 98); 80 self-attention
  // of 8 KV heads x 128 (8192 / 64): 4096 B. An image: 4 tiles x ((560 / 14)^2 + 1) = 6404 tokens.
  v.push_back({"llama-3.2-90b-vision-instruct.config.json", {{L::full, 80, 4096}}, {}, 20, 4096, 6404});
  // Llama-3.3-Nemotron-Super-49B: 80 blocks, 31 without attention (no_op), 49 of 64 / 8 = 8 KV heads x
  // 128 (8192 / 64): 4096 B.
  v.push_back({"llama-3.3-nemotron-super-49b-v1.config.json", {{L::full, 49, 4096}}});
  // Qwen3-Next-80B-A3B: 48 layers, every 4th full (12) of 2 KV heads x 256: 2048 B; 36 gated delta net:
  // conv (4 - 1) x (2 x 16 x 128 + 32 x 128) = 24576, state 32 x 128 x 128 = 524288 values.
  v.push_back({"qwen3-next-80b-a3b-thinking.config.json", {{L::full, 12, 2048}}, {36, 24576, 524288, false}});
  // Qwen3.5-9B: 32 layers, 8 full of 4 KV heads x 256: 4096 B; 24 gated delta net (same linear_* as
  // Qwen3-Next); mamba_ssm_dtype float32.
  v.push_back({"qwen3.5-9b.config.json", {{L::full, 8, 4096}}, {24, 24576, 524288, true}});
  // Nemotron-3-Nano-30B-A3B: pattern of 52: 6 '*' attention (2 KV heads x 128: 1024 B), 23 'M' Mamba-2:
  // inner 64 heads x 64 = 4096, conv 3 x (4096 + 2 x 8 groups x 128) = 18432, SSM 64 x 64 x 128 = 524288;
  // mamba_ssm_cache_dtype float32.
  v.push_back({"nemotron-3-nano-30b-a3b.config.json", {{L::full, 6, 1024}}, {23, 18432, 524288, true}});
  // Jamba-1.5-Mini: 32 layers, attention at i % 8 == 4 (4 layers) of 8 KV heads x 128: 4096 B; 28 Mamba-1:
  // inner 2 x 4096 = 8192, conv 3 x 8192 = 24576, SSM 8192 x 16 = 131072.
  v.push_back({"ai21-jamba-1.5-mini.config.json", {{L::full, 4, 4096}}, {28, 24576, 131072, false}});
  // Mamba-Codestral-7B (mamba2): 64 layers, inner 2 x 4096 = 8192 = 128 heads x 64; conv 3 x (8192 + 2 x 8
  // x 128) = 30720, SSM 128 x 64 x 128 = 1048576.
  v.push_back({"mamba-codestral-7b-v0.1.config.json", {}, {64, 30720, 1048576, false}});
  return v;
}

}  // namespace pnmem::test
