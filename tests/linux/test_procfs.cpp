// Parsers of the kernel's memory text files: the real formats, and the garbage
// that must come back as an error rather than a number.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "pnmem/linux/procfs.hpp"
#include "pnmem/units.hpp"

using namespace std::string_view_literals;
using pnmem::cgroup_mode;
using pnmem::procfs::errc;
namespace procfs = pnmem::procfs;

namespace {

// Real text from a 6.x kernel, trimmed.
constexpr std::string_view real_meminfo =
    "MemTotal:       24684084 kB\n"
    "MemFree:        23421616 kB\n"
    "MemAvailable:   23938248 kB\n"
    "Buffers:            2928 kB\n"
    "HugePages_Total:       0\n"
    "Hugepagesize:       2048 kB\n";

// /proc/<pid>/status, trimmed to the lines around the two the parser reads.
constexpr std::string_view real_status =
    "Name:\tengine\nUmask:\t0022\nState:\tS (sleeping)\nVmPeak:\t  900000 kB\nVmSize:\t  800000 kB\n"
    "VmLck:\t       0 kB\nVmHWM:\t  524288 kB\nVmRSS:\t  262144 kB\nRssAnon:\t  200000 kB\nThreads:\t4\n";

constexpr std::string_view real_psi =
    "some avg10=1.25 avg60=0.50 avg300=0.10 total=123456\n"
    "full avg10=0.75 avg60=0.25 avg300=0.05 total=65432\n";

}  // namespace

TEST_CASE("meminfo: MemTotal and MemAvailable in bytes") {
  const auto r = procfs::parse_meminfo(real_meminfo);
  REQUIRE(r.ok());
  CHECK(r.value.total_bytes == 24684084ULL * 1024);
  CHECK(r.value.avail_bytes == 23938248ULL * 1024);
}

TEST_CASE("meminfo: order and other lines do not matter; CRLF is accepted") {
  CHECK(procfs::parse_meminfo("MemAvailable: 2 kB\nJunk line without colon\nMemTotal: 4 kB\n").value.total_bytes ==
        4096);
  const auto crlf = procfs::parse_meminfo("MemTotal: 4 kB\r\nMemAvailable: 2 kB\r\n");
  REQUIRE(crlf.ok());
  CHECK(crlf.value.avail_bytes == 2048);
}

TEST_CASE("meminfo: garbage is an error, never 0-as-truth") {
  CHECK(procfs::parse_meminfo("").error == errc::empty);
  CHECK(procfs::parse_meminfo("MemTotal: 4 kB\nMemAvailable: 23938").error == errc::truncated);
  CHECK(procfs::parse_meminfo("MemTotal: 4 kB\nMemAvailable: 2 kB").error == errc::truncated);
  CHECK(procfs::parse_meminfo("MemTotal: 4 kB\n").error == errc::missing_key);
  CHECK(procfs::parse_meminfo("MemAvailable: 4 kB\n").error == errc::missing_key);
  CHECK(procfs::parse_meminfo("hello world\n").error == errc::missing_key);
  CHECK(procfs::parse_meminfo("MemTotal: 4 kB\nMemTotal: 8 kB\nMemAvailable: 2 kB\n").error == errc::duplicate_key);
  CHECK(procfs::parse_meminfo("MemTotal: -4 kB\nMemAvailable: 2 kB\n").error == errc::malformed);
  CHECK(procfs::parse_meminfo("MemTotal: 4 MB\nMemAvailable: 2 kB\n").error == errc::malformed);
  CHECK(procfs::parse_meminfo("MemTotal: 4\nMemAvailable: 2 kB\n").error == errc::malformed);
  CHECK(procfs::parse_meminfo("MemTotal: 4 kB extra\nMemAvailable: 2 kB\n").error == errc::malformed);
  CHECK(procfs::parse_meminfo("MemTotal: 4x kB\nMemAvailable: 2 kB\n").error == errc::malformed);
  CHECK(procfs::parse_meminfo("MemTotal: 0 kB\nMemAvailable: 0 kB\n").error == errc::out_of_range);
  const std::string with_nul = std::string("MemTotal: 4 kB\nMemAvail\0ble: 2 kB\n", 35);
  CHECK(procfs::parse_meminfo(with_nul).error == errc::malformed);
}

TEST_CASE("meminfo: kB to bytes is overflow-checked") {
  // 2^64 / 1024 = 18014398509481984: one kB less fits, that many does not.
  CHECK(procfs::parse_meminfo("MemTotal: 18014398509481983 kB\nMemAvailable: 1 kB\n").value.total_bytes ==
        18014398509481983ULL * 1024);
  CHECK(procfs::parse_meminfo("MemTotal: 18014398509481984 kB\nMemAvailable: 1 kB\n").error == errc::out_of_range);
  CHECK(procfs::parse_meminfo("MemTotal: 99999999999999999999999 kB\nMemAvailable: 1 kB\n").error ==
        errc::out_of_range);
}

