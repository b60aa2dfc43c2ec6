// pnmem/calibration.hpp - an activation table from measured peaks, never below any of them.
//
// An engine measures its host peak (VmHWM, or its cgroup's peak: pnmem/linux/process_peak.hpp) for
// prompts of several lengths and gets (tokens, peak bytes) pairs. calibrate_activation turns them into
// an activation_model anchor table (cost_model.hpp) that pnmem's admission then uses:
//
//   calibration_point m[] = {{0, 300 * MiB}, {1024, 420 * MiB}, {4096, 1640 * MiB}, ...};
//   calibration_result r = calibrate_activation(m);          // r.ok(): r.table, r.residuals
//   model.activation = r.table;
//
// --- The guarantee ------------------------------------------------------------------------------------
//
// For every measurement (t, b): activation_peak_bytes(r.table, t) >= b, evaluated by cost_model.hpp's own
// interpolation (rounding up). It is checked, measurement by measurement, before a table is returned: a
// table that would be below one is never returned (calibration_errc::not_covered, which the arithmetic
// below rules out). r.residuals says by how much the table is above each measurement, in bytes and in
// basis points of the measurement (rounded up), and r.max_excess_bytes / r.max_excess_bp bound them all:
// "the table is not above any measurement by more than max_excess_bp / 100 %".
//
// Between two anchors the table is a straight line (rounded up); before the first anchor it is the
// first anchor's peak; past the LAST anchor it is extrapolated: peak(N) = last peak x (N / last tokens)^2,
// growing with N^2 (no measurement says anything there: measure the longest prompt you will admit).
//
// --- The fit ------------------------------------------------------------------------------------------
//
// 1. Measurements are merged per token count (the largest peak of a repeated count counts) and sorted.
//    A table's peaks cannot decrease (validate), so a table covers the measurements exactly when it
//    covers their running maximum c_i = max(b_0 .. b_i): the fit works on c, excesses count against b.
// 2. Anchor positions are chosen among the measured token counts (the last one always; the first anchor
//    may sit past the first measurement, the table being constant before it) by dynamic programming
//    over at most 128 candidate positions (all of them up to 128 token counts, else 64 evenly spaced
//    and the 64 sharpest bends: the points a chord between their neighbours misses most),
//    minimising the largest excess. A segment between anchors a and b is the chord from (t_a, c_a) to
//    (t_b, c_b), rounded up as cost_model.hpp interpolates, lifted by the largest shortfall of a
//    measurement under it: the smallest uniform lift that covers every point of the segment. With
//    more than 128 token counts, each anchor is then moved to the nearby measured count that lowers
//    the larger excess of its two segments, until none moves (a local search between candidates).
// 3. Adjacent segments share an anchor and each wants its own lift there: the anchor takes the larger
//    (c_k + max(lift left, lift right)), then peaks are made non-decreasing (running maximum). Raising
//    an anchor never lowers the table anywhere (the interpolation is monotone in both endpoints, rounding
//    included), so every segment still covers its points. A check with the table's own evaluator
//    follows, and any point found short lifts both endpoints of its segment by the shortfall, until none
//    is (a safety net the argument above never needs).
// 4. Each anchor is then lowered as far as coverage allows (binary search, the others fixed, over the
//    points of its two segments), pass after pass until nothing moves: a lower anchor never raises any
//    excess, so this only tightens the table.
// 5. Steps 3-4 run for the best placement of every anchor count up to max_anchors; the table with the
//    smallest largest excess wins (fewer anchors on a tie).
//
// Time: about n x 128^2 steps for n token counts (under a second for a few thousand, seconds for 65536).
//
// The objective: `relative` (default) minimises the largest excess as a fraction of its measurement, the
// figure the margin states; `absolute` the largest excess in bytes. For measurements of a convex peak
// (the seed's 256 MiB + 64 KiB N + 64 B N^2) the chords are above the curve and no lift is needed.
//
// calibrate_activation_coefficients fits fixed + per_token x N + per_token_sq x N^2 instead: weighted
// least squares (relative: weights 1/b^2) over the non-negative coefficient sets, slopes rounded to
// whole bytes, then fixed set to the smallest value that covers every measurement: the same guarantee.
//
// --- Ranges -------------------------------------------------------------------------------------------
//
// tokens 0 .. 4 Mi (2^22), peak bytes 1 .. 1 TiB (2^40), at most 65536 measurements: within these, no
// product in cost_model.hpp's interpolation saturates (a peak is at most twice the largest measurement,
// 2^41 x 2^22 < 2^64), so the table is evaluated exactly. A peak of 0 bytes is not a measurement.
//
// parse_calibration_csv reads the measurements file `pnmem calibrate` takes (see below).
//
// Not on the decision path: it allocates (std::vector, std::string). Pure: no OS, no exceptions.
#pragma once

