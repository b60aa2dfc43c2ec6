// The seed's rung table, plus the planner's guarantees over a sweep of configs.
#include "pnmem/ladder.hpp"

#include <doctest/doctest.h>

#include <string_view>
#include <vector>

using namespace pnmem;

namespace {
constexpr mem_level levels[] = {mem_level::ok, mem_level::watch, mem_level::tight, mem_level::critical};

std::vector<ladder_config> sweep_configs() {
  std::vector<ladder_config> out;
  const int slots[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 63, 64, 1000};
  const int windows[] = {0, 1, 2, 3, 4, 5, 7, 8, 100, 4095, 4096, 16384, 131072, 2147483647};
  for (int s : slots) {
    for (int w : windows) {
      out.push_back({s, w, false});
      out.push_back({s, w, true});
    }
  }
  return out;
}

// 0 means "no clamp": larger than any positive window.
constexpr long long window_size(int w) { return w == 0 ? (1LL << 40) : w; }
}  // namespace

TEST_CASE("rung table at every level (slots 8, window 16384, fp32 KV)") {
  const ladder_config cfg{8, 16384, false};

  const ladder_plan ok = ladder_plan_for(mem_level::ok, cfg);
  CHECK(ok.level == mem_level::ok);
  CHECK(ok.max_slots == 8);
  CHECK(ok.prefill_window == 16384);
  CHECK_FALSE(ok.force_kv_q4);
  CHECK_FALSE(ok.kv_evict);
  CHECK_FALSE(ok.degraded);

  // Rung 4a engages at WATCH, alone.
  const ladder_plan watch = ladder_plan_for(mem_level::watch, cfg);
  CHECK(watch.force_kv_q4);
  CHECK(watch.max_slots == 8);
  CHECK(watch.prefill_window == 16384);
  CHECK_FALSE(watch.kv_evict);
  CHECK(watch.degraded);

  // Rungs 2, 3 and 4b engage at TIGHT: halve slots and window, flag eviction.
  // This is the seed's "[ladder] TIGHT -> prefill window clamped 16384 -> 8192" line.
  const ladder_plan tight = ladder_plan_for(mem_level::tight, cfg);
  CHECK(tight.force_kv_q4);
  CHECK(tight.max_slots == 4);
  CHECK(tight.prefill_window == 8192);
  CHECK(tight.kv_evict);
  CHECK(tight.degraded);

  // CRITICAL: one slot, a quarter of the window.
  const ladder_plan crit = ladder_plan_for(mem_level::critical, cfg);
  CHECK(crit.force_kv_q4);
  CHECK(crit.max_slots == 1);
  CHECK(crit.prefill_window == 4096);
  CHECK(crit.kv_evict);
  CHECK(crit.degraded);

  for (auto l : levels) CHECK(std::string_view(ladder_plan_for(l, cfg).note).size() > 0);
  CHECK(std::string_view(tight.note).find("tight") != std::string_view::npos);
}

TEST_CASE("a WATCH plan on an already-Q4 config changes nothing and is not degraded") {
  const ladder_plan p = ladder_plan_for(mem_level::watch, {8, 16384, true});
  CHECK(p.force_kv_q4);
  CHECK_FALSE(p.degraded);
}

TEST_CASE("at OK the plan is the operator config, for every config") {
  for (const auto& cfg : sweep_configs()) {
    const ladder_plan p = ladder_plan_for(mem_level::ok, cfg);
    CHECK(p.max_slots == cfg.max_slots);
    CHECK(p.prefill_window == cfg.prefill_window);
    CHECK(p.force_kv_q4 == cfg.kv_q4);
    CHECK_FALSE(p.kv_evict);
    CHECK_FALSE(p.degraded);
  }
}

TEST_CASE("rungs are reduce-only and monotonic in level") {
  for (const auto& cfg : sweep_configs()) {
    CAPTURE(cfg.max_slots);
    CAPTURE(cfg.prefill_window);
    CAPTURE(cfg.kv_q4);
    for (std::size_t i = 0; i < 4; ++i) {
      const ladder_plan p = ladder_plan_for(levels[i], cfg);
      // reduce-only against the config
      CHECK(p.max_slots >= 1);
      CHECK(p.max_slots <= cfg.max_slots);
      CHECK(window_size(p.prefill_window) <= window_size(cfg.prefill_window));
      CHECK((p.force_kv_q4 || !cfg.kv_q4));
      // a configured 0 stays 0; a positive window never becomes 0 ("no clamp")
      if (cfg.prefill_window == 0) CHECK(p.prefill_window == 0);
      if (cfg.prefill_window > 0) CHECK(p.prefill_window >= 1);
      // degraded says whether anything differs from the config
      const bool differs = p.max_slots != cfg.max_slots || p.prefill_window != cfg.prefill_window ||
                           p.force_kv_q4 != cfg.kv_q4 || p.kv_evict;
      CHECK(p.degraded == differs);
      if (i == 0) continue;
      // never relaxes what the level below engaged
      const ladder_plan lower = ladder_plan_for(levels[i - 1], cfg);
      CHECK(p.max_slots <= lower.max_slots);
      CHECK(window_size(p.prefill_window) <= window_size(lower.prefill_window));
      CHECK((p.force_kv_q4 || !lower.force_kv_q4));
      CHECK((p.kv_evict || !lower.kv_evict));
      CHECK((p.degraded || !lower.degraded));
    }
  }
}

