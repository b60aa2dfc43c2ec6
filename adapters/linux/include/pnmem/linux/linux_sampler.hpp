// pnmem/linux/linux_sampler.hpp - host memory from /proc and the process's memory cgroup.
//
// A pnmem::host_sampler for Linux. Each sample() reads
//   /proc/self/cgroup      which cgroup the process is in (re-read every sample:
//                          a process can be moved; cgroup files are reopened only
//                          when the path changes)
//   /proc/meminfo          MemTotal, MemAvailable
//   /proc/pressure/memory  PSI some/full averages and total= stall counters
//   the memory cgroup      its limits and those of its ancestors, and the usage
//                          and memory.stat of the cgroup whose limit is in force
// from files kept open and re-read whole with pread. The cgroup hierarchy is
// located through /proc/self/mountinfo (read when the cgroup path changes).
//
// Container-aware numbers (the formula):
//
//   levels     the process's memory cgroup and each ancestor up to the root of
//              the mounted hierarchy (a container that mounts a sub-tree sees no
//              further up)
//   limit(c)   v2: min(memory.max, memory.high). memory.high counts because past
//                  it the kernel throttles and reclaims the cgroup hard: an engine
//                  that plans on memory.max would stall long before any OOM.
//              v1: memory.limit_in_bytes (>= 2^62 is "unlimited").
//   limit      min over the levels of limit(c); on a tie the higher cgroup wins
//              (its usage includes the lower one's, so it is the tighter view).
//   L          the limiting cgroup: the level whose limit is `limit`.
//   working set  usage(L) - inactive_file(L), floored at 0 (kubelet's formula:
//              inactive page cache is reclaimable, not pressure). usage is
//              memory.current (v2) / memory.usage_in_bytes (v1); inactive_file is
//              from memory.stat (v1: the hierarchical total_inactive_file).
//   total      min(MemTotal, limit)
//   avail      min(MemAvailable, limit - working set), floored at 0
//
// With no limit anywhere, total and avail are MemTotal and MemAvailable. The
// sample also carries cgroup_max_bytes / cgroup_high_bytes (min of memory.max /
// memory.high over the levels; v1 reports its limit as max), cgroup_current_bytes
// (usage of L, or of the process's cgroup when nothing is limited), and in the
// provenance the raw MemTotal/MemAvailable, the limit, the working set and L's path.
//
// Hierarchy choice: v2 when the process's v2 cgroup has the memory controller
// (its memory.current exists; the root cgroup never has one), else the v1 memory
// hierarchy when it is mounted, else none (host numbers only). One refinement: a
// v2 cgroup whose parent does not delegate the memory controller has no memory
// files, and its memory is charged to the nearest ancestor that has them; that
// ancestor then counts as the process's memory cgroup (its limits still apply).
//
// PSI source (linux_sampler_options::psi_source, PN_PSI_SOURCE by default):
//   host    /proc/pressure/memory: the whole box's stalls (the seed). Triggers are armed on it and,
//           in a v2 cgroup, on the cgroup's memory.pressure too.
//   cgroup  the process's cgroup v2 memory.pressure (same format): its own cgroup's stalls, so other
//           tenants' stalls do not escalate it (provenance: cgroup_pressure read, psi not). Where
//           there is none (cgroup v1, no cgroup, a kernel without PSI in cgroups) the host's file
//           is read instead, and one line says why (and one more when the cgroup's file appears).
//           A trigger on the host file may still wake the watcher early: it only takes a sample.
//   off     PSI is not read: its numbers stay 0, provenance.psi is none, no trigger is armed.
// A sample that changes the file read starts the stall rate over (0 for that sample) and reports
// no total= counter, so no rate ever spans two files.
//
// PSI: the avg10 figures as read, plus the stall rate of the last interval,
// 100 * delta(total= us) / delta(monotonic clock us), in [0, 100]; 0 on the first
// sample, after a PSI read failed, when a counter went backwards, and when the
// clock did not move forward (the next interval then runs from the new reading).
//
// A missing source leaves its numbers at 0 and is not marked; one that exists but
// cannot be read or parsed is marked failed in the provenance. Without MemTotal
// the sample has total 0 ("host not sampled", skipped by the level rules): never
// a false CRITICAL. A garbage /proc/self/cgroup or mount table marks cgroup_limit
// and cgroup_usage failed (the container's limit could not be determined).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pnmem/config.hpp"
#include "pnmem/host_sample.hpp"
#include "pnmem/linux/psi_trigger.hpp"

namespace pnmem {

struct linux_sampler_options {
  // Every path is read under this directory: "/" on a real system, a fixture
  // tree laid out like "/" in tests.
  std::string root = "/";
  // Monotonic clock in nanoseconds for the PSI stall rate. Empty: std::chrono::steady_clock.
  std::function<std::int64_t()> monotonic_ns;
  // PSI triggers armed on <root>/proc/pressure/memory, waited through by
  // wait_for(). The default is psi_trigger's (default_psi_trigger, psi_trigger.hpp);
  // without CAP_SYS_RESOURCE the kernel only takes 2 s windows and psi_trigger
  // widens it. Empty: no triggers, and wait_for() is a plain interruptible wait
  // (PSI is still polled).
  std::vector<psi_trigger_spec> psi_triggers{default_psi_trigger};
  // Where PSI is read (above). Default: the process's PN_PSI_SOURCE (config.hpp, read once).
  pnmem::psi_source psi_source = process_env_settings().psi_source;
  // Where the sampler's notes go (the cgroup PSI source falling back to the host's, and back),
  // one line each, from the sampling thread. Empty: stderr, as "pnmem: <note>".
  std::function<void(std::string_view)> log;
};

// Not thread-safe: one thread samples (the watcher's).
class linux_sampler {
 public:
  linux_sampler();
  explicit linux_sampler(linux_sampler_options options);
  ~linux_sampler();
  linux_sampler(linux_sampler&&) noexcept;             // the moved-from sampler may only be
  linux_sampler& operator=(linux_sampler&&) noexcept;  // destroyed or assigned to
  linux_sampler(const linux_sampler&) = delete;
  linux_sampler& operator=(const linux_sampler&) = delete;

  // One fresh sample. Only throws std::bad_alloc (when the cgroup is relocated).
  // provenance.psi says trigger while the PSI triggers are armed, poll once they
  // were refused or failed.
  host_sample sample();

  // Waits up to `timeout` for a PSI trigger event (pnmem::event_sampler): the
  // watcher's thread waits here, and takes a fresh sample at once on
  // wake::event. interrupt() may be called from any thread.
  wake wait_for(std::chrono::nanoseconds timeout);
  void interrupt() noexcept;

  // The PSI triggers: mode, what was armed, why not (reason()).
  const psi_trigger& trigger() const noexcept { return *trigger_; }

  // The floor of sample(): re-reads (pread, no parsing) exactly the files the
  // last sample() read; returns the number of bytes read. For the benchmark.
  std::size_t read_all_for_benchmark();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
  std::unique_ptr<psi_trigger> trigger_;
};

static_assert(event_sampler<linux_sampler>);

}  // namespace pnmem
