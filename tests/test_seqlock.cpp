// The seqlock: single-thread contract, then torn-read hunting in the style of
// absl/flags/internal/sequence_lock_test.cc: the writer stores payloads made of
// one repeated byte (a new byte each store) and readers count any copy whose
// bytes differ as torn, across payload sizes and reader counts.
// On x86 (TSO) these hunts cannot catch a missing or relaxed fence: the
// hardware orders loads and stores as the fences would. The fences are
// checked by test_seqlock_relacy.cpp, on a model of the C++ memory model.
#include "pnmem/seqlock.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "pnmem/live_state.hpp"
#include "pnmem/mem_state.hpp"
#include "test_support.hpp"

// Drives the two halves of a store separately, so a test can look at the
// seqlock while a write is in progress without racing a second thread.
template <class T>
struct pnmem::detail::seqlock_test_access {
  static std::uint64_t begin_write(seqlock<T>& lock) noexcept { return lock.begin_write(); }
  static void end_write(seqlock<T>& lock, std::uint64_t s) noexcept { lock.end_write(s); }
};

namespace {

using pnmem::mem_state;
using pnmem::seqlock;

template <std::size_t N>
using payload = std::array<unsigned char, N>;

template <std::size_t N>
payload<N> filled(unsigned char byte) {
  payload<N> p;
  p.fill(byte);
  return p;
}

template <std::size_t N>
bool all_equal(const payload<N>& p) {
  return std::all_of(p.begin(), p.end(), [&](unsigned char b) { return b == p[0]; });
}

// TSan makes every atomic access tens of times slower, and a writer that never
// pauses then starves big readers: the TSan build hunts races with fewer reads,
// the normal build hunts torn copies with many.
constexpr bool under_tsan = pnmem::detail::seqlock_tsan;
constexpr std::uint64_t main_case_reads = under_tsan ? 20'000 : 1'000'000;
constexpr std::uint64_t size_sweep_reads = under_tsan ? 5'000 : 100'000;

// If readers cannot reach their target within this, the seqlock starves them:
// a failure, not a hang.
constexpr auto deadline = std::chrono::seconds(20);

struct hunt_result {
  std::uint64_t reads = 0;   // consistent copies returned
  std::uint64_t torn = 0;    // copies whose bytes were not all equal
  std::uint64_t raced = 0;   // try_read() calls that failed: evidence reads overlapped stores
  std::uint64_t writes = 0;  // stores the writer completed
  bool timed_out = false;
};

// One writer stores payloads of one repeated byte as fast as it can (yielding
// between stores once it has made enough) until the readers together have
// `target_reads` copies and it has made at least a tenth as many stores (so the reads really overlap writing, however the scheduler
// deals out the two cores). Readers start when the writer does, and alternate
// read() and try_read(), so both paths are hunted.
template <std::size_t N>
hunt_result hunt_torn_reads(int readers, std::uint64_t target_reads) {
  seqlock<payload<N>> lock(filled<N>(0));
  std::atomic<std::uint64_t> reads{0};
  std::atomic<std::uint64_t> torn{0};
  std::atomic<std::uint64_t> raced{0};
  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};

  std::vector<std::thread> threads;
  for (int r = 0; r < readers; ++r) {
    threads.emplace_back([&] {
      std::uint64_t local_reads = 0;
      std::uint64_t local_torn = 0;
      std::uint64_t local_raced = 0;
      std::uint64_t i = 0;
      while (!go.load(std::memory_order_relaxed)) std::this_thread::yield();
      while (!stop.load(std::memory_order_relaxed)) {
        payload<N> copy;
        if ((i++ & 1U) == 0) {
          copy = lock.read();
        } else if (!lock.try_read(copy)) {
          ++local_raced;
          continue;
        }
        ++local_reads;
        if (!all_equal(copy)) ++local_torn;
        // Publish in batches: a shared counter bumped per read would be the
        // hottest line in the test, not the seqlock.
        if ((local_reads & 1023U) == 0) {
          reads.fetch_add(1024, std::memory_order_relaxed);
        }
      }
      reads.fetch_add(local_reads & 1023U, std::memory_order_relaxed);
      torn.fetch_add(local_torn, std::memory_order_relaxed);
      raced.fetch_add(local_raced, std::memory_order_relaxed);
    });
  }

