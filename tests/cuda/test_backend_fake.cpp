// The backend conformance suite on the fake backend (runs in every build).
#include "backend_conformance.hpp"

#include "pnmem/cuda/fake_backend.hpp"

#include <array>
#include <cstdint>

#include "pnmem/cuda/eviction_ops.hpp"

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

// The keep list's range, against hand-written rows (issue 42 item 10): a row index equal to the row count
// is refused and nothing moves; were it let through, the compaction would copy the next slot's KV (the row
// past this stripe) into this one.
TEST_CASE("compact_rows_reference: a keep index equal to the row count is refused, nothing moved") {
  std::array<std::int32_t, 5> rows{10, 11, 12, 13, 99};  // 4 rows of this stripe, then the next slot's
  const std::array<std::int32_t, 2> past_end{1, 4};
  pnmem::cuda::row_compaction c{rows.data(), sizeof(std::int32_t), 4, past_end.data(), 2};
  CHECK_FALSE(pnmem::cuda::keep_list_ok(past_end.data(), 2, 4));
  CHECK_FALSE(pnmem::cuda::compact_rows_reference(c));
  CHECK(rows == std::array<std::int32_t, 5>{10, 11, 12, 13, 99});
  const std::array<std::int32_t, 2> last{1, 3};  // the last row of the stripe: fine
  c.keep = last.data();
  CHECK(pnmem::cuda::keep_list_ok(last.data(), 2, 4));
  CHECK(pnmem::cuda::compact_rows_reference(c));
  CHECK(rows == std::array<std::int32_t, 5>{11, 13, 12, 13, 99});
}
