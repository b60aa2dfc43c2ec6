// Fault injection for the Linux adapter (docs/fault-injection.md, faults a-d):
// sources that vanish and come back, unreadable sources, short reads and EINTR,
// a clock that jumps under the PSI stall rate. Real files in a private copy of a
// fixture tree where a real mechanism exists (removal, rename, a symlink to a
// kernel file that fails for real), the OS-call seam's pread otherwise.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "pnmem/host_sample.hpp"
#include "pnmem/level.hpp"
#include "pnmem/linux/linux_sampler.hpp"
#include "pnmem/linux/procfs.hpp"
#include "pnmem/units.hpp"
#include "fixture_sampler.hpp"
#include "fixture_tree.hpp"
#include "os_calls.hpp"
#include "source_file.hpp"

namespace fs = std::filesystem;
using namespace pnmem::literals;
using pnmem::test::bits;
using pnmem::test::monotonic_clock;
using pnmem::test::fixtures_dir;
using pnmem::test::psi_text;
using pnmem::test::read_text;
using pnmem::test::temp_tree;
using pnmem::test::write_text;
using pnmem::cgroup_mode;
using pnmem::host_sample;
using pnmem::host_source;
using pnmem::linux_sampler;
using pnmem::psi_mode;
using pnmem::detail::source_file;
using pnmem::detail::source_status;

namespace {

// Replaces whatever is at `p` (file, symlink) with a symlink to `target`.
void link_over(const fs::path& p, const fs::path& target) {
  fs::remove(p);
  fs::create_symlink(target, p);
}

linux_sampler sampler_over(const fs::path& root, monotonic_clock* clock = nullptr) {
  return pnmem::test::fixture_sampler(root, clock, pnmem::test::psi_triggers::none);  // nothing here is about triggers
}

pnmem::mem_level level_of(const host_sample& h) {
  pnmem::mem_state s;
  pnmem::assign_host(s, h);
  return pnmem::derive_level(s);
}

// ---- the seam's pread --------------------------------------------------------------

// Each pread call takes the next step: fail with `err`, or read at most
// `max_bytes` (0: as much as asked) from the real file. With no steps left,
// the real pread. One global: the seam takes plain function pointers.
struct step {
  int err = 0;
  std::size_t max_bytes = 0;
  bool eof = false;  // report end of file whatever the file holds
};
std::deque<step> g_steps;
int g_calls = 0;

ssize_t scripted_pread(int fd, void* buf, std::size_t count, off_t offset) {
  ++g_calls;
  if (g_steps.empty()) return pnmem::linux_os::real_calls().pread(fd, buf, count, offset);
  const step s = g_steps.front();
  g_steps.pop_front();
  if (s.err != 0) {
    errno = s.err;
    return -1;
  }
  if (s.eof) return 0;
  if (s.max_bytes != 0 && count > s.max_bytes) count = s.max_bytes;
  return pnmem::linux_os::real_calls().pread(fd, buf, count, offset);
}

// Claims one byte more than it was asked for.
ssize_t overrunning_pread(int, void*, std::size_t count, off_t) { return static_cast<ssize_t>(count) + 1; }

// Every pread of the adapter follows `steps` while this is alive.
struct script_scope {
  explicit script_scope(std::initializer_list<step> steps = {}) : script_scope(std::deque<step>(steps)) {}
  explicit script_scope(std::deque<step> steps) {
    g_steps = std::move(steps);
    g_calls = 0;
  }
  ~script_scope() { g_steps.clear(); }
  script_scope(const script_scope&) = delete;
  script_scope& operator=(const script_scope&) = delete;
  pnmem::linux_os::calls_override seam{
      pnmem::linux_os::real_calls_but(&pnmem::linux_os::calls::pread, scripted_pread)};
};

// A file with `text` in a fresh directory, kept open by a source_file, and a
// read buffer.
struct kept_file {
  temp_tree dir;
  fs::path path;
  source_file file;
  std::vector<char> buf;
  kept_file(std::string_view name, std::string_view text, std::size_t buffer_bytes = 64)
      : path(dir / name), buf(buffer_bytes) {
    write_text(path, text);
    file = source_file(path.string());
  }
};

// A kernfs file that refuses to be opened for reading, even by root (a write-only
// sysfs attribute: kernfs checks the mode itself), or, for a user without
// CAP_DAC_OVERRIDE, a mode-000 file in `dir`. Empty when neither exists.
fs::path unopenable_file(const fs::path& dir) {
  for (const char* p : {"/sys/bus/platform/uevent", "/sys/bus/cpu/uevent", "/sys/bus/pci/drivers_probe"}) {
    const int fd = ::open(p, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      ::close(fd);
    } else if (errno == EACCES) {
      return p;
    }
  }
  const fs::path mode000 = dir / "mode000";
  write_text(mode000, "x\n");
  ::chmod(mode000.c_str(), 0);
  const int fd = ::open(mode000.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno == EACCES) return mode000;
  if (fd >= 0) ::close(fd);
  return {};
}

}  // namespace

