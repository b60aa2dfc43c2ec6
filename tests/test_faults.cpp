// Fault injection for the state layer (docs/fault-injection.md, faults d-g):
// a clock that jumps, a subscriber or a reader that stalls, a writer at full
// speed, set_die from many threads. Fake samplers and fake clocks; the threads
// are real (this program is meant for the -Db_sanitize=thread leg too). No
// assertion depends on how fast the machine is: deadlines only turn a hang into
// a failure.
#include <doctest/doctest.h>

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "pnmem/engine/metrics.hpp"
#include "pnmem/level.hpp"
#include "pnmem/seqlock.hpp"
#include "pnmem/watcher.hpp"
#include "test_support.hpp"
#include "watcher_fakes.hpp"

using namespace pnmem;
using namespace std::chrono_literals;
using namespace pnmem::test;

namespace {

constexpr bool under_tsan = detail::seqlock_tsan;
// Long enough for any loaded machine; reached only when something hangs.
constexpr auto hang_deadline = 30s;

// A one-shot gate a test thread waits at until the test opens it.
struct gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  int waiting = 0;
  void wait() {
    std::unique_lock<std::mutex> lk(mu);
    ++waiting;
    cv.notify_all();
    cv.wait(lk, [&] { return open; });
  }
  // True once `n` threads are waiting (false after the hang deadline).
  bool wait_for_waiters(int n) {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, hang_deadline, [&] { return waiting >= n; });
  }
  void release() {
    std::lock_guard<std::mutex> lk(mu);
    open = true;
    cv.notify_all();
  }
};

