// tools/pnmem/level_command.hpp - `pnmem level`: the pressure level of a described state.
//
//   pnmem level --host-total B --host-avail B [--psi-some PCT] [--psi-full PCT]
//               [--die FREE:BUDGET[:USED]]... [--host-reserve B] [--psi-full-reject PCT]
//
// Answers with pnmem::explain_level: the level and the part host bytes, PSI and
// each die played in it.
#pragma once

#include "subcommand.hpp"

namespace pnmem_cli {
std::unique_ptr<subcommand> make_level_command();
}  // namespace pnmem_cli
