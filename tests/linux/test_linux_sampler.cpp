// The Linux sampler over fixture trees (every field of each expected snapshot),
// over copies of them changed between samples (PSI rate, vanishing files, a
// process moved between cgroups), and over this machine's real /proc and cgroups.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "pnmem/admission.hpp"
#include "pnmem/fake_clock.hpp"
#include "pnmem/host_sample.hpp"
#include "pnmem/ladder.hpp"
#include "pnmem/level.hpp"
#include "pnmem/linux/linux_sampler.hpp"
#include "pnmem/linux/procfs.hpp"
#include "pnmem/units.hpp"
#include "pnmem/watcher.hpp"
#include "fixture_sampler.hpp"
#include "fixture_tree.hpp"
#include "real_cgroup.hpp"
#include "source_file.hpp"

namespace fs = std::filesystem;
using namespace pnmem::literals;
using pnmem::cgroup_mode;
using pnmem::host_sample;
using pnmem::host_source;
using pnmem::linux_sampler;
using pnmem::linux_sampler_options;
using pnmem::psi_mode;
using pnmem::test::bits;
using pnmem::test::monotonic_clock;
using pnmem::test::fixture_sampler;
using pnmem::test::fixtures_dir;
using pnmem::test::psi_text;
using pnmem::test::read_text;
using pnmem::test::real_cgroup_dir;
using pnmem::test::sample_fixture;
using pnmem::test::temp_tree;
using pnmem::test::write_text;

namespace {

// Every host_sample and provenance field.
void check_sample(const host_sample& got, const host_sample& want) {
  CHECK(got.total_bytes == want.total_bytes);
  CHECK(got.avail_bytes == want.avail_bytes);
  CHECK(got.psi_some_avg10 == doctest::Approx(want.psi_some_avg10));
  CHECK(got.psi_full_avg10 == doctest::Approx(want.psi_full_avg10));
  CHECK(got.psi_some_rate == doctest::Approx(want.psi_some_rate));
  CHECK(got.psi_full_rate == doctest::Approx(want.psi_full_rate));
  CHECK(got.cgroup_current_bytes == want.cgroup_current_bytes);
  CHECK(got.cgroup_high_bytes == want.cgroup_high_bytes);
  CHECK(got.cgroup_max_bytes == want.cgroup_max_bytes);
  CHECK(got.os_level == want.os_level);
  const auto& g = got.provenance;
  const auto& w = want.provenance;
  CHECK(g.sources_read == w.sources_read);
  CHECK(g.sources_failed == w.sources_failed);
  CHECK(pnmem::to_string(g.cgroup) == pnmem::to_string(w.cgroup));
  CHECK(pnmem::to_string(g.psi) == pnmem::to_string(w.psi));
  CHECK(g.meminfo_total_bytes == w.meminfo_total_bytes);
  CHECK(g.meminfo_avail_bytes == w.meminfo_avail_bytes);
  CHECK(g.cgroup_limit_bytes == w.cgroup_limit_bytes);
  CHECK(g.cgroup_working_set_bytes == w.cgroup_working_set_bytes);
  CHECK(g.limit_cgroup_path() == w.limit_cgroup_path());
}

// A fixture's expected sample: only the fields that differ from an empty one
// are named (designated initializers, in this order). GCC 12 warns about the
// members such an initializer leaves out (GCC PR 96868); leaving them out is the point.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
struct expected {
  std::uint64_t total_bytes = 0;
  std::uint64_t avail_bytes = 0;
  double psi_some_avg10 = 0.0;
  double psi_full_avg10 = 0.0;
  std::uint64_t cgroup_current_bytes = 0;
  std::uint64_t cgroup_high_bytes = 0;
  std::uint64_t cgroup_max_bytes = 0;
  std::uint32_t sources_read = 0;
  std::uint32_t sources_failed = 0;
  cgroup_mode cgroup = cgroup_mode::none;
  psi_mode psi = psi_mode::none;
  std::uint64_t meminfo_total_bytes = 0;
  std::uint64_t meminfo_avail_bytes = 0;
  std::uint64_t cgroup_limit_bytes = 0;
  std::uint64_t cgroup_working_set_bytes = 0;
  std::string_view limit_cgroup_path;
};

host_sample expected_sample(const expected& e) {
  host_sample h;
  h.total_bytes = e.total_bytes;
  h.avail_bytes = e.avail_bytes;
  h.psi_some_avg10 = e.psi_some_avg10;
  h.psi_full_avg10 = e.psi_full_avg10;
  h.cgroup_current_bytes = e.cgroup_current_bytes;
  h.cgroup_high_bytes = e.cgroup_high_bytes;
  h.cgroup_max_bytes = e.cgroup_max_bytes;
  auto& p = h.provenance;
  p.sources_read = e.sources_read;
  p.sources_failed = e.sources_failed;
  p.cgroup = e.cgroup;
  p.psi = e.psi;
  p.meminfo_total_bytes = e.meminfo_total_bytes;
  p.meminfo_avail_bytes = e.meminfo_avail_bytes;
  p.cgroup_limit_bytes = e.cgroup_limit_bytes;
  p.cgroup_working_set_bytes = e.cgroup_working_set_bytes;
  if (!e.limit_cgroup_path.empty()) p.set_limit_cgroup_path(e.limit_cgroup_path);
  return h;
}

// Every source a limited cgroup's sample reads.
constexpr std::uint32_t every_source = bits({host_source::meminfo, host_source::psi, host_source::cgroup_usage,
                                         host_source::cgroup_limit, host_source::cgroup_stat});

// The level a snapshot with these host numbers gets, with the default policy.
pnmem::mem_level level_of(const host_sample& h) {
  pnmem::mem_state s;
  pnmem::assign_host(s, h);
  return pnmem::derive_level(s);
}

}  // namespace

TEST_CASE("fixture v1_limit: a v1 container's limit on a hybrid host") {
  // The v2 mount has no memory controller (the process's v2 cgroup "/" has no
  // memory.current), so the v1 memory hierarchy is used. The limit is the
  // container's own (2 GiB; its ancestors are unlimited); the working set uses
  // the hierarchical total_inactive_file, not the local inactive_file.
  check_sample(sample_fixture("v1_limit"),
               expected_sample({.total_bytes = 2_GiB,
                                .avail_bytes = 1_GiB,  // 2 GiB - (1.5 GiB usage - 512 MiB total_inactive_file)
                                .psi_some_avg10 = 2.5,
                                .psi_full_avg10 = 0.5,
                                .cgroup_current_bytes = 1536_MiB,
                                .cgroup_max_bytes = 2_GiB,
                                .sources_read = every_source,
                                .cgroup = cgroup_mode::v1,
                                .psi = psi_mode::poll,
                                .meminfo_total_bytes = 16_GiB,
                                .meminfo_avail_bytes = 10_GiB,
                                .cgroup_limit_bytes = 2_GiB,
                                .cgroup_working_set_bytes = 1_GiB,
                                .limit_cgroup_path = "/docker/abc"}));
}