// ---- a: sources that vanish and come back --------------------------------------------

TEST_CASE("fault a: the process's cgroup directory removed, then back: its limit drops out, then counts again") {
  temp_tree tree("v1_limit");
  const fs::path abc = tree / "sys/fs/cgroup/memory/docker/abc";
  linux_sampler s = sampler_over(tree.root);
  host_sample h = s.sample();
  REQUIRE(h.total_bytes == 2_GiB);
  REQUIRE(h.provenance.limit_cgroup_path() == "/docker/abc");

  fs::remove_all(abc);  // the cgroup's directory, with every file in it, is gone
  h = s.sample();
  // The ancestors (unlimited) are still read; the vanished level reads as absent,
  // not failed, and its usage is not reported. Host numbers stand.
  CHECK(h.provenance.cgroup == cgroup_mode::v1);
  CHECK(h.provenance.sources_read ==
        bits({host_source::meminfo, host_source::psi, host_source::cgroup_limit}));
  CHECK(h.provenance.sources_failed == 0);
  CHECK(h.provenance.cgroup_limit_bytes == 0);
  CHECK(h.provenance.limit_cgroup_path().empty());
  CHECK(h.total_bytes == 16_GiB);
  CHECK(h.avail_bytes == 10_GiB);
  CHECK(h.cgroup_current_bytes == 0);
  CHECK(pnmem::host_level(h.total_bytes, h.avail_bytes) == pnmem::mem_level::ok);

  // Re-created (new files, new inodes): opened again by path.
  fs::copy(fixtures_dir() / "v1_limit/sys/fs/cgroup/memory/docker/abc", abc, fs::copy_options::recursive);
  h = s.sample();
  CHECK(h.provenance.sources_failed == 0);
  CHECK(h.provenance.read(host_source::cgroup_usage));
  CHECK(h.provenance.read(host_source::cgroup_stat));
  CHECK(h.provenance.limit_cgroup_path() == "/docker/abc");
  CHECK(h.total_bytes == 2_GiB);
  CHECK(h.avail_bytes == 1_GiB);
  CHECK(h.cgroup_current_bytes == 1536_MiB);
}

TEST_CASE("fault a: /proc/self/cgroup vanishes and comes back: no cgroup, then located again") {
  temp_tree tree("v2_nested");
  const fs::path self = tree / "proc/self/cgroup";
  const std::string text = read_text(self);
  linux_sampler s = sampler_over(tree.root);
  REQUIRE(s.sample().total_bytes == 3_GiB);

  fs::remove(self);
  host_sample h = s.sample();
  CHECK(h.provenance.cgroup == cgroup_mode::none);
  CHECK(h.provenance.sources_read == bits({host_source::meminfo, host_source::psi}));
  CHECK(h.provenance.sources_failed == 0);  // absent, not broken
  CHECK(h.total_bytes == 32_GiB);
  CHECK(h.cgroup_current_bytes == 0);

  write_text(self, text);
  h = s.sample();
  CHECK(h.provenance.cgroup == cgroup_mode::v2);
  CHECK(h.provenance.limit_cgroup_path() == "/kubepods.slice/pod1.slice");
  CHECK(h.total_bytes == 3_GiB);
}

