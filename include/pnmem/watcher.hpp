// pnmem/watcher.hpp - the sampling loop: sample, merge die numbers, derive the level, publish.
//
// The seed's pn_memwatch as a class template, generic over its sampler and its
// clock so tests drive it with fakes and never sleep:
//
//   pnmem::watcher<pnmem::linux_sampler> w{pnmem::linux_sampler{}};
//   w.start();                                     // one synchronous sample, then the thread
//   w.set_die(0, free_bytes, budget_bytes, used);  // from the GPU side, any thread
//   pnmem::mem_state s = w.read();                 // any thread, never blocks the writer
//   auto sub = w.subscribe([](pnmem::level_change c) { ... });
//
// Data flows one way: sampler -> merge -> level (hysteresis) -> seqlock -> readers.
// Two kinds of writer exist (the poll thread and every set_die caller, as the
// seed's g_write_lock shows): they serialise on a mutex that readers never touch.
//
// Hysteresis is level_hysteresis.hpp; delivery of level changes to subscribers
// is change_delivery.hpp. This header is the loop and its lifecycle.
//
// Poll cadence: `poll_interval` (250 ms, the seed's PN_MEMWATCH_POLL_MS) at OK,
// `pressure_poll_interval` (100 ms, PN_PRESSURE_POLL_MS) at WATCH or worse; watcher_options{}
// takes both, the dwell and the policy from the PN_* variables (config.hpp). A sampler
// that can wait for events (Linux PSI triggers, see host_sample.hpp) is waited through, and an event
// takes a fresh sample at once: a wake-up must never act on stale numbers.
//
// Locks, in the one order they may be taken (a thread holding one takes only
// those below it; clang's -Wthread-safety-beta checks the order in CI):
//
//   lifecycle_mu_  start() and stop(); start() takes the first sample under it
//   sample_mu_     one sampler call at a time (the poll thread, poll_now callers),
//                  the PSI window and the die sources' calls
//   sources_mu_    the list of die sources: a leaf, copied under sample_mu_
//   write_mu_      the writers' working copy and the hysteresis (poll, set_die);
//                  published_ is stored only under it (readers take no lock)
//   changes_       change_delivery's own mutex: a leaf, taken to queue a change
//                  under write_mu_ and on its own to deliver
//   wait_mu_       the poll thread's sleep (stop() takes it under lifecycle_mu_)
//
// No lock is held while a subscriber runs, except lifecycle_mu_ during the first
// sample of start() (so a subscriber must not call start() or stop()). A die source
// runs under sample_mu_ (so it must not call poll_now()).
//
// fork(): all of them are taken across it, in this order (detail/fork_guard.hpp); in the
// child the poll thread is gone, running() is false and start() starts a new one.
//
// PSI: the sampler's total= counter is kept over policy::psi_full_window_ms
// (psi_window.hpp) to give the snapshot's host_psi_full_sustained, what confirms
// a stall as CRITICAL (level.hpp).
#pragma once

#include "pnmem/detail/cxx.hpp"  // PNMEM_HAS_*: which of the standard headers below this C++ has

#if !PNMEM_HAS_ERASE_IF
#include <algorithm>
#endif
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "pnmem/avail_trend.hpp"
#include "pnmem/change_delivery.hpp"
#include "pnmem/clock_ns.hpp"
#include "pnmem/config.hpp"
#include "pnmem/detail/fork_guard.hpp"
#include "pnmem/detail/mutex.hpp"
#include "pnmem/detail/thread_annotations.hpp"
#include "pnmem/host_sample.hpp"
#include "pnmem/level.hpp"
#include "pnmem/level_hysteresis.hpp"
#include "pnmem/live_state.hpp"
#include "pnmem/mem_level.hpp"
#include "pnmem/mem_state.hpp"
#include "pnmem/policy.hpp"
#include "pnmem/psi_window.hpp"
#include "pnmem/seqlock.hpp"

