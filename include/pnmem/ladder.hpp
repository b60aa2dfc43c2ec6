// pnmem/ladder.hpp - the reactive degradation ladder: a level in, absolute limits out.
//
// The seed's pn_ladder_plan_for. Pure and stateless: no I/O, no allocation.
//
//   rung  name                   engages at  action
//   4a    force Q4 KV            WATCH       force_kv_q4 = true (for caches allocated from now on)
//   2     shrink concurrency     TIGHT       max_slots = cfg/2; CRITICAL -> 1
//   3     clamp prefill window   TIGHT       prefill_window = cfg/2; CRITICAL -> cfg/4
//   4b    KV eviction            TIGHT       kv_evict = true (a policy flag)
//
// Guarantees (each is a test): at OK the plan is the operator config; every rung
// only reduces; a higher level never relaxes what a lower one engaged;
// max_slots >= 1; a configured window of 0 means "no clamp" and stays 0, and a
// clamped window never rounds down to 0 (which would read as "no clamp");
// with ladder_disabled the values are those of the OK plan at every level.
//
// Rung 4a at KV-cache init: kv_allocation_for(plan, model, tokens) says which format a
// cache allocated now must be in (the model's compact format while the plan forces it,
// else its normal one: cost_model.hpp's normal_kv / compact_kv) and its bytes.
#pragma once

#include <cstdint>

#include "pnmem/cost_model.hpp"
#include "pnmem/detail/equality.hpp"
#include "pnmem/level.hpp"
#include "pnmem/mem_level.hpp"
#include "pnmem/mem_state.hpp"
#include "pnmem/policy.hpp"

namespace pnmem {

// What the operator configured: the plan at OK.
struct ladder_config {
  int max_slots = 1;       // decode slots; values below 1 are treated as 1
  int prefill_window = 0;  // max prefill tokens; 0 = no clamp (negative is treated as 0)
  bool kv_q4 = false;      // KV caches already configured as Q4
};

struct ladder_plan {
  mem_level level = mem_level::ok;  // the level this plan answers (the real one, even when disabled)
  int max_slots = 1;                // rung 2: concurrency ceiling, >= 1
  bool force_kv_q4 = false;         // rung 4a: new KV caches are Q4
  bool kv_evict = false;            // rung 4b: low-attention KV eviction allowed
  int prefill_window = 0;           // rung 3: max prefill tokens, 0 = no clamp
  bool degraded = false;            // some rung changed the operator config
  const char* note = "";            // one line for logs; a static string

