#include "pnmem/host_sample.hpp"

#include <string_view>
#include <vector>

#include <doctest/doctest.h>

using namespace pnmem;

namespace {
struct plain_sampler {
  host_sample sample() { return {}; }
};
struct waiting_sampler {
  host_sample sample() { return {}; }
  wake wait_for(std::chrono::nanoseconds) { return wake::timeout; }
  void interrupt() {}
};
struct not_a_sampler {
  int sample() { return 0; }
};
}  // namespace

static_assert(host_sampler<plain_sampler>);
static_assert(!event_sampler<plain_sampler>);
static_assert(event_sampler<waiting_sampler>);
static_assert(!host_sampler<not_a_sampler>);

TEST_CASE("assign_host copies the host half and leaves dies, level and seq alone") {
  mem_state s;
  s.n_dies = 2;
  s.per_die_free_bytes[1] = 5;
  s.per_die_budget_bytes[1] = 9;
  s.level = mem_level::tight;
  s.seq = 41;
  host_sample h;
  h.total_bytes = 100;
  h.avail_bytes = 60;
  h.psi_some_avg10 = 1.5;
  h.psi_full_avg10 = 0.5;
  h.psi_some_rate = 2.5;
  h.psi_full_rate = 0.75;
  h.cgroup_current_bytes = 7;
  h.cgroup_high_bytes = 8;
  h.cgroup_max_bytes = 9;
  h.os_level = mem_level::watch;
  h.provenance.cgroup = cgroup_mode::v1;
  h.provenance.set_limit_cgroup_path("/engine");
  assign_host(s, h);
  CHECK(s.host_total_bytes == 100);
  CHECK(s.host_avail_bytes == 60);
  CHECK(s.host_psi_some_avg10 == 1.5);
  CHECK(s.host_psi_full_avg10 == 0.5);
  CHECK(s.host_psi_some_rate == 2.5);
  CHECK(s.host_psi_full_rate == 0.75);
  CHECK(s.cgroup_current_bytes == 7);
  CHECK(s.cgroup_high_bytes == 8);
  CHECK(s.cgroup_max_bytes == 9);
  CHECK(s.host_os_level == mem_level::watch);
  CHECK(s.provenance.cgroup == cgroup_mode::v1);
  CHECK(s.provenance.limit_cgroup_path() == "/engine");
  CHECK(s.n_dies == 2);
  CHECK(s.per_die_free_bytes[1] == 5);
  CHECK(s.per_die_budget_bytes[1] == 9);
  CHECK(s.level == mem_level::tight);
  CHECK(s.seq == 41);
}

TEST_CASE("for_each_host_number: every host number once, by its member name, in snapshot order") {
  mem_state from;
  from.host_total_bytes = 1;
  from.host_avail_bytes = 2;
  from.host_psi_some_avg10 = 3.5;
  from.host_psi_full_avg10 = 4.5;
  from.host_psi_some_rate = 5.5;
  from.host_psi_full_rate = 6.5;
  from.cgroup_current_bytes = 7;
  from.cgroup_high_bytes = 8;
  from.cgroup_max_bytes = 9;
  mem_state to;
  std::vector<std::string_view> names;
  for_each_host_number([&](std::string_view name, auto field) {
    names.push_back(name);
    field(to) = field(from);
  });
  CHECK(names == std::vector<std::string_view>{"host_total_bytes", "host_avail_bytes", "host_psi_some_avg10",
                                               "host_psi_full_avg10", "host_psi_some_rate", "host_psi_full_rate",
                                               "cgroup_current_bytes", "cgroup_high_bytes", "cgroup_max_bytes"});
  CHECK(to.host_total_bytes == 1);
  CHECK(to.host_avail_bytes == 2);
  CHECK(to.host_psi_some_avg10 == 3.5);
  CHECK(to.host_psi_full_avg10 == 4.5);
  CHECK(to.host_psi_some_rate == 5.5);
  CHECK(to.host_psi_full_rate == 6.5);
  CHECK(to.cgroup_current_bytes == 7);
  CHECK(to.cgroup_high_bytes == 8);
  CHECK(to.cgroup_max_bytes == 9);
}
