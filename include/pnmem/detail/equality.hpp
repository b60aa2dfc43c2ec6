// pnmem/detail/equality.hpp - a struct's member-wise == in C++20 and C++17 alike.
//
// Inside a struct of public data members (no bases, no references):
//
//   PNMEM_DEFAULTED_EQUALITY(admit_result)
//
// C++20: `friend constexpr bool operator==(const admit_result&, const admit_result&) = default;`,
// nothing else. C++17 (no defaulted comparisons): == and != that compare the members in
// declaration order, each with its own == (std::array element by element, so it stays usable in
// a constant expression, as C++20's is). The members are found by counting how many initializers
// the aggregate takes and binding them with a structured binding: no member list to keep in step.
#pragma once

#include "pnmem/detail/cxx.hpp"

#if PNMEM_HAS_DEFAULTED_COMPARISONS

#define PNMEM_DEFAULTED_EQUALITY(T) friend constexpr bool operator==(const T&, const T&) = default;

#else

#include <array>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

namespace pnmem::detail {

// Converts to any member type (declared only: used in unevaluated operands).
struct any_member {
  template <class U>
  constexpr operator U() const noexcept;  // NOLINT(google-explicit-constructor)
};

template <class T, class Seq, class = void>
struct takes_initializers : std::false_type {};
template <class T, std::size_t... I>
struct takes_initializers<T, std::index_sequence<I...>, std::void_t<decltype(T{(void(I), any_member{})...})>>
    : std::true_type {};

// The number of members of the aggregate T: the most initializers T{...} takes.
template <class T, std::size_t N = 0>
constexpr std::size_t member_count() noexcept {
  if constexpr (N < 24 && takes_initializers<T, std::make_index_sequence<N + 1>>::value) {
    return member_count<T, N + 1>();
  } else {
    return N;
  }
}

// The members of x, as a tuple of references.
template <class T>
constexpr auto tie_members(const T& x) noexcept {
  constexpr std::size_t n = member_count<T>();
  static_assert(n >= 1 && n <= 16, "PNMEM_DEFAULTED_EQUALITY: 1 to 16 public members, no bases");
  // clang-format off
  if constexpr (n == 1) { const auto& [m0] = x; return std::tie(m0); }
  else if constexpr (n == 2) { const auto& [m0, m1] = x; return std::tie(m0, m1); }
  else if constexpr (n == 3) { const auto& [m0, m1, m2] = x; return std::tie(m0, m1, m2); }
  else if constexpr (n == 4) { const auto& [m0, m1, m2, m3] = x; return std::tie(m0, m1, m2, m3); }
  else if constexpr (n == 5) { const auto& [m0, m1, m2, m3, m4] = x; return std::tie(m0, m1, m2, m3, m4); }
  else if constexpr (n == 6) { const auto& [m0, m1, m2, m3, m4, m5] = x; return std::tie(m0, m1, m2, m3, m4, m5); }
  else if constexpr (n == 7) {
    const auto& [m0, m1, m2, m3, m4, m5, m6] = x;
    return std::tie(m0, m1, m2, m3, m4, m5, m6);
  } else if constexpr (n == 8) {
    const auto& [m0, m1, m2, m3, m4, m5, m6, m7] = x;
    return std::tie(m0, m1, m2, m3, m4, m5, m6, m7);
  } else if constexpr (n == 9) {
    const auto& [m0, m1, m2, m3, m4, m5, m6, m7, m8] = x;
    return std::tie(m0, m1, m2, m3, m4, m5, m6, m7, m8);
  } else if constexpr (n == 10) {
    const auto& [m0, m1, m2, m3, m4, m5, m6, m7, m8, m9] = x;
    return std::tie(m0, m1, m2, m3, m4, m5, m6, m7, m8, m9);
  } else if constexpr (n == 11) {
    const auto& [m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10] = x;
    return std::tie(m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10);
  } else if constexpr (n == 12) {
    const auto& [m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11] = x;
    return std::tie(m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11);
  } else if constexpr (n == 13) {
    const auto& [m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12] = x;
    return std::tie(m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12);
  } else if constexpr (n == 14) {
    const auto& [m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12, m13] = x;
    return std::tie(m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12, m13);
  } else if constexpr (n == 15) {
    const auto& [m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12, m13, m14] = x;
    return std::tie(m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12, m13, m14);
  } else {
    const auto& [m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12, m13, m14, m15] = x;
    return std::tie(m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12, m13, m14, m15);
  }
  // clang-format on
}

// One member: its own == (std::array's is not constexpr before C++20: compared here).
template <class U>
constexpr bool member_equal(const U& a, const U& b) noexcept {
  return a == b;
}
template <class U, std::size_t N>
constexpr bool member_equal(const std::array<U, N>& a, const std::array<U, N>& b) noexcept {
  for (std::size_t i = 0; i < N; ++i) {
    if (!member_equal(a[i], b[i])) return false;
  }
  return true;
}

template <class Tuple, std::size_t... I>
constexpr bool members_equal(const Tuple& a, const Tuple& b, std::index_sequence<I...>) noexcept {
  return (member_equal(std::get<I>(a), std::get<I>(b)) && ...);
}

template <class T>
constexpr bool aggregate_equal(const T& a, const T& b) noexcept {
  return members_equal(tie_members(a), tie_members(b), std::make_index_sequence<member_count<T>()>{});
}

}  // namespace pnmem::detail

#define PNMEM_DEFAULTED_EQUALITY(T)                                                                            \
  friend constexpr bool operator==(const T& a, const T& b) noexcept { return ::pnmem::detail::aggregate_equal(a, b); } \
  friend constexpr bool operator!=(const T& a, const T& b) noexcept { return !(a == b); }

#endif
