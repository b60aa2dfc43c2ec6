// tests/keep_set_reference.hpp - rung 4b's keep-set rules written out the slow way, apart from
// keep_set.hpp: the expected values of test_keep_set.cpp and of the CUDA conformance suite, whose fake
// backend runs keep_set.hpp itself (so comparing it with keep_set.hpp would compare the code with itself).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <numeric>
#include <vector>

#include "pnmem/keep_set.hpp"

namespace pnmem::test {

// The rule written out the slow way: sinks, recent, and the middle sorted stably by score descending
// (NaN as -infinity), the first budget - sinks - recent of it; positions increasing.
inline std::vector<int> reference_keep(const std::vector<float>& scores, int budget, keep_window w) {
  const int n = static_cast<int>(scores.size());
  std::vector<int> out;
  if (n <= 0 || budget <= 0) return out;
  if (n <= budget) {
    out.resize(static_cast<std::size_t>(n));
    std::iota(out.begin(), out.end(), 0);
    return out;
  }
  const int sinks = std::min(std::max(w.sinks, 0), budget);
  const int recent = std::min(std::max(w.recent, 0), budget - sinks);
  std::vector<int> middle;
  for (int t = sinks; t < n - recent; ++t) middle.push_back(t);
  auto key = [&](int t) {
    const float x = scores[static_cast<std::size_t>(t)];
    return std::isnan(x) ? -std::numeric_limits<float>::infinity() : x;
  };
  std::stable_sort(middle.begin(), middle.end(), [&](int a, int b) { return key(a) > key(b); });
  middle.resize(static_cast<std::size_t>(budget - sinks - recent));
  for (int t = 0; t < sinks; ++t) out.push_back(t);
  out.insert(out.end(), middle.begin(), middle.end());
  for (int t = n - recent; t < n; ++t) out.push_back(t);
  std::sort(out.begin(), out.end());
  return out;
}

// SnapKV's scores the slow way: for each token, the largest over the tokens within kernel / 2 of it (no
// pooling below a kernel of 2) of the column sum of `attn` (rows x n, row-major) over its rows, a NaN sum
// ranking as -infinity.
inline std::vector<float> reference_scores(const std::vector<float>& attn, int rows, int n, int kernel) {
  const int half = kernel < 2 ? 0 : kernel / 2;
  std::vector<float> out(static_cast<std::size_t>(std::max(n, 0)));
  for (int t = 0; t < n; ++t) {
    float best = -std::numeric_limits<float>::infinity();
    for (int u = t - half; u <= t + half; ++u) {
      if (u < 0 || u >= n) continue;
      float column = 0.0f;
      for (int r = 0; r < rows; ++r) column += attn[static_cast<std::size_t>(r) * static_cast<std::size_t>(n) + static_cast<std::size_t>(u)];
      if (!std::isnan(column) && column > best) best = column;
    }
    out[static_cast<std::size_t>(t)] = best;
  }
  return out;
}

}  // namespace pnmem::test
