// pnmem/admission.hpp - may this request or model load start? admit, cap or reject, and why.
//
// The seed's pn_admission.c. Every result names its reason and, where a die
// decided it, the die; `need_bytes` / `limit_bytes` give the numbers behind it.
//
// admit_request decides in the seed's order:
//   1. PSI-full stall guard: full >= psi_full_reject                -> REJECT psi_stall
//      (full = the worse of avg10 and the last interval's stall rate)
//   2. GPU-resident fast path (host cost is 0):
//        host avail inside the reserve                              -> REJECT host_reserve
//        n_prompt > max_window                                      -> CAP    window (fit = max_window)
//        otherwise                                                  -> ADMIT  fits
//   3. Host path: cost(n) = kv x n + activation_peak(n) must fit in
//      host avail - reserve, and in the die's free VRAM when a die is named.
//        avail inside the reserve                                   -> REJECT host_reserve
//        the whole prompt (or the window, if smaller) fits          -> ADMIT fits / CAP window
//        some shorter prefix fits (binary search for the largest)   -> CAP    host_budget | die_vram
//        nothing fits                                               -> REJECT host_budget | die_vram
//
// A CAP's fit_tokens is the largest window that fits: one more token would not.
// max_window <= 0 means no window limit. A host total of 0 means the host was
// not sampled: byte checks on the host are skipped (fail open, as the seed's
// engine wrapper does when no watcher runs), never read as "0 bytes free".
#pragma once

#include <cstdint>
#include <string_view>

#include "pnmem/cost_model.hpp"
#include "pnmem/detail/saturating.hpp"
#include "pnmem/level.hpp"
#include "pnmem/mem_state.hpp"
#include "pnmem/policy.hpp"

namespace pnmem {

enum class verdict : std::uint8_t { admit, cap, reject };

enum class admit_reason : std::uint8_t {
  fits,          // everything asked for fits
  window,        // capped to the window (max_window), not by memory
  psi_stall,     // PSI full avg10 at or above the reject threshold
  host_reserve,  // host available memory already inside the reserve
  host_budget,   // host bytes above the reserve are too few
  die_vram,      // the die's free VRAM is too small (see `die`)
  bad_request,   // negative prompt, die out of range, no die to load onto
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