TEST_CASE("status: VmHWM and VmRSS in bytes, each required once") {
  using namespace pnmem::literals;
  const auto m = procfs::parse_status_memory(real_status);
  REQUIRE(m.ok());
  CHECK(m.value.hwm_bytes == 524288_KiB);
  CHECK(m.value.rss_bytes == 262144_KiB);
  // CRLF, and lines in any order.
  const auto crlf = procfs::parse_status_memory("VmRSS:\t1 kB\r\nName:\tx\r\nVmHWM: 2 kB\r\n");
  REQUIRE(crlf.ok());
  CHECK(crlf.value.hwm_bytes == 2048);
  CHECK(crlf.value.rss_bytes == 1024);

  CHECK(procfs::parse_status_memory("").error == errc::empty);
  CHECK(procfs::parse_status_memory("VmHWM:\t2 kB\nVmRSS:\t1 kB").error == errc::truncated);
  CHECK(procfs::parse_status_memory(std::string_view("VmHWM:\t2 kB\n\0VmRSS:\t1 kB\n", 26)).error == errc::malformed);
  CHECK(procfs::parse_status_memory("Name:\tkthreadd\nThreads:\t1\n").error == errc::missing_key);
  CHECK(procfs::parse_status_memory("VmHWM:\t2 kB\n").error == errc::missing_key);
  CHECK(procfs::parse_status_memory("VmHWM:\t2 kB\nVmRSS:\t1 kB\nVmHWM:\t3 kB\n").error == errc::duplicate_key);
  CHECK(procfs::parse_status_memory("VmHWM:\t2 MB\nVmRSS:\t1 kB\n").error == errc::malformed);
  CHECK(procfs::parse_status_memory("VmHWM:\t-2 kB\nVmRSS:\t1 kB\n").error == errc::malformed);
  CHECK(procfs::parse_status_memory("VmHWM:\t2 kB x\nVmRSS:\t1 kB\n").error == errc::malformed);
  CHECK(procfs::parse_status_memory("VmHWM:\t\nVmRSS:\t1 kB\n").error == errc::malformed);
  CHECK(procfs::parse_status_memory("VmHWM:\t18014398509481984 kB\nVmRSS:\t1 kB\n").error == errc::out_of_range);
  CHECK(procfs::parse_status_memory("VmHWM:\t99999999999999999999 kB\nVmRSS:\t1 kB\n").error == errc::out_of_range);
  CHECK(procfs::parse_status_memory("VmHWM:\t18014398509481983 kB\nVmRSS:\t1 kB\n").ok());
  // Unlike MemTotal, 0 is a value (a process whose pages are all swapped out).
  CHECK(procfs::parse_status_memory("VmHWM:\t0 kB\nVmRSS:\t0 kB\n").ok());
}

TEST_CASE("psi: some and full, averages in percent, total in microseconds") {
  const auto r = procfs::parse_psi(real_psi);
  REQUIRE(r.ok());
  CHECK(r.value.some.avg10_pct == doctest::Approx(1.25));
  CHECK(r.value.some.avg60_pct == doctest::Approx(0.5));
  CHECK(r.value.some.avg300_pct == doctest::Approx(0.1));
  CHECK(r.value.some.total_us == 123456);
  REQUIRE(r.value.has_full);
  CHECK(r.value.full.avg10_pct == doctest::Approx(0.75));
  CHECK(r.value.full.total_us == 65432);
}

TEST_CASE("psi: an old kernel without the full line leaves full unknown") {
  const auto r = procfs::parse_psi("some avg10=3.00 avg60=2.00 avg300=1.00 total=42\n");
  REQUIRE(r.ok());
  CHECK_FALSE(r.value.has_full);
  CHECK(r.value.some.avg10_pct == doctest::Approx(3.0));
  CHECK(r.value.full.avg10_pct == 0.0);
}

TEST_CASE("psi: extremes that are still valid") {
  const auto r = procfs::parse_psi("some avg10=100.00 avg60=0 avg300=0.5 total=18446744073709551615 newfield=7\n");
  REQUIRE(r.ok());
  CHECK(r.value.some.avg10_pct == 100.0);
  CHECK(r.value.some.total_us == 18446744073709551615ULL);
  CHECK(procfs::parse_psi("some avg10=1.00 avg60=2.00 avg300=3.00 total=4\r\n").ok());
}

TEST_CASE("psi: garbage") {
  CHECK(procfs::parse_psi("").error == errc::empty);
  CHECK(procfs::parse_psi("some avg10=1.00 avg60=2.00 avg300=3.00 total=4").error == errc::truncated);
  CHECK(procfs::parse_psi("some avg10=1.00 avg60=2.00 avg300=3.00 total=4\nfull avg10=1.").error ==
        errc::truncated);
  CHECK(procfs::parse_psi("full avg10=1.00 avg60=2.00 avg300=3.00 total=4\n").error == errc::missing_key);
  CHECK(procfs::parse_psi("some avg10=1.00 avg60=2.00 total=4\n").error == errc::missing_key);
  CHECK(procfs::parse_psi("some avg10=1.00 avg10=1.00 avg60=2.00 avg300=3.00 total=4\n").error ==
        errc::duplicate_key);
  CHECK(procfs::parse_psi("some avg10=1.00 avg60=2.00 avg300=3.00 total=4\n"
                          "some avg10=1.00 avg60=2.00 avg300=3.00 total=4\n")
            .error == errc::duplicate_key);
  CHECK(procfs::parse_psi("some avg10=abc avg60=2.00 avg300=3.00 total=4\n").error == errc::malformed);
  CHECK(procfs::parse_psi("some avg10=-1.00 avg60=2.00 avg300=3.00 total=4\n").error == errc::malformed);
  CHECK(procfs::parse_psi("some avg10=1e3 avg60=2.00 avg300=3.00 total=4\n").error == errc::malformed);
  CHECK(procfs::parse_psi("some avg10=.5 avg60=2.00 avg300=3.00 total=4\n").error == errc::malformed);
  CHECK(procfs::parse_psi("some avg10=5. avg60=2.00 avg300=3.00 total=4\n").error == errc::malformed);
  CHECK(procfs::parse_psi("some avg10=100.01 avg60=2.00 avg300=3.00 total=4\n").error == errc::out_of_range);
  CHECK(procfs::parse_psi("some avg10=1000 avg60=2.00 avg300=3.00 total=4\n").error == errc::out_of_range);
  CHECK(procfs::parse_psi("some avg10=1.00 avg60=2.00 avg300=3.00 total=18446744073709551616\n").error ==
        errc::out_of_range);
  CHECK(procfs::parse_psi("some avg10=1.00 avg60=2.00 avg300=3.00 total=-4\n").error == errc::malformed);
  CHECK(procfs::parse_psi("some avg10 avg60=2.00 avg300=3.00 total=4\n").error == errc::malformed);
  CHECK(procfs::parse_psi("some avg10=1.00 avg60=2.00 avg300=3.00 total=4\n"
                          "full avg10=1.00 avg60=2.00 avg300=3.00\n")
            .error == errc::missing_key);
  const std::string with_nul("some avg10=1.00 avg60=2.00 avg300=3.00 total=\0\n", 47);
  CHECK(procfs::parse_psi(with_nul).error == errc::malformed);
}

