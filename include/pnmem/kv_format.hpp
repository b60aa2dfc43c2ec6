// pnmem/kv_format.hpp - the formats a KV cache (or a recurrent state) is stored in, and what a row costs.
//
// A format stores a row of `values` values as:
//
//   fp32 (f32)  4 B per value        bf16   2 B per value
//   f16         2 B per value        fp8    1 B per value
//   q8_0        34 B per block of 32 values (32 int8 + an fp16 scale), rows rounded up to whole blocks
//   q4_0        18 B per block of 32 values (16 B of nibbles + an fp16 scale), rows rounded up
//   q4          the seed's own Q4 figure: 5898 B for its 10240 values per token (sink and window rows
//               kept in fp32 beside the blocks), i.e. ceil(values x 5898 / 10240) for any shape
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "pnmem/detail/saturating.hpp"

namespace pnmem {

// KV cache formats. q4 and fp32 keep their values (0 and 1) from before the others existed.
enum class kv_format : std::uint8_t { q4, fp32, f16, bf16, fp8, q8_0, q4_0 };
inline constexpr std::size_t kv_format_count = 7;
inline constexpr std::array<kv_format, kv_format_count> all_kv_formats{
    kv_format::q4, kv_format::fp32, kv_format::f16, kv_format::bf16, kv_format::fp8, kv_format::q8_0, kv_format::q4_0};

constexpr std::string_view to_string(kv_format f) noexcept {
  switch (f) {
    case kv_format::q4: return "q4";
    case kv_format::fp32: return "fp32";
    case kv_format::f16: return "f16";
    case kv_format::bf16: return "bf16";
    case kv_format::fp8: return "fp8";
    case kv_format::q8_0: return "q8_0";
    case kv_format::q4_0: return "q4_0";
  }
  return "invalid";
}

// A format by name: the names above, plus "f32"/"float32" (fp32), "float16"/"half" (f16),
// "bfloat16" (bf16) and "fp8_e4m3"/"fp8_e5m2" (fp8); ASCII case ignored. false if unknown.
constexpr bool parse_kv_format(std::string_view s, kv_format& out) noexcept {
  auto eq = [](std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      char c = a[i];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      if (c != b[i]) return false;
    }
    return true;
  };
  for (kv_format f : all_kv_formats) {
    if (eq(s, to_string(f))) {
      out = f;
      return true;
    }
  }
  struct alias {
    std::string_view name;
    kv_format f;
  };
  constexpr alias aliases[] = {{"f32", kv_format::fp32},      {"float32", kv_format::fp32}, {"float16", kv_format::f16},
                               {"half", kv_format::f16},      {"bfloat16", kv_format::bf16}, {"fp8_e4m3", kv_format::fp8},
                               {"fp8_e5m2", kv_format::fp8}};
  for (const alias& a : aliases) {
    if (eq(s, a.name)) {
      out = a.f;
      return true;
    }
  }
  return false;
}

// Bytes one row of `values` values takes in format f (block formats: whole blocks, scales included).
// q4 is the seed's ratio (5898 B per 10240 values), rounded up.
constexpr std::uint64_t kv_row_bytes(std::uint64_t values, kv_format f) noexcept {
  using detail::sat_mul;
  switch (f) {
    case kv_format::fp32: return sat_mul(values, 4);
    case kv_format::f16:
    case kv_format::bf16: return sat_mul(values, 2);
    case kv_format::fp8: return values;
    case kv_format::q8_0: return sat_mul(values / 32 + (values % 32 != 0 ? 1 : 0), 34);
    case kv_format::q4_0: return sat_mul(values / 32 + (values % 32 != 0 ? 1 : 0), 18);
    case kv_format::q4: return detail::mul_div_ceil(values, 5898, 10240);
  }
  return sat_mul(values, 4);
}

namespace detail {
// Where format f sits in a model's per-format arrays; a value outside the enum reads as fp32's.
constexpr std::size_t kv_index(kv_format f) noexcept {
  return static_cast<std::size_t>(f) < kv_format_count ? static_cast<std::size_t>(f) : 1;
}
}  // namespace detail

}  // namespace pnmem
