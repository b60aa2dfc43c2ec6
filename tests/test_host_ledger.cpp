// pnmem/engine/host_ledger.hpp: memory admitted is not free until a sample has seen it.
#include "pnmem/engine/host_ledger.hpp"
#include "pnmem/engine/explain.hpp"
#include "pnmem/engine/shed_hook.hpp"
#include "pnmem/model_shape.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <limits>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "pnmem/fake_sampler.hpp"
#include "pnmem/watcher.hpp"
#include "splitmix64.hpp"
#include "test_support.hpp"
#include "watcher_fakes.hpp"

using namespace pnmem;
using pnmem::test::host_state;

namespace {

// A watcher whose snapshot the test sets (read() under a lock: threads read it).
struct fake_watcher {
  mutable std::mutex mu;
  bool is_running = true;
  mem_state state;
  bool running() const { return is_running; }
  mem_state read() const {
    std::lock_guard<std::mutex> lk(mu);
    return state;
  }
  void set(mem_state s, std::int64_t host_read_ns) {
    s.host_read_ns = host_read_ns;
    std::lock_guard<std::mutex> lk(mu);
    state = with_derived_level(s);
  }
};

// A host-path model (CPU fp32 KV): every token costs host bytes.
constexpr model_desc cpu_model{.kv = kv_format::fp32, .gpu_resident = false, .max_window = 0};

// 8 GiB box; avail chosen so the budget above the reserve is `budget`.
mem_state box_with_budget(std::uint64_t budget) {
  const std::uint64_t total = 8 * GiB;
  return host_state(total, box_reserve_bytes(total) + budget);
}

// A ledger in front of a watcher whose box has `budget` bytes above the reserve, read at t=1000.
struct ledger_rig {
  fake_watcher w;
  host_ledger ledger;
  explicit ledger_rig(std::uint64_t budget) { w.set(box_with_budget(budget), 1000); }
};

}  // namespace

TEST_CASE("a burst on one snapshot: each admission sees what those before it were promised") {
  const std::uint64_t one = host_cost_bytes(2048, kv_format::fp32);
  ledger_rig rig(one + one / 2);  // room for one 2048-token prefill, not two
  auto& [w, ledger] = rig;

  auto first = ledger.admit(w, cpu_model, 2048);
  CHECK(first.answer.status == admit_status::admitted);
  CHECK(first.pending_bytes == 0);
  REQUIRE(first.held);
  CHECK(first.held.bytes() == one);
  CHECK(ledger.size() == 1);

  // Without the ledger the second request is told the whole budget is its own.
  CHECK(admit(w, cpu_model, 2048).status == admit_status::admitted);

  auto second = ledger.admit(w, cpu_model, 2048);
  CHECK(second.pending_bytes == one);
  CHECK(second.answer.status != admit_status::admitted);
  CHECK(second.answer.reason == admit_reason::host_budget);
  CHECK(second.answer.detail.limit_bytes == one / 2);  // the budget left after the promise
  // Half a 2048-token prefill still holds the fixed buffers and some tokens: a cap.
  REQUIRE(second.answer.status == admit_status::capped);
  // A capped request reserves what may start, never what was asked.
  REQUIRE(second.held);
  CHECK(second.held.bytes() == host_cost_bytes(second.answer.fit_tokens, kv_format::fp32));
  CHECK(second.held.bytes() <= one / 2);
  CHECK(host_cost_bytes(second.answer.fit_tokens + 1, kv_format::fp32) > one / 2);
  CHECK(ledger.pending_bytes(w) == one + second.held.bytes());
}

TEST_CASE("a reservation dropped without settle gives its bytes back at once") {
  const std::uint64_t one = host_cost_bytes(2048, kv_format::fp32);
  ledger_rig rig(one + one / 2);
  auto& [w, ledger] = rig;
  {
    auto shed = ledger.admit(w, cpu_model, 2048);  // e.g. the gate shed it before prefill
    REQUIRE(shed.held);
    CHECK(ledger.size() == 1);
  }
  CHECK(ledger.size() == 0);
  auto again = ledger.admit(w, cpu_model, 2048);
  CHECK(again.answer.status == admit_status::admitted);
  CHECK(again.pending_bytes == 0);
  again.held.cancel();
  CHECK_FALSE(again.held);
  CHECK(ledger.size() == 0);
}

TEST_CASE("a settled reservation counts until a sample that began after the settle") {
  const std::uint64_t one = host_cost_bytes(1024, kv_format::fp32);
  ledger_rig rig(4 * one);
  auto& [w, ledger] = rig;

  auto a = ledger.admit(w, cpu_model, 1024);
  REQUIRE(a.held);
  a.held.settle_at(2000);  // allocated at t=2000
  CHECK(a.held.settled());
  CHECK_FALSE(a.held);     // the ledger holds it now, not the request
  CHECK(ledger.pending_bytes(w) == one);

  // A sample whose read began at 2000 or before may not contain the memory.
  w.set(box_with_budget(4 * one), 2000);
  CHECK(ledger.pending_bytes(w) == one);
  CHECK(ledger.size() == 1);

  // The first sample read after the settle has it in MemAvailable: forgotten.
  w.set(box_with_budget(3 * one), 2001);
  CHECK(ledger.pending_bytes(w) == 0);
  CHECK(ledger.size() == 0);

  // Dropping a settled reservation changes nothing.
  { host_ledger::reservation gone = std::move(a.held); }
  CHECK(ledger.size() == 0);
}

TEST_CASE("moved reservations release once, from where they ended up") {
  ledger_rig rig(8 * GiB);
  auto& [w, ledger] = rig;
  auto a = ledger.admit(w, cpu_model, 512);
  host_ledger::reservation r = std::move(a.held);
  CHECK_FALSE(a.held);  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  CHECK(r);
  auto b = ledger.admit(w, cpu_model, 512);
  CHECK(ledger.size() == 2);
  r = std::move(b.held);  // the first is cancelled by the assignment
  CHECK(ledger.size() == 1);
  r.cancel();
  CHECK(ledger.size() == 0);
}

TEST_CASE("GPU-resident requests and denials reserve nothing; no watcher fails open") {
  ledger_rig rig(1 * GiB);
  auto& [w, ledger] = rig;
  const model_desc gpu{.kv = kv_format::q4, .gpu_resident = true, .max_window = 8192};
  auto g = ledger.admit(w, gpu, 4096);
  CHECK(g.answer.status == admit_status::admitted);
  CHECK_FALSE(g.held);

  const std::uint64_t total = 8 * GiB;
  w.set(host_state(total, box_reserve_bytes(total)), 1000);  // at the reserve line: CRITICAL
  auto d = ledger.admit(w, cpu_model, 64);
  CHECK(d.answer.status == admit_status::denied);
  CHECK(d.answer.reason == admit_reason::host_reserve);
  CHECK_FALSE(d.held);

  w.is_running = false;
  auto f = ledger.admit(w, cpu_model, 100000);
  CHECK(f.answer.status == admit_status::fail_open);
  CHECK(f.answer.fit_tokens == 100000);
  CHECK_FALSE(f.held);
  CHECK(ledger.size() == 0);
}

