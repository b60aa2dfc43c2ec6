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
#include "pnmem/linux/procfs.hpp"
#include "pnmem/units.hpp"
#include "kernel_test_exit.hpp"
#include "real_cgroup.hpp"
#include "source_file.hpp"

namespace fs = std::filesystem;
using namespace pnmem;
using namespace pnmem::literals;
using pnmem::test::real_cgroup_dir;

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

TEST_CASE("fault a, the real kernel: the sampler's cgroup removed, then created again") {
  // A tree laid out like / whose cgroup mount is a symlink to the real v1 memory
  // hierarchy, and whose /proc/self/cgroup names a child cgroup this test makes
  // (this process stays where it is: a populated cgroup cannot be removed). The
  // sampler keeps the child's cgroupfs files open; rmdir makes them answer ENODEV.
  linux_sampler own;
  const host_sample before = own.sample();
  std::string parent_path;
  const std::string parent_dir = real_cgroup_dir(cgroup_mode::v1, &parent_path);
  REQUIRE(!parent_dir.empty());
  const std::string name = "pnmem-fault-test-" + std::to_string(getpid());
  const fs::path child = fs::path(parent_dir) / name;
  const std::string child_path = (parent_path == "/" ? "" : parent_path) + "/" + name;

  std::string tmpl = (fs::temp_directory_path() / "pnmem-fault-root-XXXXXX").string();
  REQUIRE(mkdtemp(tmpl.data()) != nullptr);
  const fs::path root = tmpl;
  struct cleanup {
    fs::path root, child;
    ~cleanup() {
      ::rmdir(child.c_str());
      std::error_code ec;
      fs::remove_all(root, ec);  // removes the symlinks, not what they point to
    }
  } guard{root, child};

  const std::string mountinfo = pnmem::test::read_file("/proc/self/mountinfo").value_or(std::string());
  const auto mount = pnmem::procfs::find_cgroup_mount(mountinfo, cgroup_mode::v1, parent_path);
  REQUIRE(mount.ok());
  REQUIRE(mount.value.lookup == pnmem::procfs::mount_lookup::found);
  const fs::path mount_point(std::string(mount.value.mount.mount_point.view()));
  fs::create_directories(root / "proc/self");
  fs::create_symlink("/proc/meminfo", root / "proc/meminfo");
  std::ofstream(root / "proc/self/mountinfo") << mountinfo;
  std::ofstream(root / "proc/self/cgroup") << "4:memory:" << child_path << "\n";
  fs::create_directories((root / mount_point.relative_path()).parent_path());
  fs::create_symlink(mount_point, root / mount_point.relative_path());

  const auto make_child = [&](std::uint64_t limit_bytes) {
    std::error_code ec;
    REQUIRE_MESSAGE(fs::create_directory(child, ec), "cannot create ", child.string(), ": ", ec.message());
    std::ofstream(child / "memory.limit_in_bytes") << limit_bytes << "\n";
  };
  make_child(256_MiB);
  pnmem::linux_sampler_options o;
  o.root = root.string();
  o.psi_triggers.clear();
  linux_sampler s{o};
  // The child, limited to `limit_bytes`, is the limiting cgroup unless an ancestor is tighter.
  const auto check_limited_child = [&](const host_sample& got, std::uint64_t limit_bytes) {
    CHECK(got.provenance.cgroup == cgroup_mode::v1);
    CHECK(got.provenance.sources_failed == 0);
    CHECK(got.provenance.read(host_source::cgroup_usage));
    if (before.provenance.cgroup_limit_bytes == 0 || before.provenance.cgroup_limit_bytes > limit_bytes) {
      CHECK(got.provenance.limit_cgroup_path() == child_path);
      CHECK(got.provenance.cgroup_limit_bytes == limit_bytes);
    }
    CHECK(got.total_bytes <= limit_bytes);
  };
  host_sample h = s.sample();
  check_limited_child(h, 256_MiB);

  REQUIRE(::rmdir(child.c_str()) == 0);
  h = s.sample();
  // The removed cgroup's files read as absent (ENODEV, then ENOENT on reopen):
  // nothing failed, no stale numbers; the ancestors' limits are what is left.
  MESSAGE("after rmdir: limit " << h.provenance.cgroup_limit_bytes << " at '" << h.provenance.limit_cgroup_path()
                                << "', total " << h.total_bytes << ", sources read " << h.provenance.sources_read);
  CHECK(h.provenance.cgroup == cgroup_mode::v1);
  CHECK(h.provenance.sources_failed == 0);
  CHECK(h.provenance.read(host_source::meminfo));
  CHECK(h.provenance.cgroup_limit_bytes == before.provenance.cgroup_limit_bytes);
  CHECK(h.provenance.limit_cgroup_path() == before.provenance.limit_cgroup_path());
  CHECK(h.total_bytes > 256_MiB);
  if (before.provenance.cgroup_limit_bytes == 0) {
    CHECK_FALSE(h.provenance.read(host_source::cgroup_usage));  // the child's usage is gone with it
    CHECK(h.cgroup_current_bytes == 0);
    CHECK(h.total_bytes == h.provenance.meminfo_total_bytes);
  }

  make_child(128_MiB);  // back, with another limit: read afresh, not remembered
  check_limited_child(s.sample(), 128_MiB);
}

int main(int argc, char** argv) {
  if (::geteuid() != 0) return pnmem::test::skip("not root: cannot create a memory cgroup");
  if (real_cgroup_dir(cgroup_mode::v1).empty() || linux_sampler{}.sample().provenance.cgroup != cgroup_mode::v1) {
    return pnmem::test::skip("the v1 memory hierarchy is not the one in use here");
  }
  doctest::Context context(argc, argv);
  return context.run();
}
