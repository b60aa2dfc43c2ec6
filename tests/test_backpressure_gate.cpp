// The back-pressure gate at each level, with many threads. No sleeps decide an
// outcome: threads meet on latches, the test waits for the gate's own waiter
// count, and deadlines are only safety nets (except in the deadline tests).
#include "pnmem/engine/backpressure_gate.hpp"
#include "pnmem/engine/admit_wait.hpp"
#include "pnmem/engine/fleet_load.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <latch>
#include <mutex>
#include <stop_token>
#include <thread>
#include <vector>

#include "pnmem/ladder.hpp"
#include "pnmem/watcher.hpp"

using namespace pnmem;
using namespace std::chrono_literals;

namespace {

// The host half stays unsampled (total 0: skipped); die 0 sets the level.
struct null_sampler {
  host_sample sample() { return host_sample{}; }
};
static_assert(host_sampler<null_sampler>);

constexpr std::uint64_t budget = 1600;

void set_level(watcher<null_sampler>& w, mem_level l) {
  std::uint64_t free_bytes = budget;
  switch (l) {
    case mem_level::ok: free_bytes = budget; break;
    case mem_level::watch: free_bytes = budget / 8 - 1; break;
    case mem_level::tight: free_bytes = budget / 16 - 1; break;
    case mem_level::critical: free_bytes = 0; break;
  }
  REQUIRE(w.set_die(0, free_bytes, budget, budget - free_bytes) == set_die_status::ok);
  REQUIRE(w.read().level == l);
}

// Safety net for every wait: a broken gate fails the test instead of hanging it.
constexpr auto safety = 20s;

auto far_deadline() { return std::chrono::steady_clock::now() + safety; }

// Yields until `pred` holds (or the safety net runs out).
template <class Pred>
bool eventually(Pred pred) {
  const auto end = std::chrono::steady_clock::now() + safety;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::yield();
  }
  return true;
}

// Per-status tallies of what threads got back.
struct tally {
  std::array<std::atomic<int>, 5> by{};
  void add(gate_status s) { by[static_cast<std::size_t>(s)].fetch_add(1); }
  int operator[](gate_status s) const { return by[static_cast<std::size_t>(s)].load(); }
};

void join_all(std::vector<std::thread>& ts) {
  for (auto& t : ts) t.join();
  ts.clear();
}

constexpr int many = 16;

}  // namespace

TEST_CASE("gate: status names") {
  CHECK(to_string(gate_status::acquired) == "acquired");
  CHECK(to_string(gate_status::overloaded) == "overloaded");
  CHECK(to_string(gate_status::timed_out) == "timed_out");
  CHECK(to_string(gate_status::cancelled) == "cancelled");
  CHECK(to_string(gate_status::queue_full) == "queue_full");
}

TEST_CASE("gate: OK, acquires proceed up to capacity, slots are RAII") {
  backpressure_gate gate{8};
  CHECK(gate.pushed_level() == mem_level::ok);
  std::vector<gate_slot> held;
  for (int i = 0; i < 8; ++i) {
    auto r = gate.try_acquire();
    REQUIRE(r.status == gate_status::acquired);
    CHECK(r.slot.holds());
    held.push_back(std::move(r.slot));
  }
  CHECK(gate.in_use() == 8);
  auto full = gate.try_acquire();
  CHECK(full.status == gate_status::timed_out);
  CHECK_FALSE(full.slot.holds());
  CHECK_FALSE(full);

  held.pop_back();  // destroyed: returned
  CHECK(gate.in_use() == 7);
  {
    auto r = gate.try_acquire();
    CHECK(r);
    CHECK(gate.in_use() == 8);
    gate_slot moved = std::move(r.slot);
    CHECK_FALSE(r.slot.holds());
    moved.release();
    moved.release();  // idempotent
    CHECK(gate.in_use() == 7);
  }
  // detach / release(): the C-ABI style
  auto r = gate.try_acquire();
  REQUIRE(r);
  r.slot.detach();
  CHECK(gate.in_use() == 8);
  gate.release();
  CHECK(gate.in_use() == 7);
  held.clear();
  CHECK(gate.in_use() == 0);
}

TEST_CASE("gate: OK, many threads never exceed capacity") {
  engine_counters counters;
  backpressure_gate gate{4, 64, &counters};
  constexpr int rounds = 200;
  std::atomic<int> holders{0};
  std::atomic<int> max_holders{0};
  std::atomic<int> acquired{0};
  std::latch start{many};
  std::vector<std::thread> ts;
  for (int t = 0; t < many; ++t) {
    ts.emplace_back([&] {
      start.arrive_and_wait();
      for (int i = 0; i < rounds; ++i) {
        auto r = gate.acquire(far_deadline());
        if (!r) continue;
        const int now = holders.fetch_add(1) + 1;
        int seen = max_holders.load();
        while (now > seen && !max_holders.compare_exchange_weak(seen, now)) {
        }
        acquired.fetch_add(1);
        holders.fetch_sub(1);
      }
    });
  }
  join_all(ts);
  CHECK(acquired.load() == many * rounds);
  CHECK(max_holders.load() <= 4);
  CHECK(max_holders.load() >= 1);
  CHECK(gate.in_use() == 0);
  CHECK(gate.waiting() == 0);
  CHECK(counters.gate_acquired.load() == static_cast<std::uint64_t>(many * rounds));
}

