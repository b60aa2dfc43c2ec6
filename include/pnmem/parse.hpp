// pnmem/parse.hpp - strict parsers for byte sizes, percentages and switches.
//
// Shared by the environment configuration (config.hpp) and the command-line
// tool, so `PN_HOST_RESERVE_BYTES=2GiB` and `--host-avail 2GiB` mean the same.
// Constexpr, no heap: a parse can be checked at compile time.
//
// Byte sizes:  "1073741824"  "512KiB"  "1.5 GiB"  "2G"  "8GiB"  "100B"
//   - units are binary (KiB/K = 1024 ...), case-insensitive, one optional space
//     before them; K/M/G/T alone are binary as in cgroup files;
//   - "KB", "MB", "GB", "TB" are refused as ambiguous (1000 or 1024?);
//   - a fraction needs a unit of KiB or larger and is floored to whole bytes;
//   - no sign: "-1" is reported as negative; values past 2^64-1 as out of range.
// Percent:     "15"  "15.5"  "0.25%" -> basis points (1/100 %), at most 2 decimals, 0..100.
// Switch:      1/0, true/false, yes/no, on/off (case-insensitive).
// Milliseconds: "250" -> 250: a whole number, no unit (the variable's name says ms), 0..2^32-1.
#pragma once

#include <cstdint>
#include <string_view>

#include "pnmem/detail/ascii.hpp"
#include "pnmem/policy.hpp"
#include "pnmem/units.hpp"

