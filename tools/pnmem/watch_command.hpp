// tools/pnmem/watch_command.hpp - `pnmem watch`: this box, live.
//
//   pnmem watch [--root DIR] [--interval MS] [--pressure-interval MS] [--dwell MS] [--count N]
//               [--host-reserve B] [--psi-full-reject PCT]
//       runs the watcher: level changes as they happen and a compact live line
//       (in a terminal), one line per interval otherwise; JSON lines with --json.
//       Stops on SIGINT/SIGTERM or after N lines.
//   pnmem watch ... --textfile DIR/pnmem.prom [--textfile-interval MS]
//       also keeps DIR/pnmem.prom holding the latest sample as Prometheus text
//       (`pnmem metrics`'s), for node_exporter's textfile collector: after every
//       sample, or at most every MS ms; replaced whole (a temporary file in DIR,
//       fsync, rename, fsync DIR), so a reader never sees part of one. DIR missing
//       or not writable at start: exit 2. A write that fails later: a warning on
//       stderr, the file keeps its last complete sample, sampling goes on. On
//       SIGINT/SIGTERM the write under way finishes first: no temporary file stays.
#pragma once

#include "subcommand.hpp"

namespace pnmem_cli {
std::unique_ptr<subcommand> make_watch_command();
}  // namespace pnmem_cli
