// tools/pnmem/policy_options.cpp - the policy override flags.
#include "policy_options.hpp"

#include <CLI/CLI.hpp>

#include "arg_parsers.hpp"
#include "usage_error.hpp"

namespace pnmem_cli {

void policy_options::add_to(CLI::App& app, unsigned which) {
  if ((which & flag_host_reserve) != 0U) {
    app.add_option_function<std::string>("--host-reserve", [this](const std::string& v) { host_reserve_ = v; },
                   "Host reserve, exactly this many bytes (overrides PN_HOST_RESERVE_BYTES; "
                   "default max(1 GiB, 15 % of the host total))")
        ->type_name("BYTES");
  }
  if ((which & flag_psi_full_reject) != 0U) {
    app.add_option_function<std::string>("--psi-full-reject", [this](const std::string& v) { psi_full_reject_ = v; },
                   "PSI full avg10 percent that is CRITICAL and rejects requests, above 0 "
                   "(overrides PN_PSI_FULL_REJECT; default 15)")
        ->type_name("PCT");
  }
  if ((which & flag_die_reserve) != 0U) {
    app.add_option_function<std::string>("--die-reserve", [this](const std::string& v) { die_reserve_ = v; },
                   "VRAM held back on each die (overrides PN_DIE_RESERVE_BYTES; default 1GiB)")
        ->type_name("BYTES");
  }
  if ((which & flag_load_spike) != 0U) {
    app.add_option_function<std::string>("--load-spike", [this](const std::string& v) { load_spike_ = v; },
                   "Host burst of a weight upload (overrides PN_LOAD_SPIKE_BYTES; default 2.4GiB)")
        ->type_name("BYTES");
  }
  if ((which & flag_ladder_disable) != 0U) {
    app.add_flag("--ladder-disable", ladder_disable_,
                 "Plan the operator config at every level (as PN_LADDER_DISABLE=1)");
  }
}

pnmem::policy policy_options::apply(pnmem::policy base) const {
  pnmem::policy p = base;
  if (host_reserve_) {
    p.host_reserve_min_bytes = parse_bytes_arg("--host-reserve", *host_reserve_);
    p.host_reserve_bp = 0;
  }
  if (psi_full_reject_) {
    const pnmem::basis_points bp = parse_percent_arg("--psi-full-reject", *psi_full_reject_);
    if (bp == 0) {
      throw usage_error(describe_bad_value("--psi-full-reject", *psi_full_reject_,
                                           "must be above 0 (0 % would reject every request)"));
    }
    p.psi_full_reject_bp = bp;
  }
  if (die_reserve_) p.die_reserve_bytes = parse_bytes_arg("--die-reserve", *die_reserve_);
  if (load_spike_) p.load_spike_bytes = parse_bytes_arg("--load-spike", *load_spike_);
  if (ladder_disable_) p.ladder_disabled = true;
  return p;
}

}  // namespace pnmem_cli