TEST_CASE("gate: TIGHT pushed holds new acquirers; the watcher going below TIGHT releases them all") {
  watcher<null_sampler> w{null_sampler{}};
  engine_counters counters;
  backpressure_gate gate{many, 64, &counters};
  auto conn = gate.connect(w);
  CHECK(conn.connected());

  set_level(w, mem_level::tight);  // the watcher alone at TIGHT does not hold (D3)
  CHECK(gate.pushed_level() == mem_level::ok);
  CHECK(gate.try_acquire());

  gate.notify_pressure(mem_level::tight);  // a denial pushes it
  CHECK(gate.pushed_level() == mem_level::tight);
  gate.notify_pressure(mem_level::watch);  // never lowers
  CHECK(gate.pushed_level() == mem_level::tight);
  CHECK(gate.try_acquire().status == gate_status::timed_out);  // would have to wait

  tally got;
  std::vector<std::thread> ts;
  for (int t = 0; t < many; ++t) {
    ts.emplace_back([&] { got.add(gate.acquire(far_deadline()).status); });
  }
  REQUIRE(eventually([&] { return gate.waiting() == static_cast<std::size_t>(many); }));
  CHECK(got[gate_status::acquired] == 0);
  CHECK(gate.in_use() == 0);

  set_level(w, mem_level::watch);  // tight -> watch: below TIGHT, clears
  join_all(ts);
  CHECK(got[gate_status::acquired] == many);
  CHECK(gate.pushed_level() == mem_level::ok);
  CHECK(gate.waiting() == 0);
  CHECK(counters.gate_waits.load() == static_cast<std::uint64_t>(many));
  CHECK(counters.gate_acquired.load() == static_cast<std::uint64_t>(many + 1));
}

TEST_CASE("gate: without a watcher, on_level_change below TIGHT ends a hold; TIGHT or worse keeps it") {
  backpressure_gate gate{gate_options{.max_slots = 4, .follow_ladder = false}};
  gate.notify_pressure(mem_level::tight);
  REQUIRE(gate.try_acquire().status == gate_status::timed_out);
  gate.on_level_change(mem_level::tight);
  CHECK(gate.pushed_level() == mem_level::tight);
  CHECK(gate.try_acquire().status == gate_status::timed_out);
  gate.on_level_change(mem_level::critical);  // the box's CRITICAL alone sheds nothing (D3)
  CHECK(gate.pushed_level() == mem_level::tight);
  gate.on_level_change(mem_level::watch);  // WATCH is below TIGHT: released
  CHECK(gate.pushed_level() == mem_level::ok);
  auto slot = gate.try_acquire();
  CHECK(slot.status == gate_status::acquired);
}

TEST_CASE("gate: waiters are served first come, first served") {
  backpressure_gate gate{1};
  auto holder = gate.try_acquire();
  REQUIRE(holder);
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::thread> ts;
  constexpr int n = 8;
  for (int i = 0; i < n; ++i) {
    ts.emplace_back([&, i] {
      auto r = gate.acquire(far_deadline());
      REQUIRE(r);
      std::lock_guard<std::mutex> lk(mu);
      order.push_back(i);
    });  // the slot is returned as the thread ends, granting the next one
    REQUIRE(eventually([&] { return gate.waiting() == static_cast<std::size_t>(i + 1); }));
  }
  // A newcomer never overtakes a waiter, even right after a release.
  holder.slot.release();
  join_all(ts);
  REQUIRE(order.size() == static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) CHECK(order[static_cast<std::size_t>(i)] == i);
}

TEST_CASE("gate: a newcomer does not overtake waiters") {
  backpressure_gate gate{2};
  gate.notify_pressure(mem_level::tight);
  std::vector<std::thread> ts;
  std::latch granted{1};
  std::latch finish{1};
  ts.emplace_back([&] {
    auto r = gate.acquire(far_deadline());
    CHECK(r);
    granted.count_down();
    finish.wait();
  });
  REQUIRE(eventually([&] { return gate.waiting() == 1; }));
  // Capacity 2, nothing in use, but held: try_acquire must not jump the queue.
  CHECK(gate.try_acquire().status == gate_status::timed_out);
  gate.clear();
  granted.wait();
  CHECK(gate.in_use() == 1);
  CHECK(gate.try_acquire());  // the queue is empty now; one slot left
  finish.count_down();
  join_all(ts);
  CHECK(gate.in_use() == 0);
}

