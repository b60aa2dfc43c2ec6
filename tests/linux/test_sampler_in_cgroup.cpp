// The Linux sampler and its source files against real cgroups this test creates
// (suites linux-kernel and linux-v2). Needs root and a memory cgroup hierarchy in use:
// the v1 memory hierarchy (the cases of test suite "v1"), or cgroup2 with the memory
// controller delegated to this process's parent cgroup (suite "v2": scripts/vm-test
// runs them in a VM). Without them it exits 77 (Meson's SKIP) with one line saying
// why, before any test runs.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "pnmem/host_sample.hpp"
#include "pnmem/linux/linux_sampler.hpp"
#include "pnmem/linux/procfs.hpp"
#include "pnmem/units.hpp"
#include "cgroup_sandbox.hpp"
#include "kernel_test_exit.hpp"
#include "real_cgroup.hpp"
#include "source_file.hpp"

namespace fs = std::filesystem;
using namespace pnmem;
using namespace pnmem::literals;
using pnmem::test::real_cgroup_dir;

namespace {

// After the test's cgroup is removed: the sampler still reads the same version, nothing failed, and
// the limit is the ancestors' again (as before the child existed); with no ancestor limit, the
// child's usage is gone with it and the total is MemTotal.
void check_after_rmdir(const host_sample& h, const host_sample& before, cgroup_mode mode) {
  MESSAGE("after rmdir: limit " << h.provenance.cgroup_limit_bytes << " at '" << h.provenance.limit_cgroup_path()
                                << "', total " << h.total_bytes << ", sources read " << h.provenance.sources_read);
  CHECK(h.provenance.cgroup == mode);
  CHECK(h.provenance.sources_failed == 0);
  CHECK(h.provenance.read(host_source::meminfo));
  CHECK(h.provenance.cgroup_limit_bytes == before.provenance.cgroup_limit_bytes);
  CHECK(h.provenance.limit_cgroup_path() == before.provenance.limit_cgroup_path());
  CHECK(h.total_bytes > 256_MiB);
  if (before.provenance.cgroup_limit_bytes == 0) {
    CHECK_FALSE(h.provenance.read(host_source::cgroup_usage));
    CHECK(h.cgroup_current_bytes == 0);
    CHECK(h.total_bytes == h.provenance.meminfo_total_bytes);
  }
}

// A file of a cgroup this test makes under `parent`, kept open while the cgroup is removed: the
// descriptor is still open, kernfs answers ENODEV and the reopen finds nothing, so it reads as
// missing (not as the last numbers) and is closed.
void check_kept_open_file_after_rmdir(const fs::path& parent, const char* file) {
  const fs::path child = parent / ("pnmem-source-test-" + std::to_string(getpid()));
  std::error_code ec;
  REQUIRE_MESSAGE(fs::create_directory(child, ec), "cannot create ", child.string(), ": ", ec.message());
  pnmem::detail::source_file f((child / file).string());
  std::vector<char> buf(4096);
  const auto first = f.read(buf);
  CHECK(first.status == pnmem::detail::source_status::ok);
  CHECK(f.is_open());
  REQUIRE(::rmdir(child.c_str()) == 0);
  const auto after = f.read(buf);
  CHECK(after.status == pnmem::detail::source_status::missing);
  CHECK_FALSE(f.is_open());
}

// The fault cases' tree laid out like /, for linux_sampler_options::root: the real /proc/meminfo, this
// process's mountinfo, a /proc/self/cgroup of one line `cgroup_line`, and the cgroup mount at `mount_point`
// a symlink to the real one. Removed on every way out, the test's cgroup `child` (rmdir'd) first.
struct fault_root {
  struct removal {
    fs::path root, child;
    ~removal() {
      ::rmdir(child.c_str());
      std::error_code ec;
      fs::remove_all(root, ec);  // removes the symlinks, not what they point to
    }
  } made;

