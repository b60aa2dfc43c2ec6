// pnmem/mem_level.hpp - the four pressure levels every decision is keyed on.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "pnmem/detail/ascii.hpp"

namespace pnmem {

// Ordered: a larger value is more pressure, so worst-of is max().
enum class mem_level : std::uint8_t {
  ok = 0,        // ample headroom
  watch = 1,     // headroom shrinking
  tight = 2,     // reserve nearly reached, or PSI rising
  critical = 3,  // at the reserve line, or a PSI stall: shed
};

inline constexpr int mem_level_count = 4;

constexpr mem_level worst_of(mem_level a, mem_level b) noexcept { return a < b ? b : a; }

// Lower-case names, as written in JSON and on the command line.
constexpr std::string_view to_string(mem_level l) noexcept {
  switch (l) {
    case mem_level::ok: return "ok";
    case mem_level::watch: return "watch";
    case mem_level::tight: return "tight";
    case mem_level::critical: return "critical";
  }
  return "invalid";
}

// Accepts the names in any case: lower case, and the upper case the seed's logs print.
constexpr std::optional<mem_level> parse_mem_level(std::string_view s) noexcept {
  for (int i = 0; i < mem_level_count; ++i) {
    const auto l = static_cast<mem_level>(i);
    if (detail::iequals(s, to_string(l))) return l;
  }
  return std::nullopt;
}

}  // namespace pnmem