TEST_CASE("gate: CRITICAL fails every waiter and every new acquirer with overloaded") {
  engine_counters counters;
  backpressure_gate gate{4, 64, &counters};
  auto held = gate.try_acquire();
  REQUIRE(held);

  SUBCASE("pushed by a denial") {
    gate.notify_pressure(mem_level::tight);
    tally got;
    std::vector<std::thread> ts;
    for (int t = 0; t < many; ++t) ts.emplace_back([&] { got.add(gate.acquire(far_deadline()).status); });
    REQUIRE(eventually([&] { return gate.waiting() == static_cast<std::size_t>(many); }));

    gate.notify_pressure(mem_level::critical);
    join_all(ts);  // at once: no deadline ran out
    CHECK(got[gate_status::overloaded] == many);
    CHECK(gate.waiting() == 0);

    // New acquirers fail fast, slots free or not, from many threads.
    std::latch start{many};
    for (int t = 0; t < many; ++t) {
      ts.emplace_back([&] {
        start.arrive_and_wait();
        got.add(gate.acquire(far_deadline()).status);
        got.add(gate.try_acquire().status);
      });
    }
    join_all(ts);
    CHECK(got[gate_status::overloaded] == 3 * many);
    CHECK(got[gate_status::acquired] == 0);
    CHECK(counters.gate_overloaded.load() == static_cast<std::uint64_t>(3 * many));
    gate.notify_pressure(mem_level::ok);  // a push never lowers
    CHECK(gate.pushed_level() == mem_level::critical);
    gate.clear();
    CHECK(gate.try_acquire());
  }

  SUBCASE("the watcher's CRITICAL alone sheds nothing; a denial there does; the box stepping down stops it") {
    watcher<null_sampler> w{null_sampler{}};
    auto conn = gate.connect(w);
    gate.notify_pressure(mem_level::tight);
    tally got;
    std::vector<std::thread> ts;
    for (int t = 0; t < many; ++t) ts.emplace_back([&] { got.add(gate.acquire(far_deadline()).status); });
    REQUIRE(eventually([&] { return gate.waiting() == static_cast<std::size_t>(many); }));

    set_level(w, mem_level::critical);  // no denial confirmed it: hold, shed nothing
    CHECK(gate.pushed_level() == mem_level::tight);
    CHECK(gate.waiting() == static_cast<std::size_t>(many));
    CHECK(got[gate_status::overloaded] == 0);

    gate.notify_pressure(mem_level::critical);  // a denial at CRITICAL: shed
    join_all(ts);
    CHECK(got[gate_status::overloaded] == many);
    CHECK(gate.pushed_level() == mem_level::critical);
    CHECK(gate.try_acquire().status == gate_status::overloaded);

    // CRITICAL -> TIGHT: hold (wait), stop shedding.
    set_level(w, mem_level::tight);
    CHECK(gate.pushed_level() == mem_level::tight);
    CHECK(gate.try_acquire().status == gate_status::timed_out);

    set_level(w, mem_level::ok);
    CHECK(gate.pushed_level() == mem_level::ok);
    CHECK(gate.try_acquire());
  }
}

TEST_CASE("gate: connecting to a watcher at CRITICAL applies rung 2 at once and sheds nothing") {
  watcher<null_sampler> w{null_sampler{}};
  set_level(w, mem_level::critical);
  backpressure_gate gate{8};
  CHECK(gate.capacity() == 8);
  auto conn = gate.connect(w);
  CHECK(gate.capacity() == 1);  // the ladder at CRITICAL: one slot
  CHECK(gate.pushed_level() == mem_level::ok);
  auto one = gate.try_acquire();
  CHECK(one);
  CHECK(gate.try_acquire().status == gate_status::timed_out);  // full, not overloaded
  set_level(w, mem_level::ok);
  CHECK(gate.capacity() == 8);
  CHECK(gate.try_acquire());
}

TEST_CASE("gate: the connection unsubscribes on destruction") {
  watcher<null_sampler> w{null_sampler{}};
  backpressure_gate gate{2};
  set_level(w, mem_level::tight);
  {
    auto conn = gate.connect(w);
    gate_connection moved = std::move(conn);
    CHECK_FALSE(conn.connected());
    CHECK(moved.connected());
  }
  gate.notify_pressure(mem_level::tight);
  set_level(w, mem_level::ok);  // nobody listening: stays pushed
  CHECK(gate.pushed_level() == mem_level::tight);

  // A connection that outlives its gate is harmless.
  gate_connection late;
  {
    backpressure_gate g2{1};
    late = g2.connect(w);
  }
  set_level(w, mem_level::critical);
  set_level(w, mem_level::ok);
  late.disconnect();
  CHECK_FALSE(late.connected());
}

TEST_CASE("gate: deadlines give timed_out") {
  engine_counters counters;
  backpressure_gate gate{1, 64, &counters};
  auto held = gate.try_acquire();
  REQUIRE(held);

  // Already passed: queued, then timed out at once.
  CHECK(gate.acquire(std::chrono::steady_clock::now() - 1s).status == gate_status::timed_out);

  tally got;
  std::vector<std::thread> ts;
  std::latch start{many};
  for (int t = 0; t < many; ++t) {
    ts.emplace_back([&] {
      start.arrive_and_wait();
      got.add(gate.acquire_for(20ms).status);
    });
  }
  join_all(ts);
  CHECK(got[gate_status::timed_out] == many);
  CHECK(gate.waiting() == 0);
  CHECK(gate.in_use() == 1);
  // Any clock's time_point.
  CHECK(gate.acquire(std::chrono::system_clock::now() + 1ms).status == gate_status::timed_out);
  CHECK(counters.gate_timed_out.load() == static_cast<std::uint64_t>(many + 2));
  CHECK(counters.gate_waits.load() == static_cast<std::uint64_t>(many + 2));
  held.slot.release();
  CHECK(gate.acquire_for(0ms));  // free: acquired without waiting
}

