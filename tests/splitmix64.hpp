// tests/splitmix64.hpp - deterministic pseudo-random numbers for sweeps and benchmark inputs.
//
// Steele, Lea and Flood's splitmix64: tiny, constexpr (benchmark tables built at
// compile time use it) and the same sequence on every platform, so a failing
// sweep reproduces from its seed. Test and benchmark code only.
#pragma once

#include <cstdint>

namespace pnmem::test {

struct splitmix64 {
  std::uint64_t state;

  constexpr std::uint64_t next() noexcept {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform enough in [0, n); 0 when n is 0.
  constexpr std::uint64_t below(std::uint64_t n) noexcept { return n == 0 ? 0 : next() % n; }
  constexpr std::uint64_t between(std::uint64_t lo, std::uint64_t hi) noexcept { return lo + below(hi - lo + 1); }
  constexpr int between_int(int lo, int hi) noexcept {
    return lo + static_cast<int>(below(static_cast<std::uint64_t>(hi - lo) + 1));
  }
  // A percentage with two decimals, as /proc/pressure prints it.
  constexpr double pct(std::uint64_t max_hundredths) noexcept {
    return static_cast<double>(below(max_hundredths + 1)) / 100.0;
  }
};

}  // namespace pnmem::test
