// tests/linux/file_text.hpp - the Linux tests' one whole-file reader. Test code
// only, header-only, no doctest (the real-kernel programs have their own main).
#pragma once

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace pnmem::test {

// The file's bytes, or nullopt when it cannot be opened.
inline std::optional<std::string> read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace pnmem::test
