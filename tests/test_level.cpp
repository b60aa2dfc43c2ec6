// The seed's host, PSI and die tables, row by row, with both sides of every line.
#include "pnmem/level.hpp"
#include "pnmem/psi_window.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "test_support.hpp"

using namespace pnmem;
using pnmem::test::add_die;
using pnmem::test::host_state;

TEST_CASE("host reserve is max(1 GiB, 15 % of MemTotal)") {
  CHECK(box_reserve_bytes(0) == 1 * GiB);
  CHECK(box_reserve_bytes(4 * GiB) == 1 * GiB);        // 15 % = 0.6 GiB
  CHECK(box_reserve_bytes(8 * GiB) == 1288490188);     // 15 % of 8 GiB, floored (the seed's ~1.2 GiB)
  CHECK(box_reserve_bytes(100 * GiB) == 15 * GiB);
  // The crossover: 15 % of MemTotal reaches 1 GiB at MemTotal = 1 GiB / 0.15.
  CHECK(box_reserve_bytes(7158278826) == 1 * GiB);     // 15 % = 1073741823.9 -> floor < 1 GiB
  CHECK(box_reserve_bytes(7158278834) == 1073741825);  // first totals above: the share wins
  // No overflow at the top of the range.
  CHECK(box_reserve_bytes(std::numeric_limits<std::uint64_t>::max()) ==
        std::numeric_limits<std::uint64_t>::max() / 10000 * 1500 + (std::numeric_limits<std::uint64_t>::max() % 10000) * 1500 / 10000);
}

TEST_CASE("PN_HOST_RESERVE_BYTES-style override: the reserve is exactly the value") {
  policy p;
  p.host_reserve_min_bytes = 3 * GiB;
  p.host_reserve_bp = 0;
  CHECK(box_reserve_bytes(8 * GiB, p) == 3 * GiB);
  CHECK(box_reserve_bytes(100 * GiB, p) == 3 * GiB);
  p.host_reserve_min_bytes = 0;
  CHECK(box_reserve_bytes(8 * GiB, p) == 0);
  CHECK(host_level(8 * GiB, 0, p) == mem_level::critical);  // avail 0 <= reserve 0
  CHECK(host_level(8 * GiB, 1, p) == mem_level::ok);
}

TEST_CASE("host table: every row, both sides of every line") {
  const std::uint64_t total = 8 * GiB;
  const std::uint64_t r = box_reserve_bytes(total);
  REQUIRE(r == 1288490188);

  SUBCASE("avail <= reserve is CRITICAL, equality included") {
    CHECK(host_level(total, 0) == mem_level::critical);
    CHECK(host_level(total, r - 1) == mem_level::critical);
    CHECK(host_level(total, r) == mem_level::critical);
    CHECK(host_level(total, r + 1) == mem_level::tight);
  }
  SUBCASE("slack < reserve/4 is TIGHT") {
    CHECK(host_level(total, r + r / 4 - 1) == mem_level::tight);
    CHECK(host_level(total, r + r / 4) == mem_level::watch);
  }
  SUBCASE("slack < reserve is WATCH") {
    CHECK(host_level(total, r + r - 1) == mem_level::watch);
    CHECK(host_level(total, r + r) == mem_level::ok);
  }
  SUBCASE("otherwise OK") {
    CHECK(host_level(total, total) == mem_level::ok);
    CHECK(host_level(total, 5 * GiB) == mem_level::ok);
  }
  SUBCASE("the seed's mini: 8 GiB box with ~1.1 GiB used sits in a pressure band") {
    // 8 GiB - OS and model ~= 2.3 GiB available: slack 1.0 GiB < reserve 1.2 GiB -> WATCH;
    // closer to the line it is TIGHT, which the seed calls normal on that box.
    CHECK(host_level(total, 2300 * MiB) == mem_level::watch);
    CHECK(host_level(total, 1500 * MiB) == mem_level::tight);
  }
}

TEST_CASE("a host that was not sampled (MemTotal 0) is skipped, never a false CRITICAL") {
  CHECK(host_level(0, 0) == mem_level::ok);
  CHECK(derive_level(host_state(0, 0)) == mem_level::ok);
  CHECK(derive_level(host_state(0, 0, 0.0, 20.0)) == mem_level::critical);  // PSI still counts
}

