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
// `pressure_poll_interval` at WATCH or worse. A sampler that can wait for events
// (Linux PSI triggers, see host_sample.hpp) is waited through, and an event
// takes a fresh sample at once: a wake-up must never act on stale numbers.
//
// Locks, in the one order they may be taken (a thread holding one takes only
// those below it; clang's -Wthread-safety-beta checks the order in CI):
//
//   lifecycle_mu_  start() and stop(); start() takes the first sample under it
//   sample_mu_     one sampler call at a time (the poll thread, poll_now callers)
//   write_mu_      the writers' working copy and the hysteresis (poll, set_die);
//                  published_ is stored only under it (readers take no lock)
//   changes_       change_delivery's own mutex: a leaf, taken to queue a change
//                  under write_mu_ and on its own to deliver
//   wait_mu_       the poll thread's sleep (stop() takes it under lifecycle_mu_)
//
// No lock is held while a subscriber runs, except lifecycle_mu_ during the first
// sample of start() (so a subscriber must not call start() or stop()).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <system_error>
#include <thread>
#include <utility>

#include "pnmem/change_delivery.hpp"
#include "pnmem/clock_ns.hpp"
#include "pnmem/detail/mutex.hpp"
#include "pnmem/detail/thread_annotations.hpp"
#include "pnmem/host_sample.hpp"
#include "pnmem/level.hpp"
#include "pnmem/level_hysteresis.hpp"
#include "pnmem/mem_level.hpp"
#include "pnmem/mem_state.hpp"
#include "pnmem/policy.hpp"
#include "pnmem/seqlock.hpp"

namespace pnmem {

struct watcher_options {
  std::chrono::milliseconds poll_interval{250};           // at OK
  std::chrono::milliseconds pressure_poll_interval{100};  // at WATCH or worse
  std::chrono::milliseconds step_down_dwell{0};           // 0 = step down at once (the seed)
  pnmem::policy policy = default_policy;
};

enum class set_die_status : std::uint8_t {
  ok,
  die_out_of_range,  // die id < 0 or >= max_dies: nothing changed
};

constexpr std::string_view to_string(set_die_status s) noexcept {
  return s == set_die_status::ok ? "ok" : "die_out_of_range";
}

template <host_sampler Sampler, class Clock = std::chrono::steady_clock>
class watcher {
 public:
  using subscriber = change_delivery::subscriber;
  using subscription_id = change_delivery::subscription_id;

  explicit watcher(Sampler sampler, watcher_options options = {}, Clock clock = Clock{})
      : sampler_(std::move(sampler)),
        options_(options),
        clock_(std::move(clock)),
        hysteresis_(options.step_down_dwell) {}

  watcher(const watcher&) = delete;
  watcher& operator=(const watcher&) = delete;

  ~watcher() { stop(); }

  // Idempotent. Takes one sample synchronously before the thread starts, so the
  // first read() after start() returns real numbers. False if the thread could
  // not be created (the sample is still published).
  bool start() PNMEM_EXCLUDES(lifecycle_mu_) {
    detail::lock_guard life(lifecycle_mu_);
    if (thread_.joinable()) return true;
    poll_now();
    stop_requested_.store(false, std::memory_order_relaxed);
    try {
      thread_ = std::thread([this] { run(); });
    } catch (const std::system_error&) {
      return false;
    }
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
      commit([&](mem_state& s) {
        assign_host(s, h);
        s.host_read_ns = read_ns;
      });
    }
    // Subscribers are called with sample_mu_ released: one that blocks must not
    // hold up other poll_now() callers, and one that calls poll_now() must not
    // deadlock on its own thread.
    changes_.deliver();
  }

  mem_state read() const noexcept { return published_.read(); }
  bool try_read(mem_state& out) const noexcept { return published_.try_read(out); }

  // The seed's pn_memwatch_set_die: merge one die's numbers, re-derive, publish.
  // `retiring_bytes`: released by the caller but still waiting for in-flight work
  // (reported apart from free: memory pending free is not free).
  [[nodiscard]] set_die_status set_die(int die, std::uint64_t free_bytes, std::uint64_t budget_bytes,
                                       std::uint64_t used_bytes, std::uint64_t retiring_bytes = 0)
      PNMEM_EXCLUDES(write_mu_) {
    if (die < 0 || die >= max_dies) return set_die_status::die_out_of_range;
    publish([&](mem_state& s) {
      const auto i = static_cast<std::size_t>(die);
      s.per_die_free_bytes[i] = free_bytes;
      s.per_die_budget_bytes[i] = budget_bytes;
      s.per_die_used_bytes[i] = used_bytes;
      s.per_die_retiring_bytes[i] = retiring_bytes;
      if (s.n_dies < die + 1) s.n_dies = die + 1;
    });
    return set_die_status::ok;
  }

  // Calls `fn` for every published level change, on the thread that published it,
  // with no lock of the watcher held (so it may call read(), set_die() or poll_now()).
  // Changes are delivered one at a time, in publication order.
  subscription_id subscribe(subscriber fn) { return changes_.subscribe(std::move(fn)); }

  // After this returns the subscriber is not called again, except for a call
  // already running on another thread.
  void unsubscribe(subscription_id id) { changes_.unsubscribe(id); }

  const watcher_options& options() const noexcept { return options_; }
  Sampler& sampler() noexcept { return sampler_; }

 private:
  std::int64_t now_ns() const { return to_ns(clock_.now()); }

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
    ++working_.seq;
    published_.store(working_);
    if (working_.level != before) changes_.queue(level_change{before, working_.level, working_});
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

  detail::mutex write_mu_ PNMEM_ACQUIRED_AFTER(sample_mu_);
  mem_state working_ PNMEM_GUARDED_BY(write_mu_){};
  level_hysteresis hysteresis_ PNMEM_GUARDED_BY(write_mu_);
  seqlock<mem_state> published_{mem_state{}};  // stored under write_mu_; read with no lock

  change_delivery changes_;

  detail::mutex wait_mu_ PNMEM_ACQUIRED_AFTER(lifecycle_mu_);
  std::condition_variable wait_cv_;
  std::atomic<bool> stop_requested_{false};  // set under wait_mu_, so the sleeper cannot miss it
};

}  // namespace pnmem
