// tools/pnmem/usage_error.hpp - a bad command-line argument: one line on stderr, exit 2.
#pragma once

#include <stdexcept>
#include <string>

namespace pnmem_cli {

// Exit status for a bad argument (unknown option, missing or malformed value).
inline constexpr int exit_usage = 2;

// Thrown while turning option text into values. The message is the whole
// diagnostic after "pnmem: error: ", e.g. `--host-avail: "12x": unknown unit ...`.
class usage_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace pnmem_cli
