// tests/cli/temp_dir.hpp - a directory of its own under the system's temp directory for a CLI test's
// files, removed with what is in it at scope exit.
#pragma once

#include <doctest/doctest.h>
#include <stdlib.h>  // mkdtemp

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>

namespace pnmem::test {

class temp_dir {
 public:
  temp_dir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "pnmem-cli-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    root_ = tmpl;
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  // Writes `text` to NAME in the directory; its path.
  std::string write(const std::string& name, std::string_view text) const {
    write_file((root_ / name).string(), text);
    return path(name);
  }
  // Writes `text` to the file at `path` (a subdirectory's, say), replacing what it held.
  static void write_file(const std::string& path, std::string_view text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    REQUIRE(out.good());
  }
  // The path NAME would have in the directory (the file need not exist).
  std::string path(const std::string& name) const { return (root_ / name).string(); }

 private:
  std::filesystem::path root_;
};

}  // namespace pnmem::test
