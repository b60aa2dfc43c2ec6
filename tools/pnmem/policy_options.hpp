// tools/pnmem/policy_options.hpp - the policy flags that override the environment.
//
// The policy starts from pnmem::policy_from_env() (PN_* variables); a flag given
// on the command line wins over its variable:
//
//   --host-reserve B       PN_HOST_RESERVE_BYTES   host reserve, exactly B
//   --psi-full-reject PCT  PN_PSI_FULL_REJECT      full avg10 that is CRITICAL and rejects (> 0)
//   --die-reserve B        PN_DIE_RESERVE_BYTES    VRAM held back on each die
//   --load-spike B         PN_LOAD_SPIKE_BYTES     host burst of a weight upload
//   --ladder-disable       PN_LADDER_DISABLE       the ladder plans the operator config
//
// Each subcommand registers only the flags its answer depends on.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "pnmem/policy.hpp"

namespace CLI {
class App;
}

namespace pnmem_cli {

enum policy_flag : unsigned {
  flag_host_reserve = 1U << 0U,
  flag_psi_full_reject = 1U << 1U,
  flag_die_reserve = 1U << 2U,
  flag_load_spike = 1U << 3U,
  flag_ladder_disable = 1U << 4U,
};

class policy_options {
 public:
  // Adds the flags in `which` (an OR of policy_flag) to `app`.
  void add_to(CLI::App& app, unsigned which);

  // `base` with every given flag applied; throws usage_error on a bad value.
  pnmem::policy apply(pnmem::policy base) const;

 private:
  std::optional<std::string> host_reserve_;
  std::optional<std::string> psi_full_reject_;
  std::optional<std::string> die_reserve_;
  std::optional<std::string> load_spike_;
  bool ladder_disable_ = false;
};

}  // namespace pnmem_cli
