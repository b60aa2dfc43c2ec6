// Rung 4b's keep-set selection (keep_set.hpp): properties against a reference that sorts, the scores,
// the per-layer budgets, and a synthetic retrieval ("needle") test of which selections keep what the
// observation window's queries look for.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "pnmem/keep_set.hpp"
#include "keep_set_reference.hpp"
#include "splitmix64.hpp"

using namespace pnmem;
using pnmem::test::reference_keep;

namespace {

std::vector<int> select(const std::vector<float>& scores, int budget, keep_window w) {
  const int n = static_cast<int>(scores.size());
  std::vector<int> keep(static_cast<std::size_t>(std::max(1, std::min(std::max(budget, 0), n))));
  std::vector<float> scratch(static_cast<std::size_t>(std::max(n, 1)));
  const int k = select_keep(scores.data(), n, budget, w, keep.data(), scratch.data());
  keep.resize(static_cast<std::size_t>(k));
  return keep;
}

// Normal deviates (Box-Muller) from splitmix64: the same on every platform.
struct gauss {
  test::splitmix64 rng;
  float next() {
    const double u1 = (static_cast<double>(rng.next() >> 11) + 1.0) / 9007199254740993.0;
    const double u2 = static_cast<double>(rng.next() >> 11) / 9007199254740992.0;
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
};

}  // namespace

TEST_CASE("select_keep keeps the sinks, the recent and the best-scoring middle, positions increasing") {
  // 20 tokens, budget 8: sinks 0 1, recent 18 19, and the four best of 2..17.
  std::vector<float> s(20, 0.0f);
  s[5] = 9.0f;
  s[11] = 8.0f;
  s[3] = 7.0f;
  s[16] = 6.0f;
  s[0] = -100.0f;  // a sink's score is not read
  s[19] = -100.0f;
  CHECK(select(s, 8, keep_window{2, 2}) == std::vector<int>{0, 1, 3, 5, 11, 16, 18, 19});
  // Without scores: StreamingLLM, the sinks and the most recent tokens.
  std::vector<int> keep(8);
  CHECK(select_keep(nullptr, 20, 8, keep_window{2, 2}, keep.data(), nullptr) == 8);
  CHECK(keep == std::vector<int>{0, 1, 14, 15, 16, 17, 18, 19});
}

TEST_CASE("select_keep: equal scores keep the earlier token, NaN ranks below every number") {
  std::vector<float> s(12, 1.0f);  // all equal: the earliest middle tokens
  CHECK(select(s, 6, keep_window{1, 1}) == std::vector<int>{0, 1, 2, 3, 4, 11});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float ninf = -std::numeric_limits<float>::infinity();
  std::vector<float> t{0, nan, nan, -5.0f, ninf, nan, 0};
  // Middle 1..5; keep 3: -5 first, then the -inf-ranked ones by position (1 and 2).
  CHECK(select(t, 5, keep_window{1, 1}) == std::vector<int>{0, 1, 2, 3, 6});
}

TEST_CASE("select_keep: short rows, small budgets and bad arguments") {
  std::vector<float> s{3, 1, 2};
  CHECK(select(s, 5, keep_window{}) == std::vector<int>{0, 1, 2});  // fits: all of it
  CHECK(select(s, 3, keep_window{}) == std::vector<int>{0, 1, 2});
  CHECK(select(s, 0, keep_window{}).empty());
  CHECK(select(s, -1, keep_window{}).empty());
  CHECK(select({}, 4, keep_window{}).empty());
  // A budget below sinks + recent: sinks first, the recent get the rest.
  std::vector<float> z(100, 0.0f);
  CHECK(select(z, 3, keep_window{4, 32}) == std::vector<int>{0, 1, 2});
  CHECK(select(z, 6, keep_window{4, 32}) == std::vector<int>{0, 1, 2, 3, 98, 99});
  // Negative window sizes are none.
  z[50] = 1.0f;
  CHECK(select(z, 1, keep_window{-3, -3}) == std::vector<int>{50});
}

TEST_CASE("select_keep equals the sorting reference on random rows with ties and NaN") {
  test::splitmix64 rng{2024};
  for (int round = 0; round < 3000; ++round) {
    const int n = rng.between_int(0, 300);
    std::vector<float> s(static_cast<std::size_t>(n));
    const int levels = rng.between_int(1, 12);  // few distinct values: many ties
    for (auto& x : s) {
      const auto r = rng.below(40);
      x = r == 0 ? std::numeric_limits<float>::quiet_NaN()
          : r == 1 ? -std::numeric_limits<float>::infinity()
                   : static_cast<float>(rng.below(static_cast<std::uint64_t>(levels))) - 3.0f;
    }
    const int budget = rng.between_int(-2, n + 3);
    const keep_window w{rng.between_int(-1, 8), rng.between_int(-1, 40)};
    const auto got = select(s, budget, w);
    CAPTURE(round);
    CAPTURE(n);
    CAPTURE(budget);
    REQUIRE(got == reference_keep(s, budget, w));
    // The properties, stated separately: the budget, increasing positions, sinks and recent kept.
    CHECK(static_cast<int>(got.size()) == std::clamp(std::min(budget, n), 0, n));
    CHECK(std::is_sorted(got.begin(), got.end()));
    CHECK(std::adjacent_find(got.begin(), got.end()) == got.end());
    if (n > budget && budget > 0) {
      const int sinks = std::clamp(w.sinks, 0, budget);
      const int recent = std::clamp(w.recent, 0, budget - sinks);
      for (int t = 0; t < sinks; ++t) CHECK(std::binary_search(got.begin(), got.end(), t));
      for (int t = n - recent; t < n; ++t) CHECK(std::binary_search(got.begin(), got.end(), t));
    }
  }
}

TEST_CASE("observation_scores sums the window's queries and max-pools over the kernel") {
  // Two query rows over 7 tokens.
  const float attn[] = {0.1f, 0.0f, 0.0f, 0.5f, 0.0f, 0.0f, 0.4f,  //
                        0.2f, 0.1f, 0.0f, 0.3f, 0.0f, 0.2f, 0.2f};
  std::vector<float> scores(7), scratch(7);
  observation_scores(attn, 2, 7, 1, scores.data(), scratch.data());  // no pooling: the column sums
  const std::vector<float> sums{0.3f, 0.1f, 0.0f, 0.8f, 0.0f, 0.2f, 0.6f};
  for (int t = 0; t < 7; ++t) CHECK(static_cast<double>(scores[static_cast<std::size_t>(t)]) == doctest::Approx(static_cast<double>(sums[static_cast<std::size_t>(t)])));
  observation_scores(attn, 2, 7, 3, scores.data(), scratch.data());  // max over t-1 .. t+1
  const std::vector<float> pooled{0.3f, 0.3f, 0.8f, 0.8f, 0.8f, 0.6f, 0.6f};
  for (int t = 0; t < 7; ++t) CHECK(static_cast<double>(scores[static_cast<std::size_t>(t)]) == doctest::Approx(static_cast<double>(pooled[static_cast<std::size_t>(t)])));
}

TEST_CASE("key_norm_scores ranks the smaller key higher") {
  const float keys[] = {3, 4, 0, 1, 1, 1};  // norms^2 25, 1, 2
  float scores[3];
  key_norm_scores(keys, 3, 2, scores);
  CHECK(scores[0] == -25.0f);
  CHECK(scores[1] == -1.0f);
  CHECK(scores[2] == -2.0f);
}

TEST_CASE("pyramid_budgets: decreasing with depth, the mean exact, the last layer the least") {
  int b[40];
  REQUIRE(pyramid_budgets(4, 100, 40, b));
  CHECK(std::vector<int>(b, b + 4) == std::vector<int>{160, 120, 80, 40});
  test::splitmix64 rng{7};
  for (int round = 0; round < 2000; ++round) {
    const int layers = rng.between_int(1, 40);
    const int mean = rng.between_int(0, 5000);
    const int least = rng.between_int(-10, 6000);
    REQUIRE(pyramid_budgets(layers, mean, least, b));
    long long sum = 0;
    for (int l = 0; l < layers; ++l) {
      sum += b[l];
      if (l > 0) CHECK(b[l] <= b[l - 1]);
      CHECK(b[l] >= 0);
    }
    CHECK(sum == static_cast<long long>(layers) * mean);
    if (layers > 1) CHECK(b[layers - 1] >= std::clamp(least, 0, mean));
    if (layers > 1) CHECK(b[layers - 1] <= std::clamp(least, 0, mean) + 1);
  }
  CHECK_FALSE(pyramid_budgets(0, 10, 1, b));
  CHECK_FALSE(pyramid_budgets(3, -1, 1, b));
  CHECK_FALSE(pyramid_budgets(3, std::numeric_limits<int>::max(), 0, b));  // the first layer's overflows
}

// The synthetic retrieval test (issue 24 part 4): 8192 tokens of random 64-dimensional keys, a "needle"
// key planted in the middle, and an observation window of 32 queries that look for it (the needle's
// direction plus noise), attending causally with softmax(q.k / sqrt(64)). Which selections keep the
// needle at 10 % and 25 % budgets? SnapKV's scores come from those queries' attention; the key norm
// knows nothing of the queries, so it keeps the needle only when its key is small (as trained models'
// attended keys tend to be, Devoto et al. 2024); StreamingLLM keeps no middle token at all.
namespace {

struct needle_case {
  int n = 8192;
  int dim = 64;
  int needle = 3001;        // the planted key's position
  float needle_norm = 8.0f; // random keys' norms are about sqrt(64) = 8
  std::vector<float> keys;
  std::vector<float> attn;  // 32 x n: the observation window's attention

