// owner_protocol.hpp - the buffer owner's protocol tests, written once over a device fixture.
//
// Instantiated on the fake (test_buffer_owner_protocol.cpp) and on the real
// runtime (test_buffer_owner_cudart.cpp, exit 77 without a GPU), each in both
// allocation modes: with memory pools where the device has them, and with the
// plain fallback (cudaMalloc/cudaFree behind the retire fence) forced. No
// fake-only API here: the "kernel" is a copy between the owner's own buffers,
// and a step is kept in flight by holding its stream. A fixture supplies:
//   device_backend& backend();
//   static constexpr bool force_plain;  // pools turned off: the owner must be in plain mode
//   void hold(stream_handle s);  // work queued on s after this waits for release()
//   void release();
//   void settle();               // every queued op has finished
//   void check_clean();          // no use-after-free seen (the fake's violations)
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <optional>

#include "owner_test_support.hpp"
#include "pnmem/cuda/buffer_owner.hpp"

namespace pnmem::cuda::test {

template <class F>
struct owner_rig {
  F f;
  stream_handle home;
  stream_handle side;  // a second stream for steps; outlives the owner, as moves fence it
  std::optional<buffer_owner> owner;
  model_shape shape = small_shape();

  owner_rig() {
    REQUIRE(f.backend().stream_create(0, home));
    REQUIRE(f.backend().stream_create(0, side));
    owner_options o;
    o.home_stream = home;
    o.shape = shape;
    owner.emplace(f.backend(), o);
  }
  ~owner_rig() {
    f.release();
    f.settle();
    if (owner->try_release_all().ok()) {
      f.settle();
      owner->reap();
      CHECK(owner->tally().retiring_bytes == 0);
    }
    owner.reset();
    (void)f.backend().stream_destroy(home);
    (void)f.backend().stream_destroy(side);
    f.settle();
    f.check_clean();
  }
  // The first poll fences the step's work; then let the device finish it.
  void finish(step_token& t) {
    (void)owner->poll(t);
    f.settle();
    REQUIRE(owner->poll(t) == step_state::complete);
  }
  // A step's work: read K of layer 0 into V of layer 0 (one stripe).
  void work(const step_token& t) {
    const decode_buffers& b = t.buffers();
    const auto bytes = static_cast<std::size_t>(kv_row_bytes(shape, b.kv));
    REQUIRE(f.backend().copy_async(b.v[0], b.k[0], bytes, t.stream()));
  }
  std::size_t row_bytes() const { return static_cast<std::size_t>(kv_row_bytes(shape, pnmem::kv_format::fp32)); }
};

// Pinned host memory the test fills and reads (the only host memory both
// backends let a copy touch). Freed after everything has settled.
template <class F>
struct pinned_buffer {
  F& f;
  void* p = nullptr;
  std::size_t bytes;
  pinned_buffer(F& fixture, std::size_t n, unsigned char fill) : f(fixture), bytes(n) {
    REQUIRE(f.backend().alloc_pinned(n, p));
    std::memset(p, fill, n);
  }
  ~pinned_buffer() {
    if (p != nullptr) (void)f.backend().free_pinned(p);
  }
  bool all(unsigned char value) const {
    const auto* b = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < bytes; ++i)
      if (b[i] != value) return false;
    return true;
  }
};

TEST_CASE_TEMPLATE_DEFINE("protocol: a step holds the turn until poll sees its work done", F, owner_turn) {
  owner_rig<F> r;
  REQUIRE(r.owner->try_bind({2, 8}, plan_at(pnmem::mem_level::ok)).status.ok());
  auto s = r.owner->try_step_begin(r.home);
  REQUIRE(s.status.ok());
  r.f.hold(r.home);
  r.work(*s.token);
  CHECK(r.owner->poll(*s.token) == step_state::running);
  CHECK(r.owner->try_bind({4, 8}, plan_at(pnmem::mem_level::ok)).status.code == owner_errc::busy);
  CHECK(r.owner->try_resize({1, 8}, plan_at(pnmem::mem_level::ok)).status.code == owner_errc::busy);
  r.f.release();
  r.f.settle();
  CHECK(r.owner->poll(*s.token) == step_state::complete);
  const auto b = r.owner->try_bind({4, 8}, plan_at(pnmem::mem_level::ok));
  REQUIRE(b.status.ok());
  CHECK(b.moved);
}

TEST_CASE_TEMPLATE_DEFINE("protocol: a move under queued work retires, and the graph goes stale", F, owner_retire) {
  owner_rig<F> r;
  REQUIRE(r.owner->try_bind({2, 8}, plan_at(pnmem::mem_level::ok)).status.ok());
  graph_token g;
  {
    auto s = r.owner->try_step_begin(r.home);
    REQUIRE(s.status.ok());
    g = r.owner->graph_captured(*s.token, 7);
    r.work(*s.token);
    r.finish(*s.token);
  }
  // Work queued outside any step (e.g. a prefill copy) still reads the old K:
  // the resize's copies and the retire fence queue behind it.
  r.f.hold(r.home);
  REQUIRE(r.owner->try_resize({3, 8}, plan_at(pnmem::mem_level::ok)).status.ok());
  CHECK(r.owner->tally().retiring_bytes > 0);
  r.owner->reap();
  CHECK(r.owner->tally().retiring_bytes > 0);  // the fence cannot have passed the gate
  r.f.release();
  r.f.settle();
  r.owner->reap();
  CHECK(r.owner->tally().retiring_bytes == 0);
  auto s = r.owner->try_step_begin(r.home);
  REQUIRE(s.status.ok());
  CHECK(r.owner->graph_for_launch(*s.token, g) == graph_status::recapture);
  r.finish(*s.token);
}