  hunt_result result;
  const std::uint64_t min_writes = target_reads / 10;
  const auto start = std::chrono::steady_clock::now();
  unsigned char byte = 0;
  go.store(true, std::memory_order_relaxed);
  while (reads.load(std::memory_order_relaxed) < target_reads || result.writes < min_writes) {
    lock.store(filled<N>(++byte));
    ++result.writes;
    // Once there is enough overlap, pause every 16 stores: a writer storing
    // back to back can starve a reader of a large payload indefinitely on a
    // 2-core machine (the contended benchmark shows it), and this test hunts
    // torn reads, not starvation. A yield is not enough: with the reader on the
    // other core there is nobody to yield to (under TSan a 1000-byte reader then
    // completed 160 reads against 704,000 stores in 20 s on an idle box).
    if (result.writes >= min_writes && (result.writes & 15U) == 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    if ((result.writes & 255U) == 0 && std::chrono::steady_clock::now() - start > deadline) {
      result.timed_out = true;
      break;
    }
  }
  stop.store(true, std::memory_order_relaxed);
  for (auto& t : threads) t.join();
  result.reads = reads.load();
  result.torn = torn.load();
  result.raced = raced.load();
  return result;
}

template <std::size_t N>
void check_no_torn_reads(int readers, std::uint64_t target_reads) {
  CAPTURE(N);
  CAPTURE(readers);
  const hunt_result r = hunt_torn_reads<N>(readers, target_reads);
  MESSAGE("payload " << N << " B, " << readers << " reader(s): " << r.reads << " reads, " << r.writes
                     << " writes, " << r.raced << " failed try_reads, " << r.torn << " torn");
  CHECK_FALSE(r.timed_out);
  CHECK(r.reads >= target_reads);
  CHECK(r.torn == 0);
}

// A mem_state whose every counter field says which store it came from.
mem_state stamped_state(std::uint64_t k) {
  mem_state s = pnmem::test::host_state(k, k);
  s.seq = k;
  s.sample_time_ns = static_cast<std::int64_t>(k);
  s.cgroup_current_bytes = k;
  s.per_die_free_bytes.fill(k);
  s.per_die_budget_bytes.fill(k);
  s.per_die_used_bytes.fill(k);
  s.provenance.meminfo_total_bytes = k;
  s.provenance.cgroup_working_set_bytes = k;
  return s;
}

bool consistent(const mem_state& s) {
  const std::uint64_t k = s.seq;
  const auto is_k = [k](std::uint64_t v) { return v == k; };
  return s.host_total_bytes == k && s.host_avail_bytes == k && s.cgroup_current_bytes == k &&
         s.sample_time_ns == static_cast<std::int64_t>(k) &&
         std::all_of(s.per_die_free_bytes.begin(), s.per_die_free_bytes.end(), is_k) &&
         std::all_of(s.per_die_budget_bytes.begin(), s.per_die_budget_bytes.end(), is_k) &&
         std::all_of(s.per_die_used_bytes.begin(), s.per_die_used_bytes.end(), is_k) &&
         s.provenance.meminfo_total_bytes == k && s.provenance.cgroup_working_set_bytes == k;
}

// Two readers copy a seqlock while this thread stores stamped(1), ..., stamped(stores) (store k carries
// seq k). Each reader has its own copy of `read`, which takes its i-th copy into `s`, or returns false
// (a try_read that raced a store: nothing taken). Every copy must be whole(s), at least as new as the
// sequence() read before it, and never older than that reader's previous copy.
template <class Stamped, class Read, class Whole>
void check_snapshots_under_stores(const char* what, std::uint64_t stores, Stamped stamped, Read read, Whole whole) {
  seqlock<mem_state> lock(stamped(0));
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> bad{0};
  std::atomic<std::uint64_t> reads{0};
  std::atomic<std::uint64_t> raced{0};
  std::atomic<int> started{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&, read]() mutable {
      started.fetch_add(1);
      std::uint64_t last = 0;
      std::uint64_t local_bad = 0;
      std::uint64_t local_reads = 0;
      std::uint64_t local_raced = 0;
      for (std::uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        const std::uint64_t promised = lock.sequence();
        mem_state s;
        if (!read(lock, i, s)) {
          ++local_raced;
          continue;
        }
        ++local_reads;
        if (!whole(s) || s.seq < promised || s.seq < last) ++local_bad;
        last = s.seq;
      }
      bad.fetch_add(local_bad);
      reads.fetch_add(local_reads);
      raced.fetch_add(local_raced);
    });
  }
  while (started.load() < 2) std::this_thread::yield();  // the stores must overlap the reads
  for (std::uint64_t k = 1; k <= stores; ++k) lock.store(stamped(k));
  stop.store(true);
  for (auto& t : readers) t.join();
  MESSAGE(std::string(what) << ": " << reads.load() << " reads over " << stores << " stores, " << raced.load() << " failed");
  CHECK(lock.sequence() == stores);
  CHECK(reads.load() > 0);
  CHECK(bad.load() == 0);
}

}  // namespace

