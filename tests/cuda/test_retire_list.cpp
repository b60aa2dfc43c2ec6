// The retire list on its own (retire_list.hpp): each step of its fence, what the
// tally and retiring_bytes say meanwhile, and what happens when the device
// refuses an event. The fake reports any free that is not ordered after the
// last use of the memory (fake_backend.hpp: races and use of freed memory).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "faulty_backend.hpp"
#include "pnmem/cuda/die_feed.hpp"
#include "pnmem/cuda/event_pool.hpp"
#include "pnmem/cuda/fake_backend.hpp"
#include "pnmem/cuda/retire_list.hpp"

namespace pnmem::cuda {
namespace {

using test::device_call;
using test::faulty_backend;

std::string lines(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += s + "\n";
  return out;
}

// A faulty fake (faults off unless armed), a home stream, a second stream the
// buffers were also used on, and a retire list with a die tally.
struct rig {
  faulty_backend dev{{.devices = 1, .total_bytes_per_device = 64 * MiB}};
  stream_handle home;
  stream_handle other;
  die_tally tally;
  event_pool events{dev, 0};
  retire_list list{dev, events, &tally};

  rig() {
    REQUIRE(dev.stream_create(0, home).ok());
    REQUIRE(dev.stream_create(0, other).ok());
  }
  fake_backend& fake() { return dev.fake(); }
  // Device memory, allocated and counted as used on the die (as the owner does).
  void* device(std::size_t n) {
    void* p = nullptr;
    REQUIRE(dev.alloc_async(0, n, home, p).ok());
    fake().advance(0);  // the allocation is reached: other streams may use it
    tally.add_used(n);
    return p;
  }
  void* pinned(std::size_t n) {
    void* p = nullptr;
    REQUIRE(dev.alloc_pinned(n, p).ok());
    return p;
  }
  void check_clean() {
    INFO(lines(fake().violations()));
    CHECK(fake().violations().empty());
  }
  ~rig() {
    (void)dev.stream_destroy(home);
    (void)dev.stream_destroy(other);
    fake().run_until_idle();
  }
};

TEST_CASE("step 1: the free waits for every other stream that used the buffer") {
  rig r;
  void* p = r.device(4096);
  r.fake().submit(r.other, {{p, 4096, false}}, 20);  // a read on another stream, 20 ticks
  const stream_handle users[] = {r.other};
  const retired_buffer buf{p, 4096, memory_kind::device};
  REQUIRE(r.list.retire(r.home, users, {&buf, 1}).ok());
  r.check_clean();  // queued: no race between the free and the read
  CHECK(r.list.retiring_bytes() == 4096);
  CHECK(r.tally.read().used == 0);
  CHECK(r.tally.read().retiring == 4096);
  r.fake().advance(19);
  // Still read on the other stream: not freed, not reusable.
  CHECK(r.fake().retiring_bytes(0) == 4096);
  CHECK(r.list.reap() == 0);
  CHECK(r.list.retiring_bytes() == 4096);
  r.fake().advance(1);
  CHECK(r.fake().retiring_bytes(0) == 0);  // freed stream-ordered right after the read
  CHECK(r.list.reap() == 1);
  CHECK(r.list.empty());
  CHECK(r.list.retiring_bytes() == 0);
  CHECK(r.tally.read().retiring == 0);
  r.check_clean();
}

TEST_CASE("step 2: device memory goes back on the home stream after the home stream's own work") {
  rig r;
  void* p = r.device(1024);
  r.fake().submit(r.home, {{p, 1024, true}}, 7);
  const retired_buffer buf{p, 1024, memory_kind::device};
  REQUIRE(r.list.retire(r.home, {}, {&buf, 1}).ok());
  r.fake().advance(6);
  CHECK(r.fake().retiring_bytes(0) == 1024);
  CHECK(r.list.reap() == 0);
  r.fake().advance(1);
  CHECK(r.fake().live_device_bytes(0) == 0);
  CHECK(r.fake().retiring_bytes(0) == 0);
  CHECK(r.list.reap() == 1);
  r.check_clean();
}

TEST_CASE("step 3: pinned memory is freed only by a reap after the batch's event, never on the step path") {
  rig r;
  void* d = r.device(256);
  void* staging = r.pinned(256);
  REQUIRE(r.dev.copy_async(staging, d, 256, r.other).ok());  // a DtoH copy landing in the arena
  r.fake().submit(r.other, {{staging, 256, false}}, 10);     // and something reading it there
  const stream_handle users[] = {r.other};
  const retired_buffer buf{staging, 256, memory_kind::pinned};
  REQUIRE(r.list.retire(r.home, users, {&buf, 1}).ok());
  CHECK(r.list.retiring_bytes() == 256);
  CHECK(r.tally.read().retiring == 0);  // host memory: not the die's
  CHECK(r.list.reap() == 0);            // the copy and the read are pending
  CHECK(r.fake().live_pinned_bytes() == 256);
  r.fake().run_until_idle();
  CHECK(r.list.reap(retire_list::reap_scope::step_path) == 0);  // done, but cudaFreeHost would sync the device
  CHECK(r.fake().live_pinned_bytes() == 256);
  CHECK(r.list.reap(retire_list::reap_scope::anywhere) == 1);
  CHECK(r.fake().live_pinned_bytes() == 0);
  CHECK(r.list.retiring_bytes() == 0);
  const retired_buffer dev_buf{d, 256, memory_kind::device};
  REQUIRE(r.list.retire(r.home, {}, {&dev_buf, 1}).ok());
  r.fake().run_until_idle();
  CHECK(r.list.reap(retire_list::reap_scope::step_path) == 1);  // device-only batches are fine there
  r.check_clean();
}

// A device without memory pools: plain device memory (alloc_plain) has no
// stream-ordered free. It is freed (free_plain, i.e. cudaFree) only by a reap
// after the batch's `done` event - never at retire, whatever cudaFree's own
// device-wide wait would cover - and never on the step path.
TEST_CASE("plain device memory is freed only by a reap after the batch's event, never on the step path") {
  rig r;
  void* p = nullptr;
  REQUIRE(r.dev.alloc_plain(0, 4096, p).ok());
  r.tally.add_used(4096);
  r.fake().submit(r.other, {{p, 4096, false}}, 10);  // read on another stream
  r.fake().submit(r.home, {{p, 4096, false}}, 3);    // and on home
  const stream_handle users[] = {r.other};
  const retired_buffer buf{p, 4096, memory_kind::device_plain};
  REQUIRE(r.list.retire(r.home, users, {&buf, 1}).ok());
  r.check_clean();  // nothing freed at retire
  CHECK(r.list.retiring_bytes() == 4096);
  CHECK(r.tally.read().used == 0);
  CHECK(r.tally.read().retiring == 4096);  // device memory: the die's
  CHECK(r.fake().retiring_bytes(0) == 0);  // no stream-ordered free was queued
  r.fake().advance(9);
  CHECK(r.list.reap() == 0);  // the read is pending
  CHECK(r.fake().live_device_bytes(0) == 4096);
  r.fake().advance(1);
  CHECK(r.list.reap(retire_list::reap_scope::step_path) == 0);  // done, but cudaFree waits for the device
  CHECK(r.fake().live_device_bytes(0) == 4096);
  CHECK(r.list.reap() == 1);
  CHECK(r.fake().live_device_bytes(0) == 0);
  CHECK(r.list.retiring_bytes() == 0);
  CHECK(r.tally.read().retiring == 0);
  r.check_clean();
}

TEST_CASE("plain device memory: a failed fence frees nothing; a failed free_plain still accounts the bytes gone") {
  rig r;
  void* p = nullptr;
  REQUIRE(r.dev.alloc_plain(0, 512, p).ok());
  r.fake().submit(r.other, {{p, 512, false}}, 5);
  const stream_handle users[] = {r.other};
  const retired_buffer buf{p, 512, memory_kind::device_plain};
  r.dev.fail_next(device_call::event_record, 1);
  CHECK_FALSE(r.list.retire(r.home, users, {&buf, 1}).ok());
  r.fake().run_until_idle();
  CHECK(r.list.reap() == 0);  // fenced now, not released on a guess
  CHECK(r.fake().live_device_bytes(0) == 512);
  r.fake().run_until_idle();
  SUBCASE("the free works") {
    CHECK(r.list.reap() == 1);
    CHECK(r.fake().live_device_bytes(0) == 0);
  }
  SUBCASE("the free fails") {
    r.dev.fail_next(device_call::free_plain, 1);
    CHECK(r.list.reap() == 1);
    CHECK(r.dev.refused(device_call::free_plain) == 1);
    CHECK(r.fake().live_device_bytes(0) == 512);  // leaked, never retried on a guess
    REQUIRE(r.dev.free_plain(p).ok());
  }
  CHECK(r.list.retiring_bytes() == 0);
  r.check_clean();
}

TEST_CASE("a batch mixes kinds and streams; repeats, the home stream among the users and null entries are harmless") {
  rig r;
  stream_handle third;
  REQUIRE(r.dev.stream_create(0, third).ok());
  void* a = r.device(512);
  void* b = r.device(512);
  void* staging = r.pinned(128);
  r.fake().submit(r.other, {{a, 512, false}}, 4);
  r.fake().submit(third, {{b, 512, true}}, 9);
  r.fake().submit(r.home, {{a, 512, false}}, 2);
  const stream_handle users[] = {r.other, r.home, third, r.other, stream_handle{}};
  const retired_buffer bufs[] = {{a, 512, memory_kind::device},
                                 {nullptr, 99, memory_kind::device},
                                 {b, 512, memory_kind::device},
                                 {staging, 128, memory_kind::pinned}};
  REQUIRE(r.list.retire(r.home, users, bufs).ok());
  CHECK(r.list.pending_batches() == 1);
  CHECK(r.list.retiring_bytes() == 512 + 512 + 128);  // the null entry counts nothing
  CHECK(r.tally.read().retiring == 1024);
  r.fake().advance(8);
  CHECK(r.fake().retiring_bytes(0) == 1024);  // b is still written on the third stream
  r.fake().advance(1);
  CHECK(r.fake().retiring_bytes(0) == 0);
  CHECK(r.list.reap() == 1);
  CHECK(r.fake().live_pinned_bytes() == 0);
  CHECK(r.tally.read().retiring == 0);
  // Nothing to retire is no batch at all.
  const retired_buffer none{nullptr, 0, memory_kind::device};
  REQUIRE(r.list.retire(r.home, users, {&none, 1}).ok());
  CHECK(r.list.empty());
  REQUIRE(r.dev.stream_destroy(third).ok());
  r.check_clean();
}

TEST_CASE("no event to fence with: the batch stays, nothing is freed, and a later reap fences it") {
  rig r;
  void* p = r.device(2048);
  r.fake().submit(r.other, {{p, 2048, false}}, 5);
  const stream_handle users[] = {r.other};
  const retired_buffer buf{p, 2048, memory_kind::device};
  SUBCASE("event_create fails") { r.dev.fail_next(device_call::event_create, 1); }
  SUBCASE("the record on the other stream fails") { r.dev.fail_next(device_call::event_record, 1); }
  SUBCASE("the home stream's wait fails") { r.dev.fail_next(device_call::stream_wait_event, 1); }
  SUBCASE("the free fails") { r.dev.fail_next(device_call::free_async, 1); }
  SUBCASE("the batch's own done event cannot be had") {
    event_handle warm;  // one pooled event: step 1 gets it, step 3 must create one
    REQUIRE(r.events.acquire(warm).ok());
    r.events.release(warm);
    r.dev.fail_next(device_call::event_create, 1);
  }
  CHECK_FALSE(r.list.retire(r.home, users, {&buf, 1}).ok());
  CHECK(r.list.pending_batches() == 1);
  CHECK(r.list.retiring_bytes() == 2048);
  r.fake().run_until_idle();
  // The reader finished, but an unfenced batch is never released on a guess.
  CHECK(r.list.reap() == 0);  // this reap fences it (the device accepts again)
  CHECK(r.list.pending_batches() == 1);
  r.fake().run_until_idle();
  CHECK(r.list.reap() == 1);
  CHECK(r.fake().live_device_bytes(0) == 0);
  CHECK(r.fake().retiring_bytes(0) == 0);
  CHECK(r.list.retiring_bytes() == 0);
  CHECK(r.tally.read().retiring == 0);
  r.check_clean();
}

TEST_CASE("events are pooled across batches") {
  rig r;
  for (int i = 0; i < 50; ++i) {
    void* p = r.device(64);
    r.fake().submit(r.other, {{p, 64, false}}, 1);
    const stream_handle users[] = {r.other};
    const retired_buffer buf{p, 64, memory_kind::device};
    REQUIRE(r.list.retire(r.home, users, {&buf, 1}).ok());
    r.fake().run_until_idle();
    CHECK(r.list.reap() == 1);
  }
  CHECK(r.events.created() == 2);  // one for the other stream, one for `done`
  r.check_clean();
}

TEST_CASE("destroyed with a batch pending: device memory still goes back in stream order, pinned is left") {
  faulty_backend dev{{.devices = 1, .total_bytes_per_device = 64 * MiB}};
  stream_handle home;
  stream_handle other;
  REQUIRE(dev.stream_create(0, home).ok());
  REQUIRE(dev.stream_create(0, other).ok());
  void* d = nullptr;
  void* staging = nullptr;
  REQUIRE(dev.alloc_async(0, 128, home, d).ok());
  REQUIRE(dev.alloc_pinned(64, staging).ok());
  dev.fake().advance(0);
  dev.fake().submit(other, {{d, 128, false}, {staging, 64, true}}, 10);
  {
    event_pool events{dev, 0};
    retire_list list{dev, events};
    const stream_handle users[] = {other};
    const retired_buffer bufs[] = {{d, 128, memory_kind::device}, {staging, 64, memory_kind::pinned}};
    REQUIRE(list.retire(home, users, bufs).ok());
  }  // the caller's bug (see retire_list.hpp): destroyed before the batch completed
  dev.fake().run_until_idle();
  CHECK_MESSAGE(dev.fake().violations().empty(), lines(dev.fake().violations()));
  CHECK(dev.fake().live_device_bytes(0) == 0);      // freed after the read, stream-ordered
  CHECK(dev.fake().live_pinned_bytes() == 64);      // leaked on purpose rather than freed under the copy
  CHECK(dev.fake().live_events() == 0);             // events are destroyed (allowed while pending)
  REQUIRE(dev.free_pinned(staging).ok());
  REQUIRE(dev.stream_destroy(home).ok());
  REQUIRE(dev.stream_destroy(other).ok());
  dev.fake().run_until_idle();
}

}  // namespace
}  // namespace pnmem::cuda
