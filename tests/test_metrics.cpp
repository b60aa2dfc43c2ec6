// Prometheus exposition of a snapshot and the engine counters: valid 0.0.4 text
// (tests/exposition_check.hpp) carrying the exact numbers.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>

#include "exposition_check.hpp"
#include "pnmem/engine/metrics.hpp"
#include "pnmem/level.hpp"
#include "pnmem/units.hpp"
#include "test_support.hpp"

using pnmem::test::check_exposition;

namespace {

std::string errors_of(const pnmem::test::exposition& ex) {
  std::string out;
  for (const auto& e : ex.errors) out += e + "\n";
  return out;
}

pnmem::test::exposition checked(const std::string& text) {
  const auto ex = check_exposition(text);
  INFO("text:\n", text, "\nerrors:\n", errors_of(ex));
  CHECK(ex.errors.empty());
  return ex;
}

pnmem::admit_result result(pnmem::verdict v, pnmem::admit_reason r) {
  pnmem::admit_result a;
  a.verdict = v;
  a.reason = r;
  return a;
}

pnmem::mem_state sample_state() {
  using pnmem::GiB;
  pnmem::mem_state s = pnmem::test::host_state(64 * GiB, 20 * GiB, 2.5, 0.25);
  s = pnmem::test::add_die(s, 3 * GiB, 70 * GiB, 60 * GiB);
  s = pnmem::test::add_die(s, 40 * GiB, 70 * GiB, 10 * GiB);
  s.per_die_retiring_bytes[1] = 512 * pnmem::MiB;
  s.host_psi_some_rate = 7.125;
  s.host_psi_full_rate = 0.1;
  s.host_psi_full_sustained = 0.0625;
  s.cgroup_current_bytes = 30 * GiB;
  s.seq = 42;
  s.provenance.cgroup = pnmem::cgroup_mode::v2;
  s.provenance.psi = pnmem::psi_mode::trigger;
  s.provenance.cgroup_limit_bytes = 48 * GiB;
  s.provenance.cgroup_working_set_bytes = 28 * GiB;
  s.provenance.set_limit_cgroup_path("/kubepods/pod1");
  s.provenance.mark_read(pnmem::host_source::meminfo);
  s.provenance.mark_read(pnmem::host_source::psi);
  s.provenance.mark_failed(pnmem::host_source::cgroup_stat);
  return pnmem::with_derived_level(s);
}

}  // namespace

TEST_CASE("metrics: a hand-built snapshot, valid text with its exact numbers, no counters") {
  using pnmem::GiB;
  const pnmem::mem_state s = sample_state();
  REQUIRE(s.level == pnmem::mem_level::tight);  // die 0: 3 GiB free < 70/16 GiB
  const auto ex = checked(pnmem::prometheus_text(s, nullptr, pnmem::default_policy));

  CHECK(ex.value("pnmem_level") == 2.0);
  CHECK(ex.value("pnmem_raw_level") == 2.0);
  CHECK(ex.types.at("pnmem_level") == "gauge");
  CHECK(ex.value("pnmem_host_total_bytes") == static_cast<double>(64 * GiB));
  CHECK(ex.value("pnmem_host_avail_bytes") == static_cast<double>(20 * GiB));
  CHECK(ex.value("pnmem_host_reserve_bytes") ==
        static_cast<double>(pnmem::box_reserve_bytes(64 * GiB, pnmem::default_policy)));
  CHECK(ex.value("pnmem_psi_avg10_percent", {{"kind", "some"}}) == 2.5);
  CHECK(ex.value("pnmem_psi_avg10_percent", {{"kind", "full"}}) == 0.25);
  CHECK(ex.value("pnmem_psi_rate_percent", {{"kind", "some"}}) == 7.125);
  CHECK(ex.value("pnmem_psi_rate_percent", {{"kind", "full"}}) == 0.1);  // round-trips exactly
  CHECK(ex.value("pnmem_psi_full_window_percent") == 0.0625);
  CHECK(ex.types.at("pnmem_psi_full_window_percent") == "gauge");
  CHECK(ex.value("pnmem_cgroup_usage_bytes") == static_cast<double>(30 * GiB));
  CHECK(ex.value("pnmem_cgroup_limit_bytes") == static_cast<double>(48 * GiB));
  CHECK(ex.value("pnmem_cgroup_working_set_bytes") == static_cast<double>(28 * GiB));
  CHECK(ex.value("pnmem_die_free_bytes", {{"die", "0"}}) == static_cast<double>(3 * GiB));
  CHECK(ex.value("pnmem_die_free_bytes", {{"die", "1"}}) == static_cast<double>(40 * GiB));
  CHECK(ex.value("pnmem_die_budget_bytes", {{"die", "1"}}) == static_cast<double>(70 * GiB));
  CHECK(ex.value("pnmem_die_used_bytes", {{"die", "0"}}) == static_cast<double>(60 * GiB));
  CHECK(ex.value("pnmem_die_retiring_bytes", {{"die", "1"}}) == static_cast<double>(512 * pnmem::MiB));
  CHECK(ex.count("pnmem_die_free_bytes") == 2);
  CHECK(ex.value("pnmem_snapshot_seq") == 42.0);
  CHECK_FALSE(ex.value("pnmem_snapshot_age_seconds"));  // no sample time
  CHECK(ex.value("pnmem_provenance_info",
                 {{"cgroup_mode", "v2"}, {"psi_mode", "trigger"}, {"limit_cgroup", "/kubepods/pod1"}}) == 1.0);
  CHECK(ex.value("pnmem_source_read", {{"source", "meminfo"}}) == 1.0);
  CHECK(ex.value("pnmem_source_read", {{"source", "psi"}}) == 1.0);
  CHECK(ex.value("pnmem_source_read", {{"source", "cgroup_stat"}}) == 0.0);
  CHECK(ex.value("pnmem_source_failed", {{"source", "cgroup_stat"}}) == 1.0);
  CHECK(ex.value("pnmem_source_failed", {{"source", "meminfo"}}) == 0.0);
  for (const auto& entry : ex.types) {
    const std::string& family = entry.first;
    const std::string& type = entry.second;
    CAPTURE(family);
    CHECK(type == "gauge");  // no counters without engine_counters
  }
}