TEST_CASE("cgroup single values") {
  CHECK(procfs::parse_cgroup_bytes("2772992\n").value == 2772992);
  CHECK(procfs::parse_cgroup_bytes("0\n").ok());
  CHECK(procfs::parse_cgroup_bytes("18446744073709551615\n").value == 18446744073709551615ULL);
  CHECK(procfs::parse_cgroup_bytes("7\r\n").value == 7);

  CHECK(procfs::parse_cgroup_bytes("").error == errc::empty);
  CHECK(procfs::parse_cgroup_bytes("2772992").error == errc::truncated);  // "27729920000" cut short?
  CHECK(procfs::parse_cgroup_bytes("\n").error == errc::malformed);
  CHECK(procfs::parse_cgroup_bytes("-5\n").error == errc::malformed);
  CHECK(procfs::parse_cgroup_bytes("+5\n").error == errc::malformed);
  CHECK(procfs::parse_cgroup_bytes("5 6\n").error == errc::malformed);
  CHECK(procfs::parse_cgroup_bytes("5\n6\n").error == errc::malformed);
  CHECK(procfs::parse_cgroup_bytes("max\n").error == errc::malformed);
  CHECK(procfs::parse_cgroup_bytes("18446744073709551616\n").error == errc::out_of_range);
  CHECK(procfs::parse_cgroup_bytes(std::string_view("5\0\n", 3)).error == errc::malformed);
}

TEST_CASE("cgroup v2 limits: max means unset") {
  const auto unset = procfs::parse_cgroup_v2_limit("max\n");
  REQUIRE(unset.ok());
  CHECK_FALSE(unset.value.set);
  const auto set = procfs::parse_cgroup_v2_limit("1073741824\n");
  REQUIRE(set.ok());
  CHECK(set.value.set);
  CHECK(set.value.bytes == pnmem::GiB);
  const auto zero = procfs::parse_cgroup_v2_limit("0\n");
  CHECK(zero.value.set);  // a limit of 0 is a real (if hopeless) limit, not "unset"
  CHECK(procfs::parse_cgroup_v2_limit("MAX\n").error == errc::malformed);
  CHECK(procfs::parse_cgroup_v2_limit("max").error == errc::truncated);
  CHECK(procfs::parse_cgroup_v2_limit("banana\n").error == errc::malformed);
}

TEST_CASE("cgroup v1 limits: the huge sentinel means unset") {
  CHECK_FALSE(procfs::parse_cgroup_v1_limit("9223372036854771712\n").value.set);  // 4 KiB pages
  CHECK_FALSE(procfs::parse_cgroup_v1_limit("9223372036854710272\n").value.set);  // 64 KiB pages
  CHECK_FALSE(procfs::parse_cgroup_v1_limit("4611686018427387904\n").value.set);  // 2^62
  const auto below = procfs::parse_cgroup_v1_limit("4611686018427387903\n");
  CHECK(below.value.set);
  const auto two_gib = procfs::parse_cgroup_v1_limit("2147483648\n");
  CHECK(two_gib.value.set);
  CHECK(two_gib.value.bytes == 2 * pnmem::GiB);
  CHECK(procfs::parse_cgroup_v1_limit("-1\n").error == errc::malformed);
  CHECK(procfs::parse_cgroup_v1_limit("max\n").error == errc::malformed);
}

TEST_CASE("memory.stat inactive_file") {
  constexpr std::string_view v1 =
      "cache 184320\n"
      "inactive_file 16384\n"
      "hierarchical_memory_limit 9223372036854771712\n"
      "total_inactive_file 32768\n"
      "total_active_file 167936\n";
  CHECK(procfs::parse_memory_stat_inactive_file(v1, cgroup_mode::v1).value == 32768);  // hierarchical preferred
  CHECK(procfs::parse_memory_stat_inactive_file(v1, cgroup_mode::v2).value == 16384);  // v2 has no total_*
  CHECK(procfs::parse_memory_stat_inactive_file("anon 5\ninactive_file 7\n", cgroup_mode::v1).value == 7);
  CHECK(procfs::parse_memory_stat_inactive_file("anon 5\ninactive_file 7\n", cgroup_mode::v2).value == 7);
  // Keys are whole words: "inactive_file_extra" is not "inactive_file".
  CHECK(procfs::parse_memory_stat_inactive_file("inactive_file_extra 1\ninactive_file 2\n", cgroup_mode::v2).value ==
        2);

  CHECK(procfs::parse_memory_stat_inactive_file("anon 5\n", cgroup_mode::v2).error == errc::missing_key);
  CHECK(procfs::parse_memory_stat_inactive_file("inactive_file 1\ninactive_file 2\n", cgroup_mode::v2).error ==
        errc::duplicate_key);
  CHECK(procfs::parse_memory_stat_inactive_file("inactive_file -1\n", cgroup_mode::v2).error == errc::malformed);
  CHECK(procfs::parse_memory_stat_inactive_file("inactive_file\n", cgroup_mode::v2).error == errc::malformed);
  CHECK(procfs::parse_memory_stat_inactive_file("inactive_file 1 2\n", cgroup_mode::v2).error == errc::malformed);
  CHECK(procfs::parse_memory_stat_inactive_file("inactive_file 12", cgroup_mode::v2).error == errc::truncated);
  CHECK(procfs::parse_memory_stat_inactive_file("inactive_file 1\n", cgroup_mode::none).error == errc::malformed);
  CHECK(procfs::parse_memory_stat_inactive_file("inactive_file 99999999999999999999\n", cgroup_mode::v2).error ==
        errc::out_of_range);
}