TEST_CASE("a new seqlock holds its initial value and has no completed stores") {
  const seqlock<payload<9>> lock(filled<9>(0x5a));
  CHECK(lock.sequence() == 0);
  CHECK(lock.read() == filled<9>(0x5a));
  payload<9> out = filled<9>(0);
  CHECK(lock.try_read(out));
  CHECK(out == filled<9>(0x5a));

  const seqlock<mem_state> states;  // default-constructible T: a default value
  CHECK(states.read().seq == 0);
  CHECK(states.sequence() == 0);
}

TEST_CASE("read() after store() returns the stored value; sequence() counts stores") {
  seqlock<mem_state> lock(stamped_state(0));
  for (std::uint64_t k = 1; k <= 5; ++k) {
    lock.store(stamped_state(k));
    CHECK(lock.sequence() == k);
    const mem_state s = lock.read();
    CHECK(s.seq == k);
    CHECK(consistent(s));
  }
  mem_state out;
  REQUIRE(lock.try_read(out));
  CHECK(out.seq == 5);
  CHECK(consistent(out));
}

TEST_CASE("payloads that are not a whole number of words round-trip exactly") {
  seqlock<payload<7>> seven(filled<7>(1));
  seqlock<payload<100>> hundred(filled<100>(1));
  payload<7> p7{1, 2, 3, 4, 5, 6, 7};
  payload<100> p100;
  for (std::size_t i = 0; i < p100.size(); ++i) p100[i] = static_cast<unsigned char>(i * 3);
  seven.store(p7);
  hundred.store(p100);
  CHECK(seven.read() == p7);
  CHECK(hundred.read() == p100);
  static_assert(seqlock<payload<7>>::word_count == 1);
  static_assert(seqlock<payload<9>>::word_count == 2);
  static_assert(seqlock<payload<100>>::word_count == 13);
  static_assert(seqlock<mem_state>::word_count * 8 >= sizeof(mem_state));
  static_assert(alignof(seqlock<payload<1>>) == 64 && sizeof(seqlock<payload<1>>) % 64 == 0);
}

TEST_CASE("try_read fails, leaving its output alone, while a store is in progress") {
  using access = pnmem::detail::seqlock_test_access<payload<8>>;
  seqlock<payload<8>> lock(filled<8>(1));
  const std::uint64_t s = access::begin_write(lock);  // seq is odd now: a writer is mid-store
  payload<8> out = filled<8>(9);
  CHECK_FALSE(lock.try_read(out));
  CHECK(out == filled<8>(9));
  CHECK(lock.sequence() == 0);  // the store in progress is not counted yet
  access::end_write(lock, s);
  CHECK(lock.sequence() == 1);
  CHECK(lock.try_read(out));
  CHECK(out == filled<8>(1));
}