TEST_CASE("fixture v2_nested: a tighter ancestor, and memory.high below memory.max") {
  // ctr.scope (max 6 GiB) < pod1.slice (max 4 GiB, high 3 GiB) < kubepods.slice
  // (max 12 GiB) < the root cgroup (no limit files). The pod's memory.high is the
  // effective limit, so the pod is the limiting cgroup: its usage and memory.stat
  // give the working set, not the container's.
  check_sample(sample_fixture("v2_nested"),
               expected_sample({.total_bytes = 3_GiB,
                                .avail_bytes = 1_GiB,  // 3 GiB - (2.5 GiB - 512 MiB)
                                .psi_some_avg10 = 0.4,
                                .cgroup_current_bytes = 2560_MiB,
                                .cgroup_high_bytes = 3_GiB,
                                .cgroup_max_bytes = 4_GiB,
                                .sources_read = every_source,
                                .cgroup = cgroup_mode::v2,
                                .psi = psi_mode::poll,
                                .meminfo_total_bytes = 32_GiB,
                                .meminfo_avail_bytes = 20_GiB,
                                .cgroup_limit_bytes = 3_GiB,
                                .cgroup_working_set_bytes = 2_GiB,
                                .limit_cgroup_path = "/kubepods.slice/pod1.slice"}));
}

TEST_CASE("fixture v2_unlimited: host numbers, the process's own usage, no limit path") {
  check_sample(sample_fixture("v2_unlimited"),
               expected_sample({.total_bytes = 8_GiB,
                                .avail_bytes = 6_GiB,
                                .cgroup_current_bytes = 700_MiB,  // the process's cgroup: nothing limits
                                // memory.stat is only read against a limit.
                                .sources_read = bits({host_source::meminfo, host_source::psi,
                                                      host_source::cgroup_usage, host_source::cgroup_limit}),
                                .cgroup = cgroup_mode::v2,
                                .psi = psi_mode::poll,
                                .meminfo_total_bytes = 8_GiB,
                                .meminfo_avail_bytes = 6_GiB}));
}

TEST_CASE("fixture no_cgroup: no /proc/self/cgroup, nothing mounted, PSI without a full line") {
  check_sample(sample_fixture("no_cgroup"),
               expected_sample({.total_bytes = 4_GiB,
                                .avail_bytes = 3_GiB,
                                .psi_some_avg10 = 12.0,
                                .psi_full_avg10 = 0.0,  // unknown on this kernel: not a stall
                                .sources_read = bits({host_source::meminfo, host_source::psi}),
                                .cgroup = cgroup_mode::none,
                                .psi = psi_mode::poll,
                                .meminfo_total_bytes = 4_GiB,
                                .meminfo_avail_bytes = 3_GiB}));
}

TEST_CASE("fixture no_psi: no /proc/pressure; the v2 root cgroup has no numbers of its own") {
  check_sample(sample_fixture("no_psi"),
               expected_sample({.total_bytes = 64_GiB,
                                .avail_bytes = 48_GiB,
                                .sources_read = bits({host_source::meminfo}),
                                .cgroup = cgroup_mode::none,  // "0::/" has no memory.current: no container limit
                                .psi = psi_mode::none,        // absent, not failed
                                .meminfo_total_bytes = 64_GiB,
                                .meminfo_avail_bytes = 48_GiB}));
}

TEST_CASE("fixture truncated: files cut mid-line are failures, never short numbers") {
  // meminfo ends in "MemAvailable: 62", PSI in "total=12", the process's
  // memory.max in "107" (of 1073741824), the limiting cgroup's memory.stat
  // mid-key. The parent's 4 GiB limit still counts; its working set is its whole
  // usage (inactive_file unknown). No meminfo: total 0, skipped by the level rules.
  const host_sample got = sample_fixture("truncated");
  check_sample(got, expected_sample({.cgroup_current_bytes = 1_GiB,
                                     .cgroup_max_bytes = 4_GiB,
                                     .sources_read = bits({host_source::cgroup_usage, host_source::cgroup_limit}),
                                     .sources_failed = bits({host_source::meminfo, host_source::psi,
                                                             host_source::cgroup_limit, host_source::cgroup_stat}),
                                     .cgroup = cgroup_mode::v2,
                                     .psi = psi_mode::none,
                                     .cgroup_limit_bytes = 4_GiB,
                                     .cgroup_working_set_bytes = 1_GiB,
                                     .limit_cgroup_path = "/lim"}));
  CHECK(level_of(got) == pnmem::mem_level::ok);
}

TEST_CASE("fixture garbage: junk values are failures, never numbers") {
  const host_sample got = sample_fixture("garbage");
  check_sample(got, expected_sample({.sources_failed = bits({host_source::meminfo, host_source::psi,
                                                             host_source::cgroup_usage, host_source::cgroup_limit}),
                                     .cgroup = cgroup_mode::v2,
                                     .psi = psi_mode::none}));
  CHECK(level_of(got) == pnmem::mem_level::ok);
}

TEST_CASE("fixture garbage_self_cgroup: an unreadable cgroup membership marks the cgroup sources failed") {
  check_sample(sample_fixture("garbage_self_cgroup"),
               expected_sample({.total_bytes = 8_GiB,
                                .avail_bytes = 6_GiB,
                                .sources_read = bits({host_source::meminfo, host_source::psi}),
                                .sources_failed = bits({host_source::cgroup_usage, host_source::cgroup_limit}),
                                .cgroup = cgroup_mode::none,
                                .psi = psi_mode::poll,
                                .meminfo_total_bytes = 8_GiB,
                                .meminfo_avail_bytes = 6_GiB}));
}

