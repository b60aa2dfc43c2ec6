// tools/pnmem/ledger_command.hpp - `pnmem ledger`: who holds what in this box's shared ledger (Linux).
//
//   pnmem ledger [--ledger off|auto|NAME|PATH] [--group GROUP] [--root DIR]
//       the box ledger's holders (pid, command, bytes reserved, settled and credited that the newest
//       sample has not seen, how long it has held something) and the totals; the dead are freed first.
//       The scope is PN_LEDGER's (--ledger), by default this box's for this user and memory cgroup.
//       Exit 0 (also with no file yet: no process has joined); 1 when the file is refused, saying why.
//
// box_ledger_metrics() is what `pnmem metrics` (and watch --textfile) add for the same scope.
#pragma once

#include <string>

#include "pnmem/mem_state.hpp"
#include "subcommand.hpp"

namespace pnmem_cli {

std::unique_ptr<subcommand> make_ledger_command();

// The box ledger's families (engine/metrics.hpp prometheus_ledger_text) for the scope PN_LEDGER names,
// scoped by the memory cgroup of `s` (a sample of this box): "" when there is none (off, no file yet, or
// refused: the tool's metrics never fail for it).
std::string box_ledger_metrics(const pnmem::mem_state& s);

}  // namespace pnmem_cli