  // Notes come from one inline table, so equal plans have the same pointer.
  PNMEM_DEFAULTED_EQUALITY(ladder_plan)
};

namespace detail {
inline constexpr const char* ladder_notes[] = {
    "ok: operator config",
    "watch: rung 4a: new KV caches use Q4",
    "tight: rungs 4a 2 3 4b: Q4 KV, slots/2, prefill window/2, KV eviction",
    "critical: rungs 4a 2 3 4b: Q4 KV, 1 slot, prefill window/4, KV eviction",
    "ladder disabled (PN_LADDER_DISABLE): operator config",
    "tight (PSI, memory not short): rungs 4a 2 3: Q4 KV, slots/2, prefill window/2; no KV eviction",
    "critical (PSI, memory not short): rungs 4a 2 3: Q4 KV, 1 slot, prefill window/4; no KV eviction",
};

// cfg/div, but a positive configured value never becomes 0 (= no clamp) or below 1.
constexpr int reduce_positive(int cfg, int div) noexcept {
  if (cfg <= 0) return cfg;
  const int v = cfg / div;
  return v < 1 ? 1 : v;
}

// The plan for a level; `evict` false: the level's rung 4b is held back (PSI alone raised it), and the
// note says so.
constexpr ladder_plan plan_for(mem_level level, const ladder_config& cfg, const policy& p, bool evict) noexcept {
  const int slots = cfg.max_slots < 1 ? 1 : cfg.max_slots;
  const int window = cfg.prefill_window < 0 ? 0 : cfg.prefill_window;

  ladder_plan plan;
  plan.level = level;
  plan.max_slots = slots;
  plan.force_kv_q4 = cfg.kv_q4;
  plan.kv_evict = false;
  plan.prefill_window = window;

  if (p.ladder_disabled) {
    plan.note = ladder_notes[4];
    return plan;
  }
  switch (level) {
    case mem_level::ok:
      break;
    case mem_level::watch:
      plan.force_kv_q4 = true;
      break;
    case mem_level::tight:
      plan.force_kv_q4 = true;
      plan.max_slots = reduce_positive(slots, 2);
      plan.prefill_window = reduce_positive(window, 2);
      plan.kv_evict = evict;
      break;
    case mem_level::critical:
      plan.force_kv_q4 = true;
      plan.max_slots = 1;
      plan.prefill_window = reduce_positive(window, 4);
      plan.kv_evict = evict;
      break;
  }
  const int idx = static_cast<int>(level);
  plan.note = ladder_notes[idx >= 0 && idx < mem_level_count ? idx : 0];
  if (!evict && level >= mem_level::tight) plan.note = ladder_notes[level == mem_level::critical ? 6 : 5];
  plan.degraded = plan.max_slots != slots || plan.prefill_window != window ||
                  plan.force_kv_q4 != cfg.kv_q4 || plan.kv_evict;
  return plan;
}
}  // namespace detail

constexpr ladder_plan ladder_plan_for(mem_level level, const ladder_config& cfg,
                                      const policy& p = default_policy) noexcept {
  return detail::plan_for(level, cfg, p, true);
}

// The seed's pn_ladder_plan_from_state: the plan for a snapshot's level, except that the evict rung
// (4b) follows the memory levels (level.hpp memory_level: host bytes, dies, the OS), not PSI, unless
// policy.evict_on_psi (PN_EVICT_ON_PSI): a box-wide stall halves slots and the window, and forces Q4,
// but does not make the engine drop KV for pressure its memory did not cause. ladder_plan_for, given
// a level alone, cannot tell what raised it and keeps the seed's rule.
constexpr ladder_plan ladder_plan_from_state(const mem_state& s, const ladder_config& cfg,
                                             const policy& p = default_policy) noexcept {
  // PSI alone: the stall is at TIGHT or worse and memory is not. (A level nothing in the snapshot
  // explains, set by hand or held by the dwell, keeps the seed's rule.)
  bool evict = true;
  if (s.level >= mem_level::tight && !p.evict_on_psi && !p.ladder_disabled) {
    const level_report r = explain_level(s, p);
    evict = !(memory_level(r) < mem_level::tight && r.psi_level >= mem_level::tight);
  }
  return detail::plan_for(s.level, cfg, p, evict);
}

// A KV cache about to be allocated: the format it must be in, and its bytes.
struct kv_allocation {
  kv_format format = kv_format::fp32;
  std::uint64_t bytes = 0;  // KV bytes of `tokens` tokens of one sequence in `format`

  PNMEM_DEFAULTED_EQUALITY(kv_allocation)
};

// Rung 4a at KV-cache init (the seed asks the ladder when it allocates a cache): a cache allocated
// now is in the model's compact format while the plan forces it (force_kv_q4: WATCH or worse, or a
// config already in it), else in the model's normal format; its bytes for `tokens` tokens of one
// sequence are kv_bytes in that format (sliding layers stop at their window; per-sequence state is
// not KV: add state_bytes_per_seq). The format is the cache's for life: a live cache is never
// converted, so it grows by kv_bytes(model, format, n) in the format it was allocated in.
constexpr kv_allocation kv_allocation_for(const ladder_plan& plan, const model_cost& model,
                                          std::uint64_t tokens) noexcept {
  const kv_format f = plan.force_kv_q4 ? model.compact_kv : model.normal_kv;
  return {f, kv_bytes(model, f, tokens)};
}

// The seed's model: fp32 (40960 B per token) at OK, its Q4 (5898 B per token) once rung 4a engages.
constexpr kv_allocation kv_allocation_for(const ladder_plan& plan, std::uint64_t tokens) noexcept {
  return kv_allocation_for(plan, seed_model_cost, tokens);
}

}  // namespace pnmem
