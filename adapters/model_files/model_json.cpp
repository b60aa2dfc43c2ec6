// adapters/model_files/model_json.cpp - pnmem's model description format (model_json.hpp).
#include "pnmem/model_files/model_json.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "pnmem/parse.hpp"

namespace pnmem::model_files {

namespace {

using json = nlohmann::json;

// Thrown inside the reader only, caught at its one entry point: `what` names the key.
struct bad_field {
  std::string what;
};

[[noreturn]] void fail(const std::string& key, const std::string& why) { throw bad_field{key + ": " + why}; }

// A value as an error shows it: a number, a bool, null or a short string as JSON; an array or object by
// its kind and size (json::dump recurses once per level: a value nested a million deep would overflow
// the stack), a long string cut short.
std::string shown(const json& v) {
  if (v.is_array()) return "an array of " + std::to_string(v.size());
  if (v.is_object()) return "an object of " + std::to_string(v.size()) + " keys";
  if (v.is_string() && v.get_ref<const std::string&>().size() > 64) return "a string of " + std::to_string(v.get_ref<const std::string&>().size()) + " bytes";
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::uint64_t bytes_at(const json& v, const std::string& key) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_number_integer()) fail(key, "negative (" + v.dump() + ")");
  if (v.is_number_float()) {
    // JSON has one number type: a reader parses 18446744073709551616 or 1e30 as a double. Say what
    // is wrong with it: a fraction, a sign, or a size past what 64 bits hold.
    const double d = v.get<double>();
    if (d < 0) fail(key, "negative (" + v.dump() + ")");
    if (d != std::floor(d)) fail(key, "not a whole number of bytes (" + v.dump() + ")");
    if (d >= 18446744073709551616.0) fail(key, std::string(bytes_problem(parse_errc::out_of_range)) + ": " + v.dump());
    fail(key, "written as a fraction or exponent (" + v.dump() + "): write the whole number of bytes");
  }
  if (v.is_string()) {
    const auto s = v.get<std::string>();
    const auto r = parse_bytes(s);
    if (!r) fail(key, "\"" + s + "\": " + std::string(bytes_problem(r.error)));
    return r.value;
  }
  fail(key, "expected a byte count (an integer or a string such as \"256MiB\"), got " + std::string(v.type_name()));
}

std::uint32_t u32_at(const json& v, const std::string& key) {
  if (!v.is_number_unsigned() || v.get<std::uint64_t>() > 0xffffffffULL) {
    fail(key, "expected an integer from 0 to 4294967295, got " + shown(v));
  }
  return static_cast<std::uint32_t>(v.get<std::uint64_t>());
}

kv_format format_at(const json& v, const std::string& key) {
  kv_format f{};
  if (!v.is_string() || !parse_kv_format(v.get<std::string>(), f)) {
    fail(key, "expected a KV format (q4, fp32, f16, bf16, fp8, q8_0, q4_0), got " + shown(v));
  }
  return f;
}

void only_keys(const json& obj, const std::string& where, std::initializer_list<std::string_view> allowed) {
  if (!obj.is_object()) fail(where.empty() ? "the description" : where, "expected an object, got " + std::string(obj.type_name()));
  for (const auto& [k, v] : obj.items()) {
    bool known = false;
    for (std::string_view a : allowed) known = known || k == a;
    if (!known) fail(where.empty() ? k : where + "." + k, "unknown key");
  }
}

std::array<std::uint64_t, kv_format_count> per_format(const json& v, const std::string& key) {
  only_keys(v, key, {"q4", "fp32", "f16", "bf16", "fp8", "q8_0", "q4_0"});
  std::array<std::uint64_t, kv_format_count> out{};
  for (kv_format f : all_kv_formats) {
    const std::string name(to_string(f));
    if (!v.contains(name)) fail(key + "." + name, "missing (a per-format table lists all seven formats)");
    out[static_cast<std::size_t>(f)] = bytes_at(v.at(name), key + "." + name);
  }
  return out;
}

activation_model activation_at(const json& v) {
  only_keys(v, "activation", {"anchors", "fixed_bytes", "per_token_bytes", "per_token_sq_bytes"});
  activation_model a;
  if (v.contains("anchors")) {
    if (v.size() != 1) fail("activation", "an anchor table or coefficients, not both");
    const json& t = v.at("anchors");
    if (!t.is_array() || t.empty() || t.size() > max_activation_anchors) {
      fail("activation.anchors", "expected 1 to 8 [tokens, peak bytes] pairs");
    }
    for (std::size_t i = 0; i < t.size(); ++i) {
      const std::string key = "activation.anchors[" + std::to_string(i) + "]";
      const json& p = t[i];
      if (!p.is_array() || p.size() != 2) fail(key, "expected [tokens, peak bytes], got " + shown(p));
      const activation_anchor x{bytes_at(p[0], key + "[0]"), bytes_at(p[1], key + "[1]")};
      if (i > 0 && x.tokens <= a.anchors[i - 1].tokens) {
        fail(key, "tokens must increase (" + std::to_string(x.tokens) + " after " +
                      std::to_string(a.anchors[i - 1].tokens) + ")");
      }
      if (i > 0 && x.peak_bytes < a.anchors[i - 1].peak_bytes) {
        fail(key, "peaks must not decrease (" + std::to_string(x.peak_bytes) + " after " +
                      std::to_string(a.anchors[i - 1].peak_bytes) + ")");
      }
      a.anchors[i] = x;
    }
    a.n_anchors = static_cast<std::uint32_t>(t.size());
    return a;
  }
  if (v.empty()) fail("activation", "give \"anchors\" or the coefficients (fixed_bytes, per_token_bytes, per_token_sq_bytes)");
  if (v.contains("fixed_bytes")) a.fixed_bytes = bytes_at(v.at("fixed_bytes"), "activation.fixed_bytes");
  if (v.contains("per_token_bytes")) a.per_token_bytes = bytes_at(v.at("per_token_bytes"), "activation.per_token_bytes");
  if (v.contains("per_token_sq_bytes")) {
    a.per_token_sq_bytes = bytes_at(v.at("per_token_sq_bytes"), "activation.per_token_sq_bytes");
  }
  return a;
}

std::uint64_t u64_at(const json& v, const std::string& key) {
  if (!v.is_number_unsigned()) fail(key, "expected a non-negative integer, got " + shown(v));
  return v.get<std::uint64_t>();
}

// Version 1's informative shape: one group of full layers and one of sliding ones.
model_shape shape_v1_at(const json& v) {
  only_keys(v, "shape", {"layers", "sliding_layers", "sliding_window", "kv_heads", "key_dim", "value_dim",
                         "query_heads", "hidden_size"});
  std::uint32_t f[8] = {};
  const char* names[8] = {"layers", "sliding_layers", "sliding_window", "kv_heads", "key_dim", "value_dim",
                          "query_heads", "hidden_size"};
  for (std::size_t i = 0; i < 8; ++i) {
    if (v.contains(names[i])) f[i] = u32_at(v.at(names[i]), std::string("shape.") + names[i]);
  }
  const std::uint32_t sliding = f[1] > f[0] ? f[0] : f[1];
  model_shape s;
  if (f[0] > sliding) s.add(attention_layers(layer_kind::full, f[0] - sliding, f[3], f[4], f[5]));
  if (sliding > 0) s.add(attention_layers(f[2] != 0 ? layer_kind::sliding : layer_kind::full, sliding, f[3], f[4], f[5], f[2]));
  s.query_heads = f[6];
  s.hidden_size = f[7];
  return s;
}

layer_group group_at(const json& v, const std::string& key) {
  only_keys(v, key, {"kind", "layers", "kv_heads", "key_dim", "value_dim", "k_only", "side_bytes", "span",
                     "conv_state_values", "ssm_state_values"});
  layer_group g;
  if (!v.contains("kind") || !v.at("kind").is_string() || !parse_layer_kind(v.at("kind").get<std::string>(), g.kind)) {
    fail(key + ".kind", "expected full, sliding, chunked, cross or recurrent, got " +
                            (v.contains("kind") ? shown(v.at("kind")) : std::string("nothing")));
  }
  auto u32 = [&](const char* k, std::uint32_t& out) {
    if (v.contains(k)) out = u32_at(v.at(k), key + "." + k);
  };
  u32("layers", g.layers);
  u32("kv_heads", g.kv_heads);
  u32("key_dim", g.key_dim);
  u32("value_dim", g.value_dim);
  u32("span", g.span);
  u32("side_bytes", g.side_bytes);
  if (v.contains("k_only")) {
    if (!v.at("k_only").is_boolean()) fail(key + ".k_only", "expected true or false, got " + shown(v.at("k_only")));
    g.k_only = v.at("k_only").get<bool>();
  }
  if (v.contains("conv_state_values")) g.conv_state_values = u64_at(v.at("conv_state_values"), key + ".conv_state_values");
  if (v.contains("ssm_state_values")) g.ssm_state_values = u64_at(v.at("ssm_state_values"), key + ".ssm_state_values");
  return g;
}

// Version 2's informative shape: layer groups (model_shape.hpp).
model_shape shape_v2_at(const json& v) {
  only_keys(v, "shape", {"groups", "query_heads", "hidden_size", "state_format", "ssm_state_format"});
  model_shape s;
  if (!v.contains("groups") || !v.at("groups").is_array() || v.at("groups").size() > max_layer_groups) {
    fail("shape.groups", "expected an array of 0 to " + std::to_string(max_layer_groups) + " layer groups");
  }
  const json& groups = v.at("groups");
  for (std::size_t i = 0; i < groups.size(); ++i) s.add(group_at(groups[i], "shape.groups[" + std::to_string(i) + "]"));
  if (v.contains("query_heads")) s.query_heads = u32_at(v.at("query_heads"), "shape.query_heads");
  if (v.contains("hidden_size")) s.hidden_size = u32_at(v.at("hidden_size"), "shape.hidden_size");
  if (v.contains("state_format")) s.state_format = format_at(v.at("state_format"), "shape.state_format");
  if (v.contains("ssm_state_format")) s.ssm_state_format = format_at(v.at("ssm_state_format"), "shape.ssm_state_format");
  const std::string_view problem = validate(s);
  if (!problem.empty()) fail("shape", std::string(problem));
  return s;
}

engine_rule engine_at(const json& v) {
  only_keys(v, "engine", {"engine", "block_tokens", "max_batched_tokens", "ubatch_tokens", "seqs", "state_copies",
                          "ssm_state_fp32", "mtp", "hybrid_manager_off"});
  engine_rule e;
  if (!v.contains("engine") || !v.at("engine").is_string() || !parse_kv_engine(v.at("engine").get<std::string>(), e.engine)) {
    fail("engine.engine", "expected exact, vllm or llama.cpp, got " +
                              (v.contains("engine") ? shown(v.at("engine")) : std::string("nothing")));
  }
  auto u32 = [&](const char* k, std::uint32_t& out) {
    if (v.contains(k)) out = u32_at(v.at(k), std::string("engine.") + k);
  };
  u32("block_tokens", e.block_tokens);
  u32("max_batched_tokens", e.max_batched_tokens);
  u32("ubatch_tokens", e.ubatch_tokens);
  u32("seqs", e.seqs);
  u32("state_copies", e.state_copies);
  const std::pair<const char*, bool*> flags[] = {
      {"ssm_state_fp32", &e.ssm_state_fp32}, {"mtp", &e.mtp}, {"hybrid_manager_off", &e.hybrid_manager_off}};
  for (const auto& [key, flag] : flags) {
    if (!v.contains(key)) continue;
    if (!v.at(key).is_boolean()) fail(std::string("engine.") + key, "expected true or false");
    *flag = v.at(key).get<bool>();
  }
  const std::string_view problem = validate(e);
  if (!problem.empty()) fail("engine", std::string(problem));
  return e;
}

// Version 2's windowed terms: [{"window": W, "bytes_per_token": {per format}}, ...], windows increasing.
void windows_at(const json& v, model_cost& m) {
  const std::string key = "kv_bytes_per_token.windows";
  if (!v.is_array() || v.size() > max_kv_windows) {
    fail(key, "expected an array of 0 to " + std::to_string(max_kv_windows) + " {\"window\", \"bytes_per_token\"} terms");
  }
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string at = key + "[" + std::to_string(i) + "]";
    only_keys(v[i], at, {"window", "bytes_per_token"});
    if (!v[i].contains("window")) fail(at + ".window", "missing");
    if (!v[i].contains("bytes_per_token")) fail(at + ".bytes_per_token", "missing");
    kv_window w;
    w.window = bytes_at(v[i].at("window"), at + ".window");
    if (w.window == 0) fail(at + ".window", "0 (layers that keep every token are \"full\")");
    if (i > 0 && w.window <= m.windows[i - 1].window) {
      fail(at + ".window", "windows must increase (" + std::to_string(w.window) + " after " +
                               std::to_string(m.windows[i - 1].window) + ")");
    }
    w.bytes_per_token = per_format(v[i].at("bytes_per_token"), at + ".bytes_per_token");
    m.windows[i] = w;
  }
  m.n_windows = static_cast<std::uint32_t>(v.size());
}

