// tools/pnmem/diagnostics.cpp
#include "diagnostics.hpp"

#include <iostream>

namespace pnmem_cli {

std::string one_line(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u == 0x7f) ? '?' : c;
  }
  return out;
}

void print_error(std::string_view message) { std::cerr << "pnmem: error: " << one_line(message) << std::endl; }

void print_warnings(const std::vector<pnmem::config_error>& errors) {
  for (const auto& e : errors) std::cerr << "pnmem: warning: " << one_line(e.to_string()) << '\n';
}

}  // namespace pnmem_cli
