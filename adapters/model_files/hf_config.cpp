// adapters/model_files/hf_config.cpp - a model's layer groups from a Hugging Face config.json (hf_config.hpp).
//
// The config is read as Python's json module reads it (what transformers and vLLM use): NaN, Infinity
// and -Infinity literals are accepted (Nemotron-H ships "time_step_limit": [0.0, Infinity]); a key that
// pnmem reads and finds one of them in is an error naming the key. A key given as null counts as absent.
// "Integer" means a JSON integer (not a float, not a boolean, not a string). Every error names the key
// (with its "text_config." prefix when read from there) and what was wrong.
//
// Where: the top level; when it has no num_hidden_layers and has a "text_config" object (the multimodal
// configs: Gemma 3/4, Llama 4, Mllama, Qwen3.5, Mistral 3, ...), that object instead. model_type,
// architectures and the dtype keys are looked up there first, then at the top level; _name_or_path and
// vision_config at the top level only.
//
// The family (model_type, else architectures[0]) decides how the layers fall into groups
// (model_shape.hpp). Every family reads num_hidden_layers (1 to 2^20), hidden_size (1 to 2^24) and the
// attention keys: num_attention_heads (1 to 2^20), num_key_value_heads (absent: the query heads; must
// divide them), head_dim (absent: the family's default, below). Then, by family:
//
//   plain attention   llama, mistral, mixtral, ministral(3), qwen2(_moe), qwen3(_moe), phi3, gemma(2/3),
//                     gpt_oss, granite, olmo, cohere, ... and any model_type not listed elsewhere: full
//                     layers, and sliding ones where the config says which (the first rule that applies):
//       1. layer_types: one per layer: "full_attention" / "attention" (full), "sliding_attention"
//          (sliding_window tokens), "chunked_attention" (attention_chunk_size tokens); another type is
//          an error naming it (a family that has linear or Mamba layers is read by its own rule below).
//       2. use_sliding_window (Qwen2/Qwen3): false: none; true: layers from max_window_layers slide.
//       3. sliding_window_pattern N (Gemma 3): layer i slides unless (i + 1) % N == 0.
//       4. Gemma 2 alternates (even layers slide); Gemma 3 without a pattern: N = 6.
//       5. Mistral, Mixtral, Phi-3, Starcoder2 (and Qwen2 without use_sliding_window): every layer
//          slides (vLLM applies the model's window to every layer). Under the llama.cpp rule Phi-3 and
//          Mistral do not slide at all (llama.cpp disables Phi-3's window and reads none for Llama-arch
//          Mistral).
//       Any other family with a sliding_window and none of these is an error: which layers slide is
//       not known, and "every layer" would under-price a mixed model.
//       MiniMax's attn_type_list (one entry a layer: 1 softmax attention, 0 lightning attention) may
//       only say 1 (MiniMax-M2): a lightning layer's state is not known to pnmem.
//   MLA               any config with kv_lora_rank (DeepSeek-V2/V3, Kimi-K2, ...): every layer caches one
//                     latent row of kv_lora_rank + qk_rope_head_dim values, K only (vLLM: one KV head of
//                     that width; llama.cpp: the K cache, no V); head_dim is not needed.
//   MLA + DSA         with index_topk (DeepSeek-V3.2, GLM-5: DeepSeek Sparse Attention): each layer that
//                     owns a lightning indexer (every layer, unless index_topk_pattern or
//                     index_topk_freq / index_skip_topk_offset say otherwise, as vLLM reads them; indexer_types
//                     must agree) also keeps index_head_dim keys per token beside the latent: vLLM and the
//                     exact rule in fp8 with an fp32 scale per 128 (132 B, whatever the KV's dtype: the
//                     group's side_bytes), llama.cpp as a second K-only cache in the KV's type.
//   mimo_v2_flash     hybrid_layer_pattern (1 sliding, 0 full; or layer_types): full layers
//                     num_key_value_heads x (head_dim K + v_head_dim V); sliding layers
//                     swa_num_key_value_heads x (swa_head_dim K + swa_v_head_dim V) over sliding_window_size
//                     tokens; K and V each at its own width.
//   gemma4            layer_types; sliding layers num_key_value_heads x head_dim, full layers
//                     global_head_dim (else head_dim) x num_global_key_value_heads when attention_k_eq_v
//                     (else num_key_value_heads); the last num_kv_shared_layers layers keep no KV of their
//                     own (they read an earlier layer's).
//   llama4            attention_chunk_size C (absent: 8192; null: none, every layer full): a layer is
//                     chunked (C tokens) when no_rope_layers[i] is 1 (RoPE), full when 0 (absent or
//                     empty: every no_rope_layer_interval-th layer, default 4, is full); layer_types,
//                     when given, must say the same.
//   mllama            cross_attention_layers hold KV of the vision encoder's tokens per image:
//                     vision_config max_num_tiles x ((image_size / patch_size)^2 + 1) tokens (6404 for
//                     Llama 3.2 Vision); the other layers are full self-attention.
//   qwen3_next,       gated delta net hybrids: layer_types ("linear_attention" / "full_attention"), else
//   qwen3_5(_moe)     every full_attention_interval-th layer full (default 4). A linear layer holds a
//                     conv state of (linear_conv_kernel_dim - 1) x (2 kh dk + vh dv) values and a
//                     temporal state of vh x dv x dk (kh, vh = linear_num_key/value_heads, dk, dv =
//                     linear_key/value_head_dim). mamba_ssm_dtype sets the temporal state's format.
//   nemotron_h        hybrid_override_pattern, a character per layer: '*' attention, 'M' Mamba-2, '-' MLP
//                     and 'E' MoE (neither KV nor state); another character is an error. Newer transformers
//                     write layers_block_type instead ("full_attention", "linear_attention", "moe", "mlp"):
//                     read alike, and when both are given they must agree.
//   jamba             attention where i % attn_layer_period == attn_layer_offset (defaults 8, 4), Mamba
//                     elsewhere (Mamba-1: conv (d_conv - 1) x I, SSM I x d_state, I = mamba_expand x
//                     hidden_size).
//   falcon_h1         every layer holds attention KV and a Mamba-2 state side by side.
//   zamba2            every layer a Mamba-2 state; the hybrid layers (layers_block_type "hybrid", else
//                     hybrid_layer_ids, else Zamba2Config's 54-layer default) also attention KV of their
//                     own (vLLM keeps one per hybrid layer although their weights are shared),
//                     num_attention_heads x 2 hidden_size / num_attention_heads, K and V. The head sizes
//                     are Zamba2Config's derived ones; a config writing others is refused.
//   mamba2, mamba     no attention: every layer a Mamba-2 (Mamba-1) state.
//   nemotron-nas      block_configs, one per layer: attention.no_op or replace_with_linear keeps no KV;
//   (DeciLM)          otherwise num_attention_heads / attention.n_heads_in_group KV heads.
//
// Mamba-2 state per layer (vLLM's and llama.cpp's shapes): conv (d_conv - 1) x (I + 2 G N), SSM H P N,
// with I the inner size, G groups, N the state size, H heads of P dims. The recurrent state's format is
// the model's dtype (vLLM's "auto"), the SSM state's the config's mamba_ssm_cache_dtype /
// mamba_ssm_dtype where given (Nemotron-H: fp32 when not given, as vLLM defaults it).
//
// head_dim, when absent: hidden_size / num_attention_heads (which must divide) for the families whose
// configs define it so (llama, mistral, mixtral, qwen2, phi3, mllama, jamba, nemotron-nas, ...), the
// family's default where transformers has another (qwen3 128, qwen3_next 256, gemma2/3 256), and an
// error for any other family (a guess would be wrong for some: Qwen3-4B's is 128, not 2560 / 32 = 80).
// A Gemma 3 text_config may rely on Gemma3TextConfig's defaults: 8 heads, 4 KV heads, head_dim 256,
// sliding_window 4096, pattern 6 (gemma-3-4b-it gives only hidden_size, num_hidden_layers and
// sliding_window).
//
// Keys that change what a model holds (kv_lora_rank, layer_types, hybrid_override_pattern,
// attn_layer_period, block_configs, cross_attention_layers, attention_chunk_size,
// full_attention_interval, num_kv_shared_layers, global_head_dim, the linear_* and mamba_* keys, the
// index_* keys, hybrid_layer_pattern, the swa_* keys, v_head_dim, attn_type_list, ...)
// must be read by the family's rule: one present in a family that does not read it is an error naming
// it, never silently ignored.
//
//   dtype / torch_dtype   the weights' dtype, which vLLM's and SGLang's default KV cache ("auto") follows:
//                         "bfloat16" -> bf16, "float16" / "half" -> f16, "float32" / "float" -> fp32, and
//                         the other float names parse_kv_format knows. "dtype" (transformers >= 4.56) wins
//                         over "torch_dtype". Absent: f16. Another string is an error.
//   compact_kv            always q4_0 (the ladder's forced 4-bit format).
//   name                  _name_or_path if a non-empty string, else architectures[0], else model_type.
//   source                "hf-config".
//
// The costs are from_shape(shape, engine) (model_shape.hpp), with the shape's activation defaults.
#include "pnmem/model_files/hf_config.hpp"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pnmem/cost_model.hpp"
#include "pnmem/model_files/model_json.hpp"

