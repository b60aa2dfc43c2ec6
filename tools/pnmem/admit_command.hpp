// tools/pnmem/admit_command.hpp - `pnmem admit`: may this request start?
//
//   pnmem admit --host-total B --host-avail B [--psi-full PCT] [--psi-some PCT]
//               --prompt N [--kv q4|fp32] [--gpu-resident] [--die FREE:BUDGET[:USED]]
//               [--max-window W] [--host-reserve B] [--psi-full-reject PCT]
//
// Answers with pnmem::admit_request; the --die, when given, is die 0 of the
// state and the request's die, so its free VRAM also bounds the host path.
#pragma once

#include "subcommand.hpp"

namespace pnmem_cli {
std::unique_ptr<subcommand> make_admit_command();
}  // namespace pnmem_cli
