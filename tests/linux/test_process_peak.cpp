// pnmem/linux/process_peak.hpp: the meter over trees laid out like / (v1, v2, the ancestor with the
// memory controller, every failure through the os_calls seam), and the real kernel:
// VmHWM rises by what the process touches and drops on reset; the memory cgroup's peak likewise, in
// a cgroup this test creates: a child of its own (v1), or a sibling of its own (v2, where
// memory.peak can be reset from Linux 6.12 on and is read-only before).
//
//   test_process_peak           everything but the real cgroup (suite linux)
//   test_process_peak cgroup    the real cgroup only (suites linux-kernel and linux-v2): root and the
//                               v1 memory hierarchy, or cgroup2 with the memory controller delegated
//                               to this process's parent cgroup, needed, else exit 77 (SKIP) with
//                               one line saying why
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "cgroup_sandbox.hpp"
#include "fixture_tree.hpp"
#include "kernel_test_exit.hpp"
#include "os_calls.hpp"
#include "pnmem/linux/process_peak.hpp"
#include "pnmem/units.hpp"
#include "real_cgroup.hpp"

namespace fs = std::filesystem;
using namespace pnmem;
using namespace pnmem::literals;
using linux_os::calls;
using linux_os::calls_override;
using linux_os::peak_meter;
using linux_os::peak_status;
using linux_os::real_calls;
using linux_os::real_calls_but;
using pnmem::test::temp_tree;
using pnmem::test::write_text;

namespace {

// The kernel's counters are batched (per-CPU RSS counters, memcg charge stocks of up to 64 pages): a
// figure read may be off by a few hundred KiB either way. Every comparison allows this much.
constexpr std::uint64_t slack = 1_MiB;

constexpr std::string_view status_text =
    "Name:\tengine\nUmask:\t0022\nState:\tS (sleeping)\nVmPeak:\t  900000 kB\nVmSize:\t  800000 kB\n"
    "VmLck:\t       0 kB\nVmHWM:\t  524288 kB\nVmRSS:\t  262144 kB\nRssAnon:\t  200000 kB\nThreads:\t4\n";

void make_file(const fs::path& p, std::string_view text) {
  fs::create_directories(p.parent_path());
  write_text(p, text);
}

// /proc/self (status, clear_refs, cgroup) and the mount table of a tree with a v1 memory hierarchy and
// a v2 one without the memory controller, the process in /engine of both.
void lay_out_v1(const temp_tree& t) {
  make_file(t / "proc/self/status", status_text);
  make_file(t / "proc/self/clear_refs", "");
  make_file(t / "proc/self/cgroup", "4:memory:/engine\n0::/engine\n");
  make_file(t / "proc/self/mountinfo",
            "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
            "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n");
  make_file(t / "sys/fs/cgroup/memory/engine/memory.usage_in_bytes", "104857600\n");
  make_file(t / "sys/fs/cgroup/memory/engine/memory.max_usage_in_bytes", "209715200\n");
  fs::create_directories(t / "sys/fs/cgroup/unified/engine");  // no memory.current: not this one
}

// The same with cgroup v2 only, the memory controller on /pod (the process in /pod/engine, which has no
// memory files: its memory is charged to /pod).
void lay_out_v2(const temp_tree& t, bool with_peak = true) {
  make_file(t / "proc/self/status", status_text);
  make_file(t / "proc/self/clear_refs", "");
  make_file(t / "proc/self/cgroup", "0::/pod/engine\n");
  make_file(t / "proc/self/mountinfo", "41 31 0:38 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n");
  fs::create_directories(t / "sys/fs/cgroup/pod/engine");
  make_file(t / "sys/fs/cgroup/pod/memory.current", "314572800\n");
  if (with_peak) make_file(t / "sys/fs/cgroup/pod/memory.peak", "419430400\n");
}

// open() fails with `err` for paths ending in `suffix` opened with flags that include `flag`
// (O_RDWR, O_WRONLY; -1: any), while this is alive.
struct open_failure {
  static inline std::string_view suffix;
  static inline int err = 0;
  static inline int flag = -1;
  static int open(const char* path, int flags) {
    const bool match = std::string_view(path).ends_with(suffix) && (flag == -1 || (flags & O_ACCMODE) == flag);
    if (!match) return real_calls().open(path, flags);
    errno = err;
    return -1;
  }
  open_failure(std::string_view path_suffix, int error_number, int when_flag = -1) {
    suffix = path_suffix;
    err = error_number;
    flag = when_flag;
  }
  calls_override seam{real_calls_but(&calls::open, &open_failure::open)};
};

// write() fails with `err`, while this is alive.
struct write_failure {
  static inline int err = 0;
  static ssize_t write(int, const void*, std::size_t) {
    errno = err;
    return -1;
  }
  explicit write_failure(int error_number) { err = error_number; }
  calls_override seam{real_calls_but(&calls::write, &write_failure::write)};
};

// VmRSS of this process, from the kernel (independent of the meter). The status parser is procfs.hpp's
// (tested in test_procfs.cpp), here through process_peak.hpp's using-declaration.
std::uint64_t own_rss_bytes() {
  const auto m = linux_os::parse_status_memory(pnmem::test::read_text("/proc/self/status"));
  REQUIRE(m.ok());
  return m.value.rss_bytes;
}

// 64 MiB of anonymous memory, every page touched; unmapped at scope exit.
struct touched_memory {
  static constexpr std::size_t bytes = 64 * 1024 * 1024;
  void* p = nullptr;
  touched_memory() {
    p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(p != MAP_FAILED);
    std::memset(p, 0x5a, bytes);
  }
  ~touched_memory() { release(); }
  void release() {
    if (p != nullptr) ::munmap(p, bytes);
    p = nullptr;
  }
};

}  // namespace