namespace pnmem::model_files {

namespace {

using json = nlohmann::json;

struct bad_key {
  std::string what;
};

[[noreturn]] void fail(const std::string& key, const std::string& why) { throw bad_key{key + ": " + why}; }

constexpr std::uint64_t max_layers = std::uint64_t{1} << 20;
constexpr std::uint64_t max_heads = std::uint64_t{1} << 20;
constexpr std::uint64_t max_head_dim = std::uint64_t{1} << 20;
constexpr std::uint64_t max_hidden = std::uint64_t{1} << 24;
constexpr std::uint64_t max_span = 0xffffffffULL;

// --- Python's JSON ----------------------------------------------------------------------------------

// A non-finite literal, once replaced by a string: a byte no config's string starts with, then its name.
constexpr char nonfinite_mark = '\x01';

// `text` with NaN, Infinity and -Infinity outside strings replaced by the strings "\u0001NaN", ...,
// so that a JSON parser reads it. Anything else is left for the parser to accept or refuse.
std::string replace_nonfinite(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) {
        out += text[++i];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      out += c;
      continue;
    }
    bool replaced = false;
    for (const std::string_view word : {std::string_view("-Infinity"), std::string_view("Infinity"), std::string_view("NaN")}) {
      if (text.compare(i, word.size(), word) != 0) continue;
      const std::size_t end = i + word.size();
      const bool delimited = end == text.size() || text[end] == ',' || text[end] == ']' || text[end] == '}' ||
                             text[end] == ' ' || text[end] == '\n' || text[end] == '\r' || text[end] == '\t';
      if (!delimited) continue;
      out += "\"\\u0001";
      out += word;
      out += '"';
      i = end - 1;
      replaced = true;
      break;
    }
    if (!replaced) out += c;
  }
  return out;
}

bool is_nonfinite(const json& v) {
  return v.is_string() && !v.get_ref<const std::string&>().empty() && v.get_ref<const std::string&>()[0] == nonfinite_mark;
}

std::string shown(const json& v) {
  if (is_nonfinite(v)) return v.get_ref<const std::string&>().substr(1);
  if (v.is_array()) return "an array of " + std::to_string(v.size());
  if (v.is_object()) return "an object";
  if (v.is_string()) return "\"" + v.get_ref<const std::string&>().substr(0, 64) + "\"";
  return v.dump();
}

// --- keys -----------------------------------------------------------------------------------------------

// One level of the config (the top level or text_config), with the prefix its keys are named with,
// and the keys a family's rule has read (so that a structural key it did not read can be refused).
struct level {
  const json& obj;
  std::string prefix;
  mutable std::set<std::string> read{};

  const json* find(const char* key) const {
    read.insert(key);
    const auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return nullptr;
    return &*it;
  }
  std::string name(const char* key) const { return prefix + key; }
};

std::uint64_t integer(const json& v, const std::string& key, std::uint64_t lo, std::uint64_t hi) {
  if (v.is_number_unsigned()) {
    const auto x = v.get<std::uint64_t>();
    if (x < lo || x > hi) {
      fail(key, std::to_string(x) + " is out of range (" + std::to_string(lo) + " to " + std::to_string(hi) + ")");
    }
    return x;
  }
  if (v.is_number_integer()) fail(key, "negative (" + v.dump() + ")");
  if (v.is_number_float()) fail(key, "expected an integer, got " + v.dump());
  fail(key, "expected an integer, got " + (is_nonfinite(v) ? shown(v) : std::string(v.type_name())));
}

std::optional<std::uint64_t> optional_integer(const level& l, const char* key, std::uint64_t lo, std::uint64_t hi) {
  const json* v = l.find(key);
  if (v == nullptr) return std::nullopt;
  return integer(*v, l.name(key), lo, hi);
}

std::uint64_t required_integer(const level& l, const char* key, std::uint64_t lo, std::uint64_t hi) {
  const auto v = optional_integer(l, key, lo, hi);
  if (!v) fail(l.name(key), "missing");
  return *v;
}

// A positive number that may be written as a float (mamba_expand: 2 or 2.0); the product with
// `times` must be a whole number.
std::uint64_t scaled(const level& l, const char* key, double fallback, std::uint64_t times, bool has_fallback) {
  const json* v = l.find(key);
  double x = fallback;
  if (v == nullptr) {
    if (!has_fallback) fail(l.name(key), "missing");
  } else if (v->is_number()) {
    x = v->get<double>();
  } else {
    fail(l.name(key), "expected a number, got " + (is_nonfinite(*v) ? shown(*v) : std::string(v->type_name())));
  }
  const double product = x * static_cast<double>(times);
  if (!(x > 0) || !(product < 9.0e15) || product != static_cast<double>(static_cast<std::uint64_t>(product))) {
    fail(l.name(key), (v == nullptr ? std::string("default ") : std::string()) + "value " +
                          (v == nullptr ? std::to_string(fallback) : v->dump()) + " times " + std::to_string(times) +
                          " is not a positive whole number");
  }
  return static_cast<std::uint64_t>(product);
}

bool optional_bool(const level& l, const char* key, bool fallback) {
  const json* v = l.find(key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) fail(l.name(key), "expected true or false, got " + shown(*v));
  return v->get<bool>();
}

// A string key looked up in `l`, then at the top level (`root`); nullopt when absent in both.
std::optional<std::string> string_at(const level& l, const level& root, const char* key) {
  for (const level* x : {&l, &root}) {
    const json* v = x->find(key);
    if (v == nullptr) continue;
    if (!v->is_string() || is_nonfinite(*v)) fail(x->name(key), "expected a string, got " + shown(*v));
    return v->get<std::string>();
  }
  return std::nullopt;
}

std::string first_architecture(const level& l, const level& root) {
  for (const level* x : {&l, &root}) {
    const json* v = x->find("architectures");
    if (v == nullptr) continue;
    if (!v->is_array()) fail(x->name("architectures"), std::string("expected an array, got ") + v->type_name());
    if (v->empty()) return {};
    if (!(*v)[0].is_string()) fail(x->name("architectures") + "[0]", "expected a string");
    return (*v)[0].get<std::string>();
  }
  return {};
}

std::optional<kv_format> dtype_named(const json& v, const std::string& key) {
  if (!v.is_string() || is_nonfinite(v)) fail(key, "expected a dtype name, got " + shown(v));
  const auto s = v.get<std::string>();
  kv_format f{};
  if (s == "float") return kv_format::fp32;
  if (parse_kv_format(s, f) && f != kv_format::q4 && f != kv_format::q4_0 && f != kv_format::q8_0) return f;
  fail(key, "\"" + s + "\" is not a dtype pnmem knows (bfloat16, float16, float32)");
}

// The text model's level first (a multimodal config's text_config), then the top level (often the vision
// tower's or the wrapper's): at each, "dtype" before "torch_dtype".
kv_format dtype_at(const level& l, const level& root) {
  for (const level* x : {&l, &root}) {
    for (const char* key : {"dtype", "torch_dtype"}) {
      if (const json* v = x->find(key)) return *dtype_named(*v, x->name(key));
    }
  }
  return kv_format::f16;
}

// --- families ---------------------------------------------------------------------------------------------

enum class family {
  attention,      // plain decoders (and any model_type not listed)
  gemma4,
  llama4,
  mllama,
  gated_delta,    // qwen3_next, qwen3_5
  nemotron_h,
  jamba,
  falcon_h1,
  zamba2,
  mamba2,
  mamba,
  nemotron_nas,
  mimo_v2,        // mimo_v2_flash
};

struct family_rule {
  std::string_view model_type;
  family kind;
  // head_dim when absent: 0 = hidden_size / num_attention_heads; > 0 the family's default.
  std::uint32_t default_head_dim;
};

constexpr family_rule families[] = {
    {"llama", family::attention, 0},         {"mistral", family::attention, 0},
    {"mixtral", family::attention, 0},       {"ministral", family::attention, 0},
    {"ministral3", family::attention, 0},    {"qwen2", family::attention, 0},
    {"qwen2_moe", family::attention, 0},     {"qwen3", family::attention, 128},
    {"qwen3_moe", family::attention, 128},   {"phi3", family::attention, 0},
    {"phimoe", family::attention, 0},        {"phi", family::attention, 0},
    {"gemma", family::attention, 256},       {"gemma2", family::attention, 256},
    {"gemma3", family::attention, 256},      {"gemma3_text", family::attention, 256},
    {"gpt_oss", family::attention, 0},       {"granite", family::attention, 0},
    {"granitemoe", family::attention, 0},    {"olmo", family::attention, 0},
    {"olmo2", family::attention, 0},         {"cohere", family::attention, 0},
    {"cohere2", family::attention, 0},       {"starcoder2", family::attention, 0},
    {"internlm2", family::attention, 0},     {"deepseek_v2", family::attention, 0},
    {"deepseek_v3", family::attention, 0},   {"kimi_k2", family::attention, 0},
    {"deepseek_v32", family::attention, 0},  {"glm_moe_dsa", family::attention, 0},
    {"mimo_v2_flash", family::mimo_v2, 0},   {"mimo_v2", family::mimo_v2, 0},
    {"gemma4", family::gemma4, 0},           {"gemma4_text", family::gemma4, 0},
    {"llama4", family::llama4, 0},           {"llama4_text", family::llama4, 0},
    {"mllama", family::mllama, 0},           {"mllama_text_model", family::mllama, 0},
    {"qwen3_next", family::gated_delta, 256}, {"qwen3_5", family::gated_delta, 256},
    {"qwen3_5_text", family::gated_delta, 256}, {"qwen3_5_moe", family::gated_delta, 256},
    {"qwen3_5_moe_text", family::gated_delta, 256}, {"nemotron_h", family::nemotron_h, 0},
    {"jamba", family::jamba, 0},             {"falcon_h1", family::falcon_h1, 0},
    {"zamba2", family::zamba2, 0},           {"mamba2", family::mamba2, 0},
    {"mamba", family::mamba, 0},             {"nemotron-nas", family::nemotron_nas, 0},
    {"deci", family::nemotron_nas, 0},
};