TEST_CASE("/proc/self/cgroup: v2 and v1 memory paths") {
  constexpr std::string_view hybrid =
      "9:name=systemd:/\n"
      "4:memory:/process_api/3389739cf13f046fd275f399f721fe1d\n"
      "1:cpu:/\n"
      "0::/\n";
  const auto r = procfs::parse_self_cgroup(hybrid);
  REQUIRE(r.ok());
  CHECK(r.value.v2_path == "/");
  CHECK(r.value.v1_memory_path == "/process_api/3389739cf13f046fd275f399f721fe1d");

  const auto combined = procfs::parse_self_cgroup("3:cpu,memory,pids:/docker/abc\n");
  REQUIRE(combined.ok());
  CHECK(combined.value.v1_memory_path == "/docker/abc");
  CHECK(combined.value.v2_path.empty());

  const auto colon = procfs::parse_self_cgroup("0::/weird:name\n");
  CHECK(colon.value.v2_path == "/weird:name");

  const auto v2_only = procfs::parse_self_cgroup("0::/user.slice/app.service\n");
  CHECK(v2_only.value.v2_path == "/user.slice/app.service");
  CHECK(v2_only.value.v1_memory_path.empty());

  // "memoryx" is not the memory controller.
  CHECK(procfs::parse_self_cgroup("2:memoryx:/a\n").value.v1_memory_path.empty());
}

TEST_CASE("/proc/self/cgroup: garbage") {
  CHECK(procfs::parse_self_cgroup("").error == errc::empty);
  CHECK(procfs::parse_self_cgroup("0::/a").error == errc::truncated);
  CHECK(procfs::parse_self_cgroup("0:/a\n").error == errc::malformed);
  CHECK(procfs::parse_self_cgroup("x::/a\n").error == errc::malformed);
  CHECK(procfs::parse_self_cgroup("-1::/a\n").error == errc::malformed);
  CHECK(procfs::parse_self_cgroup("0::a\n").error == errc::malformed);
  CHECK(procfs::parse_self_cgroup("0::\n").error == errc::malformed);
  CHECK(procfs::parse_self_cgroup("0::/a\n0::/b\n").error == errc::duplicate_key);
  CHECK(procfs::parse_self_cgroup("4:memory:/a\n5:memory:/b\n").error == errc::duplicate_key);
  CHECK(procfs::parse_self_cgroup(std::string_view("0::/a\0b\n", 8)).error == errc::malformed);
}

TEST_CASE("mountinfo: octal escapes") {
  procfs::mount_path out;
  REQUIRE(procfs::unescape_mount_field(R"(/a\040b\011c\134d\012)", out));
  CHECK(out.view() == "/a b\tc\\d\n");
  CHECK_FALSE(procfs::unescape_mount_field(R"(/a\04)", out));
  CHECK_FALSE(procfs::unescape_mount_field(R"(/a\)", out));
  CHECK_FALSE(procfs::unescape_mount_field(R"(/a\09x)", out));
  CHECK_FALSE(procfs::unescape_mount_field(R"(/a\000)", out));  // a NUL is no path byte
  CHECK_FALSE(procfs::unescape_mount_field(R"(/a\777)", out));  // past one byte
  CHECK(procfs::unescape_mount_field(std::string(procfs::mount_path_capacity, 'x'), out));
  CHECK_FALSE(procfs::unescape_mount_field(std::string(procfs::mount_path_capacity + 1, 'x'), out));
}

namespace {

constexpr std::string_view host_mountinfo =
    "23 1 0:21 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime master:7 - cgroup cgroup rw,memory\n"
    "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

}  // namespace

TEST_CASE("mountinfo: the cgroup2 mount and the v1 memory mount") {
  const auto v2 = procfs::find_cgroup_mount(host_mountinfo, cgroup_mode::v2, "/");
  REQUIRE(v2.ok());
  REQUIRE(v2.value.lookup == procfs::mount_lookup::found);
  CHECK(v2.value.mount.mount_point.view() == "/sys/fs/cgroup/unified");
  CHECK(v2.value.mount.root.view() == "/");

  const auto v1 = procfs::find_cgroup_mount(host_mountinfo, cgroup_mode::v1, "/process_api/x");
  REQUIRE(v1.ok());
  REQUIRE(v1.value.lookup == procfs::mount_lookup::found);
  CHECK(v1.value.mount.mount_point.view() == "/sys/fs/cgroup/memory");  // not cpu, not name=systemd

  const auto none = procfs::find_cgroup_mount("23 1 0:21 / / rw - ext4 /dev/vda rw\n", cgroup_mode::v2, "/");
  REQUIRE(none.ok());
  CHECK(none.value.lookup == procfs::mount_lookup::absent);
}

TEST_CASE("mountinfo: a container's sub-tree mount, escaped, with combined controllers") {
  constexpr std::string_view container =
      "600 500 0:40 /docker/abc\\040def /sys/fs/cgroup/cpu,memory ro,nosuid - cgroup cgroup rw,cpu,memory\n"
      "601 500 0:41 /kubepods/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n";
  const auto v1 = procfs::find_cgroup_mount(container, cgroup_mode::v1, "/docker/abc def/child");
  REQUIRE(v1.ok());
  REQUIRE(v1.value.lookup == procfs::mount_lookup::found);
  CHECK(v1.value.mount.root.view() == "/docker/abc def");
  CHECK(v1.value.mount.mount_point.view() == "/sys/fs/cgroup/cpu,memory");
  CHECK(procfs::path_below_root("/docker/abc def/child", v1.value.mount.root.view()) == "/child");
  CHECK(procfs::path_below_root("/docker/abc def", v1.value.mount.root.view()) == "");

  // Outside the mounted sub-tree, or merely sharing a prefix: not visible.
  CHECK(procfs::find_cgroup_mount(container, cgroup_mode::v1, "/docker/other").value.lookup ==
        procfs::mount_lookup::not_visible);
  CHECK(procfs::find_cgroup_mount(container, cgroup_mode::v2, "/kubepods/pod10").value.lookup ==
        procfs::mount_lookup::not_visible);
  CHECK(procfs::find_cgroup_mount(container, cgroup_mode::v2, "/kubepods/pod1/ctr").value.lookup ==
        procfs::mount_lookup::found);
  // A cgroup outside our cgroup namespace ("/../x") has no directory to open.
  CHECK(procfs::find_cgroup_mount(host_mountinfo, cgroup_mode::v2, "/../sibling").value.lookup ==
        procfs::mount_lookup::not_visible);
  CHECK(procfs::find_cgroup_mount(host_mountinfo, cgroup_mode::v2, "/a//b").value.lookup ==
        procfs::mount_lookup::not_visible);
}