TEST_CASE("no torn reads: mem_state-sized payload, 1,000,000 reads across two readers") {
  check_no_torn_reads<sizeof(mem_state)>(2, main_case_reads);
}

TEST_CASE("no torn reads across payload sizes and reader counts") {
  for (int readers : {1, 3}) {
    check_no_torn_reads<1>(readers, size_sweep_reads);
    check_no_torn_reads<7>(readers, size_sweep_reads);
    check_no_torn_reads<8>(readers, size_sweep_reads);
    check_no_torn_reads<9>(readers, size_sweep_reads);
    check_no_torn_reads<64>(readers, size_sweep_reads);
    check_no_torn_reads<100>(readers, size_sweep_reads);
    check_no_torn_reads<1000>(readers, size_sweep_reads);
  }
}

TEST_CASE("mem_state readers see whole snapshots, never older than sequence() promised") {
  check_snapshots_under_stores(
      "read", under_tsan ? 20'000 : 200'000, stamped_state,
      [](const seqlock<mem_state>& lock, std::uint64_t, mem_state& s) {
        s = lock.read();
        return true;
      },
      consistent);
}

// ---------------------------------------------------------------------------
// Partial reads: seqlock::read_ranges (and _into), and read_live (pnmem/live_state.hpp), the
// live part of a mem_state: the host fields, the first n_dies dies of each die
// array, zero in the dead die slots and the provenance.

