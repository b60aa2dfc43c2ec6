// pnmem/calibration.hpp: anchor tables (and coefficients) fitted to measured peaks are never below any
// measurement, valid as activation models, and close to the measurements; the measurements file parser.
#include "pnmem/calibration.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "splitmix64.hpp"

using namespace pnmem;

namespace {

using points = std::vector<calibration_point>;

// The property every fitted model must have, checked with cost_model.hpp's evaluator directly (not
// through the result's residuals), plus what validate() and the result's own bookkeeping promise.
void check_fit(const points& m, const calibration_result& r, std::size_t max_anchors, bool anchors = true) {
  REQUIRE_MESSAGE(r.ok(), to_string(r.error));
  CHECK(r.repair_lifts == 0);
  model_cost mc = seed_model_cost;
  mc.activation = r.table;
  CHECK(validate(mc).empty());
  if (anchors) {
    REQUIRE(r.table.n_anchors >= 1);
    REQUIRE(r.table.n_anchors <= max_anchors);
    for (std::size_t k = 1; k < r.table.n_anchors; ++k) {
      CHECK(r.table.anchors[k].tokens > r.table.anchors[k - 1].tokens);
      CHECK(r.table.anchors[k].peak_bytes >= r.table.anchors[k - 1].peak_bytes);
    }
    // The last anchor is the longest measured prompt: nothing measured is extrapolated.
    std::uint64_t longest = 0;
    for (const auto& p : m) longest = std::max(longest, p.tokens);
    CHECK(r.table.anchors[r.table.n_anchors - 1].tokens == longest);
  } else {
    CHECK(r.table.n_anchors == 0);
  }
  REQUIRE(r.residuals.size() == m.size());
  std::uint64_t max_bytes = 0;
  std::uint64_t max_bp = 0;
  // One assertion per fit, not per point: the sweeps fit thousands of sets (and run under sanitizers).
  for (std::size_t i = 0; i < m.size(); ++i) {
    const std::uint64_t v = activation_peak_bytes(r.table, m[i].tokens);
    const calibration_residual& x = r.residuals[i];
    const std::uint64_t p = m[i].peak_bytes;
    const char* wrong = nullptr;
    if (v < p) {
      wrong = "the table is below the measurement";  // never below
    } else if (x.tokens != m[i].tokens || x.measured_bytes != p || x.table_bytes != v || x.excess_bytes != v - p ||
               !x.covered) {
      wrong = "the residual does not match the table";
    } else if (static_cast<detail::u128>(x.excess_bp) * p < static_cast<detail::u128>(x.excess_bytes) * 10000 ||
               (x.excess_bp > 0 && static_cast<detail::u128>(x.excess_bp - 1) * p >= static_cast<detail::u128>(x.excess_bytes) * 10000)) {
      wrong = "excess_bp is not the percentage rounded up";  // the stated figure is never below the truth
    }
    if (wrong != nullptr) {
      FAIL_CHECK("measurement " << i << " (" << m[i].tokens << " tokens, " << p << " B): " << wrong << "; table "
                                << v << " B");
      return;
    }
    max_bytes = std::max(max_bytes, x.excess_bytes);
    max_bp = std::max(max_bp, x.excess_bp);
  }
  CHECK(r.max_excess_bytes == max_bytes);
  CHECK(r.max_excess_bp == max_bp);
  CHECK(r.residuals[r.max_excess_bytes_index].excess_bytes == max_bytes);
  CHECK(r.residuals[r.max_excess_bp_index].excess_bp == max_bp);
}

// The seed's formula, 256 MiB + 64 KiB N + 64 B N^2, at each N.
points seed_samples(std::uint64_t last, std::uint64_t step) {
  points m;
  for (std::uint64_t n = 0; n <= last; n += step) m.push_back({n, activation_peak_model_bytes(n)});
  return m;
}

// The largest excess of a table over measurements, in parts per million of the measurement (a double:
// the tests compare tables, they state nothing).
double max_relative_excess(const activation_model& t, const points& m) {
  double worst = 0;
  for (const auto& p : m) {
    const double v = static_cast<double>(activation_peak_bytes(t, p.tokens));
    worst = std::max(worst, (v - static_cast<double>(p.peak_bytes)) / static_cast<double>(p.peak_bytes));
  }
  return worst;
}

}  // namespace

