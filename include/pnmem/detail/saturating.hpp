// pnmem/detail/saturating.hpp - unsigned arithmetic that clamps instead of wrapping.
//
// Garbage inputs (a die reporting 2^64-1 free bytes, a prompt of INT_MAX tokens)
// must give a conservative answer, never a wrapped one that admits everything.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "pnmem/detail/cxx.hpp"

namespace pnmem::detail {

inline constexpr std::uint64_t u64_max = std::numeric_limits<std::uint64_t>::max();

constexpr std::uint64_t sat_add(std::uint64_t a, std::uint64_t b) noexcept {
  return a > u64_max - b ? u64_max : a + b;
}

constexpr std::uint64_t sat_sub(std::uint64_t a, std::uint64_t b) noexcept {
  return a > b ? a - b : 0;
}

// True while nvcc's front end evaluates a constant expression: it cannot evaluate the overflow
// builtins there (a .cu file including these headers failed on `seed_model_cost`), so the two
// functions below check by arithmetic instead. Always false elsewhere: GCC and Clang evaluate the
// builtins in constant expressions too.
constexpr bool nvcc_constant_evaluated() noexcept {
#if defined(__CUDACC__) && PNMEM_HAS_IS_CONSTANT_EVALUATED
  return std::is_constant_evaluated();
#elif defined(__CUDACC__)
  return __builtin_is_constant_evaluated();  // C++17 (detail/cxx.hpp)
#else
  return false;
#endif
}

// r = a * b (or a + b), true when it wrapped. At run time the check is the instruction's own flag:
// a division `a > u64_max / b` would cost tens of cycles whenever b is not a compile-time constant
// (a model's KV bytes per token, read from a file).
constexpr bool mul_overflows(std::uint64_t a, std::uint64_t b, std::uint64_t& r) noexcept {
  if (nvcc_constant_evaluated()) {
    r = a * b;
    return a != 0 && r / a != b;
  }
  return __builtin_mul_overflow(a, b, &r);
}

constexpr bool add_overflows(std::uint64_t a, std::uint64_t b, std::uint64_t& r) noexcept {
  if (nvcc_constant_evaluated()) {
    r = a + b;
    return r < a;
  }
  return __builtin_add_overflow(a, b, &r);
}

constexpr std::uint64_t sat_mul(std::uint64_t a, std::uint64_t b) noexcept {
  std::uint64_t r = 0;
  return mul_overflows(a, b, r) ? u64_max : r;
}

// floor(a * num / den) without intermediate overflow (den > 0, num <= den assumed
// by callers for fractions, but exact for any num as long as the result fits).
constexpr std::uint64_t mul_div(std::uint64_t a, std::uint64_t num, std::uint64_t den) noexcept {
  const std::uint64_t whole = sat_mul(a / den, num);
  const std::uint64_t part = sat_mul(a % den, num) / den;
  return sat_add(whole, part);
}

// Exact a * b / c (c > 0) in 128 bits, rounded down or up, saturated to 2^64-1. GCC and Clang
// (the compilers pnmem supports) have unsigned __int128 in constant expressions too.
__extension__ typedef unsigned __int128 u128;

constexpr std::uint64_t to_u64_sat(u128 v) noexcept { return v > u64_max ? u64_max : static_cast<std::uint64_t>(v); }

constexpr std::uint64_t mul_div_floor(std::uint64_t a, std::uint64_t b, std::uint64_t c) noexcept {
  std::uint64_t p = 0;
  if (!mul_overflows(a, b, p)) return p / c;  // the product fits (any real host's bytes): a 64-bit division
  return to_u64_sat(static_cast<u128>(a) * b / c);
}

constexpr std::uint64_t mul_div_ceil(std::uint64_t a, std::uint64_t b, std::uint64_t c) noexcept {
  const u128 p = static_cast<u128>(a) * b;
  return to_u64_sat(p / c + (p % c != 0 ? 1 : 0));
}

}  // namespace pnmem::detail