namespace {

using pnmem::seqlock_word_range;

// A payload with a count in its head: words [1, 1 + count) and [9, 9 + count) are live.
struct counted {
  std::uint64_t count = 0;
  std::array<std::uint64_t, 8> a{};
  std::array<std::uint64_t, 8> b{};
  std::array<unsigned char, 5> tail{};  // the last word is partly padding: the tail path
};

struct counted_layout {
  static constexpr std::size_t head_words = 1;
  static std::array<seqlock_word_range, 2> ranges(const counted& head) noexcept {
    const std::size_t n = head.count < 8 ? head.count : 8;
    return {{{1, n}, {9, n}}};
  }
};

counted counted_value(std::uint64_t count, std::uint64_t live, std::uint64_t dead) {
  counted c;
  c.count = count;
  for (std::size_t i = 0; i < 8; ++i) {
    c.a[i] = i < count ? live : dead;
    c.b[i] = i < count ? live : dead;
  }
  c.tail.fill(0x77);
  return c;
}

// Which bytes of a mem_state are dead for `n` dies: the slots [n, max_dies) of
// the four die arrays and the provenance. Written from the members, not from
// the layout, so it checks the layout.
bool dead_byte(std::size_t i, int n) {
  const std::size_t live = static_cast<std::size_t>(n) * sizeof(std::uint64_t);
  const std::size_t arrays[] = {offsetof(mem_state, per_die_free_bytes), offsetof(mem_state, per_die_budget_bytes),
                                offsetof(mem_state, per_die_used_bytes), offsetof(mem_state, per_die_retiring_bytes),
                                offsetof(mem_state, per_die_read_ns)};
  for (const std::size_t at : arrays) {
    if (i >= at + live && i < at + sizeof(mem_state::per_die_free_bytes)) return true;
  }
  const std::size_t prov = offsetof(mem_state, provenance);
  return i >= prov && i < prov + sizeof(pnmem::sample_provenance);
}

// Every byte 0xa5 except n_dies.
mem_state patterned_state(int n_dies) {
  mem_state s;
  std::memset(static_cast<void*>(&s), 0xa5, sizeof s);
  s.n_dies = n_dies;
  return s;
}

// `live` is `s` in every byte outside the dead ones for die_count(s) dies, zero in those.
bool is_live_part_of(const mem_state& live, const mem_state& s) {
  const auto* l = reinterpret_cast<const unsigned char*>(&live);
  const auto* f = reinterpret_cast<const unsigned char*>(&s);
  for (std::size_t i = 0; i < sizeof(mem_state); ++i) {
    if (l[i] != (dead_byte(i, pnmem::die_count(s)) ? 0 : f[i])) return false;
  }
  return true;
}

// Store k of the threaded hunt: n_dies cycles through these, and every field the
// test looks at, dead die slots and provenance included, holds k.
constexpr int dies_cycle[] = {2, 16, 0, 5, 1, 8};
int dies_for(std::uint64_t k) { return dies_cycle[k % std::size(dies_cycle)]; }

mem_state live_stamped_state(std::uint64_t k) {
  mem_state s = stamped_state(k);
  s.n_dies = dies_for(k);
  s.per_die_retiring_bytes.fill(k);
  s.per_die_read_ns.fill(static_cast<std::int64_t>(k));
  s.host_read_ns = static_cast<std::int64_t>(k);
  s.provenance.sources_read = static_cast<std::uint32_t>(k) | 1U;
  s.provenance.limit_cgroup.fill('x');
  return s;
}

// A live copy of some live_stamped_state(k), whole: live fields k, dead ones 0.
bool live_consistent(const mem_state& s) {
  const std::uint64_t k = s.seq;
  if (s.n_dies != dies_for(k) || s.host_total_bytes != k || s.host_avail_bytes != k || s.cgroup_current_bytes != k ||
      s.sample_time_ns != static_cast<std::int64_t>(k) || s.host_read_ns != static_cast<std::int64_t>(k)) {
    return false;
  }
  for (std::size_t d = 0; d < static_cast<std::size_t>(pnmem::max_dies); ++d) {
    const std::uint64_t want = d < static_cast<std::size_t>(s.n_dies) ? k : 0;
    if (s.per_die_free_bytes[d] != want || s.per_die_budget_bytes[d] != want || s.per_die_used_bytes[d] != want ||
        s.per_die_retiring_bytes[d] != want || s.per_die_read_ns[d] != static_cast<std::int64_t>(want)) {
      return false;
    }
  }
  const pnmem::sample_provenance& p = s.provenance;
  return p.sources_read == 0 && p.meminfo_total_bytes == 0 && p.cgroup_working_set_bytes == 0 &&
         p.limit_cgroup[0] == '\0' && p.limit_cgroup[pnmem::cgroup_path_capacity - 1] == '\0';
}

// A head longer than the payload, ranges past its end and one running off it:
// what a layout might compute from a torn head.
struct wild_layout {
  static constexpr std::size_t head_words = 100;
  static std::array<seqlock_word_range, 3> ranges(const counted&) noexcept {
    return {{{1000, 5}, {16, 1000}, {static_cast<std::size_t>(-1), static_cast<std::size_t>(-1)}}};
  }
};

// A layout that does what a concurrent writer might between a reader's head copy
// and its range copy: on its first call it stores `next` into the lock being read.
// Deterministic: one thread, the store lands inside the read's first attempt.
template <class T, class Inner>
struct store_midway {
  static constexpr std::size_t head_words = Inner::head_words;
  seqlock<T>* lock;
  T next;
  int* calls;
  auto ranges(const T& head) const noexcept {
    if ((*calls)++ == 0) lock->store(next);
    return Inner::ranges(head);
  }
};

}  // namespace

TEST_CASE("read_ranges copies the head and the ranges the head names; every other word reads zero") {
  const seqlock<counted> lock(counted_value(3, 0x1111, 0xdead));
  const counted c = lock.read_ranges(counted_layout{});
  CHECK(c.count == 3);
  CHECK(c.a == std::array<std::uint64_t, 8>{0x1111, 0x1111, 0x1111, 0, 0, 0, 0, 0});
  CHECK(c.b == std::array<std::uint64_t, 8>{0x1111, 0x1111, 0x1111, 0, 0, 0, 0, 0});
  CHECK(c.tail == std::array<unsigned char, 5>{});  // not in a range

  counted out = counted_value(8, 9, 9);
  REQUIRE(lock.try_read_ranges(out, counted_layout{}));
  CHECK(out.a == c.a);
  CHECK(out.b == c.b);
  CHECK(out.tail == c.tail);
}