TEST_CASE("gate: a stop request gives cancelled") {
  engine_counters counters;
  backpressure_gate gate{1, 64, &counters};
  gate.notify_pressure(mem_level::tight);

  std::stop_source stopped;
  stopped.request_stop();
  CHECK(gate.acquire(far_deadline(), stopped.get_token()).status == gate_status::cancelled);

  tally got;
  std::vector<std::stop_source> sources(many);
  std::vector<std::thread> ts;
  for (int t = 0; t < many; ++t) {
    ts.emplace_back([&, t] {
      got.add(gate.acquire(far_deadline(), sources[static_cast<std::size_t>(t)].get_token()).status);
    });
  }
  REQUIRE(eventually([&] { return gate.waiting() == static_cast<std::size_t>(many); }));
  for (auto& s : sources) s.request_stop();
  join_all(ts);
  CHECK(got[gate_status::cancelled] == many);
  CHECK(gate.waiting() == 0);
  CHECK(counters.gate_cancelled.load() == static_cast<std::uint64_t>(many + 1));

  // std::jthread's own token, stopped by its destructor.
  std::atomic<int> result{-1};
  {
    std::jthread jt([&](std::stop_token st) { result.store(static_cast<int>(gate.acquire(far_deadline(), st).status)); });
    REQUIRE(eventually([&] { return gate.waiting() == 1; }));
  }
  CHECK(result.load() == static_cast<int>(gate_status::cancelled));
}

TEST_CASE("gate: the waiter queue is bounded") {
  engine_counters counters;
  constexpr std::size_t bound = 4;
  backpressure_gate gate{1, bound, &counters};
  auto held = gate.try_acquire();
  REQUIRE(held);

  tally got;
  std::vector<std::thread> waiters;
  for (std::size_t i = 0; i < bound; ++i) waiters.emplace_back([&] { got.add(gate.acquire(far_deadline()).status); });
  REQUIRE(eventually([&] { return gate.waiting() == bound; }));

  std::vector<std::thread> extra;
  std::latch start{many};
  for (int t = 0; t < many; ++t) {
    extra.emplace_back([&] {
      start.arrive_and_wait();
      got.add(gate.acquire(far_deadline()).status);
    });
  }
  join_all(extra);
  CHECK(got[gate_status::queue_full] == many);
  CHECK(counters.gate_queue_full.load() == static_cast<std::uint64_t>(many));

  held.slot.release();  // each waiter's slot returns as its thread ends
  join_all(waiters);
  CHECK(got[gate_status::acquired] == static_cast<int>(bound));

  backpressure_gate never_waits{1, 0};
  auto h = never_waits.try_acquire();
  CHECK(never_waits.acquire(far_deadline()).status == gate_status::queue_full);
}

TEST_CASE("gate: the slot ceiling follows the ladder's rung 2") {
  const ladder_config cfg{.max_slots = 8, .prefill_window = 16384, .kv_q4 = false};
  backpressure_gate gate{ladder_plan_for(mem_level::ok, cfg).max_slots};
  CHECK(gate.capacity() == 8);
  std::vector<gate_slot> held;
  for (int i = 0; i < 8; ++i) {
    auto r = gate.try_acquire();
    REQUIRE(r);
    held.push_back(std::move(r.slot));
  }

  gate.set_capacity(ladder_plan_for(mem_level::tight, cfg).max_slots);
  CHECK(gate.capacity() == 4);
  CHECK(gate.in_use() == 8);  // nothing revoked
  held.resize(4);             // four returned: 4 in use, ceiling 4
  CHECK(gate.try_acquire().status == gate_status::timed_out);

  gate.set_capacity(ladder_plan_for(mem_level::critical, cfg).max_slots);
  CHECK(gate.capacity() == 1);
  held.resize(1);
  CHECK(gate.try_acquire().status == gate_status::timed_out);
  held.clear();
  auto one = gate.try_acquire();
  CHECK(one);
  CHECK(gate.try_acquire().status == gate_status::timed_out);

  // Raising the ceiling wakes waiters.
  tally got;
  std::vector<std::thread> ts;
  for (int t = 0; t < 7; ++t) {
    ts.emplace_back([&] {
      auto r = gate.acquire(far_deadline());
      got.add(r.status);
      r.slot.detach();  // keep the slot past the thread
    });
  }
  REQUIRE(eventually([&] { return gate.waiting() == 7; }));
  gate.set_capacity(ladder_plan_for(mem_level::ok, cfg).max_slots);
  join_all(ts);
  CHECK(got[gate_status::acquired] == 7);
  CHECK(gate.in_use() == 8);
  for (int i = 0; i < 7; ++i) gate.release();

  gate.set_capacity(0);  // below 1 is 1, as the ladder
  CHECK(gate.capacity() == 1);
}

