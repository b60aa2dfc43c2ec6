// The die feed on the fake backend: budgets, free, used and retiring per die,
// and a backend without devices.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "pnmem/config.hpp"
#include "pnmem/cuda/die_feed.hpp"
#include "pnmem/cuda/fake_backend.hpp"
#include "pnmem/watcher.hpp"
#include "faulty_backend.hpp"

namespace pnmem::cuda {
namespace {

struct pushed {
  std::uint64_t free_bytes = 0;
  std::uint64_t budget_bytes = 0;
  std::uint64_t used_bytes = 0;
  std::uint64_t retiring_bytes = 0;
};

// Collects what a poll pushed, by die.
struct recorder {
  std::map<int, pushed> dies;
  die_feed::sink sink() {
    return [this](int die, std::uint64_t f, std::uint64_t b, std::uint64_t u, std::uint64_t r) {
      dies[die] = pushed{f, b, u, r};
    };
  }
};

policy with_reserve(std::uint64_t bytes) {
  policy p = default_policy;
  p.die_reserve_bytes = bytes;
  return p;
}

// device_count fails the way cudart does on a machine without a driver.
class no_driver_backend final : public device_backend {
 public:
  std::string_view name() const noexcept override { return "no-driver"; }
  device_status device_count(int& out) noexcept override {
    out = 0;
    return {device_errc::driver_insufficient, 35};
  }
  device_status mem_get_info(int, std::uint64_t&, std::uint64_t&) noexcept override { return fail(); }
  device_status device_alloc_mode(int, alloc_mode&) noexcept override { return fail(); }
  device_status alloc_async(int, std::size_t, stream_handle, void*&) noexcept override { return fail(); }
  device_status free_async(void*, stream_handle) noexcept override { return fail(); }
  device_status alloc_plain(int, std::size_t, void*&) noexcept override { return fail(); }
  device_status free_plain(void*) noexcept override { return fail(); }
  device_status alloc_pinned(std::size_t, void*&) noexcept override { return fail(); }
  device_status free_pinned(void*) noexcept override { return fail(); }
  device_status stream_create(int, stream_handle&) noexcept override { return fail(); }
  device_status stream_destroy(stream_handle) noexcept override { return fail(); }
  device_status event_create(int, event_handle&) noexcept override { return fail(); }
  device_status event_destroy(event_handle) noexcept override { return fail(); }
  device_status event_record(event_handle, stream_handle) noexcept override { return fail(); }
  device_status event_query(event_handle) noexcept override { return fail(); }
  device_status stream_wait_event(stream_handle, event_handle) noexcept override { return fail(); }
  device_status stream_id(stream_handle, std::uint64_t&) noexcept override { return fail(); }
  device_status copy_async(void*, const void*, std::size_t, stream_handle) noexcept override { return fail(); }
  device_status observation_scores_async(const observation_pooling&, stream_handle) noexcept override { return fail(); }
  device_status select_keep_async(const keep_selection&, stream_handle) noexcept override { return fail(); }
  device_status compact_rows_async(const row_compaction&, stream_handle) noexcept override { return fail(); }

