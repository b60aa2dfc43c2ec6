// pnmem/policy.hpp - every number the decisions use, as data.
//
// The defaults are the seed's. A policy is a plain aggregate of integers and a
// bool, so it can be fixed at compile time (a constexpr value, or a template
// argument: it is a structural type) or built at run time (see config.hpp for
// the seed's environment variables).
//
//   constexpr pnmem::policy strict = [] {
//     auto p = pnmem::default_policy;
//     p.host_reserve_min_bytes = 2 * pnmem::GiB;
//     return p;
//   }();
//   static_assert(pnmem::box_reserve_bytes(8 * pnmem::GiB, strict) == 2 * pnmem::GiB);
#pragma once

#include <cstdint>
#include <string_view>

#include "pnmem/detail/equality.hpp"
#include "pnmem/detail/saturating.hpp"
#include "pnmem/mem_state.hpp"
#include "pnmem/units.hpp"

namespace pnmem {

// Percentages are held in basis points (1/100 of a percent: 1500 = 15.00 %).
// The kernel prints PSI averages with two decimals, so this is exact for every
// value it can report, and keeps policy an integer-only structural type.
using basis_points = std::uint32_t;
inline constexpr basis_points bp_per_percent = 100;
inline constexpr basis_points bp_whole = 100 * bp_per_percent;

// What a request that needs no new host bytes (a GPU-resident one, or one of an engine that allocated
// its KV at load: pnmem_model_init_preallocated) gets while host memory is inside the reserve
// (admission.hpp's host_reserve refusal). PN_ZERO_COST, or the engine's own choice (C: pnmem_model's
// zero_cost, Python: Model(zero_cost=...)). A PSI stall refuses it whatever the rule: starting work deepens
// a stall, and that is not about bytes. docs/engine-integration.md argues the default.
//   hold    (the default) refused now, held by the waiting calls: pnmem_admit_wait / admit_wait wait up to
//           the engine's patience for the first sample with host memory above the reserve, and the
//           back-pressure gate holds it (a TIGHT push) instead of shedding it (CRITICAL): served when the
//           box recovers, a 503 only when the engine's patience runs out
//   admit   admitted now (0 B needed): the engine vouches that a request costs the host nothing
//   reject  refused now, and the gate sheds it (the seed's rule: every request at the reserve is refused)
enum class zero_cost_rule : std::uint8_t { hold, admit, reject };
inline constexpr int zero_cost_rule_count = 3;

constexpr std::string_view to_string(zero_cost_rule r) noexcept {
  switch (r) {
    case zero_cost_rule::hold: return "hold";
    case zero_cost_rule::admit: return "admit";
    case zero_cost_rule::reject: return "reject";
  }
  return "invalid";
}

struct policy {
  // Host reserve = max(host_reserve_min_bytes, host_reserve_bp of MemTotal); in a container whose
  // limit is the total, the minimum is at most a quarter of the limit (host_reserve_bytes below).
  // PN_HOST_RESERVE_BYTES=X sets min = X and bp = 0: the reserve is exactly X.
  std::uint64_t host_reserve_min_bytes = 1 * GiB;
  basis_points host_reserve_bp = 1500;

  // PSI escalation: full avg10 >= this is CRITICAL and rejects requests
  // (PN_PSI_FULL_REJECT). some avg10 >= psi_some_tight_bp is at least TIGHT.
  basis_points psi_full_reject_bp = 1500;
  basis_points psi_some_tight_bp = 1000;

  // The window a fresh full-stall rate must hold over before it is CRITICAL (or rejects),
  // in ms; at least 2000 (the kernel trigger's unprivileged window). A stall over a shorter
  // span is at most TIGHT. 3 s: a burst needs 450 ms of whole-box stall (15 % of the window)
  // to confirm, so a model load's few hundred ms blip does not shed work; over exactly 2 s a
  // 300 ms burst would already read 15 %. avg10 at or over the threshold confirms on its own.
  std::uint32_t psi_full_window_ms = 3000;

  // Die budget = total VRAM at boot - die reserve (PN_DIE_RESERVE_BYTES).
  // Free below budget/die_tight_divisor is TIGHT, below budget/die_watch_divisor WATCH.
  std::uint64_t die_reserve_bytes = 1 * GiB;
  std::uint32_t die_tight_divisor = 16;
  std::uint32_t die_watch_divisor = 8;

  // Bounded GPU-path activation scratch a model needs on a die beside its
  // weights and KV (seed: PN_ADMIT_DIE_SCRATCH_BYTES, 1.5 GiB).
  std::uint64_t die_scratch_bytes = 3 * GiB / 2;

  // Host dequant/staging burst of a weight upload (PN_LOAD_SPIKE_BYTES):
  // 2.4 GiB, floored to a whole byte.
  std::uint64_t load_spike_bytes = 12 * GiB / 5;

  // PN_LADDER_DISABLE: the ladder plans the operator config at every level.
  bool ladder_disabled = false;

