// tests/model_files/gguf_writer.hpp - writes GGUF headers and metadata for the tests, from ggml's
// docs/gguf.md (versions 2 and 3), independently of the reader: no tensor infos, no tensor data.
//
//   gguf_writer w;                        // version 3, tensor_count 0
//   w.str("general.architecture", "llama").u32("llama.block_count", 32);
//   std::string bytes = w.bytes();        // "GGUF", version, tensor_count, kv count, the KVs
//
// raw_kv() appends any bytes as a KV (for malformed values); count_override() and the header fields
// can be set to anything, so the tests can write broken files too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pnmem::test {

enum class gguf_t : std::uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
  string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};

// `v`'s low `size` bytes, little-endian.
inline std::string le(std::uint64_t v, std::size_t size) {
  std::string out;
  for (std::size_t i = 0; i < size; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}

inline std::string gguf_string(std::string_view s) { return le(s.size(), 8) + std::string(s); }

class gguf_writer {
 public:
  explicit gguf_writer(std::uint32_t version = 3, std::uint64_t tensor_count = 0)
      : version_(version), tensor_count_(tensor_count) {}

  gguf_writer& u8(std::string_view key, std::uint8_t v) { return kv(key, gguf_t::u8, le(v, 1)); }
  gguf_writer& i8(std::string_view key, std::int8_t v) { return kv(key, gguf_t::i8, le(static_cast<std::uint8_t>(v), 1)); }
  gguf_writer& u16(std::string_view key, std::uint16_t v) { return kv(key, gguf_t::u16, le(v, 2)); }
  gguf_writer& i16(std::string_view key, std::int16_t v) { return kv(key, gguf_t::i16, le(static_cast<std::uint16_t>(v), 2)); }
  gguf_writer& u32(std::string_view key, std::uint32_t v) { return kv(key, gguf_t::u32, le(v, 4)); }
  gguf_writer& i32(std::string_view key, std::int32_t v) { return kv(key, gguf_t::i32, le(static_cast<std::uint32_t>(v), 4)); }
  gguf_writer& u64(std::string_view key, std::uint64_t v) { return kv(key, gguf_t::u64, le(v, 8)); }
  gguf_writer& i64(std::string_view key, std::int64_t v) { return kv(key, gguf_t::i64, le(static_cast<std::uint64_t>(v), 8)); }
  gguf_writer& f32(std::string_view key, float v) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &v, 4);
    return kv(key, gguf_t::f32, le(bits, 4));
  }
  gguf_writer& f64(std::string_view key, double v) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &v, 8);
    return kv(key, gguf_t::f64, le(bits, 8));
  }
  gguf_writer& boolean(std::string_view key, bool v) { return kv(key, gguf_t::boolean, le(v ? 1 : 0, 1)); }
  gguf_writer& str(std::string_view key, std::string_view v) { return kv(key, gguf_t::string, gguf_string(v)); }

  // Arrays of fixed-size integers: elem gives the element type (and so the element size).
  gguf_writer& ints(std::string_view key, gguf_t elem, const std::vector<std::int64_t>& v) {
    std::string body = le(static_cast<std::uint32_t>(elem), 4) + le(v.size(), 8);
    for (const std::int64_t x : v) body += le(static_cast<std::uint64_t>(x), size_of(elem));
    return kv(key, gguf_t::array, body);
  }
  gguf_writer& strings(std::string_view key, const std::vector<std::string>& v) {
    std::string body = le(static_cast<std::uint32_t>(gguf_t::string), 4) + le(v.size(), 8);
    for (const std::string& s : v) body += gguf_string(s);
    return kv(key, gguf_t::array, body);
  }
  // An array of arrays of strings.
  gguf_writer& nested_strings(std::string_view key, const std::vector<std::vector<std::string>>& v) {
    std::string body = le(static_cast<std::uint32_t>(gguf_t::array), 4) + le(v.size(), 8);
    for (const auto& inner : v) {
      body += le(static_cast<std::uint32_t>(gguf_t::string), 4) + le(inner.size(), 8);
      for (const std::string& s : inner) body += gguf_string(s);
    }
    return kv(key, gguf_t::array, body);
  }

  // A KV whose type and value bytes are given as they are.
  gguf_writer& raw_kv(std::string_view key, std::uint32_t type, std::string_view value_bytes) {
    kvs_ += gguf_string(key) + le(type, 4) + std::string(value_bytes);
    ++count_;
    return *this;
  }
  // Bytes appended to the KV section as they are (not counted as a KV).
  gguf_writer& raw(std::string_view bytes) {
    kvs_ += bytes;
    return *this;
  }

  gguf_writer& magic(std::string_view m) {
    magic_ = std::string(m);
    return *this;
  }
  gguf_writer& version(std::uint32_t v) {
    version_ = v;
    return *this;
  }
  gguf_writer& tensor_count(std::uint64_t n) {
    tensor_count_ = n;
    return *this;
  }
  // The header's metadata_kv_count, instead of the number of KVs written.
  gguf_writer& count_override(std::uint64_t n) {
    count_override_ = n;
    return *this;
  }

  std::size_t kv_count() const { return count_; }

  // The header and the KVs: exactly the metadata, nothing after it.
  std::string bytes() const {
    return magic_ + le(version_, 4) + le(tensor_count_, 8) + le(count_override_.value_or(count_), 8) + kvs_;
  }

  static std::size_t size_of(gguf_t t) {
    switch (t) {
      case gguf_t::u8: case gguf_t::i8: case gguf_t::boolean: return 1;
      case gguf_t::u16: case gguf_t::i16: return 2;
      case gguf_t::u32: case gguf_t::i32: case gguf_t::f32: return 4;
      default: return 8;
    }
  }

 private:
  gguf_writer& kv(std::string_view key, gguf_t t, const std::string& value) {
    return raw_kv(key, static_cast<std::uint32_t>(t), value);
  }

  std::string magic_ = "GGUF";
  std::uint32_t version_;
  std::uint64_t tensor_count_;
  std::optional<std::uint64_t> count_override_;
  std::string kvs_;
  std::size_t count_ = 0;
};