TEST_CASE("fault a: a kept-open file whose read says ENODEV is reopened at once; twice in a row it has failed") {
  kept_file k("memory.usage_in_bytes", "42\n");
  const fs::path& p = k.path;
  source_file& f = k.file;
  std::vector<char>& buf = k.buf;
  REQUIRE(f.read(buf).status == source_status::ok);

  SUBCASE("back already (the cgroup re-created): read in the same call") {
    script_scope sc{{ENODEV, 0}};
    write_text(p, "43\n");
    const auto r = f.read(buf);
    CHECK(r.status == source_status::ok);
    CHECK(r.text == "43\n");
    CHECK(f.is_open());
    CHECK(g_calls == 3);  // the ENODEV, then the new descriptor's data and end of file
  }
  SUBCASE("gone for good: missing") {
    script_scope sc{{ENODEV, 0}};
    fs::remove(p);
    const auto r = f.read(buf);
    CHECK(r.status == source_status::missing);
    CHECK_FALSE(f.is_open());
  }
  SUBCASE("vanishing again as it is reopened (ENODEV, then ESTALE): failed, and the next read starts fresh") {
    script_scope sc{{ENODEV, 0}, {ESTALE, 0}};
    auto r = f.read(buf);
    CHECK(r.status == source_status::failed);
    CHECK(r.error_number == ESTALE);
    CHECK_FALSE(f.is_open());
    r = f.read(buf);
    CHECK(r.status == source_status::ok);
    CHECK(r.text == "42\n");
  }
}

// ---- b: unreadable sources ---------------------------------------------------------------

TEST_CASE("fault b: EACCES or EIO from a read: failed with that errno, closed; the next read reopens") {
  kept_file k("meminfo", "MemTotal: 4 kB\n");
  source_file& f = k.file;
  std::vector<char>& buf = k.buf;
  for (const int err : {EACCES, EIO, EPERM}) {
    CAPTURE(err);
    script_scope sc{{err, 0}};
    const auto r = f.read(buf);
    CHECK(r.status == source_status::failed);
    CHECK(r.error_number == err);
    CHECK(r.text.empty());
    CHECK_FALSE(f.is_open());
    const auto again = f.read(buf);  // the fault is over
    CHECK(again.status == source_status::ok);
    CHECK(again.text == "MemTotal: 4 kB\n");
  }
}

TEST_CASE("fault b: a real EIO (/proc/self/mem where /proc/meminfo belongs): meminfo failed, total unknown") {
  temp_tree tree("v1_limit");
  const fs::path meminfo = tree / "proc/meminfo";
  const std::string text = read_text(meminfo);
  linux_sampler s = sampler_over(tree.root);
  REQUIRE(s.sample().provenance.read(host_source::meminfo));

  // Reading /proc/self/mem at offset 0 (an unmapped address) fails with EIO.
  {
    source_file probe("/proc/self/mem");
    std::vector<char> buf(64);
    const auto r = probe.read(buf);
    REQUIRE(r.status == source_status::failed);
    REQUIRE(r.error_number == EIO);
  }
  link_over(meminfo, "/proc/self/mem");
  host_sample h = s.sample();
  CHECK(h.provenance.failed(host_source::meminfo));
  CHECK_FALSE(h.provenance.read(host_source::meminfo));
  CHECK(h.total_bytes == 0);  // "host not sampled": skipped by the level rules
  CHECK(h.avail_bytes == 0);
  CHECK(h.provenance.meminfo_total_bytes == 0);
  CHECK(pnmem::host_level(h.total_bytes, h.avail_bytes) == pnmem::mem_level::ok);
  // The other sources are read as before.
  CHECK(h.provenance.read(host_source::psi));
  CHECK(h.provenance.read(host_source::cgroup_limit));
  CHECK(h.provenance.cgroup_limit_bytes == 2_GiB);
  CHECK(level_of(h) == pnmem::mem_level::tight);  // the fixture's PSI (full avg10 0.5 %), nothing more

  fs::remove(meminfo);
  write_text(meminfo, text);
  h = s.sample();
  CHECK(h.provenance.read(host_source::meminfo));
  CHECK(h.provenance.sources_failed == 0);
  CHECK(h.total_bytes == 2_GiB);
}