TEST_CASE("PSI escalation: every rule, both sides") {
  SUBCASE("full >= 15 % is CRITICAL") {
    CHECK(psi_level(0.0, 15.0) == mem_level::critical);
    CHECK(psi_level(0.0, 15.01) == mem_level::critical);
    CHECK(psi_level(0.0, 100.0) == mem_level::critical);
    CHECK(psi_level(0.0, 14.99) == mem_level::tight);
  }
  SUBCASE("full > 0 is at least TIGHT (a decaying blip after a model load)") {
    CHECK(psi_level(0.0, 0.01) == mem_level::tight);
    CHECK(psi_level(0.0, 0.0) == mem_level::ok);
  }
  SUBCASE("some >= 10 % is at least TIGHT") {
    CHECK(psi_level(10.0, 0.0) == mem_level::tight);
    CHECK(psi_level(55.0, 0.0) == mem_level::tight);
    CHECK(psi_level(9.99, 0.0) == mem_level::watch);
  }
  SUBCASE("some > 0 is at least WATCH") {
    CHECK(psi_level(0.01, 0.0) == mem_level::watch);
    CHECK(psi_level(0.0, 0.0) == mem_level::ok);
  }
  SUBCASE("rules compose: the worst one wins") {
    CHECK(psi_level(50.0, 20.0) == mem_level::critical);
    CHECK(psi_level(0.5, 0.5) == mem_level::tight);
  }
  SUBCASE("garbage is not pressure") {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    CHECK(psi_level(nan, nan) == mem_level::ok);
    CHECK(psi_level(-3.0, -1.0) == mem_level::ok);
  }
  SUBCASE("the reject threshold is policy (PN_PSI_FULL_REJECT)") {
    policy p;
    p.psi_full_reject_bp = 525;  // 5.25 %
    CHECK(psi_level(0.0, 5.25, p) == mem_level::critical);
    CHECK(psi_level(0.0, 5.24, p) == mem_level::tight);
    p.psi_some_tight_bp = 2000;
    CHECK(psi_level(19.99, 0.0, p) == mem_level::watch);
    CHECK(psi_level(20.0, 0.0, p) == mem_level::tight);
  }
  SUBCASE("PSI in the snapshot escalates the host level") {
    CHECK(derive_level(host_state(64 * GiB, 60 * GiB, 0.0, 15.0)) == mem_level::critical);
    CHECK(derive_level(host_state(64 * GiB, 60 * GiB, 0.0, 0.3)) == mem_level::tight);
    CHECK(derive_level(host_state(64 * GiB, 60 * GiB, 12.0, 0.0)) == mem_level::tight);
    CHECK(derive_level(host_state(64 * GiB, 60 * GiB, 2.0, 0.0)) == mem_level::watch);
    CHECK(derive_level(host_state(64 * GiB, 60 * GiB, 0.0, 0.0)) == mem_level::ok);
  }
}

TEST_CASE("die table: every row, both sides") {
  const std::uint64_t budget = 16 * GiB;  // budget/16 = 1 GiB, budget/8 = 2 GiB
  SUBCASE("free 0 is CRITICAL") {
    CHECK(die_level(0, budget) == mem_level::critical);
    CHECK(die_level(1, budget) == mem_level::tight);
  }
  SUBCASE("free < budget/16 is TIGHT") {
    CHECK(die_level(1 * GiB - 1, budget) == mem_level::tight);
    CHECK(die_level(1 * GiB, budget) == mem_level::watch);
  }
  SUBCASE("free < budget/8 is WATCH") {
    CHECK(die_level(2 * GiB - 1, budget) == mem_level::watch);
    CHECK(die_level(2 * GiB, budget) == mem_level::ok);
  }
  SUBCASE("otherwise OK, including free above the budget") {
    CHECK(die_level(budget, budget) == mem_level::ok);
    CHECK(die_level(budget + 1 * GiB, budget) == mem_level::ok);
  }
  SUBCASE("a die with budget 0 is skipped, even with free 0") {
    CHECK(die_level(0, 0) == mem_level::ok);
    CHECK(derive_level(add_die(host_state(64 * GiB, 60 * GiB), 0, 0)) == mem_level::ok);
  }
  SUBCASE("bands are policy") {
    policy p;
    p.die_tight_divisor = 4;
    p.die_watch_divisor = 2;
    CHECK(die_level(4 * GiB - 1, budget, p) == mem_level::tight);
    CHECK(die_level(8 * GiB - 1, budget, p) == mem_level::watch);
    CHECK(die_level(8 * GiB, budget, p) == mem_level::ok);
    p.die_tight_divisor = 0;  // a zero divisor disables the band instead of dividing by zero
    p.die_watch_divisor = 0;
    CHECK(die_level(1, budget, p) == mem_level::ok);
    CHECK(die_level(0, budget, p) == mem_level::critical);
  }
}

