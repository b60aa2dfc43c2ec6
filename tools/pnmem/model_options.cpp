// tools/pnmem/model_options.cpp - the model flags.

#include "cli11_warnings.hpp"  // first: see there

#include "model_options.hpp"

#include <charconv>
#include <cstddef>
#include <string_view>
#include <system_error>
#include <utility>

#include <CLI/CLI.hpp>

#include "arg_parsers.hpp"
#include "pnmem/detail/printable.hpp"
#include "pnmem/format.hpp"
#include "pnmem/model_files/gguf.hpp"
#include "pnmem/model_files/hf_config.hpp"
#include "pnmem/model_files/model_json.hpp"
#include "pnmem/parse.hpp"
#include "text_option.hpp"
#include "usage_error.hpp"

namespace pnmem_cli {

namespace {

namespace mf = pnmem::model_files;


// `text` split at `sep` (an empty text gives one empty field).
std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  while (true) {
    const std::size_t at = text.find(sep);
    out.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return out;
    text.remove_prefix(at + 1);
  }
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A token count (plain decimal), or the problem.
bool tokens_of(std::string_view text, std::uint64_t& out, std::string& problem) {
  const std::string_view s = trim(text);
  if (s.empty()) {
    problem = std::string(pnmem::to_string(pnmem::parse_errc::empty));
    return false;
  }
  if (s.front() == '-') {
    problem = std::string(pnmem::to_string(pnmem::parse_errc::negative));
    return false;
  }
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec == std::errc::result_out_of_range) {
    problem = "out of range (at most 18446744073709551615)";
    return false;
  }
  if (ec != std::errc() || ptr != s.data() + s.size()) {
    problem = std::string(pnmem::to_string(pnmem::parse_errc::not_a_number));
    return false;
  }
  return true;
}

// "T:B,T:B,...": 1 to 8 anchors, tokens increasing, peaks not decreasing.
pnmem::activation_model parse_anchors(const char* flag, const std::string& text) {
  auto bad = [&](const std::string& problem) { throw usage_error(describe_bad_value(flag, text, problem)); };
  const std::vector<std::string_view> pairs = split(text, ',');
  if (pairs.size() > pnmem::max_activation_anchors) {
    bad(std::to_string(pairs.size()) + " anchors (1 to " + std::to_string(pnmem::max_activation_anchors) +
        " TOKENS:BYTES pairs)");
  }
  pnmem::activation_model m;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const std::string where = "anchor " + std::to_string(i + 1) + " \"" + std::string(pairs[i]) + "\"";
    const std::vector<std::string_view> f = split(pairs[i], ':');
    if (f.size() != 2) bad(where + ": expected TOKENS:BYTES");
    pnmem::activation_anchor a{};
    std::string problem;
    if (!tokens_of(f[0], a.tokens, problem)) bad(where + ": tokens: " + problem);
    const auto b = pnmem::parse_bytes(f[1]);
    if (!b) bad(where + ": bytes: " + std::string(pnmem::bytes_problem(b.error)));
    a.peak_bytes = b.value;
    if (i > 0 && a.tokens <= m.anchors[i - 1].tokens) {
      bad(where + ": tokens must increase (" + std::to_string(a.tokens) + " after " +
          std::to_string(m.anchors[i - 1].tokens) + ")");
    }
    if (i > 0 && a.peak_bytes < m.anchors[i - 1].peak_bytes) {
      bad(where + ": peak must not decrease (" + std::to_string(a.peak_bytes) + " after " +
          std::to_string(m.anchors[i - 1].peak_bytes) + ")");
    }
    m.anchors[i] = a;
  }
  m.n_anchors = static_cast<std::uint32_t>(pairs.size());
  return m;
}