namespace pnmem {

// The options a watcher runs with. A field the engine does not set comes from the process's
// PN_* variables (config.hpp process_env_settings(): read once, their errors reported once), whose
// defaults are the seed's: watcher_options{} is the environment's options, and
// watcher_options{.policy = p} the environment's cadence with the engine's policy. Reading the
// environment is not a constant expression: a constant (a test's, a static_assert's) names all four
// fields, or copies seed_watcher_options, which never reads it.
struct watcher_options {
  std::chrono::milliseconds poll_interval = process_env_settings().poll_interval;  // at OK (PN_MEMWATCH_POLL_MS)
  // At WATCH or worse (PN_PRESSURE_POLL_MS).
  std::chrono::milliseconds pressure_poll_interval = process_env_settings().pressure_poll_interval;
  // 0 = step down at once (the seed; PN_STEP_DOWN_DWELL_MS).
  std::chrono::milliseconds step_down_dwell = process_env_settings().step_down_dwell;
  pnmem::policy policy = process_policy();
};

// The options from a given set of settings (settings_from_env's, for instance).
constexpr watcher_options to_watcher_options(const env_settings& s) noexcept {
  return watcher_options{s.poll_interval, s.pressure_poll_interval, s.step_down_dwell, s.policy};
}

// The seed's options, whatever the environment says: 250 ms, 100 ms, no dwell, the seed's policy.
inline constexpr watcher_options seed_watcher_options = to_watcher_options(default_env_settings);

enum class set_die_status : std::uint8_t {
  ok,
  die_out_of_range,  // die id < 0 or >= max_dies: nothing changed
};

constexpr std::string_view to_string(set_die_status s) noexcept {
  return s == set_die_status::ok ? "ok" : "die_out_of_range";
}

#if PNMEM_HAS_CONCEPTS
template <host_sampler Sampler, class Clock = std::chrono::steady_clock>
#else
template <class Sampler, class Clock = std::chrono::steady_clock>
#endif
class watcher {
#if !PNMEM_HAS_CONCEPTS
  static_assert(host_sampler<Sampler>, "watcher<Sampler>: Sampler must have host_sample sample() (host_sample.hpp)");
#endif

 public:
  using subscriber = change_delivery::subscriber;
  using subscription_id = change_delivery::subscription_id;

  explicit watcher(Sampler sampler, watcher_options options = {}, Clock clock = Clock{})
      : sampler_(std::move(sampler)),
        options_(options),
        clock_(std::move(clock)),
        hysteresis_(options.step_down_dwell) {
    detail::fork_registry::get().add(this, detail::fork_registry::rank_watcher,
                                     {[](void* w) noexcept { static_cast<watcher*>(w)->prepare_fork(); },
                                      [](void* w) noexcept { static_cast<watcher*>(w)->unlock_after_fork(false); },
                                      [](void* w) noexcept { static_cast<watcher*>(w)->after_fork_child(); }});
  }

  watcher(const watcher&) = delete;
  watcher& operator=(const watcher&) = delete;

  ~watcher() {
    stop();
    detail::fork_registry::get().remove(this);
  }

  // Idempotent. Takes one sample synchronously before the thread starts, so the
  // first read() after start() returns real numbers. False if the thread could
  // not be created (the sample is still published).
  bool start() PNMEM_EXCLUDES(lifecycle_mu_) {
    detail::lock_guard life(lifecycle_mu_);
    if (thread_.joinable()) return true;
    poll_now();
    stop_requested_.store(false, std::memory_order_relaxed);
#if PNMEM_HAS_EXCEPTIONS
    try {
      thread_ = std::thread([this] { run(); });
    } catch (const std::system_error&) {
      return false;
    }
#else
    thread_ = std::thread([this] { run(); });  // -fno-exceptions: a thread that cannot start aborts
#endif
    running_.store(true, std::memory_order_release);
    return true;
  }

  // Joins the thread. Idempotent; the last snapshot stays readable.
  void stop() PNMEM_EXCLUDES(lifecycle_mu_) {
    detail::lock_guard life(lifecycle_mu_);
    if (!thread_.joinable()) return;
    {
      detail::lock_guard lk(wait_mu_);
      stop_requested_.store(true, std::memory_order_relaxed);
    }
    wait_cv_.notify_all();
    if constexpr (event_sampler<Sampler>) sampler_.interrupt();
    thread_.join();
    running_.store(false, std::memory_order_release);
  }

  bool running() const noexcept { return running_.load(std::memory_order_acquire); }

