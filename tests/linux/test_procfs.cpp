// Parsers of the kernel's memory text files: the real formats, and the garbage
// that must come back as an error rather than a number.
#include <doctest/doctest.h>

#include <string>
#include <string_view>

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

TEST_CASE("mountinfo: the first mount that shows the cgroup wins") {
  constexpr std::string_view two =
      "1 0 0:1 /other /mnt/a rw - cgroup2 cgroup2 rw\n"
      "2 0 0:1 / /mnt/b rw - cgroup2 cgroup2 rw\n"
      "3 0 0:1 / /mnt/c rw - cgroup2 cgroup2 rw\n";
  const auto r = procfs::find_cgroup_mount(two, cgroup_mode::v2, "/mine");
  REQUIRE(r.value.lookup == procfs::mount_lookup::found);
  CHECK(r.value.mount.mount_point.view() == "/mnt/b");
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
// no crash, no read past the input (the sanitizer builds make that visible).
TEST_CASE("parsers survive every prefix and every corrupted byte") {
  const std::string_view samples[] = {real_meminfo, real_psi, host_mountinfo, "max\n", "9223372036854771712\n",
                                      "4:memory:/a\n0::/b\n", "inactive_file 5\ntotal_inactive_file 6\n"};
  const char bytes[] = {'\0', '\n', '\r', ' ', ':', '=', '.', '-', '\\', '/', '9', 'x', '\x80', '\xff'};
  const auto all = [](std::string_view t) {
    (void)procfs::parse_meminfo(t);
    (void)procfs::parse_psi(t);
    (void)procfs::parse_cgroup_bytes(t);
    (void)procfs::parse_cgroup_v2_limit(t);
    (void)procfs::parse_cgroup_v1_limit(t);
    (void)procfs::parse_memory_stat_inactive_file(t, cgroup_mode::v1);
    (void)procfs::parse_memory_stat_inactive_file(t, cgroup_mode::v2);
    (void)procfs::parse_self_cgroup(t);
    (void)procfs::find_cgroup_mount(t, cgroup_mode::v1, "/a");
    (void)procfs::find_cgroup_mount(t, cgroup_mode::v2, "/b");
  };
  std::size_t runs = 0;
  for (const std::string_view s : samples) {
    for (std::size_t n = 0; n <= s.size(); ++n) {
      all(s.substr(0, n));
      ++runs;
    }
    std::string copy(s);
    for (std::size_t i = 0; i < copy.size(); ++i) {
      const char saved = copy[i];
      for (const char b : bytes) {
        copy[i] = b;
        all(copy);
        ++runs;
      }
      copy[i] = saved;
    }
  }
  CHECK(runs > 1000);
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
  CHECK(procfs::parse_psi("some avg10=1000.x5 avg60=0.00 avg300=0.00 total=0\n").error == errc::malformed);
  CHECK(procfs::parse_psi("some avg10=0.00 avg60=0.00 avg300=0.00 total=99999999999999999999x\n").error ==
        errc::malformed);
  // Digits alone past 2^64, or a percent above 100, stay out of range.
  CHECK(procfs::parse_cgroup_bytes("99999999999999999999\n").error == errc::out_of_range);
  CHECK(procfs::parse_psi("some avg10=1000.05 avg60=0.00 avg300=0.00 total=0\n").error == errc::out_of_range);
}
