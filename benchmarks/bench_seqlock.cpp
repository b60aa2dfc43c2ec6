// bench_seqlock.cpp - what reading the published mem_state costs.
//
//   BM_plain_copy       copying a mem_state: what any snapshot read pays at least.
//   BM_word_copy        copying it one 8-byte load and store at a time, no atomics:
//                       the floor for any word-by-word protocol. A plain copy moves
//                       16-64 bytes per instruction (rep movs, vector moves); a
//                       relaxed atomic load cannot be widened or vectorised.
//   BM_seqlock_read     an uncontended seqlock<mem_state>::read(); the goal is at
//                       most 2x BM_plain_copy, the floor is BM_word_copy.
//   BM_seqlock_try_read one uncontended try_read().
//   BM_seqlock_store    one store() with no readers: the writer's cost.
//   BM_contended        N reader threads call read() in a loop while one writer
//                       stores continuously, for a fixed wall-clock slice; reports
//                       reads_per_s (all readers), writes_per_s, and how many
//                       reads each reader completes per second.
//
// Run: bench_seqlock --benchmark_repetitions=10 --benchmark_report_aggregates_only=true
// and quote medians (the machines are shared and noisy). BM_contended has one
// more thread than readers: on a box with fewer cores than that, the figures
// measure the scheduler as much as the seqlock.
#include <benchmark/benchmark.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "pnmem/mem_state.hpp"
#include "pnmem/seqlock.hpp"
#include "pnmem/units.hpp"

namespace {

using pnmem::mem_state;
using pnmem::seqlock;

// A realistic snapshot: a host and four dies. The values do not change the
// cost of a copy; they only keep the benchmark honest about what it copies.
mem_state sample_state() {
  mem_state s;
  s.host_total_bytes = 64 * pnmem::GiB;
  s.host_avail_bytes = 20 * pnmem::GiB;
  s.host_psi_some_avg10 = 1.5;
  s.n_dies = 4;
  for (std::size_t d = 0; d < 4; ++d) {
    s.per_die_free_bytes[d] = 10 * pnmem::GiB;
    s.per_die_budget_bytes[d] = 70 * pnmem::GiB;
    s.per_die_used_bytes[d] = 50 * pnmem::GiB;
  }
  s.seq = 1;
  return s;
}

void set_bytes(benchmark::State& state) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(sizeof(mem_state)));
}

void BM_plain_copy(benchmark::State& state) {
  mem_state src = sample_state();
  for (auto _ : state) {
    benchmark::DoNotOptimize(src);  // src may have changed: the copy must be made again
    mem_state dst = src;
    benchmark::DoNotOptimize(dst);
  }
  set_bytes(state);
}
BENCHMARK(BM_plain_copy);

void BM_word_copy(benchmark::State& state) {
  static_assert(sizeof(mem_state) % sizeof(std::uint64_t) == 0);
  constexpr std::size_t n = sizeof(mem_state) / sizeof(std::uint64_t);
  mem_state src = sample_state();
  std::array<std::uint64_t, n> words{};
  std::memcpy(words.data(), &src, sizeof(src));
  for (auto _ : state) {
    benchmark::DoNotOptimize(words);
    mem_state dst;  // zeroed, then filled: what the seqlock's read() does
    // volatile keeps the loads 8 bytes wide, as relaxed atomic loads are.
    const volatile std::uint64_t* from = words.data();
    auto* to = reinterpret_cast<unsigned char*>(&dst);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t w = from[i];
      std::memcpy(to + i * sizeof(w), &w, sizeof(w));
    }
    benchmark::DoNotOptimize(dst);
  }
  set_bytes(state);
}
BENCHMARK(BM_word_copy);

void BM_seqlock_read(benchmark::State& state) {
  const seqlock<mem_state> lock(sample_state());
  for (auto _ : state) {
    mem_state dst = lock.read();
    benchmark::DoNotOptimize(dst);
  }
  set_bytes(state);
}
BENCHMARK(BM_seqlock_read);

void BM_seqlock_try_read(benchmark::State& state) {
  const seqlock<mem_state> lock(sample_state());
  mem_state dst;
  for (auto _ : state) {
    const bool ok = lock.try_read(dst);
    benchmark::DoNotOptimize(ok);
    benchmark::DoNotOptimize(dst);
  }
}
BENCHMARK(BM_seqlock_try_read);

void BM_seqlock_store(benchmark::State& state) {
  seqlock<mem_state> lock(sample_state());
  mem_state next = sample_state();
  for (auto _ : state) {
    ++next.seq;
    benchmark::DoNotOptimize(next);
    lock.store(next);
  }
  benchmark::DoNotOptimize(lock.sequence());
}
BENCHMARK(BM_seqlock_store);

// Wall-clock slice each repetition of BM_contended runs for.
constexpr auto contended_slice = std::chrono::milliseconds(200);

void BM_contended(benchmark::State& state) {
  const auto readers = static_cast<int>(state.range(0));
  for (auto _ : state) {
    seqlock<mem_state> lock(sample_state());
    std::atomic<bool> stop{false};
    std::atomic<int> started{0};
    std::atomic<std::uint64_t> reads{0};
    std::uint64_t writes = 0;

    std::vector<std::thread> threads;
    for (int r = 0; r < readers; ++r) {
      threads.emplace_back([&] {
        started.fetch_add(1);
        std::uint64_t n = 0;
        while (!stop.load(std::memory_order_relaxed)) {
          mem_state s = lock.read();
          benchmark::DoNotOptimize(s);
          ++n;
        }
        reads.fetch_add(n);
      });
    }
    while (started.load() < readers) std::this_thread::yield();

    // This thread is the writer: it stores continuously for the slice.
    mem_state next = sample_state();
    const auto start = std::chrono::steady_clock::now();
    auto now = start;
    while (now - start < contended_slice) {
      for (int i = 0; i < 64; ++i) {  // check the clock every 64 stores, not every store
        ++next.seq;
        lock.store(next);
      }
      writes += 64;
      now = std::chrono::steady_clock::now();
    }
    stop.store(true);
    for (auto& t : threads) t.join();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    state.SetIterationTime(seconds);
    const double total_reads = static_cast<double>(reads.load());
    state.counters["reads_per_s"] = total_reads / seconds;
    state.counters["reads_per_s_per_reader"] = total_reads / seconds / readers;
    state.counters["writes_per_s"] = static_cast<double>(writes) / seconds;
  }
}
BENCHMARK(BM_contended)
    ->ArgName("readers")
    ->Arg(1)
    ->Arg(2)
    ->Arg(4)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