TEST_CASE("promises past MemAvailable push the request inside the reserve, and say so") {
  const std::uint64_t one = host_cost_bytes(2048, kv_format::fp32);
  ledger_rig rig(one);  // exactly one fits
  auto& [w, ledger] = rig;
  auto a = ledger.admit(w, cpu_model, 2048);
  REQUIRE(a.answer.status == admit_status::admitted);
  auto b = ledger.admit(w, cpu_model, 16);
  CHECK(b.answer.status == admit_status::denied);
  CHECK(b.answer.reason == admit_reason::host_reserve);  // avail - pending is at the reserve line
  CHECK(b.pending_bytes == one);
}

TEST_CASE("many threads admitting on one stale snapshot never promise more than the budget") {
  fake_watcher w;
  const std::uint64_t budget = 3 * host_cost_bytes(4096, kv_format::fp32);
  w.set(box_with_budget(budget), 1000);
  host_ledger ledger;
  std::mutex mu;
  std::vector<host_ledger::reservation> held;
  std::atomic<int> admitted{0};
  std::atomic<int> denied{0};
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 50; ++i) {
          auto r = ledger.admit(w, cpu_model, 512 + 128 * ((t + i) % 16));
          if (r.held) {
            admitted.fetch_add(1);
            std::lock_guard<std::mutex> lk(mu);
            held.push_back(std::move(r.held));
          } else {
            denied.fetch_add(1);
          }
        }
      });
    }
  }
  std::uint64_t promised = 0;
  for (const auto& r : held) promised += r.bytes();
  CHECK(promised <= budget);
  CHECK(admitted.load() > 0);
  CHECK(denied.load() > 0);
  CHECK(ledger.pending_bytes(w) == promised);
  held.clear();
  CHECK(ledger.size() == 0);
}

namespace {

struct slow_sampler {
  pnmem::fake_clock clock;
  std::uint64_t avail = 6 * GiB;
  host_sample sample() {
    clock.ns->fetch_add(700);  // the read takes 700 ns
    host_sample h;
    h.total_bytes = 8 * GiB;
    h.avail_bytes = avail;
    return h;
  }
};

}  // namespace

