// The macOS sampler's arithmetic, on any platform.
#include "pnmem/macos/vm_arith.hpp"

#include <doctest/doctest.h>

#include <cstdint>

#include "pnmem/level.hpp"

using namespace pnmem;
using namespace pnmem::macos;

namespace {
constexpr std::uint64_t page = 16384;  // Apple silicon's page size

constexpr vm_reading reading(std::uint64_t total, vm_page_counts c, std::optional<int> pressure) {
  vm_reading r;
  r.total_bytes = total;
  r.pages = c;
  r.page_size_bytes = page;
  r.pressure = pressure;
  return r;
}
}  // namespace

static_assert(pages_to_bytes(3, 16384) == 49152);
static_assert(level_from_pressure(4) == mem_level::critical);

TEST_CASE("page counts to bytes, saturating") {
  CHECK(pages_to_bytes(0, page) == 0);
  CHECK(pages_to_bytes(65536, page) == 1 * GiB);
  CHECK(pages_to_bytes(UINT64_MAX / 2, page) == UINT64_MAX);
}

TEST_CASE("available = free + inactive + purgeable, at most total") {
  CHECK(available_bytes({65536, 65536, 0}, page, 16 * GiB) == 2 * GiB);
  CHECK(available_bytes({65536, 65536, 65536}, page, 16 * GiB) == 3 * GiB);
  CHECK(available_bytes({UINT64_MAX, 1, 1}, page, 16 * GiB) == 16 * GiB);
  CHECK(available_bytes({0, 0, 0}, page, 16 * GiB) == 0);
}

TEST_CASE("the kernel's pressure verdict maps onto the levels") {
  CHECK(level_from_pressure(1) == mem_level::ok);
  CHECK(level_from_pressure(2) == mem_level::tight);
  CHECK(level_from_pressure(4) == mem_level::critical);
  CHECK_FALSE(level_from_pressure(0).has_value());
  CHECK_FALSE(level_from_pressure(3).has_value());
  CHECK_FALSE(level_from_pressure(-1).has_value());
}

TEST_CASE("a full reading becomes a host sample whose OS verdict joins the level") {
  const host_sample h = make_host_sample(reading(16 * GiB, {262144, 131072, 0}, 2));  // 6 GiB available
  CHECK(h.total_bytes == 16 * GiB);
  CHECK(h.avail_bytes == 6 * GiB);
  CHECK(h.os_level == mem_level::tight);
  CHECK(h.provenance.read(host_source::macos_vm));
  CHECK(h.provenance.read(host_source::macos_pressure));
  CHECK(h.provenance.sources_failed == 0);
  CHECK(h.provenance.cgroup == cgroup_mode::none);
  CHECK(h.provenance.psi == psi_mode::none);
  mem_state s;
  assign_host(s, h);
  CHECK(derive_level(s) == mem_level::tight);  // bytes alone say OK; the kernel says warn
}

TEST_CASE("failed reads are marked, never a false CRITICAL") {
  vm_reading r;  // nothing read
  host_sample h = make_host_sample(r);
  CHECK(h.total_bytes == 0);
  CHECK(h.os_level == mem_level::ok);
  CHECK(h.provenance.failed(host_source::macos_vm));
  CHECK(h.provenance.failed(host_source::macos_pressure));
  mem_state s;
  assign_host(s, h);
  CHECK(derive_level(s) == mem_level::ok);

  h = make_host_sample(reading(16 * GiB, {1, 1, 1}, 3));  // a pressure value that is no verdict
  CHECK(h.os_level == mem_level::ok);
  CHECK(h.provenance.failed(host_source::macos_pressure));
  CHECK(h.provenance.read(host_source::macos_vm));

  r = reading(16 * GiB, {1, 1, 1}, 1);
  r.page_size_bytes = 0;  // no page size: the page counts mean nothing
  h = make_host_sample(r);
  CHECK(h.total_bytes == 0);
  CHECK(h.provenance.failed(host_source::macos_vm));
}
