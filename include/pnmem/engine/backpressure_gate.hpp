// pnmem/engine/backpressure_gate.hpp - admission back-pressure in front of a batch scheduler's slots.
//
// The seed's D3 (bs_notify_pressure / bs_slot_acquire) as a class:
//
//   pnmem::backpressure_gate gate{/*max_slots=*/8, /*max_waiters=*/64, &counters};
//   auto conn = gate.connect(watcher);            // clears on the watcher's level changes
//   ...
//   auto a = pnmem::admit(watcher, model, n_prompt_tokens);  // engine/admit.hpp
//   if (a.status == pnmem::admit_status::denied) gate.notify_pressure(a.level);
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
// held while user code runs (the gate calls none; counters are atomics). The
// lock and the waiter queue are in detail/backpressure_gate_impl.hpp.
// Lifetimes: slots and acquirers must not outlive the gate. A connection may
// outlive the gate (the watcher's callback then does nothing), but must not
// outlive the watcher it is connected to.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <stop_token>
#include <utility>

#include "pnmem/change_delivery.hpp"
#include "pnmem/engine/counters.hpp"
#include "pnmem/engine/detail/backpressure_gate_impl.hpp"
#include "pnmem/engine/gate_status.hpp"
#include "pnmem/mem_level.hpp"

namespace pnmem {

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

// Unsubscribes from the watcher on destruction (or disconnect()); the watcher's
// scoped_subscription (change_delivery.hpp) under the name connect() has always returned.
using gate_connection = scoped_subscription;

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