// "FIXED,PER_TOKEN,PER_TOKEN_SQ", each a byte count.
pnmem::activation_model parse_coefficients(const char* flag, const std::string& text) {
  const std::vector<std::string_view> f = split(text, ',');
  if (f.size() != 3) throw usage_error(describe_bad_value(flag, text, "expected FIXED,PER_TOKEN,PER_TOKEN_SQ"));
  constexpr const char* names[] = {"FIXED", "PER_TOKEN", "PER_TOKEN_SQ"};
  std::uint64_t v[3] = {};
  for (std::size_t i = 0; i < 3; ++i) {
    const auto r = pnmem::parse_bytes(f[i]);
    if (!r) {
      throw usage_error(describe_bad_value(
          flag, text, std::string(names[i]) + " \"" + std::string(f[i]) + "\": " + std::string(pnmem::bytes_problem(r.error))));
    }
    v[i] = r.value;
  }
  return pnmem::activation_coefficients(v[0], v[1], v[2]);
}

// "--a", "--a and --b", "--a, --b and --c".
std::string and_list(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " and " : ", ";
    out += names[i];
  }
  return out;
}

// `why` without a leading "<path>: " (the diagnostic names the file already).
std::string without_path(std::string why, const std::string& path) {
  if (why.rfind(path + ": ", 0) == 0) why.erase(0, path.size() + 2);
  return why;
}

// A config.json, or a model's directory holding one.
mf::model_description read_hf_config_path(const char* flag, const std::string& path, const pnmem::engine_rule& engine) {
  mf::read_result<mf::model_description> d = mf::read_hf_config_file(path, engine);
  if (!d) throw usage_error(describe_bad_value(flag, path, without_path(d.error, path)));
  if (d.value->source.empty()) d.value->source = "hf-config";
  return std::move(*d.value);
}

mf::model_description read_gguf_metadata(const char* flag, const std::string& path, const pnmem::engine_rule& engine) {
  mf::read_result<mf::model_description> d = mf::read_gguf_file(path, engine);
  if (!d) throw usage_error(describe_bad_value(flag, path, without_path(d.error, path)));
  if (d.value->source.empty()) d.value->source = "gguf";
  return std::move(*d.value);
}

}  // namespace

void model_options::add_to(CLI::App& app, const std::string& group_name, const std::string& engine_group) {
  add_text_option(app, "--from-hf-config", hf_config_,
                  "A Hugging Face config.json (what vLLM and SGLang load), or a model's directory holding one: "
                  "layers, KV heads, head dim, sliding window, torch_dtype")
      ->type_name("FILE|DIR")
      ->group(group_name);
  add_text_option(app, "--from-gguf", gguf_,
                  "A GGUF file (what llama.cpp loads): its header and metadata only, never the tensors")
      ->type_name("FILE")
      ->group(group_name);
  add_text_option(app, "--model", model_file_,
                  "The model's costs from a pnmem model description (JSON, as pnmem model prints it)")
      ->type_name("FILE")
      ->group(group_name);
  add_text_option(app, "--layers", layers_,
                  "Model shape, with --kv-heads and --head-dim: attention layers. KV bytes per token = "
                  "2 x L x H x D x bytes per value of --kv-dtype (q8_0 / q4_0 block scales included); the "
                  "activation peak and state stay the seed's unless given below")
      ->type_name("L")
      ->group(group_name);
  add_text_option(app, "--kv-heads", kv_heads_, "Model shape: KV heads per layer (num_key_value_heads)")
      ->type_name("H")
      ->group(group_name);
  add_text_option(app, "--head-dim", head_dim_, "Model shape: dims per head")->type_name("D")->group(group_name);
  add_text_option(app, "--kv-dtype", kv_dtype_,
                  "Model shape: its KV format (default f16), also the request's unless --kv is given: f16, "
                  "bf16, fp8, q8_0, q4_0, f32 or q4 (the seed's Q4 ratio)")
      ->type_name("FORMAT")
      ->group(group_name);
  add_text_option(app, "--kv-bytes-per-token", kv_bytes_per_token_,
                  "KV bytes one token adds, the same in every format (overrides --model's or the shape's "
                  "KV; 0 for an engine that preallocates its KV at load)")
      ->type_name("BYTES")
      ->group(group_name);
  add_text_option(app, "--state-bytes-per-seq", state_bytes_per_seq_,
                  "Fixed bytes per sequence (SSM / conv state of hybrid models), paid at any prompt length")
      ->type_name("BYTES")
      ->group(group_name);
  add_text_option(app, "--activation-anchors", activation_anchors_,
                  "CPU-path activation peak as 1 to 8 TOKENS:BYTES pairs, tokens increasing, peaks not "
                  "decreasing (interpolated rounding up, growing with N^2 past the last); replaces the "
                  "table, e.g. 0:256MiB,4096:1.5GiB, or 0:0 for none")
      ->type_name("T:B,...")
      ->group(group_name);
  add_text_option(app, "--activation-coefficients", activation_coefficients_,
                  "CPU-path activation peak = FIXED + PER_TOKEN x N + PER_TOKEN_SQ x N^2 bytes, instead of "
                  "a table")
      ->type_name("F,P,Q")
      ->group(group_name);
  engine_.add_to(app, engine_group);
}