// The families whose layers all slide when the config gives a window and nothing else (vLLM applies
// the model's sliding_window to every layer).
constexpr std::string_view all_sliding_families[] = {"mistral", "mixtral", "phi3", "phimoe", "starcoder2", "qwen2",
                                                     "qwen2_moe"};

// Keys that change what a model holds; a family rule that does not read one of them cannot price a
// config that sets it (set: present, not null, not 0 / false / empty).
constexpr const char* structural_keys[] = {
    "kv_lora_rank", "layer_types", "hybrid_override_pattern", "attn_layer_period", "attn_layer_offset",
    "block_configs", "cross_attention_layers", "attention_chunk_size", "no_rope_layers", "full_attention_interval",
    "num_kv_shared_layers", "global_head_dim", "num_global_key_value_heads", "linear_num_key_heads",
    "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim",
    "mamba_d_state", "mamba_d_conv", "mamba_expand", "mamba_num_heads", "mamba_head_dim", "mamba_n_heads",
    "mamba_d_head", "mamba_d_ssm", "ssm_state_size", "hybrid_layer_ids", "layers_block_type", "sliding_window",
    "sliding_window_pattern", "use_sliding_window", "max_window_layers", "attention_k_eq_v",
    // DeepSeek Sparse Attention's indexer (a cache beside the KV), MiMo's per-kind heads and pattern,
    // V rows of their own width, MiniMax's layer kinds.
    "index_head_dim", "index_n_heads", "index_topk", "index_topk_freq", "index_topk_pattern", "index_skip_topk_offset",
    "indexer_types", "hybrid_layer_pattern", "swa_num_key_value_heads", "swa_head_dim", "swa_v_head_dim",
    "sliding_window_size", "v_head_dim", "attn_type_list",
};

bool is_set(const json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number_unsigned() || v.is_number_integer()) return v.get<std::int64_t>() != 0;
  if (v.is_array() || v.is_object() || v.is_string()) return !v.empty();
  return true;
}

// The groups being built: layers of the same kind and shape are counted into one group.
class groups_builder {
 public:
  void add(const layer_group& g, std::uint32_t layers = 1) {
    for (layer_group& have : groups_) {
      layer_group probe = g;
      probe.layers = have.layers;
      if (probe == have) {
        have.layers += layers;
        return;
      }
    }
    layer_group fresh = g;
    fresh.layers = layers;
    groups_.push_back(fresh);
  }
  model_shape shape(const std::string& what) const {
    model_shape s;
    if (groups_.size() > max_layer_groups) {
      fail(what, std::to_string(groups_.size()) + " distinct kinds of layer; pnmem holds at most " +
                     std::to_string(max_layer_groups));
    }
    for (const layer_group& g : groups_) s.add(g);
    return s;
  }
  bool empty() const { return groups_.empty(); }

 private:
  std::vector<layer_group> groups_;
};

layer_group kv_layer(layer_kind kind, std::uint64_t kv_heads, std::uint64_t head_dim, std::uint64_t span = 0) {
  return attention_layers(kind, 1, static_cast<std::uint32_t>(kv_heads), static_cast<std::uint32_t>(head_dim),
                          static_cast<std::uint32_t>(head_dim), static_cast<std::uint32_t>(span));
}

layer_group mamba2_layer(std::uint64_t inner, std::uint64_t groups, std::uint64_t state, std::uint64_t conv_kernel,
                         std::uint64_t heads, std::uint64_t head_dim) {
  const std::uint64_t conv = (conv_kernel - 1) * (inner + 2 * groups * state);
  return recurrent_layers(1, conv, heads * head_dim * state);
}

class reader {
 public:
  reader(const json& root_json, const engine_rule& engine) : root_{root_json, ""}, engine_(engine) {
    if (!root_json.is_object()) fail("config.json", std::string("expected a JSON object, got ") + root_json.type_name());
    if (root_.find("num_hidden_layers") == nullptr) {
      if (const json* text = root_.find("text_config")) {
        if (!text->is_object()) fail("text_config", std::string("expected an object, got ") + text->type_name());
        text_.emplace(level{*text, "text_config."});
      }
    }
  }

  model_description read() {
    if (const std::string_view problem = validate(engine_); !problem.empty()) fail("engine rule", std::string(problem));
    const level& l = at();
    arch_ = first_architecture(l, root_);
    model_type_ = string_at(l, root_, "model_type").value_or("");
    const family_rule* rule = find_rule();
    const family kind = rule != nullptr ? rule->kind : family::attention;
    gemma3_defaults_ = model_type_ == "gemma3_text" || model_type_ == "gemma3" || arch_ == "Gemma3ForCausalLM" ||
                       arch_ == "Gemma3ForConditionalGeneration";
    default_head_dim_ = rule != nullptr ? rule->default_head_dim : 0;
    known_family_ = rule != nullptr;

    layers_ = gemma3_defaults_ ? optional_integer(l, "num_hidden_layers", 1, max_layers).value_or(26)
                               : required_integer(l, "num_hidden_layers", 1, max_layers);
    hidden_ = gemma3_defaults_ ? optional_integer(l, "hidden_size", 1, max_hidden).value_or(2304)
                               : required_integer(l, "hidden_size", 1, max_hidden);
    dtype_ = dtype_at(l, root_);

    if (kind != family::mamba2 && kind != family::mamba) read_heads();
    if (l.find("kv_lora_rank") != nullptr) {
      read_mla();
    } else {
      switch (kind) {
        case family::attention: read_attention(); break;
        case family::gemma4: read_gemma4(); break;
        case family::llama4: read_llama4(); break;
        case family::mllama: read_mllama(); break;
        case family::gated_delta: read_gated_delta(); break;
        case family::nemotron_h: read_nemotron_h(); break;
        case family::jamba: read_jamba(); break;
        case family::falcon_h1: read_falcon_h1(); break;
        case family::zamba2: read_zamba2(); break;
        case family::mamba2: read_mamba2(); break;
        case family::mamba: read_mamba(); break;
        case family::nemotron_nas: read_nemotron_nas(); break;
        case family::mimo_v2: read_mimo_v2(); break;
      }
    }
    if (engine_.mtp) add_mtp_layers();
    refuse_unread_structure();

    model_shape s = groups_.shape(l.name("num_hidden_layers"));
    if (s.n_groups == 0) fail(l.name("num_hidden_layers"), "no layer keeps a KV cache or a state");
    if (const std::string_view problem = rule_problem(s, engine_); !problem.empty()) {
      fail("engine rule", std::string(problem));
    }
    s.query_heads = static_cast<std::uint32_t>(heads_);
    s.hidden_size = static_cast<std::uint32_t>(hidden_);
    s.normal_kv = dtype_;
    s.compact_kv = kv_format::q4_0;
    s.state_format = dtype_;
    s.ssm_state_format = ssm_format_.value_or(dtype_);

    model_description d;
    d.cost = from_shape(s, engine_);
    d.shape = s;
    d.engine = engine_;
    d.source = "hf-config";
    const std::optional<std::string> path = string_at(root_, root_, "_name_or_path");
    d.name = path && !path->empty() ? *path : !arch_.empty() ? arch_ : model_type_;
    return d;
  }

 private:
  const level& at() const { return text_ ? *text_ : root_; }

  const family_rule* find_rule() const {
    for (const family_rule& r : families) {
      if (r.model_type == model_type_) return &r;
    }
    // No model_type: the architecture's name.
    if (model_type_.empty()) {
      constexpr struct {
        std::string_view arch;
        std::string_view model_type;
      } by_arch[] = {{"Gemma2ForCausalLM", "gemma2"}, {"Gemma3ForCausalLM", "gemma3_text"},
                     {"Gemma3ForConditionalGeneration", "gemma3"}, {"LlamaForCausalLM", "llama"},
                     {"MistralForCausalLM", "mistral"}, {"Qwen2ForCausalLM", "qwen2"}, {"Qwen3ForCausalLM", "qwen3"}};
      for (const auto& a : by_arch) {
        if (a.arch != arch_) continue;
        for (const family_rule& r : families) {
          if (r.model_type == a.model_type) return &r;
        }
      }
    }
    return nullptr;
  }

  std::string family_name() const {
    return !model_type_.empty() ? "model_type \"" + model_type_ + "\"" : !arch_.empty() ? "architecture \"" + arch_ + "\"" : "a config without model_type";
  }

  bool is(std::string_view t) const { return model_type_ == t; }

