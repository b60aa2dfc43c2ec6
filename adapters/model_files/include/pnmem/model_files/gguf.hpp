// pnmem/model_files/gguf.hpp - a model's costs from a GGUF file's metadata (what llama.cpp loads).
//
// Reads the header and the key/value section only, never the tensors, and prices one sequence as
// llama.cpp allocates it: <arch>.block_count, the attention keys (.head_count, .head_count_kv, .key_length,
// .value_length, their _swa and _mla forms, .sliding_window, .sliding_window_pattern, .shared_kv_layers),
// the recurrent-state keys (.ssm.*, .full_attention_interval, .attention.recurrent_layers,
// .feed_forward_length for Nemotron-H), <arch>.embedding_length and <arch>.context_length, and derives the
// costs with from_shape(shape, engine). (Implementation, the format and the full key list: gguf.cpp.)
//
// In short: GGUF versions 2 and 3 (little-endian). The shape has one layer group per distinct (kind, KV
// heads, K dims, V dims, span) and one per recurrent state; a layer with 0 KV heads keeps no KV.
//   - sliding layers: <arch>.attention.sliding_window_pattern (a period N, every N-th layer full, or a
//     per-layer array), else llama.cpp's built-in period for gemma2 (2), gemma3 (6), gemma3n (5), gpt-oss
//     (2) and cohere2 (4), else none; their K / V dims from key_length_swa / value_length_swa when given.
//     phi3 never slides (llama.cpp disables it); llama4 keeps chunks of 8192 tokens in 3 layers of 4.
//   - MLA (key_length_mla and value_length_mla set: DeepSeek-V2/V3, Kimi-K2): one K-only latent row of
//     key_length values per token and layer.
//   - layers without KV of their own: gemma4's last shared_kv_layers, gemma3n's from layer 20, the MTP
//     blocks (nextn_predict_layers) of glm4moe, qwen35 and qwen35moe.
//   - recurrent layers (mamba, mamba2, jamba, granitehybrid, plamo2, nemotron_h, nemotron_h_moe,
//     falcon-h1, qwen3next, qwen35, qwen35moe): a state of (conv_kernel - 1) x (inner + 2 x groups x
//     state) conv values and state x inner SSM values per layer, in f32 as llama.cpp keeps it. Another
//     architecture carrying recurrent-state keys is refused.
// GGUF says nothing of the KV cache's format: normal_kv is f16 (llama.cpp's default), compact_kv q4_0.
// The result's shape and engine are set; source is "gguf"; name is general.name, else the architecture.
//
// Bad input is an error that names what was being read: a wrong magic, version 1 or an unknown version,
// counts past the limits below, an unknown value type, a duplicate key, a key of the wrong type, a file
// that ends inside the metadata ("truncated at byte N while reading ... of key \"k\" ..."), and
// a model the reader cannot price exactly (a recurrent layer without its ssm keys, an MLA file without
// key_length, more than 8 distinct layer groups, ...): "<key>: <what>".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "pnmem/model_files/model_description.hpp"

namespace pnmem::model_files {

// Limits against garbage (a real model's metadata is a few MiB, mostly its tokenizer).
inline constexpr std::uint64_t gguf_max_metadata_bytes = std::uint64_t{64} << 20;  // header + key/values
inline constexpr std::uint64_t gguf_max_string_bytes = std::uint64_t{1} << 20;     // one string value
inline constexpr std::uint64_t gguf_max_key_bytes = 65535;                         // one key (the spec's limit)
inline constexpr std::uint64_t gguf_max_kv_count = std::uint64_t{1} << 20;         // metadata_kv_count
inline constexpr std::uint64_t gguf_max_tensor_count = std::uint64_t{1} << 24;     // tensor_count (never read)
inline constexpr std::uint64_t gguf_max_array_count = std::uint64_t{1} << 24;      // elements of one array
inline constexpr int gguf_max_array_depth = 8;                                     // arrays of arrays of ...

// What the header and metadata said besides the costs.
struct gguf_summary {
  std::uint32_t version = 0;           // 2 or 3
  std::uint64_t tensor_count = 0;      // as the header says (the tensor infos are never read)
  std::uint64_t metadata_kv_count = 0;
  std::uint64_t metadata_bytes = 0;    // header + key/values: the offset where the tensor infos start
  std::string architecture;            // general.architecture
  std::uint64_t context_length = 0;    // <arch>.context_length (0: absent): the trained context, not a cost
};

struct gguf_model {
  model_description description;
  gguf_summary summary;
};

// From the first bytes of a GGUF file (the header and metadata; a prefix that stops inside the
// metadata is an error naming where it stopped). Bytes past the metadata are never looked at.
read_result<model_description> read_gguf(std::string_view bytes, const engine_rule& engine = exact_engine);

// From a file: reads only as far as the end of the metadata (plus stdio's buffer), never the tensors;
// errors start with the path.
read_result<model_description> read_gguf_file(const std::string& path, const engine_rule& engine = exact_engine);

// The same, with the summary (version, counts, architecture, context length, metadata size).
read_result<gguf_model> read_gguf_model(std::string_view bytes, const engine_rule& engine = exact_engine);
read_result<gguf_model> read_gguf_model_file(const std::string& path, const engine_rule& engine = exact_engine);

}  // namespace pnmem::model_files
