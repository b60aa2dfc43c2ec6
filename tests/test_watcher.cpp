// The watcher with a fake sampler and a fake clock: no sleeps, no real /proc.
#include "pnmem/watcher.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "watcher_fakes.hpp"

using namespace pnmem;
using namespace std::chrono_literals;
using namespace pnmem::test;

static_assert(host_sampler<fake_sampler>);
static_assert(!event_sampler<fake_sampler>);

namespace {

// An event sampler whose waits return only when the test releases them: the
// watcher's thread advances one step per release, deterministically.
struct stepping_host : fake_host {
  std::condition_variable cv;
  std::vector<std::chrono::nanoseconds> waits;  // interval asked for, per wait
  std::vector<wake> script;                     // what each released wait returns
  std::size_t released = 0;
  bool interrupted = false;
};

struct stepping_sampler {
  std::shared_ptr<stepping_host> host;
  host_sample sample() {
    std::lock_guard<std::mutex> lk(host->mu);
    ++host->samples;
    host->cv.notify_all();
    return host->next;
  }
  wake wait_for(std::chrono::nanoseconds d) {
    std::unique_lock<std::mutex> lk(host->mu);
    host->waits.push_back(d);
    const std::size_t my = host->waits.size();
    host->cv.notify_all();
    host->cv.wait(lk, [&] { return host->interrupted || host->released >= my; });
    if (host->interrupted) return wake::interrupted;
    return host->script.size() >= my ? host->script[my - 1] : wake::timeout;
  }
  void interrupt() {
    std::lock_guard<std::mutex> lk(host->mu);
    host->interrupted = true;
    host->cv.notify_all();
  }
};
static_assert(event_sampler<stepping_sampler>);

}  // namespace

