// pnmem/admission.hpp - may this request or model load start? admit, cap or reject, and why.
//
// The seed's pn_admission.c. Every result names its reason and, where a die
// decided it, the die; `need_bytes` / `limit_bytes` give the numbers behind it.
//
// admit_request decides in the seed's order:
//   1. PSI-full stall guard: full >= psi_full_reject                -> REJECT psi_stall
//      (full = the confirmed stall: the worse of avg10 and the rate over the policy's window,
//       psi_full_window_ms >= 2 s; one interval's rate alone never rejects: level.hpp)
//   2. GPU-resident fast path (host cost is 0):
//        host avail inside the reserve                              -> REJECT host_reserve (with the
//                                                                      zero-cost rule admit: on to the
//                                                                      window checks; policy.hpp)
//        n_prompt > max_window                                      -> CAP    window (fit = max_window)
//        n_prompt > prefill_window (the ladder's clamp)             -> CAP    prefill_window
//        otherwise                                                  -> ADMIT  fits
//   3. Host path: the model's host cost(n) (KV, per-sequence state, activation peak, and the
//      cross-attention KV of the request's encoder items) must fit
//      in host avail - reserve, and in the die's free VRAM when a die is named.
//        avail inside the reserve                                   -> REJECT host_reserve (a request
//                                                                      costing 0 B with the zero-cost
//                                                                      rule admit: ADMIT fits / CAP)
//        the whole prompt (or the window, if smaller) fits          -> ADMIT fits / CAP window | prefill_window
//        some shorter prefix fits (the largest, solved exactly)     -> CAP    host_budget | die_vram
//        nothing fits                                               -> REJECT host_budget | die_vram
//
// The host cost is the model's (cost_model.hpp): admit_request(model, ...) takes any model_cost, the
// overloads without one use the seed's. A CAP's fit_tokens is the largest window that fits: one more
// token would not.
// Two windows bound the prompt tokens admitted: max_window, the request's configured context window
// (a longer prompt is capped at every level: reason `window`), and prefill_window, the ladder's rung-3
// clamp at TIGHT or worse (engine/admit.hpp sets it; a prompt within max_window but longer than the
// clamp is capped while the box is under pressure: reason `prefill_window`). Where both are exceeded
// the reason is `window` (the request is too long whatever the level) and fit_tokens the smaller one.
// The host reserve is the snapshot's (policy.hpp host_reserve_bytes(s, p)).
// max_window <= 0 means no window limit. A host total of 0 means the host was
// not sampled: byte checks on the host are skipped (fail open, as the seed's
// engine wrapper does when no watcher runs), never read as "0 bytes free".
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

#include "pnmem/cost_model.hpp"
#include "pnmem/detail/cxx.hpp"
#include "pnmem/detail/equality.hpp"
#include "pnmem/detail/saturating.hpp"
#include "pnmem/host_room.hpp"
#include "pnmem/level.hpp"
#include "pnmem/mem_state.hpp"
#include "pnmem/policy.hpp"

namespace pnmem {

enum class verdict : std::uint8_t { admit, cap, reject };

enum class admit_reason : std::uint8_t {
  fits,          // everything asked for fits
  window,        // capped to the request's configured window (max_window), not by memory
  psi_stall,     // PSI full avg10 at or above the reject threshold
  host_reserve,  // host available memory already inside the reserve
  host_budget,   // host bytes above the reserve are too few
  die_vram,      // the die's free VRAM is too small (see `die`)
  bad_request,   // negative prompt, die out of range, no die to load onto
  // Capped to the ladder's prefill window (rung 3, TIGHT or worse: request_spec::prefill_window), not
  // by memory: the prompt is within the configured window and fits whole once the box recovers.
  prefill_window,
  // Failed open (engine/admit.hpp, the ledger, the C ABI; never admit_request itself): nothing was
  // checked, and these say why. No watcher is running (never started, stopped, or a fork's child).
  not_watching,
  // The watcher runs, but the host's numbers could not be read (host_total_bytes 0: meminfo missing
  // or garbled; level.hpp host_unsampled_reason says which).
  not_sampled,
};

constexpr std::string_view to_string(verdict v) noexcept {
  switch (v) {
    case verdict::admit: return "admit";
    case verdict::cap: return "cap";
    case verdict::reject: return "reject";
  }
  return "invalid";
}

constexpr std::string_view to_string(admit_reason r) noexcept {
  switch (r) {
    case admit_reason::fits: return "fits";
    case admit_reason::window: return "window";
    case admit_reason::psi_stall: return "psi_stall";
    case admit_reason::host_reserve: return "host_reserve";
    case admit_reason::host_budget: return "host_budget";
    case admit_reason::die_vram: return "die_vram";
    case admit_reason::bad_request: return "bad_request";
    case admit_reason::prefill_window: return "prefill_window";
    case admit_reason::not_watching: return "not_watching";
    case admit_reason::not_sampled: return "not_sampled";
  }
  return "invalid";
}

struct admit_result {
  pnmem::verdict verdict = verdict::reject;
  int fit_tokens = 0;                   // tokens that may start (ADMIT: all; CAP: the largest that fits)
  admit_reason reason = admit_reason::bad_request;
  int die = no_die;                     // the die that decided, or no_die
  std::uint64_t need_bytes = 0;         // cost of what was asked (capped to the window)
  std::uint64_t limit_bytes = 0;        // the binding budget it was checked against

