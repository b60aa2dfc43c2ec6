// pnmem/model_files/model_json.hpp - pnmem's model description format (JSON), read and written.
//
// What `pnmem model` prints and `--model FILE` (CLI) / pnmem_model_cost_from_json (C ABI) read.
// Version 2 (written; versions 1 and 2 are read):
//
//   {
//     "format": "pnmem-model",          required, exactly this
//     "version": 2,                     required; a reader refuses versions it does not know
//     "name": "Llama-3-8B",             optional free text
//     "source": "hf-config",            optional: where the description came from
//     "engine": {                       optional, informative: the rule the windows were derived with
//       "engine": "vllm", "block_tokens": 16, "max_batched_tokens": 2048, "ubatch_tokens": 512,
//       "seqs": 1, "state_copies": 1, "ssm_state_fp32": false            (model_shape.hpp: engine_rule;
//       "mtp": true only when set: the shape holds the model's MTP layers too; "hybrid_manager_off":
//       true only when set)
//     },
//     "shape": {                        optional, informative: the layer groups the costs were derived
//       "groups": [                     from (model_shape.hpp); never read back as costs
//         {"kind": "full", "layers": 32, "kv_heads": 8, "key_dim": 128, "value_dim": 128},
//         {"kind": "sliding", "layers": 21, "kv_heads": 8, "key_dim": 256, "value_dim": 256, "span": 4096},
//         {"kind": "full", "layers": 61, "kv_heads": 1, "key_dim": 576, "k_only": true},
//         {"kind": "full", "layers": 61, "kv_heads": 1, "key_dim": 576, "k_only": true, "side_bytes": 132},
//         {"kind": "recurrent", "layers": 36, "conv_state_values": 24576, "ssm_state_values": 524288}
//       ],                              (side_bytes, optional, 0: caches beside the KV, bytes a token
//                                       and layer in their own format: DeepSeek-V3.2's indexer keys)
//       "query_heads": 32, "hidden_size": 4096, "state_format": "bf16", "ssm_state_format": "fp32"
//     },
//     "kv_bytes_per_token": {           bytes one token adds to one sequence's KV, per format:
//       "full":    {"q4": 67584, "fp32": 524288, "f16": 262144, "bf16": 262144,
//                   "fp8": 131072, "q8_0": 139264, "q4_0": 73728},    layers that keep every token
//       "windows": [                                                  layers that keep at most
//         {"window": 4096, "bytes_per_token": {"q4": 0, ...}}, ...     `window` tokens (0 to 4 terms,
//       ]                                                              windows increasing; optional)
//     },                                or one number: every format costs that (an engine with one
//                                       format, or 0 for an engine that preallocates its KV)
//     "kv_block_tokens": 16,            optional (0): KV is allocated in blocks of this many tokens
//     "kv_bytes_per_encoder_item": {...},   optional (0): cross-attention KV per image, per format
//                                       (all seven) or one number
//     "state_bytes_per_seq": 0,         optional (0): fixed per-sequence state
//     "normal_kv": "f16",               optional (fp32): the model's own KV format
//     "compact_kv": "q4_0",             optional (q4): the format the ladder's rung 4a forces
//     "activation": {                   the CPU-path activation peak, one of:
//       "anchors": [[0, 268435456], [1024, 402653184], ...]      1 to 8 [tokens, peak bytes] pairs,
//                                                                tokens increasing, peaks not decreasing
//       or "fixed_bytes": ..., "per_token_bytes": ..., "per_token_sq_bytes": ...    (each optional: 0)
//     }
//   }
//
// Version 1 (pnmem before layer groups) differs in three places: "kv_bytes_per_token" has "full" and
// "sliding" (one term, kept up to a top-level "sliding_window"; 0 or absent: every token), "shape" is
// flat (layers, sliding_layers, sliding_window, kv_heads, key_dim, value_dim, query_heads,
// hidden_size), and there is no "engine", "kv_block_tokens" or "kv_bytes_per_encoder_item". It reads
// as the same costs.
//
// Every byte count is a JSON integer or a string with a binary unit ("256MiB", parse.hpp's rules).
// With a per-format object, all seven formats are required: a description says what every format
// costs, so a request in any of them is answered. Unknown keys are refused (a typo is not silently
// ignored); so are negative numbers, fractions and values past 2^64-1. Errors name the key, e.g.
//   activation.anchors[2]: tokens must increase (4096 after 16384)
#pragma once

#include <string>
#include <string_view>

#include "pnmem/model_files/model_description.hpp"

namespace pnmem::model_files {

inline constexpr std::string_view model_json_format = "pnmem-model";
inline constexpr int model_json_version = 2;  // written; 1 and 2 are read

read_result<model_description> read_model_json(std::string_view text);

// The description as JSON (version 1), `indent` spaces per level (negative: one line).
std::string write_model_json(const model_description& m, int indent = 2);

// Reads a whole file (a model description, a config.json, ...) into a string; the error names the
// path and the reason (errno's text). Refuses files larger than max_bytes.
read_result<std::string> read_text_file(const std::string& path, std::size_t max_bytes = 64u << 20);

}  // namespace pnmem::model_files
