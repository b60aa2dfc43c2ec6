// pnmem/engine/detail/backpressure_gate_impl.hpp - the lock, the FIFO and the rules of the gate.
//
// Implementation of backpressure_gate.hpp (read the rules there). Kept apart so
// that the public header reads as the API; engines include backpressure_gate.hpp.
//
// Locking: one mutex, mu_, guards every field; no user code runs under it.
// A waiter sleeps on its own condition variable (its node is on its stack), so
// granting a slot wakes exactly the waiter at the head.
#pragma once

#include "pnmem/detail/cxx.hpp"  // PNMEM_HAS_*: which of the standard headers below this C++ has

#include <chrono>
#include <condition_variable>
#include <cstddef>
#if PNMEM_HAS_STOP_TOKEN
#include <stop_token>
#endif
#include <utility>

#include "pnmem/admission.hpp"
#include "pnmem/config.hpp"
#include "pnmem/cost_model.hpp"
#include "pnmem/detail/mutex.hpp"
#include "pnmem/detail/thread_annotations.hpp"
#include "pnmem/engine/counters.hpp"
#include "pnmem/engine/gate_status.hpp"
#include "pnmem/ladder.hpp"
#include "pnmem/mem_level.hpp"
#include "pnmem/mem_state.hpp"
#include "pnmem/policy.hpp"

namespace pnmem {

// How a gate is built (backpressure_gate.hpp reads them).
struct gate_options {
  int max_slots = 1;             // the operator's slot ceiling (below 1: 1)
  std::size_t max_waiters = 64;  // bound on waiting acquirers (0: never wait)
  engine_counters* counters = nullptr;
  // Rung 2: the slot count follows the ladder (ladder_plan_for(level, {max_slots}).max_slots) on
  // every watcher sample from connect() on: the plan for the level now (max_slots at OK).
  // false: set_capacity() alone sets it.
  bool follow_ladder = true;
  // A hold's release re-checks admission of the request at the head of the queue (or of the denied
  // one) with this model and policy: the engine's own.
  model_cost model = seed_model_cost;
  pnmem::policy policy = process_policy();  // default: the PN_* variables' (config.hpp), read once
};

namespace detail {

// What cancels a waiting acquirer: std::stop_token. C++17 has none (detail/cxx.hpp): there the
// gate takes no token and this one is never stopped.
#if PNMEM_HAS_STOP_TOKEN
using gate_stop_token = std::stop_token;
#else
struct gate_stop_token {
  constexpr bool stop_requested() const noexcept { return false; }
};
#endif

// The shared part of the gate. The watcher's callback holds a weak_ptr to it,
// so a connection that outlives the gate is harmless.
class gate_core {
 public:
  struct waiter {
    std::condition_variable cv;
    bool done = false;
    gate_status result = gate_status::timed_out;
    waiter* prev = nullptr;
    waiter* next = nullptr;
    const request_spec* request = nullptr;  // what it will run, when the acquirer said (on its stack)
  };

  explicit gate_core(const gate_options& o)
      : configured_(o.max_slots < 1 ? 1 : o.max_slots),
        capacity_(configured_),
        follow_ladder_(o.follow_ladder),
        model_(o.model),
        policy_(o.policy),
        max_waiters_(o.max_waiters),
        counters_(o.counters) {}

  // A denied admission: raise the hold to `l`; with the request, the hold's release re-checks it
  // while no waiter says what it will run.
  void notify_pressure(mem_level l, const request_spec* denied = nullptr) PNMEM_EXCLUDES(mu_) {
    detail::lock_guard lk(mu_);
    if (l > pushed_) pushed_ = l;
    if (denied != nullptr && l >= mem_level::tight) {
      denied_ = *denied;
      has_denied_ = true;
    }
    if (pushed_ == mem_level::critical) fail_waiters_locked();
  }

  // A fresh snapshot (every watcher sample, through connect()).
  void on_sample(const mem_state& s) PNMEM_EXCLUDES(mu_) {
    detail::lock_guard lk(mu_);
    follow_locked(s.level);
    if (pushed_ >= mem_level::tight && would_pass_locked(s)) release_hold_locked();
    grant_locked();
  }

  // Only a level known (no snapshot): the same rules, with "the level is below TIGHT" as the re-check.
  void on_level_change(mem_level to) PNMEM_EXCLUDES(mu_) {
    detail::lock_guard lk(mu_);
    follow_locked(to);
    if (pushed_ >= mem_level::tight && to < mem_level::tight) release_hold_locked();
    grant_locked();
  }

