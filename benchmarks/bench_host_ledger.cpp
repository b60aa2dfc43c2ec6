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
//
// Linux: the same ledger joined to a box ledger (pnmem/linux/box_ledger.hpp, a file of this run's own in
// /dev/shm), as every process of a box that shares one admits:
//   box_admit/K           box_ledger admit + cancel with K other reservations of this process settled
//                         and not yet seen (the box's settle ring remembers the newest 4096)
//   box_admit_holders/P   the same with P-1 other holders joined, each holding a reservation
//   box_contended/P       P processes (this one and P-1 fork()ed children) admitting and cancelling in a
//                         loop on one ledger at once; real time per admission of this process
// The figure: box_admit/0 : (live_admit + rmw_pair) (the goal: at most 1.3x), flat in K and P.
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "pnmem/engine/host_ledger.hpp"
#include "pnmem/fake_sampler.hpp"
#include "pnmem/watcher.hpp"

#if PNMEM_BENCH_BOX
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <string>

#include "pnmem/linux/box_ledger.hpp"
#endif

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


#if PNMEM_BENCH_BOX
// A box ledger of this benchmark's own: a file in /dev/shm, removed when it ends.
struct box_file {
  std::string path = "/dev/shm/pnmem-bench-" + std::to_string(::getpid()) + ".ledger";
  box_file() { ::unlink(path.c_str()); }
  ~box_file() { ::unlink(path.c_str()); }
  box_file(const box_file&) = delete;
  box_file& operator=(const box_file&) = delete;
  std::shared_ptr<box_link> join() const {
    linux_os::box_options o;
    o.ledger = path;
    o.log = [](std::string_view) {};
    return linux_os::join_box(o).link;
  }
};

// One admission and its cancel, as run_ledger's loop does.
template <class W>
void admit_cancel(host_ledger& ledger, const W& w, int& n) {
  auto r = ledger.admit(w, cpu_model, n);
  benchmark::DoNotOptimize(r.answer);
  r.held.cancel();
  n = n == 4096 ? 512 : n + 512;
}

void box_admit(benchmark::State& st) {
  box b;
  box_file f;
  std::shared_ptr<box_link> link = f.join();
  if (!b.w.start() || link == nullptr) {
    st.SkipWithError("watcher did not start, or the box ledger could not be joined");
    return;
  }
  host_ledger ledger{link};
  for (std::int64_t i = 0; i < st.range(0); ++i) {
    auto r = ledger.reserve_bytes(b.w, 1024);
    if (r.answer.status != admit_status::admitted) {
      st.SkipWithError("the outstanding reservations must be admitted");
      return;
    }
    r.held.settle_at(ledger.now_ns() + std::int64_t{3600} * 1'000'000'000);
  }
  int n = 512;
  for (auto _ : st) admit_cancel(ledger, b.w, n);
  st.counters["processes"] = static_cast<double>(ledger.box_processes());
  b.w.stop();
}
BENCHMARK(box_admit)->Arg(0)->Arg(8)->Arg(64)->Arg(1024)->Arg(65536);

void box_admit_holders(benchmark::State& st) {
  box b;
  box_file f;
  if (!b.w.start()) {
    st.SkipWithError("watcher did not start");
    return;
  }
  // P-1 other holders (each its own open file description and liveness lock, as another process has),
  // each holding one unsettled reservation.
  std::vector<std::unique_ptr<host_ledger>> others;
  std::vector<host_ledger::reservation> held;
  for (std::int64_t i = 1; i < st.range(0); ++i) {
    others.push_back(std::make_unique<host_ledger>(f.join()));
    auto r = others.back()->reserve_bytes(b.w, 1024);
    held.push_back(std::move(r.held));
  }
  host_ledger ledger{f.join()};
  if (!ledger.box_joined() || ledger.box_processes() != static_cast<std::uint32_t>(st.range(0))) {
    st.SkipWithError("the holders did not all join");
    return;
  }
  int n = 512;
  for (auto _ : st) admit_cancel(ledger, b.w, n);
  st.counters["processes"] = static_cast<double>(ledger.box_processes());
  b.w.stop();
}
BENCHMARK(box_admit_holders)->Arg(1)->Arg(2)->Arg(8)->Arg(64);

// P-1 children admit and cancel on the ledger while this process is measured (real time: a process
// waiting for the lock is not on the CPU).
void box_contended(benchmark::State& st) {
  box_file f;
  struct shared {
    std::atomic<int> ready{0};
    std::atomic<bool> stop{false};
  };
  void* mem = ::mmap(nullptr, sizeof(shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    st.SkipWithError("mmap failed");
    return;
  }
  auto* sh = new (mem) shared;
  std::vector<pid_t> kids;
  for (std::int64_t i = 1; i < st.range(0); ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      box cb;
      host_ledger ledger{f.join()};
      int n = 512;
      if (cb.w.start() && ledger.box_joined()) {
        sh->ready.fetch_add(1);
        while (!sh->stop.load(std::memory_order_relaxed)) admit_cancel(ledger, cb.w, n);
        cb.w.stop();
      }
      ::_exit(0);
    }
    if (pid > 0) kids.push_back(pid);
  }
  {
    box b;
    host_ledger ledger{f.join()};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (sh->ready.load() < static_cast<int>(kids.size()) && std::chrono::steady_clock::now() < deadline) {
      ::usleep(1000);
    }
    if (!b.w.start() || sh->ready.load() != static_cast<int>(kids.size())) {
      st.SkipWithError("the watcher or a child did not start");
    } else {
      int n = 512;
      for (auto _ : st) admit_cancel(ledger, b.w, n);
      st.counters["processes"] = static_cast<double>(ledger.box_processes());
    }
    sh->stop.store(true);
    for (pid_t k : kids) ::waitpid(k, nullptr, 0);
    b.w.stop();
  }
  sh->~shared();
  ::munmap(mem, sizeof(shared));
}
BENCHMARK(box_contended)->Arg(1)->Arg(2)->Arg(8)->UseRealTime();
#endif

}  // namespace

BENCHMARK_MAIN();
