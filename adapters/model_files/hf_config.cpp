// adapters/model_files/hf_config.cpp - a model's costs from a Hugging Face config.json (hf_config.hpp).
//
// The key rules, in the order they are applied. "Integer" means a JSON integer (not a float, not a
// boolean, not a string); a key given as null counts as absent. Every error names the key (with its
// "text_config." prefix when read from there) and what was wrong.
//
//   Where:          the top level; when it has no num_hidden_layers and has a "text_config" object (the
//                   multimodal configs: Gemma 3, Llava, Mllama, ...), that object instead. The dtype keys,
//                   architectures and model_type are looked up there first, then at the top level;
//                   _name_or_path at the top level only.
//   num_hidden_layers     required integer, 1 to 2^20.
//   num_attention_heads   required integer, 1 to 2^20 (query heads).
//   num_key_value_heads   integer, 1 to 2^20; absent: num_attention_heads (no GQA). Must divide
//                         num_attention_heads.
//   hidden_size           required integer, 1 to 2^24.
//   head_dim              integer, 1 to 2^20; absent: hidden_size / num_attention_heads, which must divide
//                         exactly. K and V rows both have head_dim values per KV head.
//   sliding_window        integer, 0 to 2^32-1; absent or 0: no layer slides (whatever the keys below say).
//   Which layers slide (when there is a window), the first rule that applies:
//     1. layer_types: an array of exactly num_hidden_layers strings. "full_attention" (and
//        "chunked_attention", "attention": counted as full, an over-estimate) are full-attention KV
//        layers, "sliding_attention" a sliding one; any other type ("linear_attention", "mamba", ...) has
//        no KV cache and is not counted in `layers` at all (its recurrent state is not derived here:
//        state_bytes_per_seq stays 0). At least one KV layer is required. Without a window, sliding
//        layers count as full.
//     2. use_sliding_window (a boolean; Qwen2 style): false: no layer slides. true: layers from
//        max_window_layers on slide (the first max_window_layers are full; absent: all slide).
//     3. sliding_window_pattern N (an integer, 1 to 2^20; Gemma 3): every N-th layer is full, i.e.
//        layers - layers / N slide (layer i slides unless (i + 1) % N == 0).
//     4. Gemma 2 (architectures[0] "Gemma2ForCausalLM" or model_type "gemma2"): layers alternate,
//        even ones slide: layers - layers / 2.
//        Gemma 3 (model_type "gemma3" / "gemma3_text", or architectures[0] "Gemma3ForCausalLM" /
//        "Gemma3ForConditionalGeneration") without a pattern key: transformers' default N = 6, as rule 3.
//     5. Otherwise (Mistral style): every layer slides.
//   dtype / torch_dtype   the weights' dtype, which vLLM's and SGLang's default KV cache ("auto") follows:
//                         "bfloat16" -> bf16, "float16" / "half" -> f16, "float32" / "float" -> fp32
//                         (vLLM serves float32 checkpoints in 16 bits by default: fp32 over-estimates
//                         them), and the other float names parse_kv_format knows (f32, f16, bf16, fp8,
//                         fp8_e4m3, fp8_e5m2). "dtype" (transformers >= 4.56) wins over "torch_dtype".
//                         Absent: f16. Another string is an error.
//   compact_kv            always q4_0 (the ladder's forced 4-bit format).
//   name                  _name_or_path if a non-empty string, else architectures[0], else model_type.
//   source                "hf-config".
//
// The costs are from_shape(shape) (cost_model.hpp), with the shape's activation defaults (256 MiB fixed).
#include "pnmem/model_files/hf_config.hpp"

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "pnmem/cost_model.hpp"

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
constexpr std::uint64_t max_window = 0xffffffffULL;

// One level of the config (the top level or text_config), with the prefix its keys are named with.
struct level {
  const json& obj;
  std::string prefix;

