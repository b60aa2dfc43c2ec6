// tests/exposition_check.hpp - a checker for Prometheus text exposition format 0.0.4.
//
// Shared by tests/test_metrics.cpp and the CLI tests. check_exposition() parses
// the text and lists every rule it breaks (empty = valid):
//   - every line ends in '\n'; no blank lines;
//   - "# HELP name text" and "# TYPE name type" at most once per family, both
//     before its first sample; TYPE is counter, gauge, histogram, summary or untyped;
//   - every sample is `name{label="value",...} value`: a metric name
//     [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]* (not "__..."),
//     no label twice, values quoted with only \\ \" \n escapes, a value that
//     parses as a float or is NaN, +Inf, -Inf;
//   - every family has exactly one HELP and one TYPE line; a family's lines are contiguous;
//   - counter families end in "_total"; no series appears twice.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pnmem::test {

using label_set = std::vector<std::pair<std::string, std::string>>;

struct exposition_sample {
  std::string name;
  label_set labels;  // unescaped values, in the order written
  double value = 0.0;
};

struct exposition {
  std::vector<std::string> errors;
  std::vector<exposition_sample> samples;
  std::map<std::string, std::string> types;  // family -> TYPE
  std::map<std::string, std::string> helps;  // family -> HELP text (unescaped)

  // The value of the series `name` with exactly these labels (any order), if present.
  std::optional<double> value(const std::string& name, label_set labels = {}) const {
    std::sort(labels.begin(), labels.end());
    for (const auto& s : samples) {
      if (s.name != name) continue;
      label_set l = s.labels;
      std::sort(l.begin(), l.end());
      if (l == labels) return s.value;
    }
    return std::nullopt;
  }

  std::size_t count(const std::string& name) const {
    return static_cast<std::size_t>(
        std::count_if(samples.begin(), samples.end(), [&](const exposition_sample& s) { return s.name == name; }));
  }
};

namespace detail {

inline bool is_alpha_(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
inline bool is_digit(char c) { return c >= '0' && c <= '9'; }

inline bool valid_metric_name(std::string_view s) {
  if (s.empty() || !(is_alpha_(s[0]) || s[0] == ':')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return is_alpha_(c) || is_digit(c) || c == ':'; });
}

inline bool valid_label_name(std::string_view s) {
  if (s.empty() || !is_alpha_(s[0])) return false;
  if (s.substr(0, 2) == "__") return false;  // reserved
  return std::all_of(s.begin(), s.end(), [](char c) { return is_alpha_(c) || is_digit(c); });
}

// [+-]? (digits [. digits?] | . digits) ([eE] [+-]? digits)?  or NaN / +Inf / -Inf.
inline std::optional<double> parse_value(std::string_view s) {
  if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
  if (s == "+Inf" || s == "Inf") return std::numeric_limits<double>::infinity();
  if (s == "-Inf") return -std::numeric_limits<double>::infinity();
  std::size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  std::size_t digits = 0;
  while (i < s.size() && is_digit(s[i])) ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && is_digit(s[i])) ++i, ++digits;
  }
  if (digits == 0) return std::nullopt;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    std::size_t exp_digits = 0;
    while (i < s.size() && is_digit(s[i])) ++i, ++exp_digits;
    if (exp_digits == 0) return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  const std::string copy(s);
  return std::strtod(copy.c_str(), nullptr);
}

