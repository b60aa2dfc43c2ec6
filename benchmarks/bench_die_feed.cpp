// bench_die_feed.cpp - what feeding the watcher costs per tick.
//
// The die feed runs on every watcher tick (250 ms at OK, 100 ms under pressure):
// one mem_get_info per die plus the tallies. On the fake this is the feed's own
// host cost; built with PNMEM_BENCH_CUDART it is cudaMemGetInfo (with the
// cudaSetDevice around it) on the real dies, and the program exits 77 (SKIP)
// with one line when there is no device.
//   poll/N        die_feed::poll over N dies into a sink
//   tally_retire  die_tally::retire + sub_retiring (the owner's side, per buffer)
#include <benchmark/benchmark.h>

#include <array>
#include <cstdio>
#include <memory>
#include <string>

#include "pnmem/cuda/die_feed.hpp"
#include "pnmem/cuda/fake_backend.hpp"
#if PNMEM_BENCH_CUDART
#include "pnmem/cuda/cudart_backend.hpp"
#endif

namespace {

using namespace pnmem::cuda;

#if PNMEM_BENCH_CUDART
cudart_backend& backend_for(int /*dies*/) {
  static cudart_backend gpu;
  return gpu;
}
#else
device_backend& backend_for(int dies) {
  static std::array<std::unique_ptr<fake_backend>, pnmem::max_dies + 1> fakes;
  auto& f = fakes[static_cast<std::size_t>(dies)];
  if (!f) f = std::make_unique<fake_backend>(fake_options{.devices = dies});
  return *f;
}
#endif

void poll(benchmark::State& state) {
  die_feed feed{backend_for(static_cast<int>(state.range(0)))};
  std::array<std::uint64_t, pnmem::max_dies> free_by_die{};
  const die_feed::sink sink = [&](int die, std::uint64_t f, std::uint64_t, std::uint64_t, std::uint64_t) {
    free_by_die[static_cast<std::size_t>(die)] = f;
  };
  for (auto _ : state) {
    const die_feed::poll_result r = feed.poll(sink);
    benchmark::DoNotOptimize(r);
    benchmark::DoNotOptimize(free_by_die);
  }
  state.counters["dies"] = static_cast<double>(feed.die_count());
}

#if !PNMEM_BENCH_CUDART
void tally_retire(benchmark::State& state) {
  die_tally t;
  t.add_used(1ULL << 40);
  for (auto _ : state) {
    t.retire(4096);
    t.sub_retiring(4096);
  }
  benchmark::DoNotOptimize(t.read());
}
#endif

}  // namespace

#if PNMEM_BENCH_CUDART
BENCHMARK(poll)->Arg(0);  // the cudart backend polls every die the machine has
#else
BENCHMARK(poll)->Arg(1)->Arg(8)->Arg(pnmem::max_dies);
BENCHMARK(tally_retire);
#endif

int main(int argc, char** argv) {
#if PNMEM_BENCH_CUDART
  int n = 0;
  const device_status st = backend_for(0).device_count(n);
  if (!st || n == 0) {
    std::printf("no CUDA device: %s (%s)\n", std::string(to_string(st.code)).c_str(),
                std::string(cudart_backend::error_name(st.native)).c_str());
    return 77;
  }
#endif
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
