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
// Hysteresis (DESIGN.md "Levels flap"): a higher level is published on the first
// sample that shows it; a lower one only after the raw level stayed below the
// published one for `step_down_dwell` (a clock that goes back restarts the
// dwell). A dwell of 0 is exactly the seed.
//
// Poll cadence: `poll_interval` (250 ms, the seed's PN_MEMWATCH_POLL_MS) at OK,
// `pressure_poll_interval` at WATCH or worse. A sampler that can wait for events
// (Linux PSI triggers, see host_sample.hpp) is waited through, and an event
// takes a fresh sample at once: a wake-up must never act on stale numbers.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "pnmem/host_sample.hpp"
#include "pnmem/level.hpp"
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

// A published level change, delivered to subscribers in publication order.
struct level_change {
  mem_level from;
  mem_level to;
  mem_state state;  // the snapshot that carried the change
};

enum class set_die_status : std::uint8_t {
  ok,
  die_out_of_range,  // die id < 0 or >= max_dies: nothing changed
};

constexpr std::string_view to_string(set_die_status s) noexcept {
  return s == set_die_status::ok ? "ok" : "die_out_of_range";
}

// Hysteresis on its own, so it is testable without a watcher. Not thread-safe:
// the watcher calls it under its write mutex.
class level_hysteresis {
 public:
  explicit level_hysteresis(std::chrono::nanoseconds dwell) noexcept : dwell_(dwell) {}

  // The level to publish for a raw level observed at `now_ns`.
  mem_level update(mem_level raw, std::int64_t now_ns) noexcept {
    if (raw >= published_) {
      published_ = raw;
      below_ = false;
      return published_;
    }
    if (dwell_.count() <= 0) {
      published_ = raw;
      return published_;
    }
    if (!below_) {
      below_ = true;
      below_since_ns_ = now_ns;
    } else {
      // A clock that went backwards restarts the dwell from now: the jump never
      // counts as time waited, and the level is not held for as long as the jump
      // was (hours, for a wall clock set back) either.
      if (now_ns < below_since_ns_) below_since_ns_ = now_ns;
      // Unsigned: the difference of any two int64 times, with no overflow.
      const std::uint64_t waited = static_cast<std::uint64_t>(now_ns) - static_cast<std::uint64_t>(below_since_ns_);
      if (waited >= static_cast<std::uint64_t>(dwell_.count())) {
        published_ = raw;
        below_ = false;
      }
    }
    return published_;
  }

  mem_level published() const noexcept { return published_; }

 private:
  std::chrono::nanoseconds dwell_;
  mem_level published_ = mem_level::ok;
  bool below_ = false;              // raw level has been below published_ ...
  std::int64_t below_since_ns_ = 0;  // ... since this time
};

template <host_sampler Sampler, class Clock = std::chrono::steady_clock>
class watcher {
 public:
  using subscriber = std::function<void(const level_change&)>;
  using subscription_id = std::uint64_t;

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
  bool start() {
    std::lock_guard<std::mutex> life(lifecycle_mu_);
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
  void stop() {
    std::lock_guard<std::mutex> life(lifecycle_mu_);
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lk(wait_mu_);
      stop_requested_.store(true, std::memory_order_relaxed);
    }
    wait_cv_.notify_all();
    if constexpr (event_sampler<Sampler>) sampler_.interrupt();
    thread_.join();
    running_.store(false, std::memory_order_release);
  }

  bool running() const noexcept { return running_.load(std::memory_order_acquire); }

