// The backend conformance suite on the fake backend (runs in every build).
#include "backend_conformance.hpp"

#include "pnmem/cuda/fake_backend.hpp"

namespace pnmem::cuda::test {

struct fake_fixture {
  static constexpr bool simulated = true;
  static constexpr std::uint64_t hold_ticks = 1000;

  fake_backend dev{fake_options{.devices = 2, .total_bytes_per_device = 1 * GiB, .used_by_others_bytes = 100 * MiB}};

  fake_fixture() = default;
  fake_fixture(const fake_fixture&) = delete;
  fake_fixture& operator=(const fake_fixture&) = delete;
  // Everything the test made is gone once its queued work has run.
  ~fake_fixture() {
    dev.run_until_idle();
    CHECK_MESSAGE(dev.leaks().empty(), lines(dev.leaks()));
    CHECK_MESSAGE(dev.violations().empty(), lines(dev.violations()));
    CHECK(dev.pending_ops() == 0);
  }

  device_backend& backend() { return dev; }
  // A long kernel at the head of the stream: nothing behind it starts before it ends.
  void hold(stream_handle s) { dev.submit(s, {}, hold_ticks); }
  void release() { dev.advance(hold_ticks); }
  void let_time_pass() { dev.advance(hold_ticks / 10); }
  void settle() { dev.run_until_idle(); }
  void check_clean() { CHECK_MESSAGE(dev.violations().empty(), lines(dev.violations())); }
};

PNMEM_BACKEND_CONFORMANCE(fake_fixture);

}  // namespace pnmem::cuda::test