  PNMEM_DEFAULTED_EQUALITY(admit_result)
};

// What the engine asks about one request.
struct request_spec {
  int n_prompt = 0;                // prompt tokens
  // The format the request's KV cache is in; unset (the default): the model's own, model_cost::normal_kv
  // (request_kv_format). Every binding defaults so (C: PNMEM_KV_UNSET, Python: None, the tool: no --kv).
  std::optional<kv_format> kv{};
  bool gpu_resident = false;       // model and KV live on the die(s)
  int die = no_die;                // die whose free VRAM also bounds the host path; no_die = none
  int max_window = 0;              // context window limit; <= 0 = none
  // The ladder's prefill window (rung 3: ladder_plan::prefill_window at the snapshot's level), the
  // most prompt tokens admitted while the box is under pressure; <= 0 = none. Not a batch or chunk
  // size: it bounds how much of one prompt may start.
  int prefill_window = 0;
  // Encoder items (images) the request carries whose cross-attention KV it holds (Mllama): each costs
  // the model's kv_bytes_per_encoder_item on the host path, whatever the prompt's length. Negative: bad_request.
  int encoder_items = 0;
};

// The format a request's KV is priced in: the one asked for, else the model's own (its normal format:
// a bf16 model's KV is bf16 unless the engine says it keeps it otherwise).
constexpr kv_format request_kv_format(const std::optional<kv_format>& asked, const model_cost& m) noexcept {
  return asked ? *asked : m.normal_kv;
}

namespace detail {

constexpr admit_result make_result(verdict v, int fit, admit_reason r, int die, std::uint64_t need,
                                   std::uint64_t limit) noexcept {
  admit_result out;
  out.verdict = v;
  out.fit_tokens = fit;
  out.reason = r;
  out.die = die;
  out.need_bytes = need;
  out.limit_bytes = limit;
  return out;
}

constexpr bool host_known(const mem_state& s) noexcept { return s.host_total_bytes != 0; }

// The breakpoint walk of a model with windows (largest_fitting_unblocked's step 1): the anchors, then
// the windows inside the piece they leave (a window is a kink of the KV line, not of the table). With the
// windows in increasing order, the KV of n tokens is one line per stretch between windows:
// slope[j] x n + filled[j], j the number of windows at or below n (filled: their whole windows; slope:
// the full layers and the windows still growing), so each breakpoint's KV is one product. Out of line:
// only models with windows run it, and inlined it made every admission too large to inline.
struct window_walk {
  std::uint64_t lo = 0;          // fits
  std::uint64_t hi = 0;          // does not fit (or n_max)
  std::size_t next_anchor = 0;   // the first anchor above lo
  std::uint64_t slope = 0;       // KV bytes per token on [lo, hi)
  std::uint64_t filled = 0;      // the bytes of the windows at or below lo
};

[[gnu::noinline]] constexpr window_walk walk_with_windows(const model_cost& m, kv_format kv, std::uint64_t hi,
                                                          std::uint64_t limit) noexcept {
  const std::size_t fi = kv_index(kv);
  const std::size_t windows = window_count(m);
  const activation_model& act = m.activation;
  const std::size_t count = act.n_anchors > max_activation_anchors ? max_activation_anchors : act.n_anchors;
  const std::uint64_t full = m.full_kv_bytes_per_token[fi];
  // The KV of x tokens, each window's layers keeping at most their window (a window of 0, never valid,
  // keeps every token).
  auto kv_at = [&](std::uint64_t x) {
    std::uint64_t b = sat_mul(full, x);
#if !defined(__CUDACC__)
#pragma GCC unroll 4
#endif
    for (std::size_t w = 0; w < max_kv_windows; ++w) {
      if (w >= windows) break;
      const kv_window& t = m.windows[w];
      b = sat_add(b, sat_mul(t.bytes_per_token[fi], t.window != 0 && x > t.window ? t.window : x));
    }
    return b;
  };
  std::uint64_t lo = 0;
  std::size_t next_anchor = 0;
  for (; next_anchor < count; ++next_anchor) {
    const activation_anchor& x = act.anchors[next_anchor];
    if (x.tokens >= hi) break;
    if (x.tokens > lo) {
      // At an anchor the peak is the anchor's own value: no table walk needed.
      if (sat_add(sat_add(kv_at(x.tokens), m.state_bytes_per_seq), x.peak_bytes) > limit) {
        hi = x.tokens;
        break;
      }
      lo = x.tokens;
    }
  }
  // The windows inside the piece the anchors leave, in any order: each test makes its window an end of
  // the bracket, so none is left strictly inside.
  for (std::size_t w = 0; w < windows; ++w) {
    const std::uint64_t x = m.windows[w].window;
    if (lo < x && x < hi) {
      if (sat_add(sat_add(kv_at(x), m.state_bytes_per_seq), activation_peak_bytes(act, x)) > limit) {
        hi = x;
      } else {
        lo = x;
      }
    }
  }
  // On [lo, hi) every window is at or below lo (its layers keep the whole window) or at or above hi
  // (they grow with every token).
  std::uint64_t slope = full;
  std::uint64_t filled = 0;
  for (std::size_t w = 0; w < windows; ++w) {
    const kv_window& t = m.windows[w];
    if (t.window != 0 && t.window <= lo) {
      filled = sat_add(filled, sat_mul(t.bytes_per_token[fi], t.window));
    } else {
      slope = sat_add(slope, t.bytes_per_token[fi]);
    }
  }
  return {lo, hi, next_anchor, slope, filled};
}

// The largest n in [0, n_max) with host_cost_bytes(m, n, kv) <= limit, given that cost(0) fits and
// cost(n_max) does not (admit_request calls it only then). cost() is non-decreasing in n.
//
// The cost is piecewise simple: between two breakpoints (the anchors of an activation table, and the
// model's KV windows) it is linear in n up to the table's rounding up, or a quadratic (coefficients, or past
// the last anchor). So instead of a blind binary search over the whole range (~18 dependent steps for a
// 128k prompt) this tests the breakpoints to find the piece holding the answer and, on a linear piece,
// solves its line for n. On a quadratic piece the root in floating point is a guess that exact costs
// then bracket and bisect (a few costs, not ~17).
//
// Why the solve is exact (no correction step is needed; tested exhaustively at cost(n)-1, cost(n),
// cost(n)+1 for every n of the seed's table and for models with one or more windows and other tables):
// in an anchor segment from a to b (span = b.tokens - a.tokens, rise = b.peak - a.peak) on a piece where
// the KV grows by k bytes per token (the full layers, plus the windowed ones below their window), the cost
// is the line
//   cost(a + d) = C0 + k*d + ceil(rise*d / span)          (cost_model.hpp)
// where C0 is that line at a (the true cost there, or, when windows lie between a and the piece, the
// line extended back: never above cost(lo) <= limit). With L = limit - C0 and d = floor(L*span / (k*span + rise)):
//   * cost(a + d) <= limit: d*(k*span + rise) <= L*span gives rise*d/span <= L - k*d,
//     and L - k*d is an integer, so ceil(rise*d/span) <= L - k*d.
//   * cost(a + d + 1) > limit: (d+1)*(k*span + rise) > L*span gives
//     k*(d+1) + rise*(d+1)/span > L, and the ceil only adds.
//   * lo <= a + d < hi: cost(lo) <= limit and cost(hi) > limit lie on the same line, as no breakpoint
//     lies strictly between them.
// The products are taken in 128 bits where they do not fit in 64, so the solve is exact for any model and
// any limit, 2^64-1 (a die's garbage free bytes) included.
//
// Always inlined: called with the seed's model (a constant), the compiler then folds the walk's anchors
// into the code; out of line, g++ kept one copy reading them through the reference (CAP 24 -> 39 ns).
//
// This solves the cost with the KV per token (host_cost_unblocked); largest_fitting_prompt below adds
// the rounding of tokens to the engine's KV blocks.
[[gnu::always_inline]] constexpr int largest_fitting_unblocked(const model_cost& m, int n_max, kv_format kv,
                                                             std::uint64_t limit) noexcept {
  const std::size_t fi = kv_index(kv);
  const std::uint64_t full = m.full_kv_bytes_per_token[fi];
  const std::size_t windows = window_count(m);
  const activation_model& act = m.activation;
  const bool table = act.n_anchors > 0;
  const std::size_t count = !table ? 0 : act.n_anchors > max_activation_anchors ? max_activation_anchors : act.n_anchors;
  auto cost = [&](std::uint64_t n) { return host_cost_unblocked(m, n, kv); };

  // 1. Test the breakpoints inside (lo, hi) in increasing order: the anchors, and the windows between
  //    them (a window is a kink of the KV line, not of the table). One counted loop over the anchors,
  //    unrolled when the model is a constant; without windows nothing more is computed.
  std::uint64_t lo = 0;                                  // fits
  auto hi = static_cast<std::uint64_t>(n_max);           // does not fit
  std::size_t next_anchor = 0;
  std::uint64_t k = full;       // KV growth per token on the piece
  std::uint64_t kv_const = 0;   // the filled windows' bytes
  if (windows == 0) {
    for (; next_anchor < count; ++next_anchor) {
      const activation_anchor& x = act.anchors[next_anchor];
      if (x.tokens >= hi) break;
      if (x.tokens > lo) {
        // At an anchor the peak is the anchor's own value: no table walk needed.
        if (sat_add(sat_add(sat_mul(full, x.tokens), m.state_bytes_per_seq), x.peak_bytes) > limit) {
          hi = x.tokens;
          break;
        }
        lo = x.tokens;
      }
    }
  } else if (windows == 1 && m.windows[0].window != 0) {
    // One window (Gemma, Mistral, gpt-oss, Llama 4: every family priced so far): the KV at n is one
    // product either side of it, and the window is tested once after the anchors if it lies inside
    // the piece they leave.
    const std::uint64_t window = m.windows[0].window;
    const std::uint64_t slide = m.windows[0].bytes_per_token[fi];
    const std::uint64_t below = sat_add(full, slide);
    const std::uint64_t share = sat_mul(slide, window);
    for (; next_anchor < count; ++next_anchor) {
      const activation_anchor& x = act.anchors[next_anchor];
      if (x.tokens >= hi) break;
      if (x.tokens > lo) {
        const std::uint64_t kv_x = x.tokens < window ? sat_mul(below, x.tokens) : sat_add(sat_mul(full, x.tokens), share);
        if (sat_add(sat_add(kv_x, m.state_bytes_per_seq), x.peak_bytes) > limit) {
          hi = x.tokens;
          break;
        }
        lo = x.tokens;
      }
    }
    if (lo < window && window < hi) {
      // The window lies on the line of the table the anchors left (before the first anchor: that
      // anchor's peak), so its peak needs no walk of the table; past the last anchor, or with
      // coefficients, activation_peak_bytes. Its KV is every layer's W tokens.
      const std::uint64_t peak = !table || next_anchor >= count ? activation_peak_bytes(act, window)
                                 : next_anchor == 0           ? act.anchors[0].peak_bytes
                                                              : interpolate_up(act.anchors[next_anchor - 1], act.anchors[next_anchor], window);
      if (sat_add(sat_add(sat_mul(below, window), m.state_bytes_per_seq), peak) > limit) {
        hi = window;
      } else {
        lo = window;
      }
    }
    // No window strictly inside [lo, hi): it is at or below lo (full) or at or above hi (growing).
    const bool past = window <= lo;
    k = past ? full : below;
    kv_const = past ? share : 0;
  } else {
    const window_walk w = walk_with_windows(m, kv, hi, limit);
    lo = w.lo;
    hi = w.hi;
    next_anchor = w.next_anchor;
    k = w.slope;
    kv_const = w.filled;
  }

  // 2. Solve the piece [lo, hi): no breakpoint lies strictly inside it, so every window is at or below
  //    lo (its layers keep the whole window on the piece: kv_const) or at or above hi (they grow with
  //    every token, as the full layers do: in k).
  auto clamp = [&](u128 v) __attribute__((always_inline)) {
    return static_cast<int>(v < lo ? lo : v >= hi ? hi - 1 : static_cast<std::uint64_t>(v));
  };
  if (table && (lo < act.anchors[0].tokens || (next_anchor > 0 && next_anchor < count))) {
    // Inside the table (or before its first anchor, where the peak is constant): a line.
    activation_anchor a{lo, act.anchors[0].peak_bytes};
    std::uint64_t span = 1;
    std::uint64_t rise = 0;
    if (lo >= act.anchors[0].tokens) {
      a = act.anchors[next_anchor - 1];
      span = act.anchors[next_anchor].tokens - a.tokens;
      rise = sat_sub(act.anchors[next_anchor].peak_bytes, a.peak_bytes);
    }
    // The piece's KV line at a: k per token, plus the windows its layers have filled.
    const std::uint64_t kv_a = sat_add(sat_mul(k, a.tokens), kv_const);
    const std::uint64_t c0 = sat_add(sat_add(kv_a, m.state_bytes_per_seq), a.peak_bytes);
    const std::uint64_t room = sat_sub(limit, c0);
    std::uint64_t num64 = 0;
    std::uint64_t ks = 0;
    std::uint64_t den64 = 0;
    if (!mul_overflows(room, span, num64) && !mul_overflows(k, span, ks) && !add_overflows(ks, rise, den64)) {
      // Everything fits in 64 bits (any real host): one hardware division instead of a 128-bit one.
      if (den64 == 0) return clamp(hi);
      return clamp(static_cast<u128>(a.tokens) + num64 / den64);
    }
    const u128 den = static_cast<u128>(k) * span + rise;
    if (den == 0) return clamp(hi);
    return clamp(a.tokens + static_cast<u128>(room) * span / den);
  }
  if (!table && act.per_token_sq_bytes == 0) {
    // Coefficients without an N^2 term: a line from lo.
    const u128 line = static_cast<u128>(k) + act.per_token_bytes;
    if (line == 0) return clamp(hi);
    return clamp(lo + sat_sub(limit, cost(lo)) / line);
  }
  // A quadratic piece (coefficients with an N^2 term, or past the table's last anchor): cost(n) is
  // about A + B*n + C*n^2 on it. Its root in floating point is only a guess (rounding, the activation's
  // own rounding, saturation); exact costs then bracket the answer around the guess, doubling the step
  // away from it, and a bisection of the bracket finishes. A close guess (the usual case) takes 2 costs
  // where bisecting [lo, hi) took ~17; a bad one costs a few more; the answer is exact either way
  // (it is only ever decided by cost() <= limit). In constant evaluation (no sqrt) the bracket is [lo, hi).
#if PNMEM_HAS_IS_CONSTANT_EVALUATED
  if (!std::is_constant_evaluated() && hi - lo > 2) {
#else
  if (!__builtin_is_constant_evaluated() && hi - lo > 2) {
#endif
    double a = static_cast<double>(m.state_bytes_per_seq) + static_cast<double>(kv_const);
    double b = static_cast<double>(k);
    double c = 0.0;
    if (table) {
      const activation_anchor& last = act.anchors[count - 1];
      if (last.tokens != 0) {
        c = static_cast<double>(last.peak_bytes) / (static_cast<double>(last.tokens) * static_cast<double>(last.tokens));
      } else {
        a += static_cast<double>(last.peak_bytes);
      }
    } else {
      a += static_cast<double>(act.fixed_bytes);
      b += static_cast<double>(act.per_token_bytes);
      c = static_cast<double>(act.per_token_sq_bytes);
    }
    const double room = static_cast<double>(limit) - a;
    // The root of c*n^2 + b*n - room. (sqrt(b^2 + 4*c*room) - b) / (2*c) keeps the division off the
    // chain that waits for `limit` (1 / (2*c) does not depend on it); it cancels only when b^2 dwarfs
    // 4*c*room, and then by about b / (2*c) ulps: far below a token for any real model, and a poor
    // guess only costs a few more exact costs below. c == 0 (a table whose last peak is 0) is a line.
    const double half_inv_c = c > 0.0 ? 0.5 / c : 0.0;
    const double root = room <= 0.0 ? 0.0
                        : c > 0.0   ? (std::sqrt(b * b + 4.0 * c * room) - b) * half_inv_c
                        : b > 0.0   ? room / b
                                    : static_cast<double>(hi);
    const std::uint64_t guess = !(root > static_cast<double>(lo)) ? lo + 1
                                : root >= static_cast<double>(hi - 1) ? hi - 1
                                                                       : static_cast<std::uint64_t>(root);
    // The usual case: the guess is the answer. Both costs are independent, so they are taken together
    // (one predictable branch) rather than one after the other, and inlined here (host_cost_unblocked is;
    // the `cost` lambda, called from the loops below too, is not).
    bool guess_fits = false;
    bool next_fits = false;
    if (!table) {
      // Coefficients: each check is one polynomial in 128 bits, without host_cost_bytes' saturating
      // steps (limit < cost(n_max) <= 2^64-1, so comparing the unsaturated cost is the same test).
      const coefficient_piece piece = coefficient_piece_of(m, kv, lo);
      guess_fits = piece.at(guess) <= limit;
      next_fits = piece.at(guess + 1) <= limit;
    } else {
      guess_fits = host_cost_unblocked(m, guess, kv) <= limit;
      next_fits = host_cost_unblocked(m, guess + 1, kv) <= limit;
    }
    if (guess_fits && !next_fits) return static_cast<int>(guess);
    std::uint64_t step = 1;
    if (guess_fits) {
      lo = guess;  // then up from it: lo + 1, lo + 2, lo + 4, ... until one does not fit
      while (hi - lo > step) {
        if (cost(lo + step) > limit) {
          hi = lo + step;
          break;
        }
        lo += step;
        step *= 2;
      }
    } else {
      hi = guess;  // then down from it
      while (hi - lo > step) {
        if (cost(hi - step) <= limit) {
          lo = hi - step;
          break;
        }
        hi -= step;
        step *= 2;
      }
    }
  }
  while (hi - lo > 1) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    if (cost(mid) <= limit) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return static_cast<int>(lo);
}

// The largest n in [0, n_max) with host_cost_bytes(m, n, kv) <= limit (cost(0) fits, cost(n_max) does
// not), KV rounded up to the model's blocks. With cost'(n) the cost per token (<= cost(n)) and n1 its
// answer, the answer lies in [b, n1] for b = n1 rounded down to a block (cost(b) = cost'(b) <= limit):
// every n in (b, n1] pays the KV of the block b + g, a constant, so the largest of them that fits is the
// largest whose activation fits beside it. The seed's and every model charged per token return n1 at once.
//
// The answer inside n1's block when (b, n1] is not on one line of the activation table (before its first
// anchor, or past its last): the same solve on a model of that constant and the activation alone.
// cost(b + 1) fits on it and cost(0) does too (the activation only grows). Out of line, and apart from
// the usual case below, whose frame it would make large (a model_cost on the stack).
[[gnu::noinline]] constexpr int largest_fitting_in_block_off_table(const model_cost& m, int n1, kv_format kv,
                                                                 std::uint64_t limit, std::uint64_t lo,
                                                                 std::uint64_t fixed) noexcept {
  if (sat_add(fixed, activation_peak_bytes(m.activation, lo + 1)) > limit) return static_cast<int>(lo);
  model_cost block;
  block.state_bytes_per_seq = fixed;
  block.activation = m.activation;
  const int in_block = largest_fitting_unblocked(block, n1 + 1, kv, limit);
  return in_block > n1 ? n1 : in_block;
}

// The answer inside n1's block (out of line: only models charged in blocks get here, and a second
// inlined solve would make every admission's code too large to inline).
[[gnu::noinline]] constexpr int largest_fitting_in_block(const model_cost& m, int n1, kv_format kv,
                                                       std::uint64_t limit) noexcept {
  // n1 < 2^31 and the block fits 32 bits: a 32-bit remainder (a block of 544 is no power of two).
  const std::uint32_t g = m.kv_block_tokens;
  const auto top = static_cast<std::uint64_t>(n1);
  const std::uint64_t lo = top - static_cast<std::uint32_t>(n1) % g;  // fits
  if (lo == top) return n1;
  const std::uint64_t fixed = sat_add(kv_bytes_unblocked(m, kv, lo + g), m.state_bytes_per_seq);
  if (fixed > limit) return static_cast<int>(lo);
  const std::uint64_t room = limit - fixed;  // for the activation of n in (lo, top]
  // The usual case, (lo, top] inside the table. At an anchor the peak is its own value, so the anchors
  // inside (lo, top) are tested first: the answer is at or above the last that fits and below the first
  // that does not, on one line of the table from anchor a to anchor b, peak(a + d) = a.peak +
  // ceil(rise x d / span), which fits while rise x d <= (room - a.peak) x span: n = a + d fits and
  // n + 1 does not; n <= lo says that not even lo + 1 fits.
  const activation_model& act = m.activation;
  const std::size_t count = act.n_anchors > max_activation_anchors ? max_activation_anchors : act.n_anchors;
  std::size_t j = 0;
  while (j < count && act.anchors[j].tokens <= lo) ++j;
  while (j < count && act.anchors[j].tokens < top && act.anchors[j].peak_bytes <= room) ++j;
  if (j == 0 || j >= count) return largest_fitting_in_block_off_table(m, n1, kv, limit, lo, fixed);
  const activation_anchor& a = act.anchors[j - 1];
  const activation_anchor& b = act.anchors[j];
  if (room < a.peak_bytes) return static_cast<int>(lo);  // only when a is at or below lo
  const std::uint64_t rise = sat_sub(b.peak_bytes, a.peak_bytes);
  if (rise == 0) return n1;  // then b fits too, so b is at or past top
  const u128 n = a.tokens + static_cast<u128>(mul_div_floor(room - a.peak_bytes, b.tokens - a.tokens, rise));
  return n >= top ? n1 : n <= lo ? static_cast<int>(lo) : static_cast<int>(n);
}

[[gnu::always_inline]] constexpr int largest_fitting_prompt(const model_cost& m, int n_max, kv_format kv,
                                                          std::uint64_t limit) noexcept {
  const int n1 = largest_fitting_unblocked(m, n_max, kv, limit);
  if (__builtin_expect(m.kv_block_tokens <= 1, 1)) return n1;
  return largest_fitting_in_block(m, n1, kv, limit);
}

// The seed's model.
constexpr int largest_fitting_prompt(int n_max, kv_format kv, std::uint64_t limit) noexcept {
  return largest_fitting_prompt(seed_model_cost, n_max, kv, limit);
}

// `reserve`: host_reserve_bytes(s, p), computed once by the caller.
constexpr bool inside_host_reserve(const mem_state& s, std::uint64_t reserve) noexcept {
  return host_known(s) && s.host_avail_bytes <= reserve;
}

}  // namespace detail

namespace detail {

// cost(0): the state and the activation's floor (an anchor table's first peak, or the fixed bytes); no KV.
constexpr std::uint64_t host_cost_at_zero(const model_cost& m) noexcept {
  const activation_model& a = m.activation;
  return sat_add(m.state_bytes_per_seq, a.n_anchors > 0 ? a.anchors[0].peak_bytes : a.fixed_bytes);
}

// What every request is checked for first, in this order: a malformed request, then a whole-box
// stall (starting anything now only deepens it). True, with the answer in `out`, when refused.
[[gnu::always_inline]] constexpr bool refused_up_front(const request_spec& rq, const mem_state& s, const policy& p,
                                                       admit_result& out) noexcept {
  if (rq.n_prompt < 0 || rq.encoder_items < 0 || (rq.die != no_die && !valid_die(s, rq.die))) {
    out = make_result(verdict::reject, 0, admit_reason::bad_request, rq.die, 0, 0);
    return true;
  }
  if (psi_at_least(psi_full_confirmed_pct(s), p.psi_full_reject_bp)) {
    out = make_result(verdict::reject, 0, admit_reason::psi_stall, no_die, 0, 0);
    return true;
  }
  return false;
}

// The prompt tokens a request may start at most: the configured window first (a prompt past it is
// too long at any level), then the ladder's clamp; and which of them cut it.
struct prompt_bound {
  int n = 0;
  bool windowed = false;
  admit_reason reason = admit_reason::window;
};

[[gnu::always_inline]] constexpr prompt_bound bound_prompt(const request_spec& rq) noexcept {
  const bool over_window = rq.max_window > 0 && rq.n_prompt > rq.max_window;
  int n = over_window ? rq.max_window : rq.n_prompt;
  const bool over_prefill = rq.prefill_window > 0 && n > rq.prefill_window;
  if (over_prefill) n = rq.prefill_window;
  return {n, over_window || over_prefill, over_window ? admit_reason::window : admit_reason::prefill_window};
}

// A GPU-resident request (rq.gpu_resident): the host pays nothing per token, so after the up-front
// checks only the reserve line matters. admit_request's first branch, and pnmem::admit's whole
// decision for a GPU engine (engine/admit.hpp), which needs none of the host path's code around it.
[[gnu::always_inline]] constexpr admit_result admit_gpu_resident(const request_spec& rq, const mem_state& s,
                                                                 const policy& p) noexcept {
  admit_result early;
  if (refused_up_front(rq, s, p, early)) return early;
  // Inside the reserve: refused, unless the engine vouches that a request costing no host bytes may start.
  if (detail::inside_host_reserve(s, host_reserve_bytes(s, p)) && p.zero_cost != zero_cost_rule::admit) {
    return make_result(verdict::reject, 0, admit_reason::host_reserve, no_die, 0, s.host_avail_bytes);
  }
  const prompt_bound b = bound_prompt(rq);
  return b.windowed ? make_result(verdict::cap, b.n, b.reason, no_die, 0, 0)
                    : make_result(verdict::admit, b.n, admit_reason::fits, no_die, 0, 0);
}

// admit_request's body, inlined into both overloads: called with the seed's model (a constant) the
// compiler folds the model into the code. (With one shared body g++ made a single copy for the seed that
// read the model through memory and called host_cost_bytes out of line: CAP 22 -> 44 ns in bench_policy.)
[[gnu::always_inline]] constexpr admit_result admit_request_inline(const model_cost& m, const request_spec& rq,
                                                                   const mem_state& s, const policy& p) noexcept {
  // 1-2. GPU-resident: the up-front checks and the reserve line.
  if (rq.gpu_resident) return admit_gpu_resident(rq, s, p);

  admit_result early;
  if (refused_up_front(rq, s, p, early)) return early;
  const std::uint64_t reserve = host_reserve_bytes(s, p);
  const prompt_bound b = bound_prompt(rq);
  const int n = b.n;
  const bool windowed = b.windowed;
  const admit_reason window_reason = b.reason;

  // 3. Host path. The budget is the smaller of host bytes above the reserve and the
  //    die's free VRAM; whichever is smaller is what binds, and is named. The encoder items' KV does
  //    not depend on the prompt's length: it comes off the budget the tokens are solved in.
  const kv_format kv = request_kv_format(rq.kv, m);
  const std::uint64_t items = encoder_kv_bytes(m, kv, static_cast<std::uint64_t>(rq.encoder_items));
  if (detail::inside_host_reserve(s, reserve)) {
    const std::uint64_t need = sat_add(host_cost_bytes(m, n, kv), items);
    // A request that needs no host bytes, where the engine vouches it may start (zero_cost_rule::admit).
    if (need == 0 && p.zero_cost == zero_cost_rule::admit) {
      return windowed ? make_result(verdict::cap, n, window_reason, no_die, 0, 0)
                      : make_result(verdict::admit, n, admit_reason::fits, no_die, 0, 0);
    }
    return make_result(verdict::reject, 0, admit_reason::host_reserve, no_die, need, s.host_avail_bytes);
  }
  std::uint64_t limit = detail::host_known(s) ? s.host_avail_bytes - reserve : detail::u64_max;
  admit_reason binding = admit_reason::host_budget;
  int binding_die = no_die;
  if (rq.die != no_die) {
    const auto idx = static_cast<std::size_t>(rq.die);
    if (s.per_die_budget_bytes[idx] != 0 && s.per_die_free_bytes[idx] < limit) {
      limit = s.per_die_free_bytes[idx];
      binding = admit_reason::die_vram;
      binding_die = rq.die;
    }
  }

  const std::uint64_t need = sat_add(host_cost_bytes(m, n, kv), items);
  if (need <= limit) {
    return windowed ? make_result(verdict::cap, n, window_reason, no_die, need, limit)
                    : make_result(verdict::admit, n, admit_reason::fits, no_die, need, limit);
  }
  if (sat_add(host_cost_at_zero(m), items) > limit) {
    return make_result(verdict::reject, 0, binding, binding_die, need, limit);
  }
  const int lo = largest_fitting_prompt(m, n, kv, limit - items);
  if (lo == 0) return make_result(verdict::reject, 0, binding, binding_die, need, limit);
  return make_result(verdict::cap, lo, binding, binding_die, need, limit);
}

}  // namespace detail

// A request of a model given as data (cost_model.hpp); the overload below uses the seed's model.
constexpr admit_result admit_request(const model_cost& m, const request_spec& rq, const mem_state& s,
                                     const policy& p = default_policy) noexcept {
  return detail::admit_request_inline(m, rq, s, p);
}

// The seed's model.
constexpr admit_result admit_request(const request_spec& rq, const mem_state& s,
                                     const policy& p = default_policy) noexcept {
  return detail::admit_request_inline(seed_model_cost, rq, s, p);
}

// A refusal the waiting calls hold rather than shed (policy::zero_cost, zero_cost_rule::hold): host memory
// inside the reserve refused a request that needs no host bytes. pnmem::admit_wait and pnmem_admit_wait wait
// for the first sample on which it starts; the back-pressure gate holds it (a TIGHT push), not sheds it.
constexpr bool held_at_reserve(const admit_result& r, zero_cost_rule rule) noexcept {
  return r.verdict == verdict::reject && r.reason == admit_reason::host_reserve && r.need_bytes == 0 &&
         rule == zero_cost_rule::hold;
}
constexpr bool held_at_reserve(const admit_result& r, const policy& p) noexcept { return held_at_reserve(r, p.zero_cost); }

#if PNMEM_HAS_CLASS_NTTP
// A model fixed at compile time (an engine built for one model): `admit_request<my_model>(rq, s)`.
// The same answers as admit_request(my_model, rq, s); the model is folded into the code as the seed's
// is in the overload above (its anchors become immediates and the solve's division a multiplication).
template <model_cost M>
constexpr admit_result admit_request(const request_spec& rq, const mem_state& s,
                                     const policy& p = default_policy) noexcept {
  return detail::admit_request_inline(M, rq, s, p);
}
#endif

// A model about to be uploaded whole onto one die.
struct model_load_spec {
  std::uint64_t weights_bytes = 0;
  std::uint64_t kv_max_ctx_bytes = 0;  // KV cache at the maximum context
};

// The load spec of a model whose KV cache holds `sequences` sequences of up to `max_ctx_tokens` tokens
// in format `kv`, with each sequence's fixed state and the cross-attention KV of up to
// `encoder_items_per_seq` encoder items (images): KV at the maximum context, from the model's costs.
constexpr model_load_spec load_spec_for(const model_cost& m, std::uint64_t weights_bytes, std::uint64_t max_ctx_tokens,
                                        kv_format kv, std::uint64_t sequences = 1,
                                        std::uint64_t encoder_items_per_seq = 0) noexcept {
  using detail::sat_add;
  using detail::sat_mul;
  const std::uint64_t per_seq = sat_add(sat_add(kv_bytes(m, kv, max_ctx_tokens), m.state_bytes_per_seq),
                                        encoder_kv_bytes(m, kv, encoder_items_per_seq));
  return {weights_bytes, sat_mul(sequences, per_seq)};
}

namespace detail {
// The measured die (budget > 0) whose free VRAM is best by `better(a, b)`; lowest index on ties; no_die if none.
template <class Better>
constexpr int pick_die(const mem_state& s, Better better) noexcept {
  int pick = no_die;
  std::uint64_t pick_free = 0;
  const int n = die_count(s);  // once: a caller's stores may alias `s`, and the count would be re-read each step
  for (int i = 0; i < n; ++i) {
    const auto idx = static_cast<std::size_t>(i);
    const std::uint64_t free = s.per_die_free_bytes[idx];
    if (s.per_die_budget_bytes[idx] != 0 && (pick == no_die || better(free, pick_free))) {
      pick = i;
      pick_free = free;
    }
  }
  return pick;
}

// What both model-load checks end with: `need` against one die's free VRAM less `reserve`.
constexpr admit_result fit_on_die(const mem_state& s, int die, std::uint64_t need, std::uint64_t reserve) noexcept {
  if (!valid_die(s, die)) return make_result(verdict::reject, 0, admit_reason::bad_request, die, need, 0);
  const std::uint64_t limit = sat_sub(s.per_die_free_bytes[static_cast<std::size_t>(die)], reserve);
  return need <= limit ? make_result(verdict::admit, 0, admit_reason::fits, die, need, limit)
                       : make_result(verdict::reject, 0, admit_reason::die_vram, die, need, limit);
}
}  // namespace detail

// The die with the most free VRAM among the measured ones (budget > 0), or no_die.
constexpr int roomiest_die(const mem_state& s) noexcept {
  return detail::pick_die(s, [](std::uint64_t a, std::uint64_t b) { return a > b; });
}

// The die with the least free VRAM among the measured ones: the seed's default
// die for admission ("worst free VRAM"), or no_die.
constexpr int tightest_die(const mem_state& s) noexcept {
  return detail::pick_die(s, [](std::uint64_t a, std::uint64_t b) { return a < b; });
}

// Seed pn_admit_model_load: weights + KV at max context + activation scratch must
// fit in the die's free VRAM minus the die reserve. die = no_die picks the roomiest die.
constexpr admit_result admit_model_load(const model_load_spec& m, const mem_state& s, int die = no_die,
                                        const policy& p = default_policy) noexcept {
  using detail::sat_add;
  if (die == no_die) die = roomiest_die(s);
  const std::uint64_t need = sat_add(sat_add(m.weights_bytes, m.kv_max_ctx_bytes), p.die_scratch_bytes);
  return detail::fit_on_die(s, die, need, p.die_reserve_bytes);
}

// Seed pn_admit_model_load_die: one die's slice of a multi-die split. The slice
// plus the die scratch must fit in that die's free VRAM less the die reserve, as a whole
// load's does (no host term: the GPU path's scratch is bounded). The seed checked a slice
// against the die's whole free VRAM, so a split could fill a die that a whole load of the
// same bytes could not (docs/design.md, where pnmem differs from the seed).
constexpr admit_result admit_model_load_die(std::uint64_t weights_slice_bytes, std::uint64_t kv_slice_bytes,
                                            const mem_state& s, int die,
                                            const policy& p = default_policy) noexcept {
  using detail::sat_add;
  const std::uint64_t need = sat_add(sat_add(weights_slice_bytes, kv_slice_bytes), p.die_scratch_bytes);
  return detail::fit_on_die(s, die, need, p.die_reserve_bytes);
}

// Host-byte admission: may the engine allocate `bytes` more host memory now? For what engines allocate
// besides a request's own KV and activations: prompt caches, swapped or offloaded KV, staging buffers.
// The bytes must fit in host available memory above the reserve:
//   host not sampled (total 0)            -> ADMIT  fits (fail open), limit 2^64-1
//   avail inside the reserve              -> REJECT host_reserve, limit = avail
//   bytes <= avail - reserve              -> ADMIT  fits
//   some bytes fit (0 < avail - reserve)  -> CAP    host_budget: limit_bytes is how many would fit
// need_bytes is what was asked. PSI is not consulted (this is a byte check, as the load-spike check
// is); a request's own admission (admit_request) is what refuses work during a stall.
// For many threads growing caches at once, use host_ledger::reserve_bytes (engine/host_ledger.hpp):
// bytes promised are then not promised twice before a sample sees them.
constexpr admit_result admit_host_bytes(std::uint64_t bytes, const mem_state& s,
                                        const policy& p = default_policy) noexcept {
  using detail::make_result;
  if (!detail::host_known(s)) return make_result(verdict::admit, 0, admit_reason::fits, no_die, bytes, detail::u64_max);
  const std::uint64_t reserve = host_reserve_bytes(s, p);
  if (s.host_avail_bytes <= reserve) {
    return make_result(verdict::reject, 0, admit_reason::host_reserve, no_die, bytes, s.host_avail_bytes);
  }
  const std::uint64_t limit = s.host_avail_bytes - reserve;
  return bytes <= limit ? make_result(verdict::admit, 0, admit_reason::fits, no_die, bytes, limit)
                        : make_result(verdict::cap, 0, admit_reason::host_budget, no_die, bytes, limit);
}

// A cache insert (host_ledger::make_room): may a cache grow by `bytes` with the host bands staying at
// WATCH or better after it (host_room.hpp)? What a cache that keeps its newest entries asks, after
// freeing its oldest to make the room:
//   host not sampled (total 0)              -> ADMIT  fits (fail open), limit 2^64-1
//   avail inside the reserve                -> REJECT host_reserve, limit = avail
//   bytes <= avail - WATCH floor            -> ADMIT  fits, limit = avail - WATCH floor
//   else                                    -> CAP    host_budget: limit_bytes is how many would fit at
//                                                      WATCH (0 below it)
constexpr admit_result admit_cache_insert(std::uint64_t bytes, const mem_state& s,
                                          const policy& p = default_policy) noexcept {
  using detail::make_result;
  const admit_result r = admit_host_bytes(bytes, s, p);  // not sampled, or inside the reserve: as host bytes
  if (!detail::host_known(s) || r.verdict == verdict::reject) return r;
  const std::uint64_t floor = host_floor_bytes(mem_level::watch, host_reserve_bytes(s, p));
  const std::uint64_t limit = detail::sat_sub(s.host_avail_bytes, floor);
  return bytes <= limit && s.host_avail_bytes >= floor
             ? make_result(verdict::admit, 0, admit_reason::fits, no_die, bytes, limit)
             : make_result(verdict::cap, 0, admit_reason::host_budget, no_die, bytes, limit);
}

// A model load on the host (a CPU engine's weights and KV, a runner loading a model into host memory),
// whose cost grows with the context it is started with: fixed bytes (weights, compute buffers) plus
// bytes per context token (its KV), wanted_tokens asked for, least_tokens the smallest context worth
// starting. May it start, and with how much context, the host bands at WATCH or better after it
// (host_room.hpp; a load that leaves the box TIGHT degrades every request after it)?
//   host not sampled (total 0)                  -> ADMIT  fits (fail open), fit = wanted, limit 2^64-1
//   avail inside the reserve                    -> REJECT host_reserve, limit = avail
//   need(wanted) <= avail - WATCH floor         -> ADMIT  fits, fit = wanted
//   need(n) fits for some n >= least            -> CAP    host_budget, fit = the largest such n
//   else (a negative or inverted context too)   -> REJECT host_budget (bad_request for the counts)
// need(n) = fixed_bytes + bytes_per_token x n; need_bytes is need(wanted), limit_bytes what may be taken
// at WATCH. The engine starts the load with fit_tokens of context (llama.cpp's -c, vLLM's max_model_len).
struct host_load_spec {
  std::uint64_t fixed_bytes = 0;
  std::uint64_t bytes_per_token = 0;
  int wanted_tokens = 0;
  int least_tokens = 1;
};
constexpr std::uint64_t host_load_bytes(const host_load_spec& l, int tokens) noexcept {
  return detail::sat_add(l.fixed_bytes, detail::sat_mul(l.bytes_per_token, static_cast<std::uint64_t>(tokens < 0 ? 0 : tokens)));
}
constexpr admit_result admit_host_load(const host_load_spec& l, const mem_state& s,
                                       const policy& p = default_policy) noexcept {
  using detail::make_result;
  const std::uint64_t need = host_load_bytes(l, l.wanted_tokens);
  if (l.wanted_tokens < 0 || l.least_tokens < 0 || l.least_tokens > l.wanted_tokens) {
    return make_result(verdict::reject, 0, admit_reason::bad_request, no_die, need, 0);
  }
  if (!detail::host_known(s)) return make_result(verdict::admit, l.wanted_tokens, admit_reason::fits, no_die, need, detail::u64_max);
  const admit_result inside = admit_host_bytes(need, s, p);  // inside the reserve: as host bytes (host_reserve)
  if (inside.verdict == verdict::reject) return inside;
  const std::uint64_t limit = detail::sat_sub(s.host_avail_bytes, host_floor_bytes(mem_level::watch, host_reserve_bytes(s, p)));
  if (need <= limit) return make_result(verdict::admit, l.wanted_tokens, admit_reason::fits, no_die, need, limit);
  // The largest context whose load fits: (limit - fixed) / per token, below wanted here.
  int fit = -1;
  if (limit >= l.fixed_bytes) {
    const std::uint64_t n = l.bytes_per_token == 0 ? static_cast<std::uint64_t>(l.wanted_tokens)
                                                   : (limit - l.fixed_bytes) / l.bytes_per_token;
    fit = n >= static_cast<std::uint64_t>(l.wanted_tokens) ? l.wanted_tokens : static_cast<int>(n);
  }
  return fit >= l.least_tokens && fit > 0
             ? make_result(verdict::cap, fit, admit_reason::host_budget, no_die, need, limit)
             : make_result(verdict::reject, 0, admit_reason::host_budget, no_die, need, limit);
}

// Die-byte admission: may `bytes` more be allocated on `die` now? Its free VRAM less the policy's die
// reserve, as admit_model_load checks a load (without the load's scratch):
//   die not fed (or out of range)  -> REJECT bad_request
//   bytes <= free - die reserve    -> ADMIT  fits, limit = free - die reserve
//   else                           -> REJECT die_vram, limit = what would fit
constexpr admit_result admit_die_bytes(std::uint64_t bytes, const mem_state& s, int die,
                                       const policy& p = default_policy) noexcept {
  return detail::fit_on_die(s, die, bytes, p.die_reserve_bytes);
}

// Seed pn_admit_load_spike: the host dequant/staging burst of a weight upload must fit in host
// memory above the reserve before a multi-minute upload starts. admit_host_bytes of the policy's
// load spike, where a part of the burst is no use: what does not fit whole is rejected.
constexpr admit_result admit_load_spike(const mem_state& s, const policy& p = default_policy) noexcept {
  admit_result r = admit_host_bytes(p.load_spike_bytes, s, p);
  if (r.verdict == verdict::cap) r.verdict = verdict::reject;
  return r;
}

}  // namespace pnmem
