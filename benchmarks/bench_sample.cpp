// One host sample of this machine's real /proc and cgroup files, beside its floor.
//
// BM_sample_floor re-reads (pread, no parsing) exactly the files one sample()
// reads, through the same open descriptors; BM_sample_linux is the whole
// sample(): the reads plus parsing, the cgroup walk and the formula. Goal:
// sample <= 1.25 x floor, i.e. the sampler costs little beyond the kernel's own
// work of producing the text.
#include <benchmark/benchmark.h>

#include "pnmem/linux/linux_sampler.hpp"

namespace {

void BM_sample_linux(benchmark::State& state) {
  pnmem::linux_sampler sampler;
  (void)sampler.sample();  // locate the cgroup and open the files outside the loop
  for (auto _ : state) {
    pnmem::host_sample h = sampler.sample();
    benchmark::DoNotOptimize(h);
  }
}
BENCHMARK(BM_sample_linux);

void BM_sample_floor(benchmark::State& state) {
  pnmem::linux_sampler sampler;
  (void)sampler.sample();  // so read_all_for_benchmark knows the files
  for (auto _ : state) {
    std::size_t bytes = sampler.read_all_for_benchmark();
    benchmark::DoNotOptimize(bytes);
  }
  state.counters["bytes"] = static_cast<double>(sampler.read_all_for_benchmark());
}
BENCHMARK(BM_sample_floor);

}  // namespace

BENCHMARK_MAIN();
