// pnmem/mem_state.hpp - one immutable snapshot of host and per-die memory.
//
// The seed's pn_mem_state, field for field, plus what the seed is blind to: when
// the sample was taken, the PSI stall rate of the last interval (avg10 lags by
// seconds), the OS's own pressure verdict (macOS), the level
// before hysteresis, and where the numbers came from.
// A plain value: trivially copyable so the watcher can publish it through a
// seqlock, and usable in constant expressions so engines can static_assert
// decisions over hand-written states.
#pragma once

#include <array>
#include <cstdint>
#include <type_traits>

#include "pnmem/mem_level.hpp"
#include "pnmem/provenance.hpp"

namespace pnmem {

inline constexpr int max_dies = 16;

struct mem_state {
  std::uint64_t host_total_bytes = 0;      // MemTotal (or the container's limit); 0 = host not sampled
  std::uint64_t host_avail_bytes = 0;      // MemAvailable: allocatable without swapping
  double host_psi_some_avg10 = 0.0;        // /proc/pressure/memory "some avg10", percent
  double host_psi_full_avg10 = 0.0;        // "full avg10", percent: whole-box stall
  std::uint64_t cgroup_current_bytes = 0;  // memory.current (0 if not in a cgroup)
  std::uint64_t cgroup_high_bytes = 0;     // memory.high (0 = "max"/unset)
  std::uint64_t cgroup_max_bytes = 0;      // memory.max  (0 = "max"/unset)
  int n_dies = 0;                          // dies [0, n_dies) are meaningful
  std::array<std::uint64_t, max_dies> per_die_free_bytes{};    // cudaMemGetInfo free per die
  std::array<std::uint64_t, max_dies> per_die_budget_bytes{};  // total - die reserve; 0 = die skipped
  std::array<std::uint64_t, max_dies> per_die_used_bytes{};    // the engine's own allocation tally
  mem_level level = mem_level::ok;         // derived: worst of host, PSI and every die (after hysteresis)
  std::uint64_t seq = 0;                   // monotonic snapshot counter
  std::int64_t sample_time_ns = 0;         // steady (monotonic) clock when sampled, ns

  // Beyond the seed. Zero values reproduce the seed's behaviour exactly.
  double host_psi_some_rate = 0.0;         // % of the last sample interval stalled ("some"), from total= deltas
                                           // (Linux: 0 under the kernel's resolution, psi_window.hpp)
  double host_psi_full_rate = 0.0;         // same for "full"
  // % of the last policy::psi_full_window_ms (or a little more) stalled ("full"), from the
  // watcher's history of total= readings; 0 until that much history exists. What confirms a
  // fresh stall as CRITICAL: one short interval's rate alone is at most TIGHT (level.hpp).
  double host_psi_full_sustained = 0.0;
  mem_level host_os_level = mem_level::ok; // the OS's own pressure verdict (macOS memorystatus); ok elsewhere
  mem_level raw_level = mem_level::ok;     // derived level before hysteresis
  // Bytes a die's owner has released but not yet freed (waiting on a retire list
  // for in-flight work): not free yet, and not counted in per_die_free_bytes.
  std::array<std::uint64_t, max_dies> per_die_retiring_bytes{};
  // Steady clock when each die's numbers were read (a die source: just before the sample polled it;
  // set_die: when it was called): memory allocated on the die after this instant is not in its numbers
  // yet (host_ledger's die reservations). 0 = never fed.
  std::array<std::int64_t, max_dies> per_die_read_ns{};
  // Steady clock just before the host sources were read (sample_time_ns moves on
  // every publish, set_die included): memory allocated after this instant is not
  // in the host numbers yet (engine/host_ledger.hpp). 0 = host never read.
  std::int64_t host_read_ns = 0;
  // Bytes per second MemAvailable has been changing lately (avail_trend.hpp: a 2 s weighted mean of the
  // poll intervals' rates); positive = memory coming back. 0 until two host reads. What a denied
  // request's retry hint divides its shortfall by (retry_hint.hpp).
  double host_avail_trend = 0.0;
  // Steady clock at which the published level steps down if the raw level stays below it until then
  // (the dwell: level_hysteresis.hpp); 0 = no step down pending (the raw level is not below, or no dwell).
  std::int64_t level_step_down_ns = 0;
  // Steady clock at which the published level became what it is (the watcher's first sample, or the last
  // level change): how long the pressure has held, what a retry hint guesses from when nothing pnmem sees
  // is coming back (retry_hint.hpp). 0 = unknown (a snapshot built by hand).
  std::int64_t level_since_ns = 0;
  sample_provenance provenance{};
};

static_assert(std::is_trivially_copyable_v<mem_state>);

// Number of dies a state really describes: n_dies clamped to [0, max_dies], so a
// corrupt count can never index past the arrays.
constexpr int die_count(int n_dies) noexcept { return n_dies < 0 ? 0 : (n_dies > max_dies ? max_dies : n_dies); }
constexpr int die_count(const mem_state& s) noexcept { return die_count(s.n_dies); }

constexpr bool valid_die(const mem_state& s, int die) noexcept {
  return die >= 0 && die < die_count(s);
}

// The snapshot's host numbers, in one list, each as (name, selector): `field(s)` is
// that member of `s`, for any struct that names its members the same way (mem_state,
// the C ABI's pnmem_state). The C ABI's snapshot and the CLI's JSON copy through it,
// so a host number added here reaches both:
//
//   pnmem::for_each_host_number([&](std::string_view name, auto field) { out[name] = field(s); });
template <class F>
constexpr void for_each_host_number(F&& f) {
  f("host_total_bytes", [](auto& s) -> auto& { return s.host_total_bytes; });
  f("host_avail_bytes", [](auto& s) -> auto& { return s.host_avail_bytes; });
  f("host_psi_some_avg10", [](auto& s) -> auto& { return s.host_psi_some_avg10; });
  f("host_psi_full_avg10", [](auto& s) -> auto& { return s.host_psi_full_avg10; });
  f("host_psi_some_rate", [](auto& s) -> auto& { return s.host_psi_some_rate; });
  f("host_psi_full_rate", [](auto& s) -> auto& { return s.host_psi_full_rate; });
  f("cgroup_current_bytes", [](auto& s) -> auto& { return s.cgroup_current_bytes; });
  f("cgroup_high_bytes", [](auto& s) -> auto& { return s.cgroup_high_bytes; });
  f("cgroup_max_bytes", [](auto& s) -> auto& { return s.cgroup_max_bytes; });
}

}  // namespace pnmem
