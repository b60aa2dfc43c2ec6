// tools/pnmem/probe_command.hpp - `pnmem probe`: this box for orchestrators.
//
//   pnmem probe [--root DIR] [--max-level LEVEL] [--host-reserve B] [--psi-full-reject PCT]
//       a readiness probe: exit 0 while the box's level is at or below LEVEL
//       (default tight), 1 above it, 2 on a bad argument; one line on stdout.
#pragma once

#include "subcommand.hpp"

namespace pnmem_cli {
std::unique_ptr<subcommand> make_probe_command();
}  // namespace pnmem_cli
