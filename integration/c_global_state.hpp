// integration/c_global_state.hpp - the C ABI's one process-wide state.
//
// One watcher over the platform sampler (pnmem/platform_sampler.hpp), created once on
// first need (pnmem_watcher_start[_with], pnmem_set_die) with the settings from the PN_*
// variables (the policy, the cadence and dwell, the PSI source: config.hpp's process
// settings, read once; bad values are logged through the sink and their defaults stay),
// and never destroyed while the process runs; the log sink; the reservations' ledger and
// its C handles; and the C level subscriptions.
//
// Reads take no global lock. What is written once (the watcher, the policy) or rarely
// (the log sink) is published through an atomic pointer (store release, load
// acquire) to an object that is never destroyed before the process ends; the writers
// (creation, set_log_sink) keep a mutex among themselves. Locks, in the one order they
// may be taken (a thread holding one takes only those below it):
//
//   life_mu        creating the watcher, the first read of the policy, pending lines
//                  (start/stop themselves go through the watcher's own lifecycle lock)
//   sink_mu        set_log_sink (a leaf)
//   res_mu         the C reservation handles; then the ledger's own mutex
//                  (a handle's settle or cancel reaches the ledger under res_mu)
//   subs_mu        the C subscriptions (a leaf; never held while a callback runs)
//   shed_mu        the shed hook (a leaf; never held while the hook runs)
//   fleet_mu       the C gates alive and the engine's fleet numbers (then a gate's own lock)
//
// Internal to libpnmem_c.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "pnmem/detail/fork_guard.hpp"
#include "pnmem/detail/mutex.hpp"
#include "pnmem/detail/thread_annotations.hpp"
#include "pnmem/engine/backpressure_gate.hpp"
#include "pnmem/engine/counters.hpp"
#include "pnmem/engine/fleet_load.hpp"
#include "pnmem/engine/host_ledger.hpp"
#include "pnmem/engine/shed_hook.hpp"
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

// The watcher as admit() and host_ledger read it (running(), read()), from a pointer
// loaded once: no watcher is not running, and reads the empty snapshot (admit()'s own
// fail-open path applies).
struct live_watcher {
  const platform_watcher* w;
  bool running() const { return w != nullptr && w->running(); }
  mem_state read() const { return w != nullptr ? w->read() : mem_state{}; }
};

// One snapshot already read, as the ledger reads a watcher (pnmem_host_budget totals the
// pending bytes against the very snapshot it reports).
struct snapshot_view {
  const mem_state& s;
  bool running() const { return true; }
  mem_state read() const { return s; }
};

class global_state {
 public:
  // Takes the PN_* variables' errors (config.hpp take_env_errors) into the pending lines, so
  // they reach the sink (flush()) and no library default reports them elsewhere (stderr).
  global_state();
  global_state(const global_state&) = delete;
  global_state& operator=(const global_state&) = delete;
  ~global_state();

  // --- the watcher ---------------------------------------------------------------------
  // The watcher, or nullptr before it is created. Locks nothing.
  platform_watcher* watcher() const noexcept { return watcher_.load(std::memory_order_acquire); }
  // The watcher, created with the default options (and the environment's policy) if none
  // exists. Locks life_mu only the first time.
  platform_watcher& ensure_watcher() PNMEM_EXCLUDES(life_mu_);
  // The watcher created with `o` (its policy replaced by the environment's) over a sampler reading
  // under `root`, or, if one exists already, that one and whether it was created with the same
  // intervals, dwell and root.
  std::pair<platform_watcher*, bool> ensure_watcher(const watcher_options& o, const std::string& root)
      PNMEM_EXCLUDES(life_mu_);

  // --- the policy ----------------------------------------------------------------------
  // The environment's (config.hpp process_env_config(), whose errors the constructor took),
  // published by the first call under life_mu; afterwards locks nothing.
  const pnmem::policy& policy() PNMEM_EXCLUDES(life_mu_);
  // Logs the lines the policy's first read left, outside every lock. Locks nothing when
  // there are none.
  void flush() PNMEM_EXCLUDES(life_mu_);

  // An admission failed open. In a fork's child whose watcher has not been started there, logs once
  // (per fork) why: the poll thread did not come along (detail/fork_guard.hpp).
  void note_fail_open();

  // --- the log sink --------------------------------------------------------------------
  // Hands one line to the sink (no lock; the sink may call back into pnmem). What the
  // sink throws goes to the caller: the entry point's boundary.
  void log(std::string_view line) const;
  void set_sink(pnmem_log_fn fn, void* user) PNMEM_EXCLUDES(sink_mu_);