// An architecture's minimum: name, block_count, heads, embedding.
inline gguf_writer model(const std::string& arch, std::uint32_t layers, std::uint32_t heads, std::uint32_t kv_heads,
                         std::uint32_t embd) {
  gguf_writer w;
  w.str("general.architecture", arch)
      .u32(arch + ".block_count", layers)
      .u32(arch + ".attention.head_count", heads)
      .u32(arch + ".attention.head_count_kv", kv_heads)
      .u32(arch + ".embedding_length", embd);
  return w;
}

// --- models, with the keys llama.cpp's converters write (values of the public models) -------------------

// Meta-Llama-3-8B as convert_hf_to_gguf.py writes it (Q4_K_M: file_type 15, 291 tensors); the tokenizer
// arrays are cut to a few entries (the reader skips them either way).
inline gguf_writer llama3_8b_gguf(std::uint32_t version = 3) {
  gguf_writer w(version, 291);
  w.str("general.architecture", "llama")
      .str("general.name", "Meta-Llama-3-8B")
      .u32("llama.block_count", 32)
      .u32("llama.context_length", 8192)
      .u32("llama.embedding_length", 4096)
      .u32("llama.feed_forward_length", 14336)
      .u32("llama.attention.head_count", 32)
      .u32("llama.attention.head_count_kv", 8)
      .f32("llama.rope.freq_base", 500000.0f)
      .f32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
      .u32("general.file_type", 15)
      .u32("llama.vocab_size", 128256)
      .u32("llama.rope.dimension_count", 128)
      .str("tokenizer.ggml.model", "gpt2")
      .str("tokenizer.ggml.pre", "llama-bpe")
      .strings("tokenizer.ggml.tokens", {"!", "\"", "#", "$", "%"})
      .ints("tokenizer.ggml.token_type", gguf_t::i32, {1, 1, 1, 1, 1})
      .strings("tokenizer.ggml.merges", {"\xc4\xa0 \xc4\xa0", "\xc4\xa0\xc4\xa0 \xc4\xa0\xc4\xa0"})
      .u32("tokenizer.ggml.bos_token_id", 128000)
      .u32("tokenizer.ggml.eos_token_id", 128001)
      .str("tokenizer.chat_template", "{% set loop_messages = messages %}")
      .u32("general.quantization_version", 2);
  return w;
}