TEST_CASE("fixture container_v2_subtree: the container's cgroup is the mount's root") {
  // /proc/self/cgroup says /system.slice/docker-abc.scope/app; the mount shows
  // /system.slice/docker-abc.scope at /sys/fs/cgroup, so the process's directory
  // is /sys/fs/cgroup/app and the walk stops at /sys/fs/cgroup (the container's
  // 1 GiB limit). The fixture has no sys/fs/cgroup/system.slice: joining the
  // full path would find nothing.
  check_sample(sample_fixture("container_v2_subtree"),
               expected_sample({.total_bytes = 1_GiB,
                                .avail_bytes = 524_MiB,  // 1 GiB - (600 MiB - 100 MiB)
                                .psi_some_avg10 = 5.0,
                                .psi_full_avg10 = 1.0,
                                .cgroup_current_bytes = 600_MiB,
                                .cgroup_max_bytes = 1_GiB,
                                .sources_read = every_source,
                                .cgroup = cgroup_mode::v2,
                                .psi = psi_mode::poll,
                                .meminfo_total_bytes = 64_GiB,
                                .meminfo_avail_bytes = 40_GiB,
                                .cgroup_limit_bytes = 1_GiB,
                                .cgroup_working_set_bytes = 500_MiB,
                                .limit_cgroup_path = "/system.slice/docker-abc.scope"}));
}

TEST_CASE("fixture container_v1_subtree: an escaped mount root, cpu and memory mounted together") {
  check_sample(sample_fixture("container_v1_subtree"),
               expected_sample({.total_bytes = 512_MiB,
                                .avail_bytes = 256_MiB,  // 512 MiB - (300 MiB - 44 MiB)
                                .cgroup_current_bytes = 300_MiB,
                                .cgroup_max_bytes = 512_MiB,
                                .sources_read = every_source,
                                .cgroup = cgroup_mode::v1,
                                .psi = psi_mode::poll,
                                .meminfo_total_bytes = 16_GiB,
                                .meminfo_avail_bytes = 12_GiB,
                                .cgroup_limit_bytes = 512_MiB,
                                .cgroup_working_set_bytes = 256_MiB,
                                .limit_cgroup_path = "/docker/abc def"}));
}

TEST_CASE("a missing root directory: nothing read, nothing failed, total unknown") {
  const host_sample got = sample_fixture("does-not-exist");
  host_sample want;
  check_sample(got, want);
  CHECK(level_of(got) == pnmem::mem_level::ok);
}

