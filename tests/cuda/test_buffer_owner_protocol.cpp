// The buffer owner's protocol suite (owner_protocol.hpp) on the fake backend.
#include <doctest/doctest.h>

#include <string>

#include "owner_protocol.hpp"
#include "pnmem/cuda/fake_backend.hpp"

namespace pnmem::cuda::test {

// hold(): a long kernel at the head of the stream; release() is a no-op and
// settle() runs the timeline, so "held" means "not yet run".
struct fake_fixture {
  fake_backend dev;
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

PNMEM_OWNER_PROTOCOL(fake_fixture);

}  // namespace pnmem::cuda::test
