// pnmem/format.hpp - human-readable numbers for logs, errors and the CLI.
//
// Not on the decision path (it allocates a std::string).
#pragma once

#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>

#include "pnmem/policy.hpp"
#include "pnmem/units.hpp"

namespace pnmem {

// "512 B", "1.50 GiB", "2.40 GiB": two decimals in the largest binary unit that is <= the value.
inline std::string format_bytes(std::uint64_t bytes) {
  struct unit { std::uint64_t scale; const char* name; };
  constexpr unit units[] = {{TiB, "TiB"}, {GiB, "GiB"}, {MiB, "MiB"}, {KiB, "KiB"}};
  char buf[48];
  for (const auto& u : units) {
    if (bytes >= u.scale) {
      std::snprintf(buf, sizeof buf, "%.2f %s", static_cast<double>(bytes) / static_cast<double>(u.scale), u.name);
      return buf;
    }
  }
  std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  return buf;
}

// A need and a limit in an answer's words. 2^64-1 is no number there: as a need it is a sum that
// saturated (a request larger than any memory: "more than 2^64-1 B"), as a limit the absence of one.
inline std::string format_need_bytes(std::uint64_t bytes) {
  return bytes == std::numeric_limits<std::uint64_t>::max() ? std::string("more than 2^64-1 B") : format_bytes(bytes);
}
inline std::string format_limit_bytes(std::uint64_t bytes) {
  return bytes == std::numeric_limits<std::uint64_t>::max() ? std::string("no limit") : format_bytes(bytes);
}

// "1 token", "2 tokens", "0 tokens": a count and its noun, singular for one (the plural adds an s).
inline std::string format_count(long long n, const char* noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

// 1500 -> "15.00 %".
inline std::string format_percent_bp(basis_points bp) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%u.%02u %%", bp / bp_per_percent, bp % bp_per_percent);
  return buf;
}

}  // namespace pnmem
