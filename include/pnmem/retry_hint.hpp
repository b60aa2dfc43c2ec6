// pnmem/retry_hint.hpp - when asking again may get more: a Retry-After for a denied or capped answer.
//
// An HTTP server that answers 503 "memory pressure, retry later" wants a Retry-After. pnmem cannot know
// the future, but it knows what has to change for the answer to change, and how fast that is happening.
// A hint is that estimate, in milliseconds, with the reason it rests on. It is a hint: the answer to
// the retry is a new decision on the box as it is then, and may be the same denial.
//
//   reason of the answer        what must change                    the estimate (basis)
//   psi_stall                   the confirmed full stall falls      avg10 decays as e^(-t/10 s), if the
//                               below psi_full_reject               stall stopped now (the window counts
//                                                                   only while it goes on) (psi_decay)
//   host_budget / host_reserve  the bytes short come back           the shortfall at the rate MemAvailable
//                                                                   is rising (host_recovery), or the time
//                                                                   reservations with a time to live take
//                                                                   to expire enough of them
//                                                                   (pending_expiry): the sooner
//   die_vram                    the die's bytes short come back     buffers released and waiting on
//                                                                   in-flight work cover it: the next
//                                                                   sample (die_retiring)
//   prefill_window (a cap)      the level steps below TIGHT         what is left of the dwell, when the raw
//                                                                   level is already below (level_dwell)
//
// When nothing pnmem sees is coming back (no reservation expiring, the raw level still high) the hint is
// a guess, and says so (retry_hint::guess()), from how long the pressure has held (mem_state::
// level_since_ns, the level's age):
//   memory flat          (no_recovery) as long again as it has held, at least retry_guess_min_ms: a
//                        co-tenant that has held the box for 2 s is as likely as not to hold it 2 s more,
//                        and a client told so backs off as the hold lengthens (1 s, 2 s, 4 s, ...), never
//                        hammering a box held for minutes, never idling long after a short hold ends;
//   memory falling       (memory_falling) something is still growing (a co-tenant, a page-cache burst):
//                        nothing comes back while it grows: as long as the pressure has held, at least
//                        retry_fallback_ms;
// and retry_fallback_ms with either basis when the level's age is unknown (a snapshot built by hand).
// Every hint is at least the time to the
// watcher's next sample (nothing pnmem decides on changes before it) and at most retry_max_ms; never
// negative. An answer that a wait cannot improve (admitted whole, capped to the request's own window,
// a bad request) has the hint 0 with basis `none`; one whose need is more than the box could give with
// all its memory free (host total less the reserve; a die's budget) has 0 with basis `never_fits`: a
// server answers that with a refusal that is not "retry later" (HTTP 413 or 507, not 503).
//
// Pure: the snapshot, the policy and what the caller knows besides (the clock, the next sample, the
// ledger's expiries) in, the hint out. engine/retry_after.hpp fills those in from a watcher and a ledger.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string_view>

#include "pnmem/admission.hpp"
#include "pnmem/detail/saturating.hpp"
#include "pnmem/level.hpp"
#include "pnmem/mem_level.hpp"
#include "pnmem/mem_state.hpp"
#include "pnmem/policy.hpp"

namespace pnmem {

enum class retry_basis : std::uint8_t {
  none,            // no wait improves the answer (admitted whole, capped by its own window, a bad request)
  psi_decay,       // a full stall: the time the confirmed stall needs to fall below the reject line
  host_recovery,   // host bytes short: the shortfall at the rate MemAvailable is rising
  pending_expiry,  // host bytes short: reservations with a time to live give back enough when they expire
  die_retiring,    // die bytes short: released buffers waiting on in-flight work cover it (next sample)
  level_dwell,     // capped to the ladder's prefill window: the dwell left before the level steps down
  no_recovery,     // short, and nothing pnmem sees is coming back, memory flat: a guess from the pressure's age
  never_fits,      // more than the box (or the die) can ever give, the reserve kept: waiting does not help (0)
  memory_falling,  // short, and available memory still falling (something growing): a guess, at least 10 s
};
inline constexpr int retry_basis_count = 9;

// A hint with this basis is a guess (retry_hint::guess()): it rests on how long the pressure has held,
// not on anything pnmem sees coming back. The C ABI (pnmem_retry_basis_is_guess) and Python
// (RetryHint.guess) answer with this.
constexpr bool retry_basis_is_guess(retry_basis b) noexcept {
  return b == retry_basis::no_recovery || b == retry_basis::memory_falling;
}

constexpr std::string_view to_string(retry_basis b) noexcept {
  switch (b) {
    case retry_basis::none: return "none";
    case retry_basis::psi_decay: return "psi_decay";
    case retry_basis::host_recovery: return "host_recovery";
    case retry_basis::pending_expiry: return "pending_expiry";
    case retry_basis::die_retiring: return "die_retiring";
    case retry_basis::level_dwell: return "level_dwell";
    case retry_basis::no_recovery: return "no_recovery";
    case retry_basis::never_fits: return "never_fits";
    case retry_basis::memory_falling: return "memory_falling";
  }
  return "invalid";
}

// The most a hint says: a client told to wait longer would miss a recovery pnmem did not foresee.
inline constexpr std::int64_t retry_max_ms = 60'000;
// The hint when nothing is coming back and the pressure's age is unknown, and the least while memory is
// still falling: avg10's horizon, the slowest signal pnmem reads.
inline constexpr std::int64_t retry_fallback_ms = 10'000;
// The least a guess from a flat hold says: a client retrying faster learns nothing new.
inline constexpr std::int64_t retry_guess_min_ms = 1'000;
// PSI's avg10 is an exponential average with a 10 s time constant (the kernel's psi.c).
inline constexpr double psi_avg10_tau_s = 10.0;

struct retry_hint {
  std::int64_t after_ms = 0;  // >= 0; 0 with basis none: waiting does not help
  retry_basis basis = retry_basis::none;

