// Retry hints (retry_hint.hpp, engine/retry_after.hpp, avail_trend.hpp): every basis from a hand-made
// snapshot, then on the fake clock through a real watcher and ledger: the hint shrinks as pressure
// clears, and is never negative.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "pnmem/avail_trend.hpp"
#include "pnmem/engine/admit.hpp"
#include "pnmem/engine/host_ledger.hpp"
#include "pnmem/engine/retry_after.hpp"
#include "pnmem/fake_clock.hpp"
#include "pnmem/fake_sampler.hpp"
#include "pnmem/level_hysteresis.hpp"
#include "pnmem/retry_hint.hpp"
#include "pnmem/units.hpp"
#include "pnmem/watcher.hpp"

using namespace pnmem;
using namespace std::chrono_literals;

namespace {

// 16 GiB box: the reserve is 15 % (2.4 GiB), more than the 1 GiB minimum.
mem_state box(std::uint64_t avail) {
  mem_state s;
  s.host_total_bytes = 16 * GiB;
  s.host_avail_bytes = avail;
  s.sample_time_ns = 1'000'000'000;
  s.host_read_ns = s.sample_time_ns;
  return s;
}

admit_result result(verdict v, admit_reason r, std::uint64_t need = 0, std::uint64_t limit = 0, int die = no_die) {
  return detail::make_result(v, 0, r, die, need, limit);
}

retry_outlook at(std::int64_t now_ns, std::int64_t next_sample_ms = 100, std::int64_t expiry_ns = -1) {
  retry_outlook o;
  o.now_ns = now_ns;
  o.next_sample_ms = next_sample_ms;
  o.expiry_covering_ns = expiry_ns;
  return o;
}

// A 16 GiB box with 12 GiB available, as a watcher the ledger reads.
struct box_watcher {
  mem_state s = box(12 * GiB);
  bool running() const { return true; }
  mem_state read() const { return s; }
};

// A watcher driven only by the test's poll_now() and fake clock, reported as running (pnmem::admit fails
// open before start(), and a started one would also sample on its own thread in real time).
template <class W>
struct driven {
  const W& w;
  bool running() const { return true; }
  mem_state read() const { return w.read(); }
  std::int64_t now_ns() const { return w.now_ns(); }
  const watcher_options& options() const { return w.options(); }
};

}  // namespace

TEST_CASE("retry_after: an answer a wait does not improve has no hint") {
  const mem_state s = box(8 * GiB);
  CHECK(retry_after(result(verdict::admit, admit_reason::fits), s, default_policy, at(0)) == retry_hint{});
  CHECK(retry_after(result(verdict::cap, admit_reason::window), s, default_policy, at(0)) == retry_hint{});
  CHECK(retry_after(result(verdict::reject, admit_reason::bad_request), s, default_policy, at(0)) == retry_hint{});
  CHECK(to_string(retry_basis::none) == "none");
}