  // Samples now (any thread) and publishes.
  void poll_now() {
    {
      // Sampling happens outside the write lock: a slow /proc read never delays set_die.
      std::lock_guard<std::mutex> sample_lock(sample_mu_);
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
    deliver_changes();
  }

  mem_state read() const noexcept { return published_.read(); }
  bool try_read(mem_state& out) const noexcept { return published_.try_read(out); }

  // The seed's pn_memwatch_set_die: merge one die's numbers, re-derive, publish.
  // `retiring_bytes`: released by the caller but still waiting for in-flight work
  // (reported apart from free; DESIGN.md "memory pending free is not free").
  [[nodiscard]] set_die_status set_die(int die, std::uint64_t free_bytes, std::uint64_t budget_bytes,
                                       std::uint64_t used_bytes, std::uint64_t retiring_bytes = 0) {
    if (die < 0 || die >= max_dies) return set_die_status::die_out_of_range;
    publish([&](mem_state& s) {
      const auto i = static_cast<std::size_t>(die);
      s.per_die_free[i] = free_bytes;
      s.per_die_budget[i] = budget_bytes;
      s.per_die_used[i] = used_bytes;
      s.per_die_retiring[i] = retiring_bytes;
      if (s.n_dies < die + 1) s.n_dies = die + 1;
    });
    return set_die_status::ok;
  }

  // Calls `fn` for every published level change, on the thread that published it,
  // with no lock of the watcher held (so it may call read(), set_die() or poll_now()).
  // Changes are delivered one at a time, in publication order.
  subscription_id subscribe(subscriber fn) {
    std::lock_guard<std::mutex> lk(subs_mu_);
    const subscription_id id = ++last_subscription_;
    subs_.push_back({id, std::make_shared<subscriber>(std::move(fn))});
    return id;
  }

  // After this returns the subscriber is not called again, except for a call
  // already running on another thread.
  void unsubscribe(subscription_id id) {
    std::lock_guard<std::mutex> lk(subs_mu_);
    std::erase_if(subs_, [id](const auto& s) { return s.id == id; });
  }

  const watcher_options& options() const noexcept { return options_; }
  Sampler& sampler() noexcept { return sampler_; }

 private:
  struct subscription {
    subscription_id id;
    std::shared_ptr<subscriber> fn;
  };

  std::int64_t now_ns() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_.now().time_since_epoch()).count();
  }

  // The one write path: change the working state, derive, publish, queue a level
  // change (commit), then call the subscribers (deliver_changes).
  template <class Change>
  void publish(Change&& change) {
    commit(std::forward<Change>(change));
    deliver_changes();
  }

  template <class Change>
  void commit(Change&& change) {
    std::lock_guard<std::mutex> lk(write_mu_);
    std::forward<Change>(change)(working_);
    working_.sample_time_ns = now_ns();
    working_.raw_level = derive_level(working_, options_.policy);
    const mem_level before = working_.level;
    working_.level = hysteresis_.update(working_.raw_level, working_.sample_time_ns);
    ++working_.seq;
    published_.store(working_);
    if (working_.level != before) {
      std::lock_guard<std::mutex> q(changes_mu_);
      changes_.push_back(level_change{before, working_.level, working_});
    }
  }

  // Drains the change queue. One thread delivers at a time; a publish made from
  // inside a callback only queues, and the delivering thread picks it up.
  void deliver_changes() {
    for (;;) {
      level_change c;
      {
        std::lock_guard<std::mutex> q(changes_mu_);
        if (delivering_ || changes_.empty()) return;
        delivering_ = true;
        c = changes_.front();
        changes_.pop_front();
      }
      // Whatever a subscriber does (even throw), the next publisher can deliver.
      struct release {
        watcher* w;
        ~release() {
          std::lock_guard<std::mutex> q(w->changes_mu_);
          w->delivering_ = false;
        }
      } guard{this};
      std::vector<std::shared_ptr<subscriber>> targets;
      {
        std::lock_guard<std::mutex> lk(subs_mu_);
        for (const auto& s : subs_) targets.push_back(s.fn);
      }
      for (const auto& fn : targets) (*fn)(c);
    }
  }

  std::chrono::nanoseconds current_interval() const {
    return published_.read().level >= mem_level::watch ? options_.pressure_poll_interval : options_.poll_interval;
  }

  void run() {
    while (!stop_requested_.load(std::memory_order_relaxed)) {
      const std::chrono::nanoseconds interval = current_interval();
      if constexpr (event_sampler<Sampler>) {
        if (sampler_.wait_for(interval) == wake::interrupted &&
            stop_requested_.load(std::memory_order_relaxed)) {
          return;
        }
      } else {
        std::unique_lock<std::mutex> lk(wait_mu_);
        if (wait_cv_.wait_for(lk, interval, [this] { return stop_requested_.load(std::memory_order_relaxed); })) {
          return;
        }
      }
      poll_now();
    }
  }

  Sampler sampler_;
  const watcher_options options_;
  Clock clock_;

  std::mutex write_mu_;          // serialises writers (poll thread, set_die callers)
  mem_state working_{};          // the writers' copy, guarded by write_mu_
  level_hysteresis hysteresis_;  // guarded by write_mu_
  seqlock<mem_state> published_{mem_state{}};

  std::mutex sample_mu_;  // one sampler call at a time (poll thread and poll_now callers)

  std::mutex changes_mu_;
  std::deque<level_change> changes_;
  bool delivering_ = false;

  std::mutex subs_mu_;
  std::vector<subscription> subs_;
  subscription_id last_subscription_ = 0;

  std::mutex lifecycle_mu_;
  std::mutex wait_mu_;
  std::condition_variable wait_cv_;
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> running_{false};
  std::thread thread_;
};

}  // namespace pnmem