// What a fleet router reads (engine/fleet_load.hpp): the waiting acquirers are the queued
// requests, the slots held the running ones; the capacity follows the ladder, so the same
// running count is a larger share of the KV under pressure.
TEST_CASE("gate: gate_load says the queued and running requests and the share of the slots in use") {
  const ladder_config cfg{.max_slots = 8, .prefill_window = 16384, .kv_q4 = false};
  backpressure_gate gate{ladder_plan_for(mem_level::ok, cfg).max_slots};
  CHECK(gate_load(gate).queued_requests == 0);
  CHECK(gate_load(gate).slot_capacity == 8);
  std::vector<gate_slot> held;
  for (int i = 0; i < 4; ++i) held.push_back(std::move(gate.try_acquire().slot));
  fleet_load f = gate_load(gate);
  CHECK(f.running_requests == 4);
  CHECK(kv_cache_usage(f) == 0.5);

  gate.set_capacity(ladder_plan_for(mem_level::tight, cfg).max_slots);  // 4: now full
  CHECK(kv_cache_usage(gate_load(gate)) == 1.0);
  std::vector<std::thread> ts;
  for (int t = 0; t < 3; ++t) {
    ts.emplace_back([&] {
      auto r = gate.acquire(far_deadline());
      CHECK(r);
    });
  }
  REQUIRE(eventually([&] { return gate.waiting() == 3; }));
  f = gate_load(gate);
  CHECK(f.queued_requests == 3);
  CHECK(f.running_requests == 4);
  CHECK(f.slot_capacity == 4);
  held.resize(1);  // three released: the waiters get them and end, returning them
  join_all(ts);
  f = gate_load(gate);
  CHECK(f.queued_requests == 0);
  CHECK(f.running_requests == 1);
  CHECK(kv_cache_usage(f) == 0.25);
}

TEST_CASE("gate: counters over one deterministic sequence") {
  engine_counters c;
  backpressure_gate gate{1, 1, &c};
  auto a = gate.try_acquire();                                        // acquired
  CHECK(gate.try_acquire().status == gate_status::timed_out);         // timed_out (no wait)
  CHECK(gate.acquire(std::chrono::steady_clock::now()).status == gate_status::timed_out);  // wait + timed_out
  std::stop_source s;
  s.request_stop();
  CHECK(gate.acquire(far_deadline(), s.get_token()).status == gate_status::cancelled);  // cancelled
  std::thread waiter([&] { CHECK(gate.acquire(far_deadline()).status == gate_status::overloaded); });
  REQUIRE(eventually([&] { return gate.waiting() == 1; }));
  CHECK(gate.acquire(far_deadline()).status == gate_status::queue_full);  // queue_full
  gate.notify_pressure(mem_level::critical);                              // the waiter: overloaded
  waiter.join();
  CHECK(gate.try_acquire().status == gate_status::overloaded);

  CHECK(c.gate_acquired.load() == 1);
  CHECK(c.gate_timed_out.load() == 2);
  CHECK(c.gate_waits.load() == 2);
  CHECK(c.gate_cancelled.load() == 1);
  CHECK(c.gate_queue_full.load() == 1);
  CHECK(c.gate_overloaded.load() == 2);
}

TEST_CASE("gate: stress, levels and capacity change under many acquirers") {
  watcher<null_sampler> w{null_sampler{}};
  engine_counters counters;
  const ladder_config cfg{.max_slots = 8};
  backpressure_gate gate{8, 8, &counters};
  auto conn = gate.connect(w);

  constexpr int rounds = 150;
  std::atomic<bool> done{false};
  std::atomic<int> holders{0};
  std::atomic<int> max_holders{0};
  tally got;
  std::latch start{many + 1};
  std::vector<std::thread> ts;
  for (int t = 0; t < many; ++t) {
    ts.emplace_back([&, t] {
      std::stop_source src;
      start.arrive_and_wait();
      for (int i = 0; i < rounds; ++i) {
        if ((i + t) % 37 == 0) src.request_stop();
        auto r = (i % 5 == 0) ? gate.try_acquire() : gate.acquire_for(2ms, src.get_token());
        got.add(r.status);
        if (r) {
          const int now = holders.fetch_add(1) + 1;
          int seen = max_holders.load();
          while (now > seen && !max_holders.compare_exchange_weak(seen, now)) {
          }
          holders.fetch_sub(1);
        }
        if (src.stop_requested()) src = std::stop_source{};
      }
    });
  }
  std::thread driver([&] {
    start.arrive_and_wait();
    const mem_level cycle[] = {mem_level::ok, mem_level::tight, mem_level::ok,  mem_level::watch,
                               mem_level::critical, mem_level::tight, mem_level::ok};
    std::size_t k = 0;
    while (!done.load()) {
      const mem_level l = cycle[k++ % std::size(cycle)];
      set_level(w, l);
      gate.set_capacity(ladder_plan_for(l, cfg).max_slots);
      if (k % 3 == 0) gate.notify_pressure(mem_level::tight);
      std::this_thread::yield();
    }
    set_level(w, mem_level::tight);  // a change to below TIGHT clears any last push
    set_level(w, mem_level::ok);
    gate.set_capacity(8);
  });
  join_all(ts);
  done.store(true);
  driver.join();

  int total = 0;
  for (int i = 0; i < 5; ++i) total += got[static_cast<gate_status>(i)];
  CHECK(total == many * rounds);
  CHECK(got[gate_status::acquired] > 0);
  CHECK(max_holders.load() <= 8);
  CHECK(gate.in_use() == 0);
  CHECK(gate.waiting() == 0);
  CHECK(gate.pushed_level() == mem_level::ok);
  const std::uint64_t counted = counters.gate_acquired.load() + counters.gate_overloaded.load() +
                                counters.gate_timed_out.load() + counters.gate_cancelled.load() +
                                counters.gate_queue_full.load();
  CHECK(counted == static_cast<std::uint64_t>(many * rounds));
}