TEST_CASE("level = worst of host, PSI and every die") {
  const mem_state calm = host_state(64 * GiB, 60 * GiB);
  CHECK(derive_level(calm) == mem_level::ok);
  CHECK(derive_level(add_die(calm, 1 * GiB - 1, 16 * GiB)) == mem_level::tight);
  CHECK(derive_level(add_die(add_die(add_die(calm, 8 * GiB, 16 * GiB), 0, 16 * GiB), 3 * GiB, 16 * GiB)) ==
        mem_level::critical);
  // A host at WATCH with dies at OK stays WATCH; a die at WATCH with a host at TIGHT is TIGHT.
  const std::uint64_t r = box_reserve_bytes(8 * GiB);
  CHECK(derive_level(add_die(host_state(8 * GiB, 2 * r - 1), 8 * GiB, 16 * GiB)) == mem_level::watch);
  CHECK(derive_level(add_die(host_state(8 * GiB, r + 1), 2 * GiB - 1, 16 * GiB)) == mem_level::tight);
  CHECK(derive_level(add_die(host_state(8 * GiB, r + 1, 0.0, 16.0), 8 * GiB, 16 * GiB)) == mem_level::critical);
}

TEST_CASE("a corrupt die count never indexes past the arrays") {
  mem_state s = host_state(64 * GiB, 60 * GiB);
  for (std::size_t i = 0; i < max_dies; ++i) {
    s.per_die_free_bytes[i] = 8 * GiB;
    s.per_die_budget_bytes[i] = 16 * GiB;
  }
  s.per_die_free_bytes[max_dies - 1] = 0;
  s.n_dies = 1000;
  CHECK(die_count(s) == max_dies);
  CHECK(derive_level(s) == mem_level::critical);
  s.n_dies = -5;
  CHECK(die_count(s) == 0);
  CHECK(derive_level(s) == mem_level::ok);
  CHECK_FALSE(valid_die(s, 0));
}

TEST_CASE("explain_level reports every part and agrees with derive_level") {
  const std::uint64_t r = box_reserve_bytes(8 * GiB);
  mem_state s = host_state(8 * GiB, 2 * r - 1, 0.5, 0.0);           // host WATCH, PSI WATCH
  s = add_die(add_die(add_die(s, 8 * GiB, 16 * GiB), 1 * GiB - 1, 16 * GiB), 0, 0);  // OK, TIGHT, skipped
  const level_report rep = explain_level(s);
  CHECK(rep.level == mem_level::tight);
  CHECK(rep.host_level == mem_level::watch);
  CHECK(rep.psi_level == mem_level::watch);
  CHECK(rep.worst_die == 1);
  CHECK(rep.worst_die_level == mem_level::tight);
  CHECK(rep.n_dies == 3);
  CHECK(rep.die_levels[0] == mem_level::ok);
  CHECK(rep.die_levels[1] == mem_level::tight);
  CHECK(rep.die_levels[2] == mem_level::ok);
  CHECK(rep.host_reserve_bytes == r);

  CHECK(explain_level(host_state(8 * GiB, 4 * GiB)).worst_die == no_die);

  pnmem::test::rng g{42};
  for (int i = 0; i < 20000; ++i) {
    mem_state t = host_state(g.below(64 * GiB), 0);
    t.host_avail_bytes = g.below(t.host_total_bytes + 1);
    t.host_psi_some_avg10 = static_cast<double>(g.below(2000)) / 100.0;
    t.host_psi_full_avg10 = g.below(4) == 0 ? static_cast<double>(g.below(2000)) / 100.0 : 0.0;
    const int dies = static_cast<int>(g.below(max_dies + 1));
    for (int d = 0; d < dies; ++d) {
      const std::uint64_t budget = g.below(5) == 0 ? 0 : g.below(80 * GiB);
      t = add_die(t, g.below(budget + 1), budget);
    }
    const level_report e = explain_level(t);
    CHECK(e.level == derive_level(t));
    CHECK(e.level >= e.host_level);
    CHECK(e.level >= e.psi_level);
    for (int d = 0; d < e.n_dies; ++d) CHECK(e.level >= e.die_levels[static_cast<std::size_t>(d)]);
  }
}

