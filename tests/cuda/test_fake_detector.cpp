// The fake backend's detector and timeline: what it reports, and that it
// reports nothing for correct use. (The conformance suite checks the fake
// behaves like cudart; this checks what only the fake can do.)
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "pnmem/cuda/fake_backend.hpp"

namespace pnmem::cuda {
namespace {

std::string lines(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += s + "\n";
  return out;
}

bool any_contains(const std::vector<std::string>& v, std::string_view what) {
  return std::any_of(v.begin(), v.end(), [&](const std::string& s) { return s.find(what) != std::string::npos; });
}

bool all_bytes(const void* p, std::size_t n, std::uint8_t value) {
  const auto* b = static_cast<const std::uint8_t*>(p);
  return std::all_of(b, b + n, [&](std::uint8_t x) { return x == value; });
}

// The timeline detector alone: the cases that show *when* a late use is seen on
// the simulated timeline turn the race check off, since it would report the same
// unordered pair earlier, when the second op is queued (see the "races" cases).
constexpr fake_options timeline_only{.devices = 1, .total_bytes_per_device = 64 * MiB, .report_races = false};

// A fake with one stream and helpers that REQUIRE success.
struct rig {
  fake_backend dev;
  stream_handle s;

  explicit rig(fake_options o = {.devices = 1, .total_bytes_per_device = 64 * MiB}) : dev(o) {
    REQUIRE(dev.stream_create(0, s).ok());
  }
  stream_handle stream() {
    stream_handle t;
    REQUIRE(dev.stream_create(0, t).ok());
    return t;
  }
  void* device(std::size_t n, stream_handle on = {}) {
    void* p = nullptr;
    REQUIRE(dev.alloc_async(0, n, on ? on : s, p).ok());
    return p;
  }
  void* pinned(std::size_t n) {
    void* p = nullptr;
    REQUIRE(dev.alloc_pinned(n, p).ok());
    return p;
  }
  std::uint64_t free_bytes() {
    std::uint64_t f = 0;
    std::uint64_t t = 0;
    REQUIRE(dev.mem_get_info(0, f, t).ok());
    return f;
  }
};

TEST_CASE("correct stream-ordered use records nothing") {
  rig r;
  void* p = r.device(4096);
  const std::uint64_t k = r.dev.submit(r.s, {{p, 4096, true}}, 5);
  REQUIRE(k != 0);
  REQUIRE(r.dev.free_async(p, r.s).ok());
  r.dev.run_until_idle();
  CHECK_MESSAGE(r.dev.violations().empty(), lines(r.dev.violations()));
  CHECK(r.dev.now() == 5);
  CHECK(r.dev.pending_ops() == 0);
  CHECK(all_bytes(p, 4096, fake_backend::poison_byte));  // freed after the kernel's write
}

TEST_CASE("free_async: retiring until the work before it completes, then free") {
  rig r;
  const std::uint64_t start_free = r.free_bytes();
  void* p = r.device(1 * MiB);
  CHECK(r.free_bytes() == start_free - MiB);
  r.dev.submit(r.s, {{p, MiB, false}}, 10);
  REQUIRE(r.dev.free_async(p, r.s).ok());
  // Released by the caller, not free yet: retiring bytes are not in mem_get_info's free.
  CHECK(r.dev.retiring_bytes(0) == MiB);
  CHECK(r.dev.live_device_bytes(0) == 0);
  CHECK(r.free_bytes() == start_free - MiB);
  CHECK(r.dev.live_allocations() == 0);
  r.dev.advance(9);
  CHECK(r.dev.retiring_bytes(0) == MiB);
  CHECK(r.free_bytes() == start_free - MiB);
  CHECK(!all_bytes(p, MiB, fake_backend::poison_byte));
  r.dev.advance(1);
  CHECK(r.dev.retiring_bytes(0) == 0);
  CHECK(r.free_bytes() == start_free);
  CHECK(all_bytes(p, MiB, fake_backend::poison_byte));
  CHECK(r.dev.violations().empty());
}

TEST_CASE("free_pinned while a queued op still uses the memory is reported") {
  rig r;
  void* staging = r.pinned(4096);
  void* d = r.device(4096);
  REQUIRE(r.dev.copy_async(staging, d, 4096, r.s).ok());  // device -> pinned, not run yet
  REQUIRE(r.dev.free_pinned(staging).ok());              // the naive free
  REQUIRE(r.dev.violations().size() == 1);
  CHECK(any_contains(r.dev.violations(), "freed while in use"));
  CHECK(any_contains(r.dev.violations(), "free_pinned"));
  CHECK(any_contains(r.dev.violations(), "still queued"));
  // One bug, one report: the op's start and completion do not repeat it.
  r.dev.run_until_idle();
  CHECK(r.dev.violations().size() == 1);
  REQUIRE(r.dev.free_async(d, r.s).ok());
  r.dev.run_until_idle();
}

TEST_CASE("free_pinned while an op is running is reported as running") {
  rig r;
  void* staging = r.pinned(64);
  r.dev.submit(r.s, {{staging, 64, true}}, 4);
  r.dev.advance(1);  // started, not done
  REQUIRE(r.dev.free_pinned(staging).ok());
  CHECK(any_contains(r.dev.violations(), "running"));
  r.dev.run_until_idle();
  CHECK(r.dev.violations().size() == 1);
}

TEST_CASE("a use of freed memory is caught at the op's start") {
  // Stream b's kernel was queued while p was live, but b is busy; stream a frees p
  // stream-ordered, which happens before b's kernel starts: the cross-stream hazard.
  rig r{timeline_only};
  const stream_handle b = r.stream();
  void* p = r.device(256);
  r.dev.submit(b, {}, 10);                           // b busy until t=10
  const std::uint64_t k = r.dev.submit(b, {{p, 256, false}}, 1);
  REQUIRE(r.dev.free_async(p, r.s).ok());           // nothing orders it after k
  CHECK(r.dev.violations().empty());                // fine so far: k might still run first
  r.dev.advance(5);                                 // the free ran at t=0
  CHECK(r.dev.violations().empty());
  r.dev.advance(5);                                 // k starts at t=10 on freed memory
  REQUIRE(r.dev.violations().size() == 1);
  const std::string& v = r.dev.violations()[0];
  CHECK(v.find("at start") != std::string::npos);
  CHECK(v.find("use of freed memory") != std::string::npos);
  CHECK(v.find("op#" + std::to_string(k)) != std::string::npos);
  CHECK(v.find("t=10") != std::string::npos);
  CHECK(v.find("free_async") != std::string::npos);
  r.dev.run_until_idle();
  CHECK(r.dev.violations().size() == 1);
}

TEST_CASE("a use of freed memory is caught at the op's completion, and the late write is visible") {
  rig r{timeline_only};
  const stream_handle b = r.stream();
  void* p = r.device(256);
  const std::uint64_t k = r.dev.submit(b, {{p, 256, true}}, 10);  // running t=0..10
  r.dev.submit(r.s, {}, 3);
  REQUIRE(r.dev.free_async(p, r.s).ok());                        // runs at t=3, under k's feet
  r.dev.advance(3);
  CHECK(r.dev.violations().empty());
  CHECK(all_bytes(p, 256, fake_backend::poison_byte));
  r.dev.advance(7);
  REQUIRE(r.dev.violations().size() == 1);
  CHECK(any_contains(r.dev.violations(), "at completion"));
  CHECK(any_contains(r.dev.violations(), "writes"));
  // The quarantined block shows where the late write landed.
  CHECK(all_bytes(p, 256, fake_backend::write_tag(k)));
}

TEST_CASE("work queued after a free_async is reported when queued") {
  rig r;
  void* p = r.device(128);
  REQUIRE(r.dev.free_async(p, r.s).ok());
  r.dev.submit(r.s, {{p, 64, false}});
  REQUIRE(r.dev.violations().size() == 1);
  CHECK(any_contains(r.dev.violations(), "when queued"));
  CHECK(any_contains(r.dev.violations(), "after its free_async"));
  r.dev.run_until_idle();
  CHECK(r.dev.violations().size() == 1);
}

TEST_CASE("stray, out-of-bounds and unregistered pointers are reported, never touched") {
  rig r;
  void* p = r.device(128);
  std::vector<std::uint8_t> host(64, 7);
  r.dev.submit(r.s, {{static_cast<std::byte*>(p) + 64, 128, true}});  // runs past the end
  r.dev.submit(r.s, {{host.data(), host.size(), true}});              // not registered
  r.dev.run_until_idle();
  REQUIRE(r.dev.violations().size() == 2);
  CHECK(any_contains(r.dev.violations(), "runs past the end"));
  CHECK(any_contains(r.dev.violations(), "not inside any allocation"));
  CHECK(all_bytes(host.data(), host.size(), 7));  // an unknown pointer is never written
  r.dev.clear_violations();

  r.dev.register_host(host.data(), host.size());
  const std::uint64_t k = r.dev.submit(r.s, {{host.data(), host.size(), true}});
  r.dev.run_until_idle();
  CHECK(r.dev.violations().empty());
  CHECK(all_bytes(host.data(), host.size(), fake_backend::write_tag(k)));
  r.dev.unregister_host(host.data());
  REQUIRE(r.dev.free_async(p, r.s).ok());
  r.dev.run_until_idle();
}

TEST_CASE("double frees and wrong-kind frees are reported and refused") {
  rig r;
  void* d = r.device(64);
  void* h = r.pinned(64);
  CHECK(r.dev.free_pinned(d).code == device_errc::invalid_value);
  CHECK(r.dev.free_async(h, r.s).code == device_errc::invalid_value);
  CHECK(r.dev.free_async(static_cast<std::byte*>(d) + 8, r.s).code == device_errc::invalid_value);
  CHECK(r.dev.violations().size() == 3);
  REQUIRE(r.dev.free_async(d, r.s).ok());
  CHECK(r.dev.free_async(d, r.s).code == device_errc::invalid_value);  // still retiring
  r.dev.run_until_idle();
  CHECK(r.dev.free_async(d, r.s).code == device_errc::invalid_value);  // freed
  REQUIRE(r.dev.free_pinned(h).ok());
  CHECK(r.dev.free_pinned(h).code == device_errc::invalid_value);
  CHECK(r.dev.violations().size() == 6);
  CHECK(any_contains(r.dev.violations(), "double free"));
}

// Memory pools are optional: a fake without them is a device where
// cudaDevAttrMemoryPoolsSupported is 0. Its plain path (cudaMalloc / cudaFree)
// gets the same hazard detection as the stream-ordered one.
constexpr fake_options no_pools{.devices = 1, .total_bytes_per_device = 64 * MiB, .memory_pools = false};

TEST_CASE("no pools: device_alloc_mode says plain, alloc_async is refused, alloc_plain works") {
  rig pools;
  rig r{no_pools};
  alloc_mode m = alloc_mode::unknown;
  REQUIRE(pools.dev.device_alloc_mode(0, m).ok());
  CHECK(m == alloc_mode::stream_ordered);
  REQUIRE(r.dev.device_alloc_mode(0, m).ok());
  CHECK(m == alloc_mode::plain);
  CHECK(r.dev.device_alloc_mode(1, m).code == device_errc::no_device);
  CHECK(m == alloc_mode::unknown);
  void* p = nullptr;
  CHECK(r.dev.alloc_async(0, 64, r.s, p).code == device_errc::not_supported);
  CHECK(p == nullptr);
  const std::uint64_t before = r.free_bytes();
  REQUIRE(r.dev.alloc_plain(0, 4096, p).ok());
  CHECK(r.free_bytes() == before - 4096);
  CHECK(r.dev.live_device_bytes(0) == 4096);
  CHECK(r.dev.pending_ops() == 0);  // not stream-ordered: nothing queued
  // Any stream may use it at once (no allocation to be ordered after).
  const stream_handle t = r.stream();
  r.dev.submit(t, {{p, 4096, true}}, 2);
  r.dev.run_until_idle();
  REQUIRE(r.dev.free_plain(p).ok());
  CHECK(r.free_bytes() == before);
  CHECK(all_bytes(p, 4096, fake_backend::poison_byte));
  CHECK_MESSAGE(r.dev.violations().empty(), lines(r.dev.violations()));
  // Plain allocation works on a device with pools too (cudaMalloc always does).
  REQUIRE(pools.dev.alloc_plain(0, 256, p).ok());
  REQUIRE(pools.dev.free_plain(p).ok());
  CHECK(pools.dev.violations().empty());
}

TEST_CASE("no pools: free_plain while queued or running work still uses the block is reported") {
  rig r{no_pools};
  void* p = nullptr;
  REQUIRE(r.dev.alloc_plain(0, 1024, p).ok());
  const stream_handle t = r.stream();
  r.dev.submit(r.s, {{p, 1024, false}}, 5);  // a read, running
  r.dev.submit(t, {{p, 1024, false}}, 3);    // another read on another stream, running too
  r.dev.advance(1);
  // cudaFree would wait for both first; the owner must not rely on that, and the fake says so.
  REQUIRE(r.dev.free_plain(p).ok());
  CHECK(r.dev.violations().size() == 2);
  CHECK(any_contains(r.dev.violations(), "free_plain"));
  CHECK(any_contains(r.dev.violations(), "freed while in use"));
  CHECK(any_contains(r.dev.violations(), "plain device allocation"));
  r.dev.run_until_idle();
  CHECK(r.dev.violations().size() == 2);  // one report per (op, buffer)
  // Work queued after the free is a use of freed memory.
  r.dev.submit(r.s, {{p, 8, false}}, 1);
  CHECK(any_contains(r.dev.violations(), "use of freed memory"));
  r.dev.run_until_idle();
}

TEST_CASE("no pools: a block is freed by the call matching its allocation") {
  rig r;  // pools on, so both kinds exist
  void* async = r.device(64);
  void* plain = nullptr;
  REQUIRE(r.dev.alloc_plain(0, 64, plain).ok());
  void* h = r.pinned(64);
  CHECK(r.dev.free_async(plain, r.s).code == device_errc::invalid_value);
  CHECK(r.dev.free_plain(async).code == device_errc::invalid_value);
  CHECK(r.dev.free_plain(h).code == device_errc::invalid_value);
  CHECK(r.dev.free_pinned(plain).code == device_errc::invalid_value);
  CHECK(r.dev.free_plain(static_cast<std::byte*>(plain) + 8).code == device_errc::invalid_value);
  CHECK(r.dev.violations().size() == 5);
  REQUIRE(r.dev.free_plain(plain).ok());
  CHECK(r.dev.free_plain(plain).code == device_errc::invalid_value);
  CHECK(any_contains(r.dev.violations(), "double free"));
  CHECK(any_contains(r.dev.violations(), "must be freed with free_plain"));
  CHECK(any_contains(r.dev.violations(), "must be freed with free_async"));
  REQUIRE(r.dev.free_async(async, r.s).ok());
  REQUIRE(r.dev.free_pinned(h).ok());
  r.dev.run_until_idle();
  CHECK(r.dev.leaks().size() == 1);  // the stream only
}

TEST_CASE("freed memory is poisoned and quarantined: its address is not handed out again") {
  rig r;
  void* p = r.device(4096);
  void* h = r.pinned(4096);
  std::memset(h, 0x11, 4096);
  REQUIRE(r.dev.free_async(p, r.s).ok());
  REQUIRE(r.dev.free_pinned(h).ok());
  CHECK(all_bytes(h, 4096, fake_backend::poison_byte));  // pinned: at once
  r.dev.run_until_idle();
  CHECK(all_bytes(p, 4096, fake_backend::poison_byte));  // device: in stream order
  std::vector<void*> fresh;
  for (int i = 0; i < 64; ++i) {
    fresh.push_back(r.device(4096));
    fresh.push_back(r.pinned(4096));
  }
  CHECK(std::find(fresh.begin(), fresh.end(), p) == fresh.end());
  CHECK(std::find(fresh.begin(), fresh.end(), h) == fresh.end());
  for (std::size_t i = 0; i < fresh.size(); i += 2) {
    REQUIRE(r.dev.free_async(fresh[i], r.s).ok());
    REQUIRE(r.dev.free_pinned(fresh[i + 1]).ok());
  }
  r.dev.run_until_idle();
  CHECK(r.dev.violations().empty());
}

TEST_CASE("allocations are 256-byte aligned, as CUDA's are") {
  rig r;
  void* d = r.device(1);
  void* h = r.pinned(3);
  CHECK(reinterpret_cast<std::uintptr_t>(d) % 256 == 0);
  CHECK(reinterpret_cast<std::uintptr_t>(h) % 256 == 0);
  REQUIRE(r.dev.free_async(d, r.s).ok());
  REQUIRE(r.dev.free_pinned(h).ok());
  r.dev.run_until_idle();
}

TEST_CASE("quarantine over its limit releases the oldest unreferenced blocks, never a referenced one") {
  rig r{{.devices = 1, .total_bytes_per_device = 64 * MiB, .quarantine_limit_bytes = 8 * KiB, .report_races = false}};
  const stream_handle b = r.stream();
  void* watched = r.device(4 * KiB);
  r.dev.submit(b, {}, 100);                         // keep b busy
  r.dev.submit(b, {{watched, 4 * KiB, false}}, 1);  // will run on freed memory
  REQUIRE(r.dev.free_async(watched, r.s).ok());
  r.dev.advance(1);
  for (int i = 0; i < 16; ++i) {  // push far more than the limit through quarantine
    void* p = r.device(4 * KiB);
    REQUIRE(r.dev.free_async(p, r.s).ok());
    r.dev.advance(1);
  }
  // The referenced block stayed quarantined, so the late read is still caught.
  r.dev.run_until_idle();
  REQUIRE(r.dev.violations().size() == 1);
  CHECK(any_contains(r.dev.violations(), "use of freed memory"));
}

TEST_CASE("ops run FIFO per stream and in parallel across streams") {
  rig r;
  const stream_handle b = r.stream();
  void* x = r.device(16);
  void* y = r.device(16);
  r.dev.advance(0);  // the allocations take their place on r.s: b may use y from now on
  const std::uint64_t k1 = r.dev.submit(r.s, {{x, 16, true}}, 4);
  const std::uint64_t k2 = r.dev.submit(r.s, {{x, 16, true}}, 4);
  const std::uint64_t k3 = r.dev.submit(b, {{y, 16, true}}, 6);
  CHECK(r.dev.pending_ops() == 3);
  r.dev.advance(4);
  CHECK(all_bytes(x, 16, fake_backend::write_tag(k1)));
  CHECK(all_bytes(y, 16, 0));
  r.dev.advance(2);
  CHECK(all_bytes(y, 16, fake_backend::write_tag(k3)));
  CHECK(all_bytes(x, 16, fake_backend::write_tag(k1)));
  r.dev.advance(2);
  CHECK(all_bytes(x, 16, fake_backend::write_tag(k2)));
  CHECK(r.dev.pending_ops() == 0);
  CHECK(r.dev.now() == 8);
  REQUIRE(r.dev.free_async(x, r.s).ok());
  REQUIRE(r.dev.free_async(y, r.s).ok());
  r.dev.run_until_idle();
}

TEST_CASE("a wait holds a stream until the event's record completes, then it catches up") {
  rig r;
  const stream_handle b = r.stream();
  event_handle e;
  REQUIRE(r.dev.event_create(0, e).ok());
  void* x = r.device(16);
  r.dev.submit(r.s, {}, 5);
  REQUIRE(r.dev.event_record(e, r.s).ok());
  REQUIRE(r.dev.stream_wait_event(b, e).ok());
  const std::uint64_t k = r.dev.submit(b, {{x, 16, true}}, 2);
  r.dev.advance(6);
  CHECK(all_bytes(x, 16, 0));  // started at 5, ends at 7
  r.dev.advance(1);
  CHECK(all_bytes(x, 16, fake_backend::write_tag(k)));
  // Re-recording e later does not change what b waited for.
  REQUIRE(r.dev.event_record(e, r.s).ok());
  REQUIRE(r.dev.event_destroy(e).ok());  // its record still completes
  REQUIRE(r.dev.free_async(x, b).ok());
  r.dev.run_until_idle();
  CHECK(r.dev.violations().empty());
}

TEST_CASE("copies land at completion, not before") {
  rig r{{.devices = 1, .total_bytes_per_device = 64 * MiB, .copy_ticks = 3}};
  auto* src = static_cast<std::uint8_t*>(r.pinned(32));
  auto* dst = static_cast<std::uint8_t*>(r.pinned(32));
  for (std::uint8_t i = 0; i < 32; ++i) src[i] = i;
  std::memset(dst, 0, 32);
  REQUIRE(r.dev.copy_async(dst, src, 32, r.s).ok());
  r.dev.advance(2);
  CHECK(all_bytes(dst, 32, 0));
  r.dev.advance(1);
  CHECK(std::memcmp(dst, src, 32) == 0);
  REQUIRE(r.dev.free_pinned(src).ok());
  REQUIRE(r.dev.free_pinned(dst).ok());
  CHECK(r.dev.violations().empty());
}

TEST_CASE("out of memory counts other processes, live and retiring bytes") {
  rig r{{.devices = 2, .total_bytes_per_device = 10 * MiB, .used_by_others_bytes = 2 * MiB}};
  void* p = nullptr;
  CHECK(r.dev.alloc_async(0, 8 * MiB + 1, r.s, p).code == device_errc::out_of_memory);
  void* a = r.device(6 * MiB);
  r.dev.submit(r.s, {{a, 16, false}}, 10);
  REQUIRE(r.dev.free_async(a, r.s).ok());
  // Retiring: not allocatable yet.
  CHECK(r.dev.alloc_async(0, 4 * MiB, r.s, p).code == device_errc::out_of_memory);
  r.dev.run_until_idle();
  void* b = r.device(8 * MiB);
  r.dev.set_used_by_others(0, 3 * MiB);
  std::uint64_t f = 0;
  std::uint64_t t = 0;
  REQUIRE(r.dev.mem_get_info(0, f, t).ok());
  CHECK(t == 10 * MiB);
  CHECK(f == 0);  // over-committed reads as 0, never wraps
  REQUIRE(r.dev.mem_get_info(1, f, t).ok());
  CHECK(f == 8 * MiB);
  // A stream of device 0 cannot allocate on device 1 (cudaMallocAsync uses the stream's device).
  CHECK(r.dev.alloc_async(1, 64, r.s, p).code == device_errc::invalid_value);
  REQUIRE(r.dev.free_async(b, r.s).ok());
  r.dev.run_until_idle();
}

TEST_CASE("no devices: device_count is no_device, as cudart says without a GPU") {
  fake_backend dev{{.devices = 0}};
  int n = -1;
  CHECK(dev.device_count(n).code == device_errc::no_device);
  CHECK(n == 0);
  stream_handle s;
  CHECK(dev.stream_create(0, s).code == device_errc::no_device);
}

TEST_CASE("leaks lists live allocations, streams and events") {
  rig r;
  void* d = r.device(100);
  r.dev.advance(0);  // the allocation is an op on r.s until time moves
  void* h = r.pinned(200);
  event_handle e;
  REQUIRE(r.dev.event_create(0, e).ok());
  const std::vector<std::string> l = r.dev.leaks();
  REQUIRE(l.size() == 4);
  CHECK(any_contains(l, "device allocation #1 (100 bytes on device 0)"));
  CHECK(any_contains(l, "pinned allocation #2 (200 bytes)"));
  CHECK(any_contains(l, "stream"));
  CHECK(any_contains(l, "event"));
  CHECK(r.dev.live_allocations() == 2);
  CHECK(r.dev.live_bytes() == 300);
  CHECK(r.dev.live_pinned_bytes() == 200);

  REQUIRE(r.dev.free_async(d, r.s).ok());
  CHECK(r.dev.leaks().size() == 3);  // a pending free is not a leak
  REQUIRE(r.dev.free_pinned(h).ok());
  REQUIRE(r.dev.event_destroy(e).ok());
  REQUIRE(r.dev.stream_destroy(r.s).ok());  // its queued free still runs
  CHECK(r.dev.pending_ops() == 1);
  CHECK(r.dev.leaks().empty());
  r.dev.run_until_idle();
  CHECK(r.dev.pending_ops() == 0);
  CHECK(r.dev.retiring_bytes(0) == 0);
  CHECK(r.dev.violations().empty());
}

TEST_CASE("counters prove pooling: events and streams created") {
  rig r;
  CHECK(r.dev.streams_created() == 1);
  CHECK(r.dev.events_created() == 0);
  for (int i = 0; i < 3; ++i) {
    event_handle e;
    REQUIRE(r.dev.event_create(0, e).ok());
    REQUIRE(r.dev.event_destroy(e).ok());
  }
  CHECK(r.dev.events_created() == 3);
  CHECK(r.dev.live_events() == 0);
  CHECK(r.dev.live_streams() == 1);
  REQUIRE(r.dev.stream_destroy(r.s).ok());
}

TEST_CASE("handles and stream ids are never reused") {
  fake_backend dev;
  std::vector<std::uint64_t> handles;
  std::vector<std::uint64_t> ids;
  for (int i = 0; i < 5; ++i) {
    stream_handle s;
    event_handle e;
    REQUIRE(dev.stream_create(0, s).ok());
    REQUIRE(dev.event_create(0, e).ok());
    std::uint64_t id = 0;
    REQUIRE(dev.stream_id(s, id).ok());
    if (!ids.empty()) CHECK(id > ids.back());  // monotonic
    ids.push_back(id);
    handles.push_back(s.value);
    handles.push_back(e.value);
    REQUIRE(dev.stream_destroy(s).ok());
    REQUIRE(dev.event_destroy(e).ok());
  }
  std::sort(handles.begin(), handles.end());
  CHECK(std::adjacent_find(handles.begin(), handles.end()) == handles.end());
  CHECK(std::find(handles.begin(), handles.end(), 0u) == handles.end());
}

TEST_CASE("submit on a dead stream is a violation") {
  rig r;
  stream_handle gone = r.stream();
  REQUIRE(r.dev.stream_destroy(gone).ok());
  CHECK(r.dev.submit(gone, {}) == 0);
  CHECK(any_contains(r.dev.violations(), "not a live stream"));
}

TEST_CASE("deterministic: the same calls give the same timeline and the same reports") {
  const auto run = [] {
    rig r{timeline_only};
    const stream_handle b = r.stream();
    void* p = r.device(64);
    r.dev.submit(b, {}, 7);
    r.dev.submit(b, {{p, 64, true}}, 2);
    REQUIRE(r.dev.free_async(p, r.s).ok());
    r.dev.run_until_idle();
    std::vector<std::string> v = r.dev.violations();
    // Pointer values differ between runs; the rest must not.
    for (std::string& s : v) {
      for (std::size_t at = s.find("0x"); at != std::string::npos; at = s.find("0x", at + 2)) {
        std::size_t end = at + 2;
        while (end < s.size() && std::isxdigit(static_cast<unsigned char>(s[end])) != 0) ++end;
        s.replace(at, end - at, "0x?");
      }
    }
    return std::make_pair(r.dev.now(), v);
  };
  const auto a = run();
  const auto b = run();
  CHECK(a.first == b.first);
  CHECK(a.second == b.second);
  CHECK(a.second.size() == 1);
}

// ---- races: unordered conflicting work on two streams, reported when queued ----

TEST_CASE("races: a read on another stream while a write is pending, with no event wait between, is reported") {
  rig r;
  const stream_handle b = r.stream();
  void* p = r.device(256);
  r.dev.advance(0);
  const std::uint64_t w = r.dev.submit(r.s, {{p, 256, true}}, 5);
  const std::uint64_t rd = r.dev.submit(b, {{p, 64, false}}, 1);
  REQUIRE(r.dev.violations().size() == 1);
  const std::string& v = r.dev.violations()[0];
  CHECK(v.find("op#" + std::to_string(rd) + " (kernel on stream") != std::string::npos);
  CHECK(v.find("races with op#" + std::to_string(w)) != std::string::npos);
  CHECK(v.find("when queued") != std::string::npos);
  CHECK(v.find("reads") != std::string::npos);
  CHECK(v.find("writes") != std::string::npos);
  // The other order (a write queued while a read elsewhere is pending) is a race too.
  const std::uint64_t rd2 = r.dev.submit(b, {{p, 64, false}}, 9);
  r.dev.clear_violations();
  r.dev.advance(5);  // w is done; rd2 is still pending on b
  r.dev.submit(r.s, {{p, 256, true}}, 1);
  REQUIRE(r.dev.violations().size() == 1);
  CHECK(r.dev.violations()[0].find("races with op#" + std::to_string(rd2)) != std::string::npos);
  r.dev.run_until_idle();
  REQUIRE(r.dev.free_async(p, r.s).ok());
  r.dev.run_until_idle();
}

TEST_CASE("races: an event recorded after the write and waited on orders the streams") {
  rig r;
  const stream_handle b = r.stream();
  const stream_handle c = r.stream();
  void* p = r.device(256);
  event_handle e1;
  event_handle e2;
  REQUIRE(r.dev.event_create(0, e1).ok());
  REQUIRE(r.dev.event_create(0, e2).ok());
  REQUIRE(r.dev.event_record(e1, r.s).ok());  // after the allocation: b may use p
  REQUIRE(r.dev.stream_wait_event(b, e1).ok());
  r.dev.submit(b, {{p, 256, true}}, 5);
  REQUIRE(r.dev.event_record(e2, b).ok());
  REQUIRE(r.dev.stream_wait_event(c, e2).ok());  // c after b's write, and (through b) after r.s
  r.dev.submit(c, {{p, 256, false}}, 1);
  void* q = r.device(64);
  r.dev.advance(0);
  r.dev.submit(r.s, {{q, 64, false}}, 4);  // reads on two streams never race
  r.dev.submit(b, {{q, 64, false}}, 4);
  CHECK_MESSAGE(r.dev.violations().empty(), lines(r.dev.violations()));
  r.dev.run_until_idle();
  REQUIRE(r.dev.free_async(p, r.s).ok());  // everything that used p has finished
  REQUIRE(r.dev.free_async(q, r.s).ok());
  r.dev.run_until_idle();
  CHECK_MESSAGE(r.dev.violations().empty(), lines(r.dev.violations()));
  REQUIRE(r.dev.event_destroy(e1).ok());
  REQUIRE(r.dev.event_destroy(e2).ok());
}

TEST_CASE("races: a wait on an event recorded before the write does not order it") {
  rig r;
  const stream_handle b = r.stream();
  void* p = r.device(256);
  event_handle e;
  REQUIRE(r.dev.event_create(0, e).ok());
  REQUIRE(r.dev.event_record(e, r.s).ok());
  r.dev.submit(r.s, {{p, 256, true}}, 5);  // after the record
  REQUIRE(r.dev.stream_wait_event(b, e).ok());
  r.dev.submit(b, {{p, 256, false}}, 1);
  CHECK(any_contains(r.dev.violations(), "races with"));
  r.dev.run_until_idle();
  REQUIRE(r.dev.free_async(p, r.s).ok());
  REQUIRE(r.dev.event_destroy(e).ok());
  r.dev.run_until_idle();
}

TEST_CASE("races: stream-ordered memory used on another stream before its allocation is ordered") {
  rig r;
  const stream_handle b = r.stream();
  void* p = r.device(128);  // an op on r.s, not yet reached
  r.dev.submit(b, {{p, 128, true}}, 1);
  CHECK(any_contains(r.dev.violations(), "races with"));
  CHECK(any_contains(r.dev.violations(), "alloc_async"));
  r.dev.run_until_idle();
  REQUIRE(r.dev.free_async(p, b).ok());
  r.dev.run_until_idle();
}

TEST_CASE("races: a free_async on one stream while another stream may still use the block") {
  // The retire fence's first step exists for this: free on the home stream only
  // after waiting for every other stream that used the buffer.
  rig r;
  const stream_handle b = r.stream();
  void* p = r.device(512);
  r.dev.advance(0);
  r.dev.submit(b, {{p, 512, false}}, 20);
  REQUIRE(r.dev.free_async(p, r.s).ok());
  REQUIRE(any_contains(r.dev.violations(), "races with"));
  CHECK(any_contains(r.dev.violations(), "free_async on stream"));
  r.dev.run_until_idle();  // (the timeline then sees b read freed memory too)
  r.dev.clear_violations();
  // With the wait, the same free is fine, and it happens after b's read.
  void* q = r.device(512);
  r.dev.advance(0);
  r.dev.submit(b, {{q, 512, false}}, 20);
  event_handle e;
  REQUIRE(r.dev.event_create(0, e).ok());
  REQUIRE(r.dev.event_record(e, b).ok());
  REQUIRE(r.dev.stream_wait_event(r.s, e).ok());
  REQUIRE(r.dev.free_async(q, r.s).ok());
  r.dev.run_until_idle();
  CHECK_MESSAGE(!any_contains(r.dev.violations(), "op#"), lines(r.dev.violations()));
  REQUIRE(r.dev.event_destroy(e).ok());
}

TEST_CASE("races: work that finished before the other is queued is ordered") {
  rig r;
  const stream_handle b = r.stream();
  void* p = r.device(64);
  r.dev.submit(r.s, {{p, 64, true}}, 3);
  r.dev.advance(3);  // the host saw it done (as after an event query)
  r.dev.submit(b, {{p, 64, true}}, 1);
  r.dev.run_until_idle();
  REQUIRE(r.dev.free_async(p, b).ok());
  r.dev.run_until_idle();
  CHECK_MESSAGE(r.dev.violations().empty(), lines(r.dev.violations()));
}

TEST_CASE("several threads may drive one fake") {
  fake_backend dev{{.devices = 1, .total_bytes_per_device = 64 * MiB}};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    // CHECK, not REQUIRE: a REQUIRE throws, and a throw out of a thread terminates.
    threads.emplace_back([&dev] {
      stream_handle s;
      CHECK(dev.stream_create(0, s).ok());
      for (int i = 0; i < 200; ++i) {
        void* p = nullptr;
        CHECK(dev.alloc_async(0, 256, s, p).ok());
        dev.submit(s, {{p, 256, true}}, 1);
        CHECK(dev.free_async(p, s).ok());
        dev.advance(1);
      }
      CHECK(dev.stream_destroy(s).ok());
    });
  }
  for (std::thread& t : threads) t.join();
  dev.run_until_idle();
  CHECK_MESSAGE(dev.violations().empty(), lines(dev.violations()));
  CHECK(dev.leaks().empty());
  CHECK(dev.retiring_bytes(0) == 0);
}

}  // namespace
}  // namespace pnmem::cuda