// ---- issue 14, item 2: the gate always drains ---------------------------------------------------------

namespace {

// A host the test moves by hand: the watcher's snapshot is whatever `host` says on the next poll.
struct hand_host {
  std::shared_ptr<host_sample> next = std::make_shared<host_sample>();
  host_sample sample() { return *next; }
};

constexpr std::uint64_t box = 16 * GiB;
constexpr std::uint64_t reserve16 = box_reserve_bytes(box);  // 2.4 GiB

// A host at TIGHT (slack below reserve/4) with `slack` bytes above the reserve.
host_sample tight_host(std::uint64_t slack) {
  REQUIRE(slack < reserve16 / 4);
  host_sample h;
  h.total_bytes = box;
  h.avail_bytes = reserve16 + slack;
  return h;
}

// What the engine would run: a 4096-token prompt on the host path (the seed's model, fp32 KV).
constexpr request_spec head_request{.n_prompt = 4096, .kv = kv_format::fp32};
// The request that was denied: one that needs more than the box can give at TIGHT.
constexpr request_spec denied_request{.n_prompt = 200000, .kv = kv_format::fp32};

}  // namespace

TEST_CASE("gate: a held waiter is released on the first sample on which its request would be admitted, "
          "though the level never changes") {
  // Fixed cost of the request (state + activation floor): the slack it needs to be capped rather than refused.
  const std::uint64_t floor_cost = host_cost_bytes(0, kv_format::fp32);
  REQUIRE(floor_cost + 64 * MiB < reserve16 / 4);
  hand_host host;
  *host.next = tight_host(floor_cost / 2);  // TIGHT, and not even the empty prompt fits
  watcher<hand_host> w{host};
  w.poll_now();
  REQUIRE(w.read().level == mem_level::tight);
  REQUIRE(admit_request(head_request, w.read()).verdict == verdict::reject);
  backpressure_gate gate{4};
  auto conn = gate.connect(w);
  CHECK(gate.capacity() == 2);  // rung 2 at TIGHT

  gate.notify_pressure(mem_level::tight, denied_request);  // a denial holds the queue
  std::atomic<int> result{-1};
  std::thread t([&] { result = static_cast<int>(gate.acquire(far_deadline(), head_request).status); });
  REQUIRE(eventually([&] { return gate.waiting() == 1; }));

  for (int i = 0; i < 5; ++i) w.poll_now();  // the box stays where it is: still held
  CHECK(gate.waiting() == 1);
  CHECK(gate.pushed_level() == mem_level::tight);

  *host.next = tight_host(floor_cost + 64 * MiB);  // still TIGHT: a prefix of the request now fits
  w.poll_now();
  REQUIRE(w.read().level == mem_level::tight);
  REQUIRE(admit_request(head_request, w.read()).verdict == verdict::cap);
  t.join();
  CHECK(result.load() == static_cast<int>(gate_status::acquired));
  CHECK(gate.pushed_level() == mem_level::ok);
}

TEST_CASE("gate: with no waiter, the denied request is what the next sample re-checks") {
  const std::uint64_t floor_cost = host_cost_bytes(0, kv_format::fp32);
  hand_host host;
  *host.next = tight_host(floor_cost / 2);
  watcher<hand_host> w{host};
  w.poll_now();
  backpressure_gate gate{4};
  auto conn = gate.connect(w);
  gate.notify_pressure(mem_level::tight, denied_request);
  w.poll_now();
  CHECK(gate.pushed_level() == mem_level::tight);  // nothing of it fits yet
  *host.next = tight_host(floor_cost + MiB);
  w.poll_now();
  CHECK(gate.pushed_level() == mem_level::ok);  // it would be capped now: the hold ends
  CHECK(gate.try_acquire());
}

TEST_CASE("gate: a box resting at TIGHT with nothing denied never holds anything") {
  hand_host host;
  *host.next = tight_host(100 * MiB);
  watcher<hand_host> w{host};
  w.poll_now();
  REQUIRE(w.read().level == mem_level::tight);
  backpressure_gate gate{8};
  auto conn = gate.connect(w);
  for (int i = 0; i < 20; ++i) {
    w.poll_now();
    CHECK(gate.pushed_level() == mem_level::ok);
    auto a = gate.try_acquire();
    CHECK(a);  // slots are the ladder's (4 at TIGHT), none held back
  }
  std::vector<gate_result> held;
  for (int i = 0; i < 4; ++i) held.push_back(gate.try_acquire());
  for (const auto& r : held) CHECK(r);
  CHECK(gate.try_acquire().status == gate_status::timed_out);  // 4 of 4 slots in use: full, not held
}