TEST_CASE("errors: no measurements, out-of-range counts and bytes, a bad anchor limit") {
  CHECK(calibrate_activation(points{}).error == calibration_errc::no_measurements);
  CHECK(calibrate_activation_coefficients(points{}).error == calibration_errc::no_measurements);

  const points big_tokens{{1, MiB}, {max_calibration_tokens + 1, MiB}};
  const calibration_result t = calibrate_activation(big_tokens);
  CHECK(t.error == calibration_errc::tokens_out_of_range);
  CHECK(t.error_index == 1);
  CHECK(t.table.n_anchors == 0);
  CHECK(calibrate_activation(points{{max_calibration_tokens, MiB}}).ok());

  const points zero{{1, MiB}, {2, MiB}, {3, 0}};
  CHECK(calibrate_activation(zero).error == calibration_errc::bytes_out_of_range);
  CHECK(calibrate_activation(zero).error_index == 2);
  CHECK(calibrate_activation(points{{0, max_calibration_bytes + 1}}).error == calibration_errc::bytes_out_of_range);
  CHECK(calibrate_activation(points{{0, max_calibration_bytes}}).ok());
  CHECK(calibrate_activation_coefficients(zero).error == calibration_errc::bytes_out_of_range);

  const points one{{0, MiB}};
  CHECK(calibrate_activation(one, {.max_anchors = 0}).error == calibration_errc::bad_max_anchors);
  CHECK(calibrate_activation(one, {.max_anchors = 9}).error == calibration_errc::bad_max_anchors);
  const points many(max_calibration_points + 1, calibration_point{1, 1});
  CHECK(calibrate_activation(many).error == calibration_errc::too_many_measurements);
  for (auto e : {calibration_errc::no_measurements, calibration_errc::tokens_out_of_range,
                 calibration_errc::bytes_out_of_range, calibration_errc::bad_max_anchors,
                 calibration_errc::too_many_measurements, calibration_errc::not_covered}) {
    CHECK(to_string(e) != "invalid");
    CHECK(to_string(e) != "ok");
  }
}

TEST_CASE("one measurement is one anchor, exactly it") {
  const points m{{2048, 700 * MiB}};
  const calibration_result r = calibrate_activation(m);
  check_fit(m, r, 8);
  CHECK(r.table.n_anchors == 1);
  CHECK(r.table.anchors[0] == activation_anchor{2048, 700 * MiB});
  CHECK(r.max_excess_bytes == 0);
  // Constant before it, N^2 past it.
  CHECK(activation_peak_bytes(r.table, 0) == 700 * MiB);
  CHECK(activation_peak_bytes(r.table, 4096) == 4 * 700 * MiB);
}

TEST_CASE("repeated token counts: the largest counts, the others show their distance to it") {
  const points m{{1024, 400 * MiB}, {0, 256 * MiB}, {1024, 410 * MiB}, {1024, 405 * MiB}, {0, 250 * MiB}};
  const calibration_result r = calibrate_activation(m);
  check_fit(m, r, 8);
  CHECK(r.distinct_tokens == 2);
  CHECK(r.table.n_anchors == 2);
  CHECK(r.table.anchors[0] == activation_anchor{0, 256 * MiB});
  CHECK(r.table.anchors[1] == activation_anchor{1024, 410 * MiB});
  CHECK(r.residuals[0].excess_bytes == 10 * MiB);
  CHECK(r.residuals[2].excess_bytes == 0);
  CHECK(r.residuals[4].excess_bytes == 6 * MiB);
  CHECK(r.max_excess_bytes == 10 * MiB);
  CHECK(r.max_excess_bytes_index == 0);
}