// ---------------------------------------------------------------- trees laid out like /

TEST_CASE("the meter on a v1 tree: VmHWM and the memory cgroup's max usage") {
  temp_tree t;
  lay_out_v1(t);
  peak_meter meter({.root = t.root.string()});
  CHECK(meter.cgroup_hierarchy() == cgroup_mode::v1);
  CHECK(meter.cgroup_location() == peak_status::ok);
  CHECK(meter.cgroup_dir() == (t / "sys/fs/cgroup/memory/engine/").string());
  const auto p = meter.read();
  REQUIRE(p.process.ok());
  CHECK(p.process.peak_bytes == 512_MiB);
  CHECK(p.process.current_bytes == 256_MiB);
  REQUIRE(p.cgroup.ok());
  CHECK(p.cgroup.peak_bytes == 200_MiB);
  CHECK(p.cgroup.current_bytes == 100_MiB);

  const auto r = meter.reset();
  CHECK(r.process == peak_status::ok);
  CHECK(r.cgroup == peak_status::ok);
  CHECK(pnmem::test::read_text(t / "proc/self/clear_refs") == "5");
  CHECK(pnmem::test::read_text(t / "sys/fs/cgroup/memory/engine/memory.max_usage_in_bytes").substr(0, 1) == "0");
}

TEST_CASE("the meter on a v2 tree: memory.peak of the nearest cgroup with the memory controller") {
  temp_tree t;
  lay_out_v2(t);
  peak_meter meter({.root = t.root.string() + "/"});
  CHECK(meter.cgroup_hierarchy() == cgroup_mode::v2);
  CHECK(meter.cgroup_dir() == (t / "sys/fs/cgroup/pod/").string());
  const auto p = meter.read();
  REQUIRE(p.cgroup.ok());
  CHECK(p.cgroup.peak_bytes == 400_MiB);
  CHECK(p.cgroup.current_bytes == 300_MiB);
  // The reset writes through the file the meter reads: a file in a tree takes the bytes.
  const auto r = meter.reset();
  CHECK(r.cgroup == peak_status::ok);
  CHECK(pnmem::test::read_text(t / "sys/fs/cgroup/pod/memory.peak").substr(0, 1) == "0");
}

TEST_CASE("v2 without memory.peak (before Linux 5.19): the cgroup peak is missing, VmHWM still read") {
  temp_tree t;
  lay_out_v2(t, /*with_peak=*/false);
  peak_meter meter({.root = t.root.string()});
  CHECK(meter.cgroup_hierarchy() == cgroup_mode::v2);
  const auto p = meter.read();
  CHECK(p.process.ok());
  CHECK(p.cgroup.status == peak_status::missing);
  CHECK(p.cgroup.error_number == ENOENT);
  CHECK(p.cgroup.peak_bytes == 0);
  CHECK(meter.reset().cgroup == peak_status::missing);
}