TEST_CASE("fault b: a real EACCES on open (a write-only kernfs file) where the cgroup limit belongs") {
  temp_tree tree("v1_limit");
  const fs::path unopenable = unopenable_file(tree.root);
  if (unopenable.empty()) {
    MESSAGE("no file here refuses this process an open for reading: nothing to inject");
    return;
  }
  MESSAGE("EACCES from " << unopenable.string());
  const fs::path limit = tree / "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes";
  linux_sampler s = sampler_over(tree.root);
  REQUIRE(s.sample().total_bytes == 2_GiB);

  link_over(limit, unopenable);
  host_sample h = s.sample();
  // The container's own limit is unknown: failed in the provenance; the
  // ancestors (unlimited) still read, so no limit is applied.
  CHECK(h.provenance.failed(host_source::cgroup_limit));
  CHECK(h.provenance.read(host_source::cgroup_limit));
  CHECK(h.provenance.cgroup_limit_bytes == 0);
  CHECK(h.total_bytes == 16_GiB);
  CHECK(h.avail_bytes == 10_GiB);
  CHECK(pnmem::host_level(h.total_bytes, h.avail_bytes) == pnmem::mem_level::ok);

  SUBCASE("in place of /proc/meminfo") {
    link_over(tree / "proc/meminfo", unopenable);
    h = s.sample();
    CHECK(h.provenance.failed(host_source::meminfo));
    CHECK(h.total_bytes == 0);
    CHECK(pnmem::host_level(h.total_bytes, h.avail_bytes) == pnmem::mem_level::ok);
  }
  SUBCASE("readable again") {
    fs::remove(limit);
    write_text(limit, "2147483648\n");
    h = s.sample();
    CHECK(h.provenance.sources_failed == 0);
    CHECK(h.total_bytes == 2_GiB);
  }
}

// ---- c: short reads and EINTR ----------------------------------------------------------

TEST_CASE("fault c: EINTR storms and one-byte reads: the whole file, byte for byte") {
  const std::string text = read_text(fixtures_dir() / "v1_limit/proc/meminfo");
  kept_file k("meminfo", text, 16 * 1024);
  source_file& f = k.file;
  std::vector<char>& buf = k.buf;

  SUBCASE("EINTR once") {
    script_scope sc{{EINTR, 0}};
    const auto r = f.read(buf);
    CHECK(r.status == source_status::ok);
    CHECK(r.text == text);
  }
  SUBCASE("1000 EINTRs in a row, then one byte per call, each behind another EINTR") {
    std::deque<step> steps(1000, step{EINTR, 0});
    for (std::size_t i = 0; i < text.size(); ++i) {
      steps.push_back({EINTR, 0});
      steps.push_back({0, 1});
    }
    script_scope sc(std::move(steps));
    const auto r = f.read(buf);
    CHECK(r.status == source_status::ok);
    CHECK(r.text == text);
    CHECK(g_calls == static_cast<int>(1000 + 2 * text.size() + 1));  // and the end-of-file read
  }
  SUBCASE("a file that shrank mid-read (a short read, then end of file) is cut off, and the parser refuses it") {
    script_scope sc{{0, 40}, {0, 0, true}};
    const auto r = f.read(buf);
    CHECK(r.status == source_status::ok);
    CHECK(r.text == std::string_view(text).substr(0, 40));
    CHECK(pnmem::procfs::parse_meminfo(r.text).error == pnmem::procfs::errc::truncated);  // never a short number
  }
  SUBCASE("a pread that claims more than it was asked for: failed (EIO), nothing overrun") {
    const pnmem::linux_os::calls_override seam(
        pnmem::linux_os::real_calls_but(&pnmem::linux_os::calls::pread, overrunning_pread));
    source_file bad(k.path.string());
    const auto r = bad.read(buf);
    CHECK(r.status == source_status::failed);
    CHECK(r.error_number == EIO);
  }
}

