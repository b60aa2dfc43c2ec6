// `pnmem sample` and `pnmem watch` over the Linux fixture trees: the JSON must be
// exactly what the sampler itself reads, with the mem_state field names.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include "../exposition_check.hpp"
#include "pnmem/level.hpp"
#include "pnmem/clock_ns.hpp"
#include "pnmem/engine/host_ledger.hpp"
#include "pnmem/linux/box_ledger.hpp"
#include "pnmem/linux/linux_sampler.hpp"
#include "pnmem/watcher.hpp"
#include "cli_support.hpp"
#include "temp_dir.hpp"

using nlohmann::json;

namespace {

using pnmem::test::fixture;
using pnmem::test::run;

void check_state_matches_sampler(const json& j, const std::string& root) {
  pnmem::linux_sampler_options o;
  o.root = root;
  pnmem::linux_sampler sampler{o};
  const pnmem::host_sample h = sampler.sample();
  INFO("json: ", j.dump());
  CHECK(j.at("host_total_bytes") == h.total_bytes);
  CHECK(j.at("host_avail_bytes") == h.avail_bytes);
  CHECK(j.at("host_psi_some_avg10") == h.psi_some_avg10);
  CHECK(j.at("host_psi_full_avg10") == h.psi_full_avg10);
  CHECK(j.at("cgroup_current_bytes") == h.cgroup_current_bytes);
  CHECK(j.at("cgroup_high_bytes") == h.cgroup_high_bytes);
  CHECK(j.at("cgroup_max_bytes") == h.cgroup_max_bytes);
  CHECK(j.at("n_dies") == 0);
  CHECK(j.at("per_die_free").is_array());
  pnmem::mem_state s;
  pnmem::assign_host(s, h);
  // The library's level, except where the host was not read: never "ok" then (issue 39 item 3).
  CHECK(j.at("level") == (h.total_bytes == 0 ? std::string("unknown") : std::string(pnmem::to_string(pnmem::derive_level(s)))));
  CHECK(j.at("sampled") == (h.total_bytes != 0));
  CHECK(j.at("host_reserve_bytes") == pnmem::host_reserve_bytes(s));  // a container's where the limit is the total
  const json& p = j.at("provenance");
  CHECK(p.at("cgroup_mode") == std::string(pnmem::to_string(h.provenance.cgroup)));
  CHECK(p.at("psi_mode") == std::string(pnmem::to_string(h.provenance.psi)));
  CHECK(p.at("cgroup_limit_bytes") == h.provenance.cgroup_limit_bytes);
  CHECK(p.at("cgroup_working_set_bytes") == h.provenance.cgroup_working_set_bytes);
  CHECK(p.at("meminfo_total_bytes") == h.provenance.meminfo_total_bytes);
  if (h.provenance.limit_cgroup_path().empty()) {
    CHECK(p.at("limit_cgroup").is_null());
  } else {
    CHECK(p.at("limit_cgroup") == std::string(h.provenance.limit_cgroup_path()));
  }
  CHECK(p.at("sources_read").is_array());
  CHECK(p.at("sources_failed").is_array());
}

}  // namespace

TEST_CASE("pnmem sample --root: every fixture, JSON equal to the sampler's own reading") {
  for (const char* name : {"v1_limit", "v2_nested", "v2_unlimited", "no_cgroup", "no_psi", "truncated", "garbage",
                           "garbage_self_cgroup", "container_v1_subtree", "container_v2_subtree"}) {
    CAPTURE(name);
    const auto r = run({"--json", "sample", "--root", fixture(name)});
    // A tree whose meminfo cannot be read answers too, and exits 1 with a warning: nothing read is no "ok".
    const bool unread = std::string(name) == "truncated" || std::string(name) == "garbage";
    REQUIRE(r.exit_code == (unread ? 1 : 0));
    CHECK(r.err.empty() == !unread);
    const json j = json::parse(r.out, nullptr, false);
    REQUIRE(j.is_object());
    check_state_matches_sampler(j, fixture(name));
  }
}

TEST_CASE("pnmem sample: the v1 container's limit, in text too") {
  const auto r = run({"sample", "--root", fixture("v1_limit")});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("cgroup: v1, limit 2.00 GiB") != std::string::npos);
  CHECK(r.out.find("level: ") == 0);
}