TEST_CASE("with_derived_level stores the derived level and nothing else") {
  mem_state s = add_die(host_state(8 * GiB, 4 * GiB), 0, 16 * GiB);
  s.seq = 77;
  const mem_state d = with_derived_level(s);
  CHECK(d.level == mem_level::critical);
  CHECK(d.seq == 77);
  CHECK(d.host_avail_bytes == s.host_avail_bytes);
}

TEST_CASE("PSI: a fresh stall is TIGHT at once, CRITICAL only once it held over the window (or avg10 says so)") {
  mem_state s = host_state(64 * GiB, 60 * GiB);
  CHECK(derive_level(s) == mem_level::ok);
  s.host_psi_full_rate = 100.0;  // one interval of whole-box stall, before avg10 catches up: a blip so far
  CHECK(derive_level(s) == mem_level::tight);
  CHECK(explain_level(s).psi_level == mem_level::tight);
  s.host_psi_full_sustained = 15.0;  // ... that held at 15 % over the window: confirmed
  CHECK(derive_level(s) == mem_level::critical);
  CHECK(explain_level(s).psi_level == mem_level::critical);
  s.host_psi_full_sustained = 14.99;
  CHECK(derive_level(s) == mem_level::tight);
  s.host_psi_full_rate = 0.0;
  s.host_psi_full_sustained = 0.0;
  s.host_psi_full_avg10 = 15.0;  // avg10 confirms on its own (the seed's rule)
  CHECK(derive_level(s) == mem_level::critical);
  s.host_psi_full_avg10 = 0.0;
  s.host_psi_full_sustained = 0.5;  // a little stall over the window, still going on: shows, as any does
  s.host_psi_full_rate = 0.2;
  CHECK(derive_level(s) == mem_level::tight);
  s.host_psi_full_rate = 0.0;       // ... that has ended: the window alone raises nothing
  s.host_psi_full_sustained = 60.0;
  CHECK(derive_level(s) == mem_level::ok);
  CHECK(explain_level(s).psi_level == mem_level::ok);
  s.host_psi_full_sustained = 0.0;
  s.host_psi_full_avg10 = 0.4;  // avg10 still decaying after the stall ended: TIGHT, as the seed keeps it
  CHECK(derive_level(s) == mem_level::tight);
  s = host_state(64 * GiB, 60 * GiB);
  s.host_psi_some_rate = 11.0;
  CHECK(derive_level(s) == mem_level::tight);
  s.host_psi_some_rate = std::numeric_limits<double>::quiet_NaN();
  CHECK(derive_level(s) == mem_level::ok);
  s.host_psi_some_avg10 = 3.0;
  CHECK(psi_some_pct(s) == 3.0);  // a NaN rate never hides a real average
  CHECK(derive_level(s) == mem_level::watch);
}

TEST_CASE("the OS's own pressure verdict joins the worst-of") {
  mem_state s = host_state(64 * GiB, 60 * GiB);
  s.host_os_level = mem_level::tight;
  CHECK(derive_level(s) == mem_level::tight);
  CHECK(explain_level(s).os_level == mem_level::tight);
  CHECK(explain_level(s).level == mem_level::tight);
  s.host_os_level = mem_level::critical;
  CHECK(derive_level(s) == mem_level::critical);
}

TEST_CASE("provenance: sources, modes and a bounded cgroup path") {
  sample_provenance p;
  CHECK_FALSE(p.read(host_source::meminfo));
  p.mark_read(host_source::meminfo);
  p.mark_failed(host_source::psi);
  CHECK(p.read(host_source::meminfo));
  CHECK(p.failed(host_source::psi));
  CHECK_FALSE(p.read(host_source::psi));
  CHECK(p.limit_cgroup_path().empty());
  p.set_limit_cgroup_path("/system.slice/engine.service");
  CHECK(p.limit_cgroup_path() == "/system.slice/engine.service");
  const std::string long_path(1000, 'x');
  p.set_limit_cgroup_path(long_path);
  CHECK(p.limit_cgroup_path().size() == cgroup_path_capacity - 1);
  p.set_limit_cgroup_path("/a");
  CHECK(p.limit_cgroup_path() == "/a");
  CHECK(to_string(cgroup_mode::v1) == "v1");
  CHECK(to_string(cgroup_mode::v2) == "v2");
  CHECK(to_string(cgroup_mode::none) == "none");
  CHECK(to_string(psi_mode::trigger) == "trigger");
  CHECK(to_string(psi_mode::poll) == "poll");
  CHECK(to_string(psi_mode::none) == "none");
}