  // Samples now (any thread) and publishes.
  void poll_now() PNMEM_EXCLUDES(sample_mu_, write_mu_) {
    {
      // Sampling happens outside the write lock: a slow /proc read never delays set_die.
      detail::lock_guard sample_lock(sample_mu_);
      const std::int64_t read_ns = now_ns();  // before the read: later allocations are not in it
      const host_sample h = sampler_.sample();
      const double sustained = psi_full_.update(read_ns, h.psi_full_total_us, h.psi_full_total_known,
                                                std::int64_t{options_.policy.psi_full_window_ms} * 1000000);
      const double trend = avail_trend_.update(read_ns, h.avail_bytes, h.total_bytes > 0);
      const std::int64_t dies_read_ns = now_ns();  // before the die sources query their dies
      const std::vector<die_update> dies = poll_die_sources(dies_read_ns);
      commit([&](mem_state& s) {
        assign_host(s, h);
        s.host_psi_full_sustained = sustained;
        s.host_avail_trend = trend;
        s.host_read_ns = read_ns;
        for (const die_update& d : dies) apply_die(s, d);
      });
    }
    // Subscribers are called with sample_mu_ released: one that blocks must not
    // hold up other poll_now() callers, and one that calls poll_now() must not
    // deadlock on its own thread.
    changes_.deliver();
  }

  mem_state read() const noexcept { return published_.read(); }
  // read()'s live part only (live_state.hpp): the dead die slots and the provenance read as zero;
  // what a decision needs. The second refreshes `live` in place, copying only the live words (the
  // fast one); `live` must be a live snapshot already (from read_live, or mem_state{}).
  mem_state read_live() const noexcept { return pnmem::read_live(published_); }
  void read_live(mem_state& live) const noexcept { pnmem::read_live(published_, live); }
  // read_live(live) unless `live` is already this watcher's newest publication: `version` says
  // which publication of which watcher `live` holds (start from live_version{} and a live
  // snapshot); when it is this watcher's current one nothing is copied (one atomic load).
  // True when it copied. What pnmem::admit does (with_live_snapshot).
  bool refresh_live(mem_state& live, live_version& version) const noexcept {
    if (version.source != this || version.instance != instance_) version = {this, instance_, seqlock_no_version};
    return pnmem::refresh_live(published_, live, version.seq);
  }
  bool try_read(mem_state& out) const noexcept { return published_.try_read(out); }

  // The seed's pn_memwatch_set_die: merge one die's numbers, re-derive, publish.
  // `retiring_bytes`: released by the caller but still waiting for in-flight work
  // (reported apart from free: memory pending free is not free).
  [[nodiscard]] set_die_status set_die(int die, std::uint64_t free_bytes, std::uint64_t budget_bytes,
                                       std::uint64_t used_bytes, std::uint64_t retiring_bytes = 0)
      PNMEM_EXCLUDES(write_mu_) {
    if (die < 0 || die >= max_dies) return set_die_status::die_out_of_range;
    const std::int64_t read_ns = now_ns();  // the caller read the die just before: as near as we know
    publish([&](mem_state& s) { apply_die(s, {die, free_bytes, budget_bytes, used_bytes, retiring_bytes, read_ns}); });
    return set_die_status::ok;
  }

  // Calls `fn` for every published level change (or, with delivery::every_sample, every
  // published snapshot), on the thread that published it, with no lock of the watcher held
  // (so it may call read(), set_die() or poll_now()). Delivered one at a time, in publication
  // order.
  subscription_id subscribe(subscriber fn, delivery d = delivery::level_changes) {
    return changes_.subscribe(std::move(fn), d);
  }

  // A die source: called on every sample (the poll thread's, and poll_now()'s), after the host
  // is read and before the snapshot is published, with a sink taking set_die's arguments; the
  // dies it reports land in the same snapshot as the host numbers (one publish, one level).
  // What the CUDA die feed registers (pnmem/cuda/die_feed.hpp feed_every_sample), so dies are
  // polled on each watcher tick without an engine thread. Called under the sampling lock, one
  // sample at a time; it must not call poll_now(). A die id outside [0, max_dies) is ignored.
  using die_sink = std::function<void(int die, std::uint64_t free_bytes, std::uint64_t budget_bytes,
                                      std::uint64_t used_bytes, std::uint64_t retiring_bytes)>;
  using die_source = std::function<void(const die_sink&)>;

