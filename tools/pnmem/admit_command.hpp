// tools/pnmem/admit_command.hpp - `pnmem admit`: may this request start?
//
//   pnmem admit --host-total B --host-avail B [--psi-full PCT] [--psi-some PCT]
//               --prompt N [--kv q4|fp32] [--gpu-resident] [--die FREE:BUDGET[:USED]]
//               [--max-window W] [--host-reserve B] [--psi-full-reject PCT]
//
// Answers with pnmem::admit_request; the --die, when given, is die 0 of the
// state and the request's die, so its free VRAM also bounds the host path.
#pragma once

#include <optional>
#include <string>

#include "host_options.hpp"
#include "policy_options.hpp"
#include "subcommand.hpp"

namespace pnmem_cli {

class admit_command final : public subcommand {
 public:
  void add_to(CLI::App& parent) override;
  command_output run(const pnmem::policy& env_policy) const override;

 private:
  host_options host_;
  std::string prompt_;
  std::string kv_ = "q4";
  bool gpu_resident_ = false;
  std::optional<std::string> die_;
  std::optional<std::string> max_window_;
  policy_options policy_;
};

}  // namespace pnmem_cli