  // --- what the C calls count, for pnmem_metrics_text ------------------------------------
  // Request admissions (pnmem_admit, _reserved, _request: by verdict and reason, fail-open ones),
  // the ladder's clamps, the watcher's level changes and every C gate's slots. Relaxed atomics.
  engine_counters counters;

  // --- reservations --------------------------------------------------------------------
  host_ledger ledger;
  // Joins the box ledger once, when the watcher first starts (its sample names the memory cgroup that
  // scopes it): `ledger_option` is pnmem_watcher_options.ledger, nullopt for PN_LEDGER's. A segment
  // refused is one line through the sink; the ledger then counts this process's promises alone. Where
  // the platform has no box ledger (not Linux), nothing.
  void join_box(const std::optional<std::string>& ledger_option) PNMEM_EXCLUDES(life_mu_);
  // Keeps `held` under a new C handle (0 when it holds nothing); expires_ns: when the
  // ledger stops counting it (0 = never), after which the handle is forgotten too.
  pnmem_reservation keep(host_ledger::reservation held, std::int64_t expires_ns) PNMEM_EXCLUDES(res_mu_);
  void settle(pnmem_reservation id) PNMEM_EXCLUDES(res_mu_);
  void cancel(pnmem_reservation id) PNMEM_EXCLUDES(res_mu_);

  // --- level subscriptions ---------------------------------------------------------------
  pnmem_subscription subscribe(pnmem_level_fn fn, void* user) PNMEM_EXCLUDES(subs_mu_);
  void unsubscribe(pnmem_subscription id) PNMEM_EXCLUDES(subs_mu_);

  // --- the fleet gauges (pnmem_set_fleet_load) ---------------------------------------------------
  // Every C gate alive adds its queue, held slots and capacity to the engine's own numbers.
  void add_gate(const backpressure_gate* g) PNMEM_EXCLUDES(fleet_mu_);
  void remove_gate(const backpressure_gate* g) PNMEM_EXCLUDES(fleet_mu_);
  void set_fleet_load(const fleet_load& own) PNMEM_EXCLUDES(fleet_mu_);
  // The gauges now: the engine's numbers plus every C gate's; nullopt while neither was ever given.
  std::optional<fleet_load> fleet() PNMEM_EXCLUDES(fleet_mu_);

  // --- the shed hook (pnmem_set_shed_hook) ----------------------------------------------------
  // The process's one hook (fn NULL: none). Returns once a call of the previous one on another
  // thread has returned.
  void set_shed_hook(pnmem_free_fn fn, void* user) PNMEM_EXCLUDES(shed_mu_);
  // The bytes to free for the host bands to be back at WATCH, on the ledger's budget (what is
  // promised and credited counted): 0 at WATCH or better, not sampled, or with no watcher running.
  std::uint64_t shed_bytes() PNMEM_EXCLUDES(life_mu_);

 private:
  // fork() (pnmem/detail/fork_guard.hpp; rank c_state: after the watcher's locks, whose level
  // callbacks may take these, and before the ledger's): the handles and subscriptions are never
  // copied mid-change. In the child a C subscriber that was running on another thread is not any
  // more. life_mu and sink_mu are not taken (the registry's own mutex is taken under life_mu when the
  // watcher is created): a fork racing the watcher's creation or set_log_sink is not supported.
  void prepare_fork() noexcept PNMEM_NO_THREAD_SAFETY_ANALYSIS;
  void after_fork_parent() noexcept PNMEM_NO_THREAD_SAFETY_ANALYSIS;
  void after_fork_child() noexcept PNMEM_NO_THREAD_SAFETY_ANALYSIS;

  const pnmem::policy& load_policy() PNMEM_REQUIRES(life_mu_);
  platform_watcher& create_locked(watcher_options o, const std::string& root) PNMEM_REQUIRES(life_mu_);
  // Every level change of the watcher, to the C subscribers (the watcher's one subscriber).
  void dispatch(const level_change& c) noexcept PNMEM_EXCLUDES(subs_mu_);
  bool subscribed(pnmem_subscription id) const PNMEM_REQUIRES(subs_mu_);
  bool running_elsewhere(pnmem_subscription id) const PNMEM_REQUIRES(subs_mu_);
  void sweep_expired() PNMEM_REQUIRES(res_mu_);
  // The shed hook's call, from shed_on_every_sample (engine/shed_hook.hpp) on a sample below WATCH: the
  // bytes it freed (0 with no hook set), counted.
  std::uint64_t call_shed_hook(std::uint64_t want) noexcept PNMEM_EXCLUDES(shed_mu_);

