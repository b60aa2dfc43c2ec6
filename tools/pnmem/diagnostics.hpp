// tools/pnmem/diagnostics.hpp - what `pnmem` writes on stderr, one line each.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "pnmem/config.hpp"

namespace pnmem_cli {

// Exit status for a failure that is not a bad argument (usage_error.hpp has exit_usage).
inline constexpr int exit_failure = 1;

// `s` with control bytes and bytes that are not UTF-8 escaped ("\n", "\x1b", "\xff":
// pnmem/detail/printable.hpp), so a diagnostic stays one line and a terminal acts on nothing in it.
std::string one_line(std::string_view s);

// "pnmem: error: <message>"
void print_error(std::string_view message);

// Flushes standard output. False, with "pnmem: error: writing to standard output failed: <why>"
// printed, when any write to it failed (a full disk, /dev/full, a closed pipe): the answer did not
// reach the reader, so the command must not exit 0.
bool stdout_ok();
// Called first thing: std::cout keeps the errno of its first failed write, for stdout_ok's line.
void keep_stdout_errors();

// "pnmem: <error>" for each bad PN_* variable: the line the library logs (config_error::log_line).
void print_warnings(const std::vector<pnmem::config_error>& errors);

}  // namespace pnmem_cli