TEST_CASE_TEMPLATE_DEFINE("protocol: the owner says how the device allocates, from its first bind on", F, owner_mode) {
  owner_rig<F> r;
  CHECK(r.owner->memory_mode() == alloc_mode::unknown);
  alloc_mode device_mode = alloc_mode::unknown;
  REQUIRE(r.f.backend().device_alloc_mode(0, device_mode));
  MESSAGE("device 0 allocation mode: " << doctest::String(to_string(device_mode).data()));
  if (F::force_plain) CHECK(device_mode == alloc_mode::plain);
  REQUIRE(r.owner->try_bind({2, 8}, plan_at(pnmem::mem_level::ok)).status.ok());
  CHECK(r.owner->memory_mode() == device_mode);
  CHECK(r.owner->tally().mode == device_mode);
  auto s = r.owner->try_step_begin(r.home);
  REQUIRE(s.status.ok());
  r.work(*s.token);
  r.finish(*s.token);
}

TEST_CASE_TEMPLATE_DEFINE("protocol: ladder ceiling clamps, rung 4a picks Q4 at allocation only", F, owner_ladder) {
  owner_rig<F> r;
  const auto b = r.owner->try_bind({8, 8}, plan_at(pnmem::mem_level::critical));
  REQUIRE(b.status.ok());
  CHECK(b.bound_slots == 1);
  CHECK(b.kv == pnmem::kv_format::q4);
  REQUIRE(r.owner->try_release_all().ok());
  const auto f32 = r.owner->try_bind({8, 8}, plan_at(pnmem::mem_level::ok));
  CHECK(f32.kv == pnmem::kv_format::fp32);
  CHECK(r.owner->try_resize({2, 16}, plan_at(pnmem::mem_level::watch)).kv == pnmem::kv_format::fp32);
}

// Ordering 1 (note_stream): a move copies on the home stream; a step on a
// second stream must wait for those copies, or it reads the new buffers
// before the live slots arrived in them.
TEST_CASE_TEMPLATE_DEFINE("protocol: a step on a second stream reads the moved data, not the empty new buffer", F,
                          owner_second_stream_after_move) {
  owner_rig<F> r;
  const stream_handle side = r.side;
  {
    pinned_buffer<F> pattern(r.f, r.row_bytes(), 0x5a);
    pinned_buffer<F> out(r.f, r.row_bytes(), 0x00);
    REQUIRE(r.owner->try_bind({2, 8}, plan_at(pnmem::mem_level::ok)).status.ok());
    {
      auto s = r.owner->try_step_begin(r.home);
      REQUIRE(s.status.ok());
      REQUIRE(r.f.backend().copy_async(s.token->buffers().k[0], pattern.p, pattern.bytes, r.home));
      r.finish(*s.token);
    }
    r.f.hold(r.home);  // the move's copies queue behind this
    const auto b = r.owner->try_resize({3, 8}, plan_at(pnmem::mem_level::ok));
    REQUIRE(b.status.ok());
    REQUIRE(b.moved);
    auto s = r.owner->try_step_begin(side);
    REQUIRE(s.status.ok());
    REQUIRE(r.f.backend().copy_async(out.p, s.token->buffers().k[0], out.bytes, side));
    r.f.release();
    r.finish(*s.token);
    CHECK(out.all(0x5a));  // slot 0's first row, moved before the step read it
  }
}

// Ordering 2 (the retire fence's first step): work the engine queued on a
// second stream of the model before a move still reads the old buffers; the
// home stream must wait for it before their stream-ordered free.
TEST_CASE_TEMPLATE_DEFINE("protocol: work on a second stream before a move is fenced before the old buffers go", F,
                          owner_second_stream_before_move) {
  owner_rig<F> r;
  const stream_handle side = r.side;
  {
    pinned_buffer<F> pattern(r.f, r.row_bytes(), 0xa5);
    pinned_buffer<F> out(r.f, r.row_bytes(), 0x00);
    REQUIRE(r.owner->try_bind({2, 8}, plan_at(pnmem::mem_level::ok)).status.ok());
    void* old_k = nullptr;
    {
      auto s = r.owner->try_step_begin(side);  // `side` becomes one of the model's streams
      REQUIRE(s.status.ok());
      old_k = s.token->buffers().k[0];
      REQUIRE(r.f.backend().copy_async(old_k, pattern.p, pattern.bytes, side));
      r.finish(*s.token);
    }
    // Between steps: read a finished sequence's KV out on that stream (held).
    r.f.hold(side);
    REQUIRE(r.f.backend().copy_async(out.p, old_k, out.bytes, side));
    REQUIRE(r.owner->try_resize({3, 8}, plan_at(pnmem::mem_level::ok)).status.ok());
    r.owner->reap();
    CHECK(r.owner->tally().retiring_bytes > 0);  // the fence cannot pass the held read
    r.f.release();
    r.f.settle();
    CHECK(out.all(0xa5));  // the read saw the old KV, not freed memory
    r.owner->reap();
    CHECK(r.owner->tally().retiring_bytes == 0);
  }
}

}  // namespace pnmem::cuda::test

#define PNMEM_OWNER_PROTOCOL(fixture)                                  \
  TEST_CASE_TEMPLATE_INVOKE(owner_mode, fixture);                       \
  TEST_CASE_TEMPLATE_INVOKE(owner_turn, fixture);                       \
  TEST_CASE_TEMPLATE_INVOKE(owner_retire, fixture);                     \
  TEST_CASE_TEMPLATE_INVOKE(owner_ladder, fixture);                     \
  TEST_CASE_TEMPLATE_INVOKE(owner_second_stream_after_move, fixture);   \
  TEST_CASE_TEMPLATE_INVOKE(owner_second_stream_before_move, fixture)