// --- the layer-group models: the keys convert_hf_to_gguf.py writes for them, with the values of the
// configs in tests/fixtures/models (named per function); tokenizer keys left out (the reader skips them).

// Per-layer integer arrays (the converters' Python lists of ints, written as i32) and flag arrays (lists
// of bools), from a per-layer rule.
template <class F>
std::vector<std::int64_t> per_layer(std::size_t layers, F value) {
  std::vector<std::int64_t> v(layers);
  for (std::size_t i = 0; i < layers; ++i) v[i] = static_cast<std::int64_t>(value(i));
  return v;
}

// deepseek-ai/DeepSeek-V3 (deepseek-v3.config.json) as DeepseekV2Model writes it: head_count_kv 1 (MLA as
// MQA), key_length kv_lora_rank + qk_rope_head_dim (512 + 64), value_length kv_lora_rank,
// key_length_mla qk_nope + qk_rope (128 + 64), value_length_mla v_head_dim (128). The MTP layer
// (num_nextn_predict_layers) is skipped by the converter: block_count is num_hidden_layers.
// DeepSeek Sparse Attention as the converters write it (DeepseekV32Model: arch "deepseek32"; GlmMoeDsaModel:
// "glm-dsa"): the MLA keys, and the lightning indexer's head count, key length (index_head_dim) and top-k.
inline gguf_writer dsa_gguf(const std::string& arch, std::uint32_t layers) {
  gguf_writer w;
  const std::string p = arch + ".";
  w.str("general.architecture", arch).u32(p + "block_count", layers).u32(p + "embedding_length", 7168)
      .u32(p + "attention.head_count", 128).u32(p + "attention.head_count_kv", 1)
      .u32(p + "attention.key_length", 576).u32(p + "attention.value_length", 512)
      .u32(p + "attention.key_length_mla", 192).u32(p + "attention.value_length_mla", 128)
      .u32(p + "attention.indexer.head_count", 64).u32(p + "attention.indexer.key_length", 128)
      .u32(p + "attention.indexer.top_k", 2048);
  return w;
}

// MiMo-V2-Flash as llama.cpp's converter writes it (MimoV2Model, arch "mimo2"): head_count_kv per layer (8
// sliding, 4 full), the sliding pattern as a per-layer array (1 slides), key_length head_dim (192),
// value_length v_head_dim (128); full at layer 0 and every layer i with (i + 1) % 6 == 0.
inline gguf_writer mimo_v2_flash_gguf() {
  std::vector<std::int64_t> kv_heads;
  std::vector<std::int64_t> sliding;
  for (int i = 0; i < 48; ++i) {
    const bool full = i == 0 || (i + 1) % 6 == 0;
    kv_heads.push_back(full ? 4 : 8);
    sliding.push_back(full ? 0 : 1);
  }
  gguf_writer w;
  w.str("general.architecture", "mimo2").u32("mimo2.block_count", 48).u32("mimo2.embedding_length", 4096)
      .u32("mimo2.attention.head_count", 64).ints("mimo2.attention.head_count_kv", gguf_t::i32, kv_heads)
      .u32("mimo2.attention.key_length", 192).u32("mimo2.attention.value_length", 128)
      .u32("mimo2.attention.sliding_window", 128)
      .ints("mimo2.attention.sliding_window_pattern", gguf_t::boolean, sliding);
  return w;
}

