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
//   BM_plain_copy_2dies the live words of a 2-die snapshot (mem_state_live_layout: the
//                       head, 2 dies of each die array, the fields between them; not the
//                       provenance), copied with plain loads and stores over a live
//                       snapshot kept between iterations: the bytes the live read copies.
//                       Each range whose size is a constant (0-8 dies) is one memcpy, which
//                       g++ emits as 16-byte moves.
//   BM_word_copy_2dies  the same words one 8-byte load and store at a time, no atomics: the
//                       floor for any word-by-word protocol, as BM_word_copy is for read().
//   BM_seqlock_read_2dies
//                       pnmem::read_live(lock, live): the same words through the seqlock
//                       (read_ranges_into), over a kept live snapshot. Goal: at most 2x
//                       BM_plain_copy_2dies.
//   BM_plain_copy_2dies_value, BM_seqlock_read_2dies_value
//                       the same two as by-value reads (live_part(s), read_live(lock)):
//                       each first zero-fills a whole 936-byte mem_state.
//   BM_refresh_live_unchanged
//                       pnmem::refresh_live(lock, live, version) when nothing was stored
//                       since: one atomic load, no words copied.
//   BM_live_admit       pnmem::admit (engine/admit.hpp) on a running pnmem::watcher with
//                       2 dies: one GPU-resident request, the one call an engine makes
//                       (this thread's live snapshot refreshed, then the decision). The
//                       watcher publishes every 250 ms, so almost every call finds the
//                       kept snapshot current and copies nothing: an engine's common case
//                       (many requests per poll). Goal: <= 25 ns.
//   BM_live_admit_copying
//                       the same, alternating two such watchers, so every call copies the
//                       live words (the first call after each publication).
//   BM_full_admit       the same decision on watcher.read() (the whole snapshot), as
//                       pnmem::admit did before the live read.
//   BM_admit_decision   the decision alone (admit_snapshot) on that live snapshot,
//                       already read: BM_live_admit less this is the read.
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
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "pnmem/engine/admit.hpp"
#include "pnmem/fake_sampler.hpp"
#include "pnmem/live_state.hpp"
#include "pnmem/mem_state.hpp"
#include "pnmem/seqlock.hpp"
#include "pnmem/units.hpp"
#include "pnmem/watcher.hpp"

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

// A 2-die box as the watcher publishes it: the dead die slots are zero, the
// provenance says where the host numbers came from.
mem_state sample_state_2dies() {
  mem_state s;
  s.host_total_bytes = 64 * pnmem::GiB;
  s.host_avail_bytes = 40 * pnmem::GiB;
  s.host_psi_some_avg10 = 1.5;
  s.n_dies = 2;
  for (std::size_t d = 0; d < 2; ++d) {
    s.per_die_free_bytes[d] = 30 * pnmem::GiB;
    s.per_die_budget_bytes[d] = 70 * pnmem::GiB;
    s.per_die_used_bytes[d] = 40 * pnmem::GiB;
  }
  s.seq = 1;
  s.provenance.mark_read(pnmem::host_source::meminfo);
  s.provenance.meminfo_total_bytes = s.host_total_bytes;
  s.provenance.meminfo_avail_bytes = s.host_avail_bytes;
  return s;
}

// The live words of `src` over `live` with plain loads and stores: what
// read_live(lock, live) copies, without the seqlock. Written as the fastest plain
// copy found: like the seqlock's shaped copy, the ranges of a die count of 0-8 are
// constants (mem_state_live_layout::ranges_of_shape), so each range is one memcpy
// of a constant size, which g++ emits as a few 16-byte moves. Other counts take the
// loops (with run-time sizes memcpy is a library call, and g++ turns loops into
// `rep movsq` unless told not to; either was about 3x slower on the reference machine).
// Words [First, First + Count): one memcpy of a constant size (Wide), or one 8-byte
// volatile load and a store per word, as relaxed atomic loads must be (the floor for
// any word-by-word protocol: BM_word_copy_2dies).
template <bool Wide, std::size_t First, std::size_t Count>
void plain_copy_range(const unsigned char* from, unsigned char* to) noexcept {
  constexpr std::size_t word = sizeof(std::uint64_t);
  if constexpr (Count == 0) {
    return;
  } else if constexpr (Wide) {
    std::memcpy(to + First * word, from + First * word, Count * word);
  } else {
    const volatile std::uint64_t* words = reinterpret_cast<const volatile std::uint64_t*>(from);
    [&]<std::size_t... J>(std::index_sequence<J...>) {
      ((void)[&] {
        const std::uint64_t w = words[First + J];
        std::memcpy(to + (First + J) * word, &w, word);
      }(), ...);
    }(std::make_index_sequence<Count>{});
  }
}

