// pnmem/engine/backpressure_gate.hpp - admission back-pressure in front of a batch scheduler's slots.
//
// The seed's D3 (bs_notify_pressure / bs_slot_acquire) as a class:
//
//   pnmem::backpressure_gate gate{{.max_slots = 8, .counters = &counters, .model = my_model}};
//   auto conn = gate.connect(watcher);            // every sample: release rule + rung 2
//   ...
//   pnmem::request_spec rq{.n_prompt = n};        // what this request will run
//   auto a = pnmem::admit(watcher, model, n);     // engine/admit.hpp
//   if (a.status == pnmem::admit_status::denied) gate.notify_denied(a);  // holds or sheds, as the rules say
//   auto r = gate.acquire(std::chrono::steady_clock::now() + 2s, rq, stop_token);
//   if (!r) return r.status == pnmem::gate_status::overloaded ? http_503("overloaded, retry") : ...;
//   decode(...);                                  // r.slot returns the slot when it goes out of scope
//
// Rules (the seed's D3, with a release rule that cannot hold a queue for ever):
// - Only a denied admission holds: notify_pressure (notify_denied) raises the pushed level (never
//   lowers it). The watcher's level alone never pushes, so a box resting at TIGHT
//   with nothing denied holds nothing, and a CRITICAL no denial confirmed sheds nothing. A request
//   that needs no host bytes, refused at the reserve under the zero-cost rule hold (policy.hpp), pushes
//   TIGHT through notify_denied: held until it would start, not shed.
// - A hold (pushed TIGHT or worse) ends on the first watcher sample on which a fresh
//   admission of the request at the head of the queue (acquire with a request_spec),
//   else of the last denied one (notify_pressure with it), would be admitted or capped;
//   with neither known, on the first sample below TIGHT (the seed's rule). Checked on
//   every sample (connect() subscribes to each one), so the hold ends within one poll
//   interval of the box recovering, even if the level never changes.
// - A pushed CRITICAL falls to TIGHT on the first sample below CRITICAL (stop
//   shedding, keep holding until the rule above releases).
// - acquire waits while the pushed level is TIGHT or worse, or no slot is free.
//   Waiters are served first come, first served; a new acquirer never overtakes one.
// - While the pushed level is CRITICAL every new acquirer fails at once with
//   `overloaded` (the seed's 503 "overloaded, retry"), and the push to CRITICAL
//   fails every acquirer already waiting, at once.
// - At most `max_waiters` acquirers wait; one more gets `queue_full` at once.
// - A deadline gives `timed_out`; a stop request on the token gives `cancelled`.
//   A slot granted concurrently with either wins: the result is `acquired`.
// - Rung 2 (gate_options::follow_ladder, on by default): the slot count is the ladder's
//   max_slots for the watcher's level (the seed's bind guard reads the same plan), from
//   connect() on: halved at TIGHT, 1 at CRITICAL, the operator's max_slots at OK, on every
//   sample (so a step from CRITICAL back to TIGHT gives TIGHT's slots again: the watcher's
//   step-down dwell, not the gate, is what damps a level that flaps). set_capacity() changes
//   that ceiling (without the ladder: the slot count itself). Lowering below the slots
//   in use revokes nothing; it only holds new acquirers until enough are released.
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

#include "pnmem/detail/cxx.hpp"  // PNMEM_HAS_*: which of the standard headers below this C++ has

#include <chrono>
#include <cstddef>
#include <memory>
#if PNMEM_HAS_STOP_TOKEN
#include <stop_token>
#endif
#include <utility>

#include "pnmem/admission.hpp"
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
  explicit backpressure_gate(const gate_options& o) : core_(std::make_shared<detail::gate_core>(o)) {}

  // max_slots: the slot ceiling (values below 1 are treated as 1, as the ladder's
  // max_slots); max_waiters: the bound on waiting acquirers (0: never wait);
  // counters: optional, the gate_* fields are counted when given. The other
  // options are gate_options' defaults (the ladder followed, the seed's model).
  explicit backpressure_gate(int max_slots, std::size_t max_waiters = 64, engine_counters* counters = nullptr)
      : backpressure_gate(gate_options{/*max_slots=*/max_slots, /*max_waiters=*/max_waiters, /*counters=*/counters}) {}

  backpressure_gate(const backpressure_gate&) = delete;
  backpressure_gate& operator=(const backpressure_gate&) = delete;

  // A denied admission: raise the pushed level to `l` (never lowers it).
  // At CRITICAL every waiting acquirer fails at once with `overloaded`.
  // With the denied request, the hold's release re-checks it while no waiter
  // at the head of the queue says what it will run.
  void notify_pressure(mem_level l) { core_->notify_pressure(l); }
  void notify_pressure(mem_level l, const request_spec& denied) { core_->notify_pressure(l, &denied); }

  // A refusal as a decision and the request it refused: notify_pressure(level, request), except that one
  // held_at_reserve under the gate's policy (a request needing no host bytes refused at the reserve, the
  // zero-cost rule hold: admission.hpp) pushes at most TIGHT: the gate holds it, and the waiters behind it,
  // until it would start, instead of failing them as overloaded. Not a refusal: ignored.
  void notify_denied(mem_level level, const admit_result& r, const request_spec& request) {
    if (r.verdict == verdict::reject) push_denied(level, held_at_reserve(r, core_->policy()), request);
  }
  // pnmem::admit's answer (engine/admit.hpp): its level and request, held as the answer says (its
  // admit_answer::held: under the policy and the model's own zero-cost rule it was decided with).
  template <class Answer>
  void notify_denied(const Answer& a) {
    if (a.detail.verdict == verdict::reject) push_denied(a.level, a.held, a.request);
  }

  // A fresh snapshot (what connect() delivers on every sample): the release rule
  // and rung 2 above.
  void on_sample(const mem_state& s) { core_->on_sample(s); }

  // The same with only a level known: the hold ends below TIGHT.
  void on_level_change(mem_level to) { core_->on_level_change(to); }

  // Clears the pushed level to OK by hand and wakes waiters.
  void clear() { core_->clear(); }

  // The operator's slot ceiling (values below 1 are treated as 1). Following the
  // ladder, the level's plan applies below it; else it is the slot count. Lowering
  // it revokes no slot; raising it wakes waiters.
  void set_capacity(int max_slots) { core_->set_capacity(max_slots); }

  // Waits until a slot is granted, the deadline passes, `st` is stopped, or the
  // pushed level becomes CRITICAL. With `request` (what the acquirer will run),
  // a hold is released as soon as that request would be admitted while it waits
  // at the head of the queue; it must outlive the call.
  // C++17 (no std::stop_token: detail/cxx.hpp): the same four without `st`; nothing cancels a wait.
