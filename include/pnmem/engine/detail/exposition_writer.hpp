// pnmem/engine/detail/exposition_writer.hpp - the Prometheus text exposition format 0.0.4, generic.
//
// Families (HELP and TYPE lines, then samples), label values and HELP text
// escaped as the format says, numbers as the shortest text that reads back as
// the same value. Knows nothing of pnmem's metrics: engine/metrics.hpp writes
// those through it.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace pnmem::detail::metrics {

using label = std::pair<std::string_view, std::string_view>;

// A label value: backslash, double quote and newline escaped.
inline void append_label_value(std::string& out, std::string_view v) {
  for (const char c : v) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      default: out += c; break;
    }
  }
}

// HELP text: backslash and newline escaped.
inline void append_help(std::string& out, std::string_view v) {
  for (const char c : v) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      default: out += c; break;
    }
  }
}

// Shortest text that reads back as the same double; NaN, +Inf and -Inf as the format spells them.
inline void append_value(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
    return;
  }
  if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
    return;
  }
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

inline void append_value(std::string& out, std::uint64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

inline std::string int_text(std::uint64_t v) {
  std::string s;
  append_value(s, v);
  return s;
}

class writer {
 public:
  // Starts a family: its HELP and TYPE lines. Its samples must follow before the next family.
  void family(std::string_view name, std::string_view type, std::string_view help) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    append_help(out_, help);
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }

  template <class T>
  void sample(std::string_view name, std::initializer_list<label> labels, T value) {
    out_ += name;
    if (labels.size() != 0) {
      out_ += '{';
      bool first = true;
      for (const auto& l : labels) {
        if (!first) out_ += ',';
        first = false;
        out_ += l.first;
        out_ += "=\"";
        append_label_value(out_, l.second);
        out_ += '"';
      }
      out_ += '}';
    }
    out_ += ' ';
    append_value(out_, value);
    out_ += '\n';
  }

  template <class T>
  void gauge(std::string_view name, std::string_view help, T value) {
    family(name, "gauge", help);
    sample(name, {}, value);
  }

  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

}  // namespace pnmem::detail::metrics
