// tools/pnmem/watch_command.hpp - `pnmem watch`: this box, live.
//
//   pnmem watch [--root DIR] [--interval MS] [--pressure-interval MS] [--dwell MS] [--count N]
//               [--host-reserve B] [--psi-full-reject PCT]
//       runs the watcher: level changes as they happen and a compact live line
//       (in a terminal), one line per interval otherwise; JSON lines with --json.
//       Stops on SIGINT/SIGTERM or after N lines.
#pragma once

#include "subcommand.hpp"

namespace pnmem_cli {
std::unique_ptr<subcommand> make_watch_command();
}  // namespace pnmem_cli