TEST_CASE("the watcher stamps host_read_ns before reading, and set_die leaves it alone") {
  pnmem::fake_clock clock;
  clock.set(5'000);
  watcher<slow_sampler, pnmem::fake_clock> w{slow_sampler{clock}, {}, clock};
  CHECK(w.read().host_read_ns == 0);  // never read
  w.poll_now();
  mem_state s = w.read();
  CHECK(s.host_read_ns == 5'000);      // when the read began
  CHECK(s.sample_time_ns == 5'700);    // when it was published
  clock.ns->fetch_add(1'000);
  REQUIRE(w.set_die(0, 10 * GiB, 20 * GiB, 0) == set_die_status::ok);
  s = w.read();
  CHECK(s.sample_time_ns == 6'700);    // a die update publishes...
  CHECK(s.host_read_ns == 5'000);      // ...but the host numbers are still from that read

  // A reservation settled at 5'200 (during the read) may be missing from it: still counted.
  struct running_watcher {
    const watcher<slow_sampler, pnmem::fake_clock>& w;
    bool running() const { return true; }
    mem_state read() const { return w.read(); }
  } rw{w};
  host_ledger ledger;
  auto a = ledger.admit(rw, cpu_model, 1024);
  REQUIRE(a.held);
  a.held.settle_at(5'200);
  CHECK(ledger.pending_bytes(rw) == host_cost_bytes(1024, kv_format::fp32));
  w.poll_now();  // the next read begins at 6'700: it sees the memory
  CHECK(ledger.pending_bytes(rw) == 0);
}

TEST_CASE("admission: a sample that began before settle() does not release it, even published after") {
  const std::uint64_t one = host_cost_bytes(1024, kv_format::fp32);
  ledger_rig rig(4 * one);
  auto& [w, ledger] = rig;
  auto a = ledger.admit(w, cpu_model, 1024);
  REQUIRE(a.held);
  a.held.settle_at(2000);

  // Read began at 1500 (before the settle), published at 2500 (after it): it may not
  // contain the allocation, so the next admission still counts it.
  mem_state s = box_with_budget(4 * one);
  s.sample_time_ns = 2500;
  w.set(s, 1500);
  auto b = ledger.admit(w, cpu_model, 16);
  CHECK(b.pending_bytes == one);
  CHECK(b.answer.detail.limit_bytes == 3 * one);
  CHECK(ledger.size() == 2);
  b.held.cancel();

  // Read began at the settle's own instant: still not proof the memory was in it.
  s.sample_time_ns = 3000;
  w.set(s, 2000);
  CHECK(ledger.admit(w, cpu_model, 16).pending_bytes == one);

  // The first read that began after the settle has it: forgotten, the budget is the sample's.
  s = box_with_budget(3 * one);
  s.sample_time_ns = 3500;
  w.set(s, 2001);
  auto c = ledger.admit(w, cpu_model, 16);
  CHECK(c.pending_bytes == 0);
  CHECK(c.answer.detail.limit_bytes == 3 * one);
  c.held.cancel();
  CHECK(ledger.size() == 0);
}

TEST_CASE("admission: pending bytes come off MemAvailable, not off the host total") {
  const std::uint64_t one = host_cost_bytes(1024, kv_format::fp32);
  ledger_rig rig(2 * one);
  auto& [w, ledger] = rig;
  auto a = ledger.admit(w, cpu_model, 1024);
  REQUIRE(a.answer.status == admit_status::admitted);
  // The second sees the first's promise as memory already gone: exactly one more fits.
  auto b = ledger.admit(w, cpu_model, 1024);
  CHECK(b.pending_bytes == one);
  CHECK(b.answer.status == admit_status::admitted);
  CHECK(b.answer.detail.limit_bytes == one);
  auto c = ledger.admit(w, cpu_model, 1024);
  CHECK(c.pending_bytes == 2 * one);
  CHECK(c.answer.status == admit_status::denied);
  CHECK(c.answer.reason == admit_reason::host_reserve);
  CHECK(c.answer.detail.limit_bytes == box_reserve_bytes(8 * GiB));
}

// --- any model, and host bytes besides requests -------------------------------------------------------------

TEST_CASE("admit reserves the model's host cost, not the seed's") {
  const model_cost llama = from_shape(uniform_shape(32, 8, 128, 32, 4096));
  const model_desc m{.kv = kv_format::f16, .gpu_resident = false, .max_window = 0, .cost = llama};
  ledger_rig rig(8 * GiB);
  auto r = rig.ledger.admit(rig.w, m, 3000);
  REQUIRE(r.answer.status == admit_status::admitted);
  CHECK(r.held.bytes() == host_cost_bytes(llama, 3000, kv_format::f16));
  CHECK(r.held.bytes() != host_cost_bytes(3000, kv_format::f16));
  // A preallocating engine's requests reserve nothing: their memory is already counted.
  const model_desc pre{.kv = kv_format::f16, .cost = preallocated_model_cost};
  auto p = rig.ledger.admit(rig.w, pre, 3000);
  CHECK(p.answer.status == admit_status::admitted);
  CHECK_FALSE(p.held);
}

TEST_CASE("reserve_bytes: admitted bytes are held, a CAP says what fits and holds nothing, no watcher fails open") {
  ledger_rig rig(500 * MiB);
  auto& [w, ledger] = rig;
  auto a = ledger.reserve_bytes(w, 188 * MiB);
  REQUIRE(a.answer.status == admit_status::admitted);
  CHECK(a.held.bytes() == 188 * MiB);
  CHECK(a.answer.detail.limit_bytes == 500 * MiB);
  auto b = ledger.reserve_bytes(w, 188 * MiB);
  REQUIRE(b.answer.status == admit_status::admitted);
  CHECK(b.pending_bytes == 188 * MiB);
  CHECK(b.answer.detail.limit_bytes == 500 * MiB - 188 * MiB);
  // The third entry would be promised twice: it is capped to what is left, and nothing is held.
  auto c = ledger.reserve_bytes(w, 188 * MiB);
  CHECK(c.answer.status == admit_status::capped);
  CHECK(c.answer.reason == admit_reason::host_budget);
  CHECK(c.answer.detail.limit_bytes == 500 * MiB - 2 * 188 * MiB);
  CHECK_FALSE(c.held);
  CHECK(ledger.pending_bytes(w) == 2 * 188 * MiB);
  a.held.cancel();
  CHECK(ledger.reserve_bytes(w, 188 * MiB).answer.status == admit_status::admitted);
  w.is_running = false;
  auto off = ledger.reserve_bytes(w, 1 * GiB);
  CHECK(off.answer.status == admit_status::fail_open);
  CHECK_FALSE(off.held);
}

namespace {
std::atomic<std::int64_t> ledger_now{0};
std::int64_t ledger_clock() { return ledger_now.load(); }
}  // namespace

TEST_CASE("reserve_bytes: an unsettled reservation with a time to live stops counting when it expires") {
  ledger_now = 1'000'000;
  fake_watcher w;
  w.set(box_with_budget(1 * GiB), 1000);
  host_ledger ledger(&ledger_clock);
  auto r = ledger.reserve_bytes(w, 400 * MiB, {.ttl = std::chrono::milliseconds(50)});
  REQUIRE(r.held);
  auto forever = ledger.reserve_bytes(w, 100 * MiB);
  REQUIRE(forever.held);
  ledger_now += 49'999'999;
  CHECK(ledger.pending_bytes(w) == 500 * MiB);
  ledger_now += 1;  // 50 ms after: expired
  CHECK(ledger.pending_bytes(w) == 100 * MiB);
  CHECK(ledger.size() == 1);
  // Settling or dropping the expired handle later changes nothing.
  r.held.settle();
  CHECK(ledger.pending_bytes(w) == 100 * MiB);
  // A settled reservation does not expire: it waits for a sample.
  auto s = ledger.reserve_bytes(w, 200 * MiB, {.ttl = std::chrono::milliseconds(1)});
  s.held.settle();
  ledger_now += 1'000'000'000;
  CHECK(ledger.pending_bytes(w) == 300 * MiB);
  w.set(box_with_budget(1 * GiB), ledger_now.load() + 1);
  CHECK(ledger.pending_bytes(w) == 100 * MiB);
}

TEST_CASE("reserve_bytes: a time to live past the clock's end lives for ever, never wrapping into the past") {
  ledger_now = 5'000'000'000;  // 5 s into the clock: now + the longest ttl would pass INT64_MAX
  fake_watcher w;
  w.set(box_with_budget(1 * GiB), 1000);
  host_ledger ledger(&ledger_clock);
  auto longest = ledger.reserve_bytes(w, 100 * MiB, {.ttl = std::chrono::nanoseconds::max()});
  auto hours = ledger.reserve_bytes(w, 50 * MiB, {.ttl = std::chrono::hours(24 * 365 * 200)});  // ~2^62 ns
  auto almost = ledger.reserve_bytes(w, 25 * MiB,
                                     {.ttl = std::chrono::nanoseconds(std::numeric_limits<std::int64_t>::max() - 4'000'000'000)});
  REQUIRE(longest.held);
  REQUIRE(hours.held);
  REQUIRE(almost.held);
  CHECK(ledger.pending_bytes(w) == 175 * MiB);
  ledger_now += 1'000'000'000'000;  // 1000 s later: none has expired
  CHECK(ledger.pending_bytes(w) == 175 * MiB);
  CHECK(ledger.size() == 3);  // (a die reservation's expiry is the same host_ledger::expiry_after)
}

TEST_CASE("many threads reserving cache bytes on one stale snapshot never promise more than the budget") {
  fake_watcher w;
  const std::uint64_t budget = 1 * GiB;
  w.set(box_with_budget(budget), 1000);
  host_ledger ledger;
  std::mutex mu;
  std::vector<host_ledger::reservation> held;
  std::atomic<int> admitted{0};
  std::atomic<int> refused{0};
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 40; ++i) {
          const std::uint64_t bytes = (1 + static_cast<std::uint64_t>((t * 7 + i) % 9)) * 16 * MiB;
          auto r = t % 2 == 0 ? ledger.reserve_bytes(w, bytes) : ledger.admit(w, cpu_model, 64 * (1 + i % 8));
          if (r.held) {
            admitted.fetch_add(1);
            if (i % 5 == 0) continue;  // dropped: cancelled at once
            std::lock_guard<std::mutex> lk(mu);
            held.push_back(std::move(r.held));
          } else {
            refused.fetch_add(1);
          }
        }
      });
    }
  }
  std::uint64_t promised = 0;
  for (const auto& r : held) promised += r.bytes();
  CHECK(promised <= budget);
  CHECK(admitted.load() > 0);
  CHECK(refused.load() > 0);
  CHECK(ledger.pending_bytes(w) == promised);
}

namespace {

// The ledger's rules written out plainly, one entry per reservation and a scan over all of them
// (the ledger's first form): what the running sums, the settled queue and the expiry heap must agree
// with whatever the order of the calls.
struct reference_ledger {
  struct entry {
    int key;
    std::uint64_t bytes;
    bool settled;
    std::int64_t settled_ns;
    std::int64_t expires_ns;  // max: never
  };
  std::vector<entry> entries;
  std::uint64_t pending(std::int64_t host_read_ns, std::int64_t now) {
    std::erase_if(entries, [&](const entry& e) { return e.settled ? e.settled_ns < host_read_ns : e.expires_ns <= now; });
    std::uint64_t sum = 0;
    for (const entry& e : entries) sum += e.bytes;
    return sum;
  }
  entry* find(int key) {
    for (entry& e : entries) {
      if (e.key == key) return &e;
    }
    return nullptr;
  }
};

}  // namespace

TEST_CASE("thousands of reservations settled, cancelled and expiring in any order: the sums are the plain rule's") {
  // Random calls against reference_ledger: settles stamped out of order (settle_at), handles kept past
  // their expiry and then settled or cancelled (their slots taken again meanwhile), samples that
  // release part of the settled queue, and time-to-live entries cancelled in bulk (the heap rebuilt).
  ledger_now = 1'000'000;
  fake_watcher w;
  std::int64_t read_ns = 1000;
  w.set(box_with_budget(64 * GiB), read_ns);
  host_ledger ledger(&ledger_clock);
  reference_ledger ref;
  std::vector<std::pair<int, host_ledger::reservation>> held;
  pnmem::test::splitmix64 rng{2312};
  int next_key = 0;
  for (int step = 0; step < 20000; ++step) {
    const std::uint64_t op = rng.below(100);
    if (op < 45 || held.empty()) {
      const std::uint64_t bytes = rng.between(1, 1 << 20);
      const bool ttl = rng.below(2) == 0;
      host_ledger::reserve_options o;
      if (ttl) o.ttl = std::chrono::nanoseconds(static_cast<std::int64_t>(rng.between(1, 5000)));
      auto r = ledger.reserve_bytes(w, bytes, o);
      REQUIRE(r.held);
      const std::int64_t expires = ttl ? ledger_now.load() + o.ttl.count() : std::numeric_limits<std::int64_t>::max();
      ref.entries.push_back({next_key, bytes, false, 0, expires});
      held.emplace_back(next_key++, std::move(r.held));
    } else if (op < 85) {
      const std::size_t i = rng.below(held.size());
      reference_ledger::entry* e = ref.find(held[i].first);
      if (rng.below(2) == 0) {
        const std::int64_t at = ledger_now.load() - static_cast<std::int64_t>(rng.below(3000));  // out of order
        held[i].second.settle_at(at);
        if (e != nullptr && !e->settled) {
          e->settled = true;
          e->settled_ns = at;
        }
      } else {
        held[i].second.cancel();
        if (e != nullptr && !e->settled) std::erase_if(ref.entries, [&](const auto& x) { return x.key == held[i].first; });
      }
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (op < 95) {
      ledger_now += static_cast<std::int64_t>(rng.below(2000));
    } else {
      read_ns = ledger_now.load() - static_cast<std::int64_t>(rng.below(2000));
      read_ns = std::max(read_ns, w.read().host_read_ns);  // samples begin in order
      w.set(box_with_budget(64 * GiB), read_ns);
    }
    const std::uint64_t want = ref.pending(read_ns, ledger_now.load());
    REQUIRE(ledger.pending_bytes(w) == want);
    REQUIRE(ledger.size() == ref.entries.size());
  }
}

namespace {
// A pnmem::watcher seen through what the ledger uses: running(), and refresh_live (the ledger's own
// live copy, refreshed in place) or, for the second, read() only (a copy each time).
struct refreshing_watcher {
  const watcher<fake_sampler>& w;
  bool running() const { return true; }
  bool refresh_live(mem_state& live, live_version& v) const noexcept { return w.refresh_live(live, v); }
  mem_state read() const { return w.read(); }
};
struct copying_watcher {
  const watcher<fake_sampler>& w;
  bool running() const { return true; }
  mem_state read() const { return w.read(); }
};
}  // namespace

TEST_CASE("on a watcher read in place, the promised bytes come off each sample once, never again") {
  const std::uint64_t one = host_cost_bytes(1024, kv_format::fp32);
  auto host = std::make_shared<fake_host>();
  const std::uint64_t total = 8 * GiB;
  host->next.total_bytes = total;
  host->next.avail_bytes = box_reserve_bytes(total) + 4 * one;
  watcher<fake_sampler> w{fake_sampler{host}};
  w.poll_now();
  const refreshing_watcher live{w};
  const copying_watcher copied{w};
  host_ledger ledger;

  auto a = ledger.admit(live, cpu_model, 1024);
  REQUIRE(a.held);
  for (int i = 0; i < 3; ++i) {  // no publication between: the kept copy is adjusted, not re-adjusted
    auto b = ledger.admit(live, cpu_model, 16);
    CHECK(b.pending_bytes == one);
    CHECK(b.answer.detail.limit_bytes == 3 * one);
    b.held.cancel();
  }
  // The same through a copy of each snapshot: the same answer.
  auto c = ledger.admit(copied, cpu_model, 16);
  CHECK(c.answer.detail.limit_bytes == 3 * one);
  c.held.cancel();

  // A new sample with less available: the promise comes off the new MemAvailable.
  host->next.avail_bytes = box_reserve_bytes(total) + 2 * one;
  w.poll_now();
  auto d = ledger.admit(live, cpu_model, 16);
  CHECK(d.pending_bytes == one);
  CHECK(d.answer.detail.limit_bytes == one);
  d.held.cancel();
  // The watcher's own snapshot is untouched by the ledger's arithmetic.
  CHECK(w.read().host_avail_bytes == box_reserve_bytes(total) + 2 * one);
  CHECK(admit_snapshot(w.read(), cpu_model, 16, admit_options{}).detail.limit_bytes == 2 * one);

  // Settled, then seen by the next sample (begun after the settle): the budget is the sample's.
  a.held.settle();
  host->next.avail_bytes = box_reserve_bytes(total) + one;
  w.poll_now();
  auto e = ledger.admit(live, cpu_model, 16);
  CHECK(e.pending_bytes == 0);
  CHECK(e.answer.detail.limit_bytes == one);
  e.held.cancel();
  CHECK(ledger.size() == 0);
}

TEST_CASE("time-to-live entries of reservations settled or cancelled long before they expire do not pile up") {
  // A prompt cache reserving with a long time to live and spending at once: the heap drops the
  // finished entries when they outnumber the live ones; the live ones still expire on time.
  ledger_now = 1'000'000;
  fake_watcher w;
  w.set(box_with_budget(64 * GiB), 1000);
  host_ledger ledger(&ledger_clock);
  const host_ledger::reserve_options hour{.ttl = std::chrono::hours(1)};
  const host_ledger::reserve_options minute{.ttl = std::chrono::minutes(1)};
  std::vector<host_ledger::reservation> live;
  for (int i = 0; i < 5000; ++i) {
    auto r = ledger.reserve_bytes(w, 1 * MiB, i % 50 == 0 ? minute : hour);
    REQUIRE(r.held);
    if (i % 50 == 0) {
      live.push_back(std::move(r.held));  // 100 kept, each expiring in a minute
    } else if (i % 2 == 0) {
      r.held.cancel();
    } else {
      r.held.settle_at(ledger_now.load());  // seen by the next sample
      w.set(box_with_budget(64 * GiB), ledger_now.load() + 1);
    }
  }
  CHECK(ledger.pending_bytes(w) == 100 * MiB);  // the last settled one forgotten here
  CHECK(ledger.size() == 100);
  ledger_now += 59'999'999'999;
  CHECK(ledger.pending_bytes(w) == 100 * MiB);
  ledger_now += 1;  // a minute after: every kept one has expired
  CHECK(ledger.pending_bytes(w) == 0);
  CHECK(ledger.size() == 0);
}

namespace {
std::int64_t credit_clock_ns = 0;
std::int64_t credit_clock() { return credit_clock_ns; }
}  // namespace

TEST_CASE("credit_freed: freed bytes count at once, until a sample that began after the credit") {
  // The seed's 8 GiB box at TIGHT: 1.25 GiB available, reserve 1288490188.
  fake_watcher w;
  const std::uint64_t total = 8 * GiB;
  const std::uint64_t tight_avail = GiB + GiB / 4;
  w.set(host_state(total, tight_avail), 1000);
  credit_clock_ns = 1500;
  host_ledger ledger(&credit_clock);

  const host_room before = ledger.room(w, default_policy);
  REQUIRE(before.sampled);
  CHECK(before.level == mem_level::tight);
  const std::uint64_t to_watch = before.free_bytes(mem_level::watch);
  CHECK(to_watch == host_floor_bytes(mem_level::watch, box_reserve_bytes(total)) - tight_avail);
  CHECK(before.free_bytes(mem_level::ok) > to_watch);

  // The engine frees exactly what it was told and credits it: WATCH now, with no sample.
  ledger.credit_freed(to_watch);
  CHECK(ledger.credited_bytes(w) == to_watch);
  const host_room after = ledger.room(w, default_policy);
  CHECK(after.level == mem_level::watch);
  CHECK(after.free_bytes(mem_level::watch) == 0);
  CHECK(after.take_bytes(mem_level::watch) == 0);  // exactly on the floor
  CHECK(after.avail_bytes == tight_avail + to_watch);
  // Admissions count it too: a byte check for what was freed fits above the reserve now.
  CHECK(ledger.check_bytes(w, to_watch, default_policy).answer.detail.limit_bytes ==
        tight_avail + to_watch - box_reserve_bytes(total));

  // A sample that began before the credit may not hold the freed memory: the credit stays.
  w.set(host_state(total, tight_avail), 1500);
  CHECK(ledger.credited_bytes(w) == to_watch);
  CHECK(ledger.room(w, default_policy).level == mem_level::watch);
  // The first sample read after it is the authority: the memory came back (WATCH) ...
  w.set(host_state(total, tight_avail + to_watch), 1501);
  CHECK(ledger.credited_bytes(w) == 0);
  CHECK(ledger.room(w, default_policy).level == mem_level::watch);
  CHECK(ledger.room(w, default_policy).avail_bytes == tight_avail + to_watch);

  // ... or it did not (freed to a malloc arena, not the kernel): back to what the sample says.
  credit_clock_ns = 2000;
  ledger.credit_freed(to_watch);
  w.set(host_state(total, tight_avail), 2001);
  CHECK(ledger.room(w, default_policy).level == mem_level::tight);

  // Credits and promises net out; a credit never lifts MemAvailable above the total.
  credit_clock_ns = 3000;
  auto held = ledger.reserve_bytes(w, 32 * MiB);  // fits in the ~51 MiB above the reserve: granted
  REQUIRE(held.held);
  ledger.credit_freed(16 * MiB);
  const host_room net = ledger.room(w, default_policy);
  CHECK(net.pending_bytes == 32 * MiB);
  CHECK(net.credited_bytes == 16 * MiB);
  CHECK(net.avail_bytes == tight_avail - 32 * MiB + 16 * MiB);  // both counted, each once
  ledger.credit_freed(16 * GiB);
  CHECK(ledger.room(w, default_policy).avail_bytes == total);
  CHECK(ledger.room(w, default_policy).level == mem_level::ok);
  // No watcher running: no room known.
  w.is_running = false;
  CHECK_FALSE(ledger.room(w, default_policy).sampled);
}

// --- make_room: a cache that keeps its newest entries ----------------------------------------------

TEST_CASE("make_room: an insert that fits at WATCH is reserved at once; one that does not frees the oldest first") {
  // 8 GiB, reserve r = 1288490188, WATCH floor r + r/4. MemAvailable 64 MiB above the WATCH floor.
  fake_watcher w;
  const std::uint64_t total = 8 * GiB;
  const std::uint64_t r = box_reserve_bytes(total);
  const std::uint64_t watch_floor = host_floor_bytes(mem_level::watch, r);
  w.set(host_state(total, watch_floor + 64 * MiB), 1000);
  host_ledger ledger;
  std::vector<std::uint64_t> asked;
  std::uint64_t give = 0;  // what the cache frees when asked
  auto drop_oldest = [&](std::uint64_t want) {
    asked.push_back(want);
    return give;
  };

  // 48 MiB fits above WATCH's floor: reserved, nothing asked.
  auto a = ledger.make_room(w, 48 * MiB, drop_oldest);
  CHECK(a.admitted.answer.status == admit_status::admitted);
  CHECK(a.admitted.answer.kind == answer_kind::cache_insert);
  CHECK(a.admitted.answer.detail.limit_bytes == 64 * MiB);
  CHECK(a.admitted.held.bytes() == 48 * MiB);
  CHECK(a.asked_bytes == 0);
  CHECK(asked.empty());

  // 48 MiB more: 16 MiB are left above the floor, so 32 MiB of the oldest entries are asked for, exactly.
  give = 32 * MiB;
  auto b = ledger.make_room(w, 48 * MiB, drop_oldest);
  REQUIRE(asked.size() == 1);
  CHECK(asked[0] == 32 * MiB);
  CHECK(b.asked_bytes == 32 * MiB);
  CHECK(b.freed_bytes == 32 * MiB);
  CHECK(b.admitted.answer.status == admit_status::admitted);
  CHECK(b.admitted.held.bytes() == 48 * MiB);
  CHECK(ledger.credited_bytes(w) == 32 * MiB);  // credited by make_room, once
  const host_room after = ledger.room(w, default_policy);
  CHECK(after.level == mem_level::watch);
  CHECK(after.take_bytes(mem_level::watch) == 0);  // exactly on the floor: nothing more was dropped

  // A cache that cannot free the shortfall frees nothing: refused, nothing reserved, the cache intact.
  give = 0;
  auto c = ledger.make_room(w, 8 * MiB, drop_oldest);
  CHECK(asked.back() == 8 * MiB);
  CHECK(c.freed_bytes == 0);
  CHECK(c.admitted.answer.status == admit_status::capped);
  CHECK(c.admitted.answer.reason == admit_reason::host_budget);
  CHECK(c.admitted.answer.detail.limit_bytes == 0);
  CHECK_FALSE(c.admitted.held);
  CHECK(explain(c.admitted.answer).find("capped (host_budget): the insert, 8.00 MiB (8388608 B), does not fit with "
                                        "the host at WATCH or better") == 0);

  // One that frees less than asked: the insert is asked again on what it freed, and refused with the limit.
  give = 3 * MiB;
  auto d = ledger.make_room(w, 8 * MiB, drop_oldest);
  CHECK(d.freed_bytes == 3 * MiB);
  CHECK(d.admitted.answer.status == admit_status::capped);
  CHECK(d.admitted.answer.detail.limit_bytes == 3 * MiB);
  CHECK_FALSE(d.admitted.held);
}

TEST_CASE("room: pending_bytes is what is promised and not yet sampled, taken off the available bytes (issue 42 item 4)") {
  fake_watcher w;
  const std::uint64_t total = 8 * GiB;
  ledger_now = 1'000'000;
  w.set(host_state(total, 4 * GiB), ledger_now);
  host_ledger ledger(&ledger_clock);
  const host_room before = ledger.room(w, default_policy);
  CHECK(before.pending_bytes == 0);
  auto r = ledger.reserve_bytes(w, 100 * MiB);
  REQUIRE(r.held);
  const host_room promised = ledger.room(w, default_policy);
  CHECK(promised.pending_bytes == 100 * MiB);
  CHECK(promised.avail_bytes == before.avail_bytes - 100 * MiB);
  r.held.settle();
  ledger_now += 10;
  CHECK(ledger.room(w, default_policy).pending_bytes == 100 * MiB);  // settled: until a sample after it
  w.set(host_state(total, 4 * GiB - 100 * MiB), ledger_now + 1);
  CHECK(ledger.room(w, default_policy).pending_bytes == 0);
}

TEST_CASE("make_room: bytes freed while a sample was taken are not counted twice, in its numbers and as a credit") {
  // The kernel has the dropped entries back as soon as the cache frees them; a sample that begins then sees
  // them. The credit must stop counting with that sample, not only with one that began after make_room
  // credited them (found by c_api_cache under ASan: a cache that held three entries with room for 2.5).
  fake_watcher w;
  const std::uint64_t total = 8 * GiB;
  const std::uint64_t watch_floor = host_floor_bytes(mem_level::watch, box_reserve_bytes(total));
  ledger_now = 1'000'000;
  w.set(host_state(total, watch_floor + 16 * MiB), ledger_now);
  host_ledger ledger(&ledger_clock);
  auto free_while_sampled = [&](std::uint64_t want) {
    ledger_now += 10;
    w.set(host_state(total, watch_floor + 16 * MiB + want), ledger_now);  // a sample begins mid-free: it sees it
    ledger_now += 10;
    return want;
  };
  auto made = ledger.make_room(w, 48 * MiB, free_while_sampled);
  REQUIRE(made.freed_bytes == 32 * MiB);
  CHECK(made.admitted.answer.status == admit_status::admitted);
  CHECK(ledger.credited_bytes(w) == 0);  // the sample holds the freed bytes already
  const host_room room = ledger.room(w, default_policy);
  CHECK(room.take_bytes(mem_level::watch) == 0);  // 48 MiB taken of the 16 + 32 there are: nothing more
}

TEST_CASE("make_room: below WATCH the whole way back is asked for; a throwing cache credits nothing; no watcher") {
  fake_watcher w;
  const std::uint64_t total = 8 * GiB;
  const std::uint64_t r = box_reserve_bytes(total);
  const std::uint64_t watch_floor = host_floor_bytes(mem_level::watch, r);
  // TIGHT: 100 MiB below WATCH's floor. A 10 MiB insert needs 110 MiB dropped first.
  w.set(host_state(total, watch_floor - 100 * MiB), 1000);
  host_ledger ledger;
  auto e = ledger.make_room(w, 10 * MiB, [](std::uint64_t want) { return want; });
  CHECK(e.asked_bytes == 110 * MiB);
  CHECK(e.admitted.answer.status == admit_status::admitted);
  CHECK(ledger.room(w, default_policy).level == mem_level::watch);
  e.admitted.held.cancel();

  // CRITICAL, inside the reserve: the shortfall is counted from there, and freeing it admits.
  host_ledger at_critical;
  w.set(host_state(total, r - 5 * MiB), 2000);
  CHECK(at_critical.make_room(w, 1 * MiB, [](std::uint64_t) { return std::uint64_t{0}; }).admitted.answer.reason ==
        admit_reason::host_reserve);
  auto f = at_critical.make_room(w, 1 * MiB, [](std::uint64_t want) { return want; });
  CHECK(f.asked_bytes == watch_floor - (r - 5 * MiB) + 1 * MiB);
  CHECK(f.admitted.answer.status == admit_status::admitted);

#if PNMEM_HAS_EXCEPTIONS
  // What the cache throws reaches the caller; nothing is credited or reserved.
  host_ledger throwing;
  w.set(host_state(total, watch_floor - 100 * MiB), 3000);
  CHECK_THROWS_AS(throwing.make_room(w, 10 * MiB, [](std::uint64_t) -> std::uint64_t { throw std::runtime_error("x"); }),
                  std::runtime_error);
  CHECK(throwing.credited_bytes(w) == 0);
  CHECK(throwing.size() == 0);
#endif

  // No watcher: fail open, the cache is not asked.
  w.is_running = false;
  bool called = false;
  auto g = throwing.make_room(w, 10 * MiB, [&](std::uint64_t) {
    called = true;
    return std::uint64_t{0};
  });
  CHECK(g.admitted.answer.status == admit_status::fail_open);
  CHECK_FALSE(called);
  CHECK_FALSE(g.admitted.held);
}

TEST_CASE("shed_on_every_sample: each sample below WATCH asks for what to free, credits it; ended, never again") {
  auto host = std::make_shared<fake_host>();
  const std::uint64_t total = 8 * GiB;
  const std::uint64_t floor = host_floor_bytes(mem_level::watch, box_reserve_bytes(total));
  host_sample h;
  h.total_bytes = total;
  h.avail_bytes = floor + 64 * MiB;
  host->set(h);
  watcher_options o;
  o.poll_interval = o.pressure_poll_interval = std::chrono::hours(1);  // samples only when the test polls
  o.step_down_dwell = std::chrono::milliseconds(0);
  o.policy = default_policy;
  watcher<fake_sampler> w{fake_sampler{host}, o};
  w.start();
  host_ledger ledger;
  std::vector<std::uint64_t> asked;
  std::uint64_t give = 0;
  {
    scoped_subscription shed = shed_on_every_sample(w, ledger, [&](std::uint64_t want) {
      asked.push_back(want);
      return give;
    }, default_policy);
    w.poll_now();
    CHECK(asked.empty());  // at WATCH or better: nothing to shed
    h.avail_bytes = floor - 10 * MiB;
    host->set(h);
    give = 4 * MiB;
    w.poll_now();
    REQUIRE(asked.size() == 1);
    CHECK(asked[0] == 10 * MiB);
    CHECK(ledger.credited_bytes(w) == 4 * MiB);  // credited at once
    CHECK(ledger.room(w, default_policy).free_bytes(mem_level::watch) == 6 * MiB);
    // The next sample, the same level (no level change) and the kernel's numbers unmoved: asked again.
    w.poll_now();
    REQUIRE(asked.size() == 2);
    CHECK(asked[1] == 10 * MiB);
    h.avail_bytes = floor + 1;
    host->set(h);
    w.poll_now();
    CHECK(asked.size() == 2);
    h.avail_bytes = floor - 1;
    host->set(h);
  }
  w.poll_now();  // below WATCH again, but the hook has ended
  CHECK(asked.size() == 2);
  w.stop();
}

TEST_CASE("admit_host_load: the largest context that fits at WATCH, down to the least; reserved at that context") {
  const std::uint64_t total = 8 * GiB;
  const std::uint64_t r = box_reserve_bytes(total);
  const std::uint64_t floor = host_floor_bytes(mem_level::watch, r);
  // 1 GiB of weights, 256 KiB of KV per token; 8192 tokens asked (2 GiB of KV), 1024 the least worth it.
  const host_load_spec l{.fixed_bytes = 1 * GiB, .bytes_per_token = 256 * 1024, .wanted_tokens = 8192, .least_tokens = 1024};
  const std::uint64_t whole = 3 * GiB;
  CHECK(host_load_bytes(l, 8192) == whole);
  struct row {
    std::uint64_t above_floor;  // MemAvailable - WATCH floor
    verdict v;
    admit_reason why;
    int fit;
  };
  const row rows[] = {
      {whole, verdict::admit, admit_reason::fits, 8192},                     // exactly fits
      {whole - 1, verdict::cap, admit_reason::host_budget, 8191},            // one token less
      {1 * GiB + 1024 * 256 * 1024, verdict::cap, admit_reason::host_budget, 1024},  // the least, exactly
      {1 * GiB + 1024 * 256 * 1024 - 1, verdict::reject, admit_reason::host_budget, 0},
      {1 * GiB - 1, verdict::reject, admit_reason::host_budget, 0},          // not even the weights
  };
  for (const row& x : rows) {
    CAPTURE(x.above_floor);
    const admit_result a = admit_host_load(l, host_state(total, floor + x.above_floor), default_policy);
    CHECK(a.verdict == x.v);
    CHECK(a.reason == x.why);
    CHECK(a.fit_tokens == x.fit);
    CHECK(a.need_bytes == whole);
    CHECK(a.limit_bytes == x.above_floor);
  }
  // Inside the reserve; not sampled (fail open); counts that make no sense.
  CHECK(admit_host_load(l, host_state(total, r), default_policy).reason == admit_reason::host_reserve);
  CHECK(admit_host_load(l, mem_state{}, default_policy).fit_tokens == 8192);
  CHECK(admit_host_load(host_load_spec{.fixed_bytes = 1, .bytes_per_token = 1, .wanted_tokens = 10, .least_tokens = 11},
                        host_state(total, total), default_policy).reason == admit_reason::bad_request);
  CHECK(admit_host_load(host_load_spec{.fixed_bytes = 1, .bytes_per_token = 1, .wanted_tokens = -1, .least_tokens = 0},
                        host_state(total, total), default_policy).reason == admit_reason::bad_request);
  static_assert(admit_host_load(host_load_spec{.fixed_bytes = 1, .bytes_per_token = 1, .wanted_tokens = 10},
                                host_state(8 * GiB, 8 * GiB)).verdict == verdict::admit);

  // Through the ledger: what is promised counts, and a capped load reserves its bytes at the context given.
  fake_watcher w;
  w.set(host_state(total, floor + whole), 1000);
  host_ledger ledger;
  auto cache = ledger.reserve_bytes(w, 1 * GiB);  // 1 GiB promised to something else first
  REQUIRE(cache.answer.status == admit_status::admitted);
  auto load = ledger.reserve_host_load(w, l);
  CHECK(load.answer.status == admit_status::capped);
  CHECK(load.answer.kind == answer_kind::host_load);
  CHECK(load.answer.fit_tokens == 8192 / 2);  // 2 GiB left: 1 GiB of weights and 1 GiB of KV
  CHECK(load.held.bytes() == host_load_bytes(l, 4096));
  CHECK(explain(load.answer).find("capped (host_budget): the load (fixed bytes and KV at the context asked) needs "
                                  "3.00 GiB (3221225472 B); start it with 4096 tokens of context") == 0);
  CHECK(ledger.check_host_load(w, l, default_policy).answer.status == admit_status::denied);  // nothing left
  load.held.cancel();
  cache.held.cancel();
  CHECK(ledger.check_host_load(w, l, default_policy).answer.status == admit_status::admitted);
}

TEST_CASE("admit_cache_insert and insert_shortfall_bytes: the WATCH floor, in every band") {
  const std::uint64_t total = 8 * GiB;
  const std::uint64_t r = box_reserve_bytes(total);
  const std::uint64_t floor = host_floor_bytes(mem_level::watch, r);
  struct row {
    std::uint64_t avail, bytes;
    verdict v;
    admit_reason why;
    std::uint64_t limit, shortfall;
  };
  const row rows[] = {
      {2 * r, 1 * MiB, verdict::admit, admit_reason::fits, 2 * r - floor, 0},              // OK
      {floor + 10, 10, verdict::admit, admit_reason::fits, 10, 0},                         // exactly fits
      {floor + 10, 11, verdict::cap, admit_reason::host_budget, 10, 1},                    // one byte short
      {floor, 1, verdict::cap, admit_reason::host_budget, 0, 1},                           // on the floor
      {floor - 7, 0, verdict::cap, admit_reason::host_budget, 0, 7},                       // TIGHT: even 0 B
      {r + 1, 5, verdict::cap, admit_reason::host_budget, 0, floor - r - 1 + 5},           // TIGHT's bottom
      {r, 5, verdict::reject, admit_reason::host_reserve, r, floor - r + 5},               // CRITICAL
      {0, 5, verdict::reject, admit_reason::host_reserve, 0, floor + 5},
  };
  for (const row& x : rows) {
    CAPTURE(x.avail);
    CAPTURE(x.bytes);
    const mem_state s = host_state(total, x.avail);
    const admit_result a = admit_cache_insert(x.bytes, s, default_policy);
    CHECK(a.verdict == x.v);
    CHECK(a.reason == x.why);
    CHECK(a.limit_bytes == x.limit);
    CHECK(a.need_bytes == x.bytes);
    CHECK(insert_shortfall_bytes(x.bytes, room_for(s, default_policy)) == x.shortfall);
  }
  // Not sampled: fail open, nothing short.
  CHECK(admit_cache_insert(1, mem_state{}, default_policy).verdict == verdict::admit);
  CHECK(insert_shortfall_bytes(1, room_for(mem_state{}, default_policy)) == 0);
  static_assert(admit_cache_insert(1, host_state(8 * GiB, 8 * GiB)).verdict == verdict::admit);
}

// --- Dies: model loads and die buffers promised until a sample of the die has them -------------------

namespace {
// A box with two dies: die d has `free[d]` free of a 80 GiB budget, read at `read_ns[d]`.
mem_state dies_state(std::uint64_t free0, std::uint64_t free1, std::int64_t read0, std::int64_t read1) {
  mem_state s = box_with_budget(4 * GiB);
  s.n_dies = 2;
  s.per_die_budget_bytes[0] = s.per_die_budget_bytes[1] = 80 * GiB;
  s.per_die_free_bytes[0] = free0;
  s.per_die_free_bytes[1] = free1;
  s.per_die_read_ns[0] = read0;
  s.per_die_read_ns[1] = read1;
  return s;
}
}  // namespace

TEST_CASE("die reservations: a model load is promised on its die until a sample of that die has it") {
  fake_watcher w;
  host_ledger ledger;
  policy p = default_policy;
  p.die_reserve_bytes = 1 * GiB;
  p.die_scratch_bytes = 0;
  host_ledger::reserve_options o;
  o.policy = p;
  w.set(dies_state(41 * GiB, 21 * GiB, 1000, 1000), 1000);
  const model_load_spec load{.weights_bytes = 30 * GiB, .kv_max_ctx_bytes = 0};

  // The roomiest die (0: 40 GiB above its reserve) takes the first load; the second does not fit there
  // any more (10 GiB left), nor on die 1 (20 GiB).
  auto a = ledger.reserve_model_load(w, load, no_die, o);
  REQUIRE(a.answer.status == admit_status::admitted);
  CHECK(a.answer.kind == answer_kind::model_load);
  CHECK(a.answer.die == 0);
  CHECK(a.held.bytes() == 30 * GiB);
  CHECK(a.pending_bytes == 0);
  auto b = ledger.reserve_model_load(w, load, no_die, o);
  CHECK(b.answer.status == admit_status::denied);
  CHECK(b.answer.reason == admit_reason::die_vram);
  CHECK(b.answer.die == 1);                          // die 1 has more room now (20 GiB against 10)
  CHECK_FALSE(b.held);
  CHECK(ledger.reserve_model_load(w, load, 0, o).answer.detail.limit_bytes == 10 * GiB);  // 41 - 1 - 30
  CHECK(ledger.die_pending_bytes(w, 0) == 30 * GiB);
  CHECK(ledger.die_pending_bytes(w, 1) == 0);
  CHECK(ledger.pending_bytes(w) == 0);               // the host's budget is not the die's
  // The host answers see the promise too: the die's free VRAM in every answer's snapshot.
  CHECK(ledger.check_die_bytes(w, 0, 10 * GiB, p).answer.status == admit_status::admitted);
  CHECK(ledger.check_die_bytes(w, 0, 10 * GiB + 1, p).answer.status == admit_status::denied);

  // Settled at 2000: a host sample after it does not release it (the die was read at 1000), a die
  // read at 2000 neither; one read after 2000 does.
  a.held.settle_at(2000);
  w.set(dies_state(41 * GiB, 21 * GiB, 1000, 1000), 3000);
  CHECK(ledger.die_pending_bytes(w, 0) == 30 * GiB);
  w.set(dies_state(11 * GiB, 21 * GiB, 2000, 2000), 3000);
  CHECK(ledger.die_pending_bytes(w, 0) == 30 * GiB);
  CHECK(ledger.size() == 1);
  w.set(dies_state(11 * GiB, 21 * GiB, 2001, 2001), 3000);
  CHECK(ledger.die_pending_bytes(w, 0) == 0);
  CHECK(ledger.size() == 0);
  CHECK(ledger.reserve_model_load(w, load, 0, o).answer.detail.limit_bytes == 10 * GiB);  // as sampled

  // A slice and plain die bytes; cancelled, they come back at once.
  auto c = ledger.reserve_model_load_die(w, 8 * GiB, 2 * GiB, 1, o);
  REQUIRE(c.answer.status == admit_status::admitted);
  CHECK(c.answer.kind == answer_kind::load_slice);
  auto d = ledger.reserve_die_bytes(w, 1, 5 * GiB, o);
  REQUIRE(d.answer.status == admit_status::admitted);
  CHECK(d.pending_bytes == 10 * GiB);
  CHECK(ledger.die_pending_bytes(w, 1) == 15 * GiB);
  CHECK(ledger.reserve_die_bytes(w, 1, 5 * GiB + 1, o).answer.status == admit_status::denied);  // 20 - 15
  c.held.cancel();
  d.held.cancel();
  CHECK(ledger.die_pending_bytes(w, 1) == 0);
  CHECK(ledger.size() == 0);

  // A die not fed: bad_request, nothing held; no watcher: fail open, nothing held.
  auto e = ledger.reserve_die_bytes(w, 5, GiB, o);
  CHECK(e.answer.status == admit_status::denied);
  CHECK(e.answer.reason == admit_reason::bad_request);
  CHECK_FALSE(e.held);
  w.is_running = false;
  auto f = ledger.reserve_model_load(w, load, no_die, o);
  CHECK(f.answer.status == admit_status::fail_open);
  CHECK_FALSE(f.held);
}

TEST_CASE("die reservations: a time to live, and a host retry hint that counts only host reservations") {
  fake_watcher w;
  std::int64_t now = 1000;
  static std::int64_t* clock = nullptr;
  clock = &now;
  host_ledger ledger{[]() { return *clock; }};
  policy p = default_policy;
  p.die_reserve_bytes = 0;
  host_ledger::reserve_options o;
  o.policy = p;
  o.ttl = std::chrono::nanoseconds(500);
  w.set(dies_state(10 * GiB, 10 * GiB, 1000, 1000), 1000);
  auto a = ledger.reserve_die_bytes(w, 0, 4 * GiB, o);
  REQUIRE(a.answer.status == admit_status::admitted);
  CHECK(ledger.expiry_covering(1) == -1);  // a die's bytes do not come back to the host
  CHECK(ledger.die_pending_bytes(w, 0) == 4 * GiB);
  now = 1600;  // past its time to live: dropped
  CHECK(ledger.die_pending_bytes(w, 0) == 0);
  CHECK(ledger.size() == 0);
}

TEST_CASE("die UUIDs: parsed as nvidia-smi prints them, printed back; anything else refused") {
  die_uuid u;
  CHECK(parse_die_uuid("GPU-6b8e0a7e-4f3c-2d1a-9b8c-7d6e5f4a3b2c", u));
  CHECK(to_string(u) == "GPU-6b8e0a7e-4f3c-2d1a-9b8c-7d6e5f4a3b2c");
  die_uuid v;
  CHECK(parse_die_uuid("6B8E0A7E4F3C2D1A9B8C7D6E5F4A3B2C", v));
  CHECK(u == v);
  CHECK(parse_die_uuid("6b8e0a7e-4f3c-2d1a-9b8c-7d6e5f4a3b2c", v));
  CHECK(u == v);
  die_uuid untouched = u;
  for (const char* bad : {"", "GPU-", "GPU-6b8e0a7e-4f3c-2d1a-9b8c-7d6e5f4a3b2", "GPU-6b8e0a7e-4f3c-2d1a-9b8c-7d6e5f4a3b2cc",
                          "GPU-6b8e0a7e_4f3c-2d1a-9b8c-7d6e5f4a3b2c", "GPU-zb8e0a7e-4f3c-2d1a-9b8c-7d6e5f4a3b2c",
                          "00000000000000000000000000000000", "MIG-6b8e0a7e-4f3c-2d1a-9b8c-7d6e5f4a3b2c"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_die_uuid(bad, untouched));
    CHECK(untouched == u);
  }
  CHECK(to_string(die_uuid{}).empty());
  host_ledger ledger;
  CHECK_FALSE(ledger.name_die(0, die_uuid{}));
  CHECK_FALSE(ledger.name_die(max_dies, u));
  CHECK(ledger.name_die(0, u));
  CHECK(ledger.die_name(0) == u);
}
