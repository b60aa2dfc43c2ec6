// adapters/model_files/model_json.cpp - pnmem's model description format (model_json.hpp).
#include "pnmem/model_files/model_json.hpp"

#include <cerrno>
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
  if (v.is_number_float()) fail(key, "not a whole number of bytes (" + v.dump() + ")");
  if (v.is_string()) {
    const auto s = v.get<std::string>();
    const auto r = parse_bytes(s);
    if (!r) fail(key, "\"" + s + "\": " + std::string(to_string(r.error)));
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

model_shape shape_at(const json& v) {
  only_keys(v, "shape", {"layers", "sliding_layers", "sliding_window", "kv_heads", "key_dim", "value_dim",
                         "query_heads", "hidden_size"});
  model_shape s;
  auto get = [&](const char* k, std::uint32_t& out) {
    if (v.contains(k)) out = u32_at(v.at(k), std::string("shape.") + k);
  };
  get("layers", s.layers);
  get("sliding_layers", s.sliding_layers);
  get("sliding_window", s.sliding_window);
  get("kv_heads", s.kv_heads);
  get("key_dim", s.key_dim);
  get("value_dim", s.value_dim);
  get("query_heads", s.query_heads);
  get("hidden_size", s.hidden_size);
  return s;
}

model_description read(const json& j) {
  only_keys(j, "", {"format", "version", "name", "source", "shape", "kv_bytes_per_token", "sliding_window",
                    "state_bytes_per_seq", "normal_kv", "compact_kv", "activation"});
  if (!j.contains("format") || j.at("format") != model_json_format) {
    fail("format", "expected \"pnmem-model\" (is this a pnmem model description?)");
  }
  if (!j.contains("version") || !j.at("version").is_number_unsigned()) fail("version", "missing or not an integer");
  if (j.at("version").get<std::uint64_t>() != static_cast<std::uint64_t>(model_json_version)) {
    fail("version", j.at("version").dump() + " is not known to this pnmem (it reads version " +
                        std::to_string(model_json_version) + ")");
  }
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
  if (j.contains("shape")) d.shape = shape_at(j.at("shape"));
  if (!j.contains("kv_bytes_per_token")) fail("kv_bytes_per_token", "missing");
  const json& kv = j.at("kv_bytes_per_token");
  if (kv.is_object()) {
    only_keys(kv, "kv_bytes_per_token", {"full", "sliding"});
    if (!kv.contains("full")) fail("kv_bytes_per_token.full", "missing");
    d.cost.full_kv_bytes_per_token = per_format(kv.at("full"), "kv_bytes_per_token.full");
    if (kv.contains("sliding")) d.cost.sliding_kv_bytes_per_token = per_format(kv.at("sliding"), "kv_bytes_per_token.sliding");
  } else {
    const std::uint64_t b = bytes_at(kv, "kv_bytes_per_token");
    d.cost.full_kv_bytes_per_token.fill(b);
  }
  if (j.contains("sliding_window")) d.cost.sliding_window = bytes_at(j.at("sliding_window"), "sliding_window");
  if (j.contains("state_bytes_per_seq")) {
    d.cost.state_bytes_per_seq = bytes_at(j.at("state_bytes_per_seq"), "state_bytes_per_seq");
  }
  if (j.contains("normal_kv")) d.cost.normal_kv = format_at(j.at("normal_kv"), "normal_kv");
  if (j.contains("compact_kv")) d.cost.compact_kv = format_at(j.at("compact_kv"), "compact_kv");
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
    const model_shape& s = *m.shape;
    j["shape"] = {{"layers", s.layers},         {"sliding_layers", s.sliding_layers}, {"sliding_window", s.sliding_window},
                  {"kv_heads", s.kv_heads},     {"key_dim", s.key_dim},               {"value_dim", s.value_dim == 0 ? s.key_dim : s.value_dim},
                  {"query_heads", s.query_heads}, {"hidden_size", s.hidden_size}};
  }
  j["kv_bytes_per_token"] = {{"full", per_format_json(m.cost.full_kv_bytes_per_token)},
                             {"sliding", per_format_json(m.cost.sliding_kv_bytes_per_token)}};
  j["sliding_window"] = m.cost.sliding_window;
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
