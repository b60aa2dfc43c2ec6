// pnmem/eviction_admission.hpp - an admission that may make room by evicting KV (rung 4b).
//
// At TIGHT and worse the ladder lets the engine evict KV rows of running slots (ladder.hpp, kv_evict).
// A request that admission refuses or caps for host memory may then still start in full once the
// running slots give some of their KV back. admit_after_eviction answers both at once:
//
//   decision        admit_request's answer on the snapshot as it is (admission.hpp), unchanged
//   after_eviction  the request is admitted in full once `evict_bytes` are evicted, as `plan` says
//                   (eviction_budget.hpp: every slot longer than plan.cut_to cut to it, none below
//                   its floor)
//
// Eviction is considered only where it can help: rung 4b on, a host-path request (its KV in host
// RAM, like the running slots'), refused or capped because host memory binds (host_budget or
// host_reserve); not for a PSI stall, a window, a die's VRAM, or a bad request. The bytes short
// are what makes MemAvailable less the reserve cover the request's need: need + reserve - avail
// (at least one byte past the reserve). A request whose die also bounds it must fit the die as it is.
//
// Pure, constexpr, no allocation; C++17.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "pnmem/admission.hpp"
#include "pnmem/cost_model.hpp"
#include "pnmem/detail/equality.hpp"
#include "pnmem/detail/saturating.hpp"
#include "pnmem/eviction_budget.hpp"
#include "pnmem/mem_state.hpp"
#include "pnmem/policy.hpp"

namespace pnmem {

struct eviction_admission {
  admit_result decision{};        // admit_request's answer without eviction
  bool considered = false;        // eviction could help this decision (see the top of this file)
  bool after_eviction = false;    // admitted in full once evict_bytes are evicted as `plan` says
  std::uint64_t evict_bytes = 0;  // what the request is short of (considered only)
  eviction_plan plan{};           // where those bytes come from (considered only)

  PNMEM_DEFAULTED_EQUALITY(eviction_admission)
};

// admit_request(m, rq, s, p), and when eviction could help (kv_evict: the ladder's rung 4b at the
// snapshot's level), whether evicting from the running slots (slot_tokens[0 .. n_slots): the tokens
// each holds, their KV in `running_kv`) makes room for the whole request. `out`: n_slots answers
// (each slot's keep tokens and bytes), or nullptr.
constexpr eviction_admission admit_after_eviction(const model_cost& m, const request_spec& rq, const mem_state& s,
                                                  const policy& p, bool kv_evict, kv_format running_kv,
                                                  const int* slot_tokens, int n_slots, const eviction_limits& l,
                                                  keep_budget_answer* out) noexcept {
  eviction_admission a;
  a.decision = admit_request(m, rq, s, p);
  const admit_result& r = a.decision;
  if (!kv_evict || rq.gpu_resident || r.verdict == verdict::admit) return a;
  if (r.reason != admit_reason::host_budget && r.reason != admit_reason::host_reserve) return a;
  if (!detail::host_known(s)) return a;
  // A die that bounds the host path must hold the whole request already: eviction frees host RAM.
  if (rq.die != no_die && valid_die(s, rq.die)) {
    const auto i = static_cast<std::size_t>(rq.die);
    if (s.per_die_budget_bytes[i] != 0 && s.per_die_free_bytes[i] < r.need_bytes) return a;
  }
  const std::uint64_t reserve = host_reserve_bytes(s, p);
  const std::uint64_t wanted = detail::sat_add(r.need_bytes, reserve);
  std::uint64_t short_by = wanted > s.host_avail_bytes ? wanted - s.host_avail_bytes : 0;
  if (s.host_avail_bytes <= reserve) short_by = std::max(short_by, reserve - s.host_avail_bytes + 1);
  a.considered = true;
  a.evict_bytes = short_by;
  a.plan = plan_eviction(m, running_kv, slot_tokens, n_slots, short_by, l, out);
  a.after_eviction = a.plan.enough;
  return a;
}

}  // namespace pnmem