TEST_CASE("small configs never round a clamp to 0 or slots below 1") {
  CHECK(ladder_plan_for(mem_level::tight, {1, 1, false}).max_slots == 1);
  CHECK(ladder_plan_for(mem_level::tight, {1, 1, false}).prefill_window == 1);
  CHECK(ladder_plan_for(mem_level::critical, {3, 3, false}).prefill_window == 1);
  CHECK(ladder_plan_for(mem_level::tight, {3, 5, false}).max_slots == 1);
  CHECK(ladder_plan_for(mem_level::tight, {3, 5, false}).prefill_window == 2);
  CHECK(ladder_plan_for(mem_level::critical, {64, 0, false}).prefill_window == 0);
}

TEST_CASE("out-of-range configs are normalised, not trusted") {
  const ladder_plan p = ladder_plan_for(mem_level::ok, {0, -7, false});
  CHECK(p.max_slots == 1);
  CHECK(p.prefill_window == 0);
  CHECK(ladder_plan_for(mem_level::tight, {-3, 16, false}).max_slots == 1);
}

TEST_CASE("PN_LADDER_DISABLE: the OK plan's values at every level, the real level reported") {
  policy off;
  off.ladder_disabled = true;
  for (const auto& cfg : sweep_configs()) {
    for (auto l : levels) {
      // The OK plan is the operator config (every swept config is in range).
      const ladder_plan p = ladder_plan_for(l, cfg, off);
      CHECK(p.level == l);
      CHECK(p.max_slots == cfg.max_slots);
      CHECK(p.prefill_window == cfg.prefill_window);
      CHECK(p.force_kv_q4 == cfg.kv_q4);
      CHECK_FALSE(p.kv_evict);
      CHECK_FALSE(p.degraded);
      CHECK(std::string_view(p.note).find("disabled") != std::string_view::npos);
    }
  }
}

TEST_CASE("ladder_plan_from_state plans for the snapshot's level (the seed's table)") {
  const ladder_config cfg{8, 16384, false};
  mem_state s;
  s.level = mem_level::tight;  // rungs 2, 3, 4a, 4b: cfg/2 slots and window
  ladder_plan p = ladder_plan_from_state(s, cfg);
  CHECK(p.level == mem_level::tight);
  CHECK(p.max_slots == 4);
  CHECK(p.prefill_window == 8192);
  CHECK(p.force_kv_q4);
  CHECK(p.kv_evict);
  s.level = mem_level::critical;  // 1 slot, cfg/4 window
  p = ladder_plan_from_state(s, cfg);
  CHECK(p.level == mem_level::critical);
  CHECK(p.max_slots == 1);
  CHECK(p.prefill_window == 4096);
  s.level = mem_level::watch;  // rung 4a alone
  p = ladder_plan_from_state(s, cfg);
  CHECK(p.max_slots == 8);
  CHECK(p.prefill_window == 16384);
  CHECK(p.force_kv_q4);
  CHECK_FALSE(p.kv_evict);
  s.level = mem_level::ok;  // the operator config
  p = ladder_plan_from_state(s, cfg);
  CHECK(p.level == mem_level::ok);
  CHECK(p.max_slots == 8);
  CHECK(p.prefill_window == 16384);
  CHECK_FALSE(p.force_kv_q4);
  CHECK_FALSE(p.kv_evict);
  CHECK_FALSE(p.degraded);
  // The policy is passed through: disabled, the TIGHT snapshot plans the config.
  policy off;
  off.ladder_disabled = true;
  s.level = mem_level::tight;
  CHECK(ladder_plan_from_state(s, cfg, off).max_slots == 8);
}

TEST_CASE("plans compare by value: plans for different levels differ") {
  const ladder_config cfg{8, 16384, false};
  CHECK_FALSE(ladder_plan_for(mem_level::critical, cfg) == ladder_plan_for(mem_level::tight, cfg));
  CHECK_FALSE(ladder_plan_for(mem_level::watch, cfg) == ladder_plan_for(mem_level::ok, cfg));
}
