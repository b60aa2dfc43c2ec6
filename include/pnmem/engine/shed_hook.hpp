// pnmem/engine/shed_hook.hpp - shedding on the watcher's thread: a cache shrinks while the host is below
// WATCH, whatever the engine's own loop is doing (a long prefill, a blocked scheduler).
//
//   pnmem::scoped_subscription shed = pnmem::shed_on_every_sample(watcher, ledger, [&](std::uint64_t want) {
//     return cache.drop_oldest(want);  // the bytes it gave back to the kernel
//   });
//
// After every snapshot the watcher publishes on which the host bands are below WATCH (on the ledger's
// budget: what is promised and credited counted), `fn(ledger.shed_bytes(w, p))` is called
// on the publishing thread (the poll thread, or a poll_now() caller) with no lock of pnmem's held, one
// call at a time; what it returns is credited (host_ledger::credit_freed), so the next answers count it
// at once. fn may take the engine's cache lock; it must not block for long (the next sample waits), nor
// call poll_now(). What fn throws goes to the watcher's delivery, as any subscriber's would (nothing is
// credited). The subscription's end (its destructor, or disconnect()) returns once a call running on
// another thread has returned, so the cache may be destroyed right after; ending it from inside fn is
// allowed (that call finishes). It must not outlive the watcher or the ledger.
//
// The C library's pnmem_set_shed_hook is this, for its process-wide watcher and ledger.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "pnmem/change_delivery.hpp"
#include "pnmem/config.hpp"
#include "pnmem/engine/host_ledger.hpp"
#include "pnmem/policy.hpp"

namespace pnmem {

namespace detail {
// The calls of one shed hook in flight, so its end can wait for them.
struct shed_calls {
  std::mutex mu;
  std::condition_variable cv;
  int running = 0;
  std::thread::id runner;  // the thread of the call running (one at a time: the watcher delivers so)
  bool ended = false;
};
}  // namespace detail

template <class Watcher, class Fn>
[[nodiscard]] scoped_subscription shed_on_every_sample(Watcher& w, host_ledger& ledger, Fn fn,
                                                       const pnmem::policy& p = process_policy()) {
  auto calls = std::make_shared<detail::shed_calls>();
  const auto id = w.subscribe(
      [&w, &ledger, fn = std::move(fn), p, calls](const level_change&) mutable {
        {
          std::lock_guard<std::mutex> lk(calls->mu);
          if (calls->ended) return;
          ++calls->running;
          calls->runner = std::this_thread::get_id();
        }
        struct done {
          detail::shed_calls& c;
          ~done() {
            {
              std::lock_guard<std::mutex> lk(c.mu);
              --c.running;
            }
            c.cv.notify_all();
          }
        } guard{*calls};
        const std::uint64_t want = ledger.shed_bytes(w, p);
        if (want == 0) return;
        const std::int64_t freeing_began = ledger.now_ns();  // a sample from here on may hold what it frees
        const std::uint64_t freed = static_cast<std::uint64_t>(fn(want));
        if (freed > 0) ledger.credit_freed_since(freed, freeing_began);
      },
      delivery::every_sample);
  return scoped_subscription([&w, id, calls] {
    w.unsubscribe(id);
    std::unique_lock<std::mutex> lk(calls->mu);
    calls->ended = true;
    calls->cv.wait(lk, [&] { return calls->running == 0 || calls->runner == std::this_thread::get_id(); });
  });
}

}  // namespace pnmem