#include "pnmem/detail/cxx.hpp"  // PNMEM_HAS_*: which of the standard headers below this C++ has

#include <algorithm>
#if !PNMEM_HAS_SPAN
#include <array>
#endif
#include <cstddef>
#include <cstdint>
#if PNMEM_HAS_SPAN
#include <span>
#endif
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pnmem/cost_model.hpp"
#include "pnmem/detail/equality.hpp"
#include "pnmem/detail/saturating.hpp"
#include "pnmem/parse.hpp"

namespace pnmem {

struct calibration_point {
  std::uint64_t tokens = 0;      // prompt length
  std::uint64_t peak_bytes = 0;  // the host peak measured for it
  PNMEM_DEFAULTED_EQUALITY(calibration_point)
};

// The measurements a calibration reads: a std::span (an array, a std::array, a std::vector of them).
#if PNMEM_HAS_SPAN
using calibration_points = std::span<const calibration_point>;
#else
// C++17 (no std::span: detail/cxx.hpp): the same view, made from the same things, or (pointer, count).
class calibration_points {
 public:
  constexpr calibration_points() noexcept = default;
  constexpr calibration_points(const calibration_point* data, std::size_t size) noexcept : data_(data), size_(size) {}
  template <std::size_t N>
  constexpr calibration_points(const calibration_point (&a)[N]) noexcept : data_(a), size_(N) {}  // NOLINT
  template <std::size_t N>
  constexpr calibration_points(const std::array<calibration_point, N>& a) noexcept  // NOLINT
      : data_(a.data()), size_(N) {}
  calibration_points(const std::vector<calibration_point>& v) noexcept  // NOLINT
      : data_(v.data()), size_(v.size()) {}

  constexpr const calibration_point* data() const noexcept { return data_; }
  constexpr std::size_t size() const noexcept { return size_; }
  constexpr bool empty() const noexcept { return size_ == 0; }
  constexpr const calibration_point* begin() const noexcept { return data_; }
  constexpr const calibration_point* end() const noexcept { return data_ + size_; }
  constexpr const calibration_point& operator[](std::size_t i) const noexcept { return data_[i]; }

