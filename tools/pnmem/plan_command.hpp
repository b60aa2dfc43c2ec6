// tools/pnmem/plan_command.hpp - `pnmem plan`: the degradation ladder at a level.
//
//   pnmem plan --level L --slots N --window W [--kv-q4] [--ladder-disable]
//
// Answers with pnmem::ladder_plan_for for the operator config (slots >= 1,
// window >= 0 where 0 = no clamp).
#pragma once

#include <string>

#include "policy_options.hpp"
#include "subcommand.hpp"

namespace pnmem_cli {

class plan_command final : public subcommand {
 public:
  void add_to(CLI::App& parent) override;
  command_output run(const pnmem::policy& env_policy) const override;

 private:
  std::string level_;
  std::string slots_;
  std::string window_;
  bool kv_q4_ = false;
  policy_options policy_;
};

}  // namespace pnmem_cli