TEST_CASE("pnmem sample on a garbage tree says what failed and is not critical") {
  const auto r = run({"--json", "sample", "--root", fixture("garbage")});
  REQUIRE(r.exit_code == 1);
  const json j = json::parse(r.out);
  CHECK(j.at("level") == "unknown");
  CHECK(j.at("sampled") == false);
  CHECK_FALSE(j.at("provenance").at("sources_failed").empty());
  CHECK(r.err == "pnmem: warning: nothing sampled: meminfo unreadable under --root " + fixture("garbage") + " (" +
                     fixture("garbage") + "/proc/meminfo): this box's level is unknown, and an engine's admissions "
                     "here would fail open\n");
}

TEST_CASE("nothing read never reads as ok: sample, probe, metrics and watch on a root without /proc (issue 39 item 3)") {
  // An empty tree, and the directory above the fixtures (a --root one level off): no meminfo under either.
  const pnmem::test::temp_dir empty;
  for (const std::string& root : {empty.path("."), fixture("..")}) {
    CAPTURE(root);
    const auto sample = run({"sample", "--root", root});
    CHECK(sample.exit_code == 1);
    CHECK(sample.out.rfind("level: unknown (not sampled: meminfo not found; admissions fail open)\n", 0) == 0);
    CHECK(sample.out.find("host: not sampled (meminfo not found)\n") != std::string::npos);
    CHECK(sample.out.find(": ok") == std::string::npos);  // no part of what was not read says ok
    CHECK(sample.out.find("psi: not read (") != std::string::npos);
    CHECK(sample.err.find("pnmem: warning: nothing sampled: meminfo not found under --root " + root) == 0);
    const json j = json::parse(run({"--json", "sample", "--root", root}).out, nullptr, false);
    REQUIRE(j.is_object());
    CHECK(j.at("level") == "unknown");
    CHECK(j.at("sampled") == false);
    const auto probe = run({"probe", "--root", root});
    CHECK(probe.exit_code == 1);
    CHECK(probe.out == "not ready: level unknown (not sampled: meminfo not found, admissions fail open)\n");
    const auto metrics = run({"metrics", "--root", root});
    CHECK(metrics.exit_code == 1);
    CHECK(metrics.out.find("pnmem_source_read{source=\"meminfo\"} 0\n") != std::string::npos);
    CHECK(metrics.err.find("pnmem: warning: nothing sampled: meminfo not found") == 0);
    const auto watch = run({"watch", "--root", root, "--count", "2", "--interval", "20"});
    CHECK(watch.exit_code == 1);
    CHECK(watch.out.find(" unknown  avail unknown ") != std::string::npos);
    CHECK(watch.out.find(" ok ") == std::string::npos);
    CHECK(watch.err.find("pnmem: warning: nothing sampled: meminfo not found") == 0);
  }
}

TEST_CASE("pnmem watch --json --count N: N sample lines, level changes as they happen, then exit 0") {
  const auto r = run(
      {"--json", "watch", "--root", fixture("v2_nested"), "--interval", "5", "--count", "3", "--host-reserve", "1GiB"});
  REQUIRE(r.exit_code == 0);
  auto lines = pnmem::test::lines_of(r.out);
  // v2_nested (1 GiB available of its 3 GiB limit) is CRITICAL under a 1 GiB reserve (its own, 768 MiB, makes
  // it WATCH): the first sample is a change from the initial OK.
  REQUIRE(lines.size() == 4);
  const json change = json::parse(lines[0], nullptr, false);
  REQUIRE(change.is_object());
  CHECK(change.at("event") == "level_change");
  CHECK(change.at("from") == "ok");
  CHECK(change.at("to") == "critical");
  CHECK(change.at("state").at("level") == "critical");
  lines.erase(lines.begin());
  std::uint64_t last_seq = 0;
  for (const auto& line : lines) {
    const json j = json::parse(line, nullptr, false);
    REQUIRE(j.is_object());
    CHECK(j.at("event") == "sample");
    CHECK(j.at("state").at("host_reserve_bytes") == pnmem::GiB);
    CHECK(j.at("state").at("level") == "critical");
    const auto seq = j.at("state").at("seq").get<std::uint64_t>();
    CHECK(seq > last_seq);
    last_seq = seq;
  }
}