 private:
  const calibration_point* data_ = nullptr;
  std::size_t size_ = 0;
};
#endif

inline constexpr std::uint64_t max_calibration_tokens = 1ULL << 22;  // 4 Mi tokens
inline constexpr std::uint64_t max_calibration_bytes = 1ULL << 40;   // 1 TiB
inline constexpr std::size_t max_calibration_points = 65536;

enum class calibration_objective : std::uint8_t {
  relative,  // the largest excess as a fraction of its measurement
  absolute,  // the largest excess in bytes
};

struct calibration_options {
  std::size_t max_anchors = max_activation_anchors;  // 1 .. 8
  calibration_objective objective = calibration_objective::relative;
};

enum class calibration_errc : std::uint8_t {
  ok,
  no_measurements,
  too_many_measurements,  // more than max_calibration_points
  tokens_out_of_range,    // above max_calibration_tokens (error_index says which)
  bytes_out_of_range,     // 0, or above max_calibration_bytes (error_index says which)
  bad_max_anchors,        // not 1 .. 8
  not_covered,            // the fit failed its own check (never expected): no table is returned
};

constexpr std::string_view to_string(calibration_errc e) noexcept {
  switch (e) {
    case calibration_errc::ok: return "ok";
    case calibration_errc::no_measurements: return "no measurements";
    case calibration_errc::too_many_measurements: return "too many measurements (at most 65536)";
    case calibration_errc::tokens_out_of_range: return "token count out of range (0 to 4194304)";
    case calibration_errc::bytes_out_of_range: return "peak bytes out of range (1 B to 1 TiB)";
    case calibration_errc::bad_max_anchors: return "max anchors must be 1 to 8";
    case calibration_errc::not_covered: return "internal: the fitted table is below a measurement";
  }
  return "invalid";
}

// How far a table is above one measurement.
struct calibration_residual {
  std::uint64_t tokens = 0;
  std::uint64_t measured_bytes = 0;
  std::uint64_t table_bytes = 0;   // activation_peak_bytes(table, tokens)
  std::uint64_t excess_bytes = 0;  // table_bytes - measured_bytes (never negative: see `covered`)
  std::uint64_t excess_bp = 0;     // excess_bytes / measured_bytes in basis points (1/100 %), rounded up
  bool covered = true;             // table_bytes >= measured_bytes
};

struct calibration_result {
  calibration_errc error = calibration_errc::ok;
  std::size_t error_index = 0;  // the measurement out of range (tokens_out_of_range, bytes_out_of_range)
  activation_model table{};     // the fitted model (ok only)
  std::vector<calibration_residual> residuals;  // one per measurement, in the input's order
  std::size_t distinct_tokens = 0;              // token counts measured
  std::uint64_t max_excess_bytes = 0;           // the largest residual in bytes ...
  std::size_t max_excess_bytes_index = 0;       // ... and whose it is
  std::uint64_t max_excess_bp = 0;              // the largest residual in basis points (rounded up) ...
  std::size_t max_excess_bp_index = 0;          // ... and whose it is
  std::size_t repair_lifts = 0;  // anchors table: points the check of step 3 had to lift (0: the argument held)
  bool ok() const noexcept { return error == calibration_errc::ok; }
};

namespace detail::calibration {

// An excess of `over` bytes above a measurement of `of` bytes (of >= 1).
struct excess {
  std::uint64_t over = 0;
  std::uint64_t of = 1;
};

// a is worse than b: compared exactly (128-bit cross products), the other measure breaking ties.
inline bool worse(const excess& a, const excess& b, calibration_objective o) noexcept {
  const u128 ra = static_cast<u128>(a.over) * b.of;
  const u128 rb = static_cast<u128>(b.over) * a.of;
  if (o == calibration_objective::relative) return ra != rb ? ra > rb : a.over > b.over;
  return a.over != b.over ? a.over > b.over : ra > rb;
}

inline excess worst(const excess& a, const excess& b, calibration_objective o) noexcept {
  return worse(a, b, o) ? a : b;
}

inline constexpr excess infinite{u64_max, 1};

// The measurements merged per token count, sorted: t (tokens), b (largest peak), c (running max of b).
struct series {
  std::vector<std::uint64_t> t, b, c;
  std::size_t size() const noexcept { return t.size(); }
};

inline series merge(calibration_points m) {
  std::vector<calibration_point> s(m.begin(), m.end());
  std::sort(s.begin(), s.end(), [](const calibration_point& x, const calibration_point& y) {
    return x.tokens != y.tokens ? x.tokens < y.tokens : x.peak_bytes > y.peak_bytes;
  });
  series out;
  for (const calibration_point& p : s) {
    if (!out.t.empty() && out.t.back() == p.tokens) continue;  // the largest of a repeated count came first
    out.t.push_back(p.tokens);
    out.b.push_back(p.peak_bytes);
    out.c.push_back(out.c.empty() ? p.peak_bytes : std::max(out.c.back(), p.peak_bytes));
  }
  return out;
}

// cost_model.hpp's interpolation between (t0, p0) and (t1, p1), p0 <= p1, t0 < t <= t1, exact in the
// ranges above (rise x span < 2^63).
inline std::uint64_t chord(std::uint64_t t0, std::uint64_t p0, std::uint64_t t1, std::uint64_t p1,
                           std::uint64_t t) noexcept {
  const std::uint64_t span = t1 - t0;
  const std::uint64_t num = (p1 - p0) * (t - t0);
  return p0 + num / span + (num % span != 0 ? 1 : 0);
}

// The smallest uniform lift of the chord (i, j) of c that covers c at every point strictly between.
inline std::uint64_t segment_lift(const series& s, std::size_t i, std::size_t j) noexcept {
  std::uint64_t lift = 0;
  for (std::size_t k = i + 1; k < j; ++k) {
    const std::uint64_t v = chord(s.t[i], s.c[i], s.t[j], s.c[j], s.t[k]);
    if (s.c[k] > v) lift = std::max(lift, s.c[k] - v);
  }
  return lift;
}

// The largest excess over the points i..j of the lifted chord (i, j).
inline excess segment_cost(const series& s, std::size_t i, std::size_t j, calibration_objective o) noexcept {
  const std::uint64_t lift = segment_lift(s, i, j);
  excess e{0, 1};
  for (std::size_t k = i; k <= j; ++k) {
    const std::uint64_t v = (k == i ? s.c[i] : chord(s.t[i], s.c[i], s.t[j], s.c[j], s.t[k])) + lift;
    e = worst(e, excess{v - s.b[k], s.b[k]}, o);
  }
  return e;
}

// The largest excess over the points 0..j of a constant table at c_j (the region before the first anchor).
inline excess prefix_cost(const series& s, std::size_t j, calibration_objective o) noexcept {
  excess e{0, 1};
  for (std::size_t k = 0; k <= j; ++k) e = worst(e, excess{s.c[j] - s.b[k], s.b[k]}, o);
  return e;
}

inline activation_model table_of(const std::vector<activation_anchor>& a) noexcept {
  activation_model m;
  for (std::size_t i = 0; i < a.size() && i < max_activation_anchors; ++i) m.anchors[i] = a[i];
  m.n_anchors = static_cast<std::uint32_t>(a.size());
  return m;
}

// Every point from..to (inclusive) covered by the table.
inline bool covers(const activation_model& m, const series& s, std::size_t from, std::size_t to) noexcept {
  for (std::size_t k = from; k <= to; ++k) {
    if (activation_peak_bytes(m, s.t[k]) < s.b[k]) return false;
  }
  return true;
}

// The largest excess of a table over every point (infinite when one is not covered).
inline excess table_cost(const activation_model& m, const series& s, calibration_objective o) noexcept {
  excess e{0, 1};
  for (std::size_t k = 0; k < s.size(); ++k) {
    const std::uint64_t v = activation_peak_bytes(m, s.t[k]);
    if (v < s.b[k]) return infinite;
    e = worst(e, excess{v - s.b[k], s.b[k]}, o);
  }
  return e;
}

inline void make_non_decreasing(std::vector<activation_anchor>& a) noexcept {
  for (std::size_t k = 1; k < a.size(); ++k) a[k].peak_bytes = std::max(a[k].peak_bytes, a[k - 1].peak_bytes);
}

// With thinned candidates: moves each anchor but the last, one at a time, to the measured point near it
// (within `window` points, between its neighbours) that lowers the larger excess of its two segments,
// until none moves. The other segments are unchanged, so the largest excess overall never rises.
inline void refine_positions(const series& s, std::vector<std::size_t>& pos, std::size_t window,
                             calibration_objective o) {
  const std::size_t n = pos.size();
  const auto around = [&](std::size_t k, std::size_t i) {
    const excess left = k > 0 ? segment_cost(s, pos[k - 1], i, o) : prefix_cost(s, i, o);
    return worst(left, segment_cost(s, i, pos[k + 1], o), o);
  };
  for (int pass = 0; pass < 16; ++pass) {
    bool moved = false;
    for (std::size_t k = 0; k + 1 < n; ++k) {
      const std::size_t first = std::max(k > 0 ? pos[k - 1] + 1 : 0, pos[k] > window ? pos[k] - window : 0);
      const std::size_t last = std::min(pos[k + 1] - 1, pos[k] + window);
      excess here = around(k, pos[k]);
      std::size_t best = pos[k];
      for (std::size_t i = first; i <= last; ++i) {
        if (i == pos[k]) continue;
        const excess e = around(k, i);
        if (worse(here, e, o)) {
          here = e;
          best = i;
        }
      }
      if (best != pos[k]) {
        pos[k] = best;
        moved = true;
      }
    }
    if (!moved) break;
  }
}

// Steps 3 and 4 for anchors at the points `pos` (increasing, the last one the last point). An empty
// vector when the check cannot make the table cover every point (not expected).
inline std::vector<activation_anchor> build_table(const series& s, const std::vector<std::size_t>& pos,
                                                   std::size_t& repairs) {
  const std::size_t n = pos.size();
  std::vector<std::uint64_t> lift(n, 0);  // lift[k]: segment k, from anchor k-1 to anchor k (k >= 1)
  for (std::size_t k = 1; k < n; ++k) lift[k] = segment_lift(s, pos[k - 1], pos[k]);
  std::vector<activation_anchor> a(n);
  for (std::size_t k = 0; k < n; ++k) {
    const std::uint64_t left = k >= 1 ? lift[k] : 0;
    const std::uint64_t right = k + 1 < n ? lift[k + 1] : 0;
    a[k] = {s.t[pos[k]], s.c[pos[k]] + std::max(left, right)};
  }
  make_non_decreasing(a);

  // The check: any point found short lifts both ends of its segment by the shortfall, which raises it by
  // exactly that; raising never uncovers another point. Each round covers at least one more point.
  for (std::size_t round = 0;; ++round) {
    const activation_model m = table_of(a);
    bool all = true;
    std::size_t seg = 0;
    for (std::size_t k = 0; k < s.size(); ++k) {
      while (seg < n && s.t[k] > a[seg].tokens) ++seg;  // the point is in segment `seg` (anchor seg-1 .. seg)
      const std::uint64_t v = activation_peak_bytes(m, s.t[k]);
      if (v >= s.b[k]) continue;
      all = false;
      ++repairs;
      if (seg >= n) return {};  // past the last anchor: cannot happen, the last anchor is the last point
      const std::uint64_t d = s.b[k] - v;
      a[seg].peak_bytes += d;
      if (seg > 0) a[seg - 1].peak_bytes += d;
      make_non_decreasing(a);
      break;
    }
    if (all) break;
    if (round > s.size()) return {};
  }

  // Step 4: lower each anchor as far as its two segments allow.
  for (int pass = 0; pass < 64; ++pass) {
    bool moved = false;
    for (std::size_t k = 0; k < n; ++k) {
      const std::uint64_t lo = k > 0 ? a[k - 1].peak_bytes : 0;
      std::uint64_t hi = a[k].peak_bytes;
      if (lo >= hi) continue;
      // The points whose value depends on anchor k: after anchor k-1 (or the first) up to anchor k+1.
      const std::size_t from = k > 0 ? pos[k - 1] + 1 : 0;
      const std::size_t to = k + 1 < n ? pos[k + 1] : pos[k];
      std::vector<activation_anchor> trial = a;
      std::uint64_t low = lo;  // invariant: `hi` covers; below `low` nothing was found to
      while (low < hi) {
        const std::uint64_t mid = low + (hi - low) / 2;
        trial[k].peak_bytes = mid;
        if (covers(table_of(trial), s, from, to)) {
          hi = mid;
        } else {
          low = mid + 1;
        }
      }
      if (hi < a[k].peak_bytes) {
        a[k].peak_bytes = hi;
        moved = true;
      }
    }
    if (!moved) break;
  }
  return a;
}

inline std::uint64_t excess_bp(std::uint64_t over, std::uint64_t of) noexcept {
  return over == 0 ? 0 : mul_div_ceil(over, 10000, of == 0 ? 1 : of);
}

// Fills the residuals and maxima of `r` for r.table over the measurements `m`.
inline void report(calibration_result& r, calibration_points m) {
  r.residuals.clear();
  r.residuals.reserve(m.size());
  r.max_excess_bytes = r.max_excess_bp = 0;
  r.max_excess_bytes_index = r.max_excess_bp_index = 0;
  for (std::size_t i = 0; i < m.size(); ++i) {
    calibration_residual x;
    x.tokens = m[i].tokens;
    x.measured_bytes = m[i].peak_bytes;
    x.table_bytes = activation_peak_bytes(r.table, m[i].tokens);
    x.covered = x.table_bytes >= x.measured_bytes;
    x.excess_bytes = sat_sub(x.table_bytes, x.measured_bytes);
    x.excess_bp = excess_bp(x.excess_bytes, x.measured_bytes);
    if (x.excess_bytes > r.max_excess_bytes) {
      r.max_excess_bytes = x.excess_bytes;
      r.max_excess_bytes_index = i;
    }
    if (x.excess_bp > r.max_excess_bp) {
      r.max_excess_bp = x.excess_bp;
      r.max_excess_bp_index = i;
    }
    r.residuals.push_back(x);
  }
}

// Validates the measurements; error set on r when one is bad.
inline bool check_input(calibration_result& r, calibration_points m) noexcept {
  if (m.empty()) {
    r.error = calibration_errc::no_measurements;
    return false;
  }
  if (m.size() > max_calibration_points) {
    r.error = calibration_errc::too_many_measurements;
    return false;
  }
  for (std::size_t i = 0; i < m.size(); ++i) {
    if (m[i].tokens > max_calibration_tokens) {
      r.error = calibration_errc::tokens_out_of_range;
      r.error_index = i;
      return false;
    }
    if (m[i].peak_bytes == 0 || m[i].peak_bytes > max_calibration_bytes) {
      r.error = calibration_errc::bytes_out_of_range;
      r.error_index = i;
      return false;
    }
  }
  return true;
}

// The residuals of r.table, and the guarantee checked: not_covered (and no table) when a measurement is
// above it.
inline void finish(calibration_result& r, calibration_points m) {
  report(r, m);
  for (const calibration_residual& x : r.residuals) {
    if (!x.covered) {
      r.error = calibration_errc::not_covered;
      r.table = activation_model{};
      return;
    }
  }
}

}  // namespace detail::calibration

// The residuals of any activation model over measurements (no fitting): how far `table` is above (or,
// `covered` false, below) each, and the maxima. error is ok, or not_covered when one is below.
inline calibration_result calibration_report(const activation_model& table, calibration_points m) {
  calibration_result r;
  r.table = table;
  detail::calibration::report(r, m);
  for (const calibration_residual& x : r.residuals) {
    if (!x.covered) r.error = calibration_errc::not_covered;
  }
  return r;
}

// An anchor table (1 .. options.max_anchors anchors) never below any measurement; see the top of the file.
inline calibration_result calibrate_activation(calibration_points m,
                                               calibration_options options = {}) {
  namespace c = detail::calibration;
  calibration_result r;
  if (options.max_anchors < 1 || options.max_anchors > max_activation_anchors) {
    r.error = calibration_errc::bad_max_anchors;
    return r;
  }
  if (!c::check_input(r, m)) return r;
  const c::series s = c::merge(m);
  const std::size_t n = s.size();
  r.distinct_tokens = n;
  const calibration_objective o = options.objective;

  // Candidate anchor positions (point indices): all of them, or 128: 64 evenly spaced (the first and the
  // last among them), then the bends, the points a chord between their two neighbours misses most.
  constexpr std::size_t max_candidates = 128;
  std::vector<std::size_t> cand;
  if (n <= max_candidates) {
    for (std::size_t i = 0; i < n; ++i) cand.push_back(i);
  } else {
    constexpr std::size_t spaced = max_candidates / 2;
    std::vector<bool> pick(n, false);
    std::size_t picked = 0;
    const auto take = [&](std::size_t i) {
      if (!pick[i]) ++picked;
      pick[i] = true;
    };
    for (std::size_t k = 0; k < spaced; ++k) take((k * (n - 1) + (spaced - 1) / 2) / (spaced - 1));
    std::vector<std::pair<c::excess, std::size_t>> bends;
    for (std::size_t i = 1; i + 1 < n; ++i) {
      const c::excess e = c::segment_cost(s, i - 1, i + 1, o);
      if (e.over > 0 && !pick[i]) bends.push_back({e, i});
    }
    std::sort(bends.begin(), bends.end(), [o](const auto& x, const auto& y) {
      return c::worse(x.first, y.first, o) || (!c::worse(y.first, x.first, o) && x.second < y.second);
    });
    for (std::size_t k = 0; k < bends.size() && picked < max_candidates; ++k) take(bends[k].second);
    for (std::size_t i = 0; i < n; ++i) {
      if (pick[i]) cand.push_back(i);
    }
  }
  const std::size_t nc = cand.size();
  const std::size_t anchors = std::min(options.max_anchors, nc);

  // seg[p][q]: the lifted chord from candidate p to q (p < q).
  std::vector<c::excess> seg(nc * nc, c::infinite);
  for (std::size_t p = 0; p < nc; ++p) {
    for (std::size_t q = p + 1; q < nc; ++q) seg[p * nc + q] = c::segment_cost(s, cand[p], cand[q], o);
  }
  // best[j][q]: the smallest largest excess over points 0..cand[q] with j+1 anchors, the last at q.
  std::vector<std::vector<c::excess>> best(anchors, std::vector<c::excess>(nc, c::infinite));
  std::vector<std::vector<std::size_t>> parent(anchors, std::vector<std::size_t>(nc, 0));
  for (std::size_t q = 0; q < nc; ++q) best[0][q] = c::prefix_cost(s, cand[q], o);
  for (std::size_t j = 1; j < anchors; ++j) {
    for (std::size_t q = j; q < nc; ++q) {
      for (std::size_t p = j - 1; p < q; ++p) {
        if (best[j - 1][p].over == detail::u64_max) continue;
        const c::excess e = c::worst(best[j - 1][p], seg[p * nc + q], o);
        if (c::worse(best[j][q], e, o)) {
          best[j][q] = e;
          parent[j][q] = p;
        }
      }
    }
  }

  // Steps 3-5: build the best placement of each anchor count, keep the best table.
  std::vector<activation_anchor> chosen;
  c::excess chosen_cost = c::infinite;
  for (std::size_t j = 0; j < anchors; ++j) {
    if (best[j][nc - 1].over == detail::u64_max && j > 0) continue;
    std::vector<std::size_t> pos(j + 1);
    std::size_t q = nc - 1;
    for (std::size_t k = j + 1; k-- > 0;) {
      pos[k] = cand[q];
      if (k > 0) q = parent[k][q];
    }
    if (nc < n) c::refine_positions(s, pos, (n + nc - 1) / nc, o);
    std::size_t repairs = 0;
    const std::vector<activation_anchor> a = c::build_table(s, pos, repairs);
    r.repair_lifts += repairs;
    if (a.empty()) continue;
    const c::excess e = c::table_cost(c::table_of(a), s, o);
    if (chosen.empty() || c::worse(chosen_cost, e, o)) {
      chosen = a;
      chosen_cost = e;
    }
  }
  if (chosen.empty()) {
    r.error = calibration_errc::not_covered;
    return r;
  }
  r.table = c::table_of(chosen);
  c::finish(r, m);
  return r;
}

// Coefficients (fixed + per_token x N + per_token_sq x N^2) never below any measurement; see the top.
// options.max_anchors is not used.
inline calibration_result calibrate_activation_coefficients(calibration_points m,
                                                            calibration_options options = {}) {
  namespace c = detail::calibration;
  calibration_result r;
  if (!c::check_input(r, m)) return r;
  const c::series s = c::merge(m);
  r.distinct_tokens = s.size();
  const double t_scale = static_cast<double>(std::max<std::uint64_t>(s.t.back(), 1));
  const double b_scale = static_cast<double>(s.c.back());

  // The fixed cost that makes slopes (lin, sq) cover every point: the smallest such.
  const auto cover = [&](std::uint64_t lin, std::uint64_t sq) {
    using detail::sat_add;
    using detail::sat_mul;
    using detail::sat_sub;
    std::uint64_t fixed = 0;
    for (std::size_t k = 0; k < s.size(); ++k) {
      const std::uint64_t slope_part = sat_add(sat_mul(lin, s.t[k]), sat_mul(sq, sat_mul(s.t[k], s.t[k])));
      fixed = std::max(fixed, sat_sub(s.b[k], slope_part));
    }
    return activation_coefficients(fixed, lin, sq);
  };

  activation_model best_model = cover(0, 0);  // a constant: always a candidate
  c::excess best_cost = c::table_cost(best_model, s, options.objective);
  // Weighted least squares over each set of free coefficients (x0 fixed, x1 per token, x2 per token^2,
  // in scaled units), solved by Cramer's rule; sets giving a negative coefficient are skipped.
  for (unsigned set = 1; set < 8; ++set) {
    double a[3][3] = {};
    double y[3] = {};
    for (std::size_t k = 0; k < s.size(); ++k) {
      const double x = static_cast<double>(s.t[k]) / t_scale;
      const double basis[3] = {1.0, x, x * x};
      const double b = static_cast<double>(s.b[k]) / b_scale;
      const double w = options.objective == calibration_objective::relative ? 1.0 / (b * b) : 1.0;
      for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 3; ++j) a[i][j] += w * basis[i] * basis[j];
        y[i] += w * basis[i] * b;
      }
    }
    // Restrict to the free coefficients: a fixed-at-0 coefficient's row and column become identity.
    for (int i = 0; i < 3; ++i) {
      if (set & (1u << i)) continue;
      for (int j = 0; j < 3; ++j) a[i][j] = a[j][i] = 0.0;
      a[i][i] = 1.0;
      y[i] = 0.0;
    }
    const auto det3 = [](const double (&q)[3][3]) {
      return q[0][0] * (q[1][1] * q[2][2] - q[1][2] * q[2][1]) - q[0][1] * (q[1][0] * q[2][2] - q[1][2] * q[2][0]) +
             q[0][2] * (q[1][0] * q[2][1] - q[1][1] * q[2][0]);
    };
    const double d = det3(a);
    if (!(d > 1e-300 || d < -1e-300)) continue;
    double x[3];
    for (int col = 0; col < 3; ++col) {
      double q[3][3];
      for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 3; ++j) q[i][j] = j == col ? y[i] : a[i][j];
      }
      x[col] = det3(q) / d;
    }
    if (x[1] < 0.0 || x[2] < 0.0) continue;
    const double lin = x[1] * b_scale / t_scale;
    const double sq = x[2] * b_scale / (t_scale * t_scale);
    if (!(lin < 1.8e19) || !(sq < 1.8e19)) continue;
    const activation_model cand = cover(static_cast<std::uint64_t>(lin + 0.5), static_cast<std::uint64_t>(sq + 0.5));
    const c::excess e = c::table_cost(cand, s, options.objective);
    if (c::worse(best_cost, e, options.objective)) {
      best_model = cand;
      best_cost = e;
    }
  }
  r.table = best_model;
  c::finish(r, m);
  return r;
}

