// pnmem/detail/ascii.hpp - ASCII case folding, for names a user may type in either case.
//
// Locale-free (std::tolower reads the C locale), constexpr, and only A-Z fold:
// the names it compares (levels, units, booleans, KV formats) are plain ASCII.
#pragma once

#include <cstddef>
#include <string_view>

namespace pnmem::detail {

constexpr char lower(char c) noexcept { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

constexpr bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

}  // namespace pnmem::detail