  subscription_id add_die_source(die_source fn) PNMEM_EXCLUDES(sources_mu_) {
    auto shared = std::make_shared<die_source>(std::move(fn));
    detail::lock_guard lk(sources_mu_);
    sources_.push_back({++last_source_id_, std::move(shared)});
    return last_source_id_;
  }
  // After this returns the source is not called again, except by a sample already running.
  void remove_die_source(subscription_id id) PNMEM_EXCLUDES(sources_mu_) {
    detail::lock_guard lk(sources_mu_);
#if PNMEM_HAS_ERASE_IF
    std::erase_if(sources_, [id](const source_entry& e) { return e.id == id; });
#else
    sources_.erase(std::remove_if(sources_.begin(), sources_.end(), [id](const source_entry& e) { return e.id == id; }),
                   sources_.end());
#endif
  }

  // After this returns the subscriber is not called again, except for a call
  // already running on another thread.
  void unsubscribe(subscription_id id) { changes_.unsubscribe(id); }

  const watcher_options& options() const noexcept { return options_; }
  Sampler& sampler() noexcept { return sampler_; }
  // The watcher's clock now, in nanoseconds: the clock of its snapshots' times (sample_time_ns,
  // host_read_ns, level_step_down_ns).
  std::int64_t now_ns() const { return to_ns(clock_.now()); }

 private:
  // fork() (detail/fork_guard.hpp): every lock taken across it, in the watcher's own order, so the
  // child's copy never holds a half-made sample or a half-published snapshot. In the child the poll
  // thread is gone: its std::thread is abandoned (not joined: there is nothing to join, and not
  // destroyed: a joinable one would terminate), running() turns false, and start() starts a new one.
  // The last snapshot stays readable there, as after stop().
  void prepare_fork() noexcept PNMEM_NO_THREAD_SAFETY_ANALYSIS {
    lifecycle_mu_.lock();  // the order above
    sample_mu_.lock();
    sources_mu_.lock();
    write_mu_.lock();
    changes_.lock_for_fork();
    wait_mu_.lock();
  }
  void after_fork_child() noexcept PNMEM_NO_THREAD_SAFETY_ANALYSIS {
    if (thread_.joinable()) {
      // Leaked on purpose, once per fork: a std::thread whose thread exists only in the parent.
      static_cast<void>(new (std::nothrow) std::thread(std::move(thread_)));
      if (thread_.joinable()) thread_.detach();  // no memory for the leak: detaching is the lesser harm
    }
    running_.store(false, std::memory_order_release);
    stop_requested_.store(false, std::memory_order_relaxed);
    unlock_after_fork(true);
  }
  void unlock_after_fork(bool in_child) noexcept PNMEM_NO_THREAD_SAFETY_ANALYSIS {
    wait_mu_.unlock();
    changes_.unlock_after_fork(in_child);
    write_mu_.unlock();
    sources_mu_.unlock();
    sample_mu_.unlock();
    lifecycle_mu_.unlock();
  }

  struct die_update {
    int die;
    std::uint64_t free_bytes, budget_bytes, used_bytes, retiring_bytes;
    std::int64_t read_ns;
  };
  struct source_entry {
    subscription_id id;
    std::shared_ptr<die_source> fn;
  };

  static void apply_die(mem_state& s, const die_update& d) noexcept {
    const auto i = static_cast<std::size_t>(d.die);
    s.per_die_free_bytes[i] = d.free_bytes;
    s.per_die_budget_bytes[i] = d.budget_bytes;
    s.per_die_used_bytes[i] = d.used_bytes;
    s.per_die_retiring_bytes[i] = d.retiring_bytes;
    s.per_die_read_ns[i] = d.read_ns;
    if (s.n_dies < d.die + 1) s.n_dies = d.die + 1;
  }

