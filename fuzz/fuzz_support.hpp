// fuzz/fuzz_support.hpp - what every fuzz target shares: the entry point's
// declaration, property checks that abort with a message, exact-size heap copies
// (so AddressSanitizer sees a read past the input), and small text helpers the
// targets' reference checks are written with.
//
// A target checks properties, not only "no crash": a violated one calls
// FUZZ_CHECK's abort, which libFuzzer (and fuzz/replay_main.cpp) report as a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace pnmem_fuzz {

[[noreturn]] inline void property_failed(const char* what, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: fuzz property violated: %s\n", file, line, what);
  std::fflush(stderr);
  std::abort();
}

#define FUZZ_CHECK(cond)                                                  \
  do {                                                                    \
    if (!(cond)) ::pnmem_fuzz::property_failed(#cond, __FILE__, __LINE__); \
  } while (0)

// The fuzzer's bytes as text.
inline std::string_view as_text(const std::uint8_t* data, std::size_t size) noexcept {
  return {reinterpret_cast<const char*>(data), size};
}

// A heap buffer of exactly the text's size, no terminator: a parser that reads
// one byte past its std::string_view is an AddressSanitizer report.
class exact_text {
 public:
  explicit exact_text(std::string_view s) : size_(s.size()), bytes_(new char[s.size()]) {
    if (size_ != 0) std::memcpy(bytes_.get(), s.data(), size_);
  }
  std::string_view view() const noexcept { return {bytes_.get(), size_}; }

 private:
  std::size_t size_;
  std::unique_ptr<char[]> bytes_;
};

// True when `part` views memory inside `whole` (a parser's result that points into its input).
inline bool views_into(std::string_view part, std::string_view whole) noexcept {
  if (part.empty()) return true;
  const auto* p = part.data();
  return p >= whole.data() && p + part.size() <= whole.data() + whole.size();
}

inline bool is_blank(char c) noexcept { return c == ' ' || c == '\t'; }
inline bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

// The checked text every procfs parser starts from (procfs.hpp): kernel files end
// with '\n' and never hold a NUL byte.
inline bool well_formed_kernel_text(std::string_view t) noexcept {
  return !t.empty() && t.back() == '\n' && t.find('\0') == std::string_view::npos;
}

// The '\n'-terminated lines of a well-formed kernel text, each without its '\n'
// and one trailing '\r' (procfs.hpp accepts CRLF).
inline std::vector<std::string_view> kernel_lines(std::string_view t) {
  std::vector<std::string_view> out;
  while (!t.empty()) {
    const std::size_t nl = t.find('\n');
    std::string_view line = t.substr(0, nl);
    t.remove_prefix(nl == std::string_view::npos ? t.size() : nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    out.push_back(line);
  }
  return out;
}

// Fields separated by runs of blanks (' ', '\t').
inline std::vector<std::string_view> blank_fields(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && is_blank(line[i])) ++i;
    const std::size_t start = i;
    while (i < line.size() && !is_blank(line[i])) ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

// A whole field of decimal digits as an unsigned 64-bit number: 0 = not digits,
// 1 = ok, 2 = past 2^64-1. Written apart from the parsers (a reference, not a copy).
struct u64_ref {
  int state = 0;
  std::uint64_t value = 0;
};
inline u64_ref reference_u64(std::string_view digits) noexcept {
  if (digits.empty()) return {};
  for (const char c : digits) {
    if (!is_digit(c)) return {};
  }
  std::size_t i = 0;
  while (i + 1 < digits.size() && digits[i] == '0') ++i;  // leading zeros
  const std::string_view significant = digits.substr(i);
  constexpr std::string_view max = "18446744073709551615";
  if (significant.size() > max.size() || (significant.size() == max.size() && significant > max)) return {2, 0};
  std::uint64_t v = 0;
  for (const char c : significant) v = v * 10 + static_cast<std::uint64_t>(c - '0');
  return {1, v};
}

// Every '\n' as "\r\n": a text without '\r' parses the same either way (procfs.hpp).
inline std::string with_crlf(std::string_view t) {
  std::string out;
  out.reserve(t.size() * 2);
  for (const char c : t) {
    if (c == '\n') out += '\r';
    out += c;
  }
  return out;
}

}  // namespace pnmem_fuzz
