// pnmem/engine/retry_after.hpp - a Retry-After for an engine's denied (or capped) answer, in one call.
//
// retry_hint.hpp decides from a snapshot; this fills in what it needs from the watcher (its newest
// snapshot, its clock, its poll interval at pressure) and, when the engine keeps one, the host ledger
// (when reservations with a time to live give back the bytes short):
//
//   auto r = ledger.admit(watcher, model, n_prompt);
//   if (r.answer.status == pnmem::admit_status::denied) {
//     const pnmem::retry_hint h = pnmem::retry_after(r.answer, watcher, &ledger);
//     return http_503(explain(r.answer), /*Retry-After, whole seconds rounded up*/ pnmem::retry_after_seconds(h));
//   }
//
// A hint, not a promise (retry_hint.hpp says what each basis assumes). 0 with basis `none` for an
// answer a wait does not improve (admitted, fail open, capped by its own window, a bad request).
// The ledger must run on the watcher's clock (host_ledger.hpp says how to give it one).
#pragma once

#include <chrono>
#include <cstdint>

#include "pnmem/config.hpp"
#include "pnmem/engine/admit.hpp"
#include "pnmem/engine/host_ledger.hpp"
#include "pnmem/mem_state.hpp"
#include "pnmem/policy.hpp"
#include "pnmem/retry_hint.hpp"

namespace pnmem {

// The hint for `a`, an answer from `w`'s snapshots (pnmem::admit, a ledger's admit/reserve_bytes/
// check_bytes), under policy `p` (the one the answer was decided with; process_policy() by default).
// Watcher: read(), now_ns() and options().pressure_poll_interval, as pnmem::watcher has.
template <class Watcher>
retry_hint retry_after(const admit_answer& a, const Watcher& w, const host_ledger* ledger = nullptr,
                       const pnmem::policy& p = process_policy()) {
  if (a.status == admit_status::admitted || a.status == admit_status::fail_open) return {};
  const mem_state s = w.read();
  retry_outlook o;
  o.now_ns = w.now_ns();
  o.next_sample_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(w.options().pressure_poll_interval).count();
  if (ledger != nullptr && (a.reason == admit_reason::host_budget || a.reason == admit_reason::host_reserve)) {
    o.expiry_covering_ns = ledger->expiry_covering(retry_shortfall_bytes(a.detail, s, p));
  }
  return retry_after(a.detail, s, p, o);
}

}  // namespace pnmem