  // num_attention_heads, num_key_value_heads, head_dim.
  void read_heads() {
    const level& l = at();
    const auto heads = optional_integer(l, "num_attention_heads", 1, max_heads);
    if (!heads && !gemma3_defaults_) fail(l.name("num_attention_heads"), "missing");
    heads_ = heads.value_or(8);
    const json* kv = l.find("num_key_value_heads");
    kv_heads_ = kv != nullptr ? integer(*kv, l.name("num_key_value_heads"), 1, max_heads) : gemma3_defaults_ && !heads ? 4 : heads_;
    if (heads_ % kv_heads_ != 0) {
      fail(l.name("num_key_value_heads"), std::to_string(kv_heads_) + " does not divide num_attention_heads (" +
                                              std::to_string(heads_) + ")");
    }
    if (const auto d = optional_integer(l, "head_dim", 1, max_head_dim)) {
      head_dim_ = *d;
    } else if (l.find("kv_lora_rank") != nullptr) {
      head_dim_ = 0;  // MLA caches its latent row, whatever the heads' size (read_mla)
    } else if (default_head_dim_ != 0) {
      head_dim_ = default_head_dim_;
    } else if (!known_family_) {
      fail(l.name("head_dim"), "missing, and pnmem does not know the default of " + family_name() +
                                   " (hidden_size / num_attention_heads = " + std::to_string(hidden_ / heads_) +
                                   " for most models, but not all: give head_dim)");
    } else {
      if (hidden_ % heads_ != 0 || hidden_ / heads_ > max_head_dim) {
        fail(l.name("head_dim"), "missing, and hidden_size (" + std::to_string(hidden_) +
                                     ") is not a multiple of num_attention_heads (" + std::to_string(heads_) + ")");
      }
      head_dim_ = hidden_ / heads_;
    }
  }

  std::uint64_t window() const {
    const level& l = at();
    const auto w = optional_integer(l, "sliding_window", 0, max_span);
    // sliding_window_size (Gemma 2's older name, MiMo's): only a copy of sliding_window here, which the
    // engines read for these families.
    if (const auto size = optional_integer(l, "sliding_window_size", 0, max_span); size && (!w || *size != *w)) {
      fail(l.name("sliding_window_size"), std::to_string(*size) + ", but sliding_window (the window the engines read for " +
                                              family_name() + ") is " + (w ? std::to_string(*w) : std::string("not set")));
    }
    if (w) return *w;
    return gemma3_defaults_ ? 4096 : 0;
  }

  // A per-layer array of exactly `layers_` entries.
  const json& per_layer_array(const char* key, const json& v) const {
    const level& l = at();
    if (!v.is_array()) fail(l.name(key), std::string("expected an array, got ") + v.type_name());
    if (v.size() != layers_) {
      fail(l.name(key), std::to_string(v.size()) + " entries for " + std::to_string(layers_) + " layers (num_hidden_layers)");
    }
    return v;
  }

  std::string entry(const char* key, std::size_t i) const { return at().name(key) + "[" + std::to_string(i) + "]"; }

  const std::string& string_entry(const char* key, const json& v, std::size_t i) const {
    if (!v[i].is_string()) fail(entry(key, i), "expected a string, got " + shown(v[i]));
    return v[i].get_ref<const std::string&>();
  }

  // The plain decoders: full and sliding (and chunked) attention layers. MiniMax's attn_type_list, one
  // entry a layer, says which layers are softmax attention (1) and which lightning (linear) attention
  // (0): MiniMax-M2 has only the first; a linear layer's state is not known to pnmem and is refused.
  void read_attention() {
    const level& l = at();
    if (const json* kinds = l.find("attn_type_list")) {
      const json& k = per_layer_array("attn_type_list", *kinds);
      for (std::size_t i = 0; i < k.size(); ++i) {
        if (integer(k[i], entry("attn_type_list", i), 0, 1) == 0) {
          fail(entry("attn_type_list", i), "0: a lightning (linear) attention layer, whose state pnmem does not know");
        }
      }
    }
    const std::uint64_t w = window();
    if (const json* types = l.find("layer_types")) {
      const json& t = per_layer_array("layer_types", *types);
      for (std::size_t i = 0; i < t.size(); ++i) {
        const std::string& name = string_entry("layer_types", t, i);
        if (name == "full_attention" || name == "attention") {
          groups_.add(kv_layer(layer_kind::full, kv_heads_, head_dim_));
        } else if (name == "sliding_attention") {
          groups_.add(w != 0 ? kv_layer(layer_kind::sliding, kv_heads_, head_dim_, w) : kv_layer(layer_kind::full, kv_heads_, head_dim_));
        } else if (name == "chunked_attention") {
          const auto c = optional_integer(l, "attention_chunk_size", 1, max_span);
          if (!c) fail(l.name("attention_chunk_size"), "missing, and " + entry("layer_types", i) + " is \"chunked_attention\"");
          groups_.add(kv_layer(layer_kind::chunked, kv_heads_, head_dim_, *c));
        } else {
          fail(entry("layer_types", i), "\"" + name + "\" is not a layer type pnmem knows for " + family_name() +
                                            " (full_attention, sliding_attention, chunked_attention)");
        }
      }
      return;
    }
    const std::uint64_t sliding = sliding_layers(w);
    if (layers_ > sliding) groups_.add(kv_layer(layer_kind::full, kv_heads_, head_dim_), static_cast<std::uint32_t>(layers_ - sliding));
    if (sliding > 0) groups_.add(kv_layer(layer_kind::sliding, kv_heads_, head_dim_, w), static_cast<std::uint32_t>(sliding));
  }

  // How many layers slide when there is no layer_types (rules 2 to 5 at the top of this file).
  std::uint64_t sliding_layers(std::uint64_t w) const {
    const level& l = at();
    if (const json* use = l.find("use_sliding_window")) {
      if (!use->is_boolean()) fail(l.name("use_sliding_window"), "expected true or false, got " + shown(*use));
      const auto full = optional_integer(l, "max_window_layers", 0, max_layers);
      if (!use->get<bool>() || w == 0) return 0;
      return full ? layers_ - std::min(*full, layers_) : layers_;
    }
    const auto pattern_key = optional_integer(l, "sliding_window_pattern", 1, max_layers);
    if (w == 0) return 0;
    std::optional<std::uint64_t> pattern = pattern_key;
    if (!pattern) {
      if (is("gemma2") || arch_ == "Gemma2ForCausalLM") {
        pattern = 2;
      } else if (gemma3_defaults_) {
        pattern = 6;
      }
    }
    if (pattern) return layers_ - layers_ / *pattern;
    for (const std::string_view f : all_sliding_families) {
      if (model_type_ == f) {
        // llama.cpp keeps no window for these: Phi-3's is disabled, Mistral loads as the Llama arch.
        if (engine_.engine == kv_engine::llama_cpp && (is("phi3") || is("mistral") || is("mixtral"))) return 0;
        return layers_;
      }
    }
    fail(l.name("sliding_window"), std::to_string(w) + ", but which layers of " + family_name() +
                                       " slide is not known (give layer_types)");
  }

  // MLA, and DeepSeek Sparse Attention's lightning indexer beside it (DeepSeek-V3.2, GLM-5: a config
  // with index_topk, as vLLM decides). The indexer keeps index_head_dim keys per token and layer: vLLM
  // (like the model's own inference code) in fp8 with an fp32 scale per 128 of them, bytes whatever the
  // KV cache's dtype (index_head_dim + index_head_dim / 128 x 4 = 132 B; the shape's side_bytes);
  // llama.cpp in a second K-only cache of index_head_dim values of the KV's type (a second latent-like
  // group). The layers that own an indexer: every layer, unless index_topk_pattern (one character a
  // layer: "F" owns one, "S" reuses the previous one's top-k and keeps no cache) or index_topk_freq and
  // index_skip_topk_offset (layer i owns one when max(i - offset + 1, 0) % freq == 0; defaults 1 and 2)
  // say otherwise, as vLLM reads them; indexer_types ("full" / "shared", transformers' spelling) and
  // layer_types ("deepseek_sparse_attention") must say the same.
  void read_mla() {
    const level& l = at();
    const std::uint64_t rank = required_integer(l, "kv_lora_rank", 1, max_head_dim);
    const std::uint64_t rope = required_integer(l, "qk_rope_head_dim", 0, max_head_dim);
    // The rest of the MLA head shapes do not reach the cache: the latent row is all it keeps.
    for (const char* key : {"qk_nope_head_dim", "v_head_dim", "q_lora_rank", "qk_head_dim"}) (void)l.find(key);
    if (window() != 0) fail(l.name("kv_lora_rank"), "an MLA model with sliding layers is not known to pnmem");
    const bool dsa = l.find("index_topk") != nullptr;
    std::uint64_t index_dim = 0;
    if (dsa) {
      (void)required_integer(l, "index_topk", 1, max_span);
      (void)optional_integer(l, "index_n_heads", 1, max_heads);  // the indexer's query heads: not cached
      const auto d = optional_integer(l, "index_head_dim", 1, max_head_dim);
      if (!d) {
        fail(l.name("index_head_dim"), "missing, and index_topk says the model has DeepSeek Sparse Attention's "
                                       "indexer, whose key cache is sized from it");
      }
      index_dim = *d;
    } else {
      for (const char* key : {"index_head_dim", "index_n_heads", "index_topk_freq", "index_topk_pattern",
                              "index_skip_topk_offset", "indexer_types"}) {
        if (const json* v = l.find(key); v != nullptr && is_set(*v)) {
          fail(l.name(key), "set (" + shown(*v) + "), but index_topk is not: vLLM builds DeepSeek Sparse "
                            "Attention's indexer only with index_topk, llama.cpp's converters from index_head_dim");
        }
      }
    }
    const std::vector<bool> owns = indexer_layers(dsa);
    if (const json* types = l.find("layer_types")) {
      const json& t = per_layer_array("layer_types", *types);
      for (std::size_t i = 0; i < t.size(); ++i) {
        const std::string& name = string_entry("layer_types", t, i);
        const bool sparse = name == "deepseek_sparse_attention" || name == "indexed_attention";
        if (!sparse && name != "full_attention" && name != "attention") {
          fail(entry("layer_types", i), "\"" + name + "\" is not a layer type pnmem knows for an MLA model "
                                        "(full_attention, deepseek_sparse_attention)");
        }
        if (sparse != dsa) {
          fail(entry("layer_types", i), "\"" + name + "\", but " + (dsa ? "index_topk is set (every layer "
                                        "attends through the indexer)" : "there is no indexer (no index_topk)"));
        }
      }
    }
    const layer_group latent = latent_layers(1, static_cast<std::uint32_t>(rank + rope));
    mtp_key_ = "num_nextn_predict_layers";
    mtp_layer_ = latent;
    for (std::size_t i = 0; i < layers_; ++i) {
      if (!owns[i]) {
        groups_.add(latent);
      } else if (engine_.engine == kv_engine::llama_cpp) {
        groups_.add(latent);
        groups_.add(latent_layers(1, static_cast<std::uint32_t>(index_dim)));
      } else {
        layer_group g = latent;
        g.side_bytes = static_cast<std::uint32_t>(dsa_indexer_bytes(index_dim));
        groups_.add(g);
        mtp_layer_ = g;  // an MTP layer of a sparse model priced with an indexer of its own (the higher)
      }
    }
  }

