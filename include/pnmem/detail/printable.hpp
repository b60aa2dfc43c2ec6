// pnmem/detail/printable.hpp - text from outside (an argument, a PN_* value, a file's key) made
// safe to put in a one-line diagnostic.
//
// Control bytes (U+0080..U+009F among them) and bytes that are not UTF-8 are written as escapes
// ("\n", "\t", "\r", "\x1b", "\xff"), so a message stays one line, a terminal never receives an
// escape sequence it would act on, and the reader sees which byte was wrong. Valid UTF-8 (a model
// named "Café") and the backslash pass through unchanged, so escaping twice changes nothing.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace pnmem::detail {

// Length of the valid UTF-8 sequence at s[i] (1 to 4), or 0 when the byte there does not start one.
// Refuses overlong forms, UTF-16 surrogates and code points past U+10FFFF, as RFC 3629 does.
constexpr std::size_t utf8_length(std::string_view s, std::size_t i) noexcept {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // past U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
  }
  return n;
}

inline std::string printable(std::string_view s) {
  constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = utf8_length(s, i);
    // U+0080..U+009F are control characters too (U+009B is a terminal's CSI): both bytes escaped.
    if (n == 2 && c == 0xC2 && static_cast<unsigned char>(s[i + 1]) <= 0x9F) n = 0;
    if (n > 1) {
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    ++i;
    if (n == 1 && c >= 0x20 && c != 0x7f) {
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xF];
    }
  }
  return out;
}

}  // namespace pnmem::detail
