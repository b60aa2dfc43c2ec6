// The Linux sampler and its source files against real cgroups this test creates
// (suite linux-kernel). Needs root and the v1 memory hierarchy in use; without
// them it exits 77 (Meson's SKIP) with one line saying why, before any test runs.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include "pnmem/host_sample.hpp"
#include "pnmem/linux/linux_sampler.hpp"
#include "pnmem/units.hpp"
#include "real_cgroup.hpp"
#include "source_file.hpp"

namespace fs = std::filesystem;
using namespace pnmem::literals;
using pnmem::cgroup_mode;
using pnmem::host_sample;
using pnmem::linux_sampler;
using pnmem_test::real_cgroup_dir;

TEST_CASE("the real machine: moved into a limited v1 child cgroup and back") {
  linux_sampler s;
  const host_sample before = s.sample();
  std::string parent_path;
  const std::string parent_dir = real_cgroup_dir(cgroup_mode::v1, &parent_path);
  REQUIRE(before.provenance.cgroup == cgroup_mode::v1);
  REQUIRE(!parent_dir.empty());
  const std::string name = "pnmem-sampler-test-" + std::to_string(getpid());
  const fs::path child = fs::path(parent_dir) / name;
  std::error_code ec;
  REQUIRE_MESSAGE(fs::create_directory(child, ec), "cannot create ", child.string(), ": ", ec.message());
  // Moves this process back and removes the child on every way out.
  struct cleanup {
    fs::path parent, child;
    ~cleanup() {
      std::ofstream(parent / "cgroup.procs") << getpid() << "\n";
      ::rmdir(child.c_str());
    }
  } guard{parent_dir, child};

  constexpr std::uint64_t limit_bytes = 256_MiB;
  std::ofstream(child / "memory.limit_in_bytes") << limit_bytes << "\n";
  {
    std::ofstream procs(child / "cgroup.procs");
    procs << getpid() << "\n";
    procs.flush();
    REQUIRE_MESSAGE(procs.good(), "could not move into " << child.string());
  }
  const std::string child_path = (parent_path == "/" ? "" : parent_path) + "/" + name;

  const host_sample inside = s.sample();
  MESSAGE("inside " << inside.provenance.limit_cgroup_path() << ": limit " << inside.provenance.cgroup_limit_bytes
                    << ", total " << inside.total_bytes << ", avail " << inside.avail_bytes << ", usage "
                    << inside.cgroup_current_bytes);
  CHECK(inside.provenance.cgroup == cgroup_mode::v1);
  CHECK(inside.provenance.cgroup_limit_bytes <= limit_bytes);
  if (before.provenance.cgroup_limit_bytes == 0 || before.provenance.cgroup_limit_bytes > limit_bytes) {
    CHECK(inside.provenance.limit_cgroup_path() == child_path);
    CHECK(inside.provenance.cgroup_limit_bytes == limit_bytes);
    CHECK(inside.cgroup_max_bytes == limit_bytes);
  }
  CHECK(inside.total_bytes <= limit_bytes);
  CHECK(inside.avail_bytes <= inside.total_bytes);

  std::ofstream(fs::path(parent_dir) / "cgroup.procs") << getpid() << "\n";
  const host_sample back = s.sample();
  CHECK(back.provenance.limit_cgroup_path() == before.provenance.limit_cgroup_path());
  CHECK(back.provenance.cgroup_limit_bytes == before.provenance.cgroup_limit_bytes);
}

TEST_CASE("the real kernel: a removed cgroup's kept-open file reads as missing, not as stale numbers") {
  const std::string parent_dir = real_cgroup_dir(cgroup_mode::v1);
  REQUIRE(!parent_dir.empty());
  const fs::path child = fs::path(parent_dir) / ("pnmem-source-test-" + std::to_string(getpid()));
  std::error_code ec;
  REQUIRE_MESSAGE(fs::create_directory(child, ec), "cannot create ", child.string(), ": ", ec.message());
  pnmem::detail::source_file f((child / "memory.usage_in_bytes").string());
  std::vector<char> buf(4096);
  const auto first = f.read(buf);
  CHECK(first.status == pnmem::detail::source_status::ok);
  CHECK(f.is_open());
  REQUIRE(::rmdir(child.c_str()) == 0);
  // The descriptor is still open; kernfs answers ENODEV, the reopen finds nothing.
  const auto after = f.read(buf);
  CHECK(after.status == pnmem::detail::source_status::missing);
  CHECK_FALSE(f.is_open());
}

int main(int argc, char** argv) {
  if (::geteuid() != 0) {
    std::printf("SKIP: not root: cannot create a memory cgroup\n");
    return 77;
  }
  if (real_cgroup_dir(cgroup_mode::v1).empty() || linux_sampler{}.sample().provenance.cgroup != cgroup_mode::v1) {
    std::printf("SKIP: the v1 memory hierarchy is not the one in use here\n");
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