  // Which layers own DeepSeek Sparse Attention's indexer (read_mla): none without one.
  std::vector<bool> indexer_layers(bool dsa) const {
    const level& l = at();
    std::vector<bool> owns(static_cast<std::size_t>(layers_), dsa);
    if (!dsa) return owns;
    const json* pattern = l.find("index_topk_pattern");
    const auto freq = optional_integer(l, "index_topk_freq", 1, max_layers);
    const auto offset = optional_integer(l, "index_skip_topk_offset", 0, max_layers);
    if (pattern != nullptr) {
      if (!pattern->is_string()) fail(l.name("index_topk_pattern"), "expected a string of F and S, got " + shown(*pattern));
      const std::string& p = pattern->get_ref<const std::string&>();
      if (p.size() != layers_) {
        fail(l.name("index_topk_pattern"), std::to_string(p.size()) + " characters for " + std::to_string(layers_) +
                                               " layers (num_hidden_layers)");
      }
      for (std::size_t i = 0; i < p.size(); ++i) {
        if (p[i] != 'F' && p[i] != 'S') {
          fail(l.name("index_topk_pattern"), "character " + std::to_string(i) + " is '" + std::string(1, p[i]) +
                                                 "' (F: the layer owns an indexer, S: it reuses the previous one's)");
        }
        owns[i] = p[i] == 'F';
      }
    } else {
      const std::uint64_t f = freq.value_or(1);
      const std::uint64_t o = offset.value_or(2);
      for (std::size_t i = 0; i < owns.size(); ++i) owns[i] = (i + 1 >= o ? i + 1 - o : 0) % f == 0;
    }
    if (const json* types = l.find("indexer_types")) {
      const json& t = per_layer_array("indexer_types", *types);
      for (std::size_t i = 0; i < t.size(); ++i) {
        const std::string& name = string_entry("indexer_types", t, i);
        if (name != "full" && name != "shared") fail(entry("indexer_types", i), "\"" + name + "\" is not full or shared");
        if ((name == "full") != owns[i]) {
          fail(entry("indexer_types", i), "\"" + name + "\", but " +
                                              std::string(pattern != nullptr ? "index_topk_pattern" : "index_topk_freq and index_skip_topk_offset") +
                                              " (as vLLM reads them) make layer " + std::to_string(i) +
                                              (owns[i] ? " own an indexer" : " share the previous one's"));
        }
      }
    }
    return owns;
  }

  // MiMo-V2-Flash: hybrid_layer_pattern, one entry a layer, 1 a sliding layer and 0 a full one (vLLM's
  // is_compressed_softmax_layer; llama.cpp's converter writes it as the sliding pattern); layer_types
  // (transformers' spelling), when given, must say the same. Full layers: num_key_value_heads KV heads
  // of K rows head_dim and V rows v_head_dim (absent: head_dim) wide. Sliding layers:
  // swa_num_key_value_heads KV heads (required: vLLM reads it; transformers assumes twice the full
  // layers'), K swa_head_dim (absent: head_dim), V swa_v_head_dim (absent: swa_head_dim), over the
  // window sliding_window_size (vLLM's key; sliding_window, when also given, must agree). K and V are
  // each kept at their own width (vLLM's FlashAttentionDiffKVBackend; llama.cpp with flash attention).
  // The attention sinks are weights, not cache; attention_chunk_size, which some copies carry, is not
  // read by either engine for this model.
  void read_mimo_v2() {
    const level& l = at();
    if (l.find("head_dim") == nullptr) {
      fail(l.name("head_dim"), "missing (MiMo-V2's K rows are not hidden_size / num_attention_heads wide: give head_dim)");
    }
    const json* pattern = l.find("hybrid_layer_pattern");
    const json* types = l.find("layer_types");
    if (pattern == nullptr && types == nullptr) {
      fail(l.name("hybrid_layer_pattern"), "missing (and no layer_types): which layers slide is not known");
    }
    std::vector<bool> sliding(static_cast<std::size_t>(layers_), false);
    if (pattern != nullptr) {
      const json& p = per_layer_array("hybrid_layer_pattern", *pattern);
      for (std::size_t i = 0; i < p.size(); ++i) sliding[i] = integer(p[i], entry("hybrid_layer_pattern", i), 0, 1) == 1;
    }
    if (types != nullptr) {
      const json& t = per_layer_array("layer_types", *types);
      for (std::size_t i = 0; i < t.size(); ++i) {
        const std::string& name = string_entry("layer_types", t, i);
        if (name != "sliding_attention" && name != "full_attention") {
          fail(entry("layer_types", i), "\"" + name + "\" is not a MiMo-V2 layer type (full_attention, sliding_attention)");
        }
        if (pattern == nullptr) {
          sliding[i] = name == "sliding_attention";
        } else if ((name == "sliding_attention") != sliding[i]) {
          fail(entry("layer_types", i), "\"" + name + "\", but hybrid_layer_pattern makes layer " + std::to_string(i) +
                                            (sliding[i] ? " a sliding one" : " a full one"));
        }
      }
    }
    const std::uint64_t value_dim = optional_integer(l, "v_head_dim", 1, max_head_dim).value_or(head_dim_);
    const bool any_sliding = std::find(sliding.begin(), sliding.end(), true) != sliding.end();
    std::uint64_t swa_kv = 0, swa_k = 0, swa_v = 0, w = 0;
    if (any_sliding) {
      swa_kv = required_integer(l, "swa_num_key_value_heads", 1, max_heads);
      (void)optional_integer(l, "swa_num_attention_heads", 1, max_heads);  // queries: not cached
      swa_k = optional_integer(l, "swa_head_dim", 1, max_head_dim).value_or(head_dim_);
      swa_v = optional_integer(l, "swa_v_head_dim", 1, max_head_dim).value_or(swa_k);
      const auto size = optional_integer(l, "sliding_window_size", 1, max_span);
      const auto plain = optional_integer(l, "sliding_window", 1, max_span);
      if (size && plain && *size != *plain) {
        fail(l.name("sliding_window"), std::to_string(*plain) + ", but sliding_window_size (the window vLLM uses) is " +
                                           std::to_string(*size));
      }
      if (!size && !plain) fail(l.name("sliding_window_size"), "missing (and no sliding_window): the sliding layers' window is not known");
      w = size ? *size : *plain;
    } else {
      for (const char* key : {"swa_num_key_value_heads", "swa_num_attention_heads", "swa_head_dim", "swa_v_head_dim",
                              "sliding_window_size", "sliding_window"}) {
        (void)l.find(key);  // no sliding layer: nothing of theirs is kept
      }
    }
    (void)l.find("attention_chunk_size");
    for (std::size_t i = 0; i < sliding.size(); ++i) {
      groups_.add(sliding[i] ? attention_layers(layer_kind::sliding, 1, static_cast<std::uint32_t>(swa_kv),
                                                static_cast<std::uint32_t>(swa_k), static_cast<std::uint32_t>(swa_v),
                                                static_cast<std::uint32_t>(w))
                             : attention_layers(layer_kind::full, 1, static_cast<std::uint32_t>(kv_heads_),
                                                static_cast<std::uint32_t>(head_dim_), static_cast<std::uint32_t>(value_dim)));
    }
  }

