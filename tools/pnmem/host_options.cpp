// tools/pnmem/host_options.cpp - the host-memory flags.
#include "host_options.hpp"

#include <sstream>

#include <CLI/CLI.hpp>

#include "arg_parsers.hpp"
#include "text_option.hpp"
#include "usage_error.hpp"

namespace pnmem_cli {

void host_options::add_to(CLI::App& app, bool required, bool with_psi) {
  add_text_option(app, "--host-total", total_,
                  "Host memory total (MemTotal or the container limit), e.g. 8GiB; 0 = not sampled")
      ->type_name("BYTES")
      ->required(required);
  add_text_option(app, "--host-avail", avail_, "Host memory available (MemAvailable), at most --host-total")
      ->type_name("BYTES")
      ->required(required);
  app.add_flag("--container", container_,
               "--host-total is a container's memory limit (cgroup memory.max), not a whole box's MemTotal: "
               "the container's reserve applies (max(min(1 GiB, limit/4), 15 % of the limit): 256 MiB of 1 GiB), "
               "as the watcher uses inside one");
  if (with_psi) {
    // An undescribed stall is mem_state's own default.
    std::ostringstream some_default;
    some_default << pnmem::mem_state{}.host_psi_some_avg10;
    std::ostringstream full_default;
    full_default << pnmem::mem_state{}.host_psi_full_avg10;
    add_text_option(app, "--psi-some", psi_some_,
                    "PSI memory 'some' avg10, percent 0..100 (default " + some_default.str() + ")")
        ->type_name("PCT");
    add_text_option(app, "--psi-full", psi_full_,
                    "PSI memory 'full' avg10, percent 0..100 (default " + full_default.str() + ")")
        ->type_name("PCT");
  }
}

bool host_options::given() const {
  if (total_.has_value() != avail_.has_value()) {
    throw usage_error("--host-total and --host-avail go together: give both or neither");
  }
  return total_.has_value();
}

void host_options::put(pnmem::mem_state& state) const {
  if (given()) {
    const std::uint64_t total = parse_bytes_arg("--host-total", *total_);
    const std::uint64_t avail = parse_bytes_arg("--host-avail", *avail_);
    if (avail > total) {
      throw usage_error(describe_bad_value("--host-avail", *avail_,
                                           "more than --host-total (" + std::to_string(total) + " bytes)"));
    }
    state.host_total_bytes = total;
    state.host_avail_bytes = avail;
    // The snapshot a sampler inside that container gives: the total is the cgroup's limit
    // (policy.hpp host_total_is_limit), so host_reserve_bytes(state) takes the container's rule.
    if (container_) state.cgroup_max_bytes = total;
  } else if (container_) {
    throw usage_error("--container: needs --host-total and --host-avail (the container's limit and what is available)");
  }
  if (psi_some_) state.host_psi_some_avg10 = parse_psi_arg("--psi-some", *psi_some_);
  if (psi_full_) state.host_psi_full_avg10 = parse_psi_arg("--psi-full", *psi_full_);
}

}  // namespace pnmem_cli
