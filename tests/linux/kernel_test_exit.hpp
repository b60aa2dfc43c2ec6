// tests/linux/kernel_test_exit.hpp - how the real-kernel test programs end: meson
// reads exit 0 as pass, 1 as fail, 77 as SKIP; one line says why. Test code
// only, header-only, no doctest.
#pragma once

#include <cstdio>
#include <string>

namespace pnmem::test {

inline constexpr int exit_pass = 0;
inline constexpr int exit_fail = 1;
inline constexpr int exit_skip = 77;

inline int skip(const std::string& why) {
  std::printf("SKIP: %s\n", why.c_str());
  return exit_skip;
}

inline int fail(const std::string& why) {
  std::printf("FAIL: %s\n", why.c_str());
  return exit_fail;
}

}  // namespace pnmem::test
