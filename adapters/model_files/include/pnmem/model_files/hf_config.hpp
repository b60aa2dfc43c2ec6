// pnmem/model_files/hf_config.hpp - a model's costs from a Hugging Face config.json.
//
// What vLLM and SGLang load. Reads num_hidden_layers, num_key_value_heads, num_attention_heads,
// head_dim (or hidden_size / num_attention_heads), hidden_size, sliding_window with layer_types or a
// sliding-window pattern, and torch_dtype, and derives the costs with from_shape (cost_model.hpp).
// (Implementation and the full key list: hf_config.cpp.)
#pragma once

#include <string_view>

#include "pnmem/model_files/model_description.hpp"

namespace pnmem::model_files {

read_result<model_description> read_hf_config(std::string_view json_text);

}  // namespace pnmem::model_files