inline gguf_writer deepseek_v3_gguf() {
  gguf_writer w(3, 1025);
  w.str("general.architecture", "deepseek2")
      .str("general.name", "DeepSeek V3")
      .u32("deepseek2.block_count", 61)
      .u32("deepseek2.context_length", 163840)
      .u32("deepseek2.embedding_length", 7168)
      .u32("deepseek2.feed_forward_length", 18432)
      .u32("deepseek2.attention.head_count", 128)
      .u32("deepseek2.attention.head_count_kv", 1)
      .f32("deepseek2.rope.freq_base", 10000.0f)
      .f32("deepseek2.attention.layer_norm_rms_epsilon", 1e-6f)
      .u32("deepseek2.expert_used_count", 8)
      .u32("deepseek2.leading_dense_block_count", 3)
      .u32("deepseek2.vocab_size", 129280)
      .u32("deepseek2.attention.q_lora_rank", 1536)
      .u32("deepseek2.attention.kv_lora_rank", 512)
      .u32("deepseek2.attention.key_length", 576)
      .u32("deepseek2.attention.value_length", 512)
      .u32("deepseek2.attention.key_length_mla", 192)
      .u32("deepseek2.attention.value_length_mla", 128)
      .u32("deepseek2.expert_feed_forward_length", 2048)
      .u32("deepseek2.expert_count", 256)
      .u32("deepseek2.expert_shared_count", 1)
      .f32("deepseek2.expert_weights_scale", 2.5f)
      .boolean("deepseek2.expert_weights_norm", true)
      .u32("deepseek2.expert_gating_func", 2)
      .u32("deepseek2.rope.dimension_count", 64)
      .str("deepseek2.rope.scaling.type", "yarn")
      .f32("deepseek2.rope.scaling.factor", 40.0f)
      .u32("deepseek2.rope.scaling.original_context_length", 4096)
      .u32("general.file_type", 7);
  return w;
}

// Qwen/Qwen3-Next-80B-A3B-Thinking (qwen3-next-80b-a3b-thinking.config.json) as Qwen3NextModel writes it:
// ssm.conv_kernel = linear_conv_kernel_dim, ssm.state_size = linear_key_head_dim, ssm.group_count =
// linear_num_key_heads, ssm.time_step_rank = linear_num_value_heads, ssm.inner_size =
// linear_value_head_dim x linear_num_value_heads, full_attention_interval; key_length = head_dim.
inline gguf_writer qwen3_next_gguf() {
  gguf_writer w(3, 807);
  w.str("general.architecture", "qwen3next")
      .str("general.name", "Qwen3 Next 80B A3B Thinking")
      .u32("qwen3next.block_count", 48)
      .u32("qwen3next.context_length", 262144)
      .u32("qwen3next.embedding_length", 2048)
      .u32("qwen3next.feed_forward_length", 5120)
      .u32("qwen3next.attention.head_count", 16)
      .u32("qwen3next.attention.head_count_kv", 2)
      .f32("qwen3next.rope.freq_base", 10000000.0f)
      .f32("qwen3next.attention.layer_norm_rms_epsilon", 1e-6f)
      .u32("qwen3next.expert_used_count", 10)
      .u32("qwen3next.attention.key_length", 256)
      .u32("qwen3next.attention.value_length", 256)
      .u32("qwen3next.expert_count", 512)
      .u32("qwen3next.expert_feed_forward_length", 512)
      .u32("qwen3next.expert_shared_feed_forward_length", 512)
      .u32("qwen3next.ssm.conv_kernel", 4)
      .u32("qwen3next.ssm.state_size", 128)
      .u32("qwen3next.ssm.group_count", 16)
      .u32("qwen3next.ssm.time_step_rank", 32)
      .u32("qwen3next.ssm.inner_size", 4096)
      .u32("qwen3next.full_attention_interval", 4)
      .u32("qwen3next.rope.dimension_count", 64)
      .u32("general.file_type", 7);
  return w;
}

// Qwen/Qwen3.5-9B (qwen3.5-9b.config.json, its text_config) as Qwen3_5TextModel writes it with its MTP
// block: block_count num_hidden_layers + mtp_num_hidden_layers (32 + 1), nextn_predict_layers 1.
inline gguf_writer qwen35_9b_gguf() {
  gguf_writer w(3, 0);
  w.str("general.architecture", "qwen35")
      .str("general.name", "Qwen3.5 9B")
      .u32("qwen35.block_count", 33)
      .u32("qwen35.context_length", 262144)
      .u32("qwen35.embedding_length", 4096)
      .u32("qwen35.feed_forward_length", 12288)
      .u32("qwen35.attention.head_count", 16)
      .u32("qwen35.attention.head_count_kv", 4)
      .u32("qwen35.attention.key_length", 256)
      .u32("qwen35.attention.value_length", 256)
      .u32("qwen35.ssm.conv_kernel", 4)
      .u32("qwen35.ssm.state_size", 128)
      .u32("qwen35.ssm.group_count", 16)
      .u32("qwen35.ssm.time_step_rank", 32)
      .u32("qwen35.ssm.inner_size", 4096)
      .u32("qwen35.full_attention_interval", 4)
      .u32("qwen35.rope.dimension_count", 64)
      .ints("qwen35.rope.dimension_sections", gguf_t::i32, {11, 11, 10, 0})
      .u32("qwen35.nextn_predict_layers", 1);
  return w;
}