bool model_options::given() const {
  return hf_config_ || gguf_ || model_file_ || layers_ || kv_heads_ || head_dim_ || kv_dtype_ || kv_bytes_per_token_ ||
         state_bytes_per_seq_ || activation_anchors_ || activation_coefficients_;
}

std::string model_options::first_given() const {
  const std::pair<const char*, const std::optional<std::string>*> all[] = {
      {"--from-hf-config", &hf_config_},
      {"--from-gguf", &gguf_},
      {"--model", &model_file_},
      {"--layers", &layers_},
      {"--kv-heads", &kv_heads_},
      {"--head-dim", &head_dim_},
      {"--kv-dtype", &kv_dtype_},
      {"--kv-bytes-per-token", &kv_bytes_per_token_},
      {"--state-bytes-per-seq", &state_bytes_per_seq_},
      {"--activation-anchors", &activation_anchors_},
      {"--activation-coefficients", &activation_coefficients_},
  };
  for (const auto& [name, value] : all) {
    if (value->has_value()) return name;
  }
  return engine_.given() ? "--engine" : "";
}

std::vector<std::string> model_options::bases_given() const {
  std::vector<std::string> out;
  if (hf_config_) out.emplace_back("--from-hf-config");
  if (gguf_) out.emplace_back("--from-gguf");
  if (model_file_) out.emplace_back("--model");
  if (layers_) {
    out.emplace_back("--layers");
  } else if (kv_heads_) {
    out.emplace_back("--kv-heads");
  } else if (head_dim_) {
    out.emplace_back("--head-dim");
  } else if (kv_dtype_) {
    out.emplace_back("--kv-dtype");
  }
  return out;
}