  explicit needle_case(float norm) : needle_norm(norm) {
    gauss g{test::splitmix64{99}};
    keys.resize(static_cast<std::size_t>(n * dim));
    for (auto& k : keys) k = g.next();
    std::vector<float> u(static_cast<std::size_t>(dim));
    float len = 0;
    for (auto& x : u) {
      x = g.next();
      len += x * x;
    }
    for (auto& x : u) x /= std::sqrt(len);
    for (int i = 0; i < dim; ++i) keys[static_cast<std::size_t>(needle * dim + i)] = u[static_cast<std::size_t>(i)] * needle_norm;
    const int window = 32;
    attn.assign(static_cast<std::size_t>(window * n), 0.0f);
    for (int j = 0; j < window; ++j) {
      std::vector<float> q(static_cast<std::size_t>(dim));
      for (int i = 0; i < dim; ++i) q[static_cast<std::size_t>(i)] = 8.0f * u[static_cast<std::size_t>(i)] + g.next();
      const int upto = n - window + j;  // causal: the query at that position sees tokens 0..upto
      std::vector<double> logit(static_cast<std::size_t>(upto + 1));
      double top = -1e300;
      for (int t = 0; t <= upto; ++t) {
        double dot = 0;
        for (int i = 0; i < dim; ++i) dot += static_cast<double>(q[static_cast<std::size_t>(i)]) * static_cast<double>(keys[static_cast<std::size_t>(t * dim + i)]);
        logit[static_cast<std::size_t>(t)] = dot / 8.0;
        top = std::max(top, logit[static_cast<std::size_t>(t)]);
      }
      double z = 0;
      for (auto& l : logit) z += (l = std::exp(l - top));
      for (int t = 0; t <= upto; ++t) attn[static_cast<std::size_t>(j * n + t)] = static_cast<float>(logit[static_cast<std::size_t>(t)] / z);
    }
  }