model_description read(const json& j) {
  only_keys(j, "", {"format", "version", "name", "source", "engine", "shape", "kv_bytes_per_token", "sliding_window",
                    "kv_block_tokens", "kv_bytes_per_encoder_item", "state_bytes_per_seq", "normal_kv", "compact_kv",
                    "activation"});
  if (!j.contains("format") || j.at("format") != model_json_format) {
    fail("format", "expected \"pnmem-model\" (is this a pnmem model description?)");
  }
  if (!j.contains("version") || !j.at("version").is_number_unsigned()) fail("version", "missing or not an integer");
  const std::uint64_t version = j.at("version").get<std::uint64_t>();
  if (version != 1 && version != static_cast<std::uint64_t>(model_json_version)) {
    fail("version", j.at("version").dump() + " is not known to this pnmem (it reads versions 1 and " +
                        std::to_string(model_json_version) + ")");
  }
  const bool v1 = version == 1;
  for (const char* k : {"engine", "kv_block_tokens", "kv_bytes_per_encoder_item"}) {
    if (v1 && j.contains(k)) fail(k, "unknown key in version 1 (a version 2 key)");
  }
  if (!v1 && j.contains("sliding_window")) fail("sliding_window", "a version 1 key (version 2 lists kv_bytes_per_token.windows)");
  model_description d;
  d.cost = model_cost{};
  if (j.contains("name")) {
    if (!j.at("name").is_string()) fail("name", "expected a string");
    d.name = j.at("name").get<std::string>();
  }
  if (j.contains("source")) {
    if (!j.at("source").is_string()) fail("source", "expected a string");
    d.source = j.at("source").get<std::string>();
  }
  if (j.contains("engine")) d.engine = engine_at(j.at("engine"));
  if (j.contains("shape")) d.shape = v1 ? shape_v1_at(j.at("shape")) : shape_v2_at(j.at("shape"));
  if (!j.contains("kv_bytes_per_token")) fail("kv_bytes_per_token", "missing");
  const json& kv = j.at("kv_bytes_per_token");
  if (kv.is_object()) {
    if (v1) {
      only_keys(kv, "kv_bytes_per_token", {"full", "sliding"});
    } else {
      only_keys(kv, "kv_bytes_per_token", {"full", "windows"});
    }
    if (!kv.contains("full")) fail("kv_bytes_per_token.full", "missing");
    d.cost.full_kv_bytes_per_token = per_format(kv.at("full"), "kv_bytes_per_token.full");
    if (kv.contains("windows")) windows_at(kv.at("windows"), d.cost);
    if (kv.contains("sliding")) {
      // Version 1: one sliding term, kept up to the top-level sliding_window (0: every token).
      const auto sliding = per_format(kv.at("sliding"), "kv_bytes_per_token.sliding");
      const std::uint64_t window = j.contains("sliding_window") ? bytes_at(j.at("sliding_window"), "sliding_window") : 0;
      add_kv_term(d.cost, sliding, window);
    }
  } else {
    const std::uint64_t b = bytes_at(kv, "kv_bytes_per_token");
    d.cost.full_kv_bytes_per_token.fill(b);
  }
  if (v1 && j.contains("sliding_window")) bytes_at(j.at("sliding_window"), "sliding_window");  // checked either way
  if (j.contains("kv_block_tokens")) d.cost.kv_block_tokens = u32_at(j.at("kv_block_tokens"), "kv_block_tokens");
  if (j.contains("kv_bytes_per_encoder_item")) {
    const json& item = j.at("kv_bytes_per_encoder_item");
    if (item.is_object()) {
      d.cost.kv_bytes_per_encoder_item = per_format(item, "kv_bytes_per_encoder_item");
    } else {
      d.cost.kv_bytes_per_encoder_item.fill(bytes_at(item, "kv_bytes_per_encoder_item"));
    }
  }
  if (j.contains("state_bytes_per_seq")) {
    d.cost.state_bytes_per_seq = bytes_at(j.at("state_bytes_per_seq"), "state_bytes_per_seq");
  }
  if (j.contains("normal_kv")) d.cost.normal_kv = format_at(j.at("normal_kv"), "normal_kv");
  if (j.contains("compact_kv")) d.cost.compact_kv = format_at(j.at("compact_kv"), "compact_kv");
  if (d.shape) {
    d.shape->normal_kv = d.cost.normal_kv;
    d.shape->compact_kv = d.cost.compact_kv;
  }
  if (!j.contains("activation")) fail("activation", "missing");
  d.cost.activation = activation_at(j.at("activation"));
  const std::string_view problem = validate(d.cost);
  if (!problem.empty()) fail("the description", std::string(problem));
  return d;
}