std::optional<mf::model_description> model_options::resolve() const {
  const pnmem::engine_rule engine = engine_.resolve();
  if (!given()) {
    if (engine_.given()) {
      throw usage_error(std::string("--engine and its settings need the model they price: ") + sources_words);
    }
    return std::nullopt;
  }
  const std::string engine_flag = engine_.given() ? "--engine" : "";
  const bool shape = layers_ || kv_heads_ || head_dim_;
  const std::vector<std::string> bases = bases_given();
  if (bases.size() > 1) {
    throw usage_error(bases[0] + " and " + bases[1] + ": give one model source (" + sources_words + ")");
  }
  if (hf_config_) return apply_overrides(read_hf_config_path("--from-hf-config", *hf_config_, engine));
  if (gguf_) return apply_overrides(read_gguf_metadata("--from-gguf", *gguf_, engine));
  if (engine.mtp) {  // the layers it adds are the config's: a shape from anywhere else holds what it holds
    throw usage_error("--mtp: the MTP layers are read from the model's config.json: give --from-hf-config FILE|DIR");
  }
  if (kv_dtype_ && !shape) {
    throw usage_error("--kv-dtype needs the shape it is the format of: --layers, --kv-heads and --head-dim");
  }
  if (shape && !(layers_ && kv_heads_ && head_dim_)) {
    std::vector<std::string> missing;
    if (!layers_) missing.emplace_back("--layers");
    if (!kv_heads_) missing.emplace_back("--kv-heads");
    if (!head_dim_) missing.emplace_back("--head-dim");
    throw usage_error(bases_given().at(0) + " needs " + and_list(missing) +
                      " (the shape flags --layers, --kv-heads and --head-dim go together)");
  }
  if (activation_anchors_ && activation_coefficients_) {
    throw usage_error("--activation-anchors and --activation-coefficients: give one activation model, not both");
  }

  mf::model_description d;
  if (model_file_) {
    d = read_model_file("--model", *model_file_);
    if (!engine_flag.empty()) {
      if (!d.shape) {
        throw usage_error(engine_flag + " with --model \"" + *model_file_ +
                          "\": the description has no shape (layer groups) to derive the costs from again");
      }
      if (const std::string_view problem = pnmem::rule_problem(*d.shape, engine); !problem.empty()) {
        throw usage_error(engine_flag + " with --model \"" + *model_file_ + "\": " + std::string(problem));
      }
      d.cost = pnmem::from_shape(*d.shape, engine);
      d.engine = engine;
    }
  } else if (shape) {
    pnmem::model_shape s = pnmem::uniform_shape(static_cast<std::uint32_t>(parse_int_arg("--layers", *layers_, 1)),
                                                static_cast<std::uint32_t>(parse_int_arg("--kv-heads", *kv_heads_, 1)),
                                                static_cast<std::uint32_t>(parse_int_arg("--head-dim", *head_dim_, 1)),
                                                0, 0);
    s.normal_kv = kv_dtype_ ? parse_kv_arg("--kv-dtype", *kv_dtype_) : pnmem::kv_format::f16;
    // Rung 4a's 4-bit format: the seed's own Q4 for a q4 model, llama.cpp's q4_0 otherwise.
    s.compact_kv = s.normal_kv == pnmem::kv_format::q4 ? pnmem::kv_format::q4 : pnmem::kv_format::q4_0;
    const pnmem::model_cost shaped = pnmem::from_shape(s, engine);
    // The shape gives the KV (under the engine's rule: its blocks); the activation table and the
    // state stay the seed's.
    d.cost = pnmem::seed_model_cost;
    d.cost.full_kv_bytes_per_token = shaped.full_kv_bytes_per_token;
    d.cost.kv_block_tokens = shaped.kv_block_tokens;
    d.cost.normal_kv = shaped.normal_kv;
    d.cost.compact_kv = shaped.compact_kv;
    d.source = "flags";
  } else {
    d = seed_description();  // overrides alone: on top of the seed's model, under the engine's rule
    if (!engine_flag.empty()) {
      d.cost = pnmem::from_shape(*d.shape, engine);
      d.engine = engine;
    }
  }
  return apply_overrides(std::move(d));
}

mf::model_description seed_description() {
  mf::model_description d;
  d.cost = pnmem::seed_model_cost;
  d.shape = pnmem::seed_model_shape;
  d.source = "seed";
  return d;
}

mf::model_description model_options::apply_overrides(mf::model_description d) const {
  const bool any = kv_bytes_per_token_ || state_bytes_per_seq_ || activation_anchors_ || activation_coefficients_;
  if (!any) return d;
  if (activation_anchors_ && activation_coefficients_) {
    throw usage_error("--activation-anchors and --activation-coefficients: give one activation model, not both");
  }
  if (kv_bytes_per_token_) {
    const std::uint64_t b = parse_bytes_arg("--kv-bytes-per-token", *kv_bytes_per_token_);
    d.cost.full_kv_bytes_per_token.fill(b);
    d.cost.windows = {};
    d.cost.n_windows = 0;
  }
  if (state_bytes_per_seq_) d.cost.state_bytes_per_seq = parse_bytes_arg("--state-bytes-per-seq", *state_bytes_per_seq_);
  if (activation_anchors_) d.cost.activation = parse_anchors("--activation-anchors", *activation_anchors_);
  if (activation_coefficients_) {
    d.cost.activation = parse_coefficients("--activation-coefficients", *activation_coefficients_);
  }
  const std::string_view problem = pnmem::validate(d.cost);
  if (!problem.empty()) throw usage_error("the model flags: " + std::string(problem));
  d.shape.reset();  // the costs are no longer the shape's derivation
  constexpr std::string_view suffix = "flags";
  if (d.source.size() < suffix.size() || d.source.compare(d.source.size() - suffix.size(), suffix.size(), suffix) != 0) {
    d.source = d.source.empty() ? std::string(suffix) : d.source + "+" + std::string(suffix);
  }
  return d;
}