#if PNMEM_HAS_STOP_TOKEN
  template <class Clock, class Duration>
  gate_result acquire(const std::chrono::time_point<Clock, Duration>& deadline, std::stop_token st = {}) {
    return wrap(core_->acquire(deadline, std::move(st), true));
  }
  template <class Clock, class Duration>
  gate_result acquire(const std::chrono::time_point<Clock, Duration>& deadline, const request_spec& request,
                      std::stop_token st = {}) {
    return wrap(core_->acquire(deadline, std::move(st), true, &request));
  }

  template <class Rep, class Period>
  gate_result acquire_for(const std::chrono::duration<Rep, Period>& timeout, std::stop_token st = {}) {
    return acquire(std::chrono::steady_clock::now() + timeout, std::move(st));
  }
  template <class Rep, class Period>
  gate_result acquire_for(const std::chrono::duration<Rep, Period>& timeout, const request_spec& request,
                          std::stop_token st = {}) {
    return acquire(std::chrono::steady_clock::now() + timeout, request, std::move(st));
  }
#else
  template <class Clock, class Duration>
  gate_result acquire(const std::chrono::time_point<Clock, Duration>& deadline) {
    return wrap(core_->acquire(deadline, detail::gate_stop_token{}, true));
  }
  template <class Clock, class Duration>
  gate_result acquire(const std::chrono::time_point<Clock, Duration>& deadline, const request_spec& request) {
    return wrap(core_->acquire(deadline, detail::gate_stop_token{}, true, &request));
  }

  template <class Rep, class Period>
  gate_result acquire_for(const std::chrono::duration<Rep, Period>& timeout) {
    return acquire(std::chrono::steady_clock::now() + timeout);
  }
  template <class Rep, class Period>
  gate_result acquire_for(const std::chrono::duration<Rep, Period>& timeout, const request_spec& request) {
    return acquire(std::chrono::steady_clock::now() + timeout, request);
  }
#endif

  // Never waits: acquired, overloaded, or timed_out when it would have to wait.
  gate_result try_acquire() {
    return wrap(core_->acquire(std::chrono::steady_clock::time_point::min(), detail::gate_stop_token{}, false));
  }

  // Returns a slot whose gate_slot was detach()ed.
  void release() { core_->release(); }

  // Subscribes to every sample of `w` (w.subscribe(fn, delivery::every_sample) /
  // w.unsubscribe, as pnmem::watcher) and applies the current snapshot now (rung 2
  // at once, as the seed's scheduler does at creation).
  template <class Watcher>
  [[nodiscard]] gate_connection connect(Watcher& w) {
    std::weak_ptr<detail::gate_core> weak = core_;
    const auto id = w.subscribe(
        [weak](const auto& change) {
          if (auto core = weak.lock()) core->on_sample(change.state);
        },
        delivery::every_sample);
    core_->on_sample(w.read());
    return gate_connection([&w, id] { w.unsubscribe(id); });
  }

  mem_level pushed_level() const { return core_->pushed_level(); }
  int capacity() const { return core_->capacity(); }
  int in_use() const { return core_->in_use(); }
  std::size_t waiting() const { return core_->waiting(); }

 private:
  // A refusal's push: its level, at most TIGHT (hold, not shed) for one held at the reserve.
  void push_denied(mem_level level, bool held, const request_spec& request) {
    core_->notify_pressure(held && level > mem_level::tight ? mem_level::tight : level, &request);
  }

  gate_result wrap(gate_status s) {
    gate_result r;
    r.status = s;
    if (s == gate_status::acquired) r.slot = gate_slot(core_.get());
    return r;
  }

  std::shared_ptr<detail::gate_core> core_;
};

}  // namespace pnmem
