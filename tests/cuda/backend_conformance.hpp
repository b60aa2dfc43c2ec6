// tests/cuda/backend_conformance.hpp - one suite, every device_backend.
//
// Written once as doctest template test cases over a *fixture* type, and
// instantiated by PNMEM_BACKEND_CONFORMANCE(fixture) in each backend's test
// program (Abseil's waiter_test model): the fake runs it in every build, cudart
// wherever there is a GPU. A fixture supplies:
//
//   device_backend& backend();
//   static constexpr bool simulated;  // the fake: exact byte accounting, stale
//                                     // handles detected, violations recorded
//   void hold(stream_handle s);       // work queued on s after this cannot start ...
//   void release();                   // ... until this
//   void let_time_pass();             // long enough for unblocked queued work to finish
//   void settle();                    // every queued op has finished
//   void check_clean();               // the fake: no violations (cudart: nothing to check)
//   static constexpr bool eviction_kernels;  // the rung 4b ops are there (cudart: built with nvcc)
//
// Use it inside namespace pnmem::cuda::test (the test ids live there):
//
//   namespace pnmem::cuda::test { PNMEM_BACKEND_CONFORMANCE(fake_fixture); }
//
// Sizes stay small (a few MiB): the fake backs them with host memory.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "pnmem/cuda/device_backend.hpp"
#include "pnmem/keep_set.hpp"
#include "pnmem/units.hpp"
#include "../keep_set_reference.hpp"

namespace doctest {
template <>
struct StringMaker<pnmem::cuda::device_errc> {
  static String convert(pnmem::cuda::device_errc e) { return String(std::string(pnmem::cuda::to_string(e)).c_str()); }
};
}  // namespace doctest

namespace pnmem::cuda::test {

inline constexpr int dev0 = 0;

// Violations or leaks, one per line, for a failure message.
inline std::string lines(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += s + "\n";
  return out;
}

// RAII for the handles a test makes, so a failed REQUIRE does not leak them into
// the next test (cudart) or the leak list (fake).
struct scope {
  device_backend& b;
  std::vector<stream_handle> streams;
  std::vector<event_handle> events;
  std::vector<std::pair<void*, stream_handle>> device_blocks;
  std::vector<void*> pinned;

  explicit scope(device_backend& backend) : b(backend) {}
  scope(const scope&) = delete;
  scope& operator=(const scope&) = delete;
  ~scope() { reset(); }

  // Frees what is left (device memory stream-ordered, on the stream it was allocated on).
  void reset() {
    for (auto& [p, s] : device_blocks) (void)b.free_async(p, s);
    device_blocks.clear();
    for (void* p : pinned) (void)b.free_pinned(p);
    pinned.clear();
    for (event_handle e : events) (void)b.event_destroy(e);
    events.clear();
    for (stream_handle s : streams) (void)b.stream_destroy(s);
    streams.clear();
  }

