// test_buffer_owner.cpp - the buffer owner's protocol on the fake backend.
//
// Meson runs this program twice: cuda_buffer_owner on a fake with memory pools
// (stream-ordered alloc/free) and cuda_buffer_owner_no_pools with
// PNMEM_TEST_FAKE_POOLS=0, a device without them, where the owner falls back to
// alloc_plain/free_plain behind its retire fence. Every test below runs in both.
//
// Each hazard test says how the seed's design fails it. The fake (fake_backend.hpp)
// runs queued work on a simulated timeline and reports every op that touches
// memory freed before the op completed: violations() is the use-after-free
// detector, and the naive-owner test proves it fires.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "owner_test_support.hpp"
#include "pnmem/cuda/buffer_owner.hpp"
#include "pnmem/cuda/die_feed.hpp"
#include "pnmem/cuda/fake_backend.hpp"

using namespace pnmem::cuda;
using namespace pnmem::cuda::test;
using pnmem::mem_level;
using std::chrono::milliseconds;

namespace {

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

// `o` in the memory-pool mode this run tests (fake_pools_from_env).
fake_options in_mode(fake_options o) {
  o.memory_pools = fake_pools_from_env();
  return o;
}

// A fake device, a home (decode) stream, a second stream, and an owner.
struct rig {
  explicit rig(fake_options o = {}, pnmem::kv_format configured = pnmem::kv_format::fp32) : dev(in_mode(o)) {
    REQUIRE(dev.stream_create(0, home));
    REQUIRE(dev.stream_create(0, other));
    owner_options opt;
    opt.home_stream = home;
    opt.shape = shape;
    opt.configured_kv = configured;
    opt.tally = &tally;
    owner.emplace(dev, opt);
  }

  // Shutdown as the header asks: release, let the device finish, reap, destroy.
  void shutdown() {
    dev.run_until_idle();
    REQUIRE(owner->try_release_all().ok());
    dev.run_until_idle();
    owner->reap();
    CHECK(owner->tally().retiring_bytes == 0);
    owner.reset();
    REQUIRE(dev.stream_destroy(home));
    REQUIRE(dev.stream_destroy(other));
    dev.run_until_idle();
  }

  void check_clean() {
    INFO(joined(dev.violations()));
    CHECK(dev.violations().empty());
    INFO(joined(dev.leaks()));
    CHECK(dev.leaks().empty());
    CHECK(dev.live_allocations() == 0);
  }

  // Queues the step's kernel over every buffer.
  std::uint64_t kernel(const step_token& t, std::uint64_t ticks) {
    return dev.submit(t.stream(), step_uses(shape, t.buffers()), ticks);
  }

  void poll_to_completion(step_token& t) {
    for (int i = 0; i < 10000 && owner->poll(t) == step_state::running; ++i) dev.advance(1);
    REQUIRE(t.complete());
  }

  model_shape shape = small_shape();
  fake_backend dev;
  die_tally tally;
  stream_handle home, other;
  std::optional<buffer_owner> owner;
};

// The seed's shape of the code: bind/resize reallocate and free the old
// buffer at once (fc_buffer_free), from the thread and stream that binds,
// with no regard for a decode step in flight on the decode stream. Without
// pools its free is cudaFree at once, trusting cudaFree's device-wide wait.
class naive_owner {
 public:
  naive_owner(fake_backend& dev, stream_handle bind_stream)
      : dev_(&dev), bind_stream_(bind_stream), pools_(fake_pools_from_env()) {}
  void* k() const { return k_; }
  std::size_t k_bytes() const { return bytes_; }
  void resize(std::size_t bytes) {
    void* fresh = nullptr;
    const device_status st = pools_ ? dev_->alloc_async(0, bytes, bind_stream_, fresh) : dev_->alloc_plain(0, bytes, fresh);
    REQUIRE(st.ok());
    free_now();  // the seed's immediate free
    k_ = fresh;
    bytes_ = bytes;
  }
  void release() {
    free_now();
    k_ = nullptr;
  }