  void read_gemma4() {
    const level& l = at();
    const std::uint64_t w = window();
    const std::uint64_t global_dim = optional_integer(l, "global_head_dim", 1, max_head_dim).value_or(head_dim_);
    const bool k_eq_v = optional_bool(l, "attention_k_eq_v", false);
    const auto global_kv = optional_integer(l, "num_global_key_value_heads", 1, max_heads);
    const std::uint64_t full_kv = k_eq_v && global_kv ? *global_kv : kv_heads_;
    const std::uint64_t shared = optional_integer(l, "num_kv_shared_layers", 0, layers_).value_or(0);
    const json* types = l.find("layer_types");
    if (types == nullptr) fail(l.name("layer_types"), "missing (Gemma 4 says which layers slide there)");
    const json& t = per_layer_array("layer_types", *types);
    for (std::size_t i = 0; i < t.size(); ++i) {
      const std::string& name = string_entry("layer_types", t, i);
      const bool own_kv = i < layers_ - shared;
      if (name == "sliding_attention") {
        if (own_kv) groups_.add(w != 0 ? kv_layer(layer_kind::sliding, kv_heads_, head_dim_, w) : kv_layer(layer_kind::full, kv_heads_, head_dim_));
      } else if (name == "full_attention") {
        if (own_kv) groups_.add(kv_layer(layer_kind::full, full_kv, global_dim));
      } else {
        fail(entry("layer_types", i), "\"" + name + "\" is not a Gemma 4 layer type (full_attention, sliding_attention)");
      }
    }
  }

  // The head size of `heads` Mamba heads making up `inner` (which `inner_from` names), which they must
  // divide, as transformers' config classes require.
  std::uint64_t mamba_head_size(const level& l, const char* heads_key, std::uint64_t inner, std::uint64_t heads,
                                const char* inner_from) const {
    if (inner % heads != 0) {
      fail(l.name(heads_key), std::to_string(heads) + " heads do not divide the Mamba inner size " + std::to_string(inner) +
                                  " (" + inner_from + ")");
    }
    return inner / heads;
  }

  // A key the family's config class derives (`how`) and ignores: a file that writes another value is not
  // in the format the engines read, and is refused.
  void refuse_other_than_derived(const level& l, const char* key, std::uint64_t derived, const char* how) const {
    if (const auto written = optional_integer(l, key, 1, max_head_dim); written && *written != derived) {
      fail(l.name(key), std::to_string(*written) + ", but " + how + " = " + std::to_string(derived) +
                            " and ignores this key (a config not in the transformers format?)");
    }
  }

  void read_llama4() {
    const level& l = at();
    // Llama4TextConfig's rules, which vLLM reads the config through: attention_chunk_size is 8192 when
    // absent (null: no chunks, every layer full); no_rope_layers (at least one entry a layer; absent or
    // empty: a NoPE layer every no_rope_layer_interval-th, default 4) makes a RoPE layer (1) chunked and
    // a NoPE one (0) full; layer_types, which transformers derives from it, must agree.
    const bool chunk_written = l.obj.contains("attention_chunk_size");
    std::optional<std::uint64_t> chunk = optional_integer(l, "attention_chunk_size", 1, max_span);
    if (!chunk && !chunk_written) chunk = 8192;
    const std::uint64_t interval = optional_integer(l, "no_rope_layer_interval", 1, max_layers).value_or(4);
    const json* nope = l.find("no_rope_layers");
    if (nope != nullptr) {
      if (!nope->is_array()) fail(l.name("no_rope_layers"), "expected an array, got " + shown(*nope));
      if (!nope->empty() && nope->size() < layers_) {
        fail(l.name("no_rope_layers"), std::to_string(nope->size()) + " entries for " + std::to_string(layers_) + " layers (num_hidden_layers)");
      }
      if (nope->empty()) nope = nullptr;  // Llama4TextConfig: an empty list is the default pattern
    }
    const json* types = l.find("layer_types");
    if (types != nullptr) per_layer_array("layer_types", *types);
    for (std::size_t i = 0; i < layers_; ++i) {
      const bool chunked = nope != nullptr ? integer((*nope)[i], entry("no_rope_layers", i), 0, 1) == 1
                                           : (i + 1) % interval != 0;  // a RoPE layer
      if (types != nullptr) {
        // vLLM chunks the RoPE layers of no_rope_layers (or its default); a layer_types that says
        // otherwise would be priced as neither engine runs it.
        const std::string& name = string_entry("layer_types", *types, i);
        if (name != "chunked_attention" && name != "full_attention") {
          fail(entry("layer_types", i), "\"" + name + "\" is not a Llama 4 layer type (chunked_attention, full_attention)");
        }
        if ((name == "chunked_attention") != chunked) {
          fail(entry("layer_types", i), "\"" + name + "\", but no_rope_layers" + (nope != nullptr ? "" : "' default") + " makes layer " +
                                            std::to_string(i) + (chunked ? " a RoPE (chunked) layer" : " a NoPE (full) layer"));
        }
      }
      if (chunk && chunked) {
        groups_.add(kv_layer(layer_kind::chunked, kv_heads_, head_dim_, *chunk));
      } else {
        groups_.add(kv_layer(layer_kind::full, kv_heads_, head_dim_));
      }
    }
  }

  void read_mllama() {
    const level& l = at();
    const json* cross = l.find("cross_attention_layers");
    std::vector<bool> is_cross(static_cast<std::size_t>(layers_), false);
    if (cross != nullptr) {
      if (!cross->is_array()) fail(l.name("cross_attention_layers"), "expected an array of layer indices, got " + shown(*cross));
      for (std::size_t i = 0; i < cross->size(); ++i) {
        const std::uint64_t at_layer = integer((*cross)[i], entry("cross_attention_layers", i), 0, layers_ - 1);
        if (is_cross[at_layer]) fail(entry("cross_attention_layers", i), "layer " + std::to_string(at_layer) + " listed twice");
        is_cross[at_layer] = true;
      }
    }
    std::uint64_t per_image = 0;
    if (cross != nullptr && !cross->empty()) {
      const json* vision = root_.find("vision_config");
      if (vision == nullptr || !vision->is_object()) fail("vision_config", "missing (the cross-attention layers' tokens per image come from it)");
      const level v{*vision, "vision_config."};
      const std::uint64_t image = required_integer(v, "image_size", 1, max_span);
      const std::uint64_t patch = required_integer(v, "patch_size", 1, max_span);
      const std::uint64_t tiles = required_integer(v, "max_num_tiles", 1, 1024);
      const std::uint64_t side = image / patch;
      per_image = tiles * (side * side + 1);
      if (per_image > max_span) fail(v.name("image_size"), "too many tokens per image");
    }
    for (std::size_t i = 0; i < is_cross.size(); ++i) {
      groups_.add(is_cross[i] ? kv_layer(layer_kind::cross, kv_heads_, head_dim_, per_image) : kv_layer(layer_kind::full, kv_heads_, head_dim_));
    }
  }

  void read_gated_delta() {
    const level& l = at();
    const std::uint64_t kh = optional_integer(l, "linear_num_key_heads", 1, max_heads).value_or(16);
    const std::uint64_t vh = optional_integer(l, "linear_num_value_heads", 1, max_heads).value_or(32);
    const std::uint64_t dk = optional_integer(l, "linear_key_head_dim", 1, max_head_dim).value_or(128);
    const std::uint64_t dv = optional_integer(l, "linear_value_head_dim", 1, max_head_dim).value_or(128);
    const std::uint64_t k = optional_integer(l, "linear_conv_kernel_dim", 1, 1024).value_or(4);
    const layer_group linear = recurrent_layers(1, (k - 1) * (2 * kh * dk + vh * dv), vh * dv * dk);
    if (const json* ssm = l.find("mamba_ssm_dtype")) ssm_format_ = dtype_named(*ssm, l.name("mamba_ssm_dtype"));
    const std::uint64_t interval = optional_integer(l, "full_attention_interval", 1, max_layers).value_or(4);
    // vLLM's drafters: Qwen3NextMTP reads num_nextn_predict_layers, Qwen3.5's mtp_num_hidden_layers; 1 if absent.
    mtp_key_ = is("qwen3_next") ? "num_nextn_predict_layers" : "mtp_num_hidden_layers";
    mtp_default_ = 1;
    mtp_layer_ = kv_layer(layer_kind::full, kv_heads_, head_dim_);
    const json* types = l.find("layer_types");
    if (types != nullptr) per_layer_array("layer_types", *types);
    for (std::size_t i = 0; i < layers_; ++i) {
      bool full = (i + 1) % interval == 0;
      if (types != nullptr) {
        const std::string& name = string_entry("layer_types", *types, i);
        if (name != "full_attention" && name != "linear_attention") {
          fail(entry("layer_types", i), "\"" + name + "\" is not a layer type of " + family_name() + " (full_attention, linear_attention)");
        }
        full = name == "full_attention";
      }
      groups_.add(full ? kv_layer(layer_kind::full, kv_heads_, head_dim_) : linear);
    }
  }