// One defect per path: a mutant that lets any one of them through fails here,
// whatever the others do. The host table mounts both hierarchies at "/", so the
// path alone decides; each defective path's plain sibling is found in the same
// table (the defect, not the table, makes the difference).
TEST_CASE("mountinfo: a path with one '.', one '..' or one '//' is not visible; its plain form is") {
  struct defect {
    std::string_view path;
    std::string_view plain;
  };
  const defect defects[] = {
      {"/a/./b", "/a/b"},   // "." in the middle
      {"/a/.", "/a"},       // "." last
      {"/./a", "/a"},       // "." first
      {"/a/../b", "/a/b"},  // ".." in the middle
      {"/a/..", "/a"},      // ".." last
      {"/../a", "/a"},      // ".." first: outside the cgroup namespace
      {"/a//b", "/a/b"},    // an empty component
      {"//a", "/a"},        // an empty first component
  };
  for (const cgroup_mode mode : {cgroup_mode::v2, cgroup_mode::v1}) {
    for (const defect& d : defects) {
      INFO("mode " << (mode == cgroup_mode::v2 ? "v2" : "v1") << ", path \"" << d.path << "\"");
      const auto bad = procfs::find_cgroup_mount(host_mountinfo, mode, d.path);
      REQUIRE(bad.ok());
      CHECK(bad.value.lookup == procfs::mount_lookup::not_visible);
      const auto good = procfs::find_cgroup_mount(host_mountinfo, mode, d.plain);
      REQUIRE(good.ok());
      CHECK(good.value.lookup == procfs::mount_lookup::found);
    }
  }
  // Names that merely contain dots are plain names.
  for (const std::string_view dotted : {"/a.b", "/.a", "/a./b..", "/...", "/user.slice/app.service"}) {
    INFO("path \"" << dotted << "\"");
    CHECK(procfs::find_cgroup_mount(host_mountinfo, cgroup_mode::v2, dotted).value.lookup ==
          procfs::mount_lookup::found);
  }
}

// A mount root shows its own sub-tree, compared by whole path components: a root
// that is a string prefix of the path (or the path a string prefix of the root) is
// a sibling, not an ancestor.
TEST_CASE("mountinfo: a sibling whose name extends the root's, either way round, is not inside it") {
  constexpr std::string_view pod10 = "601 500 0:41 /kubepods/pod10 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
  constexpr std::string_view pod1 = "601 500 0:41 /kubepods/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
  CHECK(procfs::find_cgroup_mount(pod10, cgroup_mode::v2, "/kubepods/pod1").value.lookup ==
        procfs::mount_lookup::not_visible);
  CHECK(procfs::find_cgroup_mount(pod10, cgroup_mode::v2, "/kubepods/pod1/ctr").value.lookup ==
        procfs::mount_lookup::not_visible);
  CHECK(procfs::find_cgroup_mount(pod1, cgroup_mode::v2, "/kubepods/pod10").value.lookup ==
        procfs::mount_lookup::not_visible);
  CHECK(procfs::find_cgroup_mount(pod1, cgroup_mode::v2, "/kubepods/pod10/ctr").value.lookup ==
        procfs::mount_lookup::not_visible);
  CHECK(procfs::find_cgroup_mount(pod1, cgroup_mode::v2, "/kubepods/pod1x").value.lookup ==
        procfs::mount_lookup::not_visible);
  // The controls: the root itself and what is below it are shown.
  CHECK(procfs::find_cgroup_mount(pod10, cgroup_mode::v2, "/kubepods/pod10").value.lookup ==
        procfs::mount_lookup::found);
  CHECK(procfs::find_cgroup_mount(pod1, cgroup_mode::v2, "/kubepods/pod1/ctr").value.lookup ==
        procfs::mount_lookup::found);

  // The sibling's mount comes first: it must be passed over for the mount that shows the cgroup.
  constexpr std::string_view both =
      "1 0 0:1 /kubepods/pod1 /mnt/pod1 rw - cgroup2 cgroup2 rw\n"
      "2 0 0:1 /kubepods/pod10 /mnt/pod10 rw - cgroup2 cgroup2 rw\n";
  const auto r = procfs::find_cgroup_mount(both, cgroup_mode::v2, "/kubepods/pod10/ctr");
  REQUIRE(r.ok());
  REQUIRE(r.value.lookup == procfs::mount_lookup::found);
  CHECK(r.value.mount.mount_point.view() == "/mnt/pod10");
  CHECK(procfs::path_below_root("/kubepods/pod10/ctr", r.value.mount.root.view()) == "/ctr");
  constexpr std::string_view reversed =
      "1 0 0:1 /kubepods/pod10 /mnt/pod10 rw - cgroup2 cgroup2 rw\n"
      "2 0 0:1 /kubepods/pod1 /mnt/pod1 rw - cgroup2 cgroup2 rw\n";
  const auto back = procfs::find_cgroup_mount(reversed, cgroup_mode::v2, "/kubepods/pod1/ctr");
  REQUIRE(back.ok());
  REQUIRE(back.value.lookup == procfs::mount_lookup::found);
  CHECK(back.value.mount.mount_point.view() == "/mnt/pod1");
}