 private:
  void free_now() {
    if (k_ == nullptr) return;
    const device_status st = pools_ ? dev_->free_async(k_, bind_stream_) : dev_->free_plain(k_);
    REQUIRE(st.ok());
  }
  fake_backend* dev_;
  stream_handle bind_stream_;
  bool pools_;
  void* k_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace

TEST_CASE("the detector works: a naive owner that frees on resize under an in-flight step is caught") {
  fake_backend dev{in_mode({})};
  stream_handle decode, prefill;
  REQUIRE(dev.stream_create(0, decode));
  REQUIRE(dev.stream_create(0, prefill));
  naive_owner naive(dev, prefill);
  naive.resize(4096);
  dev.run_until_idle();
  // A decode step reads k for 10 ticks; a bind on the prefill path resizes meanwhile.
  dev.submit(decode, {{naive.k(), naive.k_bytes(), true}}, 10);
  dev.advance(1);
  naive.resize(8192);
  dev.run_until_idle();
  CHECK_FALSE(dev.violations().empty());
  naive.release();
  dev.run_until_idle();
}

TEST_CASE("the same scenario with the real owner: the bind waits for the step, nothing is freed under it") {
  rig r;
  REQUIRE(r.owner->try_bind({2, 16}, plan_at(mem_level::ok)).status.ok());
  auto s = r.owner->try_step_begin(r.home);
  REQUIRE(s.status.ok());
  r.kernel(*s.token, 10);
  r.dev.advance(1);
  // The bind cannot happen: the step holds the turn (try form: busy at once).
  CHECK(r.owner->try_bind({4, 16}, plan_at(mem_level::ok)).status.code == owner_errc::busy);
  r.poll_to_completion(*s.token);
  const auto b = r.owner->try_bind({4, 16}, plan_at(mem_level::ok));
  REQUIRE(b.status.ok());
  CHECK(b.moved);
  r.shutdown();
  r.check_clean();
}

// Hazard 1 (seed: gpu_attn_slot_ring_ensure). The seed reallocated k_slots_g /
// v_slots_g (and the Q4 sink/window buffers) inside bind, which ran under the
// prefill GPU turn while the async decode step (begin/poll) held no lock: a
// bind between begin and the completing poll freed the ring under the step's
// kernels. Here the step token *is* the turn: no resize until poll completes.
TEST_CASE("hazard 1: the KV ring never moves while a step is in flight") {
  rig r;
  REQUIRE(r.owner->try_bind({2, 16}, plan_at(mem_level::watch)).status.ok());  // Q4: sink/window too
  auto s = r.owner->try_step_begin(r.home);
  REQUIRE(s.status.ok());
  const void* k0 = s.token->buffers().k[0];
  REQUIRE(!s.token->buffers().sink.empty());
  r.kernel(*s.token, 8);
  for (int t = 0; t < 4; ++t) {
    r.dev.advance(1);
    CHECK(r.owner->poll(*s.token) == step_state::running);
    CHECK(r.owner->try_resize({4, 32}, plan_at(mem_level::ok)).status.code == owner_errc::busy);
    CHECK(r.owner->try_bind({4, 32}, plan_at(mem_level::ok)).status.code == owner_errc::busy);
    CHECK(r.owner->try_release_all().code == owner_errc::busy);
    CHECK(r.owner->bind({4, 32}, plan_at(mem_level::ok), std::chrono::steady_clock::now() + milliseconds(1))
              .status.code == owner_errc::timed_out);
  }
  r.poll_to_completion(*s.token);
  const auto b = r.owner->try_resize({4, 32}, plan_at(mem_level::ok));
  REQUIRE(b.status.ok());
  CHECK(b.moved);
  // The old ring is retiring (fenced), not freed, and not free either.
  CHECK(r.owner->tally().retiring_bytes > 0);
  CHECK(r.tally.retiring() > 0);
  auto s2 = r.owner->try_step_begin(r.home);
  REQUIRE(s2.status.ok());
  CHECK(s2.token->buffers().k[0] != k0);
  r.kernel(*s2.token, 3);
  r.poll_to_completion(*s2.token);
  r.shutdown();
  r.check_clean();
  CHECK(r.tally.used() == 0);
  CHECK(r.tally.retiring() == 0);
}

// Hazard 2 (seed: decode_slot_bind_cuda). The seed freed conv_slots/ssm_slots
// on a slot-count change and set slots_graph = NULL, but a captured graph
// already *launched* still ran with the old pointers, and the bind ran on the
// prefill thread under a different turn than the driver thread's decode pass.
// Here a bind from another thread blocks (deadline form) until the step's poll
// completes, and the graph captured before the move is refused afterwards.
TEST_CASE("hazard 2: a bind from another thread waits for the step; the old graph must be recaptured") {
  rig r;
  REQUIRE(r.owner->try_bind({2, 16}, plan_at(mem_level::ok)).status.ok());
  auto s = r.owner->try_step_begin(r.home);
  REQUIRE(s.status.ok());
  const graph_token g = r.owner->graph_captured(*s.token, 42);
  REQUIRE(r.owner->graph_for_launch(*s.token, g) == graph_status::launch);
  r.kernel(*s.token, 20);  // the "graph launch": conv/ssm/KV for 20 ticks

  std::atomic<bool> bound{false};
  bind_result b;
  std::thread prefill([&] {
    b = r.owner->bind({8, 16}, plan_at(mem_level::ok), std::chrono::steady_clock::now() + std::chrono::seconds(20));
    bound.store(true);
  });
  std::this_thread::sleep_for(milliseconds(30));
  CHECK_FALSE(bound.load());  // blocked on the turn, freeing nothing
  r.poll_to_completion(*s.token);
  prefill.join();
  REQUIRE(b.status.ok());
  CHECK(b.moved);
  CHECK(b.generation > g.generation);

  auto s2 = r.owner->try_step_begin(r.home);
  REQUIRE(s2.status.ok());
  CHECK(r.owner->graph_for_launch(*s2.token, g) == graph_status::recapture);
  const graph_token g2 = r.owner->graph_captured(*s2.token, 43);
  CHECK(r.owner->graph_for_launch(*s2.token, g2) == graph_status::launch);
  r.kernel(*s2.token, 2);
  r.poll_to_completion(*s2.token);
  // Outside a step nothing may launch: the answer is always recapture.
  CHECK(r.owner->graph_for_launch(*s2.token, g2) == graph_status::recapture);
  r.shutdown();
  r.check_clean();
}

// Hazard 3 (seed: qw_defer_reset). The seed realloc()ed the pinned staging
// arena at the top of a step when the slot count grew, even if the previous
// step's async DtoH copies had not been reaped by poll: they then landed in
// freed memory. Here the arena grows only in step_begin, which needs the turn,
// which is not free until the previous step's fence completed - even when the
// engine dropped the previous step's token without polling it.
TEST_CASE("hazard 3: the staging arena never moves while an earlier step's copies may land") {
  fake_options o;
  o.copy_ticks = 6;
  rig r(o);
  REQUIRE(r.owner->try_bind({2, 16}, plan_at(mem_level::ok)).status.ok());
  void* old_stage = nullptr;
  {
    auto s = r.owner->try_step_begin(r.home);
    REQUIRE(s.status.ok());
    const decode_buffers& b = s.token->buffers();
    old_stage = b.staging;
    REQUIRE(b.staging_bytes == 2 * r.shape.dtoh_bytes_per_slot);
    r.kernel(*s.token, 1);
    REQUIRE(r.dev.copy_async(b.staging, b.scratch, dtoh_bytes(r.shape, b), r.home));
    // The token goes away without a completing poll (the engine re-entering begin).
  }
  // The seed's behaviour, shown on the fake: freeing the arena now is caught.
  {
    fake_backend probe;
    stream_handle ps;
    REQUIRE(probe.stream_create(0, ps));
    void *dev_src = nullptr, *stage = nullptr;
    REQUIRE(probe.alloc_async(0, 64, ps, dev_src));
    REQUIRE(probe.alloc_pinned(64, stage));
    REQUIRE(probe.copy_async(stage, dev_src, 64, ps));
    REQUIRE(probe.free_pinned(stage));  // qw_defer_reset's realloc
    probe.run_until_idle();
    CHECK_FALSE(probe.violations().empty());
    REQUIRE(probe.free_async(dev_src, ps));
    probe.run_until_idle();
  }
  // The real owner: the abandoned step still holds the turn in effect.
  CHECK(r.owner->try_bind({4, 16}, plan_at(mem_level::ok)).status.code == owner_errc::busy);
  CHECK(r.owner->try_step_begin(r.home).status.code == owner_errc::busy);
  r.dev.advance(3);
  CHECK(r.owner->try_step_begin(r.home).status.code == owner_errc::busy);
  r.dev.advance(10);
  REQUIRE(r.owner->try_bind({4, 16}, plan_at(mem_level::ok)).status.ok());
  auto s2 = r.owner->try_step_begin(r.home);
  REQUIRE(s2.status.ok());
  CHECK(s2.token->buffers().staging != old_stage);
  CHECK(s2.token->buffers().staging_bytes == 4 * r.shape.dtoh_bytes_per_slot);
  r.poll_to_completion(*s2.token);
  r.shutdown();
  r.check_clean();
}

// Freeing pinned memory (cudaFreeHost) synchronises the whole device in
// practice, so a retired staging arena is never freed on the step path
// (step_begin, poll): only at bind/resize/release_all or an explicit reap().
// A decode step never waits for a retire.
TEST_CASE("a retired staging arena is freed off the step path, never by step_begin or poll") {
  rig r;
  REQUIRE(r.owner->try_bind({2, 16}, plan_at(mem_level::ok)).status.ok());
  {
    auto s = r.owner->try_step_begin(r.home);
    REQUIRE(s.status.ok());
    r.poll_to_completion(*s.token);
  }
  const std::uint64_t small_arena = 2 * r.shape.dtoh_bytes_per_slot;
  REQUIRE(r.dev.live_pinned_bytes() >= small_arena);
  REQUIRE(r.owner->try_bind({4, 16}, plan_at(mem_level::ok)).status.ok());
  for (int i = 0; i < 5; ++i) {  // the first step_begin grows the arena and retires the old one
    auto s = r.owner->try_step_begin(r.home);
    REQUIRE(s.status.ok());
    r.kernel(*s.token, 1);
    r.poll_to_completion(*s.token);
    r.dev.advance(10);
  }
  const std::uint64_t big_arena = 4 * r.shape.dtoh_bytes_per_slot;
  CHECK(r.dev.live_pinned_bytes() == small_arena + big_arena);  // the old arena waits, fenced and done
  r.owner->reap();                                                // off the step path
  CHECK(r.dev.live_pinned_bytes() == big_arena);
  r.shutdown();
  r.check_clean();
}

// Hazard 4 (seed: bs_new clamps cap once; decode_slot_bind_cuda refuses
// n_slots > ceiling with -1). A scheduler created at OK with 8 slots, then the
// box went CRITICAL: the seed failed those requests ("[ladder] refusing N
// decode slots"). Here bind clamps to the ceiling *now* and says how many it
// bound; the scheduler keeps the rest queued.
TEST_CASE("hazard 4: a ceiling dropped since scheduler creation binds fewer slots, never fails") {
  rig r;
  const auto at_creation = plan_at(mem_level::ok, 8);
  REQUIRE(at_creation.max_slots == 8);
  const auto now = plan_at(mem_level::critical, 8);
  REQUIRE(now.max_slots == 1);
  const auto b = r.owner->try_bind({8, 16}, now);
  REQUIRE(b.status.ok());
  CHECK(b.requested_slots == 8);
  CHECK(b.bound_slots == 1);
  CHECK(b.slot_capacity == 1);
  // TIGHT: half the configured slots.
  const auto t = r.owner->try_bind({8, 16}, plan_at(mem_level::tight, 8));
  REQUIRE(t.status.ok());
  CHECK(t.bound_slots == 4);
  // Back at OK the same request is bound in full.
  const auto ok = r.owner->try_bind({8, 16}, at_creation);
  REQUIRE(ok.status.ok());
  CHECK(ok.bound_slots == 8);
  CHECK(ok.slot_capacity == 8);
  // A live capacity above a dropped ceiling is not torn down by bind (slots in
  // use keep their state); resize is the explicit shrink.
  const auto again = r.owner->try_bind({8, 16}, now);
  CHECK(again.bound_slots == 1);
  CHECK(again.slot_capacity == 8);
  CHECK_FALSE(again.moved);
  const auto shrunk = r.owner->try_resize({8, 16}, now);
  CHECK(shrunk.slot_capacity == 1);
  // Only bad arguments are refused.
  CHECK(r.owner->try_bind({0, 16}, now).status.code == owner_errc::invalid_argument);
  r.shutdown();
  r.check_clean();
}

// Rung 4a (seed: gpu_attn_slot_ring_ensure reallocated whenever kv_q4 != last,
// converting a live fp32 cache - and moving it under any in-flight step).
// Here the format is chosen when the cache is allocated and kept while live.
TEST_CASE("rung 4a: a cache allocated at WATCH or worse is Q4; a live fp32 cache is never converted") {
  rig r;
  auto b = r.owner->try_bind({2, 16}, plan_at(mem_level::watch));
  REQUIRE(b.status.ok());
  CHECK(b.kv == pnmem::kv_format::q4);
  REQUIRE(r.owner->try_release_all().ok());
  b = r.owner->try_bind({2, 16}, plan_at(mem_level::ok));
  CHECK(b.kv == pnmem::kv_format::fp32);
  // Pressure rises; the live cache grows and shrinks but stays fp32.
  b = r.owner->try_bind({4, 32}, plan_at(mem_level::watch));
  CHECK(b.moved);
  CHECK(b.kv == pnmem::kv_format::fp32);
  b = r.owner->try_resize({4, 16}, plan_at(mem_level::critical));
  CHECK(b.moved);
  CHECK(b.kv == pnmem::kv_format::fp32);
  {
    auto s = r.owner->try_step_begin(r.home);
    REQUIRE(s.status.ok());
    CHECK(s.token->buffers().sink.empty());
    r.poll_to_completion(*s.token);
  }
  // Only a fresh allocation picks the format again.
  REQUIRE(r.owner->try_release_all().ok());
  b = r.owner->try_bind({2, 16}, plan_at(mem_level::tight));
  CHECK(b.kv == pnmem::kv_format::q4);
  r.shutdown();
  r.check_clean();
}

TEST_CASE("a resize keeps live slots: stripes are copied stream-ordered before the old buffer retires") {
  rig r;
  REQUIRE(r.owner->try_bind({2, 4}, plan_at(mem_level::ok)).status.ok());
  auto s = r.owner->try_step_begin(r.home);
  REQUIRE(s.status.ok());
  const std::uint64_t id = r.kernel(*s.token, 2);  // writes its tag into every buffer
  r.poll_to_completion(*s.token);
  REQUIRE(r.owner->try_bind({3, 8}, plan_at(mem_level::ok)).status.ok());
  auto s2 = r.owner->try_step_begin(r.home);
  REQUIRE(s2.status.ok());
  r.dev.run_until_idle();  // the copies ran
  const decode_buffers& b = s2.token->buffers();
  const std::uint64_t row = kv_row_bytes(r.shape, b.kv);
  const auto* k = static_cast<const std::uint8_t*>(b.k[0]);
  const std::uint8_t tag = fake_backend::write_tag(id);
  CHECK(k[0] == tag);                      // slot 0, token 0
  CHECK(k[8 * row + 3 * row] == tag);      // slot 1, token 3 (old max_seq 4)
  CHECK(k[8 * row + 4 * row] != tag);      // slot 1, token 4: did not exist
  const auto* conv = static_cast<const std::uint8_t*>(b.conv[0]);
  CHECK(conv[2 * r.shape.conv_state_bytes_per_slot - 1] == tag);
  r.poll_to_completion(*s2.token);
  r.shutdown();
  r.check_clean();
}

TEST_CASE("a step's completion covers every stream it added (streams keyed by id)") {
  rig r;
  REQUIRE(r.owner->try_bind({2, 16}, plan_at(mem_level::ok)).status.ok());
  auto s = r.owner->try_step_begin(r.other);
  REQUIRE(s.status.ok());
  r.kernel(*s.token, 4);
  stream_handle copy;
  REQUIRE(r.dev.stream_create(0, copy));
  REQUIRE(s.token->add_stream(copy).ok());
  // The engine orders its DtoH copy after the step's kernel (its own business).
  event_handle kernel_done;
  REQUIRE(r.dev.event_create(0, kernel_done));
  REQUIRE(r.dev.event_record(kernel_done, r.other));
  REQUIRE(r.dev.stream_wait_event(copy, kernel_done));
  const decode_buffers& b = s.token->buffers();
  r.dev.submit(copy, {{b.scratch, static_cast<std::size_t>(b.scratch_bytes), false}}, 9);
  // The completion covers the copy stream's 4 + 9 ticks too.
  for (int i = 0; i < 12; ++i) {
    r.dev.advance(1);
    CHECK(r.owner->poll(*s.token) == step_state::running);
  }
  r.poll_to_completion(*s.token);
  REQUIRE(r.owner->try_resize({4, 16}, plan_at(mem_level::ok)).status.ok());
  r.dev.run_until_idle();
  CHECK(r.owner->reap() >= 1);
  CHECK(r.owner->tally().retiring_bytes == 0);
  REQUIRE(r.dev.event_destroy(kernel_done));
  r.shutdown();
  REQUIRE(r.dev.stream_destroy(copy));
  r.dev.run_until_idle();
  r.check_clean();
}

// A move allocates and copies on the home stream. A step that then runs on
// another stream must not start before those copies have landed: note_stream
// makes that stream wait (device-side) for an event recorded after the move.
// Without the wait the step reads the new buffers while they are still empty.
TEST_CASE("ordering 1: a step on another stream starts only after the move's copies landed") {
  rig r;
  REQUIRE(r.owner->try_bind({2, 16}, plan_at(mem_level::ok)).status.ok());
  std::uint64_t tag_op = 0;
  {
    auto s = r.owner->try_step_begin(r.home);
    REQUIRE(s.status.ok());
    tag_op = r.kernel(*s.token, 2);  // writes its tag into every buffer
    r.poll_to_completion(*s.token);
  }
  r.dev.submit(r.home, {}, 50);  // the home stream is busy: the move's copies queue behind this
  const auto moved = r.owner->try_resize({4, 16}, plan_at(mem_level::ok));
  REQUIRE(moved.status.ok());
  REQUIRE(moved.moved);
  auto s = r.owner->try_step_begin(r.other);
  REQUIRE(s.status.ok());
  const decode_buffers& b = s.token->buffers();
  const auto row = static_cast<std::size_t>(kv_row_bytes(r.shape, b.kv));
  std::vector<std::uint8_t> out(row, 0);
  r.dev.register_host(out.data(), out.size());
  REQUIRE(r.dev.copy_async(out.data(), b.k[0], row, r.other));  // the step reads slot 0, token 0
  INFO(joined(r.dev.violations()));
  CHECK(r.dev.violations().empty());  // ordered after the copies: no race
  r.dev.advance(20);
  CHECK(out[0] == 0);  // still waiting for the move behind the busy home stream
  r.poll_to_completion(*s.token);
  CHECK(out.front() == fake_backend::write_tag(tag_op));  // the moved data, not an empty buffer
  CHECK(out.back() == fake_backend::write_tag(tag_op));
  r.dev.unregister_host(out.data());
  r.shutdown();
  r.check_clean();
}

// The other direction: work queued on a stream a step ran on, before a move,
// still reads the old buffers. The retire fence makes the home stream wait for
// every such stream before the stream-ordered free (retire_list.hpp, step 1).
TEST_CASE("ordering 2: work on another stream before a move is fenced before the old buffers are freed") {
  rig r;
  REQUIRE(r.owner->try_bind({2, 16}, plan_at(mem_level::ok)).status.ok());
  decode_buffers old;
  {
    auto s = r.owner->try_step_begin(r.other);  // `other` becomes one of the model's streams
    REQUIRE(s.status.ok());
    old = s.token->buffers();
    r.kernel(*s.token, 1);
    r.poll_to_completion(*s.token);
  }
  // Between steps the engine reads a finished sequence's KV out (say into a
  // prefix cache) on that stream: 30 ticks, queued before the resize.
  const auto kv_bytes = static_cast<std::size_t>(kv_layer_bytes(r.shape, old.kv, old.slot_capacity, old.max_seq_tokens));
  r.dev.submit(r.other, {{old.k[0], kv_bytes, false}}, 30);
  const std::uint64_t device_before = r.dev.live_device_bytes(0) + r.dev.retiring_bytes(0);
  REQUIRE(r.owner->try_resize({4, 16}, plan_at(mem_level::ok)).status.ok());
  INFO(joined(r.dev.violations()));
  CHECK(r.dev.violations().empty());  // the free is ordered after the read: no race
  // Device bytes the allocator has not got back, beyond the live (new) buffers:
  // with pools the old ones wait on their free_async, without they are still live.
  const auto old_held = [&] {
    return r.dev.live_device_bytes(0) + r.dev.retiring_bytes(0) - r.owner->tally().device_used_bytes;
  };
  r.dev.advance(20);
  // The old buffers are not back with the allocator while the read goes on.
  CHECK(old_held() == device_before);
  CHECK(r.owner->reap() == 0);
  CHECK(r.owner->tally().retiring_bytes > 0);
  r.dev.advance(15);
  // With pools the stream-ordered free already ran; without, the reap frees them.
  if (fake_pools_from_env()) CHECK(r.dev.retiring_bytes(0) == 0);
  if (!fake_pools_from_env()) CHECK(old_held() == device_before);
  CHECK(r.owner->reap() >= 1);
  CHECK(old_held() == 0);
  CHECK(r.owner->tally().retiring_bytes == 0);
  r.shutdown();
  r.check_clean();
}

// The KV share a fleet router reads (engine/fleet_load.hpp, KVCacheUtilization): the ring's KV
// bytes and the bound slots' part of them, by hand from small_shape (2 attention layers, 2 KV
// heads of 32: a 256-byte fp32 row; K and V per layer).
TEST_CASE("the owner's tally says the ring's KV bytes and the bound slots' share, for the fleet series") {
  rig r;
  CHECK(r.owner->tally().kv_bytes == 0);
  REQUIRE(r.owner->try_bind({4, 16}, plan_at(mem_level::ok)).status.ok());
  constexpr std::uint64_t ring4 = 2 * 2 * 4 * 16 * 256;  // layers x (K, V) x slots x tokens x row
  CHECK(r.owner->tally().kv_bytes == ring4);
  CHECK(r.owner->tally().kv_bound_bytes == ring4);
  CHECK(r.owner->tally().kv_bytes < r.owner->tally().device_used_bytes);  // SSM state and scratch are not KV

  // Fewer slots bound: the ring keeps its size (a bind never shrinks), half of it is in use.
  const bind_result two = r.owner->try_bind({2, 16}, plan_at(mem_level::ok));
  REQUIRE(two.status.ok());
  CHECK_FALSE(two.moved);
  CHECK(r.owner->tally().kv_bytes == ring4);
  CHECK(r.owner->tally().kv_bound_bytes == ring4 / 2);

  // Two owners (two models) add up in one fleet_load.
  pnmem::fleet_load load;
  add_kv(load, r.owner->tally());
  add_kv(load, owner_tally{.kv_bytes = ring4, .kv_bound_bytes = ring4});
  CHECK(load.kv_used_bytes == ring4 / 2 + ring4);
  CHECK(load.kv_capacity_bytes == 2 * ring4);
  CHECK(pnmem::kv_cache_usage(load) == doctest::Approx(0.75));

  // The ladder's ceiling bounds what is bound; a resize shrinks the ring to it.
  REQUIRE(r.owner->try_resize({8, 16}, plan_at(mem_level::tight)).status.ok());
  const int ceiling = plan_at(mem_level::tight).max_slots;
  REQUIRE(ceiling < 8);
  const std::uint64_t ring_c = 2 * 2 * static_cast<std::uint64_t>(ceiling) * 16 * 256;
  CHECK(r.owner->tally().kv_bytes == ring_c);
  CHECK(r.owner->tally().kv_bound_bytes == ring_c);

  REQUIRE(r.owner->try_release_all().ok());
  CHECK(r.owner->tally().kv_bytes == 0);
  CHECK(r.owner->tally().kv_bound_bytes == 0);
  r.shutdown();
  r.check_clean();
}

// Memory pools are optional (device_alloc_mode): the owner asks at its first
// bind, keeps the answer, and says which it is. Without pools its device
// buffers come from alloc_plain and never go through free_async.
TEST_CASE("the owner reports the device's allocation mode, asked at the first bind") {
  rig r;
  const bool pools = fake_pools_from_env();
  MESSAGE("fake device memory pools: " << doctest::String(pools ? "yes (stream_ordered)" : "no (plain)"));
  CHECK(r.owner->memory_mode() == alloc_mode::unknown);
  CHECK(r.owner->tally().mode == alloc_mode::unknown);
  REQUIRE(r.owner->try_bind({2, 16}, plan_at(mem_level::ok)).status.ok());
  CHECK(r.owner->memory_mode() == expected_mode(pools));
  CHECK(r.owner->tally().mode == expected_mode(pools));
  CHECK(to_string(r.owner->memory_mode()) == (pools ? "stream_ordered" : "plain"));
  // A move: in plain mode nothing is ever stream-ordered-freed (the fake would
  // report a free_async of plain memory as a violation).
  REQUIRE(r.owner->try_resize({3, 16}, plan_at(mem_level::ok)).status.ok());
  r.dev.run_until_idle();
  CHECK(r.dev.retiring_bytes(0) == 0);
  CHECK(r.owner->reap() >= 1);
  CHECK(r.owner->memory_mode() == expected_mode(pools));  // kept across release_all too
  REQUIRE(r.owner->try_release_all().ok());
  CHECK(r.owner->memory_mode() == expected_mode(pools));
  r.shutdown();
  r.check_clean();
}

// The fallback's own hazard: cudaFree frees at once (after a device-wide wait
// the owner must not count on). A moved plain buffer is freed only once the
// retire fence completed - here the step that still reads it runs 12 ticks -
// and never by step_begin or poll (a decode step never waits for cudaFree).
TEST_CASE("no pools: a moved buffer is freed only after its fence, and never on the step path") {
  rig r;
  REQUIRE(r.owner->try_bind({2, 16}, plan_at(mem_level::ok)).status.ok());
  // A step on `other` makes it one of the model's streams; work the engine then
  // queues there outside a step still reads the ring (12 ticks) when it moves.
  void* old_k = nullptr;
  {
    auto s = r.owner->try_step_begin(r.other);
    REQUIRE(s.status.ok());
    old_k = s.token->buffers().k[0];
    r.poll_to_completion(*s.token);
  }
  const auto kv_bytes = static_cast<std::size_t>(kv_layer_bytes(r.shape, pnmem::kv_format::fp32, 2, 16));
  r.dev.submit(r.other, {{old_k, kv_bytes, false}}, 12);
  REQUIRE(r.owner->try_resize({4, 16}, plan_at(mem_level::ok)).status.ok());
  const std::uint64_t retired = r.tally.retiring();  // device bytes (the die's); the owner adds pinned
  CHECK(retired > 0);
  for (int i = 0; i < 3; ++i) {  // steps meanwhile: they reap only on the step path
    auto s = r.owner->try_step_begin(r.home);
    REQUIRE(s.status.ok());
    r.kernel(*s.token, 1);
    r.poll_to_completion(*s.token);
  }
  INFO(joined(r.dev.violations()));
  CHECK(r.dev.violations().empty());  // nothing freed under the read
  r.dev.advance(20);                  // the read and the fence are done
  {
    auto s = r.owner->try_step_begin(r.home);
    REQUIRE(s.status.ok());
    r.poll_to_completion(*s.token);
  }
  if (fake_pools_from_env()) {
    (void)r.owner->reap();  // stream-ordered frees: the step path already released the batch
  } else {
    // Plain memory waits for a reap off the step path, even with its fence done.
    CHECK(r.owner->tally().retiring_bytes >= retired);
    CHECK(r.tally.retiring() == retired);
    CHECK(r.owner->reap() >= 1);
  }
  CHECK(r.owner->tally().retiring_bytes == 0);
  CHECK(r.tally.retiring() == 0);
  r.shutdown();
  r.check_clean();
}

TEST_CASE("events are pooled: many steps and moves create a handful of events") {
  rig r;
  for (int i = 0; i < 200; ++i) {
    REQUIRE(r.owner->try_bind({1 + i % 4, 16}, plan_at(mem_level::ok)).status.ok());
    REQUIRE(r.owner->try_resize({1 + (i + 1) % 4, 16}, plan_at(mem_level::ok)).status.ok());
    auto s = r.owner->try_step_begin(i % 2 ? r.home : r.other);
    REQUIRE(s.status.ok());
    r.kernel(*s.token, 1);
    r.poll_to_completion(*s.token);
  }
  CHECK(r.dev.events_created() < 16);
  r.shutdown();
  r.check_clean();
}

// ---------------------------------------------------------------- rung 4b: eviction

namespace {

// Keep lists in device memory the test writes directly (the fake's device memory is host memory),
// allocated plain so that any stream may read them with or without pools; freed by the caller after
// the device went idle.
struct device_keep {
  fake_backend& dev;
  std::int32_t* p = nullptr;
  device_keep(fake_backend& d, const std::vector<std::int32_t>& positions) : dev(d) {
    void* q = nullptr;
    REQUIRE(dev.alloc_plain(0, std::max<std::size_t>(1, positions.size()) * sizeof(std::int32_t), q).ok());
    p = static_cast<std::int32_t*>(q);
    std::copy(positions.begin(), positions.end(), p);
  }
  device_keep(const device_keep&) = delete;
  device_keep& operator=(const device_keep&) = delete;
  void free() {
    if (p != nullptr) REQUIRE(dev.free_plain(p).ok());
    p = nullptr;
  }
};

// Row `t` of slot `s` in buffer `buf` (layer l, K or V) as the test writes it: every byte says where it came from.
std::uint8_t row_mark(int buf, int s, int t) { return static_cast<std::uint8_t>(1 + (buf * 61 + s * 29 + t) % 250); }

void mark_rows(const model_shape& m, const decode_buffers& b) {
  const auto row = static_cast<std::size_t>(kv_row_bytes(m, b.kv));
  for (std::size_t l = 0; l < b.k.size(); ++l) {
    for (int kv = 0; kv < 2; ++kv) {
      auto* base = static_cast<std::uint8_t*>(kv == 0 ? b.k[l] : b.v[l]);
      for (int s = 0; s < b.slot_capacity; ++s)
        for (int t = 0; t < b.max_seq_tokens; ++t)
          std::memset(base + (static_cast<std::size_t>(s) * static_cast<std::size_t>(b.max_seq_tokens) + static_cast<std::size_t>(t)) * row,
                      row_mark(static_cast<int>(l) * 2 + kv, s, t), row);
    }
  }
}

std::uint8_t row_at(const model_shape& m, const decode_buffers& b, std::size_t layer, int kv, int s, int t) {
  const auto row = static_cast<std::size_t>(kv_row_bytes(m, b.kv));
  const auto* base = static_cast<const std::uint8_t*>(kv == 0 ? b.k[layer] : b.v[layer]);
  return base[(static_cast<std::size_t>(s) * static_cast<std::size_t>(b.max_seq_tokens) + static_cast<std::size_t>(t)) * row];
}

}  // namespace

TEST_CASE("rung 4b: evict moves each layer's kept K and V rows to the front, then the shrink gives memory back") {
  rig r;
  const auto tight = plan_at(mem_level::tight);
  REQUIRE(r.owner->try_bind({2, 32}, plan_at(mem_level::ok)).status.ok());
  {
    auto s = r.owner->try_step_begin(r.home);
    REQUIRE(s.status.ok());
    mark_rows(r.shape, s.token->buffers());
    r.poll_to_completion(*s.token);
  }
  const std::uint64_t gen = r.owner->generation();
  const std::uint64_t before = r.owner->tally().device_used_bytes;
  // Slot 0 holds 20 tokens; layer 0 keeps six of them, layer 1 another six (per-layer selection).
  const std::vector<std::int32_t> keep0{0, 1, 5, 9, 18, 19};
  const std::vector<std::int32_t> keep1{0, 2, 4, 6, 8, 19};
  device_keep d0(r.dev, keep0);
  device_keep d1(r.dev, keep1);
  const std::int32_t* per_layer[] = {d0.p, d1.p};
  const slot_keep k{0, 20, 6, per_layer};
  const evict_result e = r.owner->try_evict({&k, 1}, slot_request{2, 8}, tight);
  REQUIRE(e.status.ok());
  CHECK(e.slots_compacted == 1);
  CHECK(e.broken_slot == -1);
  CHECK(e.shrink.moved);
  CHECK(e.shrink.max_seq_tokens == 8);
  CHECK(r.owner->generation() > gen);
  const std::uint64_t after = decode_device_bytes(r.shape, pnmem::kv_format::fp32, 2, 8);
  CHECK(r.owner->tally().device_used_bytes == after);
  CHECK(e.freed_bytes == before - after);
  CHECK(r.owner->tally().retiring_bytes > 0);  // the old ring waits for its fence
  r.dev.run_until_idle();
  auto s = r.owner->try_step_begin(r.home);
  REQUIRE(s.status.ok());
  const decode_buffers& b = s.token->buffers();
  REQUIRE(b.max_seq_tokens == 8);
  for (int i = 0; i < 6; ++i) {
    CAPTURE(i);
    CHECK(row_at(r.shape, b, 0, 0, 0, i) == row_mark(0, 0, keep0[static_cast<std::size_t>(i)]));  // layer 0 K
    CHECK(row_at(r.shape, b, 0, 1, 0, i) == row_mark(1, 0, keep0[static_cast<std::size_t>(i)]));  // layer 0 V
    CHECK(row_at(r.shape, b, 1, 0, 0, i) == row_mark(2, 0, keep1[static_cast<std::size_t>(i)]));  // layer 1 K
    CHECK(row_at(r.shape, b, 1, 1, 0, i) == row_mark(3, 0, keep1[static_cast<std::size_t>(i)]));  // layer 1 V
  }
  for (int t = 0; t < 8; ++t) CHECK(row_at(r.shape, b, 1, 1, 1, t) == row_mark(3, 1, t));  // slot 1 as it was
  r.poll_to_completion(*s.token);
  (void)r.owner->reap();  // without pools the old ring is freed here, off the step path
  CHECK(r.owner->tally().retiring_bytes == 0);
  r.dev.run_until_idle();
  d0.free();
  d1.free();
  r.shutdown();
  r.check_clean();
}

TEST_CASE("rung 4b: evict waits for the turn, and for reads queued between steps on the model's streams") {
  rig r;
  const auto tight = plan_at(mem_level::tight);
  REQUIRE(r.owner->try_bind({2, 16}, plan_at(mem_level::ok)).status.ok());
  device_keep d(r.dev, {0, 3, 7});
  const std::int32_t* one[] = {d.p};
  const slot_keep k{1, 10, 3, one};
  decode_buffers old;
  {
    auto s = r.owner->try_step_begin(r.other);  // `other` becomes one of the model's streams
    REQUIRE(s.status.ok());
    old = s.token->buffers();
    mark_rows(r.shape, old);
    r.kernel(*s.token, 3);
    // A step in flight: nothing may move its rows.
    CHECK(r.owner->try_evict({&k, 1}, std::nullopt, tight).status.code == owner_errc::busy);
    r.poll_to_completion(*s.token);
  }
  mark_rows(r.shape, old);  // the step's kernel wrote its tag over them
  // Between steps the engine reads slot 1's KV out on `other` (30 ticks), into host memory.
  const auto row = static_cast<std::size_t>(kv_row_bytes(r.shape, old.kv));
  std::vector<std::uint8_t> out(16 * row, 0);
  r.dev.register_host(out.data(), out.size());
  REQUIRE(r.dev.copy_async(out.data(), static_cast<std::uint8_t*>(old.k[0]) + 16 * row, 16 * row, r.other));
  r.dev.submit(r.other, {{old.k[0], static_cast<std::size_t>(kv_layer_bytes(r.shape, old.kv, 2, 16)), false}}, 30);
  const evict_result e = r.owner->try_evict({&k, 1}, std::nullopt, tight);
  REQUIRE(e.status.ok());
  CHECK_FALSE(e.shrink.moved);
  INFO(joined(r.dev.violations()));
  CHECK(r.dev.violations().empty());  // the compaction is ordered after the read: no race
  r.dev.run_until_idle();
  for (int t = 0; t < 10; ++t) CHECK(out[static_cast<std::size_t>(t) * row] == row_mark(0, 1, t));  // read before
  CHECK(row_at(r.shape, old, 0, 0, 1, 1) == row_mark(0, 1, 3));  // compacted in place afterwards
  CHECK(row_at(r.shape, old, 0, 0, 1, 2) == row_mark(0, 1, 7));
  CHECK(row_at(r.shape, old, 0, 0, 0, 1) == row_mark(0, 0, 1));  // slot 0 untouched
  r.dev.unregister_host(out.data());
  d.free();
  r.shutdown();
  r.check_clean();
}

TEST_CASE("rung 4b: a step on another stream after an eviction starts once the compaction ran") {
  rig r;
  REQUIRE(r.owner->try_bind({1, 16}, plan_at(mem_level::ok)).status.ok());
  decode_buffers b;
  {
    auto s = r.owner->try_step_begin(r.home);
    REQUIRE(s.status.ok());
    b = s.token->buffers();
    r.poll_to_completion(*s.token);
  }
  mark_rows(r.shape, b);
  device_keep d(r.dev, {0, 5});
  const std::int32_t* one[] = {d.p};
  const slot_keep k{0, 8, 2, one};
  r.dev.submit(r.home, {}, 50);  // the home stream is busy: the compaction queues behind this
  REQUIRE(r.owner->try_evict({&k, 1}, std::nullopt, plan_at(mem_level::tight)).status.ok());
  auto s = r.owner->try_step_begin(r.other);
  REQUIRE(s.status.ok());
  const auto row = static_cast<std::size_t>(kv_row_bytes(r.shape, b.kv));
  std::vector<std::uint8_t> out(2 * row, 0);
  r.dev.register_host(out.data(), out.size());
  REQUIRE(r.dev.copy_async(out.data(), s.token->buffers().k[0], 2 * row, r.other));  // the step reads slot 0
  INFO(joined(r.dev.violations()));
  CHECK(r.dev.violations().empty());  // ordered after the compaction: no race
  r.poll_to_completion(*s.token);
  CHECK(out[row] == row_mark(0, 0, 5));  // the compacted row, not the one before
  r.dev.unregister_host(out.data());
  r.dev.run_until_idle();
  d.free();
  r.shutdown();
  r.check_clean();
}

TEST_CASE("rung 4b: bad evictions are refused before anything is queued") {
  rig r;
  const auto tight = plan_at(mem_level::tight);
  device_keep d(r.dev, {0, 1});
  const std::int32_t* one[] = {d.p};
  const std::int32_t* none[] = {nullptr};
  const std::int32_t* three[] = {d.p, d.p, d.p};
  const slot_keep ok{0, 4, 2, one};
  CHECK(r.owner->try_evict({&ok, 1}, std::nullopt, tight).status.code == owner_errc::not_bound);
  REQUIRE(r.owner->try_bind({2, 8}, plan_at(mem_level::ok)).status.ok());
  r.dev.run_until_idle();
  const std::uint64_t gen = r.owner->generation();
  const std::size_t ops = r.dev.pending_ops();
  const slot_keep bad[] = {
      {2, 4, 2, one},    // slot past the capacity
      {-1, 4, 2, one},   // negative slot
      {0, 9, 2, one},    // more tokens than max_seq
      {0, 0, 0, one},    // no tokens
      {0, 4, 5, one},    // keeps more than it holds
      {0, 4, -1, one},   // negative kept
      {0, 4, 2, none},   // no keep array
      {0, 4, 2, three},  // neither one array nor one per attention layer (2)
  };
  for (const slot_keep& b : bad) {
    CAPTURE(b.slot);
    CAPTURE(b.tokens);
    CAPTURE(b.kept);
    CHECK(r.owner->try_evict({&b, 1}, std::nullopt, tight).status.code == owner_errc::invalid_argument);
  }
  const slot_keep twice[] = {ok, ok};
  CHECK(r.owner->try_evict(twice, std::nullopt, tight).status.code == owner_errc::invalid_argument);
  CHECK(r.owner->try_evict({&ok, 1}, slot_request{2, 1}, tight).status.code == owner_errc::invalid_argument);  // 2 kept > 1
  CHECK(r.owner->try_evict({&ok, 1}, slot_request{0, 8}, tight).status.code == owner_errc::invalid_argument);
  CHECK(r.dev.pending_ops() == ops);
  CHECK(r.owner->generation() == gen);
  // Keeping everything (or nothing) moves nothing, and is not an error.
  const slot_keep all{0, 4, 4, one};
  const slot_keep zero{1, 4, 0, none};
  const slot_keep fine[] = {all, zero};
  const evict_result e = r.owner->try_evict(fine, std::nullopt, tight);
  CHECK(e.status.ok());
  CHECK(e.slots_compacted == 2);
  CHECK(r.dev.pending_ops() == ops);
  r.dev.run_until_idle();
  d.free();
  r.shutdown();
  r.check_clean();
}

TEST_CASE("protocol errors") {
  rig r;
  CHECK(r.owner->try_step_begin(r.home).status.code == owner_errc::not_bound);
  CHECK(r.owner->try_step_begin(stream_handle{}).status.code == owner_errc::invalid_argument);
  CHECK(r.owner->try_bind({1, 0}, plan_at(mem_level::ok)).status.code == owner_errc::invalid_argument);
  fake_options tiny;
  tiny.total_bytes_per_device = 4096;
  rig small(tiny);
  const auto b = small.owner->try_bind({8, 1024}, plan_at(mem_level::ok));
  CHECK(b.status.code == owner_errc::device_error);
  CHECK(small.owner->tally().device_used_bytes == 0);
  small.shutdown();
  small.check_clean();
  r.shutdown();
  r.check_clean();
}

// Randomized interleavings: bind, resize, step begin/poll with time advancing
// at random, ladder level changes, abandoned steps and full releases. Checks
// the invariants every iteration and use-after-free and leaks at the end.
namespace {

void run_interleavings(std::uint64_t seed, int iterations) {
  std::printf("randomized interleavings: seed=0x%llx x %d, memory pools %s (set PN_OWNER_SEED to replay one seed)\n",
              static_cast<unsigned long long>(seed), iterations, fake_pools_from_env() ? "on" : "off (plain)");
  INFO("seed=" << seed << " (PN_OWNER_SEED)");
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };

  // A resize queues one copy per live stripe on the home stream; with copies
  // of 1 tick and up to 16 ticks per advance, steps and moves both happen often.
  fake_options o;
  o.copy_ticks = 1;
  rig r(o);
  INFO("memory pools: " << doctest::String(fake_pools_from_env() ? "on" : "off"));
  stream_handle copy;
  REQUIRE(r.dev.stream_create(0, copy));
  // The engine's own ordering inside and between steps (not the owner's job):
  // a step's DtoH copy on the copy stream waits for its kernel, and a step
  // waits for reads the engine queued between steps on another stream.
  event_handle kernel_done;
  event_handle side_done;
  REQUIRE(r.dev.event_create(0, kernel_done));
  REQUIRE(r.dev.event_create(0, side_done));
  stream_handle side_stream;                 // where the last between-steps read ran, if any
  std::optional<decode_buffers> last_view;   // the last step's buffers: valid until the next move
  bool last_step_polled = false;             // ... and the device has finished that step
  std::vector<stream_handle> used{r.home};   // streams a step ran on
  mem_level level = mem_level::ok;
  std::optional<step_token> step;
  std::uint64_t stats[9] = {};
  int begin_codes[8] = {};
  int busy_binds = 0, moves = 0, steps_completed = 0, abandoned = 0, side_reads = 0, evictions = 0;
  const int seqs[] = {8, 16, 32};
  // The eviction's keep list, in device memory any stream may read (freed once the device is idle).
  void* keep_block = nullptr;
  REQUIRE(r.dev.alloc_plain(0, 4 * sizeof(std::int32_t), keep_block).ok());
  const std::int32_t positions[] = {0, 2, 5, 7};
  std::memcpy(keep_block, positions, sizeof(positions));
  const std::int32_t* one_keep[] = {static_cast<const std::int32_t*>(keep_block)};
  for (int it = 0; it < iterations; ++it) {
    INFO("iteration " << it);
    const int action = pick(0, 99);
    const auto plan = plan_at(level);
    if (action < 15) {  // bind
      const auto b = r.owner->try_bind({pick(1, 8), seqs[pick(0, 2)]}, plan);
      if (step) CHECK(b.status.code == owner_errc::busy);
      busy_binds += b.status.code == owner_errc::busy;
      moves += b.moved;
      if (b.status.ok()) CHECK(b.bound_slots <= plan.max_slots);
      ++stats[0];
    } else if (action < 25) {  // resize
      const auto b = r.owner->try_resize({pick(1, 8), seqs[pick(0, 2)]}, plan);
      if (step) CHECK(b.status.code == owner_errc::busy);
      moves += b.moved;
      ++stats[1];
    } else if (action < 40) {  // step begin (+ its kernels and a DtoH copy)
      if (!step) {
        const stream_handle on = pick(0, 1) ? r.home : r.other;
        auto s = r.owner->try_step_begin(on);
        ++begin_codes[static_cast<int>(s.status.code)];
        if (s.status.ok()) {
          step.emplace(std::move(*s.token));
          const decode_buffers& b = step->buffers();
          last_view = b;
          last_step_polled = false;
          if (std::find(used.begin(), used.end(), on) == used.end()) used.push_back(on);
          if (side_stream && side_stream != on) REQUIRE(r.dev.stream_wait_event(on, side_done));
          side_stream = {};
          r.dev.submit(step->stream(), step_uses(r.shape, b), static_cast<std::uint64_t>(pick(1, 6)));
          if (pick(0, 1)) {
            REQUIRE(step->add_stream(copy).ok());
            if (std::find(used.begin(), used.end(), copy) == used.end()) used.push_back(copy);
            REQUIRE(r.dev.event_record(kernel_done, step->stream()));
            REQUIRE(r.dev.stream_wait_event(copy, kernel_done));
            REQUIRE(r.dev.copy_async(b.staging, b.scratch, dtoh_bytes(r.shape, b), copy));
          } else {
            REQUIRE(r.dev.copy_async(b.staging, b.scratch, dtoh_bytes(r.shape, b), step->stream()));
          }
          const graph_token g = r.owner->graph_captured(*step, static_cast<std::uint64_t>(it));
          CHECK(r.owner->graph_for_launch(*step, g) == graph_status::launch);
        }
      }
      ++stats[2];
    } else if (action < 65) {  // poll
      if (step) {
        const step_state st = r.owner->poll(*step);
        REQUIRE(st != step_state::device_error);
        if (st == step_state::complete) {
          step.reset();
          last_step_polled = true;
          ++steps_completed;
        }
      }
      ++stats[3];
    } else if (action < 82) {  // time passes
      r.dev.advance(static_cast<std::uint64_t>(pick(0, 16)));
      ++stats[4];
    } else if (action < 86) {  // the ladder moves
      level = static_cast<mem_level>(pick(0, 3));
      ++stats[5];
    } else if (action < 89) {  // the engine drops a step without polling it
      if (step) {
        step.reset();
        ++abandoned;
      }
      ++stats[6];
    } else if (action < 96) {
      // Between steps, the engine reads a finished sequence's KV out on a stream
      // a step ran on, through the last step's buffers (still valid: no move
      // since). A later move must fence it before freeing those buffers.
      if (!step && last_step_polled && !side_stream && last_view &&
          last_view->generation == r.owner->generation()) {
        const stream_handle on = used[static_cast<std::size_t>(pick(0, static_cast<int>(used.size()) - 1))];
        const decode_buffers& b = *last_view;
        const auto bytes = static_cast<std::size_t>(kv_layer_bytes(r.shape, b.kv, b.slot_capacity, b.max_seq_tokens));
        r.dev.submit(on, {{b.k[0], bytes, false}}, static_cast<std::uint64_t>(pick(1, 30)));
        REQUIRE(r.dev.event_record(side_done, on));
        side_stream = on;
        ++side_reads;
      }
      ++stats[8];
    } else if (action < 98) {
      // Rung 4b: slot 0 keeps 4 of its first 8 rows in every layer, then maybe shrinks. Busy while a
      // step runs; otherwise ordered after the side read above and before the next step.
      const slot_keep k{0, 8, 4, one_keep};
      const std::optional<slot_request> shrink =
          pick(0, 1) ? std::optional<slot_request>(slot_request{pick(1, 8), seqs[pick(0, 2)]}) : std::nullopt;
      const evict_result e = r.owner->try_evict({&k, 1}, shrink, plan);
      if (step) CHECK(e.status.code == owner_errc::busy);
      // Without a step: done, or not bound (released), or busy (an abandoned step still runs).
      if (!step) CHECK((e.status.ok() || e.status.code == owner_errc::not_bound || e.status.code == owner_errc::busy));
      evictions += e.status.ok();
      moves += e.shrink.moved;
    } else {  // everything released (all requests done)
      (void)r.owner->try_release_all();
      ++stats[7];
    }
    const owner_tally t = r.owner->tally();
    REQUIRE(t.retiring_bytes <= 64 * pnmem::MiB);  // the retire list drains
    if (!r.dev.violations().empty()) {
      std::printf("violation (use-after-free or race) at iteration %d, seed=0x%llx:\n%s", it, static_cast<unsigned long long>(seed),
                  joined(r.dev.violations()).c_str());
      FAIL("violation");
    }
  }
  step.reset();
  r.shutdown();
  REQUIRE(r.dev.stream_destroy(copy));
  REQUIRE(r.dev.event_destroy(kernel_done));
  REQUIRE(r.dev.event_destroy(side_done));
  r.dev.run_until_idle();
  REQUIRE(r.dev.free_plain(keep_block).ok());
  std::printf("  evictions=%d\n", evictions);
  CHECK(evictions > 30);
  std::printf("  binds=%llu resizes=%llu begins=%llu polls=%llu advances=%llu levels=%llu abandons=%llu "
              "releases=%llu side=%llu | moves=%d busy_binds=%d steps=%d abandoned=%d side_reads=%d "
              "events_created=%llu ticks=%llu\n",
              static_cast<unsigned long long>(stats[0]), static_cast<unsigned long long>(stats[1]),
              static_cast<unsigned long long>(stats[2]), static_cast<unsigned long long>(stats[3]),
              static_cast<unsigned long long>(stats[4]), static_cast<unsigned long long>(stats[5]),
              static_cast<unsigned long long>(stats[6]), static_cast<unsigned long long>(stats[7]),
              static_cast<unsigned long long>(stats[8]), moves, busy_binds, steps_completed, abandoned, side_reads,
              static_cast<unsigned long long>(r.dev.events_created()), static_cast<unsigned long long>(r.dev.now()));
  std::printf("  step_begin answers: ok=%d busy=%d not_bound=%d\n", begin_codes[0], begin_codes[1], begin_codes[4]);
  CHECK(moves > 400);
  CHECK(steps_completed + abandoned > 300);
  CHECK(side_reads > 15);  // fewer since evictions joined: each one ends the last step's view too
  CHECK(r.dev.events_created() < 64);  // without the pool: one per fence, ~1,500 here
  if (!r.dev.violations().empty() || !r.dev.leaks().empty())
    std::printf("seed=0x%llx failed\n", static_cast<unsigned long long>(seed));
  r.check_clean();
}

}  // namespace

TEST_CASE("randomized interleavings (4 seeds x 10,000): no use-after-free, no leak, bounded events") {
  constexpr int iterations = 10000;
  if (const char* env = std::getenv("PN_OWNER_SEED")) {
    run_interleavings(std::strtoull(env, nullptr, 0), iterations);
    return;
  }
  for (const std::uint64_t seed : {0x5eedb0f0ULL, 0x1ULL, 0xdecade5ULL, 0xfeedf00dULL}) run_interleavings(seed, iterations);
}

// Threads: a driver thread runs steps, a prefill thread binds and resizes, a
// reader reads the tally. Meant for the TSan build as much as for the logic.
TEST_CASE("threads: steps, binds and tally reads from three threads") {
  rig r;
  REQUIRE(r.owner->try_bind({2, 16}, plan_at(mem_level::ok)).status.ok());
  std::atomic<bool> stop{false};
  const auto deadline = [] { return std::chrono::steady_clock::now() + std::chrono::seconds(20); };
  std::thread driver([&] {
    for (int i = 0; i < 300; ++i) {
      auto s = r.owner->step_begin(r.home, deadline());
      REQUIRE(s.status.ok());
      r.kernel(*s.token, 2);
      while (r.owner->poll(*s.token) == step_state::running) r.dev.advance(1);
    }
  });
  std::thread prefill([&] {
    for (int i = 0; i < 300; ++i) {
      const auto b = (i % 2 ? r.owner->bind({1 + i % 6, 16}, plan_at(mem_level::ok), deadline())
                            : r.owner->resize({1 + i % 5, 8 + 8 * (i % 3)}, plan_at(mem_level::tight), deadline()));
      REQUIRE(b.status.ok());
    }
  });
  std::thread reader([&] {
    std::uint64_t last_gen = 0;
    while (!stop.load()) {
      const owner_tally t = r.owner->tally();
      CHECK(t.generation >= last_gen);
      last_gen = t.generation;
      std::this_thread::yield();
    }
  });
  driver.join();
  prefill.join();
  stop.store(true);
  reader.join();
  r.shutdown();
  r.check_clean();
}
