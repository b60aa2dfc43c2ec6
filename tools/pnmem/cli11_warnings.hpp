// tools/pnmem/cli11_warnings.hpp - included first (before any other header, the file's own included)
// by the tool's files where GCC 12 reports a -Wnull-dereference false positive inside libstdc++'s
// std::string when it inlines CLI11's CLI::detail::split. The warning is issued after inlining, at a
// location in <string>, so it has to be silenced before <string> is first included; it stays off for
// the rest of the including file. The rest of the project keeps the flag.
#pragma once

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic ignored "-Wnull-dereference"
#endif