TEST_CASE("mountinfo: the first mount that shows the cgroup wins") {
  constexpr std::string_view two =
      "1 0 0:1 /other /mnt/a rw - cgroup2 cgroup2 rw\n"
      "2 0 0:1 / /mnt/b rw - cgroup2 cgroup2 rw\n"
      "3 0 0:1 / /mnt/c rw - cgroup2 cgroup2 rw\n";
  const auto r = procfs::find_cgroup_mount(two, cgroup_mode::v2, "/mine");
  REQUIRE(r.value.lookup == procfs::mount_lookup::found);
  CHECK(r.value.mount.mount_point.view() == "/mnt/b");
}

TEST_CASE("mountinfo: a mount stacked over another at the same mount point hides it") {
  // A container runtime mounts its cgroup2 (root: the container's cgroup) over the host's at
  // /sys/fs/cgroup: the files there are the later mount's, so its root is the one to use.
  constexpr std::string_view stacked =
      "30 25 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
      "31 25 0:5 / /proc rw - proc proc rw\n"
      "40 30 0:26 /kubepods/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
  const auto r = procfs::find_cgroup_mount(stacked, cgroup_mode::v2, "/kubepods/pod1/engine");
  REQUIRE(r.ok());
  REQUIRE(r.value.lookup == procfs::mount_lookup::found);
  CHECK(r.value.mount.root.view() == "/kubepods/pod1");
  CHECK(r.value.mount.mount_point.view() == "/sys/fs/cgroup");
  CHECK(procfs::path_below_root("/kubepods/pod1/engine", r.value.mount.root.view()) == "/engine");

  // The hidden mount is the only one whose root shows the cgroup: mounted, but not visible.
  const auto hidden = procfs::find_cgroup_mount(stacked, cgroup_mode::v2, "/system.slice/other");
  REQUIRE(hidden.ok());
  CHECK(hidden.value.lookup == procfs::mount_lookup::not_visible);

  // Anything mounted over it hides it (a tmpfs too); a mount elsewhere does not.
  constexpr std::string_view covered =
      "30 25 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
      "41 25 0:27 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n"
      "42 25 0:26 / /mnt/cg rw - cgroup2 cgroup2 rw\n"
      "43 25 0:28 / /sys/fs/cgroup/x rw - tmpfs tmpfs rw\n";
  const auto c = procfs::find_cgroup_mount(covered, cgroup_mode::v2, "/a");
  REQUIRE(c.value.lookup == procfs::mount_lookup::found);
  CHECK(c.value.mount.mount_point.view() == "/mnt/cg");
}

TEST_CASE("mountinfo: garbage") {
  CHECK(procfs::find_cgroup_mount("", cgroup_mode::v2, "/").error == errc::empty);
  CHECK(procfs::find_cgroup_mount("41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw", cgroup_mode::v2, "/")
            .error == errc::truncated);
  CHECK(procfs::find_cgroup_mount("41 31 0:38 / /sys/fs/cgroup/unified rw cgroup2 cgroup2 rw\n", cgroup_mode::v2, "/")
            .error == errc::malformed);  // no "-"
  CHECK(procfs::find_cgroup_mount("41 31 0:38 / /x rw - cgroup2\n", cgroup_mode::v2, "/").error == errc::malformed);
  CHECK(procfs::find_cgroup_mount("garbage\n", cgroup_mode::v2, "/").error == errc::malformed);
  CHECK(procfs::find_cgroup_mount("41 31 0:38 /\\0 /x rw - cgroup2 cgroup2 rw\n", cgroup_mode::v2, "/").error ==
        errc::malformed);
  // A malformed line after the match still makes the table garbage.
  std::string tail(host_mountinfo);
  tail += "junk\n";
  CHECK(procfs::find_cgroup_mount(tail, cgroup_mode::v2, "/").error == errc::malformed);
  CHECK(procfs::find_cgroup_mount(host_mountinfo, cgroup_mode::none, "/").error == errc::malformed);
}

TEST_CASE("path_below_root") {
  CHECK(procfs::path_below_root("/a/b", "/") == "/a/b");
  CHECK(procfs::path_below_root("/", "/") == "");
  CHECK(procfs::path_below_root("/a/b/", "/a") == "/b");
  CHECK(procfs::path_below_root("/a", "/a") == "");
  CHECK(procfs::path_below_root("/a", "/a/b/c") == "");  // never past the end
}

// Every parser, over every prefix and every single-byte corruption of real text:
// no crash, no read past the input (the sanitizer builds make that visible), and
// every answer keeps procfs.hpp's contract (checked by contract_checker below).
namespace {

bool is_line_start(std::string_view t, std::size_t pos) { return pos == 0 || t[pos - 1] == '\n'; }

// The first blank-separated token after `key` where `key` starts a line; empty if none.
std::string_view token_after_line_key(std::string_view t, std::string_view key) {
  for (std::size_t pos = t.find(key); pos != std::string_view::npos; pos = t.find(key, pos + 1)) {
    if (!is_line_start(t, pos)) continue;
    std::size_t i = pos + key.size();
    while (i < t.size() && (t[i] == ' ' || t[i] == '\t')) ++i;
    std::size_t j = i;
    while (j < t.size() && t[j] != ' ' && t[j] != '\t' && t[j] != '\n' && t[j] != '\r') ++j;
    return t.substr(i, j - i);
  }
  return {};
}

// `field=<value>` appears in the text as a whole field (followed by a blank or a line end).
bool has_field(std::string_view t, const std::string& field) {
  for (std::size_t pos = t.find(field); pos != std::string_view::npos; pos = t.find(field, pos + 1)) {
    const std::size_t end = pos + field.size();
    if (end == t.size() || t[end] == ' ' || t[end] == '\t' || t[end] == '\n' || t[end] == '\r') return true;
  }
  return false;
}

// The one value of a one-line file, without its blanks and line end.
std::string_view single_token(std::string_view t) {
  std::size_t i = 0;
  while (i < t.size() && (t[i] == ' ' || t[i] == '\t')) ++i;
  std::size_t j = i;
  while (j < t.size() && t[j] != ' ' && t[j] != '\t' && t[j] != '\n' && t[j] != '\r') ++j;
  return t.substr(i, j - i);
}

// A decimal field as the kernel writes it: digits without a sign; leading zeros
// are the same number.
bool same_number(std::string_view digits, std::uint64_t value) {
  while (digits.size() > 1 && digits.front() == '0') digits.remove_prefix(1);
  return digits == std::to_string(value);
}

bool views_into(std::string_view part, std::string_view whole) {
  return part.empty() ||
         (part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size());
}

// Counts what it checked, per parser, so the test can insist that each parser's
// success path and error path were both reached.
struct contract_checker {
  std::size_t ok_count[11] = {};
  std::size_t error_count[11] = {};

