// tools/pnmem/plan_command.hpp - `pnmem plan`: the degradation ladder at a level.
//
//   pnmem plan --level L --slots N --window W [--kv-q4] [--ladder-disable] [model flags]
//
// Answers with pnmem::ladder_plan_for for the operator config (slots >= 1,
// window >= 0 where 0 = no clamp). With a model (model_options.hpp), also which KV
// format a cache allocated now must use: the model's compact_kv when the plan forces
// Q4 (rung 4a, or --kv-q4), else its normal_kv, and its bytes per token: a "model"
// object in the JSON (model_brief_json plus "compact") and two text lines.
#pragma once

#include "subcommand.hpp"

namespace pnmem_cli {
std::unique_ptr<subcommand> make_plan_command();
}  // namespace pnmem_cli