TEST_CASE("read_ranges clamps every range to the payload: a wild head costs nothing out of bounds") {
  // The seqlock copies what is inside the payload (ASan builds would see any byte outside).
  static_assert(seqlock<counted>::word_count == 18);
  const counted v = counted_value(8, 0x2222, 0);
  const seqlock<counted> lock(v);
  const counted c = lock.read_ranges(wild_layout{});
  CHECK(c.count == 8);
  CHECK(c.a == v.a);
  CHECK(c.b == v.b);
  CHECK(c.tail == v.tail);  // the partial last word, through the clamped head and range
}

TEST_CASE("read_live is the live part: host fields and n_dies dies; dead die slots and provenance zero") {
  for (int n : {0, 1, 2, 7, 16}) {
    CAPTURE(n);
    const mem_state s = patterned_state(n);
    const seqlock<mem_state> lock(s);
    const mem_state live = pnmem::read_live(lock);
    CHECK(is_live_part_of(live, s));
    CHECK(is_live_part_of(pnmem::live_part(s), s));
    mem_state out = patterned_state(3);
    REQUIRE(pnmem::try_read_live(lock, out));
    CHECK(std::memcmp(&out, &live, sizeof out) == 0);
  }
}

TEST_CASE("read_live with an out-of-range n_dies copies at most max_dies dies, and no provenance") {
  for (int n : {-1, -1000, pnmem::max_dies + 1, 1000, std::numeric_limits<int>::max(),
                std::numeric_limits<int>::min()}) {
    CAPTURE(n);
    const mem_state s = patterned_state(n);
    const seqlock<mem_state> lock(s);
    const mem_state live = pnmem::read_live(lock);
    CHECK(live.n_dies == n);  // the head as published
    CHECK(is_live_part_of(live, s));  // die_count(s) dies: 0 or max_dies
  }
}

// mem_state_live_layout without its shapes: the seqlock copies its ranges through the loops.
struct unshaped_live_layout {
  static constexpr std::size_t head_words = pnmem::mem_state_live_layout::head_words;
  static auto ranges(const mem_state& head) noexcept { return pnmem::mem_state_live_layout::ranges(head); }
};
static_assert(pnmem::seqlock_shaped_layout<pnmem::mem_state_live_layout, mem_state>);
static_assert(!pnmem::seqlock_shaped_layout<unshaped_live_layout, mem_state>);

TEST_CASE("a shaped layout's unrolled copies are its loops' copies, for every die count and any head") {
  using layout = pnmem::mem_state_live_layout;
  for (int n = -3; n <= pnmem::max_dies + 3; ++n) {
    CAPTURE(n);
    const mem_state s = patterned_state(n);
    CHECK(layout::ranges(s) == layout::ranges_of_shape(layout::shape(s)));
    const seqlock<mem_state> lock(s);
    const mem_state shaped = lock.read_ranges(layout{});
    const mem_state looped = lock.read_ranges(unshaped_live_layout{});
    CHECK(std::memcmp(&shaped, &looped, sizeof shaped) == 0);
    CHECK(is_live_part_of(shaped, s));
    // In place over a snapshot with more dies (its dead words stay as they were, as the loops leave them).
    mem_state a = patterned_state(pnmem::max_dies);
    mem_state b = a;
    lock.read_ranges_into(a, layout{});
    lock.read_ranges_into(b, unshaped_live_layout{});
    CHECK(std::memcmp(&a, &b, sizeof a) == 0);
  }
  CHECK(layout::shape(patterned_state(std::numeric_limits<int>::max())) == pnmem::max_dies);
  CHECK(layout::shape(patterned_state(std::numeric_limits<int>::min())) == 0);
}