  stream_handle stream() {
    stream_handle s;
    REQUIRE(b.stream_create(dev0, s).code == device_errc::ok);
    REQUIRE(s);
    streams.push_back(s);
    return s;
  }
  event_handle event() {
    event_handle e;
    REQUIRE(b.event_create(dev0, e).code == device_errc::ok);
    REQUIRE(e);
    events.push_back(e);
    return e;
  }
  void* device(std::size_t bytes, stream_handle s) {
    void* p = nullptr;
    REQUIRE(b.alloc_async(dev0, bytes, s, p).code == device_errc::ok);
    REQUIRE(p != nullptr);
    device_blocks.emplace_back(p, s);
    return p;
  }
  // Frees one device block now (stream-ordered) and forgets it.
  device_status free_device(void* p) {
    for (auto it = device_blocks.begin(); it != device_blocks.end(); ++it) {
      if (it->first == p) {
        const stream_handle s = it->second;
        device_blocks.erase(it);
        return b.free_async(p, s);
      }
    }
    return device_status{device_errc::invalid_value, 0};
  }
  std::byte* host(std::size_t bytes) {
    void* p = nullptr;
    REQUIRE(b.alloc_pinned(bytes, p).code == device_errc::ok);
    REQUIRE(p != nullptr);
    pinned.push_back(p);
    return static_cast<std::byte*>(p);
  }
};

// What every conformance case starts with: the fixture, its backend, and a scope
// for the handles the case makes (destroyed first, so freed through a live backend).
template <class F>
struct rig {
  F f;
  device_backend& b{f.backend()};
  scope sc{b};
};

// `e` was recorded behind work on a held stream: pending while held, complete once
// the stream is released and the backend has settled.
template <class F>
void check_pending_until_released(F& f, device_backend& b, event_handle e) {
  f.let_time_pass();
  CHECK(b.event_query(e).code == device_errc::not_ready);
  f.release();
  f.settle();
  CHECK(b.event_query(e).code == device_errc::ok);
}

inline std::uint64_t free_bytes(device_backend& b) {
  std::uint64_t f = 0;
  std::uint64_t t = 0;
  REQUIRE(b.mem_get_info(dev0, f, t).code == device_errc::ok);
  return f;
}

inline void fill_pattern(std::byte* p, std::size_t n, std::uint8_t seed) {
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::byte>((i * 131 + seed) & 0xFF);
}

inline bool has_pattern(const std::byte* p, std::size_t n, std::uint8_t seed) {
  for (std::size_t i = 0; i < n; ++i) {
    if (p[i] != static_cast<std::byte>((i * 131 + seed) & 0xFF)) return false;
  }
  return true;
}

TEST_CASE_TEMPLATE_DEFINE("devices: at least one, each with a total and a free no larger than it", F,
                          conformance_devices) {
  F f;
  device_backend& b = f.backend();
  int n = 0;
  REQUIRE(b.device_count(n).code == device_errc::ok);
  REQUIRE(n >= 1);
  for (int d = 0; d < n; ++d) {
    std::uint64_t free_b = 0;
    std::uint64_t total_b = 0;
    REQUIRE(b.mem_get_info(d, free_b, total_b).code == device_errc::ok);
    CHECK(total_b > 0);
    CHECK(free_b <= total_b);
  }
  std::uint64_t x = 0;
  std::uint64_t y = 0;
  CHECK(b.mem_get_info(n, x, y).code == device_errc::no_device);
  CHECK(b.mem_get_info(-1, x, y).code == device_errc::no_device);
  CHECK(!b.name().empty());
}

TEST_CASE_TEMPLATE_DEFINE("alloc and stream-ordered free move mem_get_info's free", F, conformance_accounting) {
  rig<F> r;
  auto& [f, b, sc] = r;
  const stream_handle s = sc.stream();
  f.settle();
  constexpr std::size_t bytes = 64 * MiB;
  const std::uint64_t before = free_bytes(b);
  void* p = sc.device(bytes, s);
  f.settle();
  const std::uint64_t during = free_bytes(b);
  // The fake is exact; a real pool reserves in chunks, so at least `bytes` went.
  if constexpr (F::simulated) {
    CHECK(during == before - bytes);
  } else {
    CHECK(during + bytes <= before);
  }
  REQUIRE(sc.free_device(p).ok());
  f.settle();
  const std::uint64_t after = free_bytes(b);
  if constexpr (F::simulated) {
    CHECK(after == before);
  } else {
    // The pool returns memory to the driver at synchronisation (release threshold 0).
    CHECK(after + 8 * MiB >= before);
  }
  f.check_clean();
}

TEST_CASE_TEMPLATE_DEFINE("a free queued behind work waits for it, and the work sees its data", F,
                          conformance_ordered_free) {
  rig<F> r;
  auto& [f, b, sc] = r;
  const stream_handle s = sc.stream();
  constexpr std::size_t n = 1 * MiB;
  std::byte* src = sc.host(n);
  std::byte* dst = sc.host(n);
  fill_pattern(src, n, 7);
  std::memset(dst, 0, n);
  void* d = sc.device(n, s);
  f.hold(s);
  REQUIRE(b.copy_async(d, src, n, s).ok());
  REQUIRE(b.copy_async(dst, d, n, s).ok());
  REQUIRE(sc.free_device(d).ok());  // queued after the copies: they still read d
  event_handle done = sc.event();
  REQUIRE(b.event_record(done, s).ok());
  f.let_time_pass();
  CHECK(b.event_query(done).code == device_errc::not_ready);
  f.release();
  f.settle();
  CHECK(b.event_query(done).code == device_errc::ok);
  CHECK(has_pattern(dst, n, 7));
  f.check_clean();
}

TEST_CASE_TEMPLATE_DEFINE("events: pending until the work before the record finishes", F, conformance_events) {
  rig<F> r;
  auto& [f, b, sc] = r;
  const stream_handle s = sc.stream();
  const event_handle e = sc.event();
  // Never recorded: complete (cudaEventQuery's rule).
  CHECK(b.event_query(e).code == device_errc::ok);

  f.hold(s);
  REQUIRE(b.event_record(e, s).ok());
  check_pending_until_released(f, b, e);

  // Re-recording: the query follows the latest record.
  f.hold(s);
  REQUIRE(b.event_record(e, s).ok());
  check_pending_until_released(f, b, e);

  // A record on an idle stream completes without anything else happening.
  const event_handle idle = sc.event();
  REQUIRE(b.event_record(idle, sc.stream()).ok());
  f.settle();
  CHECK(b.event_query(idle).code == device_errc::ok);
  f.check_clean();
}

TEST_CASE_TEMPLATE_DEFINE("stream_wait_event orders work across streams", F, conformance_wait_event) {
  rig<F> r;
  auto& [f, b, sc] = r;
  const stream_handle a = sc.stream();
  const stream_handle c = sc.stream();
  constexpr std::size_t n = 256 * KiB;
  std::byte* src = sc.host(n);
  std::byte* dst = sc.host(n);
  fill_pattern(src, n, 3);
  std::memset(dst, 0, n);

  const event_handle on_a = sc.event();
  const event_handle on_c = sc.event();
  f.hold(a);
  REQUIRE(b.event_record(on_a, a).ok());
  REQUIRE(b.stream_wait_event(c, on_a).ok());
  REQUIRE(b.copy_async(dst, src, n, c).ok());  // must not run before a's held work
  REQUIRE(b.event_record(on_c, c).ok());
  f.let_time_pass();
  CHECK(b.event_query(on_c).code == device_errc::not_ready);
  CHECK(std::memcmp(dst, std::vector<std::byte>(n).data(), n) == 0);  // nothing landed yet
  f.release();
  f.settle();
  CHECK(b.event_query(on_a).code == device_errc::ok);
  CHECK(b.event_query(on_c).code == device_errc::ok);
  CHECK(has_pattern(dst, n, 3));

  // Waiting on an event that was never recorded does not wait at all.
  const event_handle never = sc.event();
  REQUIRE(b.stream_wait_event(c, never).ok());
  const event_handle after = sc.event();
  REQUIRE(b.event_record(after, c).ok());
  f.settle();
  CHECK(b.event_query(after).code == device_errc::ok);
  f.check_clean();
}

TEST_CASE_TEMPLATE_DEFINE("copy_async copies host to device to device to host", F, conformance_copy) {
  rig<F> r;
  auto& [f, b, sc] = r;
  const stream_handle s = sc.stream();
  const stream_handle t = sc.stream();
  for (const std::size_t n : {std::size_t{1}, std::size_t{4097}, std::size_t{3 * MiB + 5}}) {
    CAPTURE(n);
    std::byte* src = sc.host(n);
    std::byte* dst = sc.host(n);
    fill_pattern(src, n, static_cast<std::uint8_t>(n));
    std::memset(dst, 0, n);
    void* d1 = sc.device(n, s);
    void* d2 = sc.device(n, s);
    REQUIRE(b.copy_async(d1, src, n, s).ok());
    REQUIRE(b.copy_async(d2, d1, n, s).ok());
    // Hand over to another stream through an event: the copy-out is on t.
    const event_handle e = sc.event();
    REQUIRE(b.event_record(e, s).ok());
    REQUIRE(b.stream_wait_event(t, e).ok());
    REQUIRE(b.copy_async(dst, d2, n, t).ok());
    f.settle();
    CHECK(has_pattern(dst, n, static_cast<std::uint8_t>(n)));
    // Device memory is only freed once t's copy-out is ordered before the free.
    const event_handle out = sc.event();
    REQUIRE(b.event_record(out, t).ok());
    REQUIRE(b.stream_wait_event(s, out).ok());
    REQUIRE(sc.free_device(d1).ok());
    REQUIRE(sc.free_device(d2).ok());
  }
  f.settle();
  f.check_clean();
}

TEST_CASE_TEMPLATE_DEFINE("stream ids are unique and stable", F, conformance_stream_ids) {
  rig<F> r;
  auto& [f, b, sc] = r;
  std::set<std::uint64_t> ids;
  std::vector<stream_handle> made;
  for (int i = 0; i < 8; ++i) {
    const stream_handle s = sc.stream();
    std::uint64_t id = 0;
    REQUIRE(b.stream_id(s, id).ok());
    std::uint64_t again = 0;
    REQUIRE(b.stream_id(s, again).ok());
    CHECK(again == id);
    CHECK(ids.insert(id).second);
  }
  // Ids are not reused after destruction (handles may be: that is why the owner keys by id).
  sc.reset();
  stream_handle s;
  REQUIRE(b.stream_create(dev0, s).ok());
  std::uint64_t id = 0;
  REQUIRE(b.stream_id(s, id).ok());
  CHECK(ids.count(id) == 0);
  REQUIRE(b.stream_destroy(s).ok());
  f.check_clean();
}

TEST_CASE_TEMPLATE_DEFINE("invalid arguments and handles are invalid_value, never a crash", F,
                          conformance_invalid) {
  rig<F> r;
  auto& [f, b, sc] = r;
  const stream_handle s = sc.stream();
  const event_handle e = sc.event();
  void* p = reinterpret_cast<void*>(std::uintptr_t{1});
  std::uint64_t id = 0;
  constexpr auto invalid = device_errc::invalid_value;

  CHECK(b.stream_destroy(stream_handle{}).code == invalid);
  CHECK(b.event_destroy(event_handle{}).code == invalid);
  CHECK(b.event_record(event_handle{}, s).code == invalid);
  CHECK(b.event_record(e, stream_handle{}).code == invalid);
  CHECK(b.event_query(event_handle{}).code == invalid);
  CHECK(b.stream_wait_event(stream_handle{}, e).code == invalid);
  CHECK(b.stream_wait_event(s, event_handle{}).code == invalid);
  CHECK(b.stream_id(stream_handle{}, id).code == invalid);
  CHECK(b.alloc_async(dev0, 0, s, p).code == invalid);
  CHECK(p == nullptr);
  CHECK(b.alloc_async(dev0, 64, stream_handle{}, p).code == invalid);
  CHECK(b.free_async(nullptr, s).code == invalid);
  CHECK(b.alloc_pinned(0, p).code == invalid);
  CHECK(b.free_pinned(nullptr).code == invalid);
  std::byte host[16] = {};
  CHECK(b.copy_async(nullptr, host, 16, s).code == invalid);
  CHECK(b.copy_async(host, nullptr, 16, s).code == invalid);
  CHECK(b.copy_async(host, host + 8, 0, s).code == invalid);
  CHECK(b.copy_async(host, host + 8, 8, stream_handle{}).code == invalid);

  // Devices that do not exist.
  stream_handle s2;
  event_handle e2;
  CHECK(b.stream_create(-1, s2).code == device_errc::no_device);
  CHECK(b.event_create(1 << 20, e2).code == device_errc::no_device);

  if constexpr (F::simulated) {
    // Only the fake can tell a destroyed or made-up handle from a live one.
    const stream_handle gone = sc.stream();
    const event_handle gone_e = sc.event();
    REQUIRE(b.stream_destroy(gone).ok());
    REQUIRE(b.event_destroy(gone_e).ok());
    sc.streams.pop_back();
    sc.events.pop_back();
    CHECK(b.stream_destroy(gone).code == invalid);
    CHECK(b.stream_id(gone, id).code == invalid);
    CHECK(b.event_record(e, gone).code == invalid);
    CHECK(b.event_destroy(gone_e).code == invalid);
    CHECK(b.event_query(gone_e).code == invalid);
    CHECK(b.event_query(event_handle{0xBADBADu}).code == invalid);
    CHECK(b.stream_id(stream_handle{0xBADBADu}, id).code == invalid);
    // An event handle is not a stream handle.
    CHECK(b.stream_id(stream_handle{e.value}, id).code == invalid);
  }
  f.check_clean();
}

TEST_CASE_TEMPLATE_DEFINE("an allocation larger than the device is out_of_memory, and the next one works", F,
                          conformance_out_of_memory) {
  rig<F> r;
  auto& [f, b, sc] = r;
  const stream_handle s = sc.stream();
  std::uint64_t free_b = 0;
  std::uint64_t total_b = 0;
  REQUIRE(b.mem_get_info(dev0, free_b, total_b).ok());
  void* p = nullptr;
  const auto too_big = static_cast<std::size_t>(total_b + total_b / 2);
  const device_status st = b.alloc_async(dev0, too_big, s, p);
  CHECK(st.code == device_errc::out_of_memory);
  CHECK(p == nullptr);
  void* q = sc.device(4096, s);
  CHECK(q != nullptr);
  f.settle();
  f.check_clean();
}

// Memory pools are optional (device_alloc_mode); the plain pair (cudaMalloc /
// cudaFree) is the fallback and works on every device, pools or not.
TEST_CASE_TEMPLATE_DEFINE("plain alloc/free (the no-pools fallback): any stream uses it, freed after its work", F,
                          conformance_plain) {
  rig<F> r;
  auto& [f, b, sc] = r;
  alloc_mode mode = alloc_mode::unknown;
  REQUIRE(b.device_alloc_mode(dev0, mode).ok());
  CHECK(mode != alloc_mode::unknown);
  MESSAGE("device 0 allocation mode: " << doctest::String(to_string(mode).data()));
  int n_dev = 0;
  REQUIRE(b.device_count(n_dev).ok());
  alloc_mode none = alloc_mode::stream_ordered;
  CHECK(!b.device_alloc_mode(n_dev, none).ok());
  CHECK(none == alloc_mode::unknown);
  if (mode == alloc_mode::plain) {
    // No pools: stream-ordered allocation is refused, never half-done.
    const stream_handle s0 = sc.stream();
    void* q = nullptr;
    CHECK(b.alloc_async(dev0, 4096, s0, q).code == device_errc::not_supported);
    CHECK(q == nullptr);
  }
  const stream_handle s = sc.stream();
  const stream_handle t = sc.stream();
  f.settle();
  constexpr std::size_t n = 1 * MiB;
  std::byte* src = sc.host(n);
  std::byte* dst = sc.host(n);
  fill_pattern(src, n, 3);
  std::memset(dst, 0, n);
  const std::uint64_t before = free_bytes(b);
  void* d = nullptr;
  REQUIRE(b.alloc_plain(dev0, n, d).ok());
  REQUIRE(d != nullptr);
  if constexpr (F::simulated) {
    CHECK(free_bytes(b) == before - n);
  } else {
    CHECK(free_bytes(b) + n <= before + 2 * MiB);  // the driver's granularity
  }
  // Usable at once by any stream: written on s, read on t after an event.
  REQUIRE(b.copy_async(d, src, n, s).ok());
  event_handle written = sc.event();
  REQUIRE(b.event_record(written, s).ok());
  REQUIRE(b.stream_wait_event(t, written).ok());
  REQUIRE(b.copy_async(dst, d, n, t).ok());
  f.settle();  // the caller's guarantee before free_plain: no queued work uses d
  CHECK(has_pattern(dst, n, 3));
  REQUIRE(b.free_plain(d).ok());
  if constexpr (F::simulated) CHECK(free_bytes(b) == before);
  void* p = nullptr;
  CHECK(b.alloc_plain(dev0, 0, p).code == device_errc::invalid_value);
  CHECK(p == nullptr);
  CHECK(b.free_plain(nullptr).code == device_errc::invalid_value);
  std::uint64_t free_b = 0;
  std::uint64_t total_b = 0;
  REQUIRE(b.mem_get_info(dev0, free_b, total_b).ok());
  CHECK(b.alloc_plain(dev0, static_cast<std::size_t>(total_b + total_b / 2), p).code == device_errc::out_of_memory);
  CHECK(p == nullptr);
  f.check_clean();
}


// --- rung 4b: the eviction ops against eviction_ops.hpp's host reference, on random data ---------
//
// The expected values come from tests/keep_set_reference.hpp, the rules written out the slow way apart
// from keep_set.hpp: the fake backend runs keep_set.hpp itself, so comparing it with keep_set.hpp would
// compare the code with itself (issue 42); on cudart these are the kernels of eviction_kernels.cu
// (scripts/gpu-check). Scores are multiples of
// 1/8 so that sums are exact and ties are everywhere (the tie rule is half of what must match), with
// a few NaN. A backend built without kernels must say not_supported, and the case ends there.
namespace eviction_check {

// Device memory any stream may use, with or without pools; freed after the fixture settled.
struct plain_block {
  device_backend& b;
  void* p = nullptr;
  plain_block(device_backend& backend, std::size_t bytes) : b(backend) {
    REQUIRE(b.alloc_plain(dev0, bytes, p).ok());
    REQUIRE(p != nullptr);
  }
  plain_block(const plain_block&) = delete;
  plain_block& operator=(const plain_block&) = delete;
  ~plain_block() { (void)b.free_plain(p); }
};

inline std::uint64_t next(std::uint64_t& x) {  // splitmix64: the same data on every backend
  x += 0x9e3779b97f4a7c15ULL;
  std::uint64_t z = x;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace eviction_check

TEST_CASE_TEMPLATE_DEFINE("eviction ops: pooling, selection and compaction equal the host reference", F,
                          conformance_eviction) {
  using namespace eviction_check;
  rig<F> r;
  auto& [f, b, sc] = r;
  const stream_handle s = sc.stream();
  {
    // Refused before anything is queued: the arguments valid() rejects.
    float x = 0.0f;
    std::int32_t k = 0;
    CHECK(b.observation_scores_async({nullptr, 1, 1, 7, &x}, s).code == device_errc::invalid_value);
    CHECK(b.observation_scores_async({&x, 1, 1, max_pool_kernel + 1, &x}, s).code == device_errc::invalid_value);
    CHECK(b.select_keep_async({&x, 0, 1, {}, &k}, s).code == device_errc::invalid_value);
    CHECK(b.select_keep_async({&x, 4, 2, {}, nullptr}, s).code == device_errc::invalid_value);
    CHECK(b.compact_rows_async({&x, 4, 1, &k, 2}, s).code == device_errc::invalid_value);
    CHECK(b.compact_rows_async({&x, 0, 1, &k, 1}, s).code == device_errc::invalid_value);
  }
  std::uint64_t seed = 0x4b1dULL;
  for (const int n : {1, 37, 1000, 5003, 33000}) {
    CAPTURE(n);
    constexpr int rows = 8;
    const auto un = static_cast<std::size_t>(n);
    std::vector<float> attn(rows * un);
    for (std::size_t i = 0; i < attn.size(); ++i) {
      const std::uint64_t v = next(seed);
      attn[i] = v % 997 == 0 ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(v % 8) / 8.0f;
    }
    auto* h_attn = reinterpret_cast<float*>(sc.host(attn.size() * sizeof(float)));
    auto* h_scores = reinterpret_cast<float*>(sc.host(un * sizeof(float)));
    auto* h_keep = reinterpret_cast<std::int32_t*>(sc.host(un * sizeof(std::int32_t)));
    std::memcpy(h_attn, attn.data(), attn.size() * sizeof(float));
    plain_block d_attn(b, attn.size() * sizeof(float));
    plain_block d_scores(b, un * sizeof(float));
    plain_block d_keep(b, un * sizeof(std::int32_t));
    REQUIRE(b.copy_async(d_attn.p, h_attn, attn.size() * sizeof(float), s).ok());
    const device_status first =
        b.observation_scores_async({static_cast<const float*>(d_attn.p), rows, n, 7, static_cast<float*>(d_scores.p)}, s);
    if (!F::eviction_kernels) {
      CHECK(first.code == device_errc::not_supported);
      f.settle();
      return;
    }
    REQUIRE(first.ok());
    REQUIRE(b.copy_async(h_scores, d_scores.p, un * sizeof(float), s).ok());
    f.settle();
    const std::vector<float> want = pnmem::test::reference_scores(attn, rows, n, 7);
    int score_mismatches = 0;
    for (std::size_t t = 0; t < un; ++t) score_mismatches += h_scores[t] == want[t] ? 0 : 1;
    CHECK(score_mismatches == 0);

    // Selection from the device's own scores, at 10 % and 25 %, and without scores.
    for (const int permille : {100, 250, 1000}) {
      for (const bool with_scores : {true, false}) {
        CAPTURE(permille);
        CAPTURE(with_scores);
        const int budget = std::max(1, static_cast<int>(std::int64_t{n} * permille / 1000));
        const keep_selection sel{with_scores ? static_cast<const float*>(d_scores.p) : nullptr, n, budget,
                                 keep_window{4, 32}, static_cast<std::int32_t*>(d_keep.p)};
        const int k = kept_count(sel);
        REQUIRE(b.select_keep_async(sel, s).ok());
        REQUIRE(b.copy_async(h_keep, d_keep.p, static_cast<std::size_t>(k) * sizeof(std::int32_t), s).ok());
        f.settle();
        // Without scores the middle's most recent tokens are kept: scores that grow with the position.
        std::vector<float> by_position(un);
        for (std::size_t t = 0; t < un; ++t) by_position[t] = static_cast<float>(t);
        const std::vector<int> ref = pnmem::test::reference_keep(with_scores ? want : by_position, budget, keep_window{4, 32});
        REQUIRE(static_cast<int>(ref.size()) == k);
        int keep_mismatches = 0;
        for (int i = 0; i < k; ++i) keep_mismatches += h_keep[i] == ref[static_cast<std::size_t>(i)] ? 0 : 1;
        CHECK(keep_mismatches == 0);
      }
    }

    // Compaction of a stripe with the last selection's keep list (still on the device), rows of every
    // width class: odd (byte copies), 4-byte, 16-byte, and wider than the kernel's 32 KiB tile.
    const int k = std::min(n, std::max(1, n / 10));
    const std::vector<int> ref = pnmem::test::reference_keep(want, k, keep_window{4, 32});
    REQUIRE(static_cast<int>(ref.size()) == k);
    REQUIRE(b.select_keep_async({static_cast<const float*>(d_scores.p), n, k, keep_window{4, 32},
                                 static_cast<std::int32_t*>(d_keep.p)}, s).ok());
    for (const std::size_t row_bytes : {std::size_t{18}, std::size_t{36}, std::size_t{512}, std::size_t{40000}}) {
      CAPTURE(row_bytes);
      const int stripe_rows = std::min(n, static_cast<int>(4 * MiB / row_bytes));  // a few MiB at most
      if (stripe_rows < n) continue;  // the 40 kB rows only for the short rows counts
      const std::size_t bytes = un * row_bytes;
      std::byte* h_rows = sc.host(bytes);
      fill_pattern(h_rows, bytes, static_cast<std::uint8_t>(row_bytes));
      std::vector<std::byte> expect(h_rows, h_rows + bytes);
      for (int i = 0; i < k; ++i)
        std::memmove(expect.data() + static_cast<std::size_t>(i) * row_bytes,
                     expect.data() + static_cast<std::size_t>(ref[static_cast<std::size_t>(i)]) * row_bytes, row_bytes);
      plain_block d_rows(b, bytes);
      REQUIRE(b.copy_async(d_rows.p, h_rows, bytes, s).ok());
      REQUIRE(b.compact_rows_async({d_rows.p, row_bytes, n, static_cast<const std::int32_t*>(d_keep.p), k}, s).ok());
      REQUIRE(b.copy_async(h_rows, d_rows.p, bytes, s).ok());
      f.settle();
      CHECK(std::memcmp(h_rows, expect.data(), bytes) == 0);
    }
    f.settle();
  }
  f.check_clean();
}

}  // namespace pnmem::cuda::test

// Instantiates every conformance test for one fixture type.
#define PNMEM_BACKEND_CONFORMANCE(fixture)                                      \
  TEST_CASE_TEMPLATE_INVOKE(conformance_devices, fixture);                      \
  TEST_CASE_TEMPLATE_INVOKE(conformance_accounting, fixture);                   \
  TEST_CASE_TEMPLATE_INVOKE(conformance_ordered_free, fixture);                 \
  TEST_CASE_TEMPLATE_INVOKE(conformance_events, fixture);                       \
  TEST_CASE_TEMPLATE_INVOKE(conformance_wait_event, fixture);                   \
  TEST_CASE_TEMPLATE_INVOKE(conformance_copy, fixture);                         \
  TEST_CASE_TEMPLATE_INVOKE(conformance_stream_ids, fixture);                   \
  TEST_CASE_TEMPLATE_INVOKE(conformance_invalid, fixture);                      \
  TEST_CASE_TEMPLATE_INVOKE(conformance_out_of_memory, fixture);               \
  TEST_CASE_TEMPLATE_INVOKE(conformance_plain, fixture);                        \
  TEST_CASE_TEMPLATE_INVOKE(conformance_eviction, fixture)
