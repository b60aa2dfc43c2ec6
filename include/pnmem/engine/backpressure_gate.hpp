// pnmem/engine/backpressure_gate.hpp - admission back-pressure in front of a batch scheduler's slots.
//
// The seed's D3 (bs_notify_pressure / bs_slot_acquire) as a class:
//
//   pnmem::backpressure_gate gate{/*max_slots=*/8, /*max_waiters=*/64, &counters};
//   auto conn = gate.connect(watcher);            // clears on the watcher's level changes
//   ...
//   if (admit(...).verdict == pnmem::verdict::reject) gate.notify_pressure(snapshot.level);
//   auto r = gate.acquire(std::chrono::steady_clock::now() + 2s, stop_token);
//   if (!r) return r.status == pnmem::gate_status::overloaded ? http_503("overloaded, retry") : ...;
//   decode(...);                                  // r.slot returns the slot when it goes out of scope
//   gate.set_capacity(pnmem::ladder_plan_for(level, cfg).max_slots);  // rung 2
//
// Rules:
// - The pushed level only rises through notify_pressure (a denied admission).
//   The watcher lowers it: a change to below TIGHT clears it to OK; a change
//   to CRITICAL raises it to CRITICAL; a change from CRITICAL to TIGHT lowers
//   a pushed CRITICAL to TIGHT (hold, stop shedding: the box said it is no
//   longer critical).
// - acquire waits while the pushed level is TIGHT or worse, or no slot is free.
//   Waiters are served first come, first served; a new acquirer never overtakes one.
// - While the pushed level is CRITICAL every new acquirer fails at once with
//   `overloaded` (the seed's 503 "overloaded, retry"), and the push to CRITICAL
//   fails every acquirer already waiting, at once.
// - At most `max_waiters` acquirers wait; one more gets `queue_full` at once.
// - A deadline gives `timed_out`; a stop request on the token gives `cancelled`.
//   A slot granted concurrently with either wins: the result is `acquired`.
// - set_capacity (the ladder's rung 2): lowering below the slots in use revokes
//   nothing; it only holds new acquirers until enough slots are released.
//
// Slots: acquire returns {status, slot}; the gate_slot is an RAII handle that
// returns the slot on destruction (or release()). For engines that cannot hold
// a C++ object (the C ABI), gate_slot::detach() gives up the handle without
// returning the slot, and backpressure_gate::release() returns one such slot.
//
// Thread safety: every member is safe from any thread. No lock of the gate is
// held while user code runs (the gate calls none; counters are atomics).
// Lifetimes: slots and acquirers must not outlive the gate. A connection may
// outlive the gate (the watcher's callback then does nothing), but must not
// outlive the watcher it is connected to.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string_view>
#include <utility>

#include "pnmem/engine/counters.hpp"
#include "pnmem/mem_level.hpp"

namespace pnmem {

enum class gate_status : std::uint8_t {
  acquired,    // a slot is yours
  overloaded,  // pushed level CRITICAL: shed, "overloaded, retry" (the seed's 503)
  timed_out,   // the deadline passed first (try_acquire: a slot was not free at once)
  cancelled,   // the stop_token was stopped first
  queue_full,  // max_waiters acquirers already waiting
};

constexpr std::string_view to_string(gate_status s) noexcept {
  switch (s) {
    case gate_status::acquired: return "acquired";
    case gate_status::overloaded: return "overloaded";
    case gate_status::timed_out: return "timed_out";
    case gate_status::cancelled: return "cancelled";
    case gate_status::queue_full: return "queue_full";
  }
  return "invalid";
}

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

  void notify_pressure(mem_level l) {
    std::lock_guard<std::mutex> lk(mu_);
    if (l > pushed_) pushed_ = l;
    if (pushed_ == mem_level::critical) fail_waiters_locked();
  }