TEST_CASE("PSI stall rate from total= deltas over the injected clock") {
  temp_tree tree("v2_unlimited");
  const fs::path psi_file = tree / "proc/pressure/memory";
  monotonic_clock clock;
  linux_sampler s = fixture_sampler(tree.root, &clock);

  write_text(psi_file, psi_text(1'000'000, 100'000));
  host_sample h = s.sample();
  CHECK(h.psi_some_rate == 0.0);  // first sample: no interval yet
  CHECK(h.psi_full_rate == 0.0);

  // 0.5 s of "some" and 0.1 s of "full" stall over 1 s of wall time.
  clock.now_ns += 1'000'000'000;
  write_text(psi_file, psi_text(1'500'000, 200'000));
  h = s.sample();
  CHECK(h.psi_some_rate == doctest::Approx(50.0));
  CHECK(h.psi_full_rate == doctest::Approx(10.0));

  // 250 ms later, 25 ms more "some": 10 %.
  clock.now_ns += 250'000'000;
  write_text(psi_file, psi_text(1'525'000, 200'000));
  h = s.sample();
  CHECK(h.psi_some_rate == doctest::Approx(10.0));
  CHECK(h.psi_full_rate == 0.0);

  // A counter that went backwards (a different kernel? a reset?) is no stall.
  clock.now_ns += 1'000'000'000;
  write_text(psi_file, psi_text(10, 300'000));
  h = s.sample();
  CHECK(h.psi_some_rate == 0.0);
  CHECK(h.psi_full_rate == doctest::Approx(10.0));

  // More stall than wall time (clock jitter, per-CPU accounting) is clamped to 100 %.
  clock.now_ns += 1'000'000'000;
  write_text(psi_file, psi_text(3'000'010, 300'000));
  h = s.sample();
  CHECK(h.psi_some_rate == 100.0);

  // A clock that did not move gives no rate rather than a division by zero.
  write_text(psi_file, psi_text(3'500'000, 400'000));
  h = s.sample();
  CHECK(h.psi_some_rate == 0.0);
  CHECK(h.psi_full_rate == 0.0);

  // PSI gone: no rate, psi none; when it returns, the rate starts over.
  fs::remove(psi_file);
  clock.now_ns += 1'000'000'000;
  h = s.sample();
  CHECK_FALSE(h.provenance.read(host_source::psi));
  CHECK_FALSE(h.provenance.failed(host_source::psi));
  CHECK(h.provenance.psi == psi_mode::none);
  CHECK(h.psi_some_rate == 0.0);
  clock.now_ns += 1'000'000'000;
  write_text(psi_file, psi_text(9'000'000, 900'000));
  h = s.sample();
  CHECK(h.provenance.read(host_source::psi));
  CHECK(h.psi_some_rate == 0.0);  // first sample again
  clock.now_ns += 1'000'000'000;
  write_text(psi_file, psi_text(9'200'000, 900'000));
  h = s.sample();
  CHECK(h.psi_some_rate == doctest::Approx(20.0));
}

TEST_CASE("PSI stalls the kernel's averages never register are no rate: a trickle stays OK, a real stall is TIGHT") {
  // The kernel counts each 2 s period's stall in whole percent (psi.c calc_avgs), so avg10 never moves for
  // a box that stalls under 20 ms in 2 s; the seed's "full avg10 > 0 is TIGHT" never fires there. A 100 ms
  // poll that saw 0.5 ms of full stall must not either (before: a 0.5 % rate, TIGHT on every poll).
  temp_tree tree("v2_unlimited");
  const fs::path psi_file = tree / "proc/pressure/memory";
  monotonic_clock clock;
  linux_sampler s = fixture_sampler(tree.root, &clock);
  constexpr std::int64_t ms = 1'000'000;
  std::uint64_t some = 1'000'000;
  std::uint64_t full = 100'000;
  const auto poll = [&](std::uint64_t some_us, std::uint64_t full_us) {
    some += some_us;
    full += full_us;
    clock.now_ns += 100 * ms;
    write_text(psi_file, psi_text(some, full));
    return s.sample();
  };
  write_text(psi_file, psi_text(some, full));
  host_sample h = s.sample();
  // 5 s of polls, each with 0.5 ms of some and of full stall: 10 ms per 2 s, under the kernel's 20 ms.
  for (int i = 0; i < 50; ++i) {
    h = poll(500, 500);
    CHECK(h.psi_some_rate == 0.0);
    CHECK(h.psi_full_rate == 0.0);
    CHECK(level_of(h) == pnmem::mem_level::ok);
  }
  // Then 2.5 ms of full stall per poll: once the last 2 s hold 20 ms (5 polls), the rate counts, as it is.
  for (int i = 0; i < 4; ++i) CHECK(poll(0, 2'500).psi_full_rate == 0.0);
  h = poll(0, 2'500);
  CHECK(h.psi_full_rate == doctest::Approx(2.5));
  CHECK(level_of(h) == pnmem::mem_level::tight);
  for (int i = 0; i < 20; ++i) h = poll(0, 2'500);
  CHECK(h.psi_full_rate == doctest::Approx(2.5));
  CHECK(level_of(h) == pnmem::mem_level::tight);

  // A fresh sampler: one burst of 20 ms in its first 100 ms counts at once, 19.999 ms does not.
  const auto full_poll = [&](linux_sampler& on, std::uint64_t full_us) {
    full += full_us;
    clock.now_ns += 100 * ms;
    write_text(psi_file, psi_text(some, full));
    return on.sample();
  };
  linux_sampler fresh = fixture_sampler(tree.root, &clock);
  (void)fresh.sample();
  h = full_poll(fresh, 19'999);
  CHECK(h.psi_full_rate == 0.0);
  CHECK(level_of(h) == pnmem::mem_level::ok);
  h = full_poll(fresh, 1);  // 20 ms over the last 200 ms: the 1 us of this poll counts, as avg10 would show
  CHECK(h.psi_full_rate == doctest::Approx(0.001));
  CHECK(level_of(h) == pnmem::mem_level::tight);
  linux_sampler burst = fixture_sampler(tree.root, &clock);
  (void)burst.sample();
  h = full_poll(burst, 20'000);
  CHECK(h.psi_full_rate == doctest::Approx(20.0));
  CHECK(level_of(h) == pnmem::mem_level::tight);
}

TEST_CASE("an old kernel's PSI without full: no full rate even with a reference") {
  temp_tree tree("no_cgroup");
  const fs::path psi_file = tree / "proc/pressure/memory";
  monotonic_clock clock;
  linux_sampler s = fixture_sampler(tree.root, &clock);
  (void)s.sample();
  clock.now_ns += 1'000'000'000;
  write_text(psi_file, "some avg10=12.00 avg60=6.00 avg300=1.50 total=4300000\n");
  const host_sample h = s.sample();
  CHECK(h.psi_some_rate == doctest::Approx(10.0));
  CHECK(h.psi_full_rate == 0.0);
}

TEST_CASE("sources that vanish and come back") {
  temp_tree tree("v1_limit");
  linux_sampler s = fixture_sampler(tree.root);
  const fs::path meminfo = tree / "proc/meminfo";
  const fs::path stat = tree / "sys/fs/cgroup/memory/docker/abc/memory.stat";
  const std::string meminfo_text = read_text(meminfo);
  const std::string stat_text = read_text(stat);

  host_sample h = s.sample();
  REQUIRE(h.total_bytes == 2_GiB);

  // meminfo gone: total unknown (0), not failed; the cgroup is still read.
  fs::remove(meminfo);
  h = s.sample();
  CHECK(h.total_bytes == 0);
  CHECK(h.avail_bytes == 0);
  CHECK_FALSE(h.provenance.read(host_source::meminfo));
  CHECK_FALSE(h.provenance.failed(host_source::meminfo));
  CHECK(h.provenance.meminfo_total_bytes == 0);
  CHECK(h.provenance.cgroup_limit_bytes == 2_GiB);
  CHECK(pnmem::host_level(h.total_bytes, h.avail_bytes) == pnmem::mem_level::ok);  // skipped, not CRITICAL

  write_text(meminfo, meminfo_text);
  h = s.sample();
  CHECK(h.provenance.read(host_source::meminfo));
  CHECK(h.total_bytes == 2_GiB);
  CHECK(h.avail_bytes == 1_GiB);

  // memory.stat gone: the working set is the whole usage (the safe side).
  fs::remove(stat);
  h = s.sample();
  CHECK_FALSE(h.provenance.read(host_source::cgroup_stat));
  CHECK_FALSE(h.provenance.failed(host_source::cgroup_stat));
  CHECK(h.provenance.cgroup_working_set_bytes == 1536_MiB);
  CHECK(h.avail_bytes == 512_MiB);

  write_text(stat, stat_text);
  h = s.sample();
  CHECK(h.provenance.read(host_source::cgroup_stat));
  CHECK(h.avail_bytes == 1_GiB);

  // Something that is not a readable file where meminfo belongs: failed.
  fs::remove(meminfo);
  fs::create_directory(meminfo);
  h = s.sample();
  CHECK(h.provenance.failed(host_source::meminfo));
  CHECK(h.total_bytes == 0);
  fs::remove(meminfo);
  write_text(meminfo, meminfo_text);
  h = s.sample();
  CHECK(h.provenance.read(host_source::meminfo));
  CHECK_FALSE(h.provenance.failed(host_source::meminfo));

  // The limit file rewritten in place: the kept descriptor reads the new value.
  write_text(tree / "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "1610612736\n");
  h = s.sample();
  CHECK(h.total_bytes == 1536_MiB);
  CHECK(h.avail_bytes == 512_MiB);
}

TEST_CASE("a process moved to another cgroup: the cgroup files are reopened") {
  temp_tree tree("v2_nested");
  const fs::path self_cgroup = tree / "proc/self/cgroup";
  linux_sampler s = fixture_sampler(tree.root);
  host_sample h = s.sample();
  CHECK(h.provenance.limit_cgroup_path() == "/kubepods.slice/pod1.slice");

  write_text(self_cgroup, "0::/kubepods.slice\n");
  h = s.sample();
  CHECK(h.provenance.cgroup == cgroup_mode::v2);
  CHECK(h.provenance.limit_cgroup_path() == "/kubepods.slice");
  CHECK(h.provenance.cgroup_limit_bytes == 12_GiB);
  CHECK(h.total_bytes == 12_GiB);
  CHECK(h.cgroup_current_bytes == 6_GiB);
  CHECK(h.cgroup_high_bytes == 0);

  // To the root cgroup: no memory.current, no cgroup numbers.
  write_text(self_cgroup, "0::/\n");
  h = s.sample();
  CHECK(h.provenance.cgroup == cgroup_mode::none);
  CHECK(h.total_bytes == 32_GiB);
  CHECK(h.provenance.limit_cgroup_path().empty());

  write_text(self_cgroup, "0::/kubepods.slice/pod1.slice/ctr.scope\n");
  h = s.sample();
  CHECK(h.provenance.limit_cgroup_path() == "/kubepods.slice/pod1.slice");
  CHECK(h.total_bytes == 3_GiB);

  // A garbage membership file, then a good one again.
  write_text(self_cgroup, "garbage\n");
  h = s.sample();
  CHECK(h.provenance.cgroup == cgroup_mode::none);
  CHECK(h.provenance.failed(host_source::cgroup_limit));
  write_text(self_cgroup, "0::/kubepods.slice/pod1.slice/ctr.scope\n");
  h = s.sample();
  CHECK(h.provenance.cgroup == cgroup_mode::v2);
  CHECK_FALSE(h.provenance.failed(host_source::cgroup_limit));
  CHECK(h.total_bytes == 3_GiB);
}

TEST_CASE("a v2 cgroup without the memory controller is charged to its nearest ancestor with it") {
  temp_tree tree("v2_nested");
  const fs::path ctr = tree / "sys/fs/cgroup/kubepods.slice/pod1.slice/ctr.scope";
  for (const char* f : {"memory.current", "memory.max", "memory.high", "memory.stat"}) fs::remove(ctr / f);
  linux_sampler s = fixture_sampler(tree.root);
  host_sample h = s.sample();
  CHECK(h.provenance.cgroup == cgroup_mode::v2);
  CHECK(h.provenance.limit_cgroup_path() == "/kubepods.slice/pod1.slice");
  CHECK(h.total_bytes == 3_GiB);
  CHECK(h.provenance.sources_failed == 0);

  // Unlimited everywhere: the usage shown is the pod's, the nearest with a memory.current.
  for (const char* dir : {"kubepods.slice", "kubepods.slice/pod1.slice"}) {
    write_text(tree / "sys/fs/cgroup" / dir / "memory.max", "max\n");
    write_text(tree / "sys/fs/cgroup" / dir / "memory.high", "max\n");
  }
  h = s.sample();
  CHECK(h.provenance.cgroup_limit_bytes == 0);
  CHECK(h.total_bytes == 32_GiB);
  CHECK(h.cgroup_current_bytes == 2560_MiB);
}

TEST_CASE("ties between levels go to the ancestor; a zero limit is CRITICAL, not unknown") {
  temp_tree tree("v2_nested");
  const fs::path ctr = tree / "sys/fs/cgroup/kubepods.slice/pod1.slice/ctr.scope";
  write_text(ctr / "memory.high", "3221225472\n");  // the pod's memory.high, exactly
  linux_sampler s = fixture_sampler(tree.root);
  host_sample h = s.sample();
  CHECK(h.provenance.limit_cgroup_path() == "/kubepods.slice/pod1.slice");

  write_text(ctr / "memory.max", "0\n");
  h = s.sample();
  CHECK(h.provenance.limit_cgroup_path() == "/kubepods.slice/pod1.slice/ctr.scope");
  CHECK(h.total_bytes == 1);
  CHECK(h.avail_bytes == 0);
  CHECK(level_of(h) == pnmem::mem_level::critical);
}

TEST_CASE("the provenance's PSI mode follows the sampler's PSI triggers") {
  // A fixture tree is not procfs: psi_trigger refuses to write trigger text into
  // a regular file, so the triggers are not armed and PSI is polled.
  linux_sampler s = fixture_sampler(fixtures_dir() / "v1_limit");
  CHECK(s.trigger().mode() == psi_mode::poll);
  CHECK_FALSE(s.trigger().reason().empty());
  CHECK(s.sample().provenance.psi == psi_mode::poll);

  // No PSI file at all: none.
  linux_sampler no_psi = fixture_sampler(fixtures_dir() / "no_psi");
  CHECK(no_psi.sample().provenance.psi == psi_mode::none);

  // The real kernel: whatever it allows, the provenance says the same as the trigger.
  linux_sampler real;
  const host_sample h = real.sample();
  if (h.provenance.read(host_source::psi)) {
    CHECK(h.provenance.psi == real.trigger().mode());
  } else {
    CHECK(h.provenance.psi == psi_mode::none);
    MESSAGE("NOT CHECKED: this machine's /proc/pressure/memory was not read (no PSI): the real "
            "trigger's mode in the provenance was not compared");
  }

  // No triggers asked for: PSI polled, waits still interruptible.
  pnmem::linux_sampler_options o;
  o.psi_triggers.clear();
  linux_sampler plain{o};
  const host_sample polled = plain.sample();
  if (polled.provenance.read(host_source::psi)) {
    CHECK(polled.provenance.psi == psi_mode::poll);
  } else {
    CHECK(polled.provenance.psi == psi_mode::none);
    MESSAGE("NOT CHECKED: no PSI on this machine: the real sampler without triggers was not seen polling");
  }
}

TEST_CASE("wait_for: an interrupt before the wait returns at once") {
  linux_sampler s = fixture_sampler(fixtures_dir() / "v1_limit");
  s.interrupt();
  CHECK(s.wait_for(std::chrono::hours(1)) == pnmem::wake::interrupted);
  CHECK(s.wait_for(std::chrono::milliseconds(1)) == pnmem::wake::timeout);
}

TEST_CASE("read_all_for_benchmark re-reads exactly the files the last sample read") {
  const fs::path root = fixtures_dir() / "v1_limit";
  linux_sampler s = fixture_sampler(root);
  CHECK(s.read_all_for_benchmark() == 0);  // nothing sampled yet
  (void)s.sample();
  const std::string files[] = {
      "proc/self/cgroup",
      "proc/meminfo",
      "proc/pressure/memory",
      "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes",
      "sys/fs/cgroup/memory/docker/memory.limit_in_bytes",
      "sys/fs/cgroup/memory/memory.limit_in_bytes",
      "sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes",
      "sys/fs/cgroup/memory/docker/abc/memory.stat",
  };
  std::size_t expected = 0;
  for (const auto& f : files) expected += fs::file_size(root / f);
  CHECK(s.read_all_for_benchmark() == expected);
}

TEST_CASE("a sampler can be moved") {
  linux_sampler a = fixture_sampler(fixtures_dir() / "v2_nested");
  linux_sampler b = std::move(a);
  CHECK(b.sample().total_bytes == 3_GiB);
  a = std::move(b);
  CHECK(a.sample().total_bytes == 3_GiB);
}

// ---- the real machine ---------------------------------------------------------
// (Cases that create cgroups are in test_sampler_in_cgroup.cpp, suite linux-kernel.)

TEST_CASE("the real machine: sane and self-consistent numbers") {
  linux_sampler s;
  const host_sample h = s.sample();
  const auto& p = h.provenance;
  MESSAGE("cgroup " << pnmem::to_string(p.cgroup) << ", psi " << pnmem::to_string(p.psi) << ", total "
                    << h.total_bytes << ", avail " << h.avail_bytes << ", limit " << p.cgroup_limit_bytes << " at '"
                    << p.limit_cgroup_path() << "', sources read " << p.sources_read << ", failed "
                    << p.sources_failed);
  CHECK(p.sources_failed == 0);
  REQUIRE(p.read(host_source::meminfo));
  CHECK(h.total_bytes > 0);
  CHECK(h.avail_bytes <= h.total_bytes);
  CHECK(h.total_bytes <= p.meminfo_total_bytes);
  CHECK(h.avail_bytes <= p.meminfo_avail_bytes);
  CHECK(p.meminfo_avail_bytes <= p.meminfo_total_bytes);

  if (fs::exists("/proc/pressure/memory")) {
    CHECK(p.read(host_source::psi));
    CHECK(p.psi != psi_mode::none);  // trigger where the kernel allows it, else poll
  } else {
    CHECK(p.psi == psi_mode::none);
  }
  CHECK(h.psi_some_avg10 >= 0.0);
  CHECK(h.psi_some_avg10 <= 100.0);
  CHECK(h.psi_full_avg10 <= h.psi_some_avg10 + 1e-9);

  switch (p.cgroup) {
    case cgroup_mode::v2: {
      const std::string dir = real_cgroup_dir(cgroup_mode::v2);
      REQUIRE_FALSE(dir.empty());
      CHECK(fs::exists(dir + "/memory.current"));
      break;
    }
    case cgroup_mode::v1: {
      // v1 is used only when v2 has no memory controller for this process.
      const std::string v2 = real_cgroup_dir(cgroup_mode::v2);
      CHECK((v2.empty() || !fs::exists(v2 + "/memory.current")));
      const std::string dir = real_cgroup_dir(cgroup_mode::v1);
      REQUIRE_FALSE(dir.empty());
      CHECK(fs::exists(dir + "/memory.usage_in_bytes"));
      CHECK(p.read(host_source::cgroup_usage));
      CHECK(p.read(host_source::cgroup_limit));
      CHECK(h.cgroup_high_bytes == 0);  // v1 has no memory.high
      break;
    }
    case cgroup_mode::none:
      CHECK(p.cgroup_limit_bytes == 0);
      break;
  }
  if (p.cgroup_limit_bytes != 0) {
    CHECK(!p.limit_cgroup_path().empty());
    CHECK(h.total_bytes <= p.cgroup_limit_bytes);
    CHECK(p.cgroup_working_set_bytes <= h.cgroup_current_bytes);
  } else {
    CHECK(p.limit_cgroup_path().empty());
    CHECK(h.total_bytes == p.meminfo_total_bytes);
  }

  // A second sample of the same machine agrees on where it is.
  const host_sample again = s.sample();
  CHECK(again.provenance.cgroup == p.cgroup);
  CHECK(again.provenance.limit_cgroup_path() == p.limit_cgroup_path());
  CHECK(again.total_bytes == h.total_bytes);
}

// Issue 14, item 1: the real sampler's total= readings, through a watcher on a fake clock polling every
// 100 ms (its rate at WATCH or worse). One interval's stall rate shows a stall at once (TIGHT); CRITICAL
// and psi_stall rejections need it to hold over the policy's window (3 s by default, at least 2 s).
namespace {

struct psi_run {
  temp_tree tree{"v2_unlimited"};
  fs::path psi_file = tree / "proc/pressure/memory";
  pnmem::fake_clock clock;
  std::uint64_t full_us = 0;
  std::uint64_t some_us = 0;
  pnmem::watcher<linux_sampler, pnmem::fake_clock> w;

  psi_run() : w(make_sampler(), pnmem::watcher_options{}, clock) {
    write_text(psi_file, psi_text(some_us, full_us));
    w.poll_now();
  }

  linux_sampler make_sampler() {
    linux_sampler_options o;
    o.root = tree.root.string();
    o.psi_triggers.clear();
    o.monotonic_ns = [c = clock] { return c.now().time_since_epoch().count(); };
    return linux_sampler(std::move(o));
  }

  // 100 ms pass with `stalled_ms` of them fully stalled (the kernel counts "full" inside "some").
  pnmem::mem_state step(std::uint64_t stalled_ms) {
    clock.advance(std::chrono::milliseconds(100));
    full_us += stalled_ms * 1000;
    some_us += stalled_ms * 1000;
    write_text(psi_file, psi_text(some_us, full_us));
    w.poll_now();
    return w.read();
  }
};

pnmem::admit_reason live_reason(const pnmem::mem_state& s) {
  return pnmem::admit_request({.n_prompt = 100, .gpu_resident = true}, s).reason;
}

}  // namespace

TEST_CASE("a 300 ms burst of 100 % full stall is TIGHT at most and rejects nothing") {
  psi_run r;
  for (int i = 0; i < 50; ++i) CHECK(r.step(0).level == pnmem::mem_level::ok);  // 5 s of quiet history
  bool tight_seen = false;
  for (int i = 0; i < 3; ++i) {
    const pnmem::mem_state s = r.step(100);
    CAPTURE(i);
    CHECK(s.host_psi_full_rate == doctest::Approx(100.0));  // the fast signal sees it ...
    CHECK(s.level <= pnmem::mem_level::tight);               // ... and raises TIGHT at once, no more
    tight_seen = tight_seen || s.level == pnmem::mem_level::tight;
    CHECK(live_reason(s) != pnmem::admit_reason::psi_stall);
  }
  CHECK(tight_seen);
  for (int i = 0; i < 40; ++i) {  // and while the window still holds the burst
    const pnmem::mem_state s = r.step(0);
    CAPTURE(i);
    CHECK(s.level <= pnmem::mem_level::tight);
    CHECK(s.host_psi_full_sustained < 15.0);
    CHECK(live_reason(s) != pnmem::admit_reason::psi_stall);
  }
}

TEST_CASE("3 s of 30 % full stall is CRITICAL, and rejects with psi_stall, by one poll after the 2 s mark") {
  psi_run r;
  for (int i = 0; i < 50; ++i) r.step(0);
  int critical_at = -1;  // polls since the stall began
  for (int i = 1; i <= 30; ++i) {
    const pnmem::mem_state s = r.step(30);
    if (s.level == pnmem::mem_level::critical && critical_at < 0) {
      critical_at = i;
      CHECK(live_reason(s) == pnmem::admit_reason::psi_stall);
    }
    if (critical_at < 0) CHECK(live_reason(s) != pnmem::admit_reason::psi_stall);
  }
  REQUIRE(critical_at > 0);
  CHECK(critical_at <= 21);  // 2 s = 20 polls, plus one
  CHECK(r.w.read().level == pnmem::mem_level::critical);
}

TEST_CASE("after start, the window never raises the level again on a stall that has ended") {
  // Issue 28 item 2: the window's rate is unknown for its first 3 s; a stall in those seconds that has
  // ended showed up, once the history covered the window, as a level raised with no new stall (OK ->
  // TIGHT at the 3 s mark, held while the stall stayed in the window). The window confirms a stall going
  // on now (CRITICAL, psi_stall); it does not raise the level on its own.
  psi_run r;                                                   // the watcher's first sample: no history
  for (int i = 0; i < 3; ++i) CHECK(r.step(100).level == pnmem::mem_level::tight);  // 300 ms stalled
  bool window_held_it = false;
  for (int i = 0; i < 60; ++i) {                               // then 6 s without a stall
    const pnmem::mem_state s = r.step(0);
    CAPTURE(i);
    CHECK(s.level == pnmem::mem_level::ok);
    window_held_it = window_held_it || s.host_psi_full_sustained > 0.0;
  }
  CHECK(window_held_it);  // the window did cover the old stall (from the 3 s mark): it raised nothing
  // A new stall is seen at once, and one that holds is still confirmed over the window.
  CHECK(r.step(30).level == pnmem::mem_level::tight);
  bool critical = false;
  for (int i = 0; i < 40 && !critical; ++i) critical = r.step(30).level == pnmem::mem_level::critical;
  CHECK(critical);
}

TEST_CASE("the sustained rate is unknown (0) until the history covers the window, and a PSI gap restarts it") {
  psi_run r;
  // From the first sample, all stall: the window has not been covered yet for 3 s.
  for (int i = 1; i < 30; ++i) {
    const pnmem::mem_state s = r.step(100);
    CAPTURE(i);
    CHECK(s.host_psi_full_sustained == 0.0);
    CHECK(s.level == pnmem::mem_level::tight);
  }
  CHECK(r.step(100).host_psi_full_sustained == doctest::Approx(100.0));  // 3 s of history: confirmed
  CHECK(r.w.read().level == pnmem::mem_level::critical);
  fs::remove(r.psi_file);  // PSI unreadable for a sample: no counter, the history starts over
  r.clock.advance(std::chrono::milliseconds(100));
  r.w.poll_now();
  CHECK(r.w.read().host_psi_full_sustained == 0.0);
  CHECK(r.step(100).host_psi_full_sustained == 0.0);
}

// --- The PSI source (PN_PSI_SOURCE) --------------------------------------------------------------

namespace {

// A v2 container (fixture v2_nested) whose host PSI shows another tenant's 30 % full stall.
struct psi_source_tree {
  temp_tree tree{"v2_nested"};
  fs::path host_psi = tree / "proc/pressure/memory";
  fs::path cgroup_psi = tree / "sys/fs/cgroup/kubepods.slice/pod1.slice/ctr.scope/memory.pressure";
  monotonic_clock clock;
  std::vector<std::string> notes;

  psi_source_tree() {
    write_text(host_psi,
               "some avg10=40.00 avg60=10.00 avg300=2.00 total=90000000\n"
               "full avg10=30.00 avg60=8.00 avg300=1.00 total=50000000\n");
    write_text(cgroup_psi,
               "some avg10=1.00 avg60=0.50 avg300=0.10 total=1000\n"
               "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
  }
  linux_sampler sampler(pnmem::psi_source source) {
    linux_sampler_options o;
    o.root = tree.root.string();
    o.psi_source = source;
    o.monotonic_ns = [this] { return clock.now_ns; };
    o.log = [this](std::string_view line) { notes.emplace_back(line); };
    return linux_sampler(std::move(o));
  }
};

}  // namespace

TEST_CASE("PSI source host: the whole box's stalls (the seed's)") {
  psi_source_tree t;
  linux_sampler s = t.sampler(pnmem::psi_source::host);
  const host_sample h = s.sample();
  CHECK(h.psi_full_avg10 == doctest::Approx(30.0));
  CHECK(h.provenance.read(host_source::psi));
  CHECK_FALSE(h.provenance.read(host_source::cgroup_pressure));
  CHECK(level_of(h) == pnmem::mem_level::critical);  // another tenant's stall
  CHECK(t.notes.empty());
}

TEST_CASE("PSI source cgroup: the container's own memory.pressure, and the host's (said once) where it has none") {
  psi_source_tree t;
  linux_sampler s = t.sampler(pnmem::psi_source::cgroup);
  host_sample h = s.sample();
  CHECK(h.psi_some_avg10 == doctest::Approx(1.0));
  CHECK(h.psi_full_avg10 == 0.0);
  CHECK(h.provenance.read(host_source::cgroup_pressure));
  CHECK_FALSE(h.provenance.read(host_source::psi));
  CHECK(h.provenance.psi == psi_mode::poll);
  CHECK(level_of(h) == pnmem::mem_level::watch);  // its own "some" only; the host's 30 % full stall is not its
  CHECK(t.notes.empty());

  // The rate and the counter are the cgroup's.
  t.clock.now_ns += 1'000'000'000;
  write_text(t.cgroup_psi, psi_text(201'000, 100'000));
  h = s.sample();
  CHECK(h.psi_some_rate == doctest::Approx(20.0));
  CHECK(h.psi_full_rate == doctest::Approx(10.0));
  CHECK(h.psi_full_total_known);
  CHECK(h.psi_full_total_us == 100'000);

  // The file goes (a kernel without PSI in cgroups): the host's, one line saying why, and the rate
  // and the counter start over (no rate spans two files).
  fs::remove(t.cgroup_psi);
  t.clock.now_ns += 1'000'000'000;
  h = s.sample();
  CHECK(h.psi_full_avg10 == doctest::Approx(30.0));
  CHECK(h.provenance.read(host_source::psi));
  CHECK_FALSE(h.provenance.read(host_source::cgroup_pressure));
  CHECK(h.psi_some_rate == 0.0);
  CHECK_FALSE(h.psi_full_total_known);
  REQUIRE(t.notes.size() == 1);
  CHECK(t.notes[0].find("PSI source cgroup: ") == 0);
  CHECK(t.notes[0].find("ctr.scope/memory.pressure does not exist") != std::string::npos);
  CHECK(t.notes[0].find("reading /proc/pressure/memory") != std::string::npos);
  t.clock.now_ns += 1'000'000'000;
  write_text(t.host_psi, psi_text(90'500'000, 50'000'000));
  h = s.sample();  // still the host's: no second line, the rate runs again
  CHECK(t.notes.size() == 1);
  CHECK(h.psi_some_rate > 0.0);
  CHECK(h.psi_full_total_known);

  // It comes back: the cgroup's again, said once.
  write_text(t.cgroup_psi, psi_text(300'000, 100'000));
  t.clock.now_ns += 1'000'000'000;
  h = s.sample();
  CHECK(h.provenance.read(host_source::cgroup_pressure));
  CHECK_FALSE(h.psi_full_total_known);
  REQUIRE(t.notes.size() == 2);
  CHECK(t.notes[1].find("reading ") != std::string::npos);
  CHECK(t.notes[1].find("again") != std::string::npos);
}

TEST_CASE("PSI source cgroup under cgroup v1: the host's, with one line saying why") {
  temp_tree tree("v1_limit");
  std::vector<std::string> notes;
  linux_sampler_options o;
  o.root = tree.root.string();
  o.psi_source = pnmem::psi_source::cgroup;
  o.log = [&notes](std::string_view line) { notes.emplace_back(line); };
  linux_sampler s{std::move(o)};
  const host_sample h = s.sample();
  CHECK(h.provenance.read(host_source::psi));
  (void)s.sample();
  REQUIRE(notes.size() == 1);
  CHECK(notes[0] ==
        "PSI source cgroup: the memory cgroup is v1 (no memory.pressure); reading /proc/pressure/memory (the whole "
        "box's stalls) instead");
}

TEST_CASE("PSI source off: no PSI is read, no trigger armed; the level goes by bytes alone") {
  psi_source_tree t;
  linux_sampler s = t.sampler(pnmem::psi_source::off);
  const host_sample h = s.sample();
  CHECK(h.psi_some_avg10 == 0.0);
  CHECK(h.psi_full_avg10 == 0.0);
  CHECK_FALSE(h.psi_full_total_known);
  CHECK_FALSE(h.provenance.read(host_source::psi));
  CHECK_FALSE(h.provenance.read(host_source::cgroup_pressure));
  CHECK(h.provenance.psi == psi_mode::none);
  CHECK(s.trigger().armed().empty());
  pnmem::mem_state st;
  pnmem::assign_host(st, h);
  CHECK(pnmem::derive_level(st) == pnmem::host_level(st));  // the host's 30 % full stall is not read
  CHECK(s.wait_for(std::chrono::milliseconds(1)) == pnmem::wake::timeout);
}

TEST_CASE("linux_sampler_options{} takes PN_PSI_SOURCE from the environment") {
  ::setenv("PN_PSI_SOURCE", "cgroup", 1);
  pnmem::detail::reset_process_env_for_testing();
  CHECK(linux_sampler_options{}.psi_source == pnmem::psi_source::cgroup);
  ::setenv("PN_PSI_SOURCE", "off", 1);
  pnmem::detail::reset_process_env_for_testing();
  CHECK(linux_sampler_options{}.psi_source == pnmem::psi_source::off);
  ::unsetenv("PN_PSI_SOURCE");
  pnmem::detail::reset_process_env_for_testing();
  CHECK(linux_sampler_options{}.psi_source == pnmem::psi_source::host);
}

// Issue 28 item 2: PSI is box-wide on a cgroup v1 box (and on the host's /proc/pressure anywhere): a
// neighbour's stall raises the level to TIGHT, and the ladder halves slots and the window for it, but
// its evict rung (4b, emptying the engine's KV) follows the memory levels (host bytes, dies, the OS):
// pressure this engine's memory did not cause does not make it drop its cache. PN_EVICT_ON_PSI=1
// (policy.evict_on_psi) brings back the seed's rule.
TEST_CASE("a box-wide PSI blip with ample bytes: TIGHT, slots halved, but no KV eviction by default") {
  psi_run r;
  const pnmem::mem_state calm = r.w.read();
  REQUIRE(pnmem::memory_level(calm) == pnmem::mem_level::ok);  // v2_unlimited: bytes to spare
  const pnmem::mem_state s = r.step(30);                        // 30 ms of 100 fully stalled
  REQUIRE(s.level == pnmem::mem_level::tight);
  CHECK(pnmem::explain_level(s).psi_level == pnmem::mem_level::tight);
  CHECK(pnmem::memory_level(s) == pnmem::mem_level::ok);
  const pnmem::ladder_config cfg{8, 16384, false};
  const pnmem::ladder_plan plan = pnmem::ladder_plan_from_state(s, cfg);
  CHECK(plan.level == pnmem::mem_level::tight);
  CHECK(plan.max_slots == 4);
  CHECK(plan.prefill_window == 8192);
  CHECK(plan.force_kv_q4);
  CHECK_FALSE(plan.kv_evict);
  CHECK(std::string(plan.note).find("no KV eviction") != std::string::npos);
  // Configured otherwise: the seed's rule, eviction at TIGHT whatever raised it.
  pnmem::policy seed = pnmem::default_policy;
  seed.evict_on_psi = true;
  CHECK(pnmem::ladder_plan_from_state(s, cfg, seed).kv_evict);
  // The level alone cannot tell (pnmem_plan_ladder, `pnmem plan`): the seed's rule.
  CHECK(pnmem::ladder_plan_for(s.level, cfg).kv_evict);
}