// --- The measurements file ------------------------------------------------------------------------------
//
//   # tokens,peak_bytes        comments run from '#' to the end of the line
//   tokens,peak_bytes          an optional header: the first line that is not blank or a comment, when
//   0,300MiB                   its first field starts with a letter
//   1024, 402653184            one measurement per line: tokens (a plain decimal integer) and peak bytes
//   4096,"1.6 GiB"             (parse.hpp's byte sizes: units KiB..TiB, no KB/MB); fields may be quoted
//
// Blank lines are skipped; CRLF line ends and a UTF-8 byte-order mark are accepted. Anything else is an
// error naming the line (1-based) and what is wrong; the first error stops the parse.
struct calibration_csv {
  std::vector<calibration_point> points;
  std::vector<std::size_t> lines;  // each point's line number
  bool has_header = false;
  std::size_t error_line = 0;  // the line of the error (0: none)
  std::string error;           // what is wrong with it, e.g. `peak_bytes "12x": unknown unit ...`
  bool ok() const noexcept { return error_line == 0; }
};

namespace detail::calibration {

inline std::string_view trim_blank(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

inline std::string_view unquote(std::string_view s) noexcept {
  s = trim_blank(s);
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = trim_blank(s.substr(1, s.size() - 2));
  return s;
}

// `field "text": problem`, the text cut to 40 bytes and its control bytes shown as '?'.
inline std::string describe(std::string_view field, std::string_view text, std::string_view problem) {
  std::string out(field);
  out += " \"";
  for (std::size_t i = 0; i < text.size() && i < 40; ++i) {
    const auto u = static_cast<unsigned char>(text[i]);
    out += (u < 0x20 || u == 0x7f) ? '?' : text[i];
  }
  if (text.size() > 40) out += "...";
  out += "\": ";
  out += problem;
  return out;
}

inline bool starts_with_letter(std::string_view s) noexcept {
  return !s.empty() && ((s.front() >= 'a' && s.front() <= 'z') || (s.front() >= 'A' && s.front() <= 'Z'));
}

}  // namespace detail::calibration

inline calibration_csv parse_calibration_csv(std::string_view text) {
  namespace c = detail::calibration;
  calibration_csv out;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  bool first_content = true;
  std::size_t line_no = 0;
  const auto fail = [&](std::string message) {
    out.error_line = line_no;
    out.error = std::move(message);
    out.points.clear();
    out.lines.clear();
    return out;
  };
  while (!text.empty()) {
    ++line_no;
    const std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (const std::size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    line = c::trim_blank(line);
    if (line.empty()) continue;
    if (out.points.size() >= max_calibration_points) return fail("too many measurements (at most 65536)");

    const std::size_t comma = line.find(',');
    std::size_t fields = 1;
    for (const char ch : line) {
      if (ch == ',') ++fields;
    }
    if (fields != 2) {
      return fail("expected 2 fields (tokens,peak_bytes), found " + std::to_string(fields));
    }
    const std::string_view tok = c::unquote(line.substr(0, comma));
    const std::string_view bytes = c::unquote(line.substr(comma + 1));
    if (first_content && c::starts_with_letter(tok)) {
      out.has_header = true;
      first_content = false;
      continue;
    }
    first_content = false;

    // tokens: a plain unsigned decimal integer.
    if (tok.empty()) return fail(c::describe("tokens", tok, to_string(parse_errc::empty)));
    if (tok.front() == '-') return fail(c::describe("tokens", tok, to_string(parse_errc::negative)));
    std::uint64_t t = 0;
    for (const char ch : tok) {
      if (ch < '0' || ch > '9') return fail(c::describe("tokens", tok, "not a whole number of tokens"));
      t = t * 10 + static_cast<std::uint64_t>(ch - '0');
      if (t > max_calibration_tokens) return fail(c::describe("tokens", tok, "out of range (0 to 4194304)"));
    }
    const parsed<std::uint64_t> b = parse_bytes(bytes);
    if (!b.ok()) return fail(c::describe("peak_bytes", bytes, to_string(b.error)));
    if (b.value == 0 || b.value > max_calibration_bytes) {
      return fail(c::describe("peak_bytes", bytes, "out of range (1 B to 1 TiB)"));
    }
    out.points.push_back({t, b.value});
    out.lines.push_back(line_no);
  }
  return out;
}

}  // namespace pnmem