  // The policy: written once under life_mu, then published; read through policy_.
  detail::mutex life_mu_;
  pnmem::policy policy_storage_ = default_policy;
  std::atomic<const pnmem::policy*> policy_{nullptr};
  std::vector<std::string> pending_ PNMEM_GUARDED_BY(life_mu_);  // the environment's errors, for flush()
  std::atomic<bool> has_pending_{false};
  std::string root_ PNMEM_GUARDED_BY(life_mu_) = "/";  // the watcher's sampler root, once created
  std::atomic<std::uint64_t> fork_noted_{0};  // the fork generation note_fail_open last logged
  std::atomic<bool> box_tried_{false};         // join_box ran (a fork's child rejoins through the ledger)

  // The sink: each set_sink adds one (never freed before the process ends: a reader may
  // still be calling the one it loaded) and publishes it.
  detail::mutex sink_mu_ PNMEM_ACQUIRED_AFTER(life_mu_);
  std::vector<std::unique_ptr<log_sink>> sinks_ PNMEM_GUARDED_BY(sink_mu_);
  std::atomic<const log_sink*> sink_{nullptr};

  // C reservation handles (pnmem_admit_reserved, pnmem_reserve_bytes).
  struct handle {
    host_ledger::reservation held;
    std::optional<std::multimap<std::int64_t, pnmem_reservation>::iterator> expiry;
  };
  detail::mutex res_mu_ PNMEM_ACQUIRED_AFTER(sink_mu_);
  std::unordered_map<pnmem_reservation, handle> handles_ PNMEM_GUARDED_BY(res_mu_);
  std::multimap<std::int64_t, pnmem_reservation> expiries_ PNMEM_GUARDED_BY(res_mu_);
  pnmem_reservation last_handle_ PNMEM_GUARDED_BY(res_mu_) = 0;

  // C level subscriptions. dispatch() calls one at a time (change_delivery delivers one
  // change at a time) and records it in running_ while it runs, so unsubscribe() can wait
  // for it.
  struct c_subscriber {
    pnmem_subscription id;
    pnmem_level_fn fn;
    void* user;
  };
  detail::mutex subs_mu_ PNMEM_ACQUIRED_AFTER(res_mu_);
  std::condition_variable subs_cv_;
  std::vector<c_subscriber> subs_ PNMEM_GUARDED_BY(subs_mu_);
  std::vector<std::pair<pnmem_subscription, std::thread::id>> running_ PNMEM_GUARDED_BY(subs_mu_);
  pnmem_subscription last_sub_ PNMEM_GUARDED_BY(subs_mu_) = 0;

  // The fleet gauges: the C gates alive, and the engine's numbers once given.
  detail::mutex fleet_mu_ PNMEM_ACQUIRED_AFTER(subs_mu_);
  std::vector<const backpressure_gate*> gates_ PNMEM_GUARDED_BY(fleet_mu_);
  std::optional<fleet_load> own_fleet_ PNMEM_GUARDED_BY(fleet_mu_);

  // The shed hook, and the thread calling it now (none: a default id), so set_shed_hook can wait for it.
  detail::mutex shed_mu_ PNMEM_ACQUIRED_AFTER(subs_mu_);
  std::condition_variable shed_cv_;
  pnmem_free_fn shed_fn_ PNMEM_GUARDED_BY(shed_mu_) = nullptr;
  void* shed_user_ PNMEM_GUARDED_BY(shed_mu_) = nullptr;
  std::thread::id shed_running_ PNMEM_GUARDED_BY(shed_mu_);

  // Declared last but one: destroyed right after the shed subscription (its thread stops while what
  // dispatch() uses still exists).
  std::unique_ptr<platform_watcher> owner_ PNMEM_GUARDED_BY(life_mu_);
  std::atomic<platform_watcher*> watcher_{nullptr};
  // The watcher's every-sample subscription for the shed hook: ended first, while the watcher exists.
  scoped_subscription shed_sub_ PNMEM_GUARDED_BY(life_mu_);
};

// Never destroyed before the engine's last call: static storage, built on first use.
global_state& state();

}  // namespace pnmem::c_abi
