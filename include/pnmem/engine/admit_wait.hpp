// pnmem/engine/admit_wait.hpp - admit, holding a request that needs no host bytes while the box is at its
// reserve, up to the engine's patience.
//
// At the reserve pnmem refuses what would start (admission.hpp, host_reserve). A request that needs no new
// host bytes (a GPU-resident one, or one of an engine that allocated its KV at load) protects nothing by
// being refused, and a 503 for it is a failed request the box did not need. Under the zero-cost rule hold
// (policy.hpp, the default) the waiting call holds it instead:
//
//   const pnmem::admit_answer a = pnmem::admit_wait(watcher, model, n_prompt, std::chrono::seconds(5));
//   if (a.status == pnmem::admit_status::denied) return http_503(explain(a), pnmem::retry_after(a, watcher));
//
// It is pnmem::admit's answer, except that a refusal it holds (admit_answer::held) waits for the watcher's samples until
// one lets the request start (the first sample with host memory above the reserve: every sample is
// re-decided, so a PSI stall that begins meanwhile refuses it as psi_stall) or the patience runs out (the
// refusal as it then stands). Nothing else waits: an admission, a cap, any other refusal, a fail-open
// answer return at once, as pnmem::admit's. Counted (engine_counters::held_served, held_timed_out).
//
// The thread that calls it blocks: an engine calls it where a request may wait (its request handler, not
// its decode loop). The watcher must outlive the call; the wait subscribes to its samples for its length.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

#include "pnmem/admission.hpp"
#include "pnmem/change_delivery.hpp"
#include "pnmem/engine/admit.hpp"
#include "pnmem/engine/counters.hpp"

namespace pnmem {

namespace detail {
// What a held request waits on: the newest sample's number, bumped by the watcher's subscriber. Shared
// with the subscriber, which may still be running when the wait has unsubscribed.
struct sample_signal {
  std::mutex mu;
  std::condition_variable cv;
  std::uint64_t samples = 0;
};
}  // namespace detail

// Watcher: as pnmem::admit's, with subscribe(fn, delivery::every_sample) and unsubscribe(id)
// (pnmem::watcher has them). The answer returned is counted once in o.counters (and its ladder line
// logged once), as pnmem::admit's: the re-decisions of a held request are not.
template <class Watcher, class Clock, class Duration>
admit_answer admit_wait(Watcher& w, const model_desc& m, int n_tokens, int encoder_items,
                        const std::chrono::time_point<Clock, Duration>& deadline, const admit_options& o = {}) {
  admit_options quiet = o;
  quiet.counters = nullptr;
  quiet.log = nullptr;
  // Decided quietly on one snapshot; where that answer is the one returned, decided again on the same
  // snapshot with the caller's counters and log (the same answer, counted once).
  mem_state s{};
  const auto held_now = [&] {
    if (!w.running()) return false;
    s = w.read();
    return admit_snapshot(s, m, n_tokens, encoder_items, quiet).held;
  };
  const auto answer = [&] {
    return w.running() ? admit_snapshot(s, m, n_tokens, encoder_items, o) : admit(w, m, n_tokens, encoder_items, o);
  };
  if (!held_now()) return answer();
  auto signal = std::make_shared<detail::sample_signal>();
  const auto id = w.subscribe(
      [signal](const auto&) {
        {
          std::lock_guard<std::mutex> lk(signal->mu);
          ++signal->samples;
        }
        signal->cv.notify_all();
      },
      delivery::every_sample);
  const scoped_subscription subscribed([&w, id] { w.unsubscribe(id); });
  std::uint64_t seen = 0;
  // Re-decided after subscribing: a sample published in between is not missed.
  while (held_now()) {
    std::unique_lock<std::mutex> lk(signal->mu);
    if (!signal->cv.wait_until(lk, deadline, [&] { return signal->samples != seen; })) {
      lk.unlock();
      if (o.counters != nullptr) engine_counters::bump(o.counters->held_timed_out);
      return answer();
    }
    seen = signal->samples;
  }
  const admit_answer a = answer();
  if (o.counters != nullptr && a.status != admit_status::denied) engine_counters::bump(o.counters->held_served);
  return a;
}

template <class Watcher, class Clock, class Duration>
admit_answer admit_wait(Watcher& w, const model_desc& m, int n_tokens,
                        const std::chrono::time_point<Clock, Duration>& deadline, const admit_options& o = {}) {
  return admit_wait(w, m, n_tokens, 0, deadline, o);
}

// The patience as a duration from now.
template <class Watcher, class Rep, class Period>
admit_answer admit_wait(Watcher& w, const model_desc& m, int n_tokens, const std::chrono::duration<Rep, Period>& patience,
                        const admit_options& o = {}) {
  return admit_wait(w, m, n_tokens, 0, std::chrono::steady_clock::now() + patience, o);
}

}  // namespace pnmem
