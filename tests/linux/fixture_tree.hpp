// tests/linux/fixture_tree.hpp - private, writable copies of the fixture trees and
// small file helpers for the Linux sampler tests. Test code only, header-only.
//
//   fixtures_dir()           tests/fixtures/linux (PNMEM_LINUX_FIXTURES, set by meson test)
//   temp_tree t{"v1_limit"}  a copy of one fixture tree (or, with no name, an empty
//                            directory) under /tmp, removed at scope exit: the
//                            checked-in fixtures are never modified
//   write_text / read_text   whole-file I/O (read_text: file_text.hpp's read_file)
#pragma once

#include <doctest/doctest.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>

#include "file_text.hpp"

namespace pnmem::test {

inline std::filesystem::path fixtures_dir() {
  const char* dir = std::getenv("PNMEM_LINUX_FIXTURES");
  REQUIRE_MESSAGE(dir != nullptr, "PNMEM_LINUX_FIXTURES is not set (run through meson test)");
  return std::filesystem::path(dir);
}

struct temp_tree {
  std::filesystem::path root;
  explicit temp_tree(std::string_view fixture = {}) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "pnmem-tree-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    root = tmpl;
    if (!fixture.empty()) {
      std::filesystem::copy(fixtures_dir() / fixture, root, std::filesystem::copy_options::recursive);
    }
  }
  ~temp_tree() {
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
  }
  temp_tree(const temp_tree&) = delete;
  temp_tree& operator=(const temp_tree&) = delete;
  std::filesystem::path operator/(std::string_view rel) const { return root / rel; }
};

inline void write_text(const std::filesystem::path& p, std::string_view text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  REQUIRE(out.good());
  out << text;
}

// The file's bytes; "" when it cannot be opened.
inline std::string read_text(const std::filesystem::path& p) { return read_file(p).value_or(std::string()); }

}  // namespace pnmem::test