  // The die sources' numbers for this sample (called under sample_mu_: one sample's sources at a time).
  std::vector<die_update> poll_die_sources(std::int64_t read_ns) PNMEM_REQUIRES(sample_mu_) PNMEM_EXCLUDES(sources_mu_) {
    std::vector<die_update> out;
    std::vector<std::shared_ptr<die_source>> now;
    {
      detail::lock_guard lk(sources_mu_);
      if (sources_.empty()) return out;
      for (const source_entry& e : sources_) now.push_back(e.fn);
    }
    const die_sink sink = [&out, read_ns](int die, std::uint64_t f, std::uint64_t b, std::uint64_t u, std::uint64_t r) {
      if (die >= 0 && die < max_dies) out.push_back({die, f, b, u, r, read_ns});
    };
    for (const auto& fn : now) (*fn)(sink);
    return out;
  }

  // The one write path: change the working state, derive, publish, queue a level
  // change (commit), then call the subscribers (changes_.deliver()).
  template <class Change>
  void publish(Change&& change) PNMEM_EXCLUDES(write_mu_) {
    commit(std::forward<Change>(change));
    changes_.deliver();
  }

  template <class Change>
  void commit(Change&& change) PNMEM_EXCLUDES(write_mu_) {
    detail::lock_guard lk(write_mu_);
    std::forward<Change>(change)(working_);
    working_.sample_time_ns = now_ns();
    working_.raw_level = derive_level(working_, options_.policy);
    const mem_level before = working_.level;
    working_.level = hysteresis_.update(working_.raw_level, working_.sample_time_ns);
    working_.level_step_down_ns = hysteresis_.step_down_at_ns();
    if (working_.level != before || working_.level_since_ns == 0) working_.level_since_ns = working_.sample_time_ns;
    ++working_.seq;
    published_.store(working_);
    if (working_.level != before || changes_.wants_every_sample()) {
      changes_.queue(level_change{before, working_.level, working_});
    }
  }

  std::chrono::nanoseconds current_interval() const {
    return published_.read().level >= mem_level::watch ? options_.pressure_poll_interval : options_.poll_interval;
  }

  void run() PNMEM_EXCLUDES(wait_mu_) {
    while (!stop_requested_.load(std::memory_order_relaxed)) {
      const std::chrono::nanoseconds interval = current_interval();
      if constexpr (event_sampler<Sampler>) {
        if (sampler_.wait_for(interval) == wake::interrupted &&
            stop_requested_.load(std::memory_order_relaxed)) {
          return;
        }
      } else {
        detail::unique_lock lk(wait_mu_);
        const auto stopping = [this] { return stop_requested_.load(std::memory_order_relaxed); };
        if (wait_cv_.wait_for(lk.native(), interval, stopping)) return;
      }
      poll_now();
    }
  }

  // sample() only under sample_mu_; wait_for() and interrupt() are the event
  // sampler's calls that are safe beside it (host_sample.hpp).
  Sampler sampler_;
  const watcher_options options_;
  Clock clock_;

  detail::mutex lifecycle_mu_;
  std::thread thread_ PNMEM_GUARDED_BY(lifecycle_mu_);
  std::atomic<bool> running_{false};

  detail::mutex sample_mu_ PNMEM_ACQUIRED_AFTER(lifecycle_mu_);
  psi_window psi_full_ PNMEM_GUARDED_BY(sample_mu_);  // the full-stall rate over the policy's window
  avail_trend avail_trend_ PNMEM_GUARDED_BY(sample_mu_);  // how fast MemAvailable comes back

  detail::mutex sources_mu_ PNMEM_ACQUIRED_AFTER(sample_mu_);  // a leaf
  std::vector<source_entry> sources_ PNMEM_GUARDED_BY(sources_mu_);
  subscription_id last_source_id_ PNMEM_GUARDED_BY(sources_mu_) = 0;

  detail::mutex write_mu_ PNMEM_ACQUIRED_AFTER(sample_mu_);
  mem_state working_ PNMEM_GUARDED_BY(write_mu_){};
  level_hysteresis hysteresis_ PNMEM_GUARDED_BY(write_mu_);
  seqlock<mem_state> published_{mem_state{}};  // stored under write_mu_; read with no lock
  const std::uint64_t instance_ = detail::next_instance_id();  // refresh_live: which watcher a copy came from

  change_delivery changes_;

  detail::mutex wait_mu_ PNMEM_ACQUIRED_AFTER(lifecycle_mu_);
  std::condition_variable wait_cv_;
  std::atomic<bool> stop_requested_{false};  // set under wait_mu_, so the sleeper cannot miss it
};

}  // namespace pnmem
