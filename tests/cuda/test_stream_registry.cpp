// The stream ids the cudart backend assigns itself when built against CUDA 11.x
// (no cudaStreamGetId): stream_registry.hpp. That build path cannot run here (the
// toolkit is 13); its bookkeeping is tested on its own.
#include <doctest/doctest.h>

#include <cstdint>
#include <set>
#include <thread>
#include <vector>

#include "pnmem/cuda/stream_registry.hpp"

using pnmem::cuda::stream_registry;

TEST_CASE("stream ids: fresh per stream, never reused, even when a handle is") {
  stream_registry r;
  const std::uint64_t a = r.add(0x1000);
  const std::uint64_t b = r.add(0x2000);
  CHECK(a != 0);
  CHECK(b != 0);
  CHECK(a != b);
  std::uint64_t id = 0;
  REQUIRE(r.find(0x1000, id));
  CHECK(id == a);
  // Destroyed (forgotten first), then the runtime hands the same handle to a new stream.
  CHECK(r.remove(0x1000));
  CHECK_FALSE(r.find(0x1000, id));
  const std::uint64_t a2 = r.add(0x1000);
  CHECK(a2 != a);
  CHECK(a2 != b);
  // add() over a live entry is a new stream too (the old one was never forgotten).
  const std::uint64_t a3 = r.add(0x1000);
  CHECK(a3 != a2);
  CHECK(r.size() == 2);
}

TEST_CASE("adopt keeps a known stream's id; none and unknown handles have no id") {
  stream_registry r;
  const std::uint64_t a = r.adopt(0x3000);
  CHECK(a != 0);
  CHECK(r.adopt(0x3000) == a);
  CHECK(r.add(0) == 0);
  CHECK(r.adopt(0) == 0);
  std::uint64_t id = 77;
  CHECK_FALSE(r.find(0x4000, id));
  CHECK(id == 77);
  CHECK_FALSE(r.remove(0x4000));
}

TEST_CASE("threads: ids stay unique under concurrent adds, finds and removes") {
  stream_registry r;
  constexpr int threads = 4;
  constexpr int per_thread = 2000;
  std::vector<std::vector<std::uint64_t>> ids(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&r, &ids, t] {
      for (int i = 0; i < per_thread; ++i) {
        // Each thread cycles through a few handles of its own, as create/destroy would.
        const auto h = static_cast<std::uint64_t>(0x10000 * (t + 1) + (i % 8) * 0x100);
        const std::uint64_t id = r.add(h);
        std::uint64_t seen = 0;
        if (r.find(h, seen) && seen != id) ids[static_cast<std::size_t>(t)].push_back(0);  // never: h is ours
        ids[static_cast<std::size_t>(t)].push_back(id);
        (void)r.remove(h);
      }
    });
  }
  for (auto& th : pool) th.join();
  std::set<std::uint64_t> all;
  std::size_t count = 0;
  for (const auto& v : ids) {
    for (const std::uint64_t id : v) {
      CHECK(id != 0);
      all.insert(id);
      ++count;
    }
  }
  CHECK(count == static_cast<std::size_t>(threads * per_thread));
  CHECK(all.size() == count);
  CHECK(r.size() == 0);
}