  void on_level_change(mem_level to) {
    std::lock_guard<std::mutex> lk(mu_);
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

  void clear() {
    std::lock_guard<std::mutex> lk(mu_);
    pushed_ = mem_level::ok;
    grant_locked();
  }

  void set_capacity(int max_slots) {
    std::lock_guard<std::mutex> lk(mu_);
    capacity_ = max_slots < 1 ? 1 : max_slots;
    grant_locked();
  }

  void release() {
    std::lock_guard<std::mutex> lk(mu_);
    if (in_use_ > 0) --in_use_;
    grant_locked();
  }

  template <class Clock, class Duration>
  gate_status acquire(const std::chrono::time_point<Clock, Duration>& deadline, std::stop_token st, bool may_wait) {
    return count(acquire_uncounted(deadline, std::move(st), may_wait));
  }

  mem_level pushed_level() const {
    std::lock_guard<std::mutex> lk(mu_);
    return pushed_;
  }
  int capacity() const {
    std::lock_guard<std::mutex> lk(mu_);
    return capacity_;
  }
  int in_use() const {
    std::lock_guard<std::mutex> lk(mu_);
    return in_use_;
  }
  std::size_t waiting() const {
    std::lock_guard<std::mutex> lk(mu_);
    return n_waiting_;
  }

 private:
  bool holding_locked() const noexcept { return pushed_ >= mem_level::tight || in_use_ >= capacity_; }

  template <class Clock, class Duration>
  gate_status acquire_uncounted(const std::chrono::time_point<Clock, Duration>& deadline, std::stop_token st,
                                bool may_wait) {
    if (st.stop_requested()) return gate_status::cancelled;
    waiter w;
    {
      std::lock_guard<std::mutex> lk(mu_);
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
      std::lock_guard<std::mutex> lk(mu_);
      w.cv.notify_all();
    });
    std::unique_lock<std::mutex> lk(mu_);
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
      w.cv.wait_until(lk, deadline);
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

  void enqueue_locked(waiter* w) noexcept {
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

  void dequeue_locked(waiter* w) noexcept {
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
  void complete_locked(waiter* w, gate_status s) noexcept {
    dequeue_locked(w);
    w->done = true;
    w->result = s;
    w->cv.notify_all();
  }

  void grant_locked() noexcept {
    while (head_ != nullptr && !holding_locked()) {
      ++in_use_;
      complete_locked(head_, gate_status::acquired);
    }
  }

  void fail_waiters_locked() noexcept {
    while (head_ != nullptr) complete_locked(head_, gate_status::overloaded);
  }

  mutable std::mutex mu_;
  mem_level pushed_ = mem_level::ok;
  int capacity_;
  int in_use_ = 0;
  const std::size_t max_waiters_;
  std::size_t n_waiting_ = 0;
  waiter* head_ = nullptr;  // FIFO of waiting acquirers, nodes on their stacks
  waiter* tail_ = nullptr;
  engine_counters* const counters_;
};

}  // namespace detail

// One slot of the gate, returned on destruction. Move-only; empty after a move,
// release() or detach().
class gate_slot {
 public:
  gate_slot() noexcept = default;
  gate_slot(const gate_slot&) = delete;
  gate_slot& operator=(const gate_slot&) = delete;
  gate_slot(gate_slot&& o) noexcept : core_(std::exchange(o.core_, nullptr)) {}
  gate_slot& operator=(gate_slot&& o) noexcept {
    if (this != &o) {
      release();
      core_ = std::exchange(o.core_, nullptr);
    }
    return *this;
  }
  ~gate_slot() { release(); }

  // Returns the slot now. Idempotent.
  void release() {
    if (core_ != nullptr) std::exchange(core_, nullptr)->release();
  }
  // Gives up the handle without returning the slot: the owner must call
  // backpressure_gate::release() once for it.
  void detach() noexcept { core_ = nullptr; }

  bool holds() const noexcept { return core_ != nullptr; }
  explicit operator bool() const noexcept { return holds(); }

 private:
  friend class backpressure_gate;
  explicit gate_slot(detail::gate_core* c) noexcept : core_(c) {}
  detail::gate_core* core_ = nullptr;
};

struct gate_result {
  gate_status status = gate_status::timed_out;
  gate_slot slot;  // holds a slot exactly when status == acquired

  explicit operator bool() const noexcept { return status == gate_status::acquired; }
};

// Unsubscribes from the watcher on destruction (or disconnect()). Move-only.
class gate_connection {
 public:
  gate_connection() noexcept = default;
  explicit gate_connection(std::function<void()> unsubscribe) noexcept : unsubscribe_(std::move(unsubscribe)) {}
  gate_connection(const gate_connection&) = delete;
  gate_connection& operator=(const gate_connection&) = delete;
  gate_connection(gate_connection&& o) noexcept : unsubscribe_(std::exchange(o.unsubscribe_, nullptr)) {}
  gate_connection& operator=(gate_connection&& o) noexcept {
    if (this != &o) {
      disconnect();
      unsubscribe_ = std::exchange(o.unsubscribe_, nullptr);
    }
    return *this;
  }
  ~gate_connection() { disconnect(); }

  void disconnect() {
    if (unsubscribe_) std::exchange(unsubscribe_, nullptr)();
  }
  bool connected() const noexcept { return static_cast<bool>(unsubscribe_); }

 private:
  std::function<void()> unsubscribe_;
};

class backpressure_gate {
 public:
  // max_slots: the slot ceiling (values below 1 are treated as 1, as the ladder's
  // max_slots); max_waiters: the bound on waiting acquirers (0: never wait);
  // counters: optional, the gate_* fields are counted when given.
  explicit backpressure_gate(int max_slots, std::size_t max_waiters = 64, engine_counters* counters = nullptr)
      : core_(std::make_shared<detail::gate_core>(max_slots, max_waiters, counters)) {}

  backpressure_gate(const backpressure_gate&) = delete;
  backpressure_gate& operator=(const backpressure_gate&) = delete;

  // A denied admission: raise the pushed level to `l` (never lowers it).
  // At CRITICAL every waiting acquirer fails at once with `overloaded`.
  void notify_pressure(mem_level l) { core_->notify_pressure(l); }

  // A level change published by the watcher (what connect() subscribes):
  // below TIGHT clears the pushed level and wakes waiters; CRITICAL pushes
  // CRITICAL; CRITICAL -> TIGHT lowers a pushed CRITICAL to TIGHT.
  void on_level_change(mem_level to) { core_->on_level_change(to); }

  // Clears the pushed level to OK by hand and wakes waiters.
  void clear() { core_->clear(); }

  // The ladder's rung 2 (ladder_plan::max_slots). Values below 1 are treated as 1.
  // Lowering it revokes no slot; raising it wakes waiters.
  void set_capacity(int max_slots) { core_->set_capacity(max_slots); }

  // Waits until a slot is granted, the deadline passes, `st` is stopped, or the
  // pushed level becomes CRITICAL.
  template <class Clock, class Duration>
  gate_result acquire(const std::chrono::time_point<Clock, Duration>& deadline, std::stop_token st = {}) {
    return wrap(core_->acquire(deadline, std::move(st), true));
  }

  template <class Rep, class Period>
  gate_result acquire_for(const std::chrono::duration<Rep, Period>& timeout, std::stop_token st = {}) {
    return acquire(std::chrono::steady_clock::now() + timeout, std::move(st));
  }

  // Never waits: acquired, overloaded, or timed_out when it would have to wait.
  gate_result try_acquire() {
    return wrap(core_->acquire(std::chrono::steady_clock::time_point::min(), std::stop_token{}, false));
  }

  // Returns a slot whose gate_slot was detach()ed.
  void release() { core_->release(); }

  // Subscribes to `w`'s level changes (w.subscribe / w.unsubscribe, as
  // pnmem::watcher). A watcher already at CRITICAL pushes CRITICAL now.
  template <class Watcher>
  [[nodiscard]] gate_connection connect(Watcher& w) {
    std::weak_ptr<detail::gate_core> weak = core_;
    const auto id = w.subscribe([weak](const auto& change) {
      if (auto core = weak.lock()) core->on_level_change(change.to);
    });
    if (w.read().level == mem_level::critical) notify_pressure(mem_level::critical);
    return gate_connection([&w, id] { w.unsubscribe(id); });
  }

  mem_level pushed_level() const { return core_->pushed_level(); }
  int capacity() const { return core_->capacity(); }
  int in_use() const { return core_->in_use(); }
  std::size_t waiting() const { return core_->waiting(); }

 private:
  gate_result wrap(gate_status s) {
    gate_result r;
    r.status = s;
    if (s == gate_status::acquired) r.slot = gate_slot(core_.get());
    return r;
  }

  std::shared_ptr<detail::gate_core> core_;
};

}  // namespace pnmem
