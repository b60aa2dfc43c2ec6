// tools/pnmem/plan_command.hpp - `pnmem plan`: the degradation ladder at a level.
//
//   pnmem plan --level L --slots N --window W [--kv-q4] [--ladder-disable]
//
// Answers with pnmem::ladder_plan_for for the operator config (slots >= 1,
// window >= 0 where 0 = no clamp).
#pragma once

#include "subcommand.hpp"

namespace pnmem_cli {
std::unique_ptr<subcommand> make_plan_command();
}  // namespace pnmem_cli