template <bool Wide, std::size_t Dies>
void plain_copy_shape(const unsigned char* from, unsigned char* to) noexcept {
  constexpr auto ranges = pnmem::mem_state_live_layout::ranges_of_shape(Dies);
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (plain_copy_range<Wide, ranges[I].first, ranges[I].count>(from, to), ...);
  }(std::make_index_sequence<ranges.size()>{});
}

template <bool Wide>
#if defined(__GNUC__) && !defined(__clang__)
[[gnu::optimize("no-tree-loop-distribute-patterns")]]
#endif
[[gnu::noinline]] void plain_copy_live(const mem_state& src, mem_state& live) noexcept {
  using layout = pnmem::mem_state_live_layout;
  constexpr std::size_t word = sizeof(std::uint64_t);
  const auto* from = reinterpret_cast<const unsigned char*>(&src);
  auto* to = reinterpret_cast<unsigned char*>(&live);
  plain_copy_range<Wide, 0, layout::head_words>(from, to);
  const std::size_t shape = layout::shape(src);
  const bool done = [&]<std::size_t... K>(std::index_sequence<K...>) {
    return ((shape == K && (plain_copy_shape<Wide, K>(from, to), true)) || ...);
  }(std::make_index_sequence<layout::shapes>{});
  if (done) return;
  const auto copy = [&](std::size_t first, std::size_t end) {
    for (std::size_t i = first; i < end; ++i) std::memcpy(to + i * word, from + i * word, word);
  };
  const auto ranges = layout::ranges(src);
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (copy(ranges[I].first, ranges[I].first + ranges[I].count), ...);
  }(std::make_index_sequence<std::tuple_size_v<decltype(ranges)>>{});
}

// read_live(lock, live) behind a call, as plain_copy_live is: the instruction counts compare.
[[gnu::noinline]] void seqlock_read_live(const seqlock<mem_state>& lock, mem_state& live) noexcept {
  pnmem::read_live(lock, live);
}

template <bool Wide>
void run_plain_copy_2dies(benchmark::State& state) {
  mem_state src = sample_state_2dies();
  mem_state live{};
  for (auto _ : state) {
    benchmark::DoNotOptimize(src);  // src (n_dies too) may have changed: the copy must be made again
    plain_copy_live<Wide>(src, live);
    benchmark::DoNotOptimize(live);
  }
}

void BM_plain_copy_2dies(benchmark::State& state) { run_plain_copy_2dies<true>(state); }
BENCHMARK(BM_plain_copy_2dies);

void BM_word_copy_2dies(benchmark::State& state) { run_plain_copy_2dies<false>(state); }
BENCHMARK(BM_word_copy_2dies);

void BM_seqlock_read_2dies(benchmark::State& state) {
  const seqlock<mem_state> lock(sample_state_2dies());
  mem_state live{};
  for (auto _ : state) {
    seqlock_read_live(lock, live);
    benchmark::DoNotOptimize(live);
  }
}
BENCHMARK(BM_seqlock_read_2dies);

void BM_refresh_live_unchanged(benchmark::State& state) {
  const seqlock<mem_state> lock(sample_state_2dies());
  mem_state live{};
  std::uint64_t version = pnmem::seqlock_no_version;
  pnmem::refresh_live(lock, live, version);
  for (auto _ : state) {
    benchmark::DoNotOptimize(pnmem::refresh_live(lock, live, version));
    benchmark::DoNotOptimize(live);
  }
}
BENCHMARK(BM_refresh_live_unchanged);