  const json* find(const char* key) const {
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
  fail(key, std::string("expected an integer, got ") + v.type_name());
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

// A string key looked up in `l`, then at the top level (`root`); nullopt when absent in both.
std::optional<std::string> string_at(const level& l, const level& root, const char* key) {
  for (const level* x : {&l, &root}) {
    const json* v = x->find(key);
    if (v == nullptr) continue;
    if (!v->is_string()) fail(x->name(key), std::string("expected a string, got ") + v->type_name());
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

kv_format dtype_at(const level& l, const level& root) {
  for (const char* key : {"dtype", "torch_dtype"}) {
    for (const level* x : {&l, &root}) {
      const json* v = x->find(key);
      if (v == nullptr) continue;
      if (!v->is_string()) fail(x->name(key), std::string("expected a dtype name, got ") + v->type_name());
      const auto s = v->get<std::string>();
      kv_format f{};
      if (s == "float") return kv_format::fp32;
      if (parse_kv_format(s, f) && f != kv_format::q4 && f != kv_format::q4_0 && f != kv_format::q8_0) return f;
      fail(x->name(key), "\"" + s + "\" is not a dtype pnmem knows (bfloat16, float16, float32)");
    }
  }
  return kv_format::f16;
}

struct layer_split {
  std::uint64_t layers = 0;   // KV layers
  std::uint64_t sliding = 0;  // of which sliding
};

layer_split split_layers(const level& l, std::uint64_t n_layers, std::uint64_t window, const std::string& arch,
                         const std::string& model_type) {
  if (const json* types = l.find("layer_types")) {
    const std::string key = l.name("layer_types");
    if (!types->is_array()) fail(key, std::string("expected an array of layer types, got ") + types->type_name());
    if (types->size() != n_layers) {
      fail(key, std::to_string(types->size()) + " entries for " + std::to_string(n_layers) +
                    " layers (num_hidden_layers)");
    }
    layer_split s;
    for (std::size_t i = 0; i < types->size(); ++i) {
      const json& t = (*types)[i];
      if (!t.is_string()) fail(key + "[" + std::to_string(i) + "]", std::string("expected a string, got ") + t.type_name());
      const auto& name = t.get_ref<const std::string&>();
      if (name == "sliding_attention") {
        ++s.layers;
        if (window != 0) ++s.sliding;
      } else if (name == "full_attention" || name == "chunked_attention" || name == "attention") {
        ++s.layers;
      }
    }
    if (s.layers == 0) fail(key, "no attention layer (no layer keeps a KV cache)");
    return s;
  }
  layer_split s{n_layers, 0};
  if (window == 0) return s;
  if (const json* use = l.find("use_sliding_window")) {
    if (!use->is_boolean()) fail(l.name("use_sliding_window"), std::string("expected true or false, got ") + use->type_name());
    if (!use->get<bool>()) return s;
    const auto full = optional_integer(l, "max_window_layers", 0, max_layers);
    s.sliding = full ? n_layers - (*full < n_layers ? *full : n_layers) : n_layers;
    return s;
  }
  std::optional<std::uint64_t> pattern = optional_integer(l, "sliding_window_pattern", 1, max_layers);
  if (!pattern) {
    if (arch == "Gemma2ForCausalLM" || model_type == "gemma2") {
      pattern = 2;
    } else if (arch == "Gemma3ForCausalLM" || arch == "Gemma3ForConditionalGeneration" || model_type == "gemma3" ||
               model_type == "gemma3_text") {
      pattern = 6;
    }
  }
  s.sliding = pattern ? n_layers - n_layers / *pattern : n_layers;
  return s;
}

model_description read(const json& root_json) {
  if (!root_json.is_object()) fail("config.json", std::string("expected a JSON object, got ") + root_json.type_name());
  const level root{root_json, ""};
  const json* text = nullptr;
  if (root.find("num_hidden_layers") == nullptr) {
    text = root.find("text_config");
    if (text != nullptr && !text->is_object()) {
      fail("text_config", std::string("expected an object, got ") + text->type_name());
    }
  }
  const level l = text != nullptr ? level{*text, "text_config."} : root;

  const std::uint64_t n_layers = required_integer(l, "num_hidden_layers", 1, max_layers);
  const std::uint64_t heads = required_integer(l, "num_attention_heads", 1, max_heads);
  const std::uint64_t kv_heads = optional_integer(l, "num_key_value_heads", 1, max_heads).value_or(heads);
  if (heads % kv_heads != 0) {
    fail(l.name("num_key_value_heads"), std::to_string(kv_heads) + " does not divide num_attention_heads (" +
                                            std::to_string(heads) + ")");
  }
  const std::uint64_t hidden = required_integer(l, "hidden_size", 1, max_hidden);
  std::uint64_t head_dim = 0;
  if (const auto d = optional_integer(l, "head_dim", 1, max_head_dim)) {
    head_dim = *d;
  } else {
    if (hidden % heads != 0 || hidden / heads > max_head_dim) {
      fail(l.name("head_dim"), "missing, and hidden_size (" + std::to_string(hidden) +
                                   ") is not a multiple of num_attention_heads (" + std::to_string(heads) + ")");
    }
    head_dim = hidden / heads;
  }
  const std::uint64_t window = optional_integer(l, "sliding_window", 0, max_window).value_or(0);
  const std::string arch = first_architecture(l, root);
  const std::string model_type = string_at(l, root, "model_type").value_or("");
  const layer_split split = split_layers(l, n_layers, window, arch, model_type);

  model_shape s;
  s.layers = static_cast<std::uint32_t>(split.layers);
  s.sliding_layers = static_cast<std::uint32_t>(split.sliding);
  s.sliding_window = split.sliding == 0 ? 0 : static_cast<std::uint32_t>(window);
  s.kv_heads = static_cast<std::uint32_t>(kv_heads);
  s.key_dim = static_cast<std::uint32_t>(head_dim);
  s.value_dim = static_cast<std::uint32_t>(head_dim);
  s.query_heads = static_cast<std::uint32_t>(heads);
  s.hidden_size = static_cast<std::uint32_t>(hidden);
  s.normal_kv = dtype_at(l, root);
  s.compact_kv = kv_format::q4_0;

  model_description d;
  d.cost = from_shape(s);
  d.shape = s;
  d.source = "hf-config";
  const std::optional<std::string> path = string_at(root, root, "_name_or_path");
  d.name = path && !path->empty() ? *path : !arch.empty() ? arch : model_type;
  return d;
}

}  // namespace

read_result<model_description> read_hf_config(std::string_view json_text) {
  json j;
  try {
    j = json::parse(json_text.begin(), json_text.end());
  } catch (const json::exception& e) {
    return read_result<model_description>::fail(std::string("config.json: not JSON: ") + e.what());
  }
  try {
    return read_result<model_description>::ok(read(j));
  } catch (const bad_key& e) {
    return read_result<model_description>::fail(e.what);
  } catch (const json::exception& e) {
    return read_result<model_description>::fail(std::string("config.json: malformed: ") + e.what());
  }
}

}  // namespace pnmem::model_files
