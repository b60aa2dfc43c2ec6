// pnmem/keep_set.hpp - which tokens of a slot's KV to keep when rung 4b evicts (the CPU reference).
//
// The ladder's rung 4b (ladder.hpp) turns KV eviction on at TIGHT; eviction_budget.hpp says how many
// tokens a slot keeps for the bytes wanted; this header says which. Every selection keeps
//
//   the sinks    the first `sinks` tokens: attention keeps flowing to them whatever they say
//                (StreamingLLM, Xiao et al. 2023)
//   the recent   the last `recent` tokens: the observation window whose queries score the rest
//
// and fills the rest of the budget with the highest-scoring tokens between them. The scores come
// from one of:
//
//   observation_scores  the attention the observation window's queries paid each token, summed over
//                       those queries (and the heads of a KV group), then max-pooled over `kernel`
//                       neighbours so a kept token keeps its context (SnapKV, Li et al. 2024)
//   key_norm_scores     minus the squared L2 norm of each token's key: keys with a small norm draw
//                       most attention (Devoto et al. 2024); needs no attention weights, so it
//                       works with fused attention kernels that never materialise them
//   (no scores)         sinks and the most recent tokens only (StreamingLLM)
//
// One call selects one row (a layer, or a KV head of a layer); layers may have different budgets
// (pyramid_budgets: more in the lower layers, PyramidKV, Cai et al. 2024).
//
// Deterministic: the kept set is the sinks, the recent, and the `budget - sinks - recent` middle
// tokens first in the order (score descending, position ascending): equal scores keep the earlier
// token; a NaN score ranks below every number (as -infinity). Positions come out increasing, the
// order a compaction copies rows in. No allocation: the caller passes `scratch` (n_tokens floats);
// O(n_tokens) on average (a selection, not a sort). Header-only; C++17.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>

