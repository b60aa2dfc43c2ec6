// pnmem/level.hpp - from a snapshot's numbers to one pressure level.
//
// The seed's tables (pn_memwatch.c derive_level), exactly:
//
//   host:  avail <= reserve            CRITICAL      die (budget 0 is skipped):
//          slack < reserve/4           TIGHT           free == 0          CRITICAL
//          slack < reserve             WATCH           free < budget/16   TIGHT
//          otherwise                   OK              free < budget/8    WATCH
//   PSI:   full >= 15 %                CRITICAL        otherwise          OK
//          full > 0                    >= TIGHT
//          some >= 10 %                >= TIGHT      level = worst of host, PSI, dies
//          some > 0                    >= WATCH
//
// where slack = avail - reserve, and reserve = max(1 GiB, 15 % of the total), the 1 GiB minimum
// scaled down to a quarter of the total where the total is a container's limit (policy.hpp
// host_reserve_bytes(s, p)). PSI "some", and "full > 0", are read as the worse of avg10 and the
// stall rate of the last sample interval (avg10 lags by seconds; the rate sees a stall within one
// poll, and the avg10 decay the seed relies on stays). The Linux sampler's rate is 0 for a stall the
// kernel's averages never register (under 1 % of the last 2 s: psi_window.hpp psi_stall_registers), so
// "full > 0" means what it means for avg10. CRITICAL needs the full stall confirmed: avg10,
// or the rate over the policy's window (psi_full_window_ms, >= 2 s: psi_window.hpp), at or over the
// threshold. One short interval of stall, however deep, is at most TIGHT (the seed's "a transient
// stall only reaches TIGHT").
// The OS's own verdict (macOS memorystatus) joins the worst-of. A host total of 0 means the host was not sampled
// (like a die with budget 0): its byte bands are skipped rather than read as
// "0 bytes available", so a missing sample never produces a false CRITICAL.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "pnmem/mem_level.hpp"
#include "pnmem/mem_state.hpp"
#include "pnmem/policy.hpp"

