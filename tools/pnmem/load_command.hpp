// tools/pnmem/load_command.hpp - `pnmem load`: may this model upload start?
//
//   pnmem load --weights B --kv-max-ctx B [--die FREE:BUDGET[:USED]]...
//              [--host-total B --host-avail B] [--die-reserve B] [--load-spike B]
//              [--host-reserve B]
//
// Three verdicts:
//   model_load  pnmem::admit_model_load: the whole model on the roomiest die
//   per_die     pnmem::admit_model_load_die for each die, the weights and the KV
//               split evenly over the given dies (slices rounded up)
//   load_spike  pnmem::admit_load_spike: the host burst of the upload; only
//               evaluated when the host is described (null otherwise)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "host_options.hpp"
#include "policy_options.hpp"
#include "subcommand.hpp"

namespace pnmem_cli {

// ceil(total / parts) for parts >= 1: one die's share of an even split, so the
// slices together never under-count the total.
constexpr std::uint64_t split_round_up(std::uint64_t total, std::uint64_t parts) noexcept {
  return total / parts + (total % parts != 0 ? 1 : 0);
}

class load_command final : public subcommand {
 public:
  void add_to(CLI::App& parent) override;
  command_output run(const pnmem::policy& env_policy) const override;

 private:
  std::string weights_;
  std::string kv_max_ctx_;
  std::vector<std::string> dies_;
  host_options host_;
  policy_options policy_;
};

}  // namespace pnmem_cli
