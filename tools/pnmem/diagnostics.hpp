// tools/pnmem/diagnostics.hpp - what `pnmem` writes on stderr, one line each.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "pnmem/config.hpp"

namespace pnmem_cli {

// Exit status for a failure that is not a bad argument (usage_error.hpp has exit_usage).
inline constexpr int exit_failure = 1;

// `s` with control characters (a newline inside an argument) as '?', so a
// diagnostic stays one line.
std::string one_line(std::string_view s);

// "pnmem: error: <message>"
void print_error(std::string_view message);

// "pnmem: warning: <error>" for each bad PN_* variable.
void print_warnings(const std::vector<pnmem::config_error>& errors);

}  // namespace pnmem_cli
