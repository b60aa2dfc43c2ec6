// integration/c_global_state.hpp - the C ABI's one process-wide state.
//
// One watcher over the platform sampler (pnmem/platform_sampler.hpp), created on
// first need with the policy from the PN_* variables (bad values are logged
// through the sink and their defaults stay), the log sink, and the reserved
// admissions' ledger and handles. Internal to libpnmem_c.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "pnmem/detail/mutex.hpp"
#include "pnmem/detail/thread_annotations.hpp"
#include "pnmem/engine/host_ledger.hpp"
#include "pnmem/pnmem_c.h"
#include "pnmem/platform_sampler.hpp"
#include "pnmem/policy.hpp"
#include "pnmem/watcher.hpp"

namespace pnmem::c_abi {

using platform_watcher = watcher<platform_sampler>;

struct log_sink {
  pnmem_log_fn fn = nullptr;
  void* user = nullptr;
};

struct global_state {
  detail::mutex mu;  // guards creation, the sink, the policy, `pending`, and start/stop
  std::unique_ptr<platform_watcher> watcher PNMEM_GUARDED_BY(mu);
  pnmem::policy policy PNMEM_GUARDED_BY(mu) = default_policy;
  bool policy_loaded PNMEM_GUARDED_BY(mu) = false;
  log_sink sink PNMEM_GUARDED_BY(mu);
  std::vector<std::string> pending PNMEM_GUARDED_BY(mu);  // log lines load_policy() left for flush()
  // Reserved admissions (pnmem_admit_reserved): the ledger is read under mu (with
  // the watcher), the handles under res_mu; never both at once.
  host_ledger ledger;
  detail::mutex res_mu;
  std::unordered_map<pnmem_reservation, host_ledger::reservation> reservations PNMEM_GUARDED_BY(res_mu);
  pnmem_reservation next_reservation PNMEM_GUARDED_BY(res_mu) = 0;

  // Hands one line to the sink, outside mu (the sink may call back into pnmem).
  // What the sink throws goes to the caller: the entry point's boundary.
  void log(std::string_view line) PNMEM_EXCLUDES(mu);

  // Called with mu held. Bad PN_* values wait in `pending` for flush(), whichever
  // entry point loads the policy first.
  const pnmem::policy& load_policy() PNMEM_REQUIRES(mu);

  // Called with mu held: the watcher, created on first need (start, or a die fed
  // before start), without its thread.
  platform_watcher& ensure_watcher() PNMEM_REQUIRES(mu);

  // Logs what load_policy() left, outside the lock.
  void flush() PNMEM_EXCLUDES(mu);
};

// Never destroyed before the engine's last call: static storage, built on first use.
global_state& state();

// The live watcher as admit() and host_ledger::admit read it (running(), read()),
// taken under mu: admit()'s own fail-open path applies when no watcher runs.
struct live_watcher {
  const platform_watcher* w;
  bool running() const { return w != nullptr && w->running(); }
  mem_state read() const { return w != nullptr ? w->read() : mem_state{}; }
};

}  // namespace pnmem::c_abi