namespace pnmem {

namespace detail {
// The seed's host bands around a reserve; a total of 0 (not sampled) is skipped.
constexpr mem_level host_bands(std::uint64_t host_total_bytes, std::uint64_t host_avail_bytes,
                               std::uint64_t reserve) noexcept {
  if (host_total_bytes == 0) return mem_level::ok;
  if (host_avail_bytes <= reserve) return mem_level::critical;
  const std::uint64_t slack = host_avail_bytes - reserve;
  if (slack < reserve / 4) return mem_level::tight;
  if (slack < reserve) return mem_level::watch;
  return mem_level::ok;
}
}  // namespace detail

// A whole box's host level: the reserve of its MemTotal (the seed's rule).
constexpr mem_level host_level(std::uint64_t host_total_bytes, std::uint64_t host_avail_bytes,
                               const policy& p = default_policy) noexcept {
  return detail::host_bands(host_total_bytes, host_avail_bytes, box_reserve_bytes(host_total_bytes, p));
}

// A snapshot's host level: its own reserve (policy.hpp host_reserve_bytes(s, p): scaled down where the
// total is a small container's limit). What the level and admission use.
constexpr mem_level host_level(const mem_state& s, const policy& p = default_policy) noexcept {
  return detail::host_bands(s.host_total_bytes, s.host_avail_bytes, host_reserve_bytes(s, p));
}

// full_now_pct: any full stall seen now (TIGHT when above 0); full_confirmed_pct: a stall that held
// (CRITICAL at or over the threshold). The seed's form passes avg10 for both.
constexpr mem_level psi_level(double some_pct, double full_now_pct, double full_confirmed_pct,
                              const policy& p = default_policy) noexcept {
  if (psi_at_least(full_confirmed_pct, p.psi_full_reject_bp)) return mem_level::critical;
  // Any full stall the kernel registers, even a decaying blip after a model load, is TIGHT.
  if (full_now_pct > 0.0 || full_confirmed_pct > 0.0) return mem_level::tight;
  if (psi_at_least(some_pct, p.psi_some_tight_bp)) return mem_level::tight;
  if (some_pct > 0.0) return mem_level::watch;
  return mem_level::ok;
}

// The seed's pn_psi_level: avg10 both confirms and shows the stall.
constexpr mem_level psi_level(double some_avg10_pct, double full_avg10_pct,
                              const policy& p = default_policy) noexcept {
  return psi_level(some_avg10_pct, full_avg10_pct, full_avg10_pct, p);
}

constexpr mem_level die_level(std::uint64_t free_bytes, std::uint64_t budget_bytes,
                              const policy& p = default_policy) noexcept {
  if (budget_bytes == 0) return mem_level::ok;  // not measured: skipped
  if (free_bytes == 0) return mem_level::critical;
  // A zero divisor in a hand-built policy disables that band instead of dividing by zero.
  if (p.die_tight_divisor != 0 && free_bytes < budget_bytes / p.die_tight_divisor) {
    return mem_level::tight;
  }
  if (p.die_watch_divisor != 0 && free_bytes < budget_bytes / p.die_watch_divisor) {
    return mem_level::watch;
  }
  return mem_level::ok;
}

inline constexpr int no_die = -1;

namespace detail {
// The larger of two percentages, where a NaN never wins over a number.
constexpr double worse_pct(double a, double b) noexcept {
  if (!(a >= b)) return b == b ? b : a;
  return a;
}
}  // namespace detail

// The PSI percentages a snapshot's level and admission go by.
constexpr double psi_some_pct(const mem_state& s) noexcept {
  return detail::worse_pct(s.host_psi_some_avg10, s.host_psi_some_rate);
}
// The window's rate, counted only while the last interval stalled too: the window confirms a stall
// going on now; a stall that has ended (one in the window's first seconds after start, or a burst
// the window still holds) never raises the level on its own. avg10 keeps its own say as it decays.
constexpr double psi_full_window_pct(const mem_state& s) noexcept {
  return s.host_psi_full_rate > 0.0 ? s.host_psi_full_sustained : 0.0;
}
// Full stall seen now: avg10, the last interval, or the window while it goes on (TIGHT when above 0).
constexpr double psi_full_pct(const mem_state& s) noexcept {
  return detail::worse_pct(detail::worse_pct(s.host_psi_full_avg10, s.host_psi_full_rate), psi_full_window_pct(s));
}
// Full stall that held: avg10, or the rate over the policy's window (while it goes on). What is CRITICAL
// and what rejects (admission.hpp's psi_stall) at or over psi_full_reject_bp; one interval's rate is not in it.
constexpr double psi_full_confirmed_pct(const mem_state& s) noexcept {
  return detail::worse_pct(s.host_psi_full_avg10, psi_full_window_pct(s));
}

// Every input of the level and the part each played: what `pnmem level` prints
// and what an operator reads to see *why* the box is where it is.
struct level_report {
  mem_level level = mem_level::ok;       // worst of the parts below
  mem_level host_level = mem_level::ok;  // byte bands of host memory
  mem_level psi_level = mem_level::ok;   // PSI escalation
  mem_level os_level = mem_level::ok;    // the OS's own verdict (macOS)
  mem_level worst_die_level = mem_level::ok;
  int worst_die = no_die;                // die with the worst level (lowest index on ties); no_die if none counted
  int n_dies = 0;                        // dies considered (n_dies clamped to max_dies)
  std::array<mem_level, max_dies> die_levels{};
  std::uint64_t host_reserve_bytes = 0;
};

namespace detail {
// The one definition of the level. With `r`, every part is recorded in it
// (explain_level); without, the walk stops at the first CRITICAL (derive_level,
// on every publish: the recording branches fold away after inlining).
constexpr mem_level level_of(const mem_state& s, const policy& p, level_report* r) noexcept {
  const mem_level host = host_level(s, p);
  const mem_level psi = psi_level(psi_some_pct(s), psi_full_pct(s), psi_full_confirmed_pct(s), p);
  mem_level l = worst_of(worst_of(host, psi), s.host_os_level);
  const int n = die_count(s);
  if (r != nullptr) {
    r->host_reserve_bytes = host_reserve_bytes(s, p);
    r->host_level = host;
    r->psi_level = psi;
    r->os_level = s.host_os_level;
    r->n_dies = n;
  }
  for (int i = 0; i < n; ++i) {
    if (r == nullptr && l == mem_level::critical) break;  // nothing is worse
    const auto idx = static_cast<std::size_t>(i);
    const mem_level d = die_level(s.per_die_free_bytes[idx], s.per_die_budget_bytes[idx], p);
    l = worst_of(l, d);
    if (r == nullptr) continue;
    r->die_levels[idx] = d;
    if (s.per_die_budget_bytes[idx] != 0 && (r->worst_die == no_die || d > r->worst_die_level)) {
      r->worst_die = i;
      r->worst_die_level = d;
    }
  }
  if (r != nullptr) r->level = l;
  return l;
}
}  // namespace detail

constexpr level_report explain_level(const mem_state& s, const policy& p = default_policy) noexcept {
  level_report r;
  detail::level_of(s, p, &r);
  return r;
}

// The seed's derive_level: max(host level, PSI, every die), and the OS's verdict.
constexpr mem_level derive_level(const mem_state& s, const policy& p = default_policy) noexcept {
  return detail::level_of(s, p, nullptr);
}

// The level memory itself is at: the host's byte bands, the dies and the OS's verdict, without PSI
// (a stall, box-wide where the kernel has no per-cgroup PSI, is pressure on time, not a shortage of
// bytes this process can give back). What the ladder's evict rung follows (ladder.hpp), unless
// policy.evict_on_psi. No hysteresis: the bands as they stand.
constexpr mem_level memory_level(const level_report& r) noexcept {
  return worst_of(worst_of(r.host_level, r.os_level), r.worst_die_level);
}
constexpr mem_level memory_level(const mem_state& s, const policy& p = default_policy) noexcept {
  return memory_level(explain_level(s, p));
}

// The snapshot with its level re-derived (no hysteresis): what a publisher without
// a watcher stores.
constexpr mem_state with_derived_level(mem_state s, const policy& p = default_policy) noexcept {
  s.level = derive_level(s, p);
  s.raw_level = s.level;
  return s;
}

// Why a snapshot has no host numbers (host_total_bytes 0: every host decision fails open on it), in
// words an operator can act on; empty when the host was read. "never sampled" (no sample yet),
// "meminfo unreadable" (it exists, but could not be read or parsed), "meminfo not found" (no
// <root>/proc/meminfo), and the same for macOS's VM statistics.
constexpr std::string_view host_unsampled_reason(const mem_state& s) noexcept {
  if (s.host_total_bytes != 0) return {};
  if (s.seq == 0) return "never sampled";
  const sample_provenance& p = s.provenance;
  if (p.failed(host_source::meminfo)) return "meminfo unreadable";
  if (p.failed(host_source::macos_vm)) return "macOS VM statistics unreadable";
  if (p.read(host_source::meminfo) || p.read(host_source::macos_vm)) return "no memory total";
  return "meminfo not found";
}

}  // namespace pnmem