TEST_CASE("retry_after psi_stall: the time avg10 and the window's rate take to fall below the reject line") {
  mem_state s = box(8 * GiB);
  const admit_result r = result(verdict::reject, admit_reason::psi_stall);
  // avg10 at twice the 15 % line: 10 s * ln 2 = 6.93 s, if no stall from now on.
  s.host_psi_full_avg10 = 30.0;
  retry_hint h = retry_after(r, s, default_policy, at(0));
  CHECK(h.basis == retry_basis::psi_decay);
  CHECK(h.after_ms == static_cast<std::int64_t>(std::ceil(10'000.0 * std::log(2.0))));
  // The window's rate (3 s) at 60 % counts only while the stall goes on: with none from now on it stops
  // counting at the next sample, and avg10 sets the wait: 10 s * ln(16/15) = 645.4 ms.
  s.host_psi_full_avg10 = 16.0;
  s.host_psi_full_sustained = 60.0;
  s.host_psi_full_rate = 40.0;
  h = retry_after(r, s, default_policy, at(0));
  CHECK(h.after_ms == static_cast<std::int64_t>(std::ceil(10'000.0 * std::log(16.0 / 15.0))));
  s.host_psi_full_rate = 0.0;
  // Just at the line: the next sample is the soonest anything changes.
  s.host_psi_full_avg10 = 15.0;
  s.host_psi_full_sustained = 0.0;
  CHECK(retry_after(r, s, default_policy, at(0, 250)).after_ms == 250);
  // A stall so deep that the hint would be minutes: at most retry_max_ms.
  s.host_psi_full_avg10 = 100.0;
  policy low = default_policy;
  low.psi_full_reject_bp = 1;  // 0.01 %: ln(10^4) * 10 s = 92 s
  CHECK(retry_after(r, s, low, at(0)).after_ms == retry_max_ms);
}

TEST_CASE("retry_after host bytes: the shortfall at the recovery rate, or the reservations' expiry, whichever is sooner") {
  mem_state s = box(4 * GiB);
  const std::uint64_t reserve = host_reserve_bytes(s, default_policy);
  // Asked 3 GiB, 4 GiB - reserve above the reserve: short by 3 GiB - (4 GiB - reserve).
  const std::uint64_t limit = 4 * GiB - reserve;
  const admit_result r = result(verdict::reject, admit_reason::host_budget, 3 * GiB, limit);
  const std::uint64_t short_by = 3 * GiB - limit;
  CHECK(retry_shortfall_bytes(r, s, default_policy) == short_by);

  SUBCASE("memory not coming back and nothing expiring, the level's age unknown: the fallback, a guess") {
    s.host_avail_trend = -50.0 * static_cast<double>(MiB);
    CHECK(retry_after(r, s, default_policy, at(0)) == retry_hint{retry_fallback_ms, retry_basis::memory_falling});
    s.host_avail_trend = 0.0;
    const retry_hint flat = retry_after(r, s, default_policy, at(0));
    CHECK(flat == retry_hint{retry_fallback_ms, retry_basis::no_recovery});
    CHECK(flat.guess());
  }
  SUBCASE("rising at 1 GiB/s") {
    s.host_avail_trend = static_cast<double>(GiB);
    const retry_hint h = retry_after(r, s, default_policy, at(0));
    CHECK(h.basis == retry_basis::host_recovery);
    CHECK(h.after_ms == static_cast<std::int64_t>(std::ceil(static_cast<double>(short_by) / static_cast<double>(GiB) * 1000.0)));
  }
  SUBCASE("a reservation expiring sooner than the recovery gives the bytes back") {
    s.host_avail_trend = 10.0 * static_cast<double>(MiB);  // ~160 s: capped, but the expiry is sooner
    const retry_hint h = retry_after(r, s, default_policy, at(5'000'000'000, 100, 5'000'000'000 + 1'500'000'000));
    CHECK(h == retry_hint{1500, retry_basis::pending_expiry});
    // An expiry in the past (the ledger has not dropped it yet): the next sample.
    CHECK(retry_after(r, s, default_policy, at(5'000'000'000, 100, 4'000'000'000)) ==
          retry_hint{100, retry_basis::pending_expiry});
  }
  SUBCASE("host_reserve: what must come back for the need to fit above the reserve") {
    const admit_result inside = result(verdict::reject, admit_reason::host_reserve, 100 * MiB, reserve - 200 * MiB);
    CHECK(retry_shortfall_bytes(inside, s, default_policy) == 300 * MiB + 1);
    s.host_avail_trend = 100.0 * static_cast<double>(MiB);  // 3 s and one byte
    CHECK(retry_after(inside, s, default_policy, at(0)) == retry_hint{3001, retry_basis::host_recovery});
  }
  SUBCASE("more than the box could give with all of it free: no wait helps") {
    s.host_avail_trend = static_cast<double>(GiB);
    const std::uint64_t most = 16 * GiB - reserve;
    CHECK(retry_after(result(verdict::reject, admit_reason::host_budget, most + 1, limit), s, default_policy, at(0)) ==
          retry_hint{0, retry_basis::never_fits});
    CHECK(retry_after(result(verdict::reject, admit_reason::host_budget, most, limit), s, default_policy, at(0)).basis ==
          retry_basis::host_recovery);
    CHECK(to_string(retry_basis::never_fits) == "never_fits");
  }
  SUBCASE("a byte reservation that did not fit is capped, not rejected: the same hint") {
    s.host_avail_trend = static_cast<double>(GiB);
    CHECK(retry_after(result(verdict::cap, admit_reason::host_budget, 3 * GiB, limit), s, default_policy, at(0)) ==
          retry_after(r, s, default_policy, at(0)));
  }
}

TEST_CASE("retry_after: with nothing coming back, a guess from how long the level has held") {
  mem_state s = box(4 * GiB);
  const std::uint64_t limit = 4 * GiB - host_reserve_bytes(s, default_policy);
  const admit_result r = result(verdict::reject, admit_reason::host_budget, 3 * GiB, limit);
  s.level_since_ns = 1'000'000'000;  // the level has been what it is since t = 1 s
  constexpr std::int64_t sec = 1'000'000'000;
  SUBCASE("memory flat: as long again as it has held, at least 1 s, at most 60 s") {
    CHECK(retry_after(r, s, default_policy, at(1 * sec + 200'000'000)) == retry_hint{retry_guess_min_ms, retry_basis::no_recovery});
    CHECK(retry_after(r, s, default_policy, at(3 * sec)) == retry_hint{2000, retry_basis::no_recovery});
    CHECK(retry_after(r, s, default_policy, at(9 * sec)) == retry_hint{8000, retry_basis::no_recovery});
    CHECK(retry_after(r, s, default_policy, at(301 * sec)) == retry_hint{retry_max_ms, retry_basis::no_recovery});
    CHECK(retry_after(r, s, default_policy, at(3 * sec)).guess());
    // A clock before the level's start (a snapshot from another clock): unknown age, the fallback.
    CHECK(retry_after(r, s, default_policy, at(0)) == retry_hint{retry_fallback_ms, retry_basis::no_recovery});
  }
  SUBCASE("memory still falling (a co-tenant growing): as long as it has held, at least 10 s") {
    s.host_avail_trend = -20.0 * static_cast<double>(MiB);
    CHECK(retry_after(r, s, default_policy, at(3 * sec)) == retry_hint{retry_fallback_ms, retry_basis::memory_falling});
    CHECK(retry_after(r, s, default_policy, at(31 * sec)) == retry_hint{30'000, retry_basis::memory_falling});
    CHECK(retry_after(r, s, default_policy, at(31 * sec)).guess());
  }
  SUBCASE("what pnmem sees coming back is not a guess, and wins") {
    s.host_avail_trend = static_cast<double>(GiB);
    const retry_hint h = retry_after(r, s, default_policy, at(31 * sec));
    CHECK(h.basis == retry_basis::host_recovery);
    CHECK_FALSE(h.guess());
    s.host_avail_trend = 0.0;
    const retry_hint e = retry_after(r, s, default_policy, at(31 * sec, 100, 32 * sec));
    CHECK(e == retry_hint{1000, retry_basis::pending_expiry});
    CHECK_FALSE(e.guess());
  }
  SUBCASE("a die short: the host's trend says nothing of it") {
    s.n_dies = 1;
    s.host_avail_trend = -20.0 * static_cast<double>(MiB);
    const admit_result d = result(verdict::reject, admit_reason::die_vram, 6 * GiB, 4 * GiB, 0);
    CHECK(retry_after(d, s, default_policy, at(3 * sec)) == retry_hint{2000, retry_basis::no_recovery});
  }
  for (int i = 0; i < retry_basis_count; ++i) {
    const auto b = static_cast<retry_basis>(i);
    CHECK(to_string(b) != "invalid");
    CHECK(retry_basis_is_guess(b) == (b == retry_basis::no_recovery || b == retry_basis::memory_falling));
  }
  CHECK(to_string(static_cast<retry_basis>(retry_basis_count)) == "invalid");
}

TEST_CASE("the watcher: level_since_ns is when the published level became what it is") {
  auto host = std::make_shared<fake_host>();
  fake_clock clock;
  watcher<fake_sampler, fake_clock> w{fake_sampler{host}, seed_watcher_options, clock};
  host_sample h;
  h.total_bytes = 16 * GiB;
  h.avail_bytes = 12 * GiB;  // ok
  host->set(h);
  clock.advance(1s);
  w.poll_now();
  const std::int64_t first = w.read().level_since_ns;
  CHECK(first == w.read().sample_time_ns);
  clock.advance(1s);
  w.poll_now();
  CHECK(w.read().level_since_ns == first);  // still ok: unchanged
  h.avail_bytes = 2 * GiB;                  // inside the reserve: critical
  host->set(h);
  clock.advance(1s);
  w.poll_now();
  REQUIRE(w.read().level == mem_level::critical);
  const std::int64_t critical_since = w.read().level_since_ns;
  CHECK(critical_since == w.read().sample_time_ns);
  CHECK(critical_since > first);
  clock.advance(1s);
  w.poll_now();
  CHECK(w.read().level_since_ns == critical_since);
}

TEST_CASE("retry_after die_vram: buffers retiring on the die cover the shortfall at the next sample") {
  mem_state s = box(8 * GiB);
  s.n_dies = 2;
  const admit_result r = result(verdict::reject, admit_reason::die_vram, 6 * GiB, 4 * GiB, 1);
  s.per_die_retiring_bytes[1] = 1 * GiB;
  CHECK(retry_after(r, s, default_policy, at(0)) == retry_hint{retry_fallback_ms, retry_basis::no_recovery});
  s.per_die_retiring_bytes[1] = 2 * GiB;
  CHECK(retry_after(r, s, default_policy, at(0, 250)) == retry_hint{250, retry_basis::die_retiring});
  s.per_die_budget_bytes[1] = 8 * GiB;  // the die's total less its reserve: 6 GiB fits an idle die
  CHECK(retry_after(r, s, default_policy, at(0, 250)) == retry_hint{250, retry_basis::die_retiring});
  s.per_die_budget_bytes[1] = 5 * GiB;  // it never would
  CHECK(retry_after(r, s, default_policy, at(0, 250)) == retry_hint{0, retry_basis::never_fits});
}

TEST_CASE("retry_after prefill_window: what is left of the dwell once the raw level is below TIGHT") {
  mem_state s = box(8 * GiB);
  const admit_result r = result(verdict::cap, admit_reason::prefill_window);
  s.level = mem_level::tight;
  s.raw_level = mem_level::tight;
  CHECK(retry_after(r, s, default_policy, at(0)).basis == retry_basis::no_recovery);
  s.raw_level = mem_level::watch;
  s.level_step_down_ns = 9'000'000'000;
  CHECK(retry_after(r, s, default_policy, at(7'500'000'000)) == retry_hint{1500, retry_basis::level_dwell});
  CHECK(retry_after(r, s, default_policy, at(9'500'000'000)) == retry_hint{100, retry_basis::level_dwell});
}

TEST_CASE("level_hysteresis: the step down is due a dwell after the raw level went below") {
  level_hysteresis h(3s);
  CHECK(h.step_down_at_ns() == 0);
  h.update(mem_level::tight, 1'000);
  CHECK(h.step_down_at_ns() == 0);
  h.update(mem_level::ok, 2'000);
  CHECK(h.step_down_at_ns() == 2'000 + 3'000'000'000);
  h.update(mem_level::tight, 3'000);  // back up: nothing pending
  CHECK(h.step_down_at_ns() == 0);
  level_hysteresis none(0s);
  none.update(mem_level::tight, 1);
  none.update(mem_level::ok, 2);
  CHECK(none.step_down_at_ns() == 0);
}

TEST_CASE("avail_trend: a weighted mean of the intervals' rates, reset by a gap") {
  avail_trend t(1'000'000'000);  // tau 1 s
  CHECK(t.update(0, 1 * GiB, true) == 0.0);
  // 100 ms intervals rising 10 MiB each (100 MiB/s): the first moves it a tenth of the way.
  double r = t.update(100'000'000, 1 * GiB + 10 * MiB, true);
  CHECK(r == doctest::Approx(10.0 * static_cast<double>(MiB)));
  for (int i = 2; i <= 60; ++i) r = t.update(i * 100'000'000LL, 1 * GiB + static_cast<std::uint64_t>(i) * 10 * MiB, true);
  CHECK(r == doctest::Approx(100.0 * static_cast<double>(MiB)).epsilon(0.01));
  // Falling: the rate goes negative.
  for (int i = 61; i <= 120; ++i) r = t.update(i * 100'000'000LL, 2 * GiB - static_cast<std::uint64_t>(i - 60) * 5 * MiB, true);
  CHECK(r < 0.0);
  // An interval longer than tau is its own rate.
  r = t.update(14'000'000'000, 2 * GiB, true);
  CHECK(r > 0.0);
  CHECK(t.update(15'000'000'000, 0, false) == 0.0);  // not read: start over
  CHECK(t.update(16'000'000'000, 4 * GiB, true) == 0.0);
  CHECK(t.update(15'000'000'000, 5 * GiB, true) == 0.0);  // the clock went back: start over
}

TEST_CASE("host_ledger::expiry_covering: the soonest expiry by which expiring reservations cover the bytes") {
  static std::atomic<std::int64_t> now{1'000'000'000};
  host_ledger ledger([] { return now.load(); });
  const box_watcher w;
  CHECK(ledger.expiry_covering(1) == -1);
  host_ledger::reserve_options one_s;
  one_s.ttl = 1s;
  host_ledger::reserve_options three_s;
  three_s.ttl = 3s;
  auto a = ledger.reserve_bytes(w, 100 * MiB, one_s);
  auto b = ledger.reserve_bytes(w, 300 * MiB, three_s);
  auto c = ledger.reserve_bytes(w, 500 * MiB);  // no time to live: may be settled, never counted
  REQUIRE(a.held);
  REQUIRE(b.held);
  REQUIRE(c.held);
  CHECK(ledger.expiry_covering(0) == now.load());
  CHECK(ledger.expiry_covering(100 * MiB) == 2'000'000'000);
  CHECK(ledger.expiry_covering(100 * MiB + 1) == 4'000'000'000);
  CHECK(ledger.expiry_covering(400 * MiB) == 4'000'000'000);
  CHECK(ledger.expiry_covering(400 * MiB + 1) == -1);
  a.held.cancel();  // cancelled: its bytes are back already, and no longer in the outlook
  CHECK(ledger.expiry_covering(100 * MiB) == 4'000'000'000);
  b.held.settle();  // settled: the memory is real, it will not come back by expiring
  CHECK(ledger.expiry_covering(1) == -1);
}

TEST_CASE("host_ledger::expiry_covering: right whatever order the reservations were taken in (issue 42 item 2)") {
  static std::atomic<std::int64_t> now{1'000'000'000};
  host_ledger ledger([] { return now.load(); });
  const box_watcher w;
  const auto ttl = [](std::chrono::nanoseconds t) {
    host_ledger::reserve_options o;
    o.ttl = t;
    return o;
  };
  // Taken latest expiry first: 3 s, then 1 s, then 2 s.
  auto c = ledger.reserve_bytes(w, 300 * MiB, ttl(3s));
  auto a = ledger.reserve_bytes(w, 100 * MiB, ttl(1s));
  auto b = ledger.reserve_bytes(w, 50 * MiB, ttl(2s));
  REQUIRE(a.held);
  REQUIRE(b.held);
  REQUIRE(c.held);
  CHECK(ledger.expiry_covering(100 * MiB) == 2'000'000'000);      // the 1 s one alone
  CHECK(ledger.expiry_covering(150 * MiB) == 3'000'000'000);      // and the 2 s one
  CHECK(ledger.expiry_covering(150 * MiB + 1) == 4'000'000'000);  // and the 3 s one
  CHECK(ledger.expiry_covering(450 * MiB + 1) == -1);
}

// On the fake clock, through a real watcher: a co-tenant that has been eating memory stops and gives it
// back; each 100 ms the engine asks for a 3 GiB request and gets a hint. Once the recovery shows, each
// hint is no longer than the last one less the time that passed (plus a sample), none is negative,
// and once the bytes are back the request is admitted with no hint.
TEST_CASE("retry_after on the fake clock: the hint shrinks as the memory comes back, never negative") {
  auto host = std::make_shared<fake_host>();
  fake_clock clock;
  watcher_options opts = seed_watcher_options;  // 250/100 ms, no dwell, the seed's policy
  watcher<fake_sampler, fake_clock> w{fake_sampler{host}, opts, clock};
  host_sample h;
  h.total_bytes = 16 * GiB;
  const model_desc m{};  // the seed's model
  const int tokens = 12'000;
  const std::uint64_t need = host_cost_bytes(m.cost, tokens, request_kv_format(m));
  const std::uint64_t reserve = box_reserve_bytes(16 * GiB, opts.policy);
  REQUIRE(need > 1 * GiB);
  // The ramp: avail falls 50 MiB per 100 ms for 2 s, to well under need + reserve.
  std::uint64_t avail = reserve + need / 2 + 40 * 50 * MiB;
  admit_options ao;
  ao.policy = opts.policy;
  // One sample with MemAvailable at `avail`, then the request and its hint.
  const auto ask = [&](std::uint64_t now_avail) {
    h.avail_bytes = now_avail;
    host->set(h);
    w.poll_now();
    const admit_answer a = admit(driven<decltype(w)>{w}, m, tokens, ao);
    return std::make_pair(a, retry_after(a, driven<decltype(w)>{w}, nullptr, opts.policy));
  };
  for (int i = 0; i < 20; ++i) {
    avail -= 50 * MiB;
    const auto [a, hint] = ask(avail);
    CHECK(hint.after_ms >= 0);
    // Nothing expiring: a guess; once the trend has seen the ramp (two reads), memory falling, at least
    // the fallback.
    if (a.status != admit_status::admitted) {
      CHECK(hint.guess());
      if (w.read().host_avail_trend < 0.0) {
        CHECK(hint.basis == retry_basis::memory_falling);
        CHECK(hint.after_ms >= retry_fallback_ms);
      } else {
        CHECK(hint.basis == retry_basis::no_recovery);
      }
      if (i >= 2) CHECK(hint.basis == retry_basis::memory_falling);
    }
    clock.advance(100ms);
  }
  // The co-tenant gives back 80 MiB per 100 ms (800 MiB/s).
  std::int64_t last_ms = -1;
  int hints = 0;
  int shrinking = 0;
  bool admitted = false;
  for (int i = 0; i < 200 && !admitted; ++i) {
    avail += 80 * MiB;
    const auto [a, hint] = ask(avail);
    CHECK(hint.after_ms >= 0);
    CHECK(hint.after_ms <= retry_max_ms);
    if (a.status == admit_status::admitted) {
      CHECK(hint == retry_hint{});
      admitted = true;
      break;
    }
    if (hint.basis == retry_basis::host_recovery) {
      ++hints;
      // The trend has built up after ~1 s; from then on each hint is at most the last less 100 ms, give
      // or take the trend still rising towards 800 MiB/s (which only shortens it) and the sample floor.
      if (last_ms >= 0 && i >= 10) {
        CHECK(hint.after_ms <= std::max<std::int64_t>(last_ms - 100 + 1, 100));
        if (hint.after_ms < last_ms) ++shrinking;
      }
      last_ms = hint.after_ms;
    }
    clock.advance(100ms);
  }
  CHECK(admitted);
  CHECK(hints >= 10);
  CHECK(shrinking >= 5);
}

TEST_CASE("retry_after on the fake clock: a stall's hint shrinks as avg10 decays") {
  auto host = std::make_shared<fake_host>();
  fake_clock clock;
  watcher_options opts = seed_watcher_options;
  watcher<fake_sampler, fake_clock> w{fake_sampler{host}, opts, clock};
  host_sample h;
  h.total_bytes = 16 * GiB;
  h.avail_bytes = 12 * GiB;
  admit_options ao;
  ao.policy = opts.policy;
  std::int64_t last = retry_max_ms + 1;
  int denied = 0;
  // avg10 as the kernel's decays after the stall ended: e^(-t/10 s) from 40 %, a reading every 2 s.
  for (int step = 0; step < 20; ++step) {
    h.psi_full_avg10 = 40.0 * std::exp(-2.0 * step / psi_avg10_tau_s);
    host->set(h);
    w.poll_now();
    const admit_answer a = admit(driven<decltype(w)>{w}, model_desc{}, 1000, ao);
    const retry_hint hint = retry_after(a, driven<decltype(w)>{w}, nullptr, opts.policy);
    CHECK(hint.after_ms >= 0);
    if (a.reason == admit_reason::psi_stall) {
      ++denied;
      CHECK(hint.basis == retry_basis::psi_decay);
      CHECK(hint.after_ms < last);  // 2 s less each time, down to the sample floor
      // It predicted the decay: the hint is the time to the line, within a sample and the 2 s step.
      const double due_ms = 10'000.0 * std::log(h.psi_full_avg10 / 15.0);
      CHECK(static_cast<double>(hint.after_ms) == doctest::Approx(std::max(due_ms, 100.0)).epsilon(0.01));
      last = hint.after_ms;
    } else {
      CHECK(hint == retry_hint{});
    }
    clock.advance(2s);
  }
  CHECK(denied == 5);  // 40 % e^(-t/10) is under 15 % after 9.8 s: readings at 0, 2, 4, 6, 8 s deny
}

TEST_CASE("retry_after through the ledger: an expiring prompt-cache reservation is what the denial waits for") {
  static auto ns = std::make_shared<std::atomic<std::int64_t>>(1'000'000'000);
  fake_clock clock;
  clock.ns = ns;
  auto host = std::make_shared<fake_host>();
  watcher_options opts = seed_watcher_options;
  watcher<fake_sampler, fake_clock> w{fake_sampler{host}, opts, clock};
  host_ledger ledger([] { return ns->load(); });
  host_sample h;
  h.total_bytes = 16 * GiB;
  const std::uint64_t reserve = box_reserve_bytes(16 * GiB, opts.policy);
  h.avail_bytes = reserve + 1 * GiB;
  host->set(h);
  w.poll_now();
  host_ledger::reserve_options ttl;
  ttl.ttl = 2s;
  ttl.policy = opts.policy;
  const driven<decltype(w)> d{w};
  auto cache = ledger.reserve_bytes(d, 768 * MiB, ttl);  // a cache entry in flight, 2 s to live
  REQUIRE(cache.held);
  host_ledger::reserve_options plain;
  plain.policy = opts.policy;
  host_ledger::admission more = ledger.reserve_bytes(d, 512 * MiB, plain);
  REQUIRE(more.answer.status == admit_status::capped);  // not reserved: 256 MiB left
  std::int64_t last = retry_max_ms + 1;
  for (int i = 0; i < 20; ++i) {
    more = ledger.check_bytes(d, 512 * MiB, opts.policy);
    const retry_hint hint = retry_after(more.answer, d, &ledger, opts.policy);
    if (more.answer.status == admit_status::admitted) {
      FAIL_CHECK("admitted before the reservation expired, at step " << i);
    } else {
      CHECK(hint.basis == retry_basis::pending_expiry);
      CHECK(hint.after_ms == std::max<std::int64_t>(2000 - 100 * i, 100));
      CHECK(hint.after_ms <= last);
      last = hint.after_ms;
    }
    clock.advance(100ms);
  }
  more = ledger.check_bytes(d, 512 * MiB, opts.policy);
  CHECK(more.answer.status == admit_status::admitted);
}

TEST_CASE("retry_after on the fake clock: a prefill-window cap waits out what is left of the dwell") {
  auto host = std::make_shared<fake_host>();
  fake_clock clock;
  watcher_options opts = seed_watcher_options;
  opts.step_down_dwell = 3s;
  watcher<fake_sampler, fake_clock> w{fake_sampler{host}, opts, clock};
  host_sample h;
  h.total_bytes = 16 * GiB;
  h.avail_bytes = 12 * GiB;
  h.psi_some_avg10 = 20.0;  // over psi_some_tight (10 %): TIGHT
  host->set(h);
  w.poll_now();
  REQUIRE(w.read().level == mem_level::tight);
  CHECK(w.read().level_step_down_ns == 0);
  admit_answer a;
  a.status = admit_status::capped;
  a.reason = admit_reason::prefill_window;
  a.detail.verdict = verdict::cap;
  a.detail.reason = admit_reason::prefill_window;
  CHECK(retry_after(a, driven<decltype(w)>{w}, nullptr, opts.policy).basis == retry_basis::no_recovery);
  h.psi_some_avg10 = 0.0;  // the stall is over: raw OK, TIGHT held for the dwell
  host->set(h);
  clock.advance(1s);
  const std::int64_t below_since = w.now_ns();
  w.poll_now();
  REQUIRE(w.read().level == mem_level::tight);
  CHECK(w.read().level_step_down_ns == below_since + 3'000'000'000);
  std::int64_t last = retry_max_ms + 1;
  for (int i = 0; i < 30; ++i) {
    const retry_hint hint = retry_after(a, driven<decltype(w)>{w}, nullptr, opts.policy);
    CHECK(hint.basis == retry_basis::level_dwell);
    CHECK(hint.after_ms == std::max<std::int64_t>(3000 - 100 * i, 100));
    CHECK(hint.after_ms <= last);
    last = hint.after_ms;
    clock.advance(100ms);
    w.poll_now();
  }
  CHECK(w.read().level == mem_level::ok);
  CHECK(w.read().level_step_down_ns == 0);
}