  void clear() PNMEM_EXCLUDES(mu_) {
    detail::lock_guard lk(mu_);
    release_hold_locked();
    grant_locked();
  }

  void set_capacity(int max_slots) PNMEM_EXCLUDES(mu_) {
    detail::lock_guard lk(mu_);
    const int slots = max_slots < 1 ? 1 : max_slots;
    // Following the ladder, this is the operator's ceiling: the level's plan applies below it.
    if (follow_ladder_) {
      configured_ = slots;
      capacity_ = ladder_plan_for(level_, ladder_config{/*max_slots=*/configured_}, policy_).max_slots;
    } else {
      capacity_ = slots;
    }
    grant_locked();
  }

  void release() PNMEM_EXCLUDES(mu_) {
    detail::lock_guard lk(mu_);
    if (in_use_ > 0) --in_use_;
    grant_locked();
  }

  template <class Clock, class Duration>
  gate_status acquire(const std::chrono::time_point<Clock, Duration>& deadline, gate_stop_token st, bool may_wait,
                      const request_spec* request = nullptr) {
    return count(acquire_uncounted(deadline, std::move(st), may_wait, request));
  }

  const pnmem::policy& policy() const noexcept { return policy_; }  // set at construction, never changed

  mem_level pushed_level() const PNMEM_EXCLUDES(mu_) {
    detail::lock_guard lk(mu_);
    return pushed_;
  }
  int capacity() const PNMEM_EXCLUDES(mu_) {
    detail::lock_guard lk(mu_);
    return capacity_;
  }
  int in_use() const PNMEM_EXCLUDES(mu_) {
    detail::lock_guard lk(mu_);
    return in_use_;
  }
  std::size_t waiting() const PNMEM_EXCLUDES(mu_) {
    detail::lock_guard lk(mu_);
    return n_waiting_;
  }

 private:
  bool holding_locked() const noexcept PNMEM_REQUIRES(mu_) { return pushed_ >= mem_level::tight || in_use_ >= capacity_; }

  // Rung 2 for the level `l`: the plan's slots for it (the operator's at OK). Not held at the
  // lowest level seen until OK: a box that touched CRITICAL for 100 ms and then rests at TIGHT
  // (PSI avg10 decays for a minute) would run one slot for that minute (docs/engine-integration.md,
  // the survival run).
  void follow_locked(mem_level l) noexcept PNMEM_REQUIRES(mu_) {
    // A CRITICAL hold that the box no longer confirms stops shedding and keeps holding.
    if (pushed_ == mem_level::critical && l < mem_level::critical) pushed_ = mem_level::tight;
    level_ = l;
    if (!follow_ladder_) return;
    const int plan = ladder_plan_for(l, ladder_config{/*max_slots=*/configured_}, policy_).max_slots;
    capacity_ = plan;
  }

  // Would the request at the head of the queue (else the denied one) be admitted or capped now?
  // Without either, the level must be below TIGHT (the seed's rule).
  bool would_pass_locked(const mem_state& s) const noexcept PNMEM_REQUIRES(mu_) {
    const request_spec* rq = head_ != nullptr && head_->request != nullptr ? head_->request
                             : has_denied_                                 ? &denied_
                                                                           : nullptr;
    if (rq == nullptr) return s.level < mem_level::tight;
    const admit_result r = admit_request(model_, *rq, s, policy_);
    // A request the gate cannot judge (a die the snapshot lacks) never holds the queue.
    return r.verdict != verdict::reject || r.reason == admit_reason::bad_request;
  }

  void release_hold_locked() noexcept PNMEM_REQUIRES(mu_) {
    pushed_ = mem_level::ok;
    has_denied_ = false;
  }