// --- The host reserve in a container -----------------------------------------------------------

TEST_CASE("in a container the 1 GiB minimum reserve scales down to a quarter of the limit") {
  using pnmem::test::container_state;
  struct row {
    std::uint64_t limit;
    std::uint64_t reserve;  // what the container keeps back
  };
  const row rows[] = {
      {256 * MiB, 64 * MiB},   // a quarter of the limit (15 % would be 38.4 MiB)
      {512 * MiB, 128 * MiB},  //
      {1 * GiB, 256 * MiB},    // the seed's 1 GiB minimum would be the whole limit
      {2 * GiB, 512 * MiB},    //
      {4 * GiB, 1 * GiB},      // from 4 GiB up: the seed's numbers
      {8 * GiB, 1288490188},   // 15 % of 8 GiB
      {64 * GiB, 10307921510}, // 15 % of 64 GiB
  };
  for (const row& r : rows) {
    CAPTURE(r.limit);
    const mem_state s = container_state(256 * GiB, r.limit, r.limit / 2);
    REQUIRE(host_total_is_limit(s));
    CHECK(host_reserve_bytes(s) == r.reserve);
    CHECK(container_reserve_bytes(r.limit) == r.reserve);
    CHECK(explain_level(s).host_reserve_bytes == r.reserve);
    if (r.limit >= 4 * GiB) CHECK(r.reserve == box_reserve_bytes(r.limit));  // the whole-box rule's number
    if (r.limit < 4 * GiB) CHECK(r.reserve < box_reserve_bytes(r.limit));

    // The seed's bands around that reserve: CRITICAL at it, TIGHT below 1.25x, WATCH below 2x.
    const auto level_at = [&](std::uint64_t avail) {
      mem_state t = s;
      t.host_avail_bytes = avail;
      CHECK(host_level(t) == derive_level(t));
      return derive_level(t);
    };
    CHECK(level_at(r.reserve) == mem_level::critical);
    CHECK(level_at(r.reserve + 1) == mem_level::tight);
    CHECK(level_at(r.reserve + r.reserve / 4 - 1) == mem_level::tight);
    CHECK(level_at(r.reserve + r.reserve / 4) == mem_level::watch);
    CHECK(level_at(2 * r.reserve - 1) == mem_level::watch);
    CHECK(level_at(2 * r.reserve) == mem_level::ok);

    // The same total on a whole box (no limit) keeps the seed's reserve exactly.
    const mem_state box = host_state(r.limit, r.limit / 2);
    CHECK_FALSE(host_total_is_limit(box));
    CHECK(host_reserve_bytes(box) == box_reserve_bytes(r.limit));
    CHECK(host_reserve_bytes(box) == std::max<std::uint64_t>(1 * GiB, r.limit * 15 / 100));
  }
}

TEST_CASE("a 1 GiB container with 680 MiB free is usable, not CRITICAL; a whole 8 GiB box is as the seed's") {
  using pnmem::test::container_state;
  const mem_state c = container_state(64 * GiB, 1 * GiB, 680 * MiB);
  CHECK(derive_level(c) == mem_level::ok);  // 680 MiB >= 2 x 256 MiB
  CHECK(derive_level(container_state(64 * GiB, 1 * GiB, 400 * MiB)) == mem_level::watch);
  CHECK(derive_level(container_state(64 * GiB, 1 * GiB, 300 * MiB)) == mem_level::tight);
  CHECK(derive_level(container_state(64 * GiB, 1 * GiB, 256 * MiB)) == mem_level::critical);

  // A whole box: every level as the seed's max(1 GiB, 15 %) gives it.
  const std::uint64_t seed_reserve = 1288490188;  // 15 % of 8 GiB > 1 GiB
  pnmem::test::rng g{14};
  for (int i = 0; i < 20000; ++i) {
    const std::uint64_t avail = g.below(8 * GiB + 1);
    const mem_state s = host_state(8 * GiB, avail);
    mem_level want = mem_level::ok;
    if (avail <= seed_reserve) {
      want = mem_level::critical;
    } else if (avail - seed_reserve < seed_reserve / 4) {
      want = mem_level::tight;
    } else if (avail - seed_reserve < seed_reserve) {
      want = mem_level::watch;
    }
    CHECK(derive_level(s) == want);
  }
}