TEST_CASE("metrics: engine counters as _total counters, the possible admission outcomes always present") {
  pnmem::engine_counters c;
  using pnmem::admit_reason;
  using pnmem::verdict;
  for (int i = 0; i < 5; ++i) c.count(result(verdict::admit, admit_reason::fits));
  c.count(result(verdict::cap, admit_reason::window));
  c.count(result(verdict::cap, admit_reason::window));
  c.count(result(verdict::reject, admit_reason::psi_stall));
  c.count(result(verdict::admit, admit_reason::window));  // not an outcome admission gives: still shown
  c.fail_open = 3;
  c.count_transition(pnmem::mem_level::ok, pnmem::mem_level::critical);
  c.count_transition(pnmem::mem_level::critical, pnmem::mem_level::tight);
  c.count_transition(pnmem::mem_level::critical, pnmem::mem_level::tight);
  c.ladder_degradations[2] = 4;
  c.gate_acquired = 10;
  c.gate_waits = 6;
  c.gate_overloaded = 2;
  c.gate_timed_out = 1;
  c.gate_cancelled = 7;
  c.gate_queue_full = 8;

  const auto ex = checked(pnmem::prometheus_text(sample_state(), &c, pnmem::default_policy));
  const std::string adm = "pnmem_admissions_total";
  CHECK(ex.types.at(adm) == "counter");
  CHECK(ex.value(adm, {{"verdict", "admit"}, {"reason", "fits"}}) == 5.0);
  CHECK(ex.value(adm, {{"verdict", "cap"}, {"reason", "window"}}) == 2.0);
  CHECK(ex.value(adm, {{"verdict", "reject"}, {"reason", "psi_stall"}}) == 1.0);
  CHECK(ex.value(adm, {{"verdict", "admit"}, {"reason", "window"}}) == 1.0);
  CHECK(ex.value(adm, {{"verdict", "reject"}, {"reason", "die_vram"}}) == 0.0);
  CHECK(ex.value(adm, {{"verdict", "cap"}, {"reason", "die_vram"}}) == 0.0);
  CHECK_FALSE(ex.value(adm, {{"verdict", "admit"}, {"reason", "psi_stall"}}));  // impossible and zero
  CHECK(ex.value(adm, {{"verdict", "cap"}, {"reason", "prefill_window"}}) == 0.0);
  CHECK(ex.count(adm) == 11);  // 10 possible + the one seen
  CHECK(ex.value("pnmem_fail_open_total") == 3.0);
  const std::string tr = "pnmem_level_transitions_total";
  CHECK(ex.value(tr, {{"from", "ok"}, {"to", "critical"}}) == 1.0);
  CHECK(ex.value(tr, {{"from", "critical"}, {"to", "tight"}}) == 2.0);
  CHECK(ex.value(tr, {{"from", "watch"}, {"to", "ok"}}) == 0.0);
  CHECK(ex.count(tr) == 12);  // every from != to
  CHECK(ex.value("pnmem_ladder_degradations_total", {{"level", "tight"}}) == 4.0);
  CHECK(ex.value("pnmem_ladder_degradations_total", {{"level", "ok"}}) == 0.0);
  CHECK(ex.value("pnmem_gate_acquired_total") == 10.0);
  CHECK(ex.value("pnmem_gate_waits_total") == 6.0);
  CHECK(ex.value("pnmem_gate_overloaded_total") == 2.0);
  CHECK(ex.value("pnmem_gate_timed_out_total") == 1.0);
  CHECK(ex.value("pnmem_gate_cancelled_total") == 7.0);
  CHECK(ex.value("pnmem_gate_queue_full_total") == 8.0);
  for (const auto& entry : ex.types) {
    const std::string& family = entry.first;
    const std::string& type = entry.second;
    CAPTURE(family);
    const bool total = family.size() > 6 && family.substr(family.size() - 6) == "_total";
    CHECK(total == (type == "counter"));
  }
}