  static fs::path make_temp_dir() {
    std::string tmpl = (fs::temp_directory_path() / "pnmem-fault-root-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    return tmpl;
  }
  fault_root(fs::path child, const std::string& mountinfo, const std::string& cgroup_line, const fs::path& mount_point)
      : made{make_temp_dir(), std::move(child)} {
    const fs::path& root = made.root;
    fs::create_directories(root / "proc/self");
    fs::create_symlink("/proc/meminfo", root / "proc/meminfo");
    std::ofstream(root / "proc/self/mountinfo") << mountinfo;
    std::ofstream(root / "proc/self/cgroup") << cgroup_line << "\n";
    fs::create_directories((root / mount_point.relative_path()).parent_path());
    fs::create_symlink(mount_point, root / mount_point.relative_path());
  }
  // A sampler reading the tree (no PSI triggers).
  linux_sampler_options options() const {
    linux_sampler_options o;
    o.root = made.root.string();
    o.psi_triggers.clear();
    return o;
  }
};

}  // namespace

TEST_CASE("the real machine: moved into a limited v1 child cgroup and back" * doctest::test_suite("v1")) {
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

TEST_CASE("the real kernel: a removed cgroup's kept-open file reads as missing, not as stale numbers" *
          doctest::test_suite("v1")) {
  const std::string parent_dir = real_cgroup_dir(cgroup_mode::v1);
  REQUIRE(!parent_dir.empty());
  check_kept_open_file_after_rmdir(parent_dir, "memory.usage_in_bytes");
}

TEST_CASE("fault a, the real kernel: the sampler's cgroup removed, then created again" * doctest::test_suite("v1")) {
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

  const std::string mountinfo = pnmem::test::read_file("/proc/self/mountinfo").value_or(std::string());
  const auto mount = pnmem::procfs::find_cgroup_mount(mountinfo, cgroup_mode::v1, parent_path);
  REQUIRE(mount.ok());
  REQUIRE(mount.value.lookup == pnmem::procfs::mount_lookup::found);
  const fault_root root(child, mountinfo, "4:memory:" + child_path,
                        fs::path(std::string(mount.value.mount.mount_point.view())));

  const auto make_child = [&](std::uint64_t limit_bytes) {
    std::error_code ec;
    REQUIRE_MESSAGE(fs::create_directory(child, ec), "cannot create ", child.string(), ": ", ec.message());
    std::ofstream(child / "memory.limit_in_bytes") << limit_bytes << "\n";
  };
  make_child(256_MiB);
  linux_sampler s{root.options()};
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
  check_limited_child(s.sample(), 256_MiB);

  REQUIRE(::rmdir(child.c_str()) == 0);
  // The removed cgroup's files read as absent (ENODEV, then ENOENT on reopen):
  // nothing failed, no stale numbers; the ancestors' limits are what is left.
  check_after_rmdir(s.sample(), before, cgroup_mode::v1);

  make_child(128_MiB);  // back, with another limit: read afresh, not remembered
  check_limited_child(s.sample(), 128_MiB);
}

// ---- cgroup v2 -------------------------------------------------------------------------------------
//
// A process may not sit in a v2 cgroup that enables controllers for its children, so the
// test's cgroups are siblings of this process's own, in its parent (v2_memory_parent):
// scripts/vm-test runs the command in /vm-test/command, with memory on in /vm-test.

namespace {

struct v2_home {
  pnmem::test::cgroup_location self;  // this process's cgroup
  fs::path parent;                    // where the test's cgroups go
};

std::optional<v2_home> find_v2_home(std::string* why = nullptr) {
  const auto self = pnmem::test::own_cgroup(cgroup_mode::v2);
  if (!self) {
    if (why != nullptr) *why = "no cgroup2 mounted for this process";
    return std::nullopt;
  }
  const auto parent = pnmem::test::v2_memory_parent(*self, why);
  if (!parent) return std::nullopt;
  return v2_home{*self, *parent};
}

// A cgroup directory this test made; removed on every way out (its processes gone
// first: declare it before whatever moves a process into it).
struct made_cgroup {
  fs::path dir;
  explicit made_cgroup(fs::path d) : dir(std::move(d)) {
    std::error_code ec;
    REQUIRE_MESSAGE(fs::create_directory(dir, ec), "cannot create ", dir.string(), ": ", ec.message());
  }
  ~made_cgroup() { pnmem::test::remove_cgroup(dir); }
  made_cgroup(const made_cgroup&) = delete;
  made_cgroup& operator=(const made_cgroup&) = delete;
  void write(const char* file, std::uint64_t value) const { write(file, std::to_string(value)); }
  void write(const char* file, const std::string& text) const {
    REQUIRE_MESSAGE(pnmem::test::write_file(dir / file, text), "cannot write '", text, "' to ", (dir / file).string(),
                    ": ", pnmem::test::errno_text());
  }
};

// The container-aware numbers of a sample limited to `limit` at the cgroup `path`.
void check_limited(const host_sample& h, std::uint64_t limit, const std::string& path) {
  INFO("limit ", h.provenance.cgroup_limit_bytes, " at '", h.provenance.limit_cgroup_path(), "', total ", h.total_bytes,
       ", avail ", h.avail_bytes, ", working set ", h.provenance.cgroup_working_set_bytes, ", MemAvailable ",
       h.provenance.meminfo_avail_bytes);
  CHECK(h.provenance.cgroup == cgroup_mode::v2);
  CHECK(h.provenance.sources_failed == 0);
  CHECK(h.provenance.read(host_source::cgroup_limit));
  CHECK(h.provenance.read(host_source::cgroup_usage));
  CHECK(h.provenance.read(host_source::cgroup_stat));
  CHECK(h.provenance.cgroup_limit_bytes == limit);
  CHECK(h.provenance.limit_cgroup_path() == path);
  CHECK(h.total_bytes == std::min(h.provenance.meminfo_total_bytes, limit));
  const std::uint64_t headroom = limit - std::min(limit, h.provenance.cgroup_working_set_bytes);
  CHECK(h.avail_bytes == std::min({h.provenance.meminfo_avail_bytes, headroom, h.total_bytes}));
}

}  // namespace

TEST_CASE("the real machine: moved into a limited v2 sibling cgroup and back" * doctest::test_suite("v2")) {
  const auto home = find_v2_home();
  REQUIRE(home);
  linux_sampler s;
  const host_sample before = s.sample();
  REQUIRE(before.provenance.cgroup == cgroup_mode::v2);
  const made_cgroup child(home->parent / ("pnmem-sampler-test-" + std::to_string(getpid())));
  constexpr std::uint64_t limit_bytes = 256_MiB;
  child.write("memory.max", limit_bytes);
  const std::string child_path = home->self.cgroup_path(child.dir);
  {
    const pnmem::test::moved_into moved(home->self.dir, child.dir);
    REQUIRE_MESSAGE(moved.ok(), "could not move into ", child.dir.string(), ": ", pnmem::test::errno_text());
    const host_sample inside = s.sample();
    MESSAGE("inside " << inside.provenance.limit_cgroup_path() << ": limit " << inside.provenance.cgroup_limit_bytes
                      << ", total " << inside.total_bytes << ", avail " << inside.avail_bytes << ", usage "
                      << inside.cgroup_current_bytes);
    check_limited(inside, limit_bytes, child_path);
    CHECK(inside.cgroup_max_bytes == limit_bytes);
    CHECK(inside.cgroup_high_bytes == 0);
  }
  const host_sample back = s.sample();
  CHECK(back.provenance.cgroup == cgroup_mode::v2);
  CHECK(back.provenance.limit_cgroup_path() == before.provenance.limit_cgroup_path());
  CHECK(back.provenance.cgroup_limit_bytes == before.provenance.cgroup_limit_bytes);
}

TEST_CASE("the real kernel, v2: nested limits, memory.max and memory.high at every level: the minimum wins and "
          "names its cgroup" * doctest::test_suite("v2")) {
  const auto home = find_v2_home();
  REQUIRE(home);
  const made_cgroup parent(home->parent / ("pnmem-nested-test-" + std::to_string(getpid())));
  parent.write("memory.max", 256_MiB);
  parent.write("cgroup.subtree_control", std::string("+memory"));
  const made_cgroup leaf(parent.dir / "leaf");
  leaf.write("memory.max", 512_MiB);
  const std::string parent_path = home->self.cgroup_path(parent.dir);
  const std::string leaf_path = home->self.cgroup_path(leaf.dir);
  const pnmem::test::moved_into moved(home->self.dir, leaf.dir);
  REQUIRE_MESSAGE(moved.ok(), "could not move into ", leaf.dir.string(), ": ", pnmem::test::errno_text());
  linux_sampler s;

  // The parent's memory.max (256 MiB) under the leaf's own (512 MiB).
  host_sample h = s.sample();
  MESSAGE("parent max 256 MiB, leaf max 512 MiB: limit " << h.provenance.cgroup_limit_bytes << " at "
                                                        << h.provenance.limit_cgroup_path());
  check_limited(h, 256_MiB, parent_path);
  CHECK(h.cgroup_max_bytes == 256_MiB);
  CHECK(h.cgroup_high_bytes == 0);

  // The leaf's memory.high below both maxima.
  leaf.write("memory.high", 192_MiB);
  h = s.sample();
  MESSAGE("+ leaf high 192 MiB: limit " << h.provenance.cgroup_limit_bytes << " at " << h.provenance.limit_cgroup_path());
  check_limited(h, 192_MiB, leaf_path);
  CHECK(h.cgroup_max_bytes == 256_MiB);
  CHECK(h.cgroup_high_bytes == 192_MiB);

  // The parent's memory.high lower still.
  parent.write("memory.high", 128_MiB);
  h = s.sample();
  MESSAGE("+ parent high 128 MiB: limit " << h.provenance.cgroup_limit_bytes << " at " << h.provenance.limit_cgroup_path());
  check_limited(h, 128_MiB, parent_path);
  CHECK(h.cgroup_max_bytes == 256_MiB);
  CHECK(h.cgroup_high_bytes == 128_MiB);

  // A tie (the leaf's memory.max = the parent's memory.high): the ancestor, whose usage includes the leaf's.
  leaf.write("memory.max", 128_MiB);
  h = s.sample();
  MESSAGE("+ leaf max 128 MiB (a tie): limit " << h.provenance.cgroup_limit_bytes << " at "
                                               << h.provenance.limit_cgroup_path());
  check_limited(h, 128_MiB, parent_path);
  CHECK(h.cgroup_max_bytes == 128_MiB);

  // "max" again everywhere: no limit, the leaf's usage (it has the memory controller).
  leaf.write("memory.max", std::string("max"));
  leaf.write("memory.high", std::string("max"));
  parent.write("memory.max", std::string("max"));
  parent.write("memory.high", std::string("max"));
  h = s.sample();
  CHECK(h.provenance.cgroup == cgroup_mode::v2);
  CHECK(h.provenance.cgroup_limit_bytes == 0);
  CHECK(h.provenance.limit_cgroup_path().empty());
  CHECK(h.total_bytes == h.provenance.meminfo_total_bytes);
  CHECK(h.cgroup_max_bytes == 0);
  CHECK(h.cgroup_high_bytes == 0);
  CHECK(h.provenance.read(host_source::cgroup_usage));
}

TEST_CASE("the real kernel, v2: a cgroup whose parent does not delegate memory is charged to that parent, which "
          "the sampler measures" * doctest::test_suite("v2")) {
  // The parent has memory (its parent delegates it) and a limit, but enables no controller for its
  // own children: the leaf has no memory.* files, and the kernel charges the leaf's memory to the
  // parent. The sampler takes the parent as the process's memory cgroup (linux_sampler.hpp).
  const auto home = find_v2_home();
  REQUIRE(home);
  const made_cgroup parent(home->parent / ("pnmem-nodelegation-test-" + std::to_string(getpid())));
  parent.write("memory.max", 256_MiB);
  const made_cgroup leaf(parent.dir / "leaf");
  CHECK_FALSE(fs::exists(leaf.dir / "memory.current"));
  CHECK_FALSE(fs::exists(leaf.dir / "memory.max"));
  CHECK(fs::exists(leaf.dir / "memory.pressure"));  // PSI is the cgroup core's, not the controller's
  const std::string parent_path = home->self.cgroup_path(parent.dir);
  const pnmem::test::moved_into moved(home->self.dir, leaf.dir);
  REQUIRE_MESSAGE(moved.ok(), "could not move into ", leaf.dir.string(), ": ", pnmem::test::errno_text());
  const auto current = [&] {
    return std::stoull(pnmem::test::read_file(parent.dir / "memory.current").value_or("0"));
  };
  const std::uint64_t parent_before = current();
  {
    // 32 MiB touched here, in the leaf: the parent's memory.current must rise by it.
    std::vector<char> block(32_MiB, 1);
    const std::uint64_t parent_after = current();
    MESSAGE("the parent's memory.current " << parent_before << " -> " << parent_after << " with 32 MiB touched in the leaf");
    CHECK(parent_after >= parent_before + 31_MiB);
    linux_sampler s;
    const host_sample h = s.sample();
    check_limited(h, 256_MiB, parent_path);
    CHECK(h.cgroup_current_bytes >= 31_MiB);
  }
}

TEST_CASE("the real kernel, v2: a removed cgroup's kept-open file reads as missing, not as stale numbers" *
          doctest::test_suite("v2")) {
  const auto home = find_v2_home();
  REQUIRE(home);
  check_kept_open_file_after_rmdir(home->parent, "memory.current");
}

TEST_CASE("fault a, the real kernel, v2: the sampler's cgroup removed, then created again" * doctest::test_suite("v2")) {
  // As the v1 case: a tree laid out like / whose cgroup2 mount is a symlink to the real one
  // and whose /proc/self/cgroup names a sibling cgroup this test makes (this process stays
  // where it is).
  const auto home = find_v2_home();
  REQUIRE(home);
  linux_sampler own;
  const host_sample before = own.sample();
  const std::string name = "pnmem-fault-test-" + std::to_string(getpid());
  const fs::path child = home->parent / name;
  const std::string child_path = home->self.cgroup_path(child);

  const fault_root root(child, pnmem::test::read_file("/proc/self/mountinfo").value_or(std::string()),
                        "0::" + child_path, home->self.mount_point);

  const auto make_child = [&](std::uint64_t limit_bytes) {
    std::error_code ec;
    REQUIRE_MESSAGE(fs::create_directory(child, ec), "cannot create ", child.string(), ": ", ec.message());
    REQUIRE(pnmem::test::write_file(child / "memory.max", std::to_string(limit_bytes)));
  };
  make_child(256_MiB);
  linux_sampler s{root.options()};
  const auto check_limited_child = [&](const host_sample& got, std::uint64_t limit_bytes) {
    CHECK(got.provenance.cgroup == cgroup_mode::v2);
    CHECK(got.provenance.sources_failed == 0);
    CHECK(got.provenance.read(host_source::cgroup_usage));
    CHECK(got.provenance.limit_cgroup_path() == child_path);
    CHECK(got.provenance.cgroup_limit_bytes == limit_bytes);
    CHECK(got.total_bytes == std::min(got.provenance.meminfo_total_bytes, limit_bytes));
  };
  check_limited_child(s.sample(), 256_MiB);

  REQUIRE(::rmdir(child.c_str()) == 0);
  check_after_rmdir(s.sample(), before, cgroup_mode::v2);

  make_child(128_MiB);  // back, with another limit: read afresh, not remembered
  check_limited_child(s.sample(), 128_MiB);
}

int main(int argc, char** argv) {
  if (::geteuid() != 0) return pnmem::test::skip("not root: cannot create a memory cgroup");
  doctest::Context context(argc, argv);
  const cgroup_mode in_use = linux_sampler{}.sample().provenance.cgroup;
  if (in_use == cgroup_mode::v1 && !real_cgroup_dir(cgroup_mode::v1).empty()) {
    context.setOption("test-suite", "v1");
  } else if (in_use == cgroup_mode::v2) {
    std::string why;
    if (!find_v2_home(&why)) return pnmem::test::skip(why);
    context.setOption("test-suite", "v2");
  } else {
    return pnmem::test::skip("no memory cgroup hierarchy in use here (neither v1 memory nor cgroup2 with memory)");
  }
  return context.run();
}