TEST_CASE("which totals are a container's limit") {
  using pnmem::test::container_state;
  // A limit above MemTotal: the total is MemTotal, a whole box's.
  const mem_state roomy = container_state(2 * GiB, 100 * GiB, 1 * GiB);
  CHECK_FALSE(host_total_is_limit(roomy));
  CHECK(host_reserve_bytes(roomy) == 1 * GiB);
  // memory.high below memory.max is the limit the sampler took.
  mem_state high = container_state(64 * GiB, 2 * GiB, 1 * GiB);
  high.cgroup_high_bytes = 1 * GiB;
  high.host_total_bytes = 1 * GiB;
  CHECK(host_limit_bytes(high) == 1 * GiB);
  CHECK(host_reserve_bytes(high) == 256 * MiB);
  // Only memory.high set.
  mem_state only_high;
  only_high.host_total_bytes = 1 * GiB;
  only_high.cgroup_high_bytes = 1 * GiB;
  CHECK(host_reserve_bytes(only_high) == 256 * MiB);
  // Not sampled: no limit applies.
  CHECK_FALSE(host_total_is_limit(mem_state{}));
  // The live part of a snapshot (no provenance) says the same.
  mem_state no_provenance = container_state(64 * GiB, 1 * GiB, 600 * MiB);
  no_provenance.provenance = sample_provenance{};
  CHECK(host_reserve_bytes(no_provenance) == 256 * MiB);
}

TEST_CASE("an exact reserve (PN_HOST_RESERVE_BYTES: bp 0) stays exact in a container") {
  using pnmem::test::container_state;
  policy exact;
  exact.host_reserve_min_bytes = 700 * MiB;
  exact.host_reserve_bp = 0;
  for (const std::uint64_t limit : {256 * MiB, 1 * GiB, 8 * GiB}) {
    CHECK(host_reserve_bytes(container_state(64 * GiB, limit, 0), exact) == 700 * MiB);
  }
  // A larger minimum still scales down in a small container; the share still counts.
  policy strict;
  strict.host_reserve_min_bytes = 2 * GiB;
  CHECK(host_reserve_bytes(container_state(64 * GiB, 1 * GiB, 0), strict) == 256 * MiB);
  CHECK(host_reserve_bytes(container_state(64 * GiB, 16 * GiB, 0), strict) == 16 * GiB * 15 / 100);
  CHECK(host_reserve_bytes(container_state(64 * GiB, 12 * GiB, 0), strict) == 2 * GiB);
}

TEST_CASE("the container reserve never exceeds the whole-box one and grows with the limit") {
  pnmem::test::rng g{41};
  std::uint64_t last_limit = 0;
  std::uint64_t last_reserve = 0;
  for (std::uint64_t limit = 1 * MiB; limit <= 128 * GiB; limit += 1 * MiB + g.below(64 * MiB)) {
    const std::uint64_t r = container_reserve_bytes(limit);
    CHECK(r <= box_reserve_bytes(limit));
    CHECK(r >= std::min<std::uint64_t>(1 * GiB, limit / 4));
    CHECK(r < limit);
    if (last_limit != 0) CHECK(r >= last_reserve);
    last_limit = limit;
    last_reserve = r;
  }
}

// The constants the configuration table of docs/operators.md states.
static_assert(container_reserve_bytes(1 * GiB) == 256 * MiB);
static_assert(host_reserve_bytes(pnmem::test::container_state(64 * GiB, 1 * GiB, 0)) == 256 * MiB);
static_assert(host_reserve_bytes(host_state(1 * GiB, 0)) == 1 * GiB);

