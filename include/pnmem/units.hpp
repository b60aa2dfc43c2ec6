// pnmem/units.hpp - byte units and the literals that spell them.
#pragma once

#include <cstdint>

namespace pnmem {

inline constexpr std::uint64_t KiB = 1024ULL;
inline constexpr std::uint64_t MiB = 1024ULL * KiB;
inline constexpr std::uint64_t GiB = 1024ULL * MiB;
inline constexpr std::uint64_t TiB = 1024ULL * GiB;

namespace literals {
// `4_GiB` reads like the seed's numbers and cannot be mistaken for 4e9.
constexpr std::uint64_t operator""_KiB(unsigned long long v) { return v * KiB; }
constexpr std::uint64_t operator""_MiB(unsigned long long v) { return v * MiB; }
constexpr std::uint64_t operator""_GiB(unsigned long long v) { return v * GiB; }
constexpr std::uint64_t operator""_TiB(unsigned long long v) { return v * TiB; }
}  // namespace literals

}  // namespace pnmem
