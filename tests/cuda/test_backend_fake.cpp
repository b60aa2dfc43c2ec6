// The backend conformance suite on the fake backend (runs in every build).
#include "backend_conformance.hpp"

#include "pnmem/cuda/fake_backend.hpp"

namespace pnmem::cuda::test {

// Pools false: a device without stream-ordered memory pools (fake_options::memory_pools).
template <bool Pools>
struct fake_fixture_t {
  static constexpr bool simulated = true;
  static constexpr std::uint64_t hold_ticks = 1000;
  static constexpr bool eviction_kernels = true;  // the fake runs eviction_ops.hpp's reference

  fake_backend dev{fake_options{
      .devices = 2, .total_bytes_per_device = 1 * GiB, .used_by_others_bytes = 100 * MiB, .memory_pools = Pools}};

  fake_fixture_t() = default;
  fake_fixture_t(const fake_fixture_t&) = delete;
  fake_fixture_t& operator=(const fake_fixture_t&) = delete;
  // Everything the test made is gone once its queued work has run.
  ~fake_fixture_t() {
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

using fake_fixture = fake_fixture_t<true>;
using fake_fixture_no_pools = fake_fixture_t<false>;

}  // namespace pnmem::cuda::test

TYPE_TO_STRING(pnmem::cuda::test::fake_fixture);
TYPE_TO_STRING(pnmem::cuda::test::fake_fixture_no_pools);

namespace pnmem::cuda::test {

PNMEM_BACKEND_CONFORMANCE(fake_fixture);
// Without pools every stream-ordered case would be refused: the plain path's case only.
TEST_CASE_TEMPLATE_INVOKE(conformance_plain, fake_fixture_no_pools);

}  // namespace pnmem::cuda::test