TEST_CASE("poll_now publishes the sample, a timestamp from the clock and a new seq") {
  auto host = roomy_host();
  fake_clock clock;
  watcher<fake_sampler, fake_clock> w{fake_sampler{host}, {}, clock};
  CHECK(w.read().seq == 0);
  CHECK(w.read().host_total_bytes == 0);
  w.poll_now();
  mem_state s = w.read();
  CHECK(s.seq == 1);
  CHECK(s.host_total_bytes == 64 * GiB);
  CHECK(s.sample_time_ns == 1'000'000'000);
  CHECK(s.level == mem_level::ok);
  CHECK(s.provenance.read(host_source::meminfo));
  clock.advance(250ms);
  w.poll_now();
  s = w.read();
  CHECK(s.seq == 2);
  CHECK(s.sample_time_ns == 1'250'000'000);
  mem_state t;
  CHECK(w.try_read(t));
  CHECK(t.seq == 2);
}

TEST_CASE("set_die merges, re-derives and publishes; a bad die id is an error") {
  auto host = roomy_host();
  watcher<fake_sampler, fake_clock> w{fake_sampler{host}};
  w.poll_now();
  CHECK(w.set_die(2, 8 * GiB, 16 * GiB, 3 * GiB, 512 * MiB) == set_die_status::ok);
  mem_state s = w.read();
  CHECK(s.per_die_retiring_bytes[2] == 512 * MiB);
  CHECK(s.n_dies == 3);
  CHECK(s.per_die_free_bytes[2] == 8 * GiB);
  CHECK(s.per_die_budget_bytes[2] == 16 * GiB);
  CHECK(s.per_die_used_bytes[2] == 3 * GiB);
  CHECK(s.level == mem_level::ok);
  CHECK(s.seq == 2);

  CHECK(w.set_die(0, 0, 16 * GiB, 16 * GiB) == set_die_status::ok);
  CHECK(w.read().level == mem_level::critical);
  CHECK(w.read().n_dies == 3);  // never shrinks

  const std::uint64_t seq = w.read().seq;
  CHECK(w.set_die(-1, 1, 1, 1) == set_die_status::die_out_of_range);
  CHECK(w.set_die(max_dies, 1, 1, 1) == set_die_status::die_out_of_range);
  CHECK(w.read().seq == seq);  // nothing published
  CHECK(to_string(set_die_status::die_out_of_range) == "die_out_of_range");

  // A host sample never clobbers die numbers.
  w.poll_now();
  CHECK(w.read().per_die_free_bytes[2] == 8 * GiB);
  CHECK(w.read().level == mem_level::critical);
}

TEST_CASE("hysteresis: escalate on one sample, step down after the dwell") {
  SUBCASE("dwell 0 is the seed: every sample's level is published") {
    level_hysteresis h{0ns};
    CHECK(h.update(mem_level::critical, 0) == mem_level::critical);
    CHECK(h.update(mem_level::ok, 1) == mem_level::ok);
    CHECK(h.update(mem_level::tight, 2) == mem_level::tight);
    CHECK(h.update(mem_level::watch, 3) == mem_level::watch);
  }
  SUBCASE("dwell 5 s") {
    level_hysteresis h{5s};
    const std::int64_t s = 1'000'000'000;
    CHECK(h.update(mem_level::critical, 0) == mem_level::critical);
    CHECK(h.update(mem_level::ok, 1 * s) == mem_level::critical);   // below since 1 s
    CHECK(h.update(mem_level::ok, 5 * s) == mem_level::critical);   // 4 s: not yet
    CHECK(h.update(mem_level::watch, 6 * s - 1) == mem_level::critical);
    CHECK(h.update(mem_level::watch, 6 * s) == mem_level::watch);   // 5 s below: step to the raw level
    CHECK(h.update(mem_level::tight, 6 * s + 1) == mem_level::tight);  // up at once
    CHECK(h.update(mem_level::ok, 7 * s) == mem_level::tight);
    CHECK(h.update(mem_level::tight, 8 * s) == mem_level::tight);    // back up: the dwell restarts
    CHECK(h.update(mem_level::ok, 9 * s) == mem_level::tight);
    CHECK(h.update(mem_level::ok, 13 * s) == mem_level::tight);
    CHECK(h.update(mem_level::ok, 14 * s) == mem_level::ok);
  }
  SUBCASE("a clock that jumps backwards never shortens the dwell") {
    level_hysteresis h{5s};
    const std::int64_t s = 1'000'000'000;
    h.update(mem_level::critical, 100 * s);
    CHECK(h.update(mem_level::ok, 101 * s) == mem_level::critical);
    CHECK(h.update(mem_level::ok, 3 * s) == mem_level::critical);
    CHECK(h.update(mem_level::ok, 106 * s) == mem_level::ok);
  }
}

TEST_CASE("the watcher applies hysteresis with its clock and reports the raw level") {
  auto host = std::make_shared<fake_host>();
  host->next = at_level(mem_level::critical);
  fake_clock clock;
  watcher_options o;
  o.step_down_dwell = 2s;
  watcher<fake_sampler, fake_clock> w{fake_sampler{host}, o, clock};
  w.poll_now();
  CHECK(w.read().level == mem_level::critical);
  host->set(roomy());
  clock.advance(1s);
  w.poll_now();
  CHECK(w.read().level == mem_level::critical);
  CHECK(w.read().raw_level == mem_level::ok);
  clock.advance(1s);
  w.poll_now();
  CHECK(w.read().level == mem_level::critical);  // 1 s below so far
  clock.advance(1s);
  w.poll_now();
  CHECK(w.read().level == mem_level::ok);
}

TEST_CASE("subscribers see each change once, in order, and may call back into the watcher") {
  auto host = roomy_host();
  watcher<fake_sampler, fake_clock> w{fake_sampler{host}};
  std::vector<std::pair<mem_level, mem_level>> seen;
  bool reentered = false;
  const auto id = w.subscribe([&](const level_change& c) {
    seen.emplace_back(c.from, c.to);
    CHECK(c.state.level == c.to);
    if (c.to == mem_level::tight && !reentered) {
      reentered = true;
      // A subscriber feeding a die from inside the callback must not deadlock.
      CHECK(w.set_die(0, 0, 16 * GiB, 0) == set_die_status::ok);
    }
  });
  w.poll_now();  // ok -> ok: no change
  CHECK(seen.empty());
  host->set(at_level(mem_level::tight));
  w.poll_now();  // ok -> tight, and the callback's set_die makes tight -> critical
  REQUIRE(seen.size() == 2);
  CHECK(seen[0] == std::make_pair(mem_level::ok, mem_level::tight));
  CHECK(seen[1] == std::make_pair(mem_level::tight, mem_level::critical));
  w.unsubscribe(id);
  CHECK(w.set_die(0, 16 * GiB, 16 * GiB, 0) == set_die_status::ok);
  CHECK(seen.size() == 2);
  CHECK(w.read().level == mem_level::tight);
}

TEST_CASE("a throwing subscriber does not wedge delivery") {
  auto host = roomy_host();
  watcher<fake_sampler, fake_clock> w{fake_sampler{host}};
  int calls = 0;
  w.subscribe([&](const level_change&) {
    ++calls;
    if (calls == 1) throw 1;
  });
  host->set(at_level(mem_level::watch));
  CHECK_THROWS(w.poll_now());
  host->set(at_level(mem_level::tight));
  w.poll_now();
  CHECK(calls == 2);
}

TEST_CASE("start takes one sample before the thread; start is idempotent; stop joins") {
  auto host = std::make_shared<stepping_host>();
  host->next = roomy();
  watcher<stepping_sampler, fake_clock> w{stepping_sampler{host}};
  CHECK_FALSE(w.running());
  CHECK(w.start());
  CHECK(w.running());
  CHECK(w.read().host_total_bytes == 64 * GiB);  // real numbers on the first read
  CHECK(w.start());                              // idempotent: no second thread, no second sample
  {
    std::unique_lock<std::mutex> lk(host->mu);
    host->cv.wait(lk, [&] { return host->waits.size() == 1; });
    CHECK(host->samples == 1);
  }
  w.stop();
  CHECK_FALSE(w.running());
  w.stop();  // idempotent
  CHECK(host->samples == 1);
}

TEST_CASE("the thread polls each interval, faster at WATCH or worse, and at once on an event") {
  auto host = std::make_shared<stepping_host>();
  host->next = roomy();
  host->script = {wake::timeout, wake::event, wake::timeout};
  watcher_options o;
  o.poll_interval = 250ms;
  o.pressure_poll_interval = 40ms;
  watcher<stepping_sampler, fake_clock> w{stepping_sampler{host}, o};
  REQUIRE(w.start());
  auto step = [&](std::size_t wait_no) {
    std::unique_lock<std::mutex> lk(host->mu);
    host->cv.wait(lk, [&] { return host->waits.size() >= wait_no; });
    host->released = wait_no;
    host->cv.notify_all();
    // The released wait is followed by exactly one sample before the next wait.
    host->cv.wait(lk, [&] { return host->waits.size() >= wait_no + 1; });
  };
  step(1);  // timeout -> sample 2
  {
    std::lock_guard<std::mutex> lk(host->mu);
    CHECK(host->waits[0] == 250ms);
    CHECK(host->samples == 2);
    host->next = at_level(mem_level::watch);
  }
  step(2);  // an event -> a fresh sample at once: sample 3, now at WATCH
  {
    std::lock_guard<std::mutex> lk(host->mu);
    CHECK(host->samples == 3);
    CHECK(host->waits[2] == 40ms);  // at WATCH the next wait is the pressure interval
  }
  CHECK(w.read().level == mem_level::watch);
  w.stop();
}

TEST_CASE("a watcher without event waits stops promptly (condition variable wait)") {
  auto host = roomy_host();
  watcher_options o;
  o.poll_interval = std::chrono::hours(1);  // stop must not wait for the interval
  watcher<fake_sampler> w{fake_sampler{host}, o};
  REQUIRE(w.start());
  const auto t0 = std::chrono::steady_clock::now();
  w.stop();
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::minutes(1));
  CHECK(host->samples == 1);
}

TEST_CASE("many set_die writers and readers: every snapshot is consistent, nothing is lost") {
  auto host = roomy_host();
  watcher<fake_sampler> w{fake_sampler{host}, polling_every(1ms)};
  REQUIRE(w.start());
  constexpr int writers = 4;
  constexpr int per_writer = 2000;
  std::atomic<bool> done{false};
  std::atomic<long> bad{0};
  std::thread reader([&] {
    std::uint64_t last_seq = 0;
    while (!done.load()) {
      const mem_state s = w.read();
      // Die i only ever holds free == used + i (written together), so a torn
      // merge would show up as a mismatch.
      for (int d = 0; d < s.n_dies; ++d) {
        const auto i = static_cast<std::size_t>(d);
        if (s.per_die_budget_bytes[i] != 0 && s.per_die_free_bytes[i] != s.per_die_used_bytes[i] + i) bad.fetch_add(1);
      }
      if (s.seq < last_seq) bad.fetch_add(1);
      last_seq = s.seq;
    }
  });
  std::vector<std::thread> ts;
  for (int t = 0; t < writers; ++t) {
    ts.emplace_back([&, t] {
      for (int k = 1; k <= per_writer; ++k) {
        const auto used = static_cast<std::uint64_t>(k) * MiB;
        const auto die = static_cast<std::uint64_t>(t);
        if (w.set_die(t, used + die, 80 * GiB, used) != set_die_status::ok) bad.fetch_add(1);
      }
    });
  }
  for (auto& t : ts) t.join();
  done.store(true);
  reader.join();
  w.stop();
  CHECK(bad.load() == 0);
  const mem_state s = w.read();
  CHECK(s.n_dies == writers);
  for (int t = 0; t < writers; ++t) {
    CHECK(s.per_die_used_bytes[static_cast<std::size_t>(t)] == static_cast<std::uint64_t>(per_writer) * MiB);
  }
  CHECK(s.seq >= static_cast<std::uint64_t>(writers * per_writer));
}