namespace pnmem {

enum class parse_errc : std::uint8_t {
  ok,
  empty,              // nothing but white space
  negative,           // a leading '-'
  not_a_number,       // no digits where digits belong, or stray characters
  bad_unit,           // an unknown unit suffix
  ambiguous_unit,     // KB/MB/GB/TB: decimal or binary?
  fraction_needs_unit,// "1.5" bytes
  too_many_decimals,  // more decimals than the quantity can hold
  out_of_range,       // too large for the type, or a percent above 100
  not_a_switch,       // not one of the on/off words
  not_whole,          // a fraction where a whole number belongs
};

constexpr std::string_view to_string(parse_errc e) noexcept {
  switch (e) {
    case parse_errc::ok: return "ok";
    case parse_errc::empty: return "empty value";
    case parse_errc::negative: return "negative value";
    case parse_errc::not_a_number: return "not a number";
    case parse_errc::bad_unit: return "unknown unit (use B, KiB, MiB, GiB or TiB)";
    case parse_errc::ambiguous_unit: return "ambiguous unit (write KiB, MiB, GiB or TiB: units are binary)";
    case parse_errc::fraction_needs_unit: return "a fraction of a byte (give a unit, e.g. 1.5GiB)";
    case parse_errc::too_many_decimals: return "too many decimals";
    case parse_errc::out_of_range: return "out of range";
    case parse_errc::not_a_switch: return "not a switch (use 1/0, true/false, yes/no, on/off)";
    case parse_errc::not_whole: return "not a whole number";
  }
  return "invalid";
}

// What is wrong with a byte size or a percentage: to_string(e), and when the value is out of range
// the range it must be in ("out of range" alone leaves the reader guessing).
constexpr std::string_view bytes_problem(parse_errc e) noexcept {
  return e == parse_errc::out_of_range ? "out of range (at most 18446744073709551615 B, 2^64-1)" : to_string(e);
}
constexpr std::string_view percent_problem(parse_errc e) noexcept {
  return e == parse_errc::out_of_range ? "out of range (0 to 100)" : to_string(e);
}

// A parse's answer: the value, or why there is none. One type for every parser
// in pnmem; `Errc` is the parser family's error enum, whose `ok` means success
// (procfs::result<T> is parsed<T, procfs::errc>).
template <class T, class Errc = parse_errc>
struct parsed {
  T value{};
  Errc error = Errc::ok;
  constexpr bool ok() const noexcept { return error == Errc::ok; }
  constexpr explicit operator bool() const noexcept { return ok(); }
};

namespace detail {

constexpr bool is_space(char c) noexcept { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
constexpr bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

constexpr std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// A decimal number "int[.frac]" at the front of s: the integer part (checked for
// overflow), the fraction digits as an integer and their count.
struct decimal {
  std::uint64_t whole = 0;
  std::uint64_t frac = 0;
  int frac_digits = 0;
  std::size_t length = 0;  // characters consumed
  parse_errc error = parse_errc::ok;
};

constexpr decimal scan_decimal(std::string_view s, int max_frac_digits) noexcept {
  decimal d;
  std::size_t i = 0;
  bool any = false;
  for (; i < s.size() && is_digit(s[i]); ++i) {
    any = true;
    const auto digit = static_cast<std::uint64_t>(s[i] - '0');
    if (d.whole > (u64_max - digit) / 10) {
      d.error = parse_errc::out_of_range;
      return d;
    }
    d.whole = d.whole * 10 + digit;
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    bool frac_any = false;  // "1." and "." are malformed; ".5" is a half
    for (; i < s.size() && is_digit(s[i]); ++i) {
      frac_any = true;
      if (d.frac_digits == max_frac_digits) {
        d.error = parse_errc::too_many_decimals;
        return d;
      }
      d.frac = d.frac * 10 + static_cast<std::uint64_t>(s[i] - '0');
      ++d.frac_digits;
    }
    any = frac_any;
  }
  if (!any) d.error = parse_errc::not_a_number;
  d.length = i;
  return d;
}

constexpr std::uint64_t pow10(int n) noexcept {
  std::uint64_t v = 1;
  for (int i = 0; i < n; ++i) v *= 10;
  return v;
}

}  // namespace detail

constexpr parsed<std::uint64_t> parse_bytes(std::string_view text) noexcept {
  using R = parsed<std::uint64_t>;
  const std::string_view s = detail::trim(text);
  if (s.empty()) return R{0, parse_errc::empty};
  if (s.front() == '-') return R{0, parse_errc::negative};
  if (!detail::is_digit(s.front()) && s.front() != '.') return R{0, parse_errc::not_a_number};

  const detail::decimal d = detail::scan_decimal(s, 9);
  if (d.error != parse_errc::ok) return R{0, d.error};

  std::string_view unit = s.substr(d.length);
  if (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);  // "1.5 GiB"; a tab or newline is no unit
  std::uint64_t scale = 1;
  if (!unit.empty()) {
    struct named { std::string_view name; std::uint64_t scale; };
    constexpr named units[] = {{"b", 1},     {"k", KiB},   {"kib", KiB}, {"m", MiB},   {"mib", MiB},
                               {"g", GiB},   {"gib", GiB}, {"t", TiB},   {"tib", TiB}};
    constexpr std::string_view ambiguous[] = {"kb", "mb", "gb", "tb"};
    bool found = false;
    for (const auto& u : units) {
      if (detail::iequals(unit, u.name)) {
        scale = u.scale;
        found = true;
      }
    }
    if (!found) {
      for (auto a : ambiguous) {
        if (detail::iequals(unit, a)) return R{0, parse_errc::ambiguous_unit};
      }
      // Characters that are neither a unit nor a number's tail: "12x", "1e9", "1,5GiB".
      return R{0, detail::is_digit(unit.front()) ? parse_errc::not_a_number : parse_errc::bad_unit};
    }
  }
  if (d.frac_digits > 0 && scale == 1) return R{0, parse_errc::fraction_needs_unit};
  if (d.whole > detail::u64_max / scale) return R{0, parse_errc::out_of_range};
  std::uint64_t value = d.whole * scale;
  if (d.frac_digits > 0) {
    // frac < 10^9 and scale <= 2^40: frac * scale < 2^70, so split scale to stay in 64 bits.
    const std::uint64_t div = detail::pow10(d.frac_digits);
    const std::uint64_t extra = detail::mul_div(scale, d.frac, div);
    if (value > detail::u64_max - extra) return R{0, parse_errc::out_of_range};
    value += extra;
  }
  return R{value, parse_errc::ok};
}

// Basis points: "15" -> 1500, "0.25%" -> 25. The kernel prints PSI with 2 decimals.
constexpr parsed<basis_points> parse_percent_bp(std::string_view text) noexcept {
  using R = parsed<basis_points>;
  std::string_view s = detail::trim(text);
  if (s.empty()) return R{0, parse_errc::empty};
  if (s.front() == '-') return R{0, parse_errc::negative};
  if (s.back() == '%') s = detail::trim(s.substr(0, s.size() - 1));
  if (s.empty() || (!detail::is_digit(s.front()) && s.front() != '.')) return R{0, parse_errc::not_a_number};
  const detail::decimal d = detail::scan_decimal(s, 2);
  if (d.error != parse_errc::ok) return R{0, d.error};
  if (d.length != s.size()) return R{0, parse_errc::not_a_number};
  if (d.whole > 100) return R{0, parse_errc::out_of_range};
  const std::uint64_t bp = d.whole * 100 + d.frac * (d.frac_digits == 1 ? 10 : 1);
  if (bp > bp_whole) return R{0, parse_errc::out_of_range};
  return R{static_cast<basis_points>(bp), parse_errc::ok};
}

constexpr parsed<bool> parse_switch(std::string_view text) noexcept {
  using R = parsed<bool>;
  const std::string_view s = detail::trim(text);
  if (s.empty()) return R{false, parse_errc::empty};
  constexpr std::string_view yes[] = {"1", "true", "yes", "on"};
  constexpr std::string_view no[] = {"0", "false", "no", "off"};
  for (auto w : yes) {
    if (detail::iequals(s, w)) return R{true, parse_errc::ok};
  }
  for (auto w : no) {
    if (detail::iequals(s, w)) return R{false, parse_errc::ok};
  }
  return R{false, parse_errc::not_a_switch};
}

// A whole number of milliseconds: "250" -> 250. No unit, sign or fraction.
constexpr parsed<std::uint32_t> parse_milliseconds(std::string_view text) noexcept {
  using R = parsed<std::uint32_t>;
  const std::string_view s = detail::trim(text);
  if (s.empty()) return R{0, parse_errc::empty};
  if (s.front() == '-') return R{0, parse_errc::negative};
  if (!detail::is_digit(s.front())) return R{0, parse_errc::not_a_number};
  const detail::decimal d = detail::scan_decimal(s, 18);
  if (d.error != parse_errc::ok) return R{0, d.error};
  if (d.length != s.size()) return R{0, parse_errc::not_a_number};
  if (d.frac_digits > 0) return R{0, parse_errc::not_whole};
  if (d.whole > 0xFFFFFFFFU) return R{0, parse_errc::out_of_range};
  return R{static_cast<std::uint32_t>(d.whole), parse_errc::ok};
}

}  // namespace pnmem
