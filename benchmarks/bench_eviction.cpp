// bench_eviction.cpp - rung 4b's selection per slot (keep_set.hpp) and its byte plan (eviction_budget.hpp).
//
// One row of a 32k-token slot (one layer, or one KV head of it), a 10 % and a 25 % budget:
//
//   BM_select_keep/n/pct       select_keep on scores already computed (the selection alone)
//   BM_sort_keep/n/pct         the baseline: the same kept set by a plain sort (indices sorted by score
//                              descending, position ascending; the first k; sorted back by position)
//   BM_snapkv_keep/n/pct       observation_scores (32 query rows, kernel 7) + select_keep: SnapKV per row
//   BM_key_norm_keep/n/pct     key_norm_scores (128-dim keys) + select_keep
//   BM_streaming_keep/n/pct    select_keep without scores (sinks + recent)
//   BM_plan_evict/slots        plan_eviction over that many slots of 1k-32k tokens (the byte plan)
//
// The figure: select_keep against the plain sort in the same run (a ratio), BENCHMARKS.md.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "pnmem/eviction_budget.hpp"
#include "pnmem/keep_set.hpp"
#include "pnmem/model_shape.hpp"
#include "splitmix64.hpp"

namespace {

using namespace pnmem;

std::vector<float> random_floats(std::size_t n, std::uint64_t seed) {
  test::splitmix64 rng{seed};
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(rng.next() >> 40) / 16777216.0f;
  return v;
}

int budget_of(const benchmark::State& st) { return static_cast<int>(st.range(0) * st.range(1) / 100); }

void BM_select_keep(benchmark::State& st) {
  const int n = static_cast<int>(st.range(0));
  const auto scores = random_floats(static_cast<std::size_t>(n), 1);
  std::vector<float> scratch(static_cast<std::size_t>(n));
  std::vector<int> keep(static_cast<std::size_t>(n));
  for (auto _ : st) {
    benchmark::DoNotOptimize(select_keep(scores.data(), n, budget_of(st), keep_window{}, keep.data(), scratch.data()));
    benchmark::ClobberMemory();
  }
}

void BM_sort_keep(benchmark::State& st) {
  const int n = static_cast<int>(st.range(0));
  const auto scores = random_floats(static_cast<std::size_t>(n), 1);
  std::vector<int> order(static_cast<std::size_t>(n));
  std::vector<int> keep(static_cast<std::size_t>(n));
  const keep_window w{};
  for (auto _ : st) {
    const int budget = budget_of(st);
    const int mid_end = n - w.recent;
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin() + w.sinks, order.begin() + mid_end, [&](int a, int b) {
      return scores[static_cast<std::size_t>(a)] > scores[static_cast<std::size_t>(b)] ||
             (scores[static_cast<std::size_t>(a)] == scores[static_cast<std::size_t>(b)] && a < b);
    });
    const int mid_keep = budget - w.sinks - w.recent;
    std::copy(order.begin(), order.begin() + w.sinks + mid_keep, keep.begin());
    std::copy(order.begin() + mid_end, order.end(), keep.begin() + w.sinks + mid_keep);
    std::sort(keep.begin(), keep.begin() + budget);
    benchmark::DoNotOptimize(keep.data());
    benchmark::ClobberMemory();
  }
}

void BM_snapkv_keep(benchmark::State& st) {
  const int n = static_cast<int>(st.range(0));
  const int rows = 32;
  const auto attn = random_floats(static_cast<std::size_t>(rows) * static_cast<std::size_t>(n), 2);
  std::vector<float> scores(static_cast<std::size_t>(n)), scratch(static_cast<std::size_t>(n));
  std::vector<int> keep(static_cast<std::size_t>(n));
  for (auto _ : st) {
    observation_scores(attn.data(), rows, n, 7, scores.data(), scratch.data());
    benchmark::DoNotOptimize(select_keep(scores.data(), n, budget_of(st), keep_window{}, keep.data(), scratch.data()));
    benchmark::ClobberMemory();
  }
}

void BM_key_norm_keep(benchmark::State& st) {
  const int n = static_cast<int>(st.range(0));
  const int dim = 128;
  const auto keys = random_floats(static_cast<std::size_t>(dim) * static_cast<std::size_t>(n), 3);
  std::vector<float> scores(static_cast<std::size_t>(n)), scratch(static_cast<std::size_t>(n));
  std::vector<int> keep(static_cast<std::size_t>(n));
  for (auto _ : st) {
    key_norm_scores(keys.data(), n, dim, scores.data());
    benchmark::DoNotOptimize(select_keep(scores.data(), n, budget_of(st), keep_window{}, keep.data(), scratch.data()));
    benchmark::ClobberMemory();
  }
}

void BM_streaming_keep(benchmark::State& st) {
  const int n = static_cast<int>(st.range(0));
  std::vector<int> keep(static_cast<std::size_t>(n));
  for (auto _ : st) {
    benchmark::DoNotOptimize(select_keep(nullptr, n, budget_of(st), keep_window{}, keep.data(), nullptr));
    benchmark::ClobberMemory();
  }
}

void BM_plan_evict(benchmark::State& st) {
  const model_cost llama = from_shape(uniform_shape(32, 8, 128, 32, 4096));
  test::splitmix64 rng{4};
  std::vector<int> slots(static_cast<std::size_t>(st.range(0)));
  for (auto& s : slots) s = rng.between_int(1024, 32768);
  std::vector<keep_budget_answer> out(slots.size());
  for (auto _ : st) {
    benchmark::DoNotOptimize(plan_eviction(llama, kv_format::bf16, slots.data(), static_cast<int>(slots.size()),
                                           4 * GiB, eviction_limits{}, out.data()));
    benchmark::ClobberMemory();
  }
}

void rows(benchmark::internal::Benchmark* b) {
  for (int pct : {10, 25}) b->Args({32768, pct});
}

BENCHMARK(BM_select_keep)->Apply(rows);
BENCHMARK(BM_sort_keep)->Apply(rows);
BENCHMARK(BM_snapkv_keep)->Apply(rows);
BENCHMARK(BM_key_norm_keep)->Apply(rows);
BENCHMARK(BM_streaming_keep)->Apply(rows);
BENCHMARK(BM_plan_evict)->Arg(8)->Arg(64)->Arg(256);

}  // namespace

BENCHMARK_MAIN();
