// pnmem/engine/detail/backpressure_gate_impl.hpp - the lock, the FIFO and the rules of the gate.
//
// Implementation of backpressure_gate.hpp (read the rules there). Kept apart so
// that the public header reads as the API; engines include backpressure_gate.hpp.
//
// Locking: one mutex, mu_, guards every field; no user code runs under it.
// A waiter sleeps on its own condition variable (its node is on its stack), so
// granting a slot wakes exactly the waiter at the head.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <stop_token>
#include <utility>

#include "pnmem/detail/mutex.hpp"
#include "pnmem/detail/thread_annotations.hpp"
#include "pnmem/engine/counters.hpp"
#include "pnmem/engine/gate_status.hpp"
#include "pnmem/mem_level.hpp"

namespace pnmem {

namespace detail {

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
  };

  gate_core(int max_slots, std::size_t max_waiters, engine_counters* counters) noexcept
      : capacity_(max_slots < 1 ? 1 : max_slots), max_waiters_(max_waiters), counters_(counters) {}

  void notify_pressure(mem_level l) PNMEM_EXCLUDES(mu_) {
    detail::lock_guard lk(mu_);
    if (l > pushed_) pushed_ = l;
    if (pushed_ == mem_level::critical) fail_waiters_locked();
  }

  void on_level_change(mem_level to) PNMEM_EXCLUDES(mu_) {
    detail::lock_guard lk(mu_);
    if (to < mem_level::tight) {
      pushed_ = mem_level::ok;
      grant_locked();
    } else if (to == mem_level::critical) {
      pushed_ = mem_level::critical;
      fail_waiters_locked();
    } else if (pushed_ == mem_level::critical) {  // critical -> tight: hold, stop shedding
      pushed_ = mem_level::tight;
    }
  }

  void clear() PNMEM_EXCLUDES(mu_) {
    detail::lock_guard lk(mu_);
    pushed_ = mem_level::ok;
    grant_locked();
  }

  void set_capacity(int max_slots) PNMEM_EXCLUDES(mu_) {
    detail::lock_guard lk(mu_);
    capacity_ = max_slots < 1 ? 1 : max_slots;
    grant_locked();
  }

  void release() PNMEM_EXCLUDES(mu_) {
    detail::lock_guard lk(mu_);
    if (in_use_ > 0) --in_use_;
    grant_locked();
  }

  template <class Clock, class Duration>
  gate_status acquire(const std::chrono::time_point<Clock, Duration>& deadline, std::stop_token st, bool may_wait) {
    return count(acquire_uncounted(deadline, std::move(st), may_wait));
  }

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

  template <class Clock, class Duration>
  gate_status acquire_uncounted(const std::chrono::time_point<Clock, Duration>& deadline, std::stop_token st,
                                bool may_wait) PNMEM_EXCLUDES(mu_) {
    if (st.stop_requested()) return gate_status::cancelled;
    waiter w;
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

    // Declared after `w` and destroyed before it; destroyed with mu_ not held,
    // since its destructor waits for a callback running on another thread.
    std::stop_callback wake(st, [this, &w] {
      detail::lock_guard lk(mu_);
      w.cv.notify_all();
    });
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
  int capacity_ PNMEM_GUARDED_BY(mu_);
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
