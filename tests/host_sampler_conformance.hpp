// tests/host_sampler_conformance.hpp - one suite every host sampler must pass.
//
// What the watcher, the CLI and the C ABI rely on from any pnmem::host_sampler,
// written once and run over every sampler that builds here (as the CUDA device
// backends share tests/cuda/backend_conformance.hpp):
//
//   - a readable box: total > 0, avail <= total, its total/avail source marked
//     read and not failed, PSI figures in [0, 100], and a roomy box is OK;
//   - an unreadable box: total 0 ("host not sampled"), a source marked failed,
//     and never CRITICAL from it (never a false CRITICAL);
//   - two samples of an unchanged box agree;
//   - through a watcher: poll_now() publishes what sample() gives, with a seq
//     and a level derived from it; start() and stop() return (an event sampler's
//     wait is interrupted, not waited out).
//
// A rig per sampler provides:
//   struct rig {
//     using sampler = ...;
//     static constexpr pnmem::host_source total_source;  // the source of total and avail
//     sampler roomy();        // a box with plenty of memory and no pressure
//     sampler unreadable();   // a box whose total/avail source exists but cannot be read
//   };
// and the test file instantiates the suite:
//   TEST_CASE_TEMPLATE_INVOKE(host_sampler_conformance, fake_rig, other_rig);
#pragma once

#include <chrono>

#include <doctest/doctest.h>

#include "pnmem/host_sample.hpp"
#include "pnmem/level.hpp"
#include "pnmem/watcher.hpp"

namespace pnmem::test {

inline void check_psi_range(const host_sample& h) {
  for (const double v : {h.psi_some_avg10, h.psi_full_avg10, h.psi_some_rate, h.psi_full_rate}) {
    CHECK(v >= 0.0);
    CHECK(v <= 100.0);
  }
}

inline void check_same_numbers(const host_sample& a, const host_sample& b) {
  CHECK(a.total_bytes == b.total_bytes);
  CHECK(a.avail_bytes == b.avail_bytes);
  CHECK(a.psi_some_avg10 == b.psi_some_avg10);
  CHECK(a.psi_full_avg10 == b.psi_full_avg10);
  CHECK(a.cgroup_current_bytes == b.cgroup_current_bytes);
  CHECK(a.cgroup_high_bytes == b.cgroup_high_bytes);
  CHECK(a.cgroup_max_bytes == b.cgroup_max_bytes);
  CHECK(a.os_level == b.os_level);
  CHECK(a.provenance.sources_read == b.provenance.sources_read);
  CHECK(a.provenance.sources_failed == b.provenance.sources_failed);
}

}  // namespace pnmem::test

TEST_CASE_TEMPLATE_DEFINE("host sampler conformance", Rig, host_sampler_conformance) {
  using sampler_t = typename Rig::sampler;
  static_assert(pnmem::host_sampler<sampler_t>);
  Rig rig;

  SUBCASE("a readable box: total > 0, avail <= total, its source read, PSI in range, OK when roomy") {
    sampler_t s = rig.roomy();
    const pnmem::host_sample h = s.sample();
    CHECK(h.total_bytes > 0);
    CHECK(h.avail_bytes <= h.total_bytes);
    CHECK(h.provenance.read(Rig::total_source));
    CHECK_FALSE(h.provenance.failed(Rig::total_source));
    CHECK((h.provenance.sources_read & h.provenance.sources_failed) == 0);  // never both
    pnmem::test::check_psi_range(h);
    pnmem::mem_state st;
    pnmem::assign_host(st, h);
    CHECK(pnmem::derive_level(st) == pnmem::mem_level::ok);
  }

  SUBCASE("an unreadable box: total 0, the source marked failed, never CRITICAL") {
    sampler_t s = rig.unreadable();
    const pnmem::host_sample h = s.sample();
    CHECK(h.total_bytes == 0);
    CHECK(h.avail_bytes == 0);
    CHECK(h.provenance.failed(Rig::total_source));
    CHECK_FALSE(h.provenance.read(Rig::total_source));
    pnmem::test::check_psi_range(h);
    pnmem::mem_state st;
    pnmem::assign_host(st, h);
    CHECK(pnmem::derive_level(st) != pnmem::mem_level::critical);
  }

  SUBCASE("two samples of an unchanged box agree") {
    sampler_t s = rig.roomy();
    const pnmem::host_sample first = s.sample();
    const pnmem::host_sample second = s.sample();
    pnmem::test::check_same_numbers(first, second);
  }

  SUBCASE("a watcher publishes what the sampler gives, and starts and stops") {
    sampler_t direct = rig.roomy();
    const pnmem::host_sample h = direct.sample();
    pnmem::watcher_options o;
    o.poll_interval = std::chrono::milliseconds(5);
    o.pressure_poll_interval = std::chrono::milliseconds(5);
    pnmem::watcher<sampler_t> w{rig.roomy(), o};
    w.poll_now();
    const pnmem::mem_state s = w.read();
    CHECK(s.seq == 1);
    CHECK(s.host_total_bytes == h.total_bytes);
    CHECK(s.host_avail_bytes == h.avail_bytes);
    CHECK(s.provenance.sources_read == h.provenance.sources_read);
    CHECK(s.raw_level == pnmem::derive_level(s));
    CHECK(s.level == pnmem::mem_level::ok);
    CHECK(w.start());
    CHECK(w.running());
    w.stop();  // an event sampler's wait is interrupted: this returns
    CHECK_FALSE(w.running());
    CHECK(w.read().seq >= 2);  // start() sampled synchronously
  }
}