  enum class rule { snapkv, key_norm, streaming };
  bool kept(rule r, int budget) const {
    std::vector<float> scores(static_cast<std::size_t>(n)), scratch(static_cast<std::size_t>(n));
    std::vector<int> keep(static_cast<std::size_t>(budget));
    const float* s = scores.data();
    if (r == rule::snapkv) observation_scores(attn.data(), 32, n, 7, scores.data(), scratch.data());
    if (r == rule::key_norm) key_norm_scores(keys.data(), n, dim, scores.data());
    if (r == rule::streaming) s = nullptr;
    const int k = select_keep(s, n, budget, keep_window{}, keep.data(), scratch.data());
    REQUIRE(k == budget);
    return std::binary_search(keep.begin(), keep.end(), needle);
  }
};

}  // namespace

TEST_CASE("needle: SnapKV keeps what the queries look for at 10-25 %, StreamingLLM does not, key norm only a small key") {
  for (const int pct : {10, 25}) {
    const int budget = 8192 * pct / 100;
    CAPTURE(pct);
    const needle_case plain(8.0f);  // the needle's key as large as any other
    CHECK(plain.kept(needle_case::rule::snapkv, budget));
    CHECK_FALSE(plain.kept(needle_case::rule::streaming, budget));
    const needle_case small(3.0f);  // a small key: the key norm ranks it first
    CHECK(small.kept(needle_case::rule::snapkv, budget));
    CHECK(small.kept(needle_case::rule::key_norm, budget));
    const needle_case large(14.0f);  // a large key: the key norm ranks it last
    CHECK(large.kept(needle_case::rule::snapkv, budget));
    CHECK_FALSE(large.kept(needle_case::rule::key_norm, budget));
  }
}

TEST_CASE("pooling keeps the needle's neighbours with it") {
  // One row: token 50 draws the attention; a kernel of 7 keeps 47..53 at a budget with room for 7.
  std::vector<float> attn(100, 0.001f);
  attn[50] = 0.9f;
  std::vector<float> scores(100), scratch(100);
  observation_scores(attn.data(), 1, 100, 7, scores.data(), scratch.data());
  std::vector<int> keep(9);
  REQUIRE(select_keep(scores.data(), 100, 9, keep_window{1, 1}, keep.data(), scratch.data()) == 9);
  CHECK(keep == std::vector<int>{0, 47, 48, 49, 50, 51, 52, 53, 99});
}
