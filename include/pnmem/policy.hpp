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
//   static_assert(pnmem::host_reserve_bytes(8 * pnmem::GiB, strict) == 2 * pnmem::GiB);
#pragma once

#include <cstdint>

#include "pnmem/detail/saturating.hpp"
#include "pnmem/units.hpp"

namespace pnmem {

// Percentages are held in basis points (1/100 of a percent: 1500 = 15.00 %).
// The kernel prints PSI averages with two decimals, so this is exact for every
// value it can report, and keeps policy an integer-only structural type.
using basis_points = std::uint32_t;
inline constexpr basis_points bp_per_percent = 100;
inline constexpr basis_points bp_whole = 100 * bp_per_percent;

struct policy {
  // Host reserve = max(host_reserve_min_bytes, host_reserve_bp of MemTotal).
  // PN_HOST_RESERVE_BYTES=X sets min = X and bp = 0: the reserve is exactly X.
  std::uint64_t host_reserve_min_bytes = 1 * GiB;
  basis_points host_reserve_bp = 1500;

  // PSI escalation: full avg10 >= this is CRITICAL and rejects requests
  // (PN_PSI_FULL_REJECT). some avg10 >= psi_some_tight_bp is at least TIGHT.
  basis_points psi_full_reject_bp = 1500;
  basis_points psi_some_tight_bp = 1000;

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

  friend constexpr bool operator==(const policy&, const policy&) = default;
};

inline constexpr policy default_policy{};

// The seed's reserve rule, computed without overflow for any MemTotal.
constexpr std::uint64_t host_reserve_bytes(std::uint64_t host_total_bytes,
                                           const policy& p = default_policy) noexcept {
  const std::uint64_t share = detail::mul_div(host_total_bytes, p.host_reserve_bp, bp_whole);
  return share > p.host_reserve_min_bytes ? share : p.host_reserve_min_bytes;
}

// A PSI average (percent, as the kernel prints it) against a threshold in basis
// points. NaN and negative values never reach a threshold: garbage is not pressure.
constexpr bool psi_at_least(double avg10_pct, basis_points threshold_bp) noexcept {
  return avg10_pct >= static_cast<double>(threshold_bp) / static_cast<double>(bp_per_percent);
}

}  // namespace pnmem