nlohmann::ordered_json per_format_json(const std::array<std::uint64_t, kv_format_count>& a) {
  nlohmann::ordered_json o = nlohmann::ordered_json::object();
  for (kv_format f : all_kv_formats) o[std::string(to_string(f))] = a[static_cast<std::size_t>(f)];
  return o;
}

}  // namespace

read_result<model_description> read_model_json(std::string_view text) {
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    return read_result<model_description>::fail(std::string("not JSON: ") + e.what());
  }
  try {
    return read_result<model_description>::ok(read(j));
  } catch (const bad_field& e) {
    return read_result<model_description>::fail(e.what);
  } catch (const json::exception& e) {
    return read_result<model_description>::fail(std::string("malformed description: ") + e.what());
  }
}

std::string write_model_json(const model_description& m, int indent) {
  nlohmann::ordered_json j;
  j["format"] = model_json_format;
  j["version"] = model_json_version;
  if (!m.name.empty()) j["name"] = m.name;
  if (!m.source.empty()) j["source"] = m.source;
  if (m.shape) {
    const engine_rule& e = m.engine;
    j["engine"] = {{"engine", std::string(to_string(e.engine))}, {"block_tokens", e.block_tokens},
                   {"max_batched_tokens", e.max_batched_tokens}, {"ubatch_tokens", e.ubatch_tokens},
                   {"seqs", e.seqs}, {"state_copies", e.state_copies}, {"ssm_state_fp32", e.ssm_state_fp32}};
    if (e.mtp) j["engine"]["mtp"] = true;  // written only when set: files without them read as before
    if (e.hybrid_manager_off) j["engine"]["hybrid_manager_off"] = true;
    const model_shape& s = *m.shape;
    nlohmann::ordered_json groups = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < s.n_groups && i < max_layer_groups; ++i) {
      const layer_group& g = s.groups[i];
      nlohmann::ordered_json o = {{"kind", std::string(to_string(g.kind))}, {"layers", g.layers}};
      if (g.kind == layer_kind::recurrent) {
        o["conv_state_values"] = g.conv_state_values;
        o["ssm_state_values"] = g.ssm_state_values;
      } else {
        o["kv_heads"] = g.kv_heads;
        o["key_dim"] = g.key_dim;
        if (g.k_only) {
          o["k_only"] = true;
        } else {
          o["value_dim"] = g.value_dim == 0 ? g.key_dim : g.value_dim;
        }
        if (g.side_bytes != 0) o["side_bytes"] = g.side_bytes;
        if (g.kind != layer_kind::full) o["span"] = g.span;
      }
      groups.push_back(std::move(o));
    }
    j["shape"] = {{"groups", groups}, {"query_heads", s.query_heads}, {"hidden_size", s.hidden_size},
                  {"state_format", std::string(to_string(s.state_format))},
                  {"ssm_state_format", std::string(to_string(s.ssm_state_format))}};
  }
  nlohmann::ordered_json windows = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < m.cost.n_windows && i < max_kv_windows; ++i) {
    windows.push_back({{"window", m.cost.windows[i].window},
                       {"bytes_per_token", per_format_json(m.cost.windows[i].bytes_per_token)}});
  }
  j["kv_bytes_per_token"] = {{"full", per_format_json(m.cost.full_kv_bytes_per_token)}, {"windows", windows}};
  j["kv_block_tokens"] = m.cost.kv_block_tokens;
  bool items = false;
  for (const std::uint64_t b : m.cost.kv_bytes_per_encoder_item) items = items || b != 0;
  if (items) j["kv_bytes_per_encoder_item"] = per_format_json(m.cost.kv_bytes_per_encoder_item);
  j["state_bytes_per_seq"] = m.cost.state_bytes_per_seq;
  j["normal_kv"] = std::string(to_string(m.cost.normal_kv));
  j["compact_kv"] = std::string(to_string(m.cost.compact_kv));
  const activation_model& a = m.cost.activation;
  if (a.n_anchors > 0) {
    nlohmann::ordered_json t = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < a.n_anchors && i < max_activation_anchors; ++i) {
      t.push_back({a.anchors[i].tokens, a.anchors[i].peak_bytes});
    }
    j["activation"] = {{"anchors", t}};
  } else {
    j["activation"] = {{"fixed_bytes", a.fixed_bytes},
                       {"per_token_bytes", a.per_token_bytes},
                       {"per_token_sq_bytes", a.per_token_sq_bytes}};
  }
  // Replace, not throw on, bytes that are not UTF-8: a name read from a GGUF file may hold any bytes.
  return j.dump(indent < 0 ? -1 : indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

read_result<std::string> read_text_file(const std::string& path, std::size_t max_bytes) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return read_result<std::string>::fail(path + ": " + std::strerror(errno));
  std::string out;
  char buf[65536];
  while (true) {
    const std::size_t n = std::fread(buf, 1, sizeof buf, f);
    out.append(buf, n);
    if (out.size() > max_bytes) {
      std::fclose(f);
      return read_result<std::string>::fail(path + ": larger than " + std::to_string(max_bytes) + " bytes");
    }
    if (n < sizeof buf) break;
  }
  const bool bad = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (bad) return read_result<std::string>::fail(path + ": " + std::strerror(err));
  return read_result<std::string>::ok(std::move(out));
}

}  // namespace pnmem::model_files