namespace pnmem {

// What every selection keeps, whatever the scores.
// The pooling kernel of observation_scores when the engine has no other (SnapKV's 7: a kept token's three
// neighbours on each side stay with it). Python's observation_scores defaults to it.
inline constexpr int default_observation_kernel = 7;

struct keep_window {
  int sinks = 4;    // the first tokens
  int recent = 32;  // the last tokens (SnapKV's observation window)
};

namespace detail {
// A score as selection ranks it: NaN is -infinity.
inline float rank_key(float x) noexcept { return std::isnan(x) ? -std::numeric_limits<float>::infinity() : x; }
}  // namespace detail

// Selects the tokens of a row of `n_tokens` to keep within `budget` tokens and writes their positions,
// increasing, to keep[0 .. k); returns k = min(budget, n_tokens) (0 for a negative budget or length).
// When the budget is smaller than sinks + recent, the sinks come first and the recent get the rest.
// `scores`: n_tokens values (those of the sinks and the recent are not read), or nullptr: no scores,
// the middle's most recent tokens fill the budget (StreamingLLM). `keep`: room for min(budget,
// n_tokens) positions. `scratch`: room for n_tokens floats (not read when scores is nullptr).
inline int select_keep(const float* scores, int n_tokens, int budget, keep_window w, int* keep,
                       float* scratch) noexcept {
  if (n_tokens <= 0 || budget <= 0) return 0;
  int k = 0;
  if (n_tokens <= budget) {
    for (int t = 0; t < n_tokens; ++t) keep[k++] = t;
    return k;
  }
  const int sinks = std::clamp(w.sinks, 0, budget);
  const int recent = std::clamp(w.recent, 0, budget - sinks);
  const int mid_begin = sinks;
  const int mid_end = n_tokens - recent;  // > mid_begin: n_tokens > budget >= sinks + recent
  const int mid_keep = budget - sinks - recent;

  for (int t = 0; t < sinks; ++t) keep[k++] = t;
  if (mid_keep > 0 && scores == nullptr) {
    for (int t = mid_end - mid_keep; t < mid_end; ++t) keep[k++] = t;
  } else if (mid_keep > 0) {
    // The mid_keep-th largest key v: every key above it is kept, and of those equal to it the earliest
    // `equal_kept` (the order is score descending, position ascending).
    const int m = mid_end - mid_begin;
    for (int i = 0; i < m; ++i) scratch[i] = detail::rank_key(scores[mid_begin + i]);
    std::nth_element(scratch, scratch + (mid_keep - 1), scratch + m, std::greater<float>{});
    const float v = scratch[mid_keep - 1];
    int above = 0;  // after nth_element, every key above v sits before it
    for (int i = 0; i < mid_keep - 1; ++i) above += scratch[i] > v ? 1 : 0;
    int equal_kept = mid_keep - above;
    for (int t = mid_begin; t < mid_end; ++t) {
      const float key = detail::rank_key(scores[t]);
      if (key > v) {
        keep[k++] = t;
      } else if (key == v && equal_kept > 0) {
        keep[k++] = t;
        --equal_kept;
      }
    }
  }
  for (int t = mid_end; t < n_tokens; ++t) keep[k++] = t;
  return k;
}

// SnapKV's scores for one row: `attn` is `rows` x n_tokens, row-major (the observation window's
// queries, of every head that shares this KV head), the attention weights each query paid each
// token. scores[t] = max over |u - t| <= kernel / 2 of (sum over rows of attn[row][u]). A kernel below
// 2 does not pool. `scratch`: n_tokens floats.
inline void observation_scores(const float* attn, int rows, int n_tokens, int kernel, float* scores,
                               float* scratch) noexcept {
  if (n_tokens <= 0) return;
  for (int t = 0; t < n_tokens; ++t) scratch[t] = 0.0f;
  for (int r = 0; r < rows; ++r) {
    const float* row = attn + static_cast<std::int64_t>(r) * n_tokens;
    for (int t = 0; t < n_tokens; ++t) scratch[t] += row[t];
  }
  const int half = kernel < 2 ? 0 : kernel / 2;
  for (int t = 0; t < n_tokens; ++t) {
    const int lo = std::max(0, t - half);
    const int hi = std::min(n_tokens - 1, t + half);
    float best = detail::rank_key(scratch[lo]);
    for (int u = lo + 1; u <= hi; ++u) best = std::max(best, detail::rank_key(scratch[u]));
    scores[t] = best;
  }
}

// The key-norm scores of one row: `keys` is n_tokens x dim, row-major (one KV head's keys);
// scores[t] = -(sum of keys[t][i]^2): the smaller the key, the higher the score.
inline void key_norm_scores(const float* keys, int n_tokens, int dim, float* scores) noexcept {
  for (int t = 0; t < n_tokens; ++t) {
    const float* key = keys + static_cast<std::int64_t>(t) * dim;
    // Eight partial sums: one running sum is a chain of dependent adds the compiler may not reorder;
    // eight vectorise (bench_eviction's BM_key_norm_keep: 1.73 -> 0.64 ms per 32k x 128 row).
    float part[8] = {};
    int i = 0;
    for (; i + 8 <= dim; i += 8) {
      for (int j = 0; j < 8; ++j) part[j] += key[i + j] * key[i + j];
    }
    for (; i < dim; ++i) part[0] += key[i] * key[i];
    scores[t] = -(((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7])));
  }
}

// PyramidKV's per-layer budgets: n_layers budgets that decrease linearly from the first layer to the
// last, the last `least` tokens, the mean exactly `mean` (they add up to n_layers x mean; the
// rounding's remainder goes to the first layers, so the budgets never increase with depth).
// `least` is clamped to [0, mean]; one layer gets `mean`. Returns false (nothing written) for
// n_layers < 1, mean < 0, or a first layer's budget (2 x mean - least) past INT_MAX.
constexpr bool pyramid_budgets(int n_layers, int mean, int least, int* budgets) noexcept {
  if (n_layers < 1 || mean < 0) return false;
  if (2 * std::int64_t{mean} - std::clamp(least, 0, mean) > std::numeric_limits<int>::max()) return false;
  if (n_layers == 1) {
    budgets[0] = mean;
    return true;
  }
  const std::int64_t lo = std::clamp(least, 0, mean);
  const std::int64_t hi = 2 * std::int64_t{mean} - lo;  // the first layer's: the mean is halfway
  const std::int64_t steps = n_layers - 1;
  std::int64_t sum = 0;
  for (int l = 0; l < n_layers; ++l) {
    // lo + (hi - lo) x (n_layers - 1 - l) / (n_layers - 1), rounded down.
    const std::int64_t b = lo + (hi - lo) * (steps - l) / steps;
    budgets[l] = static_cast<int>(b);
    sum += b;
  }
  std::int64_t remainder = std::int64_t{n_layers} * mean - sum;  // < n_layers: each term lost < 1
  for (int l = 0; remainder > 0; ++l, --remainder) ++budgets[l];
  return true;
}

}  // namespace pnmem