// Waits (yielding) until `pred` holds; false after the hang deadline.
template <class Pred>
bool eventually(Pred pred) {
  const auto start = std::chrono::steady_clock::now();
  while (!pred()) {
    if (std::chrono::steady_clock::now() - start > hang_deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// Die i holds free = budget / 20 * (1 + used % 19): 5 % to 95 % free, so its
// level moves through every band, and a torn merge (free from one set_die, used
// from another) breaks the relation.
constexpr std::uint64_t die_budget = 20 * GiB;
constexpr std::uint64_t die_free_for(std::uint64_t used) { return die_budget / 20 * (1 + used % 19); }

bool dies_whole(const mem_state& s) {
  for (int d = 0; d < die_count(s); ++d) {
    const auto i = static_cast<std::size_t>(d);
    if (s.per_die_budget_bytes[i] != 0 && s.per_die_free_bytes[i] != die_free_for(s.per_die_used_bytes[i])) return false;
  }
  return true;
}

}  // namespace

// ---- d: a clock that jumps ------------------------------------------------------------

TEST_CASE("fault d: a clock set back by hours restarts the dwell; the level is not held for hours") {
  const std::int64_t s = 1'000'000'000;
  const std::int64_t h = 3600 * s;
  level_hysteresis hy{5s};
  CHECK(hy.update(mem_level::critical, 100 * h) == mem_level::critical);
  CHECK(hy.update(mem_level::ok, 100 * h + 1 * s) == mem_level::critical);  // below since then
  // The clock jumps back 100 hours. The jump is not time waited...
  CHECK(hy.update(mem_level::ok, 1 * s) == mem_level::critical);
  CHECK(hy.update(mem_level::ok, 5 * s) == mem_level::critical);
  // ...and the dwell runs from the jump: 5 s later the level steps down, not 100 h later.
  CHECK(hy.update(mem_level::ok, 6 * s) == mem_level::ok);
  // Escalation is immediate whatever the clock did.
  CHECK(hy.update(mem_level::tight, -7 * h) == mem_level::tight);
}

TEST_CASE("fault d: a clock that jumps forward by hours steps down at the next sample below, once") {
  const std::int64_t s = 1'000'000'000;
  level_hysteresis hy{5s};
  CHECK(hy.update(mem_level::tight, 10 * s) == mem_level::tight);
  CHECK(hy.update(mem_level::ok, 11 * s) == mem_level::tight);  // the dwell starts
  // A jump of 3 hours reads as 3 hours below: the dwell is over.
  CHECK(hy.update(mem_level::ok, 11 * s + 3 * 3600 * s) == mem_level::ok);
  // Afterwards the dwell applies as usual from the new time.
  const std::int64_t t = 11 * s + 3 * 3600 * s;
  CHECK(hy.update(mem_level::watch, t + 1 * s) == mem_level::watch);
  CHECK(hy.update(mem_level::ok, t + 2 * s) == mem_level::watch);
  CHECK(hy.update(mem_level::ok, t + 6 * s) == mem_level::watch);
  CHECK(hy.update(mem_level::ok, t + 7 * s) == mem_level::ok);
}

TEST_CASE("fault d: extreme clock values do not overflow the dwell arithmetic") {
  level_hysteresis hy{5s};
  constexpr std::int64_t lo = std::numeric_limits<std::int64_t>::min();
  constexpr std::int64_t hi = std::numeric_limits<std::int64_t>::max();
  CHECK(hy.update(mem_level::critical, lo) == mem_level::critical);
  CHECK(hy.update(mem_level::ok, lo) == mem_level::critical);
  CHECK(hy.update(mem_level::ok, hi) == mem_level::ok);  // max - min: a very long wait, not a negative one
  CHECK(hy.update(mem_level::tight, hi) == mem_level::tight);
  CHECK(hy.update(mem_level::ok, hi) == mem_level::tight);
  CHECK(hy.update(mem_level::ok, lo) == mem_level::tight);  // backwards: starts over
  CHECK(hy.update(mem_level::ok, lo + 5'000'000'000) == mem_level::ok);
}

TEST_CASE("fault d: a watcher whose clock jumps back and forth by hours: no flapping, seq always grows") {
  auto host = std::make_shared<fake_host>();
  fake_clock clock;
  watcher_options o;
  o.step_down_dwell = 2s;
  watcher<fake_sampler, fake_clock> w{fake_sampler{host}, o, clock};
  test::rng rng{42};
  const mem_level levels[] = {mem_level::ok, mem_level::watch, mem_level::tight, mem_level::critical};
  const std::int64_t dwell_ns = std::chrono::nanoseconds(o.step_down_dwell).count();
  std::uint64_t last_seq = 0;
  mem_level published = mem_level::ok;
  int below_run = 0;  // consecutive samples with the raw level below the published one
  // The dwell as the header documents it, kept apart from level_hysteresis: the
  // clock time at which the raw level went below the published one, moved to
  // "now" by a sample whose clock reads earlier (a clock that goes back restarts
  // the dwell; the jump never counts as time waited).
  bool below = false;
  std::int64_t below_since = 0;
  int changes = 0;
  int step_downs = 0;
  int held = 0;  // samples below the published level that kept it (the dwell at work)
  for (int i = 0; i < 2000; ++i) {
    // Mostly small steps, sometimes a jump of hours either way.
    const std::uint64_t r = rng.below(100);
    if (r < 5) {
      clock.advance(std::chrono::hours(1 + rng.below(48)));
    } else if (r < 10) {
      clock.advance(-std::chrono::hours(1 + rng.below(48)));
    } else {
      clock.advance(std::chrono::milliseconds(rng.below(1500)));
    }
    host->set(at_level(levels[rng.below(4)]));
    w.poll_now();
    const mem_state s = w.read();
    CHECK(s.seq == last_seq + 1);
    last_seq = s.seq;
    CHECK(s.sample_time_ns == clock.ns->load());  // the snapshot's time is the clock's, jumps included
    CHECK(s.raw_level == derive_level(s));
    CHECK(s.level >= s.raw_level);  // hysteresis only ever holds a higher level
    const std::int64_t now = s.sample_time_ns;
    if (s.raw_level >= published) {
      below = false;  // escalation (or no change): any dwell is over
      CHECK(s.level == s.raw_level);
    } else {
      if (!below) {
        below = true;
        below_since = now;
      } else if (now < below_since) {
        below_since = now;
      }
      // Both times are the fake clock's, within hours of each other: no overflow.
      const std::int64_t waited = now - below_since;
      INFO("sample " << i << ": raw " << to_string(s.raw_level) << " below " << to_string(published) << " for "
                     << waited << " ns of clock time; dwell " << dwell_ns << " ns");
      if (s.level < published) {
        // A step down: the raw level stayed below for the whole dwell, measured on
        // the clock from the sample that started it (two samples at least: one that
        // starts the dwell, and a later one that ends it).
        CHECK(below_run >= 1);
        CHECK(waited >= dwell_ns);
        CHECK(s.level == s.raw_level);  // down to the raw level, never half way
        below = false;
        ++step_downs;
      } else {
        // Held: only while the dwell has not run out.
        CHECK(s.level == published);
        CHECK(waited < dwell_ns);
        ++held;
      }
    }
    if (s.level != published) ++changes;
    below_run = s.raw_level < s.level ? below_run + 1 : 0;
    published = s.level;
  }
  MESSAGE(changes << " level changes over 2000 samples: " << step_downs << " steps down after the dwell, " << held
                  << " samples held inside it");
  // The walk must exercise both sides of the dwell, or the checks above prove nothing.
  CHECK(step_downs > 0);
  CHECK(held > 0);
}

TEST_CASE("fault d: a snapshot timed ahead of the reader's steady clock has age 0 in the metrics, never negative") {
  mem_state s;
  s.sample_time_ns = std::numeric_limits<std::int64_t>::max();  // a watcher clock far ahead of steady_clock
  const std::string text = prometheus_text(s);
  CHECK(text.find("\npnmem_snapshot_age_seconds 0\n") != std::string::npos);
  CHECK(text.find("pnmem_snapshot_age_seconds -") == std::string::npos);
}

// ---- e: a subscriber or a reader that stalls ---------------------------------------------

TEST_CASE("fault e: a subscriber that blocks: set_die, read and poll_now go on; changes queue, arrive in order") {
  auto host = roomy_host();
  watcher<fake_sampler, fake_clock> w{fake_sampler{host}};
  w.poll_now();
  gate blocked;
  std::mutex seen_mu;
  std::vector<std::pair<mem_level, mem_level>> seen;
  std::vector<std::thread::id> delivered_on;
  w.subscribe([&](const level_change& c) {
    {
      std::lock_guard<std::mutex> lk(seen_mu);
      seen.emplace_back(c.from, c.to);
      delivered_on.push_back(std::this_thread::get_id());
    }
    if (c.to == mem_level::tight && c.from == mem_level::ok) blocked.wait();  // the first change only
  });

  // Thread A publishes ok -> tight and is kept inside the subscriber.
  host->set(at_level(mem_level::tight));
  std::thread a([&] { w.poll_now(); });
  const std::thread::id a_id = a.get_id();
  REQUIRE(blocked.wait_for_waiters(1));

  // Readers see what A published; set_die from this thread publishes and returns.
  CHECK(w.read().level == mem_level::tight);
  const std::uint64_t seq = w.read().seq;
  CHECK(w.set_die(0, 0, 16 * GiB, 16 * GiB) == set_die_status::ok);  // tight -> critical
  CHECK(w.read().level == mem_level::critical);
  CHECK(w.set_die(0, 16 * GiB, 16 * GiB, 0) == set_die_status::ok);  // critical -> tight
  CHECK(w.read().level == mem_level::tight);
  CHECK(w.read().seq == seq + 2);

  // poll_now from another thread is not held up by the blocked subscriber either.
  host->set(roomy());
  std::atomic<bool> polled{false};
  std::thread p([&] {
    w.poll_now();  // tight -> ok
    polled.store(true);
  });
  CHECK(eventually([&] { return polled.load(); }));
  CHECK(w.read().level == mem_level::ok);
  {
    std::lock_guard<std::mutex> lk(seen_mu);
    CHECK(seen.size() == 1);  // the later changes wait in the queue, in order
  }

  blocked.release();
  a.join();
  p.join();
  std::lock_guard<std::mutex> lk(seen_mu);
  const std::vector<std::pair<mem_level, mem_level>> want = {
      {mem_level::ok, mem_level::tight},
      {mem_level::tight, mem_level::critical},
      {mem_level::critical, mem_level::tight},
      {mem_level::tight, mem_level::ok},
  };
  CHECK(seen == want);
  // The thread that was delivering delivers the changes others queued meanwhile.
  for (const auto id : delivered_on) CHECK(id == a_id);
}

TEST_CASE("fault e: a subscriber may call poll_now(), even on the thread that polled") {
  auto host = roomy_host();
  watcher<fake_sampler, fake_clock> w{fake_sampler{host}};
  std::vector<mem_level> seen;
  w.subscribe([&](const level_change& c) {
    seen.push_back(c.to);
    if (c.to == mem_level::critical) {
      host->set(at_level(mem_level::watch));
      w.poll_now();  // "take a fresh sample at CRITICAL": queued, delivered after this call
      CHECK(seen.size() == 1);
    }
  });
  host->set(at_level(mem_level::critical));
  // Run on a helper thread so that a self-deadlock fails the test instead of hanging it.
  std::atomic<bool> done{false};
  std::thread t([&] {
    w.poll_now();
    done.store(true);
  });
  if (!eventually([&] { return done.load(); })) {
    t.detach();  // stuck for good: report it rather than hang the suite
    FAIL("poll_now() from a subscriber deadlocked");
  }
  t.join();
  CHECK(seen == std::vector<mem_level>{mem_level::critical, mem_level::watch});
  CHECK(w.read().level == mem_level::watch);
  CHECK(host->sample_count() == 2);
}

TEST_CASE("fault e: a subscriber blocked on the poll thread stops sampling, not set_die; stop() waits for it") {
  auto host = roomy_host();
  watcher_options o;
  o.poll_interval = 1ms;
  o.pressure_poll_interval = 1ms;
  watcher<fake_sampler> w{fake_sampler{host}, o};
  gate blocked;
  std::atomic<int> calls{0};
  w.subscribe([&](const level_change& c) {
    calls.fetch_add(1);
    if (c.to == mem_level::tight && c.from == mem_level::ok) blocked.wait();
  });
  REQUIRE(w.start());  // one sample at OK: no change
  host->set(at_level(mem_level::tight));
  REQUIRE(blocked.wait_for_waiters(1));  // the poll thread sampled TIGHT and is in the subscriber
  const int samples = host->sample_count();

  // set_die publishes at once, from this thread.
  for (std::uint64_t k = 1; k <= 100; ++k) {
    CHECK(w.set_die(0, die_free_for(k), die_budget, k) == set_die_status::ok);
  }
  CHECK(w.read().per_die_used_bytes[0] == 100);
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    w.stop();
    stopped.store(true);
  });
  std::this_thread::sleep_for(50ms);  // room to misbehave: neither may happen while it is blocked
  CHECK(host->sample_count() == samples);  // the poll thread is the one that is blocked: no samples
  CHECK_FALSE(stopped.load());         // stop() joins the poll thread, so it waits for the subscriber
  blocked.release();
  stopper.join();
  CHECK(stopped.load());
  CHECK_FALSE(w.running());
  CHECK(calls.load() >= 1);
}

#if defined(SIGUSR1)
namespace {

// A reader thread is stopped wherever it is (mid-copy, most likely) by a signal
// whose handler blocks on a pipe until the test lets it go: the closest thing to
// "descheduled mid-read" a test can ask for. read() and write() are
// async-signal-safe.
int g_stalled_pipe[2] = {-1, -1};
int g_resume_pipe[2] = {-1, -1};

void stall_handler(int) {
  const int saved = errno;
  char c = 's';
  (void)!::write(g_stalled_pipe[1], &c, 1);
  while (::read(g_resume_pipe[0], &c, 1) < 0 && errno == EINTR) {
  }
  errno = saved;
}

}  // namespace

TEST_CASE("fault e: a reader stalled mid-read holds up no writer and no other reader; it resumes whole") {
  REQUIRE(::pipe(g_stalled_pipe) == 0);
  REQUIRE(::pipe(g_resume_pipe) == 0);
  struct sigaction sa {};
  sa.sa_handler = stall_handler;
  sigemptyset(&sa.sa_mask);
  struct sigaction old {};
  REQUIRE(::sigaction(SIGUSR1, &sa, &old) == 0);

  auto host = roomy_host();
  watcher<fake_sampler> w{fake_sampler{host}, polling_every(1ms)};
  REQUIRE(w.start());

  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> reads{0};
  std::atomic<std::uint64_t> last_seq{0};
  std::atomic<int> bad{0};
  std::thread stalled([&] {
    std::uint64_t prev = 0;
    std::uint64_t n = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      const mem_state s = w.read();
      if (!dies_whole(s) || s.seq < prev) bad.fetch_add(1);
      prev = s.seq;
      last_seq.store(s.seq);
      reads.store(++n);
      // ThreadSanitizer runs a handler only when the thread enters a libc call.
      if (under_tsan && (n & 63U) == 0) ::usleep(1);
    }
  });
  CHECK(eventually([&] { return reads.load() >= 100; }));
  REQUIRE(::pthread_kill(stalled.native_handle(), SIGUSR1) == 0);
  char c = 0;
  REQUIRE(::read(g_stalled_pipe[0], &c, 1) == 1);  // it is stopped now, wherever it was
  const std::uint64_t reads_at_stall = reads.load();

  // Writers and other readers go on as if it were not there.
  std::uint64_t final_seq = 0;
  for (std::uint64_t k = 1; k <= 1000; ++k) {
    CHECK(w.set_die(static_cast<int>(k % 4), die_free_for(k), die_budget, k) == set_die_status::ok);
  }
  w.poll_now();
  std::thread other([&] {
    const mem_state s = w.read();
    CHECK(dies_whole(s));
    CHECK(s.per_die_used_bytes[0] == 1000);
    CHECK(s.per_die_used_bytes[3] == 999);
  });
  other.join();
  final_seq = w.read().seq;
  CHECK(final_seq >= 1001);
  CHECK(reads.load() == reads_at_stall);  // it really was stalled all along

  c = 'r';
  REQUIRE(::write(g_resume_pipe[1], &c, 1) == 1);
  // Its copy in progress (if any) is thrown away and retried: two more reads
  // and it holds a whole snapshot at least as new as the last write.
  CHECK(eventually([&] { return reads.load() >= reads_at_stall + 2; }));
  stop.store(true);
  stalled.join();
  w.stop();
  CHECK(bad.load() == 0);
  CHECK(last_seq.load() >= final_seq);

  ::sigaction(SIGUSR1, &old, nullptr);
  for (int* p : {g_stalled_pipe, g_resume_pipe}) {
    ::close(p[0]);
    ::close(p[1]);
  }
}
#endif

// ---- f: a writer at full speed ----------------------------------------------------------

TEST_CASE("fault f: a writer storing back to back: readers still finish reads, every one whole and in order") {
  // The writer never yields or sleeps; it stops only once every reader has
  // completed its target of reads *while it was storing* (or at the deadline,
  // which fails the test: readers starved).
  const std::uint64_t target = under_tsan ? 500 : 20'000;
  constexpr int readers = 2;
  seqlock<mem_state> lock;
  std::atomic<bool> writing{true};
  std::atomic<int> started{0};
  std::atomic<int> reached{0};
  std::atomic<std::uint64_t> bad{0};
  std::vector<std::thread> ts;
  for (int r = 0; r < readers; ++r) {
    ts.emplace_back([&] {
      started.fetch_add(1);
      std::uint64_t during = 0;
      std::uint64_t prev = 0;
      bool counted = false;
      while (writing.load(std::memory_order_relaxed)) {
        const mem_state s = lock.read();
        // Store k carries seq k, used k in every die and free derived from it.
        bool whole = s.host_total_bytes == s.seq && dies_whole(s);
        for (int d = 0; d < max_dies; ++d) whole = whole && s.per_die_used_bytes[static_cast<std::size_t>(d)] == s.seq;
        if (!whole || s.seq < prev) bad.fetch_add(1);
        prev = s.seq;
        // Counted only between the writer's first store and its last.
        if (s.seq != 0 && writing.load(std::memory_order_relaxed) && ++during == target && !counted) {
          counted = true;
          reached.fetch_add(1);
        }
      }
    });
  }
  while (started.load() < readers) std::this_thread::yield();
  mem_state s;
  s.n_dies = max_dies;
  s.per_die_budget_bytes.fill(die_budget);
  const auto start = std::chrono::steady_clock::now();
  std::uint64_t k = 0;
  bool timed_out = false;
  while (reached.load(std::memory_order_relaxed) < readers) {
    for (int i = 0; i < 64; ++i) {
      ++k;
      s.seq = k;
      s.host_total_bytes = k;
      s.per_die_used_bytes.fill(k);
      s.per_die_free_bytes.fill(die_free_for(k));
      lock.store(s);
    }
    if (std::chrono::steady_clock::now() - start > hang_deadline) {
      timed_out = true;
      break;
    }
  }
  writing.store(false);
  for (auto& t : ts) t.join();
  MESSAGE(k << " back-to-back stores while " << readers << " readers made " << target << " reads each");
  CHECK_FALSE(timed_out);
  CHECK(bad.load() == 0);
  CHECK(lock.sequence() == k);
}

// ---- g: set_die from many threads ----------------------------------------------------------

TEST_CASE("fault g: set_die from many threads with readers and the poll thread: whole, ordered, derived snapshots") {
  auto host = roomy_host();
  host->other = at_level(mem_level::tight);
  host->alternate = true;  // the poll thread moves the host level too
  watcher_options o;
  o.poll_interval = 1ms;
  o.pressure_poll_interval = 1ms;
  watcher<fake_sampler> w{fake_sampler{host}, o};

  // Subscribers see a chain: each change starts where the previous one ended,
  // one call at a time, with a snapshot whose level is its own numbers' level.
  std::atomic<int> in_callback{0};
  std::atomic<int> overlapped{0};
  std::atomic<int> broken_chain{0};
  mem_level chain = mem_level::ok;  // touched only inside the (serialised) callback
  std::uint64_t deliveries = 0;
  w.subscribe([&](const level_change& c) {
    if (in_callback.fetch_add(1) != 0) overlapped.fetch_add(1);
    if (c.from != chain || c.state.level != c.to || c.state.raw_level != derive_level(c.state)) {
      broken_chain.fetch_add(1);
    }
    chain = c.to;
    ++deliveries;
    in_callback.fetch_sub(1);
  });
  REQUIRE(w.start());

  constexpr int own_die_writers = 4;  // writer t owns die t
  constexpr int shared_die = 4;       // and two more share die 4
  const std::uint64_t per_writer = under_tsan ? 500 : 3000;
  std::atomic<bool> done{false};
  std::atomic<std::uint64_t> bad{0};
  std::atomic<std::uint64_t> reads{0};
  std::atomic<int> readers_reading{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&] {
      std::uint64_t last_seq = 0;
      std::int64_t last_time = 0;
      std::uint64_t n = 0;
      while (!done.load(std::memory_order_relaxed)) {
        const mem_state s = w.read();
        if (++n == 1) readers_reading.fetch_add(1);
        if (!dies_whole(s)) bad.fetch_add(1);                     // no torn merge
        if (s.seq < last_seq) bad.fetch_add(1);                   // seq never goes back
        if (s.sample_time_ns < last_time) bad.fetch_add(1);       // nor does time (steady clock)
        if (s.raw_level != derive_level(s)) bad.fetch_add(1);     // the level is its own numbers'
        if (s.level != s.raw_level) bad.fetch_add(1);             // dwell 0: published = raw
        if (!std::isfinite(s.host_psi_some_rate)) bad.fetch_add(1);
        last_seq = s.seq;
        last_time = s.sample_time_ns;
      }
      reads.fetch_add(n);
    });
  }
  // The writers start once both readers are reading: the reads overlap the writes.
  REQUIRE(eventually([&] { return readers_reading.load() == 2; }));
  std::vector<std::thread> writers;
  for (int t = 0; t < own_die_writers; ++t) {
    writers.emplace_back([&, t] {
      for (std::uint64_t k = 1; k <= per_writer; ++k) {
        const std::uint64_t used = k * 7 + static_cast<std::uint64_t>(t);
        if (w.set_die(t, die_free_for(used), die_budget, used) != set_die_status::ok) bad.fetch_add(1);
      }
    });
  }
  // Two writers on one die: odd and even `used`.
  for (int t = 0; t < 2; ++t) {
    writers.emplace_back([&, t] {
      for (std::uint64_t k = 1; k <= per_writer; ++k) {
        const std::uint64_t used = 2 * k + static_cast<std::uint64_t>(t);
        if (w.set_die(shared_die, die_free_for(used), die_budget, used) != set_die_status::ok) bad.fetch_add(1);
      }
    });
  }
  for (auto& t : writers) t.join();
  done.store(true);
  for (auto& t : readers) t.join();
  w.stop();

  CHECK(bad.load() == 0);
  CHECK(reads.load() > 0);
  CHECK(overlapped.load() == 0);
  CHECK(broken_chain.load() == 0);
  const mem_state s = w.read();
  // The last write per die.
  for (int t = 0; t < own_die_writers; ++t) {
    CHECK(s.per_die_used_bytes[static_cast<std::size_t>(t)] == per_writer * 7 + static_cast<std::uint64_t>(t));
  }
  const std::uint64_t shared = s.per_die_used_bytes[shared_die];
  CHECK((shared == 2 * per_writer || shared == 2 * per_writer + 1));
  CHECK(s.n_dies == shared_die + 1);
  CHECK(dies_whole(s));
  CHECK(s.raw_level == derive_level(s));
  CHECK(s.level == s.raw_level);
  // Every publish is counted once: 6 writers' set_die calls plus the samples.
  CHECK(s.seq == 6 * per_writer + static_cast<std::uint64_t>(host->sample_count()));
  CHECK(chain == s.level);  // every change was delivered; the last one ends at the final level
  MESSAGE(reads.load() << " reads, " << deliveries << " level changes delivered, " << host->sample_count()
                       << " samples");
}
