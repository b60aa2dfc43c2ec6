// The seed's rung table, plus the planner's guarantees over a sweep of configs.
#include "pnmem/ladder.hpp"
#include "pnmem/model_shape.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
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

// Rung 4a at KV-cache init: kv_allocation_for, from the rung table. The seed's model keeps fp32 KV
// (40960 B per token) and compacts to its Q4 (5898 B); a Llama-3-8B-shaped model (32 layers x 8 KV
// heads x 128 dims) keeps f16 (2 x 32 x 8 x 128 x 2 B = 131072 B per token) and compacts to q4_0
// (per layer a K and a V row of 1024 values = 32 blocks of 18 B each: 2 x 32 x 576 = 36864 B).
namespace {
constexpr model_cost llama_cost = from_shape(uniform_shape(32, 8, 128, 32, 4096));
static_assert(llama_cost.normal_kv == kv_format::f16 && llama_cost.compact_kv == kv_format::q4_0);
// Compile time: the seed's 4096-token cache at OK and at WATCH.
static_assert(kv_allocation_for(ladder_plan_for(mem_level::ok, {8, 16384, false}), 4096) ==
              kv_allocation{kv_format::fp32, 40960ULL * 4096});
static_assert(kv_allocation_for(ladder_plan_for(mem_level::watch, {8, 16384, false}), 4096) ==
              kv_allocation{kv_format::q4, 5898ULL * 4096});
}  // namespace

TEST_CASE("kv_allocation_for: a cache allocated now is compact from WATCH up, normal at OK (rung 4a)") {
  const ladder_config cfg{8, 16384, false};
  struct row {
    mem_level level;
    kv_format seed_format;
    std::uint64_t seed_per_token;
    kv_format llama_format;
    std::uint64_t llama_per_token;
  };
  const row table[] = {
      {mem_level::ok, kv_format::fp32, 40960, kv_format::f16, 131072},
      {mem_level::watch, kv_format::q4, 5898, kv_format::q4_0, 36864},
      {mem_level::tight, kv_format::q4, 5898, kv_format::q4_0, 36864},
      {mem_level::critical, kv_format::q4, 5898, kv_format::q4_0, 36864},
  };
  for (const row& r : table) {
    CAPTURE(r.level);
    const ladder_plan plan = ladder_plan_for(r.level, cfg);
    for (const std::uint64_t n : {0ULL, 1ULL, 4096ULL, 131072ULL}) {
      CAPTURE(n);
      const kv_allocation seed = kv_allocation_for(plan, n);
      CHECK(seed.format == r.seed_format);
      CHECK(seed.bytes == r.seed_per_token * n);
      CHECK(kv_allocation_for(plan, seed_model_cost, n) == seed);
      const kv_allocation llama = kv_allocation_for(plan, llama_cost, n);
      CHECK(llama.format == r.llama_format);
      CHECK(llama.bytes == r.llama_per_token * n);
    }
  }
  // What rung 4a saves on an 8192-token cache: 320 MiB -> 46.08 MiB (seed), 1 GiB -> 288 MiB (Llama).
  CHECK(kv_allocation_for(ladder_plan_for(mem_level::ok, cfg), 8192).bytes == 320ULL * 1024 * 1024);
  CHECK(kv_allocation_for(ladder_plan_for(mem_level::watch, cfg), 8192).bytes == 48316416);
  CHECK(kv_allocation_for(ladder_plan_for(mem_level::ok, cfg), llama_cost, 8192).bytes == 1024ULL * 1024 * 1024);
  CHECK(kv_allocation_for(ladder_plan_for(mem_level::watch, cfg), llama_cost, 8192).bytes == 288ULL * 1024 * 1024);
}

TEST_CASE("kv_allocation_for: ladder disabled, the configured format at every level; a compact config stays compact") {
  policy off;
  off.ladder_disabled = true;
  for (auto l : levels) {
    CAPTURE(l);
    const ladder_plan normal = ladder_plan_for(l, {8, 16384, false}, off);
    CHECK(kv_allocation_for(normal, 1000) == kv_allocation{kv_format::fp32, 40960000});
    CHECK(kv_allocation_for(normal, llama_cost, 1000) == kv_allocation{kv_format::f16, 131072000});
    // An engine configured compact (ladder_config::kv_q4) gets the compact format at every level,
    // with the ladder on or off.
    for (const policy& p : {default_policy, off}) {
      const ladder_plan compact = ladder_plan_for(l, {8, 16384, true}, p);
      CHECK(kv_allocation_for(compact, 1000) == kv_allocation{kv_format::q4, 5898000});
      CHECK(kv_allocation_for(compact, llama_cost, 1000) == kv_allocation{kv_format::q4_0, 36864000});
    }
  }
}