inline std::string unescape_help(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && (s[i + 1] == '\\' || s[i + 1] == 'n')) {
      out += s[i + 1] == 'n' ? '\n' : '\\';
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace detail

inline exposition check_exposition(std::string_view text) {
  exposition ex;
  auto error = [&](std::size_t line_no, const std::string& what) {
    ex.errors.push_back("line " + std::to_string(line_no) + ": " + what);
  };
  if (!text.empty() && text.back() != '\n') ex.errors.push_back("the text does not end in a newline");

  std::string current;           // the family whose lines are being read
  std::set<std::string> closed;  // families whose lines ended
  std::set<std::string> with_samples;
  std::set<std::string> series;
  auto enter = [&](std::size_t line_no, const std::string& family) {
    if (family == current) return;
    if (!current.empty()) closed.insert(current);
    if (closed.count(family) != 0) error(line_no, "family " + family + " is not contiguous");
    current = family;
  };

  std::size_t line_no = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t nl = text.find('\n', pos);
    const std::string_view line = text.substr(pos, nl == std::string_view::npos ? text.size() - pos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++line_no;
    if (line.empty()) {
      error(line_no, "blank line");
      continue;
    }
    if (line[0] == '#') {
      const bool help = line.substr(0, 7) == "# HELP ";
      const bool type = line.substr(0, 7) == "# TYPE ";
      if (!help && !type) continue;  // a plain comment
      const std::string_view rest = line.substr(7);
      const std::size_t sp = rest.find(' ');
      const std::string name(rest.substr(0, sp));
      const std::string_view arg = sp == std::string_view::npos ? std::string_view{} : rest.substr(sp + 1);
      if (!detail::valid_metric_name(name)) error(line_no, "bad metric name in comment: " + name);
      enter(line_no, name);
      if (with_samples.count(name) != 0) error(line_no, name + ": HELP/TYPE after its samples");
      if (help) {
        if (ex.helps.count(name) != 0) error(line_no, name + ": second HELP");
        ex.helps[name] = detail::unescape_help(arg);
      } else {
        static const std::set<std::string_view> types{"counter", "gauge", "histogram", "summary", "untyped"};
        if (types.count(arg) == 0) error(line_no, name + ": bad TYPE " + std::string(arg));
        if (ex.types.count(name) != 0) error(line_no, name + ": second TYPE");
        ex.types[name] = std::string(arg);
        if (arg == "counter" && (name.size() < 6 || name.substr(name.size() - 6) != "_total")) {
          error(line_no, name + ": a counter family not ending in _total");
        }
      }
      continue;
    }

    // A sample.
    std::size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    exposition_sample s;
    s.name = std::string(line.substr(0, i));
    if (!detail::valid_metric_name(s.name)) error(line_no, "bad metric name: " + s.name);
    if (i < line.size() && line[i] == '{') {
      ++i;
      std::set<std::string> names;
      bool ok = true;
      while (ok && i < line.size() && line[i] != '}') {
        std::size_t start = i;
        while (i < line.size() && line[i] != '=') ++i;
        const std::string lname(line.substr(start, i - start));
        if (!detail::valid_label_name(lname)) error(line_no, "bad label name: " + lname);
        if (!names.insert(lname).second) error(line_no, "label twice: " + lname);
        if (i + 1 >= line.size() || line[i + 1] != '"') {
          error(line_no, "label value not quoted");
          ok = false;
          break;
        }
        i += 2;
        std::string value;
        bool closed_quote = false;
        while (i < line.size()) {
          const char c = line[i];
          if (c == '"') {
            closed_quote = true;
            ++i;
            break;
          }
          if (c == '\\') {
            if (i + 1 >= line.size()) break;
            const char e = line[i + 1];
            if (e == '\\') value += '\\';
            else if (e == '"') value += '"';
            else if (e == 'n') value += '\n';
            else error(line_no, std::string("bad escape \\") + e);
            i += 2;
            continue;
          }
          value += c;
          ++i;
        }
        if (!closed_quote) {
          error(line_no, "unterminated label value");
          ok = false;
          break;
        }
        s.labels.emplace_back(lname, value);
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (!ok) continue;
      if (i >= line.size() || line[i] != '}') {
        error(line_no, "labels not closed");
        continue;
      }
      ++i;
    }
    if (i >= line.size() || line[i] != ' ') {
      error(line_no, "no space before the value");
      continue;
    }
    ++i;
    std::string_view rest = line.substr(i);
    const std::size_t sp = rest.find(' ');
    const std::string_view value_text = rest.substr(0, sp);
    if (sp != std::string_view::npos) {
      const std::string_view ts = rest.substr(sp + 1);
      if (ts.empty() || !std::all_of(ts.begin() + (ts[0] == '-' ? 1 : 0), ts.end(), detail::is_digit)) {
        error(line_no, "bad timestamp: " + std::string(ts));
      }
    }
    const auto v = detail::parse_value(value_text);
    if (!v) {
      error(line_no, "bad value: " + std::string(value_text));
    } else {
      s.value = *v;
    }
    enter(line_no, s.name);
    if (ex.helps.count(s.name) == 0) error(line_no, s.name + ": sample before (or without) its HELP");
    if (ex.types.count(s.name) == 0) error(line_no, s.name + ": sample before (or without) its TYPE");
    with_samples.insert(s.name);
    label_set key_labels = s.labels;
    std::sort(key_labels.begin(), key_labels.end());
    std::string key = s.name;
    for (const auto& [k, val] : key_labels) key += "\x1f" + k + "\x1e" + val;
    if (!series.insert(key).second) error(line_no, "duplicate series: " + std::string(line));
    ex.samples.push_back(std::move(s));
  }
  for (const auto& [name, type] : ex.types) {
    if (ex.helps.count(name) == 0) ex.errors.push_back(name + ": TYPE without HELP");
  }
  for (const auto& [name, help] : ex.helps) {
    if (ex.types.count(name) == 0) ex.errors.push_back(name + ": HELP without TYPE");
  }
  return ex;
}

}  // namespace pnmem::test