TEST_CASE("points on a piecewise-linear curve with up to 8 pieces are recovered exactly") {
  // Breakpoints (tokens, bytes) with integer slopes, sampled every 16 tokens between them.
  const std::vector<calibration_point> breaks{{0, 100 * MiB},    {512, 100 * MiB + 512 * 4096},
                                             {2048, 0},          {4096, 0},
                                             {8192, 0},          {16384, 0}};
  // Fill in increasing peaks: each piece's slope a whole number of bytes per token.
  std::vector<calibration_point> b = breaks;
  const std::uint64_t slopes[] = {4096, 8192, 32768, 65536, 262144};
  for (std::size_t k = 1; k < b.size(); ++k) b[k].peak_bytes = b[k - 1].peak_bytes + slopes[k - 1] * (b[k].tokens - b[k - 1].tokens);
  points m;
  for (std::size_t k = 1; k < b.size(); ++k) {
    for (std::uint64_t t = b[k - 1].tokens; t < b[k].tokens; t += 16) {
      m.push_back({t, b[k - 1].peak_bytes + slopes[k - 1] * (t - b[k - 1].tokens)});
    }
  }
  m.push_back(b.back());
  for (std::size_t max_anchors = b.size(); max_anchors <= 8; ++max_anchors) {
    const calibration_result r = calibrate_activation(m, {.max_anchors = max_anchors});
    check_fit(m, r, max_anchors);
    CHECK(r.max_excess_bytes == 0);
    CHECK(r.table.n_anchors == b.size());  // no more anchors than breakpoints (fewer on a tie)
  }
  // One anchor too few: still covered, no longer exact.
  const calibration_result r = calibrate_activation(m, {.max_anchors = b.size() - 1});
  check_fit(m, r, b.size() - 1);
  CHECK(r.max_excess_bytes > 0);
}

TEST_CASE("the seed's formula sampled at many N: covered, within a few percent, tighter than the seed's table") {
  struct sweep {
    std::uint64_t last, step;
    double within;  // the largest excess allowed, as a fraction of the measurement
  };
  for (const sweep& w : {sweep{16384, 64, 0.04}, sweep{65536, 256, 0.10}, sweep{4096, 1, 0.01}}) {
    CAPTURE(w.last);
    const points m = seed_samples(w.last, w.step);
    const calibration_result r = calibrate_activation(m);
    check_fit(m, r, 8);
    CHECK(r.table.n_anchors == 8);
    const double rel = max_relative_excess(r.table, m);
    MESSAGE("seed formula 0.." << w.last << " step " << w.step << ": " << r.table.n_anchors
                               << " anchors, largest excess " << rel * 100 << " % (" << r.max_excess_bp
                               << " bp stated), the seed's own table " << max_relative_excess(seed_model_cost.activation, m) * 100
                               << " %");
    CHECK(rel <= w.within);
    CHECK(static_cast<double>(r.max_excess_bp) >= rel * 10000);
    CHECK(rel < max_relative_excess(seed_model_cost.activation, m));
    // The formula is convex: the chords through the samples are above it and no lift is needed, so
    // every anchor is a sample exactly.
    for (std::size_t k = 0; k < r.table.n_anchors; ++k) {
      CHECK(r.table.anchors[k].peak_bytes == activation_peak_model_bytes(r.table.anchors[k].tokens));
    }
  }
}

TEST_CASE("never below, on random measurement sets (fixed seed), every anchor limit and objective") {
  test::splitmix64 rng{0x5eedca11b7a7e5ULL};
  for (int set = 0; set < 400; ++set) {
    CAPTURE(set);
    // 40 sets of 129 to 200 points: more than the 128 candidate positions (thinned, then refined).
    const bool big = set >= 360;
    const std::size_t n = static_cast<std::size_t>(big ? rng.between(129, 200) : rng.between(1, 40));
    const std::uint64_t max_t = rng.between(1, 4) == 1 ? rng.between(1, 64) : rng.between(64, max_calibration_tokens);
    const int shape = rng.between_int(0, 3);
    points m;
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t t = rng.below(max_t + 1);
      std::uint64_t b = 0;
      const double x = static_cast<double>(t) / static_cast<double>(max_t);
      switch (shape) {
        case 0: b = rng.between(1, max_calibration_bytes); break;  // noise over the whole range
        case 1: b = rng.between(1, 1000); break;                  // small numbers: rounding matters
        case 2: b = static_cast<std::uint64_t>(1e9 * (1 + 3 * x + 20 * x * x)) + rng.below(50'000'000); break;
        default: b = static_cast<std::uint64_t>(4e9 * (1 - (1 - x) * (1 - x))) + 1 + rng.below(1000); break;  // concave
      }
      m.push_back({t, b});
    }
    if (rng.below(4) == 0) m.push_back(m[rng.below(m.size())]);  // a repeated line
    for (std::size_t max_anchors : {std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{5}, std::size_t{8}}) {
      if (big && max_anchors != 3 && max_anchors != 8) continue;
      for (auto o : {calibration_objective::relative, calibration_objective::absolute}) {
        CAPTURE(max_anchors);
        const calibration_result r = calibrate_activation(m, {.max_anchors = max_anchors, .objective = o});
        check_fit(m, r, max_anchors);
      }
    }
    const calibration_result c = calibrate_activation_coefficients(m);
    check_fit(m, c, 8, /*anchors=*/false);
  }
}