  template <class Clock, class Duration>
  gate_status acquire_uncounted(const std::chrono::time_point<Clock, Duration>& deadline, gate_stop_token st,
                                bool may_wait, const request_spec* request) PNMEM_EXCLUDES(mu_) {
    if (st.stop_requested()) return gate_status::cancelled;
    waiter w;
    w.request = request;
    {
      detail::lock_guard lk(mu_);
      if (pushed_ == mem_level::critical) return gate_status::overloaded;
      if (head_ == nullptr && !holding_locked()) {
        ++in_use_;
        return gate_status::acquired;
      }
      if (!may_wait) return gate_status::timed_out;
      if (n_waiting_ >= max_waiters_) return gate_status::queue_full;
      enqueue_locked(&w);
    }
    if (counters_ != nullptr) engine_counters::bump(counters_->gate_waits);

#if PNMEM_HAS_STOP_TOKEN
    // Declared after `w` and destroyed before it; destroyed with mu_ not held,
    // since its destructor waits for a callback running on another thread.
    std::stop_callback wake(st, [this, &w] {
      detail::lock_guard lk(mu_);
      w.cv.notify_all();
    });
#endif
    detail::unique_lock lk(mu_);
    for (;;) {
      if (w.done) return w.result;
      if (st.stop_requested()) {
        dequeue_locked(&w);
        return gate_status::cancelled;
      }
      if (Clock::now() >= deadline) {
        dequeue_locked(&w);
        return gate_status::timed_out;
      }
      w.cv.wait_until(lk.native(), deadline);
    }
  }

  gate_status count(gate_status s) noexcept {
    if (counters_ == nullptr) return s;
    switch (s) {
      case gate_status::acquired: engine_counters::bump(counters_->gate_acquired); break;
      case gate_status::overloaded: engine_counters::bump(counters_->gate_overloaded); break;
      case gate_status::timed_out: engine_counters::bump(counters_->gate_timed_out); break;
      case gate_status::cancelled: engine_counters::bump(counters_->gate_cancelled); break;
      case gate_status::queue_full: engine_counters::bump(counters_->gate_queue_full); break;
    }
    return s;
  }

  void enqueue_locked(waiter* w) noexcept PNMEM_REQUIRES(mu_) {
    w->prev = tail_;
    w->next = nullptr;
    if (tail_ != nullptr) {
      tail_->next = w;
    } else {
      head_ = w;
    }
    tail_ = w;
    ++n_waiting_;
  }

  void dequeue_locked(waiter* w) noexcept PNMEM_REQUIRES(mu_) {
    if (w->prev != nullptr) {
      w->prev->next = w->next;
    } else {
      head_ = w->next;
    }
    if (w->next != nullptr) {
      w->next->prev = w->prev;
    } else {
      tail_ = w->prev;
    }
    w->prev = w->next = nullptr;
    --n_waiting_;
  }

  // Completes a waiter. Notified under mu_: the waiter's node lives on its
  // stack and may be gone as soon as mu_ is released.
  void complete_locked(waiter* w, gate_status s) noexcept PNMEM_REQUIRES(mu_) {
    dequeue_locked(w);
    w->done = true;
    w->result = s;
    w->cv.notify_all();
  }

  void grant_locked() noexcept PNMEM_REQUIRES(mu_) {
    while (head_ != nullptr && !holding_locked()) {
      ++in_use_;
      complete_locked(head_, gate_status::acquired);
    }
  }

  void fail_waiters_locked() noexcept PNMEM_REQUIRES(mu_) {
    while (head_ != nullptr) complete_locked(head_, gate_status::overloaded);
  }

  mutable detail::mutex mu_;
  mem_level pushed_ PNMEM_GUARDED_BY(mu_) = mem_level::ok;
  mem_level level_ PNMEM_GUARDED_BY(mu_) = mem_level::ok;  // the watcher's, as last seen
  bool has_denied_ PNMEM_GUARDED_BY(mu_) = false;
  request_spec denied_ PNMEM_GUARDED_BY(mu_){};
  int configured_ PNMEM_GUARDED_BY(mu_);  // the operator's slots (the plan at OK)
  int capacity_ PNMEM_GUARDED_BY(mu_);
  const bool follow_ladder_;
  const model_cost model_;
  const pnmem::policy policy_;
  int in_use_ PNMEM_GUARDED_BY(mu_) = 0;
  const std::size_t max_waiters_;
  std::size_t n_waiting_ PNMEM_GUARDED_BY(mu_) = 0;
  // FIFO of waiting acquirers, nodes on their stacks. A node's fields are also
  // touched only under mu_ (the analysis cannot follow the pointers).
  waiter* head_ PNMEM_GUARDED_BY(mu_) = nullptr;
  waiter* tail_ PNMEM_GUARDED_BY(mu_) = nullptr;
  engine_counters* const counters_;
};

}  // namespace detail

}  // namespace pnmem