  // NemotronH's layer kinds: hybrid_override_pattern, a character a layer, or layers_block_type, newer
  // transformers' spelling of the same ("linear_attention" or "mamba" for 'M', "full_attention" or
  // "attention" for '*', "moe" for 'E', "mlp" for '-'); when both are given they must agree.
  std::string nemotron_h_pattern() const {
    const level& l = at();
    const json* pattern = l.find("hybrid_override_pattern");
    const json* types = l.find("layers_block_type");
    if (pattern != nullptr && !pattern->is_string()) fail(l.name("hybrid_override_pattern"), "expected a string, got " + shown(*pattern));
    if (pattern == nullptr && types == nullptr) fail(l.name("hybrid_override_pattern"), "missing (and no layers_block_type)");
    std::string from_types;
    if (types != nullptr) {
      const json& t = per_layer_array("layers_block_type", *types);
      for (std::size_t i = 0; i < t.size(); ++i) {
        const std::string& name = string_entry("layers_block_type", t, i);
        const char c = name == "linear_attention" || name == "mamba"    ? 'M'
                       : name == "full_attention" || name == "attention" ? '*'
                       : name == "moe"                                   ? 'E'
                       : name == "mlp"                                   ? '-'
                                                                         : '?';
        if (c == '?') {
          fail(entry("layers_block_type", i), "\"" + name + "\" is not a NemotronH block type (linear_attention, "
                                              "full_attention, moe, mlp)");
        }
        from_types += c;
      }
    }
    if (pattern == nullptr) return from_types;
    const std::string& p = pattern->get_ref<const std::string&>();
    if (types != nullptr && p != from_types) {
      fail(l.name("layers_block_type"), "does not say what hybrid_override_pattern says (\"" + p + "\")");
    }
    return p;
  }

  void read_nemotron_h() {
    const level& l = at();
    const std::string p = nemotron_h_pattern();
    if (p.size() != layers_) {
      fail(l.name("hybrid_override_pattern"), std::to_string(p.size()) + " characters for " + std::to_string(layers_) + " layers (num_hidden_layers)");
    }
    const std::uint64_t heads = required_integer(l, "mamba_num_heads", 1, max_heads);
    const std::uint64_t dim = required_integer(l, "mamba_head_dim", 1, max_head_dim);
    const std::uint64_t state = required_integer(l, "ssm_state_size", 1, max_head_dim);
    const std::uint64_t groups = optional_integer(l, "n_groups", 1, max_heads).value_or(1);
    const std::uint64_t kernel = optional_integer(l, "conv_kernel", 1, 1024).value_or(4);
    (void)l.find("expand");  // vLLM sizes the inner dimension as heads x head_dim, not expand x hidden
    const layer_group mamba = mamba2_layer(heads * dim, groups, state, kernel, heads, dim);
    // vLLM keeps Nemotron-H's SSM state in fp32 unless the config says otherwise.
    const json* ssm = l.find("mamba_ssm_cache_dtype");
    ssm_format_ = ssm != nullptr ? dtype_named(*ssm, l.name("mamba_ssm_cache_dtype")) : kv_format::fp32;
    for (std::size_t i = 0; i < p.size(); ++i) {
      switch (p[i]) {
        case '*': groups_.add(kv_layer(layer_kind::full, kv_heads_, head_dim_)); break;
        case 'M': groups_.add(mamba); break;
        case '-':
        case 'E': break;
        default:
          fail(l.name("hybrid_override_pattern"), "character " + std::to_string(i) + " is '" + std::string(1, p[i]) +
                                                      "' (pnmem knows '*' attention, 'M' Mamba-2, '-' MLP, 'E' MoE)");
      }
    }
  }

  void read_jamba() {
    const level& l = at();
    const std::uint64_t period = optional_integer(l, "attn_layer_period", 1, max_layers).value_or(8);
    const std::uint64_t offset = optional_integer(l, "attn_layer_offset", 0, max_layers).value_or(4);
    if (offset >= period) fail(l.name("attn_layer_offset"), std::to_string(offset) + " is not below attn_layer_period (" + std::to_string(period) + ")");
    const std::uint64_t inner = scaled(l, "mamba_expand", 2, hidden_, true);
    const std::uint64_t state = optional_integer(l, "mamba_d_state", 1, max_head_dim).value_or(16);
    const std::uint64_t kernel = optional_integer(l, "mamba_d_conv", 1, 1024).value_or(4);
    const layer_group mamba = recurrent_layers(1, (kernel - 1) * inner, inner * state);
    if (window() != 0) fail(l.name("sliding_window"), "set on a Jamba model: pnmem does not know which layers slide");
    for (std::size_t i = 0; i < layers_; ++i) {
      groups_.add(i % period == offset ? kv_layer(layer_kind::full, kv_heads_, head_dim_) : mamba);
    }
  }

  void read_falcon_h1() {
    const level& l = at();
    // FalconH1Config's defaults, which vLLM reads the config through: mamba_d_ssm 1024 when absent and
    // mamba_expand x hidden_size when null; mamba_n_heads 128, each of mamba_d_head ("auto": the inner
    // size / heads), which must make up the inner size exactly (transformers refuses the config
    // otherwise); mamba_d_state 256.
    const bool d_ssm_written = l.obj.contains("mamba_d_ssm");
    const json* d_ssm = l.find("mamba_d_ssm");
    const std::uint64_t inner = d_ssm != nullptr   ? integer(*d_ssm, l.name("mamba_d_ssm"), 1, max_hidden)
                                : d_ssm_written    ? scaled(l, "mamba_expand", 2, hidden_, true)
                                                   : 1024;
    if (d_ssm != nullptr || !d_ssm_written) (void)l.find("mamba_expand");  // FalconH1Config does not use it then
    const std::uint64_t heads = optional_integer(l, "mamba_n_heads", 1, max_heads).value_or(128);
    const char* inner_from = d_ssm != nullptr ? "mamba_d_ssm" : d_ssm_written ? "mamba_expand x hidden_size" : "mamba_d_ssm's default";
    std::uint64_t dim = mamba_head_size(l, "mamba_n_heads", inner, heads, inner_from);
    const json* d_head = l.find("mamba_d_head");
    if (d_head != nullptr && !(d_head->is_string() && d_head->get_ref<const std::string&>() == "auto")) {
      dim = integer(*d_head, l.name("mamba_d_head"), 1, max_head_dim);
      if (dim * heads != inner) {
        fail(l.name("mamba_d_head"), std::to_string(dim) + " x " + std::to_string(heads) + " heads is not the Mamba inner size " +
                                         std::to_string(inner) + " (" + inner_from + ")");
      }
    }
    const std::uint64_t state = optional_integer(l, "mamba_d_state", 1, max_head_dim).value_or(256);
    const std::uint64_t groups = optional_integer(l, "mamba_n_groups", 1, max_heads).value_or(1);
    const std::uint64_t kernel = optional_integer(l, "mamba_d_conv", 1, 1024).value_or(4);
    groups_.add(kv_layer(layer_kind::full, kv_heads_, head_dim_), static_cast<std::uint32_t>(layers_));
    groups_.add(mamba2_layer(inner, groups, state, kernel, heads, dim), static_cast<std::uint32_t>(layers_));
  }

  void read_zamba2() {
    const level& l = at();
    // Zamba2Config (every transformers version vLLM reads it through) derives two sizes and ignores the
    // keys written for them: the Mamba head size, mamba_expand x hidden_size / n_mamba_heads, and the
    // shared attention's head size, 2 x hidden_size / num_attention_heads. A config that writes other
    // values is not in that format (Zyphra's pre-transformers configs: state_size, expansion_factor,
    // kv_channels, ...): refused, naming the key, rather than priced as transformers would misread it.
    const std::uint64_t inner = scaled(l, "mamba_expand", 2, hidden_, true);
    const std::uint64_t heads = optional_integer(l, "n_mamba_heads", 1, max_heads).value_or(8);
    const std::uint64_t dim = mamba_head_size(l, "n_mamba_heads", inner, heads, "mamba_expand x hidden_size");
    refuse_other_than_derived(l, "mamba_headdim", dim, "Zamba2Config derives mamba_expand x hidden_size / n_mamba_heads");
    const std::uint64_t state = optional_integer(l, "mamba_d_state", 1, max_head_dim).value_or(64);
    const std::uint64_t groups = optional_integer(l, "mamba_ngroups", 1, max_heads).value_or(1);
    const std::uint64_t kernel = optional_integer(l, "mamba_d_conv", 1, 1024).value_or(4);
    // The shared attention block: its own KV in each hybrid layer (vLLM keeps one per hybrid layer
    // although their weights are shared), MHA of 2 x hidden_size / num_attention_heads.
    if (2 * hidden_ % heads_ != 0) {
      fail(l.name("num_attention_heads"), std::to_string(heads_) + " heads do not divide 2 x hidden_size (" + std::to_string(2 * hidden_) + ")");
    }
    const std::uint64_t attn_dim = 2 * hidden_ / heads_;
    refuse_other_than_derived(l, "attention_head_dim", attn_dim, "Zamba2Config derives 2 x hidden_size / num_attention_heads");
    (void)l.find("num_mem_blocks");
    // Which layers are hybrid: layers_block_type ("mamba" / "hybrid"; Zamba2Config derives
    // hybrid_layer_ids from it), else hybrid_layer_ids, else Zamba2Config's default pattern, which is
    // for its 54 layers only.
    std::vector<bool> hybrid(static_cast<std::size_t>(layers_), false);
    const json* types = l.find("layers_block_type");
    const json* ids = l.find("hybrid_layer_ids");
    std::vector<bool> listed(static_cast<std::size_t>(layers_), false);
    if (ids != nullptr) {
      if (!ids->is_array()) fail(l.name("hybrid_layer_ids"), "expected an array of layer indices, got " + shown(*ids));
      for (std::size_t i = 0; i < ids->size(); ++i) listed[integer((*ids)[i], entry("hybrid_layer_ids", i), 0, layers_ - 1)] = true;
    }
    if (types != nullptr) {
      const json& t = per_layer_array("layers_block_type", *types);
      for (std::size_t i = 0; i < t.size(); ++i) {
        const std::string& name = string_entry("layers_block_type", t, i);
        if (name != "mamba" && name != "hybrid") fail(entry("layers_block_type", i), "\"" + name + "\" is not a Zamba2 block type (mamba, hybrid)");
        hybrid[i] = name == "hybrid";
      }
      if (ids != nullptr && listed != hybrid) {
        fail(l.name("hybrid_layer_ids"), "does not list the layers that layers_block_type calls \"hybrid\" (Zamba2Config derives it from layers_block_type)");
      }
    } else if (ids != nullptr) {
      hybrid = listed;
    } else if (layers_ == 54) {
      constexpr std::size_t default_hybrid[] = {6, 12, 18, 24, 30, 36, 42, 47, 51};
      for (const std::size_t i : default_hybrid) hybrid[i] = true;
    } else {
      fail(l.name("layers_block_type"), "missing (and no hybrid_layer_ids): which layers hold attention is not known (Zamba2Config's default pattern is for 54 layers, not " +
                                            std::to_string(layers_) + ")");
    }
    const layer_group mamba = mamba2_layer(inner, groups, state, kernel, heads, dim);
    for (std::size_t i = 0; i < hybrid.size(); ++i) {
      groups_.add(mamba);
      if (hybrid[i]) groups_.add(kv_layer(layer_kind::full, heads_, attn_dim));
    }
  }

