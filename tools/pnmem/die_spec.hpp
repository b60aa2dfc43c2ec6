// tools/pnmem/die_spec.hpp - one `--die FREE:BUDGET[:USED]` argument.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pnmem/mem_state.hpp"

namespace pnmem_cli {

// One die as the operator describes it. BUDGET is total VRAM minus the die
// reserve (0 = not measured: the die is skipped); FREE may exceed it.
struct die_spec {
  std::uint64_t free_bytes = 0;
  std::uint64_t budget_bytes = 0;
  std::uint64_t used_bytes = 0;  // the engine's own allocation tally; informational
};

// "FREE:BUDGET" or "FREE:BUDGET:USED", each field a byte size ("10GiB:15GiB").
// Throws usage_error naming the flag, the argument and the bad field.
die_spec parse_die_spec(std::string_view flag, std::string_view text);

// Every --die in order, at most pnmem::max_dies of them.
std::vector<die_spec> parse_die_specs(std::string_view flag, const std::vector<std::string>& texts);

// Dies [0, n) of `state` set from `dies` (n_dies = dies.size(), at most max_dies).
void put_dies(pnmem::mem_state& state, const std::vector<die_spec>& dies);

}  // namespace pnmem_cli