TEST_CASE("pnmem watch text mode prints a line per sample") {
  const auto r = run({"watch", "--root", fixture("v2_unlimited"), "--interval", "5", "--count", "2"});
  REQUIRE(r.exit_code == 0);
  const auto lines = pnmem::test::lines_of(r.out);
  REQUIRE(lines.size() == 2);  // v2_unlimited stays OK: no level-change line
  CHECK(lines[0].find("avail") != std::string::npos);
  CHECK(lines[0].find("level") == std::string::npos);
}

TEST_CASE("output that cannot be written (/dev/full) is an error with its reason, and watch stops") {
  if (::access("/dev/full", W_OK) != 0) {
    // Run alone as its own meson test (cli_dev_full): a SKIP with why, never a pass.
    std::printf("SKIP: no writable /dev/full here\n");
    std::fflush(stdout);
    std::_Exit(77);
  }
  // A shell sends pnmem's stdout to /dev/full: every write fails with ENOSPC.
  const std::string pnmem = pnmem::test::env_or_fail("PNMEM_EXE");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"sample", "--root", fixture("v2_unlimited")},
        std::vector<std::string>{"metrics", "--root", fixture("v2_unlimited")},
        std::vector<std::string>{"--version"},
        // Until stopped: without the check it writes into the void for ever (the test would time out).
        std::vector<std::string>{"watch", "--root", fixture("v2_unlimited"), "--interval", "5"},
        std::vector<std::string>{"watch", "--json", "--root", fixture("v2_unlimited"), "--interval", "5"}}) {
    CAPTURE(args[0]);
    std::vector<std::string> sh{"-c", "exec \"$0\" \"$@\" >/dev/full", pnmem};
    sh.insert(sh.end(), args.begin(), args.end());
    const auto r = pnmem::test::run_process("/bin/sh", sh);
    CHECK(r.exit_code == 1);
    CHECK(r.err == "pnmem: error: writing to standard output failed: No space left on device\n");
  }
}

TEST_CASE("bad sample/watch arguments exit 2 with one line") {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"sample", "--root", "/nonexistent/pnmem"},
        std::vector<std::string>{"watch", "--interval", "0"},
        std::vector<std::string>{"watch", "--interval", "abc"},
        std::vector<std::string>{"watch", "--count", "-1"},
        std::vector<std::string>{"watch", "--dwell", "1e3"}}) {
    CAPTURE(args[0]);
    CAPTURE(args[2]);
    const auto r = run(args);
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    CHECK(pnmem::test::lines_of(r.err).size() == 1);
  }
}

TEST_CASE("watch's --interval, --pressure-interval and --dwell take exactly their PN_* variable's range") {
  // Before (issue 27 item 6): --dwell 3600001 and --interval 60001 ran, PN_* refused them, and
  // --interval 4294967295 said "out of range" without the range.
  struct row { std::vector<std::string> args; std::string line; };
  const std::vector<row> rows = {
      {{"watch", "--interval", "4294967295"}, R"(pnmem: error: --interval: "4294967295": out of range (1 to 60000))"},
      {{"watch", "--interval", "60001"}, R"(pnmem: error: --interval: "60001": out of range (1 to 60000))"},
      {{"watch", "--pressure-interval", "0"},
       R"(pnmem: error: --pressure-interval: "0": below 1 (0 would poll without pause))"},
      {{"watch", "--dwell", "3600001"}, R"(pnmem: error: --dwell: "3600001": out of range (0 to 3600000))"},
  };
  for (const auto& r : rows) {
    CAPTURE(r.line);
    const auto p = run(r.args);
    CHECK(p.exit_code == 2);
    CHECK(p.out.empty());
    CHECK(p.err == r.line + "\n");
  }
  // The largest each allows still runs (one line and out).
  const auto edge = run({"--json", "watch", "--root", fixture("v1_limit"), "--count", "1", "--interval",
                         "60000", "--pressure-interval", "60000", "--dwell", "3600000"});
  CHECK(edge.exit_code == 0);
  CHECK(edge.err.empty());
  CHECK(edge.out.find("\"seq\"") != std::string::npos);
  const auto help = run({"watch", "--help"});
  CHECK(help.out.find("1 to 60000 (overrides PN_MEMWATCH_POLL_MS") != std::string::npos);
  CHECK(help.out.find("0 to 3600000 (overrides PN_STEP_DOWN_DWELL_MS") != std::string::npos);
}

