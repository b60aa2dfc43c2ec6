// tools/pnmem/model_options.hpp - the flags that describe a model's costs (admit, load, plan, model).
//
// A model is a base, then overrides, under an engine's rule:
//
//   base (at most one)
//     --from-hf-config FILE|DIR         a Hugging Face config.json, or a model's directory holding one
//     --from-gguf FILE                  a GGUF file's metadata
//     --model FILE                      a pnmem model description (pnmem model prints one)
//     --layers L --kv-heads H --head-dim D [--kv-dtype FORMAT]
//                                       the KV of L layers x H KV heads x D dims, K and V
//                                       (from_shape: 2 x L x H x D values per token, block scales
//                                       included for q8_0 / q4_0; FORMAT, default f16, is the model's
//                                       normal format); the activation and state stay the seed's
//     (none)                            the seed's model (cost_model.hpp)
//   overrides (on any base)
//     --kv-bytes-per-token B            every KV format costs B per token (no sliding window)
//     --state-bytes-per-seq B           fixed bytes per sequence
//     --activation-anchors T:B,...      1 to 8 tokens:peak pairs, tokens increasing, peaks not decreasing
//     --activation-coefficients F,P,Q   peak(N) = F + P x N + Q x N^2
//
//   engine rule (engine_options.hpp): --engine exact|vllm|llama.cpp and its settings, for a base with
//     layer groups (a config.json, a GGUF file, a shape, a description that has its shape)
//
// Every command that takes a model takes all of these (admit, load, plan, model). With none of them a
// command answers for the seed's model exactly as before (resolve() is empty and the command adds
// nothing to its output).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine_options.hpp"
#include "pnmem/cost_model.hpp"
#include "pnmem/model_shape.hpp"
#include "pnmem/model_files/model_description.hpp"

namespace CLI {
class App;
}

namespace pnmem_cli {

class model_options {
 public:
  // Registers the model's sources, the shape flags and the overrides on `app` under `group_name` in
  // --help, and the engine flags under `engine_group`.
  void add_to(CLI::App& app, const std::string& group_name = default_group_name,
              const std::string& engine_group = default_engine_group);

  static constexpr const char* default_group_name =
      "Model (without these flags: the seed's model; pnmem model --help explains them)";
  static constexpr const char* default_engine_group =
      "Engine rule (what the serving engine keeps of the model's layers: with --from-hf-config, --from-gguf, "
      "the shape, or a description that has its shape)";

  // Whether any of the model flags was given (the engine flags alone are not a model).
  bool given() const;

  // The first of the flags given, by name ("--from-hf-config", "--kv-bytes-per-token", "--engine", ...);
  // "" when none.
  std::string first_given() const;

  // The base flags given, one name each ("--from-hf-config", "--model", "--layers").
  std::vector<std::string> bases_given() const;

  // The model the flags describe, or nothing when none was given (the seed's model applies).
  // Throws usage_error naming the flag on a bad value, a conflict (two bases), an engine flag without
  // a model, or a file that cannot be read or is not what the flag says. The engine flags derive the
  // costs from the layer groups: a config.json's, a GGUF file's, the --layers shape's KV, or a
  // description's (one without a shape is refused).
  std::optional<pnmem::model_files::model_description> resolve() const;

  // The engine rule the engine flags give (the exact rule without them); throws usage_error on a bad value.
  pnmem::engine_rule engine() const { return engine_.resolve(); }

  // The model's sources, for a message that asks for one ("give " + sources_words).
  static constexpr const char* sources_words =
      "--from-hf-config FILE|DIR, --from-gguf FILE, --model FILE, or --layers L --kv-heads H --head-dim D";

 private:
  // `base` with the overrides applied (--kv-bytes-per-token, --state-bytes-per-seq, --activation-*).
  // A description whose costs were changed loses its shape (no longer the derivation) and its source
  // gains "+flags".
  pnmem::model_files::model_description apply_overrides(pnmem::model_files::model_description base) const;

  std::optional<std::string> hf_config_;
  std::optional<std::string> gguf_;
  std::optional<std::string> model_file_;
  std::optional<std::string> layers_;
  std::optional<std::string> kv_heads_;
  std::optional<std::string> head_dim_;
  std::optional<std::string> kv_dtype_;
  std::optional<std::string> kv_bytes_per_token_;
  std::optional<std::string> state_bytes_per_seq_;
  std::optional<std::string> activation_anchors_;
  std::optional<std::string> activation_coefficients_;
  engine_options engine_;
};

// The seed's model as a description (source "seed", with its shape).
pnmem::model_files::model_description seed_description();

// The KV format a request asks for: `kv_text` (the command's --kv) when given, else none, and the
// library prices it in the model's own format (pnmem::request_kv_format), as every binding does.
std::optional<pnmem::kv_format> request_kv_arg(const char* flag, const std::optional<std::string>& kv_text);

// The pnmem model description in file `path`, or a usage_error `<flag>: "<path>": <reason>` (the file
// cannot be read, is not JSON, or is not a valid description: the reader's message names the key).
pnmem::model_files::model_description read_model_file(const char* flag, const std::string& path);

// `{"name", "source", "kv", "kv_bytes_per_token", "kv_windows": [{"window", "bytes_per_token"}],
//   "kv_bytes_per_encoder_item", "state_bytes_per_seq", "normal_kv", "compact_kv"}`: what a command's
// answer adds when a model was given, for format `kv`.
nlohmann::ordered_json model_brief_json(const pnmem::model_files::model_description& m, pnmem::kv_format kv);

// "model: Llama-3-8B (hf-config), kv f16 131072 B/token (128.00 KiB), state 0 B": one line, no newline.
std::string model_brief_text(const pnmem::model_files::model_description& m, pnmem::kv_format kv);

// The description's name and source for a line: `Llama-3-8B (hf-config)`, `(flags)`, ...
std::string model_label(const pnmem::model_files::model_description& m);

}  // namespace pnmem_cli