TEST_CASE("never below, exhaustively over every set of small measurements") {
  // Tokens 0..3, each measured at most once with 1..4 bytes: all 5^4 - 1 sets, 1..4 anchors.
  std::size_t sets = 0;
  for (int code = 1; code < 625; ++code) {
    points m;
    int c = code;
    for (std::uint64_t t = 0; t < 4; ++t, c /= 5) {
      if (c % 5 != 0) m.push_back({t * 3, static_cast<std::uint64_t>(c % 5)});
    }
    CAPTURE(code);
    for (std::size_t max_anchors = 1; max_anchors <= 4; ++max_anchors) {
      for (auto o : {calibration_objective::relative, calibration_objective::absolute}) {
        check_fit(m, calibrate_activation(m, {.max_anchors = max_anchors, .objective = o}), max_anchors);
      }
    }
    ++sets;
  }
  CHECK(sets == 624);
}

TEST_CASE("more anchors allowed never fit worse; one anchor is the largest peak at the last count") {
  test::splitmix64 rng{42};
  for (int set = 0; set < 60; ++set) {
    points m;
    const std::size_t n = static_cast<std::size_t>(rng.between(2, 60));
    for (std::size_t i = 0; i < n; ++i) m.push_back({rng.below(100000), rng.between(GiB, 8 * GiB)});
    std::uint64_t prev_bp = UINT64_MAX;
    for (std::size_t k = 1; k <= 8; ++k) {
      const calibration_result r = calibrate_activation(m, {.max_anchors = k});
      check_fit(m, r, k);
      CHECK(r.max_excess_bp <= prev_bp);
      prev_bp = r.max_excess_bp;
      if (k == 1) {
        std::uint64_t largest = 0;
        for (const auto& p : m) largest = std::max(largest, p.peak_bytes);
        CHECK(r.table.anchors[0].peak_bytes == largest);
      }
    }
  }
}

TEST_CASE("the objectives: relative minimises the largest percentage, absolute the largest byte count") {
  // A quadratic over a wide range: bytes are largest at the long prompts, percentages at the short ones.
  const points m = seed_samples(65536, 512);
  const calibration_result rel = calibrate_activation(m, {.objective = calibration_objective::relative});
  const calibration_result abs = calibrate_activation(m, {.objective = calibration_objective::absolute});
  check_fit(m, rel, 8);
  check_fit(m, abs, 8);
  CHECK(rel.max_excess_bp <= abs.max_excess_bp);
  CHECK(abs.max_excess_bytes <= rel.max_excess_bytes);
  CHECK(rel.max_excess_bp < abs.max_excess_bp);  // they differ here
}

TEST_CASE("coefficients: the seed's formula is found again, and always covered") {
  const points m = seed_samples(16384, 128);
  const calibration_result r = calibrate_activation_coefficients(m);
  check_fit(m, r, 8, /*anchors=*/false);
  CHECK(r.table.per_token_sq_bytes == 64);
  CHECK(r.table.per_token_bytes == 64 * KiB);
  CHECK(r.table.fixed_bytes == 256 * MiB);
  CHECK(r.max_excess_bytes == 0);
  // A flat set: a constant.
  const points flat{{0, GiB}, {100, GiB}, {5000, GiB}};
  const calibration_result f = calibrate_activation_coefficients(flat);
  check_fit(flat, f, 8, false);
  CHECK(f.max_excess_bytes == 0);
}

