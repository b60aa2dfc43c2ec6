// tools/pnmem/eviction_output.cpp - rung 4b's eviction plan as `pnmem plan` and `pnmem admit` print it.
#include "eviction_output.hpp"

#include <cstddef>

#include "arg_parsers.hpp"
#include "pnmem/format.hpp"

namespace pnmem_cli {

std::vector<int> parse_running_tokens(const char* flag, const std::string& text) {
  return parse_int_list_arg(flag, text, 0, 4096);
}

void put_eviction_plan(nlohmann::ordered_json& j, const pnmem::eviction_plan& plan, const std::vector<int>& slots,
                       const std::vector<pnmem::keep_budget_answer>& each) {
  j["freed_bytes"] = plan.freed_bytes;
  j["cut_to_tokens"] = plan.cut_to;
  j["slots_cut"] = plan.slots_cut;
  nlohmann::ordered_json js = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < slots.size() && i < each.size(); ++i) {
    js.push_back({{"tokens", slots[i]}, {"keep_tokens", each[i].keep_tokens}, {"freed_bytes", each[i].freed_bytes}});
  }
  j["slots"] = js;
}

void print_eviction_rule(std::ostream& t, const pnmem::model_cost& m, pnmem::kv_format kv, const pnmem::eviction_limits& l) {
  t << "eviction (rung 4b, " << pnmem::to_string(kv) << ", "
    << pnmem::format_bytes(m.full_kv_bytes_per_token[static_cast<std::size_t>(kv)])
    << " per token of the full-attention layers; a slot keeps at least " << pnmem::format_count(l.min_keep_tokens, "token") << " and "
    << l.min_keep_permille / 10 << " %):\n";
}

void print_eviction_slots(std::ostream& t, const std::vector<int>& slots, const std::vector<pnmem::keep_budget_answer>& each) {
  for (std::size_t i = 0; i < slots.size() && i < each.size(); ++i) {
    t << "  slot " << i << ": " << slots[i] << " -> " << pnmem::format_count(each[i].keep_tokens, "token") << ", "
      << pnmem::format_bytes(each[i].freed_bytes) << '\n';
  }
}

}  // namespace pnmem_cli