TEST_CASE("kv_allocation_for: the bytes are kv_bytes in the chosen format (sliding layers stop at their window)") {
  // 4 full + 4 sliding layers (window 1024) x 2 KV heads x 64 dims: f16 512 B per layer and token.
  constexpr model_cost m = [] {
    model_shape s;
    s.add(attention_layers(layer_kind::full, 4, 2, 64));
    s.add(attention_layers(layer_kind::sliding, 4, 2, 64, 64, 1024));
    return from_shape(s);
  }();
  const ladder_config cfg{4, 0, false};
  for (auto l : levels) {
    CAPTURE(l);
    const kv_allocation a = kv_allocation_for(ladder_plan_for(l, cfg), m, 5000);
    CHECK(a.format == (l == mem_level::ok ? kv_format::f16 : kv_format::q4_0));
    CHECK(a.bytes == kv_bytes(m, a.format, 5000));
  }
  CHECK(kv_allocation_for(ladder_plan_for(mem_level::ok, cfg), m, 5000).bytes == 4 * 512 * 5000 + 4 * 512 * 1024);
}

TEST_CASE("ladder_plan_from_state: the evict rung follows memory, not PSI, unless evict_on_psi") {
  const ladder_config cfg{8, 16384, false};
  mem_state s = with_derived_level(test::host_state(8 * GiB, 6 * GiB));  // bytes to spare: OK
  s.host_psi_some_avg10 = 12.0;                                          // a box-wide stall: TIGHT
  s = with_derived_level(s);
  REQUIRE(s.level == mem_level::tight);
  REQUIRE(memory_level(s) == mem_level::ok);
  ladder_plan plan = ladder_plan_from_state(s, cfg);
  CHECK_FALSE(plan.kv_evict);
  CHECK(plan.max_slots == 4);
  CHECK(plan.degraded);
  policy seed = default_policy;
  seed.evict_on_psi = true;
  CHECK(ladder_plan_from_state(s, cfg, seed) == ladder_plan_for(mem_level::tight, cfg, seed));
  // Bytes short (TIGHT by the host bands): eviction, PSI or not.
  mem_state short_bytes = with_derived_level(test::host_state(8 * GiB, box_reserve_bytes(8 * GiB) + 100 * MiB));
  REQUIRE(memory_level(short_bytes) == mem_level::tight);
  CHECK(ladder_plan_from_state(short_bytes, cfg).kv_evict);
  // A die out of VRAM is memory too.
  mem_state die = with_derived_level(test::host_state(8 * GiB, 6 * GiB));
  die.n_dies = 1;
  die.per_die_budget_bytes[0] = 16 * GiB;
  die.per_die_free_bytes[0] = GiB / 2;  // below budget/16: TIGHT
  die = with_derived_level(die);
  CHECK(ladder_plan_from_state(die, cfg).kv_evict);
  // The die at TIGHT and PSI at TIGHT too: memory (the die) is short, so the memory level and the evict rung
  // follow the die, not the stall (issue 42 item 8; C: pnmem_snapshot.memory_level, pnmem_plan_ladder_now).
  mem_state both = die;
  both.host_psi_some_avg10 = 12.0;
  both = with_derived_level(both);
  const level_report br = explain_level(both, default_policy);
  REQUIRE(br.psi_level == mem_level::tight);
  CHECK(br.worst_die_level == mem_level::tight);
  CHECK(memory_level(br) == mem_level::tight);
  CHECK(ladder_plan_from_state(both, cfg).kv_evict);
  // CRITICAL from a confirmed full stall alone: one slot, window/4, still no eviction.
  mem_state stall = with_derived_level(test::host_state(8 * GiB, 6 * GiB));
  stall.host_psi_full_avg10 = 20.0;
  stall = with_derived_level(stall);
  REQUIRE(stall.level == mem_level::critical);
  const ladder_plan c = ladder_plan_from_state(stall, cfg);
  CHECK(c.max_slots == 1);
  CHECK_FALSE(c.kv_evict);
  CHECK(std::string(c.note).find("no KV eviction") != std::string::npos);
}