// --- pnmem metrics / pnmem probe ---------------------------------------------------

TEST_CASE("pnmem metrics --root: every fixture gives valid exposition text with the sampler's numbers") {
  for (const char* name : {"v1_limit", "v2_nested", "v2_unlimited", "no_cgroup", "no_psi", "truncated", "garbage",
                           "garbage_self_cgroup", "container_v1_subtree", "container_v2_subtree"}) {
    CAPTURE(name);
    const auto r = run({"metrics", "--root", fixture(name)});
    // The text either way; a tree whose meminfo cannot be read exits 1 with a warning.
    const bool unread = std::string(name) == "truncated" || std::string(name) == "garbage";
    REQUIRE(r.exit_code == (unread ? 1 : 0));
    CHECK(r.err.empty() == !unread);
    const auto ex = pnmem::test::check_exposition(r.out);
    std::string errors;
    for (const auto& e : ex.errors) errors += e + "\n";
    INFO("output:\n", r.out, "\nerrors:\n", errors);
    CHECK(ex.errors.empty());

    pnmem::linux_sampler_options o;
    o.root = fixture(name);
    pnmem::linux_sampler sampler{o};
    const pnmem::host_sample h = sampler.sample();
    pnmem::mem_state s;
    pnmem::assign_host(s, h);
    CHECK(ex.value("pnmem_level") == static_cast<double>(pnmem::derive_level(s)));
    CHECK(ex.value("pnmem_host_total_bytes") == static_cast<double>(h.total_bytes));
    CHECK(ex.value("pnmem_host_avail_bytes") == static_cast<double>(h.avail_bytes));
    CHECK(ex.value("pnmem_psi_avg10_percent", {{"kind", "some"}}) == h.psi_some_avg10);
    CHECK(ex.value("pnmem_cgroup_limit_bytes") == static_cast<double>(h.provenance.cgroup_limit_bytes));
    CHECK(ex.value("pnmem_provenance_info", {{"cgroup_mode", std::string(pnmem::to_string(h.provenance.cgroup))},
                                             {"psi_mode", std::string(pnmem::to_string(h.provenance.psi))},
                                             {"limit_cgroup", std::string(h.provenance.limit_cgroup_path())}}) == 1.0);
    CHECK(ex.value("pnmem_source_read", {{"source", "meminfo"}}) ==
          (h.provenance.read(pnmem::host_source::meminfo) ? 1.0 : 0.0));
    CHECK(ex.count("pnmem_admissions_total") == 0);  // no engine, no counters
  }
}

TEST_CASE("pnmem --json metrics: the exposition inside an object") {
  const auto r = run({"--json", "metrics", "--root", fixture("v2_unlimited")});
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out, nullptr, false);
  REQUIRE(j.is_object());
  CHECK(j.at("content_type").get<std::string>().find("version=0.0.4") != std::string::npos);
  CHECK(pnmem::test::check_exposition(j.at("exposition").get<std::string>()).errors.empty());
}

