// The buffer owner's protocol suite (owner_protocol.hpp) on the fake backend.
#include <doctest/doctest.h>

#include <string>

#include "owner_protocol.hpp"
#include "pnmem/cuda/fake_backend.hpp"

namespace pnmem::cuda::test {

// hold(): a long kernel at the head of the stream; release() is a no-op and
// settle() runs the timeline, so "held" means "not yet run". Pools: a device
// with stream-ordered memory pools, or (false) one without: the plain fallback.
template <bool Pools>
struct fake_fixture_t {
  static constexpr bool force_plain = !Pools;
  fake_backend dev{fake_options{.memory_pools = Pools}};
  device_backend& backend() { return dev; }
  void hold(stream_handle s) { dev.submit(s, {}, 1000); }
  void release() {}
  void settle() { dev.run_until_idle(); }
  void check_clean() {
    std::string all;
    for (const auto& v : dev.violations()) all += v + "\n";
    INFO(all);
    CHECK(dev.violations().empty());
    CHECK(dev.live_allocations() == 0);
  }
};

using fake_fixture = fake_fixture_t<true>;
using fake_fixture_no_pools = fake_fixture_t<false>;

}  // namespace pnmem::cuda::test

TYPE_TO_STRING(pnmem::cuda::test::fake_fixture);
TYPE_TO_STRING(pnmem::cuda::test::fake_fixture_no_pools);

namespace pnmem::cuda::test {

PNMEM_OWNER_PROTOCOL(fake_fixture);
PNMEM_OWNER_PROTOCOL(fake_fixture_no_pools);

}  // namespace pnmem::cuda::test