// The kernel's resolution (psi.c calc_avgs: each 2 s period's stall in whole percent): 1 % of the span,
// and of a whole 2 s period where the span is shorter.
static_assert(psi_stall_registers(20'000, 100'000'000));
static_assert(!psi_stall_registers(19'999, 100'000'000));
static_assert(psi_stall_registers(20'000, 2'000'000'000));
static_assert(!psi_stall_registers(19'999, 2'000'000'000));
static_assert(psi_stall_registers(30'000, 3'000'000'000));
static_assert(!psi_stall_registers(29'999, 3'000'000'000));
static_assert(!psi_stall_registers(30'000, 3'000'000'001));  // 1 % of 3.000000001 s rounds up to 30.001 ms
static_assert(!psi_stall_registers(0, 0));
static_assert(psi_stall_registers(std::numeric_limits<std::uint64_t>::max(), std::numeric_limits<std::uint64_t>::max()));
static_assert(!psi_stall_registers(std::numeric_limits<std::uint64_t>::max() / 100'000 - 1,
                                   std::numeric_limits<std::uint64_t>::max()));

TEST_CASE("psi_window::held: the stall and the time from the oldest reading kept to the newest") {
  psi_window w;
  constexpr std::int64_t ms = 1'000'000;
  constexpr std::int64_t period = 2000 * ms;
  CHECK(w.held().stall_us == 0);
  w.update(0, 1'000, true, period);
  CHECK(w.held().span_ns == 0);  // one reading: nothing between
  // Readings every 500 ms with 5 ms of stall each: while shorter than the period, from the first one...
  for (int i = 1; i <= 3; ++i) w.update(i * 500 * ms, 1'000 + static_cast<std::uint64_t>(i) * 5'000, true, period);
  CHECK(w.held().stall_us == 15'000);
  CHECK(w.held().span_ns == 1500 * ms);
  // ...then from the newest reading at least the period old.
  for (int i = 4; i <= 9; ++i) w.update(i * 500 * ms, 1'000 + static_cast<std::uint64_t>(i) * 5'000, true, period);
  CHECK(w.held().stall_us == 20'000);
  CHECK(w.held().span_ns == 2000 * ms);
  // A gap clears it.
  w.update(5000 * ms, 0, false, period);
  CHECK(w.held().stall_us == 0);
  CHECK(w.held().span_ns == 0);
}

TEST_CASE("psi_window: a total= counter that goes back restarts the window, never a 100 % stall (issue 42 item 5)") {
  psi_window w;
  constexpr std::int64_t ms = 1'000'000;
  constexpr std::int64_t window = 3000 * ms;
  // 10 % stalled: 100 ms of stall per second, read every 500 ms for 4 s.
  double pct = 0.0;
  for (int i = 0; i <= 8; ++i) pct = w.update(i * 500 * ms, static_cast<std::uint64_t>(i) * 50'000, true, window);
  CHECK(pct == doctest::Approx(10.0));
  // The counter goes back (the kernel's file replaced, another cgroup's): the history starts over.
  CHECK(w.update(4500 * ms, 1'000, true, window) == 0.0);
  CHECK(w.size() == 1);
  // No reading a window old yet: still unknown (0), however the new counter moves.
  CHECK(w.update(5000 * ms, 51'000, true, window) == 0.0);
  // A window after the reset, the rate over the new readings alone: 10 % again.
  for (int i = 2; i <= 7; ++i) pct = w.update(4500 * ms + i * 500 * ms, 1'000 + static_cast<std::uint64_t>(i) * 50'000, true, window);
  CHECK(pct == doctest::Approx(10.0));
}

TEST_CASE("psi_window: a fast poll fills the 64 readings, the oldest stays the reference, a sustained stall is seen "
          "(issue 42 item 6)") {
  psi_window w;
  constexpr std::int64_t ms = 1'000'000;
  constexpr std::int64_t window = 3000 * ms;
  // Every 10 ms for 4 s (400 readings, the window holds 300), half of each interval stalled.
  double pct = 0.0;
  for (int i = 0; i <= 400; ++i) pct = w.update(i * 10 * ms, static_cast<std::uint64_t>(i) * 5'000, true, window);
  CHECK(w.size() <= psi_window::capacity);
  CHECK(pct == doctest::Approx(50.0).epsilon(0.01));
  // The level this feeds confirms it: 50 % over the policy's 3 s window is a confirmed stall.
  CHECK(pct >= static_cast<double>(default_policy.psi_full_reject_bp) / 100.0);
}