TEST_CASE("gate: rung 2 follows the watcher's level both ways, restored at OK") {
  watcher<null_sampler> w{null_sampler{}};
  backpressure_gate gate{8};
  auto conn = gate.connect(w);
  CHECK(gate.capacity() == 8);
  set_level(w, mem_level::watch);
  CHECK(gate.capacity() == 8);
  set_level(w, mem_level::tight);
  CHECK(gate.capacity() == 4);
  set_level(w, mem_level::critical);
  CHECK(gate.capacity() == 1);
  set_level(w, mem_level::tight);  // back from CRITICAL: TIGHT's slots, not CRITICAL's until OK
  CHECK(gate.capacity() == 4);
  set_level(w, mem_level::watch);
  CHECK(gate.capacity() == 8);
  set_level(w, mem_level::ok);
  CHECK(gate.capacity() == 8);
  gate.set_capacity(6);  // the operator's ceiling, under the ladder
  CHECK(gate.capacity() == 6);
  set_level(w, mem_level::tight);
  CHECK(gate.capacity() == 3);

  backpressure_gate manual{gate_options{.max_slots = 8, .follow_ladder = false}};
  auto conn2 = manual.connect(w);
  CHECK(manual.capacity() == 8);  // not following: set_capacity alone
  manual.set_capacity(5);
  set_level(w, mem_level::critical);
  CHECK(manual.capacity() == 5);
}

namespace {
// A host at its reserve (CRITICAL): nothing that costs host bytes may start.
host_sample at_reserve_host() {
  host_sample h;
  h.total_bytes = box;
  h.avail_bytes = reserve16;
  return h;
}
host_sample roomy_host() {
  host_sample h;
  h.total_bytes = box;
  h.avail_bytes = 3 * reserve16;
  return h;
}
// An engine whose KV was allocated at load: a request costs the host nothing.
const model_desc prealloc{.max_window = 8192, .max_slots = 4, .cost = preallocated_model_cost};

// A watcher the test polls by hand, seen as running (pnmem::admit fails open on one that is not).
struct polled_watcher {
  watcher<hand_host>& w;
  bool running() const { return true; }
  mem_state read() const { return w.read(); }
  template <class F>
  auto subscribe(F fn, delivery d) {
    return w.subscribe(std::move(fn), d);
  }
  void unsubscribe(watcher<hand_host>::subscription_id id) { w.unsubscribe(id); }
};
}  // namespace

TEST_CASE("admit_wait: a request that needs no host bytes is held at the reserve and served on the first sample "
          "above it") {
  hand_host host;
  *host.next = at_reserve_host();
  watcher<hand_host> w{host};
  w.poll_now();
  REQUIRE(w.read().level == mem_level::critical);
  polled_watcher pw{w};
  engine_counters counters;
  const admit_options o{.policy = default_policy, .counters = &counters};
  const admit_answer now = admit(pw, prealloc, 1000, o);
  REQUIRE(now.status == admit_status::denied);
  CHECK(now.reason == admit_reason::host_reserve);
  CHECK(now.held);

  std::atomic<bool> done{false};
  admit_answer waited;
  std::thread t([&] {
    waited = admit_wait(pw, prealloc, 1000, std::chrono::steady_clock::now() + 60s, o);
    done = true;
  });
  for (int i = 0; i < 5; ++i) {
    w.poll_now();  // still at the reserve: still held
    std::this_thread::sleep_for(2ms);
  }
  CHECK_FALSE(done.load());
  *host.next = roomy_host();
  w.poll_now();
  t.join();
  CHECK(waited.status == admit_status::admitted);
  CHECK(waited.fit_tokens == 1000);
  CHECK_FALSE(waited.held);
  CHECK(counters.held_served.load() == 1);
  CHECK(counters.held_timed_out.load() == 0);
  // Counted once each, as pnmem::admit counts: the refusal asked before, and the answer the wait returned
  // (not each re-decision while it was held).
  CHECK(counters.denied[static_cast<std::size_t>(admit_reason::host_reserve)].load() == 1);
  CHECK(counters.admitted[static_cast<std::size_t>(admit_reason::fits)].load() == 1);
}