  friend constexpr bool operator==(const admit_result&, const admit_result&) = default;
};

// What the engine asks about one request.
struct request_spec {
  int n_prompt = 0;                // prompt tokens
  kv_format kv = kv_format::q4;    // KV cache format of the model's state
  bool gpu_resident = false;       // model and KV live on the die(s)
  int die = no_die;                // die whose free VRAM also bounds the host path; no_die = none
  int max_window = 0;              // context window limit; <= 0 = none
};

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

// The largest n in [0, n_max) with host_cost_bytes(n) <= limit, given that
// cost(0) fits and cost(n_max) does not (admit_request calls it only then).
// cost() is increasing in n (k > 0 bytes per token, a non-decreasing peak).
//
// Between two anchors of the activation table the cost is linear in n up to the
// table's rounding up, so instead of a blind binary search over the whole range
// (~18 dependent steps for a 128k prompt) this finds the segment holding the
// answer by testing the anchors and solves that segment's line for n. Past the
// last anchor the peak grows with N^2, and a binary search over that segment
// does the work.
//
// Why the solve is exact (no correction step is needed; tested exhaustively at
// cost(n)-1, cost(n), cost(n)+1 for every n of the table, both KV formats):
// in a segment from anchor a to anchor b, with span = b.tokens - a.tokens,
// rise = b.peak - a.peak, k = KV bytes per token and 0 <= d <= span,
//   cost(a + d) = cost(a) + k*d + ceil(rise*d / span)          (cost_model.hpp)
// cost(a) <= limit (a is 0, which fits, or an anchor tested to fit), so with
// L = limit - cost(a) and d = floor(L*span / (k*span + rise)):
//   * cost(a + d) <= limit: d*(k*span + rise) <= L*span gives rise*d/span <= L - k*d,
//     and L - k*d is an integer, so ceil(rise*d/span) <= L - k*d.
//   * cost(a + d + 1) > limit: (d+1)*(k*span + rise) > L*span gives
//     k*(d+1) + rise*(d+1)/span > L, and the ceil only adds.
//   * a + d < hi: d >= span would mean k*span + rise <= L, i.e. cost(b) <= limit.
//     If hi = b (b did not fit), then d < span. If hi = n_max <= b, then
//     a + d >= n_max would give cost(n_max) <= cost(a + d) <= limit, against
//     the precondition. So a + d + 1 <= b is on the line, and a + d >= lo = a.
// So the guess is the answer, and the correction loops and clamps that used to
// follow it could never run. mul_div(L, span, D) with D = k*span + rise is exact:
// (L / D) * span is at most the result (< limit / k, no saturation), and
// (L % D) * span < D * span <= 8.2e17 < 2^64 for the widest segment (fp32,
// 65536..262144), whatever the limit, 2^64-1 (a die's garbage free bytes) included.
constexpr int largest_fitting_prompt(int n_max, kv_format kv, std::uint64_t limit) noexcept {
  const std::uint64_t k = kv_bytes_per_token(kv);
  // At an anchor the peak is the anchor's own value: no table walk needed.
  auto anchor_cost = [k](const activation_anchor& a) { return sat_add(sat_mul(k, a.tokens), a.peak_bytes); };
  int lo = 0;      // fits
  int hi = n_max;  // does not fit
  std::size_t seg = activation_anchors.size();  // segment [anchor seg-1, anchor seg]; size() = past the table
  for (std::size_t i = 1; i < activation_anchors.size(); ++i) {
    const auto t = static_cast<int>(activation_anchors[i].tokens);
    if (t >= hi) {
      seg = i;
      break;
    }
    if (anchor_cost(activation_anchors[i]) <= limit) {
      lo = t;
    } else {
      hi = t;
      seg = i;
      break;
    }
  }
  if (seg < activation_anchors.size()) {
    const activation_anchor a = activation_anchors[seg - 1];
    const activation_anchor b = activation_anchors[seg];
    const std::uint64_t span = b.tokens - a.tokens;
    // None of these saturate (see above); d is exactly the answer's offset from a.
    const std::uint64_t den = sat_add(sat_mul(k, span), b.peak_bytes - a.peak_bytes);
    const std::uint64_t d = mul_div(sat_sub(limit, anchor_cost(a)), span, den);
    return static_cast<int>(a.tokens + d);
  }
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    if (host_cost_bytes(mid, kv) <= limit) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

constexpr bool inside_host_reserve(const mem_state& s, const policy& p) noexcept {
  return host_known(s) && s.host_avail_bytes <= host_reserve_bytes(s.host_total_bytes, p);
}

}  // namespace detail

constexpr admit_result admit_request(const request_spec& rq, const mem_state& s,
                                     const policy& p = default_policy) noexcept {
  using detail::make_result;
  if (rq.n_prompt < 0 || (rq.die != no_die && !valid_die(s, rq.die))) {
    return make_result(verdict::reject, 0, admit_reason::bad_request, rq.die, 0, 0);
  }

  // 1. A whole-box stall: starting anything now only deepens it.
  if (psi_at_least(psi_full_pct(s), p.psi_full_reject_bp)) {
    return make_result(verdict::reject, 0, admit_reason::psi_stall, no_die, 0, 0);
  }

  const std::uint64_t reserve = host_reserve_bytes(s.host_total_bytes, p);
  const bool windowed = rq.max_window > 0 && rq.n_prompt > rq.max_window;
  const int n = windowed ? rq.max_window : rq.n_prompt;

  // 2. GPU-resident: the host pays nothing per token, so only the reserve line matters.
  if (rq.gpu_resident) {
    if (detail::inside_host_reserve(s, p)) {
      return make_result(verdict::reject, 0, admit_reason::host_reserve, no_die, 0, s.host_avail_bytes);
    }
    return windowed ? make_result(verdict::cap, n, admit_reason::window, no_die, 0, 0)
                    : make_result(verdict::admit, n, admit_reason::fits, no_die, 0, 0);
  }

  // 3. Host path. The budget is the smaller of host bytes above the reserve and the
  //    die's free VRAM; whichever is smaller is what binds, and is named.
  if (detail::inside_host_reserve(s, p)) {
    return make_result(verdict::reject, 0, admit_reason::host_reserve, no_die, host_cost_bytes(n, rq.kv),
                       s.host_avail_bytes);
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

  const std::uint64_t need = host_cost_bytes(n, rq.kv);
  if (need <= limit) {
    return windowed ? make_result(verdict::cap, n, admit_reason::window, no_die, need, limit)
                    : make_result(verdict::admit, n, admit_reason::fits, no_die, need, limit);
  }
  if (host_cost_bytes(0, rq.kv) > limit) {
    return make_result(verdict::reject, 0, binding, binding_die, need, limit);
  }
  const int lo = detail::largest_fitting_prompt(n, rq.kv, limit);
  if (lo == 0) return make_result(verdict::reject, 0, binding, binding_die, need, limit);
  return make_result(verdict::cap, lo, binding, binding_die, need, limit);
}

// A model about to be uploaded whole onto one die.
struct model_load_spec {
  std::uint64_t weights_bytes = 0;
  std::uint64_t kv_max_ctx_bytes = 0;  // KV cache at the maximum context
};

namespace detail {
// The measured die (budget > 0) whose free VRAM is best by `better(a, b)`; lowest index on ties; no_die if none.
template <class Better>
constexpr int pick_die(const mem_state& s, Better better) noexcept {
  int pick = no_die;
  for (int i = 0; i < die_count(s); ++i) {
    const auto idx = static_cast<std::size_t>(i);
    if (s.per_die_budget_bytes[idx] == 0) continue;
    if (pick == no_die || better(s.per_die_free_bytes[idx], s.per_die_free_bytes[static_cast<std::size_t>(pick)])) pick = i;
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
// plus the die scratch must fit in that die's free VRAM (no host term: the GPU
// path's scratch is bounded).
constexpr admit_result admit_model_load_die(std::uint64_t weights_slice_bytes, std::uint64_t kv_slice_bytes,
                                            const mem_state& s, int die,
                                            const policy& p = default_policy) noexcept {
  using detail::sat_add;
  const std::uint64_t need = sat_add(sat_add(weights_slice_bytes, kv_slice_bytes), p.die_scratch_bytes);
  return detail::fit_on_die(s, die, need, 0);
}

// Seed pn_admit_load_spike: the host dequant/staging burst of a weight upload must
// fit in host memory above the reserve before a multi-minute upload starts.
constexpr admit_result admit_load_spike(const mem_state& s, const policy& p = default_policy) noexcept {
  const std::uint64_t need = p.load_spike_bytes;
  if (!detail::host_known(s)) {
    return detail::make_result(verdict::admit, 0, admit_reason::fits, no_die, need, detail::u64_max);
  }
  const std::uint64_t reserve = host_reserve_bytes(s.host_total_bytes, p);
  if (s.host_avail_bytes <= reserve) {
    return detail::make_result(verdict::reject, 0, admit_reason::host_reserve, no_die, need, s.host_avail_bytes);
  }
  const std::uint64_t limit = s.host_avail_bytes - reserve;
  return need <= limit ? detail::make_result(verdict::admit, 0, admit_reason::fits, no_die, need, limit)
                       : detail::make_result(verdict::reject, 0, admit_reason::host_budget, no_die, need, limit);
}

}  // namespace pnmem
