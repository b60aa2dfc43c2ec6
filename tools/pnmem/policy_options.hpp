// tools/pnmem/policy_options.hpp - the policy flags that override the environment.
//
// The policy starts from the PN_* variables (config.hpp, read once); a flag given
// on the command line wins over its variable, and means exactly what the
// variable means (config.hpp's table parses both and gives the help its text):
//
//   --host-reserve B       PN_HOST_RESERVE_BYTES
//   --psi-full-reject PCT  PN_PSI_FULL_REJECT
//   --die-reserve B        PN_DIE_RESERVE_BYTES
//   --load-spike B         PN_LOAD_SPIKE_BYTES
//   --ladder-disable       PN_LADDER_DISABLE
//   --interval MS          PN_MEMWATCH_POLL_MS      (the watcher's cadence: `watch`)
//   --pressure-interval MS PN_PRESSURE_POLL_MS
//   --dwell MS             PN_STEP_DOWN_DWELL_MS
//   --zero-cost RULE       PN_ZERO_COST             (hold, admit or reject: `admit`)
//
// so a flag accepts exactly the range its variable does, and says it in its help.
// Each subcommand registers only the flags its answer depends on.
#pragma once

#include <array>
#include <optional>
#include <string>

#include "pnmem/config.hpp"
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
  flag_interval = 1U << 5U,
  flag_pressure_interval = 1U << 6U,
  flag_dwell = 1U << 7U,
  flag_zero_cost = 1U << 8U,
};
inline constexpr std::size_t policy_flag_count = 9;

// The flags that change a level (the host reserve and the PSI reject line): every
// command that derives or reports a level takes them, so `level` and `sample`
// answer alike.
inline constexpr unsigned level_flags = flag_host_reserve | flag_psi_full_reject;
// The watcher's cadence and dwell.
inline constexpr unsigned watcher_flags = flag_interval | flag_pressure_interval | flag_dwell;

class policy_options {
 public:
  // Adds the flags in `which` (an OR of policy_flag) to `app`.
  void add_to(CLI::App& app, unsigned which);

  // `base` with every given flag applied; throws usage_error on a bad value.
  pnmem::env_settings apply(pnmem::env_settings base) const;
  pnmem::policy apply(const pnmem::policy& base) const;

 private:
  std::array<std::optional<std::string>, policy_flag_count> values_;  // by flag, as given
};

}  // namespace pnmem_cli