TEST_CASE("pnmem probe: exit status follows the level against --max-level") {
  // v2_nested is CRITICAL under a 1 GiB reserve (WATCH under its own 768 MiB), v2_unlimited is OK.
  const std::string one_gib = "1GiB";
  auto r = run({"probe", "--root", fixture("v2_nested"), "--host-reserve", one_gib});
  CHECK(r.exit_code == 1);
  CHECK(r.err.empty());
  REQUIRE(pnmem::test::lines_of(r.out).size() == 1);
  CHECK(r.out.find("not ready: level critical > tight") == 0);
  CHECK(r.out.find("host critical") != std::string::npos);

  r = run({"probe", "--root", fixture("v2_unlimited")});
  CHECK(r.exit_code == 0);
  REQUIRE(pnmem::test::lines_of(r.out).size() == 1);
  CHECK(r.out.find("ready: level ok <= tight") == 0);

  CHECK(run({"probe", "--root", fixture("v2_nested"), "--host-reserve", one_gib, "--max-level", "critical"})
            .exit_code == 0);
  CHECK(run({"probe", "--root", fixture("v2_nested"), "--host-reserve", one_gib, "--max-level", "CRITICAL"})
            .exit_code == 0);
  CHECK(run({"probe", "--root", fixture("v2_unlimited"), "--max-level", "ok"}).exit_code == 0);
  CHECK(run({"probe", "--root", fixture("v2_nested"), "--host-reserve", one_gib, "--max-level", "watch"})
            .exit_code == 1);
  // Under its own reserve (the container rule: 768 MiB of a 3 GiB limit) it is WATCH: ready at tight.
  CHECK(run({"probe", "--root", fixture("v2_nested")}).exit_code == 0);
  CHECK(run({"probe", "--root", fixture("v2_nested"), "--max-level", "ok"}).exit_code == 1);

  r = run({"--json", "probe", "--root", fixture("v2_nested"), "--host-reserve", one_gib});
  CHECK(r.exit_code == 1);
  const json j = json::parse(r.out, nullptr, false);
  REQUIRE(j.is_object());
  CHECK(j.at("ready") == false);
  CHECK(j.at("level") == "critical");
  CHECK(j.at("max_level") == "tight");
}

TEST_CASE("pnmem probe: nothing readable is no all-clear: it says what failed, and that admissions fail open") {
  // An empty tree: no meminfo at all. Not ready (a pod whose pnmem sees nothing is not protected: the
  // operator must hear of it), and the line and the JSON say why nothing was judged.
  const pnmem::test::temp_dir empty;
  auto r = run({"probe", "--root", empty.path(".")});
  CHECK(r.exit_code == 1);
  CHECK(r.out == "not ready: level unknown (not sampled: meminfo not found, admissions fail open)\n");
  // A garbled meminfo, and a psi file that is garbage too.
  r = run({"probe", "--root", fixture("garbage")});
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("not sampled: meminfo unreadable, admissions fail open") != std::string::npos);
  CHECK(r.out.find("psi unreadable") != std::string::npos);
  r = run({"--json", "probe", "--root", empty.path(".")});
  const json j = json::parse(r.out, nullptr, false);
  REQUIRE(j.is_object());
  CHECK(j.at("sampled") == false);
  CHECK(j.at("unread") == json::array({"not sampled: meminfo not found, admissions fail open"}));
  // A tree that reads: nothing unread.
  r = run({"--json", "probe", "--root", fixture("v2_unlimited")});
  const json ok = json::parse(r.out, nullptr, false);
  REQUIRE(ok.is_object());
  CHECK(ok.at("sampled") == true);
  CHECK(ok.at("unread") == json::array());
}

TEST_CASE("pnmem probe: a bad --max-level or --root exits 2 with one line on stderr") {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"probe", "--root", fixture("v2_unlimited"), "--max-level", "bogus"},
        std::vector<std::string>{"probe", "--root", fixture("v2_unlimited"), "--max-level", ""},
        std::vector<std::string>{"probe", "--root", fixture("does_not_exist")},
        std::vector<std::string>{"probe", "--max-level"}}) {
    CAPTURE(args.back());
    const auto r = run(args);
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    REQUIRE(pnmem::test::lines_of(r.err).size() == 1);
    CHECK(r.err.find("pnmem: error: ") == 0);
  }
  const auto r = run({"probe", "--root", fixture("v2_unlimited"), "--max-level", "bogus"});
  CHECK(r.err.find("--max-level") != std::string::npos);
}

// --- the policy flags that change a level ------------------------------------------