  // PN_EVICT_ON_PSI: rung 4b (KV eviction) engages at TIGHT whatever raised the level, PSI included
  // (the seed's rule). Off by default: the evict rung follows the memory levels (host bytes, dies,
  // the OS's verdict; level.hpp memory_level), since PSI is box-wide where the kernel has no
  // per-cgroup PSI and a neighbour's stall must not empty this engine's cache. Slots, window and Q4
  // still follow the level.
  bool evict_on_psi = false;

  // PN_ZERO_COST: a request that needs no new host bytes, while host memory is inside the reserve
  // (zero_cost_rule above).
  zero_cost_rule zero_cost = zero_cost_rule::hold;

  PNMEM_DEFAULTED_EQUALITY(policy)
};

// The built-in policy: the seed's numbers, whatever the environment says. The pure decisions default to
// it (they stay constexpr); the process's policy, PN_* applied, is pnmem::process_policy() (config.hpp).
inline constexpr policy default_policy{};

// Three names, one per rule (a single name for two rules once gave 1 GiB and 256 MiB in the same
// container):
//   box_reserve_bytes(total)        the seed's rule for a whole box (the total is MemTotal)
//   container_reserve_bytes(limit)  a container's (the total is its memory limit)
//   host_reserve_bytes(snapshot)    the one in force for a snapshot: whichever of the two its total is;
//                                   what every level and answer uses.

// The seed's reserve rule for a whole box (the total is MemTotal), computed without overflow for any
// total: max(host_reserve_min_bytes, host_reserve_bp of the total); with host_reserve_bp 0
// (PN_HOST_RESERVE_BYTES) exactly host_reserve_min_bytes.
constexpr std::uint64_t box_reserve_bytes(std::uint64_t host_total_bytes, const policy& p = default_policy) noexcept {
  const std::uint64_t share = detail::mul_div(host_total_bytes, p.host_reserve_bp, bp_whole);
  return share > p.host_reserve_min_bytes ? share : p.host_reserve_min_bytes;
}

// In a container the minimum is at most this share of the limit.
inline constexpr std::uint64_t container_reserve_min_divisor = 4;

// The reserve when the total is a container's memory limit: the minimum scales down with the limit,
//   max(min(host_reserve_min_bytes, limit / 4), host_reserve_bp of the limit),
// so a small container keeps a usable band (the seed's 1 GiB minimum would be the whole of a 1 GiB
// limit: CRITICAL for ever). A 1 GiB limit keeps 256 MiB; from 4 GiB up this is the whole-box rule.
// An exact reserve (host_reserve_bp 0: PN_HOST_RESERVE_BYTES) stays exact.
constexpr std::uint64_t container_reserve_bytes(std::uint64_t limit_bytes, const policy& p = default_policy) noexcept {
  if (p.host_reserve_bp == 0) return box_reserve_bytes(limit_bytes, p);
  policy scaled = p;
  const std::uint64_t cap = limit_bytes / container_reserve_min_divisor;
  if (cap < scaled.host_reserve_min_bytes) scaled.host_reserve_min_bytes = cap;
  return box_reserve_bytes(limit_bytes, scaled);
}

// The container's memory limit a snapshot carries: the tighter of cgroup_max_bytes and
// cgroup_high_bytes (0 = unset), what the Linux sampler bounds the total by; 0 when none is set.
constexpr std::uint64_t host_limit_bytes(const mem_state& s) noexcept {
  const std::uint64_t m = s.cgroup_max_bytes;
  const std::uint64_t h = s.cgroup_high_bytes;
  if (m == 0) return h;
  return h != 0 && h < m ? h : m;
}

// True when the snapshot's host total is that limit: the sampler's min(MemTotal, limit) took the limit
// (linux_sampler.hpp). Read from the snapshot's live fields (not the provenance, which a live read
// leaves out: live_state.hpp), so every reader of the same snapshot agrees.
constexpr bool host_total_is_limit(const mem_state& s) noexcept {
  const std::uint64_t limit = host_limit_bytes(s);
  return limit != 0 && s.host_total_bytes == limit;
}

// The host reserve of a snapshot: the container rule when its total is a container's limit, else the
// seed's whole-box rule. What every decision on a snapshot uses (levels, admission, the ledger, the
// metrics, the CLI, the C ABI), so their answers agree.
[[gnu::always_inline]] constexpr std::uint64_t host_reserve_bytes(const mem_state& s,
                                                                   const policy& p = default_policy) noexcept {
  return host_total_is_limit(s) ? container_reserve_bytes(s.host_total_bytes, p)
                                : box_reserve_bytes(s.host_total_bytes, p);
}

// A PSI average (percent, as the kernel prints it) against a threshold in basis
// points. NaN and negative values never reach a threshold: garbage is not pressure.
constexpr bool psi_at_least(double avg10_pct, basis_points threshold_bp) noexcept {
  return avg10_pct >= static_cast<double>(threshold_bp) / static_cast<double>(bp_per_percent);
}

}  // namespace pnmem