// meta-llama/Llama-4-Scout-17B-16E's text model (no fixture: the brief's 48 layers, 40 heads, 8 KV heads,
// head_dim 128; hidden 5120): llama.cpp reads no chunk size from the file.
inline gguf_writer llama4_scout_gguf() {
  gguf_writer w(3, 0);
  w.str("general.architecture", "llama4")
      .str("general.name", "Llama 4 Scout 17B 16E Instruct")
      .u32("llama4.block_count", 48)
      .u32("llama4.context_length", 10485760)
      .u32("llama4.embedding_length", 5120)
      .u32("llama4.feed_forward_length", 16384)
      .u32("llama4.attention.head_count", 40)
      .u32("llama4.attention.head_count_kv", 8)
      .f32("llama4.rope.freq_base", 500000.0f)
      .f32("llama4.attention.layer_norm_rms_epsilon", 1e-5f)
      .u32("llama4.expert_count", 16)
      .u32("llama4.expert_used_count", 1)
      .u32("llama4.attention.key_length", 128)
      .u32("llama4.attention.value_length", 128)
      .u32("llama4.vocab_size", 202048)
      .u32("llama4.rope.dimension_count", 128)
      .u32("llama4.interleave_moe_layer_step", 1)
      .u32("llama4.expert_feed_forward_length", 8192);
  return w;
}

// google/gemma-3-27b-it (gemma-3-27b-it.config.json, its text_config) as Gemma3Model writes it: no
// sliding_window_pattern (llama.cpp's gemma3 period is 6).
inline gguf_writer gemma3_27b_gguf() {
  gguf_writer w(3, 808);
  w.str("general.architecture", "gemma3")
      .str("general.name", "Gemma 3 27b It")
      .u32("gemma3.block_count", 62)
      .u32("gemma3.context_length", 131072)
      .u32("gemma3.embedding_length", 5376)
      .u32("gemma3.feed_forward_length", 21504)
      .u32("gemma3.attention.head_count", 32)
      .f32("gemma3.attention.layer_norm_rms_epsilon", 1e-6f)
      .u32("gemma3.attention.key_length", 128)
      .u32("gemma3.attention.value_length", 128)
      .f32("gemma3.rope.freq_base", 1000000.0f)
      .u32("gemma3.attention.sliding_window", 1024)
      .u32("gemma3.attention.head_count_kv", 16)
      .str("gemma3.rope.scaling.type", "linear")
      .f32("gemma3.rope.scaling.factor", 8.0f);
  return w;
}

// google/gemma-4-31B-it (gemma-4-31b-it.config.json) as Gemma4Model writes it: key_length global_head_dim
// (512) for the full layers, key_length_swa head_dim (256) for the sliding ones, head_count_kv per layer
// (num_key_value_heads 16 sliding, num_global_key_value_heads 4 full), sliding_window_pattern from
// layer_types (every 6th layer full).
inline gguf_writer gemma4_31b_gguf() {
  const auto sliding = [](std::size_t i) { return i % 6 != 5; };
  gguf_writer w(3, 0);
  w.str("general.architecture", "gemma4")
      .str("general.name", "Gemma 4 31B It")
      .u32("gemma4.block_count", 60)
      .u32("gemma4.context_length", 262144)
      .u32("gemma4.embedding_length", 5376)
      .u32("gemma4.feed_forward_length", 21504)
      .u32("gemma4.attention.head_count", 32)
      .f32("gemma4.attention.layer_norm_rms_epsilon", 1e-6f)
      .f32("gemma4.final_logit_softcapping", 30.0f)
      .u32("gemma4.attention.sliding_window", 1024)
      .u32("gemma4.attention.shared_kv_layers", 0)
      .u32("gemma4.embedding_length_per_layer_input", 0)
      .ints("gemma4.attention.sliding_window_pattern", gguf_t::boolean, per_layer(60, sliding))
      .u32("gemma4.attention.key_length", 512)
      .u32("gemma4.attention.value_length", 512)
      .u32("gemma4.attention.key_length_swa", 256)
      .u32("gemma4.attention.value_length_swa", 256)
      .ints("gemma4.attention.head_count_kv", gguf_t::i32, per_layer(60, [&](std::size_t i) { return sliding(i) ? 16 : 4; }))
      .u32("gemma4.rope.dimension_count", 512)
      .u32("gemma4.rope.dimension_count_swa", 256);
  return w;
}