TEST_CASE("pnmem sample takes the level's policy flags, as pnmem level does") {
  const std::string root = fixture("v2_unlimited");
  pnmem::linux_sampler_options o;
  o.root = root;
  pnmem::linux_sampler sampler{o};
  pnmem::mem_state s;
  pnmem::assign_host(s, sampler.sample());
  // A reserve as large as what is available: the box is CRITICAL under it.
  pnmem::policy p;
  p.host_reserve_min_bytes = s.host_avail_bytes;
  p.host_reserve_bp = 0;
  p.psi_full_reject_bp = 2000;
  const std::string reserve = std::to_string(s.host_avail_bytes);
  REQUIRE(pnmem::derive_level(s) != pnmem::derive_level(s, p));

  const auto r = run({"--json", "sample", "--root", root, "--host-reserve", reserve, "--psi-full-reject", "20"});
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  const json j = json::parse(r.out, nullptr, false);
  REQUIRE(j.is_object());
  CHECK(j.at("host_reserve_bytes") == s.host_avail_bytes);
  CHECK(j.at("level") == std::string(pnmem::to_string(pnmem::derive_level(s, p))));

  // The same flags on the other commands that report this box's level.
  CHECK(run({"probe", "--root", root, "--host-reserve", reserve}).exit_code == 1);
  CHECK(run({"probe", "--root", root}).exit_code == 0);
  const auto m = run({"metrics", "--root", root, "--host-reserve", reserve});
  REQUIRE(m.exit_code == 0);
  CHECK(pnmem::test::check_exposition(m.out).value("pnmem_level") ==
        static_cast<double>(pnmem::derive_level(s, p)));
  const auto w = run({"--json", "watch", "--root", root, "--interval", "5", "--count", "1", "--host-reserve",
                            reserve});
  REQUIRE(w.exit_code == 0);
  const auto lines = pnmem::test::lines_of(w.out);
  REQUIRE_FALSE(lines.empty());
  CHECK(json::parse(lines.back()).at("state").at("host_reserve_bytes") == s.host_avail_bytes);

  // A bad value is a usage error, as for pnmem level.
  const auto bad = run({"sample", "--root", root, "--host-reserve", "lots"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err == "pnmem: error: --host-reserve: \"lots\": not a number\n");
}

TEST_CASE("pnmem watch --help: the defaults are the watcher's own") {
  const pnmem::watcher_options o;
  const auto r = run({"watch", "--help"});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("(overrides PN_MEMWATCH_POLL_MS; default " + std::to_string(o.poll_interval.count()) + " ms)") !=
        std::string::npos);
  CHECK(r.out.find("(overrides PN_PRESSURE_POLL_MS; default " + std::to_string(o.pressure_poll_interval.count()) +
                   " ms)") != std::string::npos);
  CHECK(r.out.find("instead of " + pnmem::linux_sampler_options{}.root + " ") != std::string::npos);
}

TEST_CASE("pnmem sample in a 2 GiB container keeps the container's reserve, 512 MiB, as the library's levels do") {
  const auto r = run({"--json", "sample", "--root", fixture("v1_limit")});
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out, nullptr, false);
  REQUIRE(j.is_object());
  REQUIRE(j.at("host_total_bytes") == 2 * pnmem::GiB);
  REQUIRE(j.at("cgroup_max_bytes") == 2 * pnmem::GiB);
  CHECK(j.at("host_reserve_bytes") == 512 * pnmem::MiB);  // the seed's rule: 1 GiB
  CHECK(j.at("level") == "tight");  // PSI full > 0; with the seed's 1 GiB reserve and 1 GiB available: CRITICAL
  // The bytes alone (PSI off): 1 GiB available is 2 x the reserve: OK.
  const auto bytes = run({"--json", "sample", "--root", fixture("v1_limit")}, {{"PN_PSI_SOURCE", "off"}});
  REQUIRE(bytes.exit_code == 0);
  CHECK(json::parse(bytes.out).at("level") == "ok");
  const auto m = run({"metrics", "--root", fixture("v1_limit")});
  REQUIRE(m.exit_code == 0);
  CHECK(pnmem::test::check_exposition(m.out).value("pnmem_host_reserve_bytes") ==
        static_cast<double>(512 * pnmem::MiB));
}

