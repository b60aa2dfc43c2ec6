// bench_buffer_owner.cpp - the buffer owner's protocol overhead on the fake backend.
//
// What is measured is the owner's host-side cost (turn, reaps, fences, event
// pool, bookkeeping) plus the fake's bookkeeping for the calls it makes; the
// fake's time only moves when told, so no device time is in these numbers.
//   step      step_begin + kernel submit + poll to completion (no move)
//   bind      a bind that needs no move (the common case: capacity suffices)
//   resize    a resize that moves every buffer (alloc, copy, retire) and its reap
#include <benchmark/benchmark.h>

#include "../tests/cuda/owner_test_support.hpp"
#include "pnmem/cuda/buffer_owner.hpp"
#include "pnmem/cuda/fake_backend.hpp"

namespace {

using namespace pnmem::cuda;
using namespace pnmem::cuda::test;

struct bench_rig {
  bench_rig() {
    fake_options o;
    o.copy_ticks = 1;
    dev.emplace(o);
    (void)dev->stream_create(0, home);
    owner_options opt;
    opt.home_stream = home;
    opt.shape = small_shape();
    owner.emplace(*dev, opt);
    (void)owner->try_bind({4, 64}, plan_at(pnmem::mem_level::ok));
  }
  ~bench_rig() {
    dev->run_until_idle();
    (void)owner->try_release_all();
    dev->run_until_idle();
    owner->reap();
    owner.reset();
    (void)dev->stream_destroy(home);
    dev->run_until_idle();
  }
  std::optional<fake_backend> dev;
  stream_handle home;
  std::optional<buffer_owner> owner;
};

void BM_owner_step(benchmark::State& state) {
  bench_rig r;
  for (auto _ : state) {
    auto s = r.owner->try_step_begin(r.home);
    if (!s.token) {
      state.SkipWithError("step_begin failed");
      break;
    }
    r.dev->submit(r.home, {}, 1);
    while (r.owner->poll(*s.token) == step_state::running) r.dev->advance(1);
  }
}
BENCHMARK(BM_owner_step);

void BM_owner_bind_no_move(benchmark::State& state) {
  bench_rig r;
  const auto plan = plan_at(pnmem::mem_level::ok);
  for (auto _ : state) benchmark::DoNotOptimize(r.owner->try_bind({2, 64}, plan));
}
BENCHMARK(BM_owner_bind_no_move);

void BM_owner_resize_move(benchmark::State& state) {
  bench_rig r;
  const auto plan = plan_at(pnmem::mem_level::ok);
  int slots = 4;
  for (auto _ : state) {
    slots = slots == 4 ? 5 : 4;
    benchmark::DoNotOptimize(r.owner->try_resize({slots, 64}, plan));
    // Let the copies, frees and fence run so the retire list stays short.
    r.dev->run_until_idle();
    r.owner->reap();
  }
}
BENCHMARK(BM_owner_resize_move);

}  // namespace

BENCHMARK_MAIN();