// google/gemma-4-E2B-it (gemma-4-e2b-it.config.json): 35 layers, num_kv_shared_layers 20, one KV head
// everywhere (num_global_key_value_heads null: head_count_kv stays a single number), sliding_window 512,
// every 5th layer full; use_double_wide_mlp doubles the feed-forward of the shared layers.
inline gguf_writer gemma4_e2b_gguf() {
  gguf_writer w(3, 0);
  w.str("general.architecture", "gemma4")
      .str("general.name", "Gemma 4 E2B It")
      .u32("gemma4.block_count", 35)
      .u32("gemma4.context_length", 131072)
      .u32("gemma4.embedding_length", 1536)
      .u32("gemma4.attention.head_count", 8)
      .u32("gemma4.attention.head_count_kv", 1)
      .u32("gemma4.attention.sliding_window", 512)
      .u32("gemma4.attention.shared_kv_layers", 20)
      .u32("gemma4.embedding_length_per_layer_input", 256)
      .ints("gemma4.attention.sliding_window_pattern", gguf_t::boolean, per_layer(35, [](std::size_t i) { return i % 5 != 4; }))
      .u32("gemma4.attention.key_length", 512)
      .u32("gemma4.attention.value_length", 512)
      .u32("gemma4.attention.key_length_swa", 256)
      .u32("gemma4.attention.value_length_swa", 256)
      .ints("gemma4.feed_forward_length", gguf_t::i32, per_layer(35, [](std::size_t i) { return i < 15 ? 6144 : 12288; }));
  return w;
}

// The NemotronH layer pattern of nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B (nemotron-3-nano-30b-a3b.config.json,
// hybrid_override_pattern): M Mamba-2, E MoE, * attention.
inline constexpr std::string_view nemotron3_nano_pattern = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME";

// The same model as NemotronHModel writes it (num_experts_per_tok: the MoE arch nemotron_h_moe):
// head_count_kv per layer (num_key_value_heads on * layers, else 0), feed_forward_length per layer
// (moe_intermediate_size on E layers, else 0), ssm.inner_size = mamba_num_heads x mamba_head_dim,
// ssm.group_count = n_groups, ssm.state_size = ssm_state_size, ssm.time_step_rank = mamba_num_heads;
// context_length 2^20 (GraniteHybridModel, no RoPE).
inline gguf_writer nemotron3_nano_gguf() {
  const std::string_view pat = nemotron3_nano_pattern;
  gguf_writer w(3, 0);
  w.str("general.architecture", "nemotron_h_moe")
      .str("general.name", "NVIDIA Nemotron 3 Nano 30B A3B")
      .u32("nemotron_h_moe.block_count", 52)
      .u32("nemotron_h_moe.context_length", 1048576)
      .u32("nemotron_h_moe.embedding_length", 2688)
      .u32("nemotron_h_moe.attention.head_count", 32)
      .f32("nemotron_h_moe.attention.layer_norm_rms_epsilon", 1e-5f)
      .u32("nemotron_h_moe.ssm.conv_kernel", 4)
      .u32("nemotron_h_moe.ssm.state_size", 128)
      .u32("nemotron_h_moe.ssm.group_count", 8)
      .u32("nemotron_h_moe.ssm.inner_size", 4096)
      .u32("nemotron_h_moe.ssm.time_step_rank", 64)
      .ints("nemotron_h_moe.attention.head_count_kv", gguf_t::i32, per_layer(52, [&](std::size_t i) { return pat[i] == '*' ? 2 : 0; }))
      .boolean("nemotron_h_moe.rope.scaling.finetuned", false)
      .u32("nemotron_h_moe.attention.key_length", 128)
      .u32("nemotron_h_moe.attention.value_length", 128)
      .ints("nemotron_h_moe.feed_forward_length", gguf_t::i32, per_layer(52, [&](std::size_t i) { return pat[i] == 'E' ? 1856 : 0; }))
      .u32("nemotron_h_moe.expert_used_count", 6)
      .u32("nemotron_h_moe.expert_feed_forward_length", 1856)
      .u32("nemotron_h_moe.expert_shared_feed_forward_length", 3712)
      .u32("nemotron_h_moe.expert_count", 128)
      .u32("nemotron_h_moe.expert_shared_count", 1)
      .u32("nemotron_h_moe.expert_group_count", 1);
  return w;
}