TEST_CASE("a read-only memory.peak (before Linux 6.12) is read, and its reset is unsupported") {
  temp_tree t;
  lay_out_v2(t);
  // Root may open a 0444 file for writing: the kernel's refusal (EACCES) is made by the seam.
  ::chmod((t / "sys/fs/cgroup/pod/memory.peak").c_str(), 0444);
  const open_failure refuse("memory.peak", EACCES, O_RDWR);
  peak_meter meter({.root = t.root.string()});
  const auto p = meter.read();
  REQUIRE(p.cgroup.ok());
  CHECK(p.cgroup.peak_bytes == 400_MiB);
  const auto r = meter.reset();
  CHECK(r.cgroup == peak_status::unsupported);
  CHECK(r.cgroup_error_number == EACCES);
  CHECK(pnmem::test::read_text(t / "sys/fs/cgroup/pod/memory.peak") == "419430400\n");
}

TEST_CASE("a writable file that refuses this writer is permission_denied, not unsupported") {
  temp_tree t;
  lay_out_v1(t);
  peak_meter meter({.root = t.root.string()});
  const open_failure refuse("memory.max_usage_in_bytes", EACCES, O_WRONLY);
  const auto r = meter.reset();
  CHECK(r.cgroup == peak_status::permission_denied);
  CHECK(r.cgroup_error_number == EACCES);
  CHECK(r.process == peak_status::ok);
}

TEST_CASE("clear_refs refusing \"5\" (a kernel before 4.0) is unsupported; any write error is reported") {
  temp_tree t;
  lay_out_v1(t);
  peak_meter meter({.root = t.root.string()});
  {
    const write_failure einval(EINVAL);
    const auto r = meter.reset();
    CHECK(r.process == peak_status::unsupported);
    CHECK(r.process_error_number == EINVAL);
    CHECK(r.cgroup == peak_status::failed);
    CHECK(r.cgroup_error_number == EINVAL);
  }
  {
    const write_failure eio(EIO);
    const auto r = meter.reset();
    CHECK(r.process == peak_status::failed);
    CHECK(r.process_error_number == EIO);
  }
  fs::remove(t / "proc/self/clear_refs");
  CHECK(meter.reset().process == peak_status::missing);
}