TEST_CASE("calibration_report: the residuals of any table, below marked") {
  const points m = seed_samples(8192, 512);
  const calibration_result seed = calibration_report(seed_model_cost.activation, m);
  CHECK(seed.ok());
  CHECK(seed.max_excess_bp > 0);
  const calibration_result low = calibration_report(activation_coefficients(256 * MiB, 0, 0), m);
  CHECK(low.error == calibration_errc::not_covered);
  CHECK_FALSE(low.residuals[1].covered);
  CHECK(low.residuals[0].covered);
}

// ------------------------------------------------------------------ the measurements file

TEST_CASE("csv: header, comments, blank lines, units, quotes, CRLF and a BOM") {
  const calibration_csv c = parse_calibration_csv(
      "\xEF\xBB\xBF# measured on box 7\r\n"
      "tokens,peak_bytes\r\n"
      "\n"
      "0,256MiB   # the baseline\n"
      "  1024 , 402653184\n"
      "4096,\"1.5 GiB\"\n"
      "\"8192\",6GiB");
  REQUIRE_MESSAGE(c.ok(), c.error_line, ": ", c.error);
  CHECK(c.has_header);
  REQUIRE(c.points.size() == 4);
  CHECK(c.points[0] == calibration_point{0, 256 * MiB});
  CHECK(c.points[1] == calibration_point{1024, 402653184});
  CHECK(c.points[2] == calibration_point{4096, 3 * GiB / 2});
  CHECK(c.points[3] == calibration_point{8192, 6 * GiB});
  CHECK(c.lines == std::vector<std::size_t>{4, 5, 6, 7});

  const calibration_csv plain = parse_calibration_csv("1,1\n2,2\n");
  CHECK(plain.ok());
  CHECK_FALSE(plain.has_header);
  CHECK(plain.points.size() == 2);
  CHECK(parse_calibration_csv("").ok());
  CHECK(parse_calibration_csv("# nothing\n\n").points.empty());
}

TEST_CASE("csv: each bad line is an error naming the line and what is wrong") {
  using namespace std::string_view_literals;
  struct bad {
    std::string_view text;
    std::size_t line;
    const char* says;
  };
  const bad cases[] = {
      {"0,1MiB\n1024\n"sv, 2, "expected 2 fields (tokens,peak_bytes), found 1"},
      {"0,1MiB,3\n"sv, 1, "found 3"},
      {"tokens,bytes\n-5,1MiB\n"sv, 2, "tokens \"-5\": negative value"},
      {"5,-1MiB\n"sv, 1, "peak_bytes \"-1MiB\": negative value"},
      {"5,12x\n"sv, 1, "peak_bytes \"12x\": unknown unit"},
      {"5,12MB\n"sv, 1, "ambiguous unit"},
      {"5,\n"sv, 1, "peak_bytes \"\": empty value"},
      {"1k,5\n"sv, 1, "tokens \"1k\": not a whole number"},
      {"1.5,5\n"sv, 1, "tokens \"1.5\": not a whole number"},
      {"0,1\nabc,5\n"sv, 2, "tokens \"abc\": not a whole number"},  // a header only as the first line
      {"5000000,1GiB\n"sv, 1, "tokens \"5000000\": out of range"},
      {"99999999999999999999999,1GiB\n"sv, 1, "out of range"},
      {"5,0\n"sv, 1, "peak_bytes \"0\": out of range"},
      {"5,2TiB\n"sv, 1, "out of range"},
      {"# c\n\n5,1\n6,\x01\n"sv, 4, "peak_bytes \"?\": not a number"},
      {"5,1\n6,1\0\n"sv, 2, "peak_bytes"},
  };
  for (const bad& b : cases) {
    CAPTURE(b.text);
    const calibration_csv c = parse_calibration_csv(b.text);
    CHECK_FALSE(c.ok());
    CHECK(c.error_line == b.line);
    CHECK_MESSAGE(c.error.find(b.says) != std::string::npos, c.error);
    CHECK(c.points.empty());
  }
}