TEST_CASE("fault c: a short read that ends the file inside a number makes the sampler mark it failed") {
  // The sampler sees what source_file returns; a cut-off file is a parse
  // failure, so the fixture with files cut mid-line stands for any short read
  // that ended early (test_linux_sampler.cpp "fixture truncated" checks every field).
  temp_tree tree("v1_limit");
  const fs::path meminfo = tree / "proc/meminfo";
  const std::string text = read_text(meminfo);
  linux_sampler s = sampler_over(tree.root);
  write_text(meminfo, text.substr(0, text.find("MemAvailable:") + 17));  // ends inside MemAvailable's number
  const host_sample h = s.sample();
  CHECK(h.provenance.failed(host_source::meminfo));
  CHECK(h.total_bytes == 0);
  CHECK(h.avail_bytes == 0);
  CHECK(pnmem::host_level(h.total_bytes, h.avail_bytes) == pnmem::mem_level::ok);
}

// ---- d: a clock that jumps under the PSI stall rate ------------------------------------

TEST_CASE("fault d: the PSI stall rate when the sampler's clock jumps: finite, in [0, 100], recovers") {
  temp_tree tree("v2_unlimited");
  const fs::path psi = tree / "proc/pressure/memory";
  monotonic_clock clock;
  linux_sampler s = sampler_over(tree.root, &clock);
  const auto sane = [](const host_sample& h) {
    return std::isfinite(h.psi_some_rate) && std::isfinite(h.psi_full_rate) && h.psi_some_rate >= 0.0 &&
           h.psi_some_rate <= 100.0 && h.psi_full_rate >= 0.0 && h.psi_full_rate <= 100.0;
  };
  const std::int64_t sec = 1'000'000'000;
  const std::int64_t hour = 3600 * sec;

  write_text(psi, psi_text(1'000'000, 100'000));
  host_sample h = s.sample();
  CHECK(sane(h));

  // Forward 3 hours with 0.5 s more stall: spread over 3 hours it is 0.005 %, under the 1 % the kernel's
  // averages register (psi_window.hpp psi_stall_registers): no rate, no level from it.
  clock.now_ns += 3 * hour;
  write_text(psi, psi_text(1'500'000, 100'000));
  h = s.sample();
  CHECK(sane(h));
  CHECK(h.psi_some_rate == 0.0);
  CHECK(h.psi_full_rate == 0.0);
  CHECK(level_of(h) == pnmem::mem_level::ok);
  // Forward 3 hours more with 216 s of "some" stall: 2 % of the interval, measured over the jump.
  clock.now_ns += 3 * hour;
  write_text(psi, psi_text(217'500'000, 100'000));
  h = s.sample();
  CHECK(sane(h));
  CHECK(h.psi_some_rate == doctest::Approx(2.0));
  CHECK(h.psi_full_rate == 0.0);
  CHECK(level_of(h) == pnmem::mem_level::watch);  // some stall > 0, nothing more

  // Back 5 hours: no rate at all (not negative, not huge)...
  clock.now_ns -= 5 * hour;
  write_text(psi, psi_text(218'000'000, 200'000));
  h = s.sample();
  CHECK(sane(h));
  CHECK(h.psi_some_rate == 0.0);
  CHECK(h.psi_full_rate == 0.0);
  // ...and the next interval is measured from the jumped-back time.
  clock.now_ns += 1 * sec;
  write_text(psi, psi_text(218'200'000, 250'000));
  h = s.sample();
  CHECK(h.psi_some_rate == doctest::Approx(20.0));
  CHECK(h.psi_full_rate == doctest::Approx(5.0));

  // The extremes of the clock: no overflow, no division by zero.
  clock.now_ns = std::numeric_limits<std::int64_t>::min();
  h = s.sample();
  CHECK(sane(h));
  CHECK(h.psi_some_rate == 0.0);
  clock.now_ns = std::numeric_limits<std::int64_t>::max();
  write_text(psi, psi_text(219'000'000, 250'000));
  h = s.sample();
  CHECK(sane(h));
  CHECK(h.psi_some_rate < 1e-6);  // 0.8 s of stall over 2^64 ns
}
