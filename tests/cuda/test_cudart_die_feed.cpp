// The die feed on the real runtime. Runs everywhere, never skips: without a
// device it checks that the cudart backend fails cleanly (the status a machine
// without a GPU or driver gets) and the feed reports zero dies with a reason;
// with one, that each die is measured and fed.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>

#include "pnmem/cuda/cudart_backend.hpp"
#include "pnmem/cuda/die_feed.hpp"

namespace pnmem::cuda {
namespace {

bool no_gpu_status(device_status s) {
  return s.code == device_errc::no_device || s.code == device_errc::driver_insufficient;
}

TEST_CASE("cudart die feed: zero dies and a reason without a device, budgets with one") {
  cudart_backend gpu;
  int n = 0;
  const device_status st = gpu.device_count(n);
  policy p = default_policy;
  p.die_reserve_bytes = 512 * MiB;
  die_feed feed{gpu, p};
  std::map<int, std::uint64_t> free_by_die;
  const auto r = feed.poll([&](int die, std::uint64_t f, std::uint64_t, std::uint64_t, std::uint64_t) {
    free_by_die[die] = f;
  });
  MESSAGE(feed.reason());

  if (!st) {
    CHECK(no_gpu_status(st));
    CHECK(st.native != 0);
    CHECK(!cudart_backend::error_string(st.native).empty());
    CHECK(n == 0);
    CHECK(feed.die_count() == 0);
    CHECK(feed.status() == st);
    CHECK(feed.reason().find("no dies: cudart device_count: ") == 0);
    CHECK(r.pushed == 0);
    // Every device call fails the same clean way; nothing throws or crashes.
    std::uint64_t f = 0;
    std::uint64_t t = 0;
    CHECK(no_gpu_status(gpu.mem_get_info(0, f, t)));
    stream_handle s;
    CHECK(no_gpu_status(gpu.stream_create(0, s)));
    CHECK(!s);
    event_handle e;
    CHECK(no_gpu_status(gpu.event_create(0, e)));
    CHECK(!e);
    void* h = nullptr;
    CHECK(no_gpu_status(gpu.alloc_pinned(64, h)));
    CHECK(h == nullptr);
    die_uuid id;
    CHECK(no_gpu_status(gpu.device_uuid(0, id)));
    CHECK(id.empty());
    return;
  }
  REQUIRE(n > 0);
  CHECK(feed.die_count() == std::min(n, max_dies));
  CHECK(r.pushed == feed.die_count());
  for (int d = 0; d < feed.die_count(); ++d) {
    CHECK(feed.total_bytes(d) > 0);
    CHECK(feed.budget_bytes(d) == (feed.total_bytes(d) > p.die_reserve_bytes ? feed.total_bytes(d) - p.die_reserve_bytes : 0));
    CHECK(free_by_die.at(d) <= feed.total_bytes(d));
    // Each device's UUID (cudaDeviceProp::uuid), as nvidia-smi -L prints it: the box ledger's key.
    CHECK_FALSE(feed.uuid(d).empty());
    MESSAGE("die ", d, ": ", to_string(feed.uuid(d)));
    for (int e = 0; e < d; ++e) CHECK(feed.uuid(e) != feed.uuid(d));
  }
}

}  // namespace
}  // namespace pnmem::cuda
