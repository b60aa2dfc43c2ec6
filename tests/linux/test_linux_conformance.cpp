// The host-sampler conformance suite (tests/host_sampler_conformance.hpp) over the
// Linux sampler, on fixture trees: a roomy box under an unlimited cgroup v2, and
// the `garbage` tree, where every source exists and none parses. The same suite
// runs over the public fake and the macOS arithmetic in tests/.
#include "host_sampler_conformance.hpp"

#include <doctest/doctest.h>

#include "fixture_sampler.hpp"
#include "fixture_tree.hpp"
#include "pnmem/linux/linux_sampler.hpp"

namespace {

struct linux_fixture_rig {
  using sampler = pnmem::linux_sampler;
  static constexpr pnmem::host_source total_source = pnmem::host_source::meminfo;

  // v2_unlimited with 60 of 64 GiB available and no stall: OK on every rule.
  pnmem::test::temp_tree roomy_tree{"v2_unlimited"};

  linux_fixture_rig() {
    pnmem::test::write_text(roomy_tree / "proc/meminfo",
                           "MemTotal:       67108864 kB\nMemFree:        62914560 kB\nMemAvailable:   62914560 kB\n");
    pnmem::test::write_text(roomy_tree / "proc/pressure/memory", pnmem::test::psi_text(0, 0));
  }

  // The default options (PSI triggers asked for; a fixture is not procfs, so the
  // sampler polls and its wait is a plain interruptible one).
  sampler roomy() { return pnmem::test::fixture_sampler(roomy_tree.root); }
  sampler unreadable() { return pnmem::test::fixture_sampler(pnmem::test::fixtures_dir() / "garbage"); }
};

}  // namespace

TEST_CASE_TEMPLATE_INVOKE(host_sampler_conformance, linux_fixture_rig);
