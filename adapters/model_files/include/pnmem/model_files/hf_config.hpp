// pnmem/model_files/hf_config.hpp - a model's costs from a Hugging Face config.json.
//
// What vLLM and SGLang load. Reads num_hidden_layers, num_key_value_heads, num_attention_heads,
// head_dim (or hidden_size / num_attention_heads), hidden_size, sliding_window with layer_types or a
// sliding-window pattern, and torch_dtype, and derives the costs with from_shape (cost_model.hpp).
// (Implementation and the full key list: hf_config.cpp.)
//
// In short: a multimodal config's "text_config" is read when the top level has no num_hidden_layers;
// layer_types entries other than full/sliding attention (linear attention, Mamba) are not KV layers;
// which layers slide comes from layer_types, else Qwen2's use_sliding_window / max_window_layers, else
// sliding_window_pattern N (every N-th layer full), else Gemma 2 (alternate) / Gemma 3 (N = 6), else
// every layer (Mistral); the dtype ("dtype" or "torch_dtype") is the normal KV format, q4_0 the compact.
// The result's shape is set (the costs are from_shape(*shape)); source is "hf-config"; name is
// _name_or_path or architectures[0].
//
// Bad input (not JSON, a required key missing, zero or negative heads, head_dim not derivable, KV heads
// not dividing the query heads, more than 2^20 layers or heads, ...) is an error naming the key, e.g.
//   num_key_value_heads: 6 does not divide num_attention_heads (32)
#pragma once

#include <string>
#include <string_view>

#include "pnmem/model_files/model_description.hpp"

namespace pnmem::model_files {

read_result<model_description> read_hf_config(std::string_view json_text, const engine_rule& engine = exact_engine);

// The config.json at `path`, or in `path` when it is a model's directory (a downloaded snapshot: what
// transformers' AutoConfig.from_pretrained and vLLM read), priced as read_hf_config prices its text.
// An error starts with the file it read: "<path>: No such file or directory", "<dir>/config.json:
// num_hidden_layers: missing".
read_result<model_description> read_hf_config_file(const std::string& path, const engine_rule& engine = exact_engine);

}  // namespace pnmem::model_files