  // Only a guess: nothing pnmem sees is coming back (retry_basis_is_guess).
  constexpr bool guess() const noexcept { return retry_basis_is_guess(basis); }

  friend constexpr bool operator==(const retry_hint& a, const retry_hint& b) noexcept {
    return a.after_ms == b.after_ms && a.basis == b.basis;
  }
  friend constexpr bool operator!=(const retry_hint& a, const retry_hint& b) noexcept { return !(a == b); }
};

// A hint as an HTTP Retry-After header's whole seconds: rounded up, so a wait of any length is at least
// 1 s (0 would make a client retry a pressured box at once); 0 ms (no wait helps) is 0, a negative value
// 0. The C ABI (pnmem_retry_after_seconds) and Python (RetryHint.seconds) round with this.
constexpr std::int64_t retry_after_seconds(std::int64_t after_ms) noexcept {
  return after_ms <= 0 ? 0 : after_ms / 1000 + (after_ms % 1000 != 0 ? 1 : 0);
}
constexpr std::int64_t retry_after_seconds(const retry_hint& h) noexcept { return retry_after_seconds(h.after_ms); }

// What the hint needs besides the snapshot and the policy (engine/retry_after.hpp fills it in).
struct retry_outlook {
  std::int64_t now_ns = 0;                // the snapshot's clock now (steady, as mem_state's times)
  std::int64_t next_sample_ms = 100;      // the watcher's poll interval at pressure: the least a hint says
  // When reservations with a time to live will have given back the bytes short (the ledger's
  // expiry_covering); -1: no expiring reservations cover it.
  std::int64_t expiry_covering_ns = -1;
};

namespace detail {

constexpr std::int64_t clamp_hint_ms(double ms, std::int64_t floor_ms) noexcept {
  const std::int64_t lo = floor_ms < 0 ? 0 : (floor_ms > retry_max_ms ? retry_max_ms : floor_ms);
  if (!(ms < static_cast<double>(retry_max_ms))) return retry_max_ms;  // NaN and +inf too
  const double up = std::ceil(ms);
  const std::int64_t v = up <= 0.0 ? 0 : static_cast<std::int64_t>(up);
  return v < lo ? lo : v;
}

// Seconds until the confirmed full stall (level.hpp psi_full_confirmed_pct) is below `threshold_pct`,
// if no new stall happens from now on.
inline double psi_clear_s(const mem_state& s, double threshold_pct, std::uint32_t window_ms) noexcept {
  double t = 0.0;
  if (threshold_pct <= 0.0) return psi_avg10_tau_s;  // a zero threshold: no stall ever clears it
  if (s.host_psi_full_avg10 >= threshold_pct) {
    t = psi_avg10_tau_s * std::log(s.host_psi_full_avg10 / threshold_pct);
  }
  // The window's rate counts only while the last interval stalled (level.hpp psi_full_window_pct): with
  // no stall from now on it stops counting at the next sample, so avg10 alone sets the wait.
  (void)window_ms;
  return t;
}

// When nothing pnmem sees is coming back: the guess from the pressure's age (the comment at the top);
// `falling`: the memory short is still going (host MemAvailable's trend below 0).
constexpr retry_hint guess_hint(const mem_state& s, const retry_outlook& o, bool falling) noexcept {
  const retry_basis basis = falling ? retry_basis::memory_falling : retry_basis::no_recovery;
  if (s.level_since_ns <= 0 || o.now_ns < s.level_since_ns) {
    return {clamp_hint_ms(static_cast<double>(retry_fallback_ms), o.next_sample_ms), basis};
  }
  const double age_ms = static_cast<double>(o.now_ns - s.level_since_ns) / 1e6;
  const double least = static_cast<double>(falling ? retry_fallback_ms : retry_guess_min_ms);
  return {clamp_hint_ms(age_ms > least ? age_ms : least, o.next_sample_ms), basis};
}

}  // namespace detail

// The bytes an answer denied or capped for memory was short by: host_budget and die_vram its need
// less its limit; host_reserve (whose limit is what was available) what must come back for the need
// to fit above the reserve. At least 1 for those reasons; 0 for every other answer.
constexpr std::uint64_t retry_shortfall_bytes(const admit_result& r, const mem_state& s, const policy& p) noexcept {
  if (r.verdict == verdict::admit) return 0;
  std::uint64_t want = 0;
  switch (r.reason) {
    case admit_reason::host_budget:
    case admit_reason::die_vram: want = r.need_bytes; break;
    case admit_reason::host_reserve:
      want = detail::sat_add(detail::sat_add(host_reserve_bytes(s, p), r.need_bytes), 1);
      break;
    default: return 0;
  }
  return want > r.limit_bytes ? want - r.limit_bytes : 1;
}

// The hint for an answer `r` given on snapshot `s` under policy `p`.
inline retry_hint retry_after(const admit_result& r, const mem_state& s, const policy& p,
                              const retry_outlook& o) noexcept {
  using detail::clamp_hint_ms;
  const std::int64_t floor_ms = o.next_sample_ms;
  if (r.verdict == verdict::admit) return {};
  switch (r.reason) {
    case admit_reason::fits:
    case admit_reason::window:
    case admit_reason::bad_request:
    case admit_reason::not_watching:
    case admit_reason::not_sampled:
      return {};
    case admit_reason::psi_stall: {
      const double thr = static_cast<double>(p.psi_full_reject_bp) / 100.0;
      return {clamp_hint_ms(detail::psi_clear_s(s, thr, p.psi_full_window_ms) * 1000.0, floor_ms),
              retry_basis::psi_decay};
    }
    case admit_reason::host_reserve:
    case admit_reason::host_budget: {
      if (detail::host_known(s) && r.need_bytes > s.host_total_bytes - std::min(s.host_total_bytes, host_reserve_bytes(s, p))) {
        return {0, retry_basis::never_fits};
      }
      const std::uint64_t short_by = retry_shortfall_bytes(r, s, p);
      double best_ms = -1.0;
      retry_basis basis = retry_basis::no_recovery;
      if (s.host_avail_trend > 0.0) {
        best_ms = static_cast<double>(short_by) / s.host_avail_trend * 1000.0;
        basis = retry_basis::host_recovery;
      }
      if (o.expiry_covering_ns >= 0) {
        const double ms = o.expiry_covering_ns > o.now_ns ? static_cast<double>(o.expiry_covering_ns - o.now_ns) / 1e6 : 0.0;
        if (best_ms < 0.0 || ms < best_ms) {
          best_ms = ms;
          basis = retry_basis::pending_expiry;
        }
      }
      if (best_ms < 0.0) return detail::guess_hint(s, o, s.host_avail_trend < 0.0);
      return {clamp_hint_ms(best_ms, floor_ms), basis};
    }
    case admit_reason::die_vram: {
      if (valid_die(s, r.die)) {
        const std::uint64_t budget = s.per_die_budget_bytes[static_cast<std::size_t>(r.die)];
        if (budget != 0 && r.need_bytes > budget) return {0, retry_basis::never_fits};
      }
      const std::uint64_t short_by = retry_shortfall_bytes(r, s, p);
      if (valid_die(s, r.die) && s.per_die_retiring_bytes[static_cast<std::size_t>(r.die)] >= short_by) {
        return {clamp_hint_ms(0.0, floor_ms), retry_basis::die_retiring};
      }
      return detail::guess_hint(s, o, /*falling=*/false);  // the host's trend says nothing of a die
    }
    case admit_reason::prefill_window: {
      if (s.level_step_down_ns > 0 && s.raw_level < mem_level::tight) {
        const double ms = s.level_step_down_ns > o.now_ns ? static_cast<double>(s.level_step_down_ns - o.now_ns) / 1e6 : 0.0;
        return {clamp_hint_ms(ms, floor_ms), retry_basis::level_dwell};
      }
      // The clamp is gone already: ask again once a sample has been taken.
      if (s.level < mem_level::tight) return {clamp_hint_ms(0.0, floor_ms), retry_basis::level_dwell};
      return detail::guess_hint(s, o, s.host_avail_trend < 0.0);
    }
  }
  return {};
}

}  // namespace pnmem