// ai21labs/AI21-Jamba-1.5-Mini (ai21-jamba-1.5-mini.config.json) as JambaModel writes it: head_count_kv per
// layer (num_key_value_heads where (i - attn_layer_offset) % attn_layer_period == 0, else 0),
// ssm.inner_size = mamba_expand x hidden_size, no ssm.group_count.
inline gguf_writer jamba_mini_gguf() {
  gguf_writer w(3, 0);
  w.str("general.architecture", "jamba")
      .str("general.name", "AI21 Jamba 1.5 Mini")
      .u32("jamba.block_count", 32)
      .u32("jamba.context_length", 262144)
      .u32("jamba.embedding_length", 4096)
      .u32("jamba.feed_forward_length", 14336)
      .u32("jamba.attention.head_count", 32)
      .ints("jamba.attention.head_count_kv", gguf_t::i32, per_layer(32, [](std::size_t i) { return i >= 4 && (i - 4) % 8 == 0 ? 8 : 0; }))
      .u32("jamba.ssm.conv_kernel", 4)
      .u32("jamba.ssm.inner_size", 8192)
      .u32("jamba.ssm.state_size", 16)
      .u32("jamba.ssm.time_step_rank", 256)
      .f32("jamba.attention.layer_norm_rms_epsilon", 1e-6f)
      .u32("jamba.expert_count", 16)
      .u32("jamba.expert_used_count", 2);
  return w;
}

// mistralai/Mamba-Codestral-7B-v0.1 (mamba-codestral-7b-v0.1.config.json) as Mamba2Model writes it:
// head_count 0 and feed_forward_length 0 ("unused, but seemingly required when loading"), ssm.inner_size
// = intermediate_size, ssm.time_step_rank = inner / head_dim, ssm.group_count = n_groups.
inline gguf_writer mamba_codestral_gguf() {
  gguf_writer w(3, 0);
  w.str("general.architecture", "mamba2")
      .str("general.name", "Mamba Codestral 7B v0.1")
      .u32("mamba2.context_length", 1048576)
      .u32("mamba2.embedding_length", 4096)
      .u32("mamba2.feed_forward_length", 0)
      .u32("mamba2.attention.head_count", 0)
      .u32("mamba2.block_count", 64)
      .u32("mamba2.ssm.conv_kernel", 4)
      .u32("mamba2.ssm.inner_size", 8192)
      .u32("mamba2.ssm.state_size", 128)
      .u32("mamba2.ssm.time_step_rank", 128)
      .u32("mamba2.ssm.group_count", 8)
      .f32("mamba2.attention.layer_norm_rms_epsilon", 1e-5f);
  return w;
}

// microsoft/Phi-3-mini-4k-instruct (phi-3-mini-4k-instruct.config.json): sliding_window 2047 is written,
// and llama.cpp ignores it.
inline gguf_writer phi3_mini_gguf() {
  gguf_writer w(3, 0);
  w.str("general.architecture", "phi3")
      .str("general.name", "Phi 3 Mini 4k Instruct")
      .u32("phi3.context_length", 4096)
      .u32("phi3.rope.scaling.original_context_length", 4096)
      .u32("phi3.embedding_length", 3072)
      .u32("phi3.feed_forward_length", 8192)
      .u32("phi3.block_count", 32)
      .u32("phi3.attention.head_count", 32)
      .u32("phi3.attention.head_count_kv", 32)
      .f32("phi3.attention.layer_norm_rms_epsilon", 1e-5f)
      .u32("phi3.rope.dimension_count", 96)
      .f32("phi3.rope.freq_base", 10000.0f)
      .u32("phi3.attention.sliding_window", 2047);
  return w;
}

}  // namespace pnmem::test