  void read_mamba2() {
    const level& l = at();
    const std::uint64_t inner = scaled(l, "expand", 2, hidden_, true);
    const std::uint64_t heads = required_integer(l, "num_heads", 1, max_heads);
    const std::uint64_t dim = optional_integer(l, "head_dim", 1, max_head_dim).value_or(inner / heads);
    const std::uint64_t state = required_integer(l, "state_size", 1, max_head_dim);
    const std::uint64_t groups = optional_integer(l, "n_groups", 1, max_heads).value_or(1);
    const std::uint64_t kernel = optional_integer(l, "conv_kernel", 1, 1024).value_or(4);
    if (heads * dim != inner) {
      fail(l.name("num_heads"), std::to_string(heads) + " heads x head_dim " + std::to_string(dim) +
                                    " is not the inner size expand x hidden_size (" + std::to_string(inner) + ")");
    }
    groups_.add(mamba2_layer(inner, groups, state, kernel, heads, dim), static_cast<std::uint32_t>(layers_));
  }

  void read_mamba() {
    const level& l = at();
    const auto given = optional_integer(l, "intermediate_size", 1, max_hidden);
    const std::uint64_t inner = given ? *given : scaled(l, "expand", 2, hidden_, true);
    const std::uint64_t state = optional_integer(l, "state_size", 1, max_head_dim).value_or(16);
    const std::uint64_t kernel = optional_integer(l, "conv_kernel", 1, 1024).value_or(4);
    groups_.add(recurrent_layers(1, (kernel - 1) * inner, inner * state), static_cast<std::uint32_t>(layers_));
  }

  void read_nemotron_nas() {
    const level& l = at();
    const json* blocks = l.find("block_configs");
    if (blocks == nullptr) fail(l.name("block_configs"), "missing (a Nemotron-NAS model says there what each layer holds)");
    const json& b = per_layer_array("block_configs", *blocks);
    for (std::size_t i = 0; i < b.size(); ++i) {
      const std::string at_block = entry("block_configs", i);
      if (!b[i].is_object() || !b[i].contains("attention") || !b[i]["attention"].is_object()) {
        fail(at_block + ".attention", "expected an object");
      }
      const level a{b[i]["attention"], at_block + ".attention."};
      if (optional_bool(a, "no_op", false) || optional_bool(a, "replace_with_linear", false)) continue;
      const std::uint64_t group = required_integer(a, "n_heads_in_group", 1, max_heads);
      if (heads_ % group != 0) {
        fail(a.name("n_heads_in_group"), std::to_string(group) + " does not divide num_attention_heads (" + std::to_string(heads_) + ")");
      }
      groups_.add(kv_layer(layer_kind::full, heads_ / group, head_dim_));
    }
  }

  // The model's MTP layers, when the rule says they run as its speculative drafter (engine_rule::mtp):
  // DeepSeek's, Kimi's and GLM-5's num_nextn_predict_layers MLA layers (a sparse model's priced with an
  // indexer of its own), Qwen3-Next's num_nextn_predict_layers and Qwen3.5's mtp_num_hidden_layers (1 when
  // absent, as vLLM reads them) full-attention layers. vLLM keeps each one's KV as a layer of the model's
  // (its DeepSeekMTP and Qwen3NextMTP drafters' layers share the model's KV-cache groups), however many
  // tokens it drafts. Refused, naming the key, for a family whose MTP layers pnmem does not know and for
  // a config that has none.
  void add_mtp_layers() {
    const level& l = at();
    if (!mtp_layer_) {
      fail(l.name("num_nextn_predict_layers"), "the rule asks for MTP layers (mtp), but pnmem knows none for " +
                                                   family_name() + " (DeepSeek-style num_nextn_predict_layers, "
                                                   "Qwen3-Next-style mtp_num_hidden_layers)");
    }
    const std::optional<std::uint64_t> given = optional_integer(l, mtp_key_, 0, max_layers);
    if (!given && !mtp_default_) fail(l.name(mtp_key_), "missing, and the rule asks for MTP layers (mtp)");
    const std::uint64_t n = given ? *given : *mtp_default_;
    if (n == 0) fail(l.name(mtp_key_), "0: the model has no MTP layers, and the rule asks for them (mtp)");
    groups_.add(*mtp_layer_, static_cast<std::uint32_t>(n));
  }

  // A structural key the family's rule did not read: refused rather than priced wrong.
  void refuse_unread_structure() const {
    const level& l = at();
    for (const char* key : structural_keys) {
      if (l.read.count(key) != 0) continue;
      const auto it = l.obj.find(key);
      if (it == l.obj.end() || !is_set(*it)) continue;
      fail(l.name(key), "set (" + shown(*it) + "), but pnmem does not read it for " + family_name() +
                            ": the memory it implies would be priced wrong");
    }
  }

  level root_;
  std::optional<level> text_;
  engine_rule engine_;
  std::string arch_;
  std::string model_type_;
  bool gemma3_defaults_ = false;
  bool known_family_ = false;
  std::uint32_t default_head_dim_ = 0;
  std::uint64_t layers_ = 0;
  std::uint64_t hidden_ = 0;
  std::uint64_t heads_ = 0;
  std::uint64_t kv_heads_ = 0;
  std::uint64_t head_dim_ = 0;
  kv_format dtype_ = kv_format::f16;
  std::optional<kv_format> ssm_format_;
  const char* mtp_key_ = "num_nextn_predict_layers";  // where the family counts its MTP layers
  std::optional<layer_group> mtp_layer_;              // the family's MTP layer, when pnmem knows it
  std::optional<std::uint64_t> mtp_default_;          // their count when the config does not say (vLLM's)
  groups_builder groups_;
};

}  // namespace

read_result<model_description> read_hf_config(std::string_view json_text, const engine_rule& engine) {
  json j;
  try {
    const std::string strict = replace_nonfinite(json_text);
    j = json::parse(strict.begin(), strict.end());
  } catch (const json::exception& e) {
    return read_result<model_description>::fail(std::string("config.json: not JSON: ") + e.what());
  }
  try {
    reader r(j, engine);
    return read_result<model_description>::ok(r.read());
  } catch (const bad_key& e) {
    return read_result<model_description>::fail(e.what);
  } catch (const json::exception& e) {
    return read_result<model_description>::fail(std::string("config.json: malformed: ") + e.what());
  }
}

read_result<model_description> read_hf_config_file(const std::string& path, const engine_rule& engine) {
  // A directory is a model's: its config.json (a path that is no directory, or cannot be looked at,
  // is opened as given, and the open says what is wrong with it).
  std::error_code ec;
  const std::string file = std::filesystem::is_directory(path, ec) ? (std::filesystem::path(path) / "config.json").string() : path;
  const read_result<std::string> text = read_text_file(file);
  if (!text) return read_result<model_description>::fail(text.error);  // names the file already
  read_result<model_description> d = read_hf_config(*text.value, engine);
  if (!d) {
    // "config.json: not JSON: ..." names the file by its kind; here it has its path.
    constexpr std::string_view kind = "config.json: ";
    if (d.error.compare(0, kind.size(), kind) == 0) d.error.erase(0, kind.size());
    d.error = file + ": " + d.error;
  }
  return d;
}

}  // namespace pnmem::model_files