TEST_CASE("failures are statuses, never a 0 read as a peak") {
  SUBCASE("no status file: the process is missing") {
    temp_tree t;
    lay_out_v1(t);
    fs::remove(t / "proc/self/status");
    peak_meter meter({.root = t.root.string()});
    const auto p = meter.read();
    CHECK(p.process.status == peak_status::missing);
    CHECK(p.cgroup.ok());
  }
  SUBCASE("a kernel thread's status has no VmHWM: missing") {
    temp_tree t;
    lay_out_v1(t);
    write_text(t / "proc/self/status", "Name:\tkthreadd\nThreads:\t1\n");
    CHECK(peak_meter({.root = t.root.string()}).read().process.status == peak_status::missing);
  }
  SUBCASE("garbage status: malformed") {
    temp_tree t;
    lay_out_v1(t);
    write_text(t / "proc/self/status", "VmHWM:\tlots\nVmRSS:\t1 kB\n");
    const auto p = peak_meter({.root = t.root.string()}).read();
    CHECK(p.process.status == peak_status::malformed);
    CHECK(p.process.peak_bytes == 0);
  }
  SUBCASE("a status read error is failed, with its errno") {
    temp_tree t;
    lay_out_v1(t);
    peak_meter meter({.root = t.root.string()});
    const open_failure eio("/status", EIO);
    const auto p = meter.read();
    CHECK(p.process.status == peak_status::failed);
    CHECK(p.process.error_number == EIO);
  }
  SUBCASE("permission denied is its own status") {
    temp_tree t;
    lay_out_v1(t);
    peak_meter meter({.root = t.root.string()});
    const open_failure eacces("/status", EACCES);
    CHECK(meter.read().process.status == peak_status::permission_denied);
  }
  SUBCASE("a garbage max_usage_in_bytes: malformed") {
    temp_tree t;
    lay_out_v1(t);
    write_text(t / "sys/fs/cgroup/memory/engine/memory.max_usage_in_bytes", "-1\n");
    const auto p = peak_meter({.root = t.root.string()}).read();
    CHECK(p.cgroup.status == peak_status::malformed);
    CHECK(p.cgroup.peak_bytes == 0);
  }
  SUBCASE("a usage file that fails after the peak was read: the whole cgroup value fails") {
    temp_tree t;
    lay_out_v1(t);
    write_text(t / "sys/fs/cgroup/memory/engine/memory.usage_in_bytes", "12x\n");
    const auto p = peak_meter({.root = t.root.string()}).read();
    CHECK(p.cgroup.status == peak_status::malformed);
    CHECK(p.cgroup.peak_bytes == 0);
  }
  SUBCASE("no memory cgroup at all: missing, and the reset says so") {
    temp_tree t;
    lay_out_v1(t);
    write_text(t / "proc/self/cgroup", "3:cpu:/\n0::/\n");
    peak_meter meter({.root = t.root.string()});
    CHECK(meter.cgroup_hierarchy() == cgroup_mode::none);
    CHECK(meter.cgroup_location() == peak_status::missing);
    CHECK(meter.cgroup_dir().empty());
    CHECK(meter.read().cgroup.status == peak_status::missing);
    CHECK(meter.reset().cgroup == peak_status::missing);
  }
  SUBCASE("a garbage /proc/self/cgroup: malformed") {
    temp_tree t;
    lay_out_v1(t);
    write_text(t / "proc/self/cgroup", "this is not a cgroup file\n");
    peak_meter meter({.root = t.root.string()});
    CHECK(meter.cgroup_location() == peak_status::malformed);
    CHECK(meter.read().cgroup.status == peak_status::malformed);
  }
  SUBCASE("a garbage mount table: malformed") {
    temp_tree t;
    lay_out_v1(t);
    write_text(t / "proc/self/mountinfo", "35 31 0:32 / garbage\n");
    CHECK(peak_meter({.root = t.root.string()}).cgroup_location() == peak_status::malformed);
  }
  SUBCASE("an unreadable /proc/self/cgroup: failed") {
    temp_tree t;
    lay_out_v1(t);
    const open_failure eio("/proc/self/cgroup", EIO);
    peak_meter meter({.root = t.root.string()});
    CHECK(meter.cgroup_location() == peak_status::failed);
    CHECK(meter.read().cgroup.status == peak_status::failed);
  }
}

TEST_CASE("another process by pid: /proc/<pid>") {
  temp_tree t;
  lay_out_v1(t);
  fs::create_directories(t / "proc/4242");
  for (const char* f : {"status", "cgroup", "clear_refs"}) fs::copy(t / "proc/self" / f, t / "proc/4242" / f);
  fs::remove(t / "proc/self/status");
  peak_meter meter({.pid = 4242, .root = t.root.string()});
  const auto p = meter.read();
  CHECK(p.process.ok());
  CHECK(p.cgroup.ok());
  CHECK(meter.reset().process == peak_status::ok);
  CHECK(pnmem::test::read_text(t / "proc/4242/clear_refs") == "5");
  // A moved-from meter may be destroyed or assigned to; the moved-to one works.
  peak_meter other = std::move(meter);
  CHECK(other.read().process.ok());
  meter = peak_meter({.root = t.root.string()});
  CHECK(meter.read().process.status == peak_status::missing);
}

// ---------------------------------------------------------------- the real kernel

