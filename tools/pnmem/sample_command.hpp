// tools/pnmem/sample_command.hpp - `pnmem sample`: what this box sees now.
//
//   pnmem sample [--root DIR] [--host-reserve B] [--psi-full-reject PCT]
//       one snapshot from the platform sampler, with its provenance; the level
//       under the policy flags, as `pnmem level` would give it
#pragma once

#include "subcommand.hpp"

namespace pnmem_cli {
std::unique_ptr<subcommand> make_sample_command();
}  // namespace pnmem_cli
