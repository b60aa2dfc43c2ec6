// bench_host_ledger.cpp - what the host ledger adds to an admission.
//
//   admit_baseline        pnmem::admit on a snapshot (the engine wrapper, no ledger)
//   ledger_admit/K        host_ledger::admit + cancel, with K other reservations
//                         outstanding (settled but not yet seen by a sample, the
//                         burst case): a lock, a sum over K entries, a snapshot
//                         copy, and a reservation pushed and removed
// The ratio ledger_admit/K : admit_baseline is the figure (BENCHMARKS.md).
#include <benchmark/benchmark.h>

#include <vector>

#include "pnmem/engine/host_ledger.hpp"

namespace {

using namespace pnmem;

struct fixed_watcher {
  mem_state state;
  bool running() const { return true; }
  const mem_state& read() const { return state; }
};

fixed_watcher roomy_box() {
  fixed_watcher w;
  w.state.host_total_bytes = 64 * GiB;
  w.state.host_avail_bytes = 48 * GiB;
  w.state.host_read_ns = 1000;
  w.state = with_derived_level(w.state);
  return w;
}

constexpr model_desc cpu_model{.kv = kv_format::fp32, .gpu_resident = false, .max_window = 8192, .max_slots = 8};

void admit_baseline(benchmark::State& st) {
  const fixed_watcher w = roomy_box();
  int n = 512;
  for (auto _ : st) {
    const admit_answer a = admit(w, cpu_model, n);
    benchmark::DoNotOptimize(a);
    n = n == 4096 ? 512 : n + 512;
  }
}
BENCHMARK(admit_baseline);

void ledger_admit(benchmark::State& st) {
  const fixed_watcher w = roomy_box();
  host_ledger ledger;
  for (std::int64_t i = 0; i < st.range(0); ++i) {
    auto r = ledger.admit(w, cpu_model, 64);
    r.held.settle_at(2000);  // after the snapshot's read: still counted
  }
  int n = 512;
  for (auto _ : st) {
    auto r = ledger.admit(w, cpu_model, n);
    benchmark::DoNotOptimize(r.answer);
    r.held.cancel();
    n = n == 4096 ? 512 : n + 512;
  }
  st.counters["outstanding"] = static_cast<double>(ledger.size());
}
BENCHMARK(ledger_admit)->Arg(0)->Arg(8)->Arg(64);

}  // namespace

BENCHMARK_MAIN();
