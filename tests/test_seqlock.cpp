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
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

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
    // Once there is enough overlap, yield every 16 stores: a writer storing
    // back to back can starve a reader of a large payload indefinitely on a
    // loaded 2-core machine (the contended benchmark shows it), and this test
    // hunts torn reads, not starvation.
    if (result.writes >= min_writes && (result.writes & 15U) == 0) std::this_thread::yield();
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
  seqlock<mem_state> lock(stamped_state(0));
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> bad{0};
  std::atomic<std::uint64_t> reads{0};
  std::atomic<int> started{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&] {
      started.fetch_add(1);
      std::uint64_t last = 0;
      std::uint64_t local_bad = 0;
      std::uint64_t local_reads = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        const std::uint64_t promised = lock.sequence();
        const mem_state s = lock.read();
        ++local_reads;
        // Store k carries seq k: a copy is whole, at least as new as the count
        // read before it, and never older than this reader's previous copy.
        if (!consistent(s) || s.seq < promised || s.seq < last) ++local_bad;
        last = s.seq;
      }
      bad.fetch_add(local_bad);
      reads.fetch_add(local_reads);
    });
  }
  while (started.load() < 2) std::this_thread::yield();  // the stores must overlap the reads
  const std::uint64_t stores = under_tsan ? 20'000 : 200'000;
  for (std::uint64_t k = 1; k <= stores; ++k) lock.store(stamped_state(k));
  stop.store(true);
  for (auto& t : readers) t.join();
  MESSAGE("mem_state: " << reads.load() << " reads over " << stores << " stores");
  CHECK(lock.sequence() == stores);
  CHECK(reads.load() > 0);
  CHECK(bad.load() == 0);
}