 private:
  static device_status fail() noexcept { return {device_errc::driver_insufficient, 35}; }
};

TEST_CASE("budget = total - die reserve, measured once per die") {
  fake_backend dev{{.devices = 2, .total_bytes_per_device = 64 * MiB}};
  die_feed feed{dev, with_reserve(16 * MiB)};
  REQUIRE(feed.die_count() == 2);
  CHECK(feed.status().ok());
  CHECK(feed.reason() == "2 dies");
  for (int d = 0; d < 2; ++d) {
    CHECK(feed.total_bytes(d) == 64 * MiB);
    CHECK(feed.budget_bytes(d) == 48 * MiB);
  }
  CHECK(feed.total_bytes(2) == 0);
  CHECK(feed.budget_bytes(-1) == 0);
}

TEST_CASE("the default reserve is the seed's 1 GiB; a reserve above the total floors the budget at 0") {
  fake_backend big;  // 16 GiB
  CHECK(die_feed{big}.budget_bytes(0) == 15 * GiB);
  fake_backend small{{.devices = 1, .total_bytes_per_device = 512 * MiB}};
  CHECK(die_feed{small}.budget_bytes(0) == 0);
  CHECK(die_feed{small, with_reserve(512 * MiB)}.budget_bytes(0) == 0);
}

TEST_CASE("PN_DIE_RESERVE_BYTES reaches the budget through the policy") {
  const std::map<std::string, std::string> env{{"PN_DIE_RESERVE_BYTES", "268435456"}};
  const auto cfg = policy_from_env([&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
  REQUIRE(cfg.ok());
  fake_backend dev{{.devices = 1, .total_bytes_per_device = 1 * GiB}};
  CHECK(die_feed{dev, cfg.value}.budget_bytes(0) == 768 * MiB);
}

TEST_CASE("without a policy the feed takes the process's PN_DIE_RESERVE_BYTES (applied by default)") {
  ::setenv("PN_DIE_RESERVE_BYTES", "256MiB", 1);
  pnmem::detail::reset_process_env_for_testing();
  fake_backend dev{{.devices = 1, .total_bytes_per_device = 1 * GiB}};
  CHECK(die_feed{dev}.budget_bytes(0) == 768 * MiB);
  CHECK(die_feed{dev, default_policy}.budget_bytes(0) == 0);  // an explicit policy is the engine's
  ::unsetenv("PN_DIE_RESERVE_BYTES");
  pnmem::detail::reset_process_env_for_testing();
  CHECK(die_feed{dev}.budget_bytes(0) == 0);  // the seed's 1 GiB reserve
}

TEST_CASE("poll pushes free as the device reports it, moving with allocations") {
  fake_backend dev{{.devices = 2, .total_bytes_per_device = 64 * MiB, .used_by_others_bytes = 4 * MiB}};
  die_feed feed{dev, with_reserve(8 * MiB)};
  recorder rec;
  auto r = feed.poll(rec.sink());
  CHECK(r.pushed == 2);
  CHECK(r.status.ok());
  CHECK(rec.dies.at(0).free_bytes == 60 * MiB);
  CHECK(rec.dies.at(0).budget_bytes == 56 * MiB);

  stream_handle s;
  REQUIRE(dev.stream_create(1, s).ok());
  void* p = nullptr;
  REQUIRE(dev.alloc_async(1, 10 * MiB, s, p).ok());
  feed.tally(1).add_used(10 * MiB);
  r = feed.poll(rec.sink());
  CHECK(rec.dies.at(0).free_bytes == 60 * MiB);
  CHECK(rec.dies.at(1).free_bytes == 50 * MiB);
  CHECK(rec.dies.at(1).used_bytes == 10 * MiB);
  CHECK(rec.dies.at(0).used_bytes == 0);
  CHECK(rec.dies.at(1).budget_bytes == 56 * MiB);  // the budget does not move

  // Another process takes memory: free follows, the budget does not.
  dev.set_used_by_others(1, 20 * MiB);
  (void)feed.poll(rec.sink());
  CHECK(rec.dies.at(1).free_bytes == 34 * MiB);
  CHECK(rec.dies.at(1).budget_bytes == 56 * MiB);

  REQUIRE(dev.free_async(p, s).ok());
  REQUIRE(dev.stream_destroy(s).ok());
  dev.run_until_idle();
}

TEST_CASE("retiring bytes are reported apart from free: memory pending free is not free") {
  fake_backend dev{{.devices = 1, .total_bytes_per_device = 64 * MiB}};
  die_feed feed{dev, with_reserve(0)};
  recorder rec;
  stream_handle s;
  REQUIRE(dev.stream_create(0, s).ok());
  void* p = nullptr;
  REQUIRE(dev.alloc_async(0, 16 * MiB, s, p).ok());
  die_tally& t = feed.tally(0);
  t.add_used(16 * MiB);

  // The owner retires the buffer behind in-flight work.
  dev.submit(s, {{p, 16 * MiB, false}}, 10);
  REQUIRE(dev.free_async(p, s).ok());
  t.retire(16 * MiB);
  (void)feed.poll(rec.sink());
  CHECK(rec.dies.at(0).used_bytes == 0);
  CHECK(rec.dies.at(0).retiring_bytes == 16 * MiB);
  CHECK(rec.dies.at(0).free_bytes == 48 * MiB);  // not free yet

  dev.run_until_idle();
  t.sub_retiring(16 * MiB);
  (void)feed.poll(rec.sink());
  CHECK(rec.dies.at(0).retiring_bytes == 0);
  CHECK(rec.dies.at(0).free_bytes == 64 * MiB);
  REQUIRE(dev.stream_destroy(s).ok());
  CHECK(dev.violations().empty());
}

TEST_CASE("die_tally clamps at zero and moves used to retiring in one step") {
  die_tally t;
  t.add_used(100);
  t.sub_used(300);
  CHECK(t.used() == 0);
  t.add_used(50);
  t.retire(80);  // more than used: used clamps, retiring takes all 80
  CHECK(t.read().used == 0);
  CHECK(t.read().retiring == 80);
  t.sub_retiring(100);
  CHECK(t.retiring() == 0);
  t.add_retiring(7);
  CHECK(t.retiring() == 7);
}

TEST_CASE("die_tally from many owner threads while the feed polls: a poll never sees bytes twice") {
  // Owner thread t cycles one buffer of 4 KiB << t: allocate (used), retire behind
  // an event (used -> retiring in one step), reap (retiring gone). The sizes are
  // distinct powers of two, so every reading decomposes: thread t's buffer is in
  // used (bit t), in retiring, or in neither, never in both (used & retiring == 0)
  // and nothing else is ever there.
  fake_backend gpu{fake_options{.devices = 1}};
  die_feed feed{gpu};
  REQUIRE(feed.die_count() == 1);
  die_tally& tally = feed.tally(0);
  constexpr int owners = 4;
  constexpr std::uint64_t unit = 4096;
  constexpr std::uint64_t all = unit * ((1U << owners) - 1);
  constexpr int cycles = 20000;
  std::atomic<int> running{owners};
  std::atomic<int> polls{0};
  std::atomic<int> bad{0};
  const auto check = [&](std::uint64_t used, std::uint64_t retiring) {
    if ((used & retiring) != 0 || ((used | retiring) & ~all) != 0) bad.fetch_add(1);
  };
  std::thread poller([&] {
    const die_feed::sink sink = [&](int, std::uint64_t, std::uint64_t, std::uint64_t used, std::uint64_t retiring) {
      check(used, retiring);
    };
    while (running.load() > 0) {
      feed.poll(sink);
      const die_tally::counts c = tally.read();
      check(c.used, c.retiring);
      polls.fetch_add(1);
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < owners; ++t) {
    threads.emplace_back([&, t] {
      const std::uint64_t buf = unit << t;
      // Until the poller has read 1000 times meanwhile, however the threads are scheduled.
      for (int i = 0; i < cycles || polls.load() < 1000; ++i) {
        tally.add_used(buf);
        tally.retire(buf);
        tally.sub_retiring(buf);
      }
      running.fetch_sub(1);
    });
  }
  for (auto& th : threads) th.join();
  poller.join();
  CHECK(bad.load() == 0);
  CHECK(polls.load() >= 1000);
  CHECK(tally.used() == 0);  // no update lost
  CHECK(tally.retiring() == 0);
}

TEST_CASE("no driver: zero dies, a reason, no throw, and polls push nothing") {
  no_driver_backend b;
  die_feed feed{b};
  CHECK(feed.die_count() == 0);
  CHECK(feed.status().code == device_errc::driver_insufficient);
  CHECK(feed.status().native == 35);
  CHECK(feed.reason() == "no dies: no-driver device_count: driver_insufficient (native 35)");
  recorder rec;
  const auto r = feed.poll(rec.sink());
  CHECK(r.pushed == 0);
  CHECK(rec.dies.empty());
  feed.tally(0).add_used(1);  // harmless
  CHECK(feed.tally(0).used() == 1);
}

TEST_CASE("no devices: zero dies and no_device") {
  fake_backend dev{{.devices = 0}};
  die_feed feed{dev};
  CHECK(feed.die_count() == 0);
  CHECK(feed.status().code == device_errc::no_device);
  CHECK(feed.reason().find("no dies") == 0);
}

TEST_CASE("a die whose query fails is skipped, never pushed as 0 bytes free") {
  test::faulty_backend b{{.devices = 3, .total_bytes_per_device = 64 * MiB}};
  b.failing_die = 1;  // unmeasurable from the start
  die_feed feed{b, with_reserve(0)};
  CHECK(feed.die_count() == 3);
  CHECK(feed.budget_bytes(1) == 0);
  CHECK(feed.reason() == "3 dies (1 not measurable: skipped)");
  recorder rec;
  auto r = feed.poll(rec.sink());
  CHECK(r.pushed == 2);
  CHECK(rec.dies.count(1) == 0);

  b.failing_die = 2;  // falls off later
  rec.dies.clear();
  r = feed.poll(rec.sink());
  CHECK(r.pushed == 1);
  CHECK(r.status.code == device_errc::failure);
  CHECK(r.failed_die == 2);
  CHECK(rec.dies.count(0) == 1);
  CHECK(rec.dies.count(2) == 0);
}

TEST_CASE("dies beyond max_dies are not fed") {
  fake_backend dev{{.devices = max_dies + 2, .total_bytes_per_device = 1 * MiB}};
  die_feed feed{dev, with_reserve(0)};
  CHECK(feed.die_count() == max_dies);
  CHECK(feed.reason().find("beyond max_dies") != std::string::npos);
}

// A host sampler for the watcher: a roomy host, so only the dies decide the level.
struct quiet_host {
  host_sample sample() {
    host_sample h;
    h.total_bytes = 64 * GiB;
    h.avail_bytes = 60 * GiB;
    return h;
  }
};

TEST_CASE("watcher_sink feeds watcher::set_die, retiring included") {
  fake_backend dev{{.devices = 2, .total_bytes_per_device = 16 * GiB}};
  watcher<quiet_host> w{quiet_host{}};
  die_feed feed{dev};
  feed.tally(1).add_retiring(3 * MiB);
  feed.tally(1).add_used(5 * MiB);
  const auto r = feed.poll(watcher_sink(w));
  CHECK(r.pushed == 2);
  const mem_state s = w.read();
  CHECK(s.n_dies == 2);
  CHECK(s.per_die_budget_bytes[1] == 15 * GiB);
  CHECK(s.per_die_free_bytes[1] == 16 * GiB);
  CHECK(s.per_die_used_bytes[1] == 5 * MiB);
  CHECK(s.per_die_retiring_bytes[1] == 3 * MiB);
}

TEST_CASE("feed_every_sample: each watcher sample polls the dies into the same snapshot, until disconnected") {
  fake_backend dev{{.devices = 2, .total_bytes_per_device = 16 * GiB}};
  watcher<quiet_host> w{quiet_host{}};
  die_feed feed{dev};
  {
    scoped_subscription conn = feed_every_sample(feed, w);
    const std::uint64_t seq0 = w.read().seq;
    w.poll_now();
    mem_state s = w.read();
    CHECK(s.seq == seq0 + 1);  // host and dies in one publish
    CHECK(s.n_dies == 2);
    CHECK(s.host_avail_bytes == 60 * GiB);
    CHECK(s.per_die_free_bytes[0] == 16 * GiB);
    CHECK(s.per_die_budget_bytes[0] == 15 * GiB);
    // Another process takes 15.5 GiB of die 0: the next tick shows it, with no engine call in between.
    dev.set_used_by_others(0, 31 * GiB / 2);
    w.poll_now();
    s = w.read();
    CHECK(s.per_die_free_bytes[0] == GiB / 2);
    CHECK(s.level == mem_level::tight);  // free < budget/16 on die 0
  }
  // Disconnected: the watcher no longer polls the feed.
  dev.set_used_by_others(0, 0);
  w.poll_now();
  CHECK(w.read().per_die_free_bytes[0] == GiB / 2);
}

}  // namespace
}  // namespace pnmem::cuda