TEST_CASE("the real kernel: VmHWM rises by 64 MiB touched, and drops when reset") {
  peak_meter meter;
  const auto reset = meter.reset();
  REQUIRE_MESSAGE(reset.process == peak_status::ok, "clear_refs: ", linux_os::to_string(reset.process), " ",
                  std::strerror(reset.process_error_number));
  const auto before = meter.read();
  REQUIRE(before.process.ok());
  CHECK(before.process.peak_bytes + slack >= before.process.current_bytes);
  CHECK(before.process.peak_bytes < before.process.current_bytes + 16_MiB);  // reset: VmHWM = VmRSS then

  touched_memory m;
  const auto high = meter.read();
  REQUIRE(high.process.ok());
  MESSAGE("VmHWM " << before.process.peak_bytes << " -> " << high.process.peak_bytes << " (VmRSS "
                   << before.process.current_bytes << " -> " << high.process.current_bytes << ")");
  CHECK(high.process.peak_bytes + slack >= before.process.current_bytes + 64_MiB);
  CHECK(high.process.current_bytes + slack >= before.process.current_bytes + 64_MiB);

  m.release();
  CHECK(own_rss_bytes() + 60_MiB <= high.process.current_bytes);
  const auto still = meter.read();  // freed, not reset: the mark stays
  CHECK(still.process.peak_bytes + slack >= high.process.peak_bytes);
  REQUIRE(meter.reset().process == peak_status::ok);
  const auto after = meter.read();
  REQUIRE(after.process.ok());
  MESSAGE("after munmap and reset: VmHWM " << after.process.peak_bytes);
  CHECK(after.process.peak_bytes + 60_MiB <= high.process.peak_bytes);

  // This process by pid reads the same kernel numbers.
  const auto by_pid = peak_meter({.pid = static_cast<int>(::getpid())}).read();
  REQUIRE(by_pid.process.ok());
  CHECK(by_pid.process.peak_bytes + slack >= after.process.peak_bytes);
  CHECK(by_pid.process.peak_bytes < after.process.peak_bytes + 16_MiB);
}

TEST_CASE("the real kernel: a child process's VmHWM, by pid") {
  int ready[2];
  int done[2];
  REQUIRE(::pipe(ready) == 0);
  REQUIRE(::pipe(done) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    touched_memory m;
    char c = 1;
    if (::write(ready[1], &c, 1) != 1) ::_exit(1);
    if (::read(done[0], &c, 1) < 0) ::_exit(1);
    ::_exit(0);
  }
  char c = 0;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  const auto p = peak_meter({.pid = static_cast<int>(child)}).read();
  CHECK(::write(done[1], &c, 1) == 1);
  int status = 0;
  ::waitpid(child, &status, 0);
  for (int fd : {ready[0], ready[1], done[0], done[1]}) ::close(fd);
  REQUIRE(p.process.ok());
  CHECK(p.process.peak_bytes + slack >= 64_MiB);
  // Gone now: missing, not a 0.
  CHECK(peak_meter({.pid = static_cast<int>(child)}).read().process.status == peak_status::missing);
}

TEST_CASE("the real kernel: this process's memory cgroup, where there is one") {
  peak_meter meter;
  INFO("cgroup ", meter.cgroup_dir(), " (", linux_os::to_string(meter.cgroup_location()), ")");
  if (meter.cgroup_hierarchy() == cgroup_mode::none) {
    CHECK(meter.read().cgroup.status == meter.cgroup_location());
    return;
  }
  const auto p = meter.read();
  if (meter.cgroup_hierarchy() == cgroup_mode::v2 && p.cgroup.status == peak_status::missing) return;  // < 5.19
  REQUIRE(p.cgroup.ok());
  CHECK(p.cgroup.peak_bytes > 0);
  CHECK(p.cgroup.current_bytes > 0);
}

