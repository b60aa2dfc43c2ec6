// bench_host_ledger.cpp - what the host ledger adds to an admission, and how that grows with the
// reservations outstanding. All on a running pnmem::watcher over a fake 64 GiB host (60 GiB
// available), as an engine calls it (the watcher publishes every 250 ms; almost every call finds
// the snapshot current).
//
//   live_admit            pnmem::admit (engine/admit.hpp), the host path, no ledger: the baseline
//                         (bench_seqlock's BM_live_admit is the GPU-resident one)
//   ledger_admit/K        host_ledger::admit + cancel with K other reservations outstanding, settled
//                         but not yet seen by a sample (a burst, or a prompt cache's entries)
//   ledger_admit_ttl/K    the same with the K outstanding unsettled, each with a time to live (taken
//                         on an HTTP thread, not yet spent): the expiry heap is non-empty, so each
//                         admission reads the clock
//   rmw_pair              two locked read-modify-writes on one word (a reservation's add, then its
//                         release's subtract), with the watcher's thread running (a process with one
//                         thread may skip the lock prefix): the least any ledger that orders its
//                         admitters adds to live_admit, with a lock or without
// The figures are the ratios ledger_admit/K : ledger_admit/0 (the goal: at most 1.5x at every K up
// to 65536) and ledger_admit/0 : live_admit (at most 3x); BENCHMARKS.md.
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "pnmem/engine/host_ledger.hpp"
#include "pnmem/fake_sampler.hpp"
#include "pnmem/watcher.hpp"

namespace {

using namespace pnmem;

constexpr model_desc cpu_model{.kv = kv_format::fp32, .gpu_resident = false, .max_window = 8192, .max_slots = 8};

struct box {
  std::shared_ptr<fake_host> host = std::make_shared<fake_host>();
  watcher<fake_sampler> w;
  box() : w(make_sampler(host)) {}
  static fake_sampler make_sampler(const std::shared_ptr<fake_host>& h) {
    h->next.total_bytes = 64 * GiB;
    h->next.avail_bytes = 60 * GiB;
    return fake_sampler{h};
  }
};

void live_admit(benchmark::State& st) {
  box b;
  if (!b.w.start()) {
    st.SkipWithError("watcher did not start");
    return;
  }
  int n = 512;
  for (auto _ : st) {
    const admit_answer a = admit(b.w, cpu_model, n);
    benchmark::DoNotOptimize(a);
    n = n == 4096 ? 512 : n + 512;
  }
  b.w.stop();
}
BENCHMARK(live_admit);

void rmw_pair(benchmark::State& st) {
  box b;  // a second thread, as in every other benchmark here
  if (!b.w.start()) {
    st.SkipWithError("watcher did not start");
    return;
  }
  std::atomic<std::uint64_t> pending{0};
  std::uint64_t bytes = 1;
  for (auto _ : st) {
    const std::uint64_t before = pending.fetch_add(bytes, std::memory_order_acq_rel);
    pending.fetch_sub(bytes, std::memory_order_acq_rel);
    bytes = (before & 1) + 1;  // the next add waits for this one's result
  }
  benchmark::DoNotOptimize(pending.load());
  b.w.stop();
}
BENCHMARK(rmw_pair);

// K reservations of 1 KiB outstanding: settled far in the future (no sample has seen them), or
// unsettled with a time to live of an hour.
template <bool Ttl>
void run_ledger(benchmark::State& st) {
  box b;
  if (!b.w.start()) {
    st.SkipWithError("watcher did not start");
    return;
  }
  host_ledger ledger;
  std::vector<host_ledger::reservation> kept;
  host_ledger::reserve_options o;
  if (Ttl) o.ttl = std::chrono::hours(1);
  for (std::int64_t i = 0; i < st.range(0); ++i) {
    auto r = ledger.reserve_bytes(b.w, 1024, o);
    if (r.answer.status != admit_status::admitted) {
      st.SkipWithError("the outstanding reservations must be admitted");
      return;
    }
    if (Ttl) {
      kept.push_back(std::move(r.held));
    } else {
      r.held.settle_at(ledger.now_ns() + std::int64_t{3600} * 1'000'000'000);
    }
  }
  int n = 512;
  for (auto _ : st) {
    auto r = ledger.admit(b.w, cpu_model, n);
    benchmark::DoNotOptimize(r.answer);
    r.held.cancel();
    n = n == 4096 ? 512 : n + 512;
  }
  st.counters["outstanding"] = static_cast<double>(ledger.size());
  b.w.stop();
}

void ledger_admit(benchmark::State& st) { run_ledger<false>(st); }
BENCHMARK(ledger_admit)->Arg(0)->Arg(8)->Arg(64)->Arg(1024)->Arg(65536);

void ledger_admit_ttl(benchmark::State& st) { run_ledger<true>(st); }
BENCHMARK(ledger_admit_ttl)->Arg(8)->Arg(1024)->Arg(65536);

}  // namespace

BENCHMARK_MAIN();