TEST_CASE("the tool honours PN_PSI_SOURCE, the poll intervals and the dwell") {
  // The v2 fixture's host PSI has a "some" stall; off ignores it.
  const std::string root = fixture("v2_nested");
  const auto host = run({"--json", "sample", "--root", root});
  REQUIRE(host.exit_code == 0);
  REQUIRE(json::parse(host.out).at("host_psi_some_avg10").get<double>() > 0.0);
  const auto off = run({"--json", "sample", "--root", root}, {{"PN_PSI_SOURCE", "off"}});
  REQUIRE(off.exit_code == 0);
  CHECK(off.err.empty());
  const json j = json::parse(off.out);
  CHECK(j.at("host_psi_some_avg10") == 0.0);
  CHECK(j.at("provenance").at("psi_mode") == "none");
  // cgroup: the container has no memory.pressure in the fixture: the host's, and one line says why.
  const auto cg = run({"--json", "sample", "--root", root}, {{"PN_PSI_SOURCE", "cgroup"}});
  REQUIRE(cg.exit_code == 0);
  CHECK(json::parse(cg.out).at("host_psi_some_avg10") == json::parse(host.out).at("host_psi_some_avg10"));
  CHECK(cg.err.find("pnmem: PSI source cgroup: ") == 0);
  // A bad value: the tool's own warning, once, and the default.
  const auto bad = run({"--json", "sample", "--root", root}, {{"PN_PSI_SOURCE", "both"}});
  REQUIRE(bad.exit_code == 0);
  CHECK(bad.err == "pnmem: PN_PSI_SOURCE=\"both\": not a PSI source (use host, cgroup or off); keeping host\n");

  // watch: its defaults are the environment's.
  const auto help = run({"watch", "--help"},
                              {{"PN_MEMWATCH_POLL_MS", "700"}, {"PN_PRESSURE_POLL_MS", "70"}, {"PN_STEP_DOWN_DWELL_MS", "7000"}});
  REQUIRE(help.exit_code == 0);
  CHECK(help.out.find("(overrides PN_MEMWATCH_POLL_MS; default 700 ms)") != std::string::npos);
  CHECK(help.out.find("(overrides PN_PRESSURE_POLL_MS; default 70 ms)") != std::string::npos);
  CHECK(help.out.find("(overrides PN_STEP_DOWN_DWELL_MS; default 7000 ms)") != std::string::npos);
}

// --- pnmem ledger ---------------------------------------------------------------------------