TEST_CASE("refresh_ranges_into copies nothing while the payload is still the store its version names") {
  seqlock<counted> lock(counted_value(3, 0x1111, 0xdead));
  counted out{};
  std::uint64_t version = pnmem::seqlock_no_version;
  CHECK(lock.refresh_ranges_into(out, counted_layout{}, version));  // no copy yet: copies
  CHECK(out.a[2] == 0x1111);
  CHECK(version % 2 == 0);  // a copy is only ever validated at an even seq
  CHECK(lock.holds(version));

  out.a[0] = 0xbad;  // not what the lock holds: a copy would overwrite it
  CHECK_FALSE(lock.refresh_ranges_into(out, counted_layout{}, version));
  CHECK(out.a[0] == 0xbad);  // nothing was copied

  const std::uint64_t before = version;
  lock.store(counted_value(2, 0x2222, 0xdead));
  CHECK_FALSE(lock.holds(before));
  CHECK(lock.refresh_ranges_into(out, counted_layout{}, version));
  CHECK(version != before);
  CHECK(out.count == 2);
  CHECK(out.a[0] == 0x2222);
  CHECK(out.a[1] == 0x2222);

  // A version that names no copy never matches, whatever the lock's count: not even mid-store,
  // when seq is odd (a first store's seq is 1, seqlock_no_version itself).
  using access = pnmem::detail::seqlock_test_access<counted>;
  seqlock<counted> fresh_lock(counted_value(1, 0x3333, 0xdead));
  const std::uint64_t s1 = access::begin_write(fresh_lock);  // seq 0 -> 1
  CHECK_FALSE(fresh_lock.holds(pnmem::seqlock_no_version));
  access::end_write(fresh_lock, s1);
  std::uint64_t first = pnmem::seqlock_no_version;
  counted got{};
  CHECK(fresh_lock.refresh_ranges_into(got, counted_layout{}, first));
  CHECK(got.a[0] == 0x3333);

  std::uint64_t none = pnmem::seqlock_no_version;
  CHECK_FALSE(lock.holds(none));
  counted fresh{};
  CHECK(lock.refresh_ranges_into(fresh, counted_layout{}, none));
  CHECK(fresh.a[1] == 0x2222);
}

TEST_CASE("refresh_live: unchanged copies nothing; after a store with fewer dies the dead slots are cleared") {
  seqlock<mem_state> lock(live_stamped_state(1));  // 16 dies
  mem_state live = std::bit_cast<mem_state>(std::array<unsigned char, sizeof(mem_state)>{});
  std::uint64_t version = pnmem::seqlock_no_version;
  REQUIRE(pnmem::refresh_live(lock, live, version));
  CHECK(live_consistent(live));
  live.host_total_bytes = 0xbad;
  CHECK_FALSE(pnmem::refresh_live(lock, live, version));
  CHECK(live.host_total_bytes == 0xbad);  // kept: nothing copied
  for (const std::uint64_t k : {3U, 5U, 2U, 4U}) {  // 5, 8, 0 and 1 dies after 16
    CAPTURE(k);
    // The very object stored: is_live_part_of compares bytes, padding included, and a second
    // live_stamped_state(k) need not have the same padding (it does not under clang's ASan build).
    const mem_state next = live_stamped_state(k);
    lock.store(next);
    REQUIRE(pnmem::refresh_live(lock, live, version));
    CHECK(live_consistent(live));
    CHECK(is_live_part_of(live, next));
  }
}