TEST_CASE("the real kernel: a v1 child memory cgroup's peak rises by 64 MiB touched in it, and drops on reset" *
          doctest::test_suite("real-cgroup")) {
  std::string parent_path;
  const std::string parent_dir = pnmem::test::real_cgroup_dir(cgroup_mode::v1, &parent_path);
  REQUIRE(!parent_dir.empty());
  const fs::path child = fs::path(parent_dir) / ("pnmem-peak-test-" + std::to_string(::getpid()));
  std::error_code ec;
  REQUIRE_MESSAGE(fs::create_directory(child, ec), "cannot create ", child.string(), ": ", ec.message());
  struct cleanup {
    fs::path parent, child;
    ~cleanup() {
      write_text(parent / "cgroup.procs", std::to_string(::getpid()) + "\n");
      ::rmdir(child.c_str());
    }
  } guard{parent_dir, child};
  write_text(child / "cgroup.procs", std::to_string(::getpid()) + "\n");

  peak_meter meter;
  REQUIRE(meter.cgroup_hierarchy() == cgroup_mode::v1);
  CHECK(meter.cgroup_dir() == child.string() + "/");
  const auto reset = meter.reset();
  REQUIRE_MESSAGE(reset.cgroup == peak_status::ok, linux_os::to_string(reset.cgroup), " ",
                  std::strerror(reset.cgroup_error_number));
  const auto before = meter.read();
  REQUIRE(before.cgroup.ok());

  touched_memory m;
  const auto high = meter.read();
  REQUIRE(high.cgroup.ok());
  MESSAGE("cgroup peak " << before.cgroup.peak_bytes << " -> " << high.cgroup.peak_bytes << " (usage "
                         << before.cgroup.current_bytes << " -> " << high.cgroup.current_bytes << ")");
  CHECK(high.cgroup.peak_bytes + slack >= before.cgroup.current_bytes + 64_MiB);

  m.release();
  CHECK(meter.read().cgroup.peak_bytes + slack >= high.cgroup.peak_bytes);  // the mark stays until reset
  REQUIRE(meter.reset().cgroup == peak_status::ok);
  const auto after = meter.read();
  REQUIRE(after.cgroup.ok());
  MESSAGE("after munmap and reset: cgroup peak " << after.cgroup.peak_bytes);
  CHECK(after.cgroup.peak_bytes + 60_MiB <= high.cgroup.peak_bytes);
}

namespace {

// This kernel is at least major.minor (uname's release).
bool kernel_at_least(int major, int minor) {
  struct utsname u {};
  if (::uname(&u) != 0) return false;
  int ma = 0, mi = 0;
  if (std::sscanf(u.release, "%d.%d", &ma, &mi) != 2) return false;
  return ma > major || (ma == major && mi >= minor);
}

// Where v2 cgroups with the memory controller may be made next to this process's own.
std::optional<fs::path> v2_parent(std::string* why = nullptr) {
  const auto self = pnmem::test::own_cgroup(cgroup_mode::v2);
  if (!self) {
    if (why != nullptr) *why = "no cgroup2 mounted for this process";
    return std::nullopt;
  }
  return pnmem::test::v2_memory_parent(*self, why);
}

}  // namespace

TEST_CASE("the real kernel: a v2 sibling memory cgroup's peak rises by 64 MiB touched in it; reset from Linux 6.12" *
          doctest::test_suite("real-cgroup-v2")) {
  const auto self = pnmem::test::own_cgroup(cgroup_mode::v2);
  REQUIRE(self);
  const auto parent = v2_parent();
  REQUIRE(parent);
  const fs::path child = *parent / ("pnmem-peak-test-" + std::to_string(::getpid()));
  std::error_code ec;
  REQUIRE_MESSAGE(fs::create_directory(child, ec), "cannot create ", child.string(), ": ", ec.message());
  struct cleanup {
    fs::path child;
    ~cleanup() { pnmem::test::remove_cgroup(child); }
  } guard{child};
  const pnmem::test::moved_into moved(self->dir, child);  // destroyed first: out before the rmdir
  REQUIRE_MESSAGE(moved.ok(), "could not move into ", child.string(), ": ", pnmem::test::errno_text());

  peak_meter meter;  // made after the move: it locates the cgroup once
  REQUIRE(meter.cgroup_hierarchy() == cgroup_mode::v2);
  CHECK(meter.cgroup_dir() == child.string() + "/");
  const auto before = meter.read();
  REQUIRE_MESSAGE(before.cgroup.ok(), linux_os::to_string(before.cgroup.status), " ",
                  std::strerror(before.cgroup.error_number));

  touched_memory m;
  const auto high = meter.read();
  REQUIRE(high.cgroup.ok());
  MESSAGE("memory.peak " << before.cgroup.peak_bytes << " -> " << high.cgroup.peak_bytes << " (memory.current "
                         << before.cgroup.current_bytes << " -> " << high.cgroup.current_bytes << ")");
  CHECK(high.cgroup.peak_bytes + slack >= before.cgroup.current_bytes + 64_MiB);
  CHECK(high.cgroup.current_bytes + slack >= before.cgroup.current_bytes + 64_MiB);
  CHECK(high.cgroup.peak_bytes + slack >= high.cgroup.current_bytes);

  m.release();
  const auto released = meter.read();
  REQUIRE(released.cgroup.ok());
  CHECK(released.cgroup.peak_bytes + slack >= high.cgroup.peak_bytes);  // the mark stays
  CHECK(released.cgroup.current_bytes + 60_MiB <= high.cgroup.current_bytes);
  const auto reset = meter.reset();
  const auto after = meter.read();
  REQUIRE(after.cgroup.ok());
  MESSAGE("reset: " << linux_os::to_string(reset.cgroup) << " (" << std::string(std::strerror(reset.cgroup_error_number))
                    << "); memory.peak after it " << after.cgroup.peak_bytes);
  if (kernel_at_least(6, 12)) {
    // A write to memory.peak resets it for the file that wrote (the meter's own descriptor).
    CHECK(reset.cgroup == peak_status::ok);
    CHECK(after.cgroup.peak_bytes + 60_MiB <= high.cgroup.peak_bytes);
  } else {
    // Read-only before 6.12: root may open it for writing, but the kernel refuses the write (EINVAL).
    CHECK(reset.cgroup == peak_status::unsupported);
    CHECK(after.cgroup.peak_bytes + slack >= high.cgroup.peak_bytes);
  }
}