  // procfs.hpp: empty -> empty; a NUL anywhere -> malformed; no final '\n' -> truncated.
  static errc text_verdict(std::string_view t) {
    if (t.empty()) return errc::empty;
    if (t.find('\0') != std::string_view::npos) return errc::malformed;
    if (t.back() != '\n') return errc::truncated;
    return errc::ok;
  }

  template <class R>
  void common(int which, std::string_view t, const R& r, std::initializer_list<errc> may_give) {
    const errc verdict = text_verdict(t);
    if (verdict != errc::ok) {
      CHECK(r.error == verdict);
    } else if (!r.ok()) {
      bool allowed = false;
      for (const errc e : may_give) allowed = allowed || r.error == e;
      INFO("error: " << procfs::to_string(r.error));
      CHECK(allowed);
    }
    ++(r.ok() ? ok_count : error_count)[which];
  }

  void check(std::string_view t) {
    INFO("input: \"" << t << "\" (" << t.size() << " bytes)");
    const auto m = procfs::parse_meminfo(t);
    common(0, t, m, {errc::malformed, errc::out_of_range, errc::missing_key, errc::duplicate_key});
    if (m.ok()) {
      // kB in the text, bytes in the answer: MemTotal never 0, each the number its line holds.
      CHECK(m.value.total_bytes != 0);
      CHECK(m.value.total_bytes % 1024 == 0);
      CHECK(m.value.avail_bytes % 1024 == 0);
      CHECK(same_number(token_after_line_key(t, "MemTotal:"), m.value.total_bytes / 1024));
      CHECK(same_number(token_after_line_key(t, "MemAvailable:"), m.value.avail_bytes / 1024));
    } else {
      CHECK(m.value.total_bytes == 0);
      CHECK(m.value.avail_bytes == 0);
    }

    const auto sm = procfs::parse_status_memory(t);
    common(10, t, sm, {errc::malformed, errc::out_of_range, errc::missing_key, errc::duplicate_key});
    if (sm.ok()) {
      CHECK(same_number(token_after_line_key(t, "VmHWM:"), sm.value.hwm_bytes / 1024));
      CHECK(same_number(token_after_line_key(t, "VmRSS:"), sm.value.rss_bytes / 1024));
    } else {
      CHECK(sm.value.hwm_bytes == 0);
      CHECK(sm.value.rss_bytes == 0);
    }

    const auto p = procfs::parse_psi(t);
    common(1, t, p, {errc::malformed, errc::out_of_range, errc::missing_key, errc::duplicate_key});
    const auto psi_line_ok = [&](const procfs::psi_line& l) {
      for (const double v : {l.avg10_pct, l.avg60_pct, l.avg300_pct}) {
        CHECK(v >= 0.0);
        CHECK(v <= 100.0);
      }
      CHECK(has_field(t, "total=" + std::to_string(l.total_us)));
    };
    const auto psi_line_zero = [](const procfs::psi_line& l) {
      return l.avg10_pct == 0.0 && l.avg60_pct == 0.0 && l.avg300_pct == 0.0 && l.total_us == 0;
    };
    if (p.ok()) {
      CHECK(token_after_line_key(t, "some") != "");
      psi_line_ok(p.value.some);
      if (p.value.has_full) {
        psi_line_ok(p.value.full);
      } else {
        CHECK(psi_line_zero(p.value.full));  // full unknown: nothing in it
      }
    } else {
      CHECK(psi_line_zero(p.value.some));
      CHECK(psi_line_zero(p.value.full));
      CHECK_FALSE(p.value.has_full);
    }

    const auto b = procfs::parse_cgroup_bytes(t);
    common(2, t, b, {errc::malformed, errc::out_of_range});
    if (b.ok()) {
      CHECK(same_number(single_token(t), b.value));
    } else {
      CHECK(b.value == 0);
    }

    const auto v2 = procfs::parse_cgroup_v2_limit(t);
    common(3, t, v2, {errc::malformed, errc::out_of_range});
    if (v2.ok() && v2.value.set) {
      CHECK(same_number(single_token(t), v2.value.bytes));
    } else if (v2.ok()) {
      CHECK(single_token(t) == "max");
      CHECK(v2.value.bytes == 0);
    } else {
      CHECK_FALSE(v2.value.set);
      CHECK(v2.value.bytes == 0);
    }

    const auto v1 = procfs::parse_cgroup_v1_limit(t);
    common(4, t, v1, {errc::malformed, errc::out_of_range});
    if (v1.ok()) {
      // The same number as memory.usage_in_bytes would give; unset from the sentinel's threshold up.
      CHECK(b.ok());
      CHECK(v1.value.set == (b.ok() && b.value < procfs::v1_unlimited_threshold_bytes));
      CHECK(v1.value.bytes == (v1.value.set ? b.value : 0));
    } else {
      CHECK(v1.error == b.error);
      CHECK_FALSE(v1.value.set);
      CHECK(v1.value.bytes == 0);
    }

    int which = 5;
    for (const cgroup_mode mode : {cgroup_mode::v1, cgroup_mode::v2}) {
      const auto st = procfs::parse_memory_stat_inactive_file(t, mode);
      common(which++, t, st, {errc::malformed, errc::out_of_range, errc::missing_key, errc::duplicate_key});
      if (st.ok()) {
        // v1 prefers the hierarchical total_inactive_file; v2 has only inactive_file.
        const std::string_view total = token_after_line_key(t, "total_inactive_file ");
        const std::string_view local = token_after_line_key(t, "inactive_file ");
        const std::string_view used = mode == cgroup_mode::v1 && !total.empty() ? total : local;
        CHECK(same_number(used, st.value));
      } else {
        CHECK(st.value == 0);
      }
    }

    const auto sc = procfs::parse_self_cgroup(t);
    common(7, t, sc, {errc::malformed, errc::duplicate_key});
    if (sc.ok()) {
      for (const std::string_view path : {sc.value.v2_path, sc.value.v1_memory_path}) {
        if (path.empty()) continue;
        CHECK(views_into(path, t));
        CHECK(path.front() == '/');
        CHECK(path.data() > t.data());
        CHECK(path.data()[-1] == ':');
      }
    } else {
      CHECK(sc.value.v2_path.empty());
      CHECK(sc.value.v1_memory_path.empty());
    }

    which = 8;
    for (const auto& [mode, path] : {std::pair{cgroup_mode::v1, "/a"sv}, std::pair{cgroup_mode::v2, "/b"sv}}) {
      const auto mt = procfs::find_cgroup_mount(t, mode, path);
      common(which++, t, mt, {errc::malformed});
      if (mt.ok() && mt.value.lookup == procfs::mount_lookup::found) {
        // The root shows the path, and the table holds the mount's fstype.
        const std::string_view root = mt.value.mount.root.view();
        CHECK((root == "/" || path == root || (path.substr(0, root.size()) == root && path[root.size()] == '/')));
        CHECK(t.find(mode == cgroup_mode::v2 ? " - cgroup2 " : " - cgroup ") != std::string_view::npos);
      } else if (!mt.ok()) {
        CHECK(mt.value.lookup == procfs::mount_lookup::absent);
        CHECK(mt.value.mount.root.size == 0);
        CHECK(mt.value.mount.mount_point.size == 0);
      }
    }
  }
};

}  // namespace

