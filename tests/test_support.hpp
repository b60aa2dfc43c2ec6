// tests/test_support.hpp - small builders shared by the policy tests.
#pragma once

#include <cstdint>

#include "pnmem/mem_state.hpp"
#include "splitmix64.hpp"

namespace pnmem::test {

// A host-only snapshot.
constexpr mem_state host_state(std::uint64_t total, std::uint64_t avail, double psi_some = 0.0,
                               double psi_full = 0.0) {
  mem_state s;
  s.host_total_bytes = total;
  s.host_avail_bytes = avail;
  s.host_psi_some_avg10 = psi_some;
  s.host_psi_full_avg10 = psi_full;
  return s;
}

// A host-only snapshot as the Linux sampler makes it inside a memory cgroup whose limit is
// `limit` (memory.max) on a box with `memtotal`: the total is min(MemTotal, limit).
constexpr mem_state container_state(std::uint64_t memtotal, std::uint64_t limit, std::uint64_t avail) {
  mem_state s;
  s.host_total_bytes = limit < memtotal ? limit : memtotal;
  s.host_avail_bytes = avail;
  s.cgroup_max_bytes = limit;
  s.provenance.cgroup = cgroup_mode::v2;
  s.provenance.meminfo_total_bytes = memtotal;
  s.provenance.cgroup_limit_bytes = limit;
  return s;
}

// Appends a die (free, budget, used) to a snapshot.
constexpr mem_state add_die(mem_state s, std::uint64_t free_bytes, std::uint64_t budget_bytes,
                            std::uint64_t used_bytes = 0) {
  const auto i = static_cast<std::size_t>(s.n_dies);
  s.per_die_free_bytes[i] = free_bytes;
  s.per_die_budget_bytes[i] = budget_bytes;
  s.per_die_used_bytes[i] = used_bytes;
  ++s.n_dies;
  return s;
}

// Deterministic pseudo-random numbers for sweeps, so failures reproduce.
using rng = splitmix64;

}  // namespace pnmem::test
