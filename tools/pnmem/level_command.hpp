// tools/pnmem/level_command.hpp - `pnmem level`: the pressure level of a described state.
//
//   pnmem level --host-total B --host-avail B [--psi-some PCT] [--psi-full PCT]
//               [--die FREE:BUDGET[:USED]]... [--host-reserve B] [--psi-full-reject PCT]
//
// Answers with pnmem::explain_level: the level and the part host bytes, PSI and
// each die played in it.
#pragma once

#include <string>
#include <vector>

#include "host_options.hpp"
#include "policy_options.hpp"
#include "subcommand.hpp"

namespace pnmem_cli {

class level_command final : public subcommand {
 public:
  void add_to(CLI::App& parent) override;
  command_output run(const pnmem::policy& env_policy) const override;

 private:
  host_options host_;
  std::vector<std::string> dies_;
  policy_options policy_;
};

}  // namespace pnmem_cli