std::optional<pnmem::kv_format> request_kv_arg(const char* flag, const std::optional<std::string>& kv_text) {
  if (kv_text) return parse_kv_arg(flag, *kv_text);
  return std::nullopt;
}

mf::model_description read_model_file(const char* flag, const std::string& path) {
  const mf::read_result<std::string> text = mf::read_text_file(path);
  if (!text) {
    // read_text_file's message starts with the path, which the diagnostic already names.
    std::string why = text.error;
    if (why.rfind(path + ": ", 0) == 0) why.erase(0, path.size() + 2);
    throw usage_error(describe_bad_value(flag, path, why));
  }
  mf::read_result<mf::model_description> d = mf::read_model_json(*text.value);
  if (!d) {
    std::string why = d.error;
    // A config.json given where a description is expected: say how to convert it.
    if (text.value->find("\"num_hidden_layers\"") != std::string::npos &&
        text.value->find(mf::model_json_format) == std::string::npos) {
      why += "; a Hugging Face config.json? convert it with pnmem model --from-hf-config FILE";
    }
    throw usage_error(describe_bad_value(flag, path, why));
  }
  return std::move(*d.value);
}

nlohmann::ordered_json model_brief_json(const mf::model_description& m, pnmem::kv_format kv) {
  const auto i = static_cast<std::size_t>(kv);
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["name"] = m.name;
  j["source"] = m.source;
  j["kv"] = std::string(pnmem::to_string(kv));
  j["kv_bytes_per_token"] = pnmem::kv_bytes_per_token(m.cost, kv);
  nlohmann::ordered_json windows = nlohmann::ordered_json::array();
  for (std::size_t w = 0; w < m.cost.n_windows && w < pnmem::max_kv_windows; ++w) {
    windows.push_back({{"window", m.cost.windows[w].window}, {"bytes_per_token", m.cost.windows[w].bytes_per_token[i]}});
  }
  j["kv_windows"] = windows;
  j["kv_bytes_per_encoder_item"] = m.cost.kv_bytes_per_encoder_item[i];
  j["state_bytes_per_seq"] = m.cost.state_bytes_per_seq;
  j["normal_kv"] = std::string(pnmem::to_string(m.cost.normal_kv));
  j["compact_kv"] = std::string(pnmem::to_string(m.cost.compact_kv));
  return j;
}

std::string model_label(const mf::model_description& m) {
  // Both come from the user's files: a name or path with a newline or an escape sequence in it
  // must not break the line or act on the terminal.
  const std::string source = m.source.empty() ? "file" : pnmem::detail::printable(m.source);
  return m.name.empty() ? "(" + source + ")" : pnmem::detail::printable(m.name) + " (" + source + ")";
}

std::string model_brief_text(const mf::model_description& m, pnmem::kv_format kv) {
  const auto i = static_cast<std::size_t>(kv);
  const std::uint64_t per_token = pnmem::kv_bytes_per_token(m.cost, kv);
  std::string out = "model: " + model_label(m) + ", kv " + std::string(pnmem::to_string(kv)) + " " +
                    std::to_string(per_token) + " B/token";
  if (per_token >= pnmem::KiB) out += " (" + pnmem::format_bytes(per_token) + ")";
  for (std::size_t w = 0; w < m.cost.n_windows && w < pnmem::max_kv_windows; ++w) {
    const pnmem::kv_window& t = m.cost.windows[w];
    if (t.bytes_per_token[i] == 0) continue;
    out += " (" + std::to_string(t.bytes_per_token[i]) + " of it up to " + std::to_string(t.window) + " tokens)";
  }
  out += ", state " + std::to_string(m.cost.state_bytes_per_seq) + " B";
  if (m.cost.kv_bytes_per_encoder_item[i] != 0) {
    out += ", " + std::to_string(m.cost.kv_bytes_per_encoder_item[i]) + " B per encoder item";
  }
  return out;
}

}  // namespace pnmem_cli
