// tools/pnmem/eviction_output.hpp - rung 4b's eviction plan as `pnmem plan` and `pnmem admit` print it.
#pragma once

#include <ostream>
#include <vector>

#include <nlohmann/json.hpp>

#include "pnmem/eviction_budget.hpp"
#include "pnmem/kv_format.hpp"

namespace pnmem_cli {

// --tokens / --running-tokens: the tokens each running slot holds, N[,N...], at most 4096 slots.
std::vector<int> parse_running_tokens(const char* flag, const std::string& text);

// The plan's JSON: freed_bytes, cut_to_tokens, slots_cut and each slot's tokens, keep_tokens, freed_bytes.
void put_eviction_plan(nlohmann::ordered_json& j, const pnmem::eviction_plan& plan, const std::vector<int>& slots,
                       const std::vector<pnmem::keep_budget_answer>& each);

// The rule the plan follows, one line: the format, the bytes per token, the floors.
void print_eviction_rule(std::ostream& t, const pnmem::model_cost& m, pnmem::kv_format kv, const pnmem::eviction_limits& l);

// One line per slot: "  slot i: N -> K tokens, BYTES".
void print_eviction_slots(std::ostream& t, const std::vector<int>& slots, const std::vector<pnmem::keep_budget_answer>& each);

}  // namespace pnmem_cli