void BM_plain_copy_2dies_value(benchmark::State& state) {
  mem_state src = sample_state_2dies();
  for (auto _ : state) {
    benchmark::DoNotOptimize(src);
    mem_state live = pnmem::live_part(src);
    benchmark::DoNotOptimize(live);
  }
}
BENCHMARK(BM_plain_copy_2dies_value);

void BM_seqlock_read_2dies_value(benchmark::State& state) {
  const seqlock<mem_state> lock(sample_state_2dies());
  for (auto _ : state) {
    mem_state live = pnmem::read_live(lock);
    benchmark::DoNotOptimize(live);
  }
}
BENCHMARK(BM_seqlock_read_2dies_value);

// pnmem::admit on a running watcher over a fake 64 GiB host (60 GiB available)
// with two 70 GiB dies, the same decision on read(), or the decision alone.
enum class admit_path { live, live_copying, full, decision_only };

template <admit_path Path>
void run_admit(benchmark::State& state) {
  auto host = std::make_shared<pnmem::fake_host>();
  host->next.total_bytes = 64 * pnmem::GiB;
  host->next.avail_bytes = 60 * pnmem::GiB;
  pnmem::watcher<pnmem::fake_sampler> w{pnmem::fake_sampler{host}};
  if (!w.start() || w.set_die(0, 30 * pnmem::GiB, 70 * pnmem::GiB, 40 * pnmem::GiB) != pnmem::set_die_status::ok ||
      w.set_die(1, 30 * pnmem::GiB, 70 * pnmem::GiB, 40 * pnmem::GiB) != pnmem::set_die_status::ok) {
    state.SkipWithError("watcher did not start");
    return;
  }
  // A second watcher over the same host: live_copying alternates the two, so this thread's kept
  // snapshot is never the one asked for and every call copies the live words (as after a publication).
  pnmem::watcher<pnmem::fake_sampler> other{pnmem::fake_sampler{host}};
  if (!other.start() || other.set_die(0, 30 * pnmem::GiB, 70 * pnmem::GiB, 40 * pnmem::GiB) != pnmem::set_die_status::ok ||
      other.set_die(1, 30 * pnmem::GiB, 70 * pnmem::GiB, 40 * pnmem::GiB) != pnmem::set_die_status::ok) {
    state.SkipWithError("watcher did not start");
    return;
  }
  bool flip = false;
  const pnmem::model_desc model{.kv = pnmem::kv_format::q4, .gpu_resident = true, .max_window = 16384};
  const pnmem::admit_options options{};
  int n_prompt = 4096;
  const mem_state live = w.read_live();
  const auto decide = [&] {
    if constexpr (Path == admit_path::live) {
      return pnmem::admit(w, model, n_prompt, options);
    } else if constexpr (Path == admit_path::live_copying) {
      flip = !flip;
      return pnmem::admit(flip ? other : w, model, n_prompt, options);
    } else if constexpr (Path == admit_path::full) {
      return pnmem::admit_snapshot(w.read(), model, n_prompt, options);
    } else {
      benchmark::DoNotOptimize(live);  // as if just read
      return pnmem::admit_snapshot(live, model, n_prompt, options);
    }
  };
  if (w.read().n_dies != 2 || decide().status != pnmem::admit_status::admitted) {
    state.SkipWithError("the 2-die watcher must admit the request");
    return;
  }
  for (auto _ : state) {
    benchmark::DoNotOptimize(n_prompt);
    const pnmem::admit_answer a = decide();
    benchmark::DoNotOptimize(a);
  }
  w.stop();
  other.stop();
}

void BM_live_admit(benchmark::State& state) { run_admit<admit_path::live>(state); }
BENCHMARK(BM_live_admit);

void BM_live_admit_copying(benchmark::State& state) { run_admit<admit_path::live_copying>(state); }
BENCHMARK(BM_live_admit_copying);

void BM_full_admit(benchmark::State& state) { run_admit<admit_path::full>(state); }
BENCHMARK(BM_full_admit);

void BM_admit_decision(benchmark::State& state) { run_admit<admit_path::decision_only>(state); }
BENCHMARK(BM_admit_decision);

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