TEST_CASE("admit_wait: held past the patience, the refusal as it stands; nothing else waits") {
  hand_host host;
  *host.next = at_reserve_host();
  watcher<hand_host> w{host};
  w.poll_now();
  polled_watcher pw{w};
  engine_counters counters;
  SUBCASE("the patience runs out: denied host_reserve, counted") {
    const auto start = std::chrono::steady_clock::now();
    const admit_answer a = admit_wait(pw, prealloc, 1000, 30ms, {.policy = default_policy, .counters = &counters});
    CHECK(std::chrono::steady_clock::now() - start >= 30ms);
    CHECK(a.status == admit_status::denied);
    CHECK(a.reason == admit_reason::host_reserve);
    CHECK(counters.held_timed_out.load() == 1);
    CHECK(counters.held_served.load() == 0);
  }
  SUBCASE("a request that costs host bytes, the rule reject, or the model's own rule admit: at once") {
    const auto patience = std::chrono::steady_clock::now() + 60s;  // a wait would hang the test
    model_desc costly = prealloc;
    costly.cost = seed_model_cost;
    const admit_answer c = admit_wait(pw, costly, 1000, patience, {.policy = default_policy, .counters = &counters});
    CHECK(c.status == admit_status::denied);
    CHECK_FALSE(c.held);
    policy reject = default_policy;
    reject.zero_cost = zero_cost_rule::reject;
    const admit_answer r = admit_wait(pw, prealloc, 1000, patience, {.policy = reject, .counters = &counters});
    CHECK(r.status == admit_status::denied);
    CHECK_FALSE(r.held);
    model_desc own = prealloc;
    own.zero_cost = zero_cost_rule::admit;  // the engine's choice for this model, over the policy's
    const admit_answer m = admit_wait(pw, own, 1000, patience, {.policy = default_policy, .counters = &counters});
    CHECK(m.status == admit_status::admitted);
    CHECK(m.detail.need_bytes == 0);
    own.zero_cost = zero_cost_rule::reject;
    CHECK_FALSE(admit(pw, own, 1000, {.policy = default_policy}).held);
    CHECK(counters.held_timed_out.load() == 0);
    CHECK(counters.held_served.load() == 0);
  }
}

TEST_CASE("gate: a request that needs no host bytes, refused at the reserve, is held (TIGHT), not shed; the rule "
          "reject sheds it") {
  hand_host host;
  *host.next = at_reserve_host();
  watcher<hand_host> w{host};
  w.poll_now();
  polled_watcher pw{w};
  SUBCASE("hold: the waiter is served once the box is above its reserve") {
    backpressure_gate gate{gate_options{.max_slots = 4, .model = preallocated_model_cost, .policy = default_policy}};
    auto conn = gate.connect(w);
    const admit_answer a = admit(pw, prealloc, 1000, {.policy = default_policy});
    REQUIRE(a.held);
    REQUIRE(a.level == mem_level::critical);
    gate.notify_denied(a);
    CHECK(gate.pushed_level() == mem_level::tight);  // held, not CRITICAL
    std::atomic<int> result{-1};
    std::thread t([&] { result = static_cast<int>(gate.acquire(far_deadline(), a.request).status); });
    REQUIRE(eventually([&] { return gate.waiting() == 1; }));
    w.poll_now();
    CHECK(gate.waiting() == 1);  // still at the reserve
    *host.next = roomy_host();
    w.poll_now();
    t.join();
    CHECK(result.load() == static_cast<int>(gate_status::acquired));
    CHECK(gate.pushed_level() == mem_level::ok);
  }
  SUBCASE("reject: shed at once, as the seed") {
    policy reject = default_policy;
    reject.zero_cost = zero_cost_rule::reject;
    backpressure_gate gate{gate_options{.max_slots = 4, .model = preallocated_model_cost, .policy = reject}};
    auto conn = gate.connect(w);
    const admit_answer a = admit(pw, prealloc, 1000, {.policy = reject});
    REQUIRE(a.status == admit_status::denied);
    REQUIRE_FALSE(a.held);
    gate.notify_denied(a);
    CHECK(gate.pushed_level() == mem_level::critical);
    CHECK(gate.try_acquire().status == gate_status::overloaded);
    // The same decision through the (level, result, request) form, under the gate's policy.
    backpressure_gate held_gate{gate_options{.max_slots = 4, .model = preallocated_model_cost, .policy = default_policy}};
    held_gate.notify_denied(a.level, a.detail, a.request);
    CHECK(held_gate.pushed_level() == mem_level::tight);
    held_gate.notify_denied(a.level, admit_result{.verdict = verdict::admit}, a.request);  // not a refusal: ignored
    CHECK(held_gate.pushed_level() == mem_level::tight);
  }
}

TEST_CASE("gate: a request the gate cannot judge (a die the snapshot lacks) never holds the queue (issue 42 item 7)") {
  hand_host host;
  *host.next = tight_host(100 * MiB);  // TIGHT, no dies
  watcher<hand_host> w{host};
  w.poll_now();
  REQUIRE(w.read().level == mem_level::tight);
  backpressure_gate gate{4};
  auto conn = gate.connect(w);
  request_spec on_missing_die = head_request;
  on_missing_die.die = 5;  // the snapshot has no die 5: admission says bad_request
  REQUIRE(admit_request(on_missing_die, w.read()).reason == admit_reason::bad_request);
  gate.notify_pressure(mem_level::tight, on_missing_die);
  CHECK(gate.pushed_level() == mem_level::tight);
  w.poll_now();  // the re-check cannot judge it: the hold ends rather than waiting for ever
  CHECK(gate.pushed_level() == mem_level::ok);
  CHECK(gate.try_acquire());
  // A waiter that says it will run such a request is not held either.
  gate.notify_pressure(mem_level::tight, denied_request);
  std::atomic<int> result{-1};
  std::thread t([&] { result = static_cast<int>(gate.acquire(far_deadline(), on_missing_die).status); });
  REQUIRE(eventually([&] { return gate.waiting() == 1; }));
  w.poll_now();
  t.join();
  CHECK(result.load() == static_cast<int>(gate_status::acquired));
}