TEST_CASE("a store between the head copy and the range copy: the attempt is discarded, the dead slots stay zero") {
  // The reader's first attempt takes n_dies = 16 from the head, then the writer
  // publishes a 2-die state whose dead slots hold garbage: the range copy picks
  // up garbage for dies 2..15. The sequence check must throw that attempt away,
  // and the retry (n_dies = 2) must not leave the garbage in the dead slots.
  mem_state before = live_stamped_state(1);
  before.n_dies = 16;
  mem_state after = live_stamped_state(2);
  after.n_dies = 2;
  after.per_die_free_bytes.fill(0xbad);  // garbage past die 1, as a careless writer might leave
  after.per_die_retiring_bytes.fill(0xbad);
  after.per_die_read_ns.fill(0xbad);
  after.per_die_free_bytes[0] = after.per_die_free_bytes[1] = 2;
  after.per_die_retiring_bytes[0] = after.per_die_retiring_bytes[1] = 2;
  after.per_die_read_ns[0] = after.per_die_read_ns[1] = 2;

  SUBCASE("read_live retries and returns the new state's live part") {
    seqlock<mem_state> lock(before);
    int calls = 0;
    const store_midway<mem_state, pnmem::mem_state_live_layout> midway{&lock, after, &calls};
    const mem_state got = lock.read_ranges(midway);
    CHECK(calls == 3);  // a discarded attempt (its copy, then its clean-up), a good one
    CHECK(got.seq == 2);
    CHECK(got.n_dies == 2);
    CHECK(is_live_part_of(got, after));
    CHECK(got.per_die_free_bytes[2] == 0);
    CHECK(got.per_die_retiring_bytes[15] == 0);
    CHECK(got.per_die_read_ns[15] == 0);
  }
  SUBCASE("try_read_live fails and leaves its output alone") {
    seqlock<mem_state> lock(before);
    int calls = 0;
    const store_midway<mem_state, pnmem::mem_state_live_layout> midway{&lock, after, &calls};
    mem_state out = patterned_state(4);
    std::array<unsigned char, sizeof(mem_state)> untouched{};
    std::memcpy(untouched.data(), &out, sizeof out);
    CHECK_FALSE(lock.try_read_ranges(out, midway));
    CHECK(std::memcmp(&out, untouched.data(), sizeof out) == 0);
    CHECK(calls == 2);  // the copy, then the clean-up of the discarded attempt
    REQUIRE(lock.try_read_ranges(out, midway));  // no store this time
    CHECK(is_live_part_of(out, after));
  }
}

TEST_CASE("read_live in place: dies past a smaller n_dies are cleared, a larger n_dies is filled") {
  seqlock<mem_state> lock(live_stamped_state(1));  // 16 dies
  // A live snapshot: zero. Zero bytes, not mem_state{}: the test compares bytes, and
  // value-initialization need not zero padding (clang's TSan build leaves it).
  mem_state live = std::bit_cast<mem_state>(std::array<unsigned char, sizeof(mem_state)>{});
  for (const std::uint64_t k : {1U, 2U, 3U, 5U, 4U, 1U, 6U, 2U}) {  // 16, 0, 5, 8, 1, 16, 2 and 0 dies
    CAPTURE(k);
    mem_state next = live_stamped_state(k);
    next.per_die_free_bytes.fill(0xbad);  // garbage past n_dies, as a careless writer might leave
    for (std::size_t d = 0; d < static_cast<std::size_t>(pnmem::die_count(next)); ++d) next.per_die_free_bytes[d] = k;
    lock.store(next);
    pnmem::read_live(lock, live);
    CHECK(live_consistent(live));
    CHECK(is_live_part_of(live, next));
    const mem_state by_value = pnmem::read_live(lock);
    CHECK(std::memcmp(&live, &by_value, sizeof live) == 0);
  }
}

TEST_CASE("read_ranges_into leaves the words outside the ranges alone") {
  const seqlock<counted> lock(counted_value(2, 0x3333, 0xdead));
  counted c = counted_value(8, 0x4444, 0x4444);
  lock.read_ranges_into(c, counted_layout{});
  CHECK(c.count == 2);
  CHECK(c.a == std::array<std::uint64_t, 8>{0x3333, 0x3333, 0x4444, 0x4444, 0x4444, 0x4444, 0x4444, 0x4444});
  CHECK(c.b == std::array<std::uint64_t, 8>{0x3333, 0x3333, 0x4444, 0x4444, 0x4444, 0x4444, 0x4444, 0x4444});
}

TEST_CASE("read_live under a writer changing n_dies: whole live parts only, dead slots zero") {
  check_snapshots_under_stores(
      "read_live", under_tsan ? 20'000 : 300'000, live_stamped_state,
      [kept = mem_state{}](const seqlock<mem_state>& lock, std::uint64_t i, mem_state& s) mutable {
        if (i % 3 == 0) {
          s = pnmem::read_live(lock);
        } else if (i % 3 == 1) {
          pnmem::read_live(lock, kept);  // refreshed in place every third read
          s = kept;
        } else {
          return pnmem::try_read_live(lock, s);  // false: raced
        }
        return true;
      },
      live_consistent);
}