TEST_CASE("pnmem ledger: the box ledger's holders and totals; a dead one is gone; a refused file exits 1 saying why") {
  const pnmem::test::temp_dir dir;
  const std::string file = dir.path("box.ledger");
  pnmem::linux_os::box_options o;
  o.ledger = file;
  pnmem::linux_os::box_join j = pnmem::linux_os::join_box(o);
  REQUIRE(j.link != nullptr);
  // This test is a holder: 3 GiB reserved on a watcher that says 64 GiB are free.
  struct one_snapshot {
    pnmem::mem_state s;
    bool running() const { return true; }
    pnmem::mem_state read() const { return s; }
  } w;
  w.s.host_total_bytes = 64 * pnmem::GiB;
  w.s.host_avail_bytes = 60 * pnmem::GiB;
  w.s.host_read_ns = pnmem::steady_now_ns();
  w.s = pnmem::with_derived_level(w.s);
  {
    pnmem::host_ledger ledger{j.link};
    auto r = ledger.reserve_bytes(w, 3 * pnmem::GiB);
    REQUIRE(r.answer.status == pnmem::admit_status::admitted);
    const json v = json::parse(run({"--json", "ledger", "--ledger", file}).out, nullptr, false);
    REQUIRE(v.is_object());
    CHECK(v.at("path") == file);
    CHECK(v.at("processes") == 1);
    CHECK(v.at("reserved_bytes") == 3 * pnmem::GiB);
    REQUIRE(v.at("holders").size() == 1);
    CHECK(v.at("holders")[0].at("pid") == ::getpid());
    CHECK(v.at("holders")[0].at("reservations") == 1);
    const auto t = run({"ledger", "--ledger", file});
    CHECK(t.exit_code == 0);
    CHECK(t.out.find("ledger: " + file + " (" + file + "), 1 process\npending: 3.00 GiB (3221225472 B): 3.00 GiB reserved") == 0);
    CHECK(t.out.find("  " + std::to_string(::getpid()) + " ") != std::string::npos);
    // The same scope in `pnmem metrics` (PN_LEDGER names it).
    const auto m = run({"metrics"}, {{"PN_LEDGER", file}});
    CHECK(m.out.find("pnmem_ledger_processes{scope=\"" + file + "\"} 1\n") != std::string::npos);
    CHECK(m.out.find("pnmem_ledger_pending_bytes{scope=\"" + file + "\"} 3221225472\n") != std::string::npos);
    CHECK(m.out.find("pnmem_ledger_die_pending_bytes") == std::string::npos);  // no GPU named yet

    // A GPU named by its UUID, 2 GiB reserved on it: the dies table, its JSON, and its metrics by UUID.
    const std::string uuid = "GPU-11111111-2222-3333-4444-555555555555";
    w.s.n_dies = 1;
    w.s.per_die_budget_bytes[0] = 80 * pnmem::GiB;
    w.s.per_die_free_bytes[0] = 40 * pnmem::GiB;
    w.s.per_die_retiring_bytes[0] = 1 * pnmem::GiB;
    w.s.per_die_read_ns[0] = pnmem::steady_now_ns();
    w.s = pnmem::with_derived_level(w.s);
    pnmem::die_uuid id;
    REQUIRE(pnmem::parse_die_uuid(uuid, id));
    REQUIRE(ledger.name_die(0, id));
    auto d = ledger.reserve_die_bytes(w, 0, 2 * pnmem::GiB);
    REQUIRE(d.answer.status == pnmem::admit_status::admitted);
    const json dv = json::parse(run({"--json", "ledger", "--ledger", file}).out, nullptr, false);
    REQUIRE(dv.at("dies").size() == 1);
    CHECK(dv.at("dies")[0].at("gpu") == uuid);
    CHECK(dv.at("dies")[0].at("reserved_bytes") == 2 * pnmem::GiB);
    CHECK(dv.at("dies")[0].at("reservations") == 1);
    CHECK(dv.at("dies")[0].at("retiring_bytes") == 1 * pnmem::GiB);
    REQUIRE(dv.at("dies")[0].at("holders").size() == 1);
    CHECK(dv.at("dies")[0].at("holders")[0].at("pid") == ::getpid());
    const auto dt = run({"ledger", "--ledger", file});
    CHECK(dt.out.find("dies:\n") != std::string::npos);
    CHECK(dt.out.find("\n  " + uuid + "  2.00 GiB (1)") != std::string::npos);
    const auto dm = run({"metrics"}, {{"PN_LEDGER", file}});
    const std::string labels = "{scope=\"" + file + "\",gpu=\"" + uuid + "\"}";
    CHECK(dm.out.find("pnmem_ledger_die_pending_bytes" + labels + " 2147483648\n") != std::string::npos);
    CHECK(dm.out.find("pnmem_ledger_die_retiring_bytes" + labels + " 1073741824\n") != std::string::npos);
  }
  j.link.reset();  // the holder leaves: its slot is free, its bytes gone
  const json after = json::parse(run({"--json", "ledger", "--ledger", file}).out, nullptr, false);
  CHECK(after.at("processes") == 0);
  CHECK(after.at("reserved_bytes") == 0);
  // No file yet: no process has joined; exit 0. A file that is no ledger: exit 1, the line says why.
  const auto none = run({"ledger", "--ledger", dir.path("nobody.ledger")});
  CHECK(none.exit_code == 0);
  CHECK(none.out.find("no process has joined it yet") != std::string::npos);
  const std::string junk = dir.write("junk.ledger", "not a ledger");
  const auto open_to_all = run({"ledger", "--ledger", junk});  // written with the umask's 0644
  CHECK(open_to_all.exit_code == 1);
  CHECK(open_to_all.out.find("other users may open it (mode 0644)") != std::string::npos);
  REQUIRE(::chmod(junk.c_str(), 0600) == 0);
  const auto bad = run({"ledger", "--ledger", junk});
  CHECK(bad.exit_code == 1);
  CHECK(bad.out.find("its size is 12 bytes") != std::string::npos);
  CHECK(run({"ledger", "--ledger", "no spaces"}).exit_code == 2);
  CHECK(run({"ledger"}, {{"PN_LEDGER", "off"}}).out.find("ledger: off") == 0);
}