TEST_CASE("parsers survive every prefix and every corrupted byte, and keep the error contract") {
  const std::string_view samples[] = {real_meminfo, real_status, real_psi, host_mountinfo, "max\n",
                                      "9223372036854771712\n", "4:memory:/a\n0::/b\n",
                                      "inactive_file 5\ntotal_inactive_file 6\n", "2147483648\n"};
  const char bytes[] = {'\0', '\n', '\r', ' ', ':', '=', '.', '-', '\\', '/', '9', 'x', '\x80', '\xff'};
  contract_checker c;
  for (const std::string_view s : samples) {
    for (std::size_t n = 0; n <= s.size(); ++n) c.check(s.substr(0, n));
    std::string copy(s);
    for (std::size_t i = 0; i < copy.size(); ++i) {
      const char saved = copy[i];
      for (const char b : bytes) {
        copy[i] = b;
        c.check(copy);
      }
      copy[i] = saved;
    }
  }
  // Each parser both succeeded and failed somewhere in the walk: both halves of the
  // contract above were checked, for every parser.
  const char* const names[] = {"meminfo", "psi", "cgroup_bytes", "v2_limit", "v1_limit", "memory.stat v1",
                               "memory.stat v2", "self_cgroup", "mountinfo v1", "mountinfo v2", "status"};
  for (int i = 0; i < 11; ++i) {
    const auto k = static_cast<std::size_t>(i);
    INFO(names[k] << ": " << c.ok_count[k] << " ok, " << c.error_count[k] << " errors");
    CHECK(c.ok_count[k] > 0);
    CHECK(c.error_count[k] > 0);
  }
}

// Found by fuzz/fuzz_cgroup_v1 (fuzz/corpus/fuzz_cgroup_v1/regress-overflow-before-stray-byte):
// a field of digits past 2^64 followed by a stray byte was reported out_of_range,
// before the stray byte was seen. It is not a number at all: malformed.
TEST_CASE("a number field with a stray byte is malformed, however long its digits") {
  CHECK(procfs::parse_cgroup_bytes("1844744076744073184467440737097095\xb5" "15616\n").error == errc::malformed);
  CHECK(procfs::parse_cgroup_v1_limit("99999999999999999999x\n").error == errc::malformed);
  CHECK(procfs::parse_cgroup_v2_limit("99999999999999999999x\n").error == errc::malformed);
  CHECK(procfs::parse_memory_stat_inactive_file("inactive_file 99999999999999999999x\n", cgroup_mode::v2).error ==
        errc::malformed);
  CHECK(procfs::parse_meminfo("MemTotal: 99999999999999999999x kB\nMemAvailable: 1 kB\n").error == errc::malformed);
  CHECK(procfs::parse_status_memory("VmHWM:\t99999999999999999999x kB\nVmRSS:\t1 kB\n").error == errc::malformed);
  CHECK(procfs::parse_psi("some avg10=1000.x5 avg60=0.00 avg300=0.00 total=0\n").error == errc::malformed);
  CHECK(procfs::parse_psi("some avg10=0.00 avg60=0.00 avg300=0.00 total=99999999999999999999x\n").error ==
        errc::malformed);
  // Digits alone past 2^64, or a percent above 100, stay out of range.
  CHECK(procfs::parse_cgroup_bytes("99999999999999999999\n").error == errc::out_of_range);
  CHECK(procfs::parse_psi("some avg10=1000.05 avg60=0.00 avg300=0.00 total=0\n").error == errc::out_of_range);
}