TEST_CASE("metrics: label values escape backslash, double quote and newline") {
  pnmem::mem_state s;
  s.provenance.cgroup = pnmem::cgroup_mode::v1;
  const std::string path = "/we\"ird\\path\nnext";
  s.provenance.set_limit_cgroup_path(path);
  const std::string text = pnmem::prometheus_text(s);
  CHECK(text.find(R"(limit_cgroup="/we\"ird\\path\nnext")") != std::string::npos);
  const auto ex = checked(text);
  CHECK(ex.value("pnmem_provenance_info", {{"cgroup_mode", "v1"}, {"psi_mode", "none"}, {"limit_cgroup", path}}) ==
        1.0);
  CHECK_FALSE(ex.value("pnmem_die_free_bytes", {{"die", "0"}}));  // no dies, no die families
  CHECK(ex.types.count("pnmem_die_free_bytes") == 0);
}

TEST_CASE("metrics: doubles round-trip; NaN and infinities spelled as the format wants") {
  pnmem::mem_state s;
  s.host_psi_some_avg10 = std::numeric_limits<double>::quiet_NaN();
  s.host_psi_full_avg10 = std::numeric_limits<double>::infinity();
  s.host_psi_some_rate = -std::numeric_limits<double>::infinity();
  s.host_psi_full_rate = 1.0 / 3.0;
  const std::string text = pnmem::prometheus_text(s);
  CHECK(text.find("pnmem_psi_avg10_percent{kind=\"some\"} NaN\n") != std::string::npos);
  CHECK(text.find("pnmem_psi_avg10_percent{kind=\"full\"} +Inf\n") != std::string::npos);
  CHECK(text.find("pnmem_psi_rate_percent{kind=\"some\"} -Inf\n") != std::string::npos);
  const auto ex = checked(text);
  const auto nan = ex.value("pnmem_psi_avg10_percent", {{"kind", "some"}});
  REQUIRE(nan);
  CHECK(std::isnan(*nan));
  CHECK(ex.value("pnmem_psi_rate_percent", {{"kind", "full"}}) == 1.0 / 3.0);
}

TEST_CASE("metrics: snapshot age appears when the snapshot has a sample time") {
  pnmem::mem_state s;
  s.sample_time_ns = 1;  // long ago on the steady clock
  const auto ex = checked(pnmem::prometheus_text(s));
  const auto age = ex.value("pnmem_snapshot_age_seconds");
  REQUIRE(age);
  CHECK(*age >= 0.0);
}

TEST_CASE("exposition checker: rejects what the format forbids") {
  const auto bad = [](const std::string& text) { return !check_exposition(text).errors.empty(); };
  const std::string head = "# HELP m x\n# TYPE m gauge\n";
  CHECK_FALSE(bad(head + "m 1\n"));
  CHECK_FALSE(bad(head + "m{a=\"q\\\"\\\\\\n\"} -1.5e3\n"));
  CHECK(bad(head + "m 1"));                              // no final newline
  CHECK(bad("m 1\n"));                                   // no HELP/TYPE
  CHECK(bad(head + "m 1\n# HELP m x\n"));                // HELP after samples
  CHECK(bad(head + "m{a=\"1\"} 1\nm{a=\"1\"} 2\n"));     // duplicate series
  CHECK(bad(head + "m{a=\"1\",a=\"2\"} 1\n"));           // label twice
  CHECK(bad(head + "m{1a=\"1\"} 1\n"));                  // bad label name
  CHECK(bad(head + "m{a=\"\\t\"} 1\n"));                 // bad escape
  CHECK(bad(head + "m{a=\"x} 1\n"));                     // unterminated
  CHECK(bad(head + "m one\n"));                          // not a number
  CHECK(bad(head + "m inf\n"));                          // spelled wrong
  CHECK(bad("# HELP 9m x\n# TYPE 9m gauge\n9m 1\n"));    // bad metric name
  CHECK(bad("# HELP c x\n# TYPE c counter\nc 1\n"));     // counter without _total
  CHECK(bad(head + "m{a=\"1\"} 1\n# HELP n y\n# TYPE n gauge\nn 1\nm{a=\"2\"} 1\n"));  // not contiguous
}

TEST_CASE("metrics: the host reserve is the snapshot's (a 1 GiB container keeps 256 MiB, as its level says)") {
  using pnmem::GiB;
  using pnmem::MiB;
  const pnmem::mem_state s = pnmem::with_derived_level(pnmem::test::container_state(64 * GiB, 1 * GiB, 680 * MiB));
  const auto ex = checked(pnmem::prometheus_text(s, nullptr, pnmem::default_policy));
  CHECK(ex.value("pnmem_host_reserve_bytes") == static_cast<double>(256 * MiB));
  CHECK(ex.value("pnmem_level") == 0.0);
}

// The model-server protocol's gauges (engine/fleet_load.hpp): present only with a fleet_load, each a
// gauge whose HELP names the protocol metric an endpoint picker is pointed at.
TEST_CASE("metrics: the fleet series, under the model-server protocol's names and types") {
  const pnmem::mem_state s = sample_state();
  const auto without = checked(pnmem::prometheus_text(s, nullptr, pnmem::default_policy));
  CHECK_FALSE(without.value("pnmem_queued_requests"));
  CHECK_FALSE(without.value("pnmem_kv_cache_usage_ratio"));

  pnmem::fleet_load load;
  load.queued_requests = 3;
  load.running_requests = 6;
  load.slot_capacity = 8;
  const auto ex = checked(pnmem::prometheus_text(s, nullptr, pnmem::default_policy, &load));
  CHECK(ex.value("pnmem_queued_requests") == 3.0);
  CHECK(ex.value("pnmem_running_requests") == 6.0);
  CHECK(ex.value("pnmem_slot_capacity") == 8.0);
  CHECK(ex.value("pnmem_kv_cache_usage_ratio") == 0.75);  // no KV bytes known: 6 of 8 slots
  const std::pair<const char*, const char*> protocol[] = {{"pnmem_queued_requests", "TotalQueuedRequests"},
                                                          {"pnmem_running_requests", "TotalRunningRequests"},
                                                          {"pnmem_kv_cache_usage_ratio", "KVCacheUtilization"}};
  for (const auto& entry : protocol) {
    const std::string name = entry.first;
    CAPTURE(name);
    CHECK(ex.types.at(name) == "gauge");
    CHECK(ex.helps.at(name).find(entry.second) != std::string::npos);
  }
  // Everything else is still there, in the same text.
  CHECK(ex.value("pnmem_level") == 2.0);

  // KV bytes known: their fraction, not the slots'.
  load.kv_used_bytes = 1 * pnmem::GiB;
  load.kv_capacity_bytes = 4 * pnmem::GiB;
  CHECK(checked(pnmem::prometheus_text(s, nullptr, pnmem::default_policy, &load)).value("pnmem_kv_cache_usage_ratio") ==
        0.25);
}

TEST_CASE("fleet_load: KVCacheUtilization is a fraction from 0 to 1, whatever it is given") {
  pnmem::fleet_load f;
  CHECK(pnmem::kv_cache_usage(f) == 0.0);  // nothing known: nothing in use
  f.running_requests = 5;
  CHECK(pnmem::kv_cache_usage(f) == 0.0);  // no capacity known
  f.slot_capacity = 4;
  CHECK(pnmem::kv_cache_usage(f) == 1.0);  // slots held past a capacity the ladder lowered
  f.kv_capacity_bytes = 1000;
  f.kv_used_bytes = 0;
  CHECK(pnmem::kv_cache_usage(f) == 0.0);  // bytes win over slots
  f.kv_used_bytes = 1001;
  CHECK(pnmem::kv_cache_usage(f) == 1.0);
  f.kv_used_bytes = std::numeric_limits<std::uint64_t>::max();
  f.kv_capacity_bytes = std::numeric_limits<std::uint64_t>::max();
  CHECK(pnmem::kv_cache_usage(f) == 1.0);
  static_assert(pnmem::kv_cache_usage(pnmem::fleet_load{0, 1, 2, 0, 0}) == 0.5);
}