TEST_CASE("the real kernel: in a v2 cgroup without the memory controller, the peak is the nearest ancestor's" *
          doctest::test_suite("real-cgroup-v2")) {
  const auto self = pnmem::test::own_cgroup(cgroup_mode::v2);
  REQUIRE(self);
  const auto parent = v2_parent();
  REQUIRE(parent);
  // The sibling has memory (its parent delegates it) but enables nothing for its own children.
  const fs::path sibling = *parent / ("pnmem-peak-nodelegation-" + std::to_string(::getpid()));
  const fs::path leaf = sibling / "leaf";
  std::error_code ec;
  REQUIRE_MESSAGE(fs::create_directory(sibling, ec), "cannot create ", sibling.string(), ": ", ec.message());
  struct cleanup {
    fs::path sibling, leaf;
    ~cleanup() {
      pnmem::test::remove_cgroup(leaf);
      pnmem::test::remove_cgroup(sibling);
    }
  } guard{sibling, leaf};
  REQUIRE(fs::create_directory(leaf, ec));
  REQUIRE_FALSE(fs::exists(leaf / "memory.peak"));
  const pnmem::test::moved_into moved(self->dir, leaf);
  REQUIRE_MESSAGE(moved.ok(), "could not move into ", leaf.string(), ": ", pnmem::test::errno_text());
  peak_meter meter;
  REQUIRE(meter.cgroup_hierarchy() == cgroup_mode::v2);
  CHECK(meter.cgroup_dir() == sibling.string() + "/");
  const auto before = meter.read();
  REQUIRE(before.cgroup.ok());
  touched_memory m;
  const auto high = meter.read();
  REQUIRE(high.cgroup.ok());
  MESSAGE("the ancestor's memory.peak " << before.cgroup.peak_bytes << " -> " << high.cgroup.peak_bytes);
  CHECK(high.cgroup.peak_bytes + slack >= before.cgroup.current_bytes + 64_MiB);
}

int main(int argc, char** argv) {
  const bool cgroup = argc > 1 && std::string_view(argv[1]) == "cgroup";
  doctest::Context context;
  if (cgroup) {
    if (::geteuid() != 0) return pnmem::test::skip("not root: cannot create a memory cgroup");
    const cgroup_mode in_use = peak_meter{}.cgroup_hierarchy();
    if (in_use == cgroup_mode::v1 && !pnmem::test::real_cgroup_dir(cgroup_mode::v1).empty()) {
      context.applyCommandLine(argc - 1, argv + 1);
      context.setOption("test-suite", "real-cgroup");
    } else if (in_use == cgroup_mode::v2) {
      std::string why;
      if (!v2_parent(&why)) return pnmem::test::skip(why);
      context.applyCommandLine(argc - 1, argv + 1);
      context.setOption("test-suite", "real-cgroup-v2");
    } else {
      return pnmem::test::skip("no memory cgroup in use here (neither the v1 memory hierarchy nor cgroup2 with memory)");
    }
  } else {
    context.applyCommandLine(argc, argv);
    context.setOption("test-suite-exclude", "real-cgroup,real-cgroup-v2");
  }
  return context.run();
}
