// pnmem/engine/admit_after_eviction.hpp - a live admission that says whether evicting KV makes room.
//
// pnmem::admit (engine/admit.hpp) on the watcher's newest snapshot, and when it does not admit the
// request in full, eviction_admission.hpp's answer for the request admission judged: at TIGHT and
// worse (the ladder's rung 4b) a request host memory refuses or caps is "admitted after evicting N
// bytes" from the running slots, as plan_eviction cuts them.
//
//   const int running[] = {32768, 8192, 20000};       // tokens each running slot holds
//   pnmem::keep_budget_answer keep[3];
//   auto a = pnmem::admit_after_eviction(watcher, model, n_prompt, 0, running, 3, {}, keep);
//   if (a.answer.status == pnmem::admit_status::admitted) start(n_prompt);
//   else if (a.eviction.after_eviction) { evict(keep); start(n_prompt); }   // keep_set.hpp picks the rows
//   else if (a.answer.status == pnmem::admit_status::capped) start(a.answer.fit_tokens);
//
// The running slots' KV is taken to be in the model's format (model_desc::kv). No watcher running:
// fail open as pnmem::admit, nothing considered.
#pragma once

#include "pnmem/engine/admit.hpp"
#include "pnmem/eviction_admission.hpp"
#include "pnmem/eviction_budget.hpp"
#include "pnmem/ladder.hpp"
#include "pnmem/live_state.hpp"

namespace pnmem {

struct admit_eviction_answer {
  admit_answer answer;              // pnmem::admit's
  eviction_admission eviction{};    // its decision is answer.detail; considered only when it can help
};

template <class Watcher>
admit_eviction_answer admit_after_eviction(const Watcher& w, const model_desc& m, int n_tokens, int encoder_items,
                                           const int* slot_tokens, int n_slots, const admit_options& o = {},
                                           keep_budget_answer* out = nullptr,
                                           const eviction_limits& limits = eviction_limits{}) {
  admit_eviction_answer r;
  if (!w.running()) {
    r.answer = admit(w, m, n_tokens, encoder_items, o);  // fail open
    r.eviction.decision = r.answer.detail;
    return r;
  }
  with_live_snapshot(w, [&](const mem_state& s) {
    r.answer = detail::admit_snapshot_inline(s, m, n_tokens, encoder_items, o);
    r.eviction.decision = r.answer.detail;
    if (r.answer.status == admit_status::admitted) return 0;
    const bool kv_evict = ladder_plan_from_state(s, ladder_config{}, o.policy).kv_evict;  // memory, not PSI
    r.eviction = admit_after_eviction(m.cost, r.answer.request, s, o.policy, kv_evict, request_kv_format(m), slot_tokens, n_slots,
                                      limits, out);
    return 0;
  });
  return r;
}

}  // namespace pnmem
