// pnmem/linux/process_peak.hpp - a process's memory high-water marks, for `pnmem calibrate`.
//
// An engine measures its host peak for prompts of several lengths, writes one `tokens,peak_bytes` line
// per prompt, and `pnmem calibrate` turns the lines into an activation table (pnmem/calibration.hpp):
//
//   pnmem::linux_os::peak_meter meter;            // this process; or {.pid = engine_pid}
//   for (int n : {0, 1024, 4096, 16384}) {
//     meter.reset();                              // peaks := usage now (where the kernel allows it)
//     run_prompt(n);
//     const auto p = meter.read();
//     if (p.process.ok()) std::printf("%d,%llu\n", n, (unsigned long long)p.process.peak_bytes);
//   }
//
// Two peaks, each read from the kernel, each with its own status (a source that cannot be read is an
// error, never a 0):
//
//   process  VmHWM of /proc/<pid>/status: the resident set's high-water mark (anonymous, file and shared
//            pages the process mapped), with VmRSS as current_bytes. Reset by writing "5" to
//            /proc/<pid>/clear_refs (Linux 4.0+; EINVAL before: unsupported): VmHWM becomes VmRSS.
//   cgroup   the process's memory cgroup, located once, when the meter is made (make a new meter after
//            moving the process), as pnmem's sampler locates it (linux_sampler.hpp): the v2 cgroup when
//            it has the memory controller (memory.current; a cgroup without it is charged to the nearest
//            ancestor that has it, and that one is measured), else the v1 memory hierarchy.
//              v2  memory.peak (Linux 5.19+; missing before), current_bytes memory.current. Reset
//                  (Linux 6.12+) by writing to memory.peak: the kernel then answers reads through the SAME
//                  open file with the peak since the write, and other readers see nothing change. The
//                  meter keeps that file open (read-write when it may) for exactly this. Older kernels
//                  make memory.peak read-only (mode 0444): reset is unsupported.
//              v1  memory.max_usage_in_bytes, current_bytes memory.usage_in_bytes. Reset by writing 0
//                  to memory.max_usage_in_bytes (root, or the cgroup's owner): for EVERY reader.
//            The cgroup's peak counts every process in it and the page cache charged to it (v1: and its
//            children): what the container limit is enforced against.
//
// Both are the kernel's batched counters (per-CPU RSS counters, memcg charge stocks): exact to within a
// few hundred KiB, and VmHWM is brought up to date lazily (it may read a few pages lower later on).
// Measure peaks of many MiB, or add a margin.
//
// Every path is read under options.root ("/" on a real system, a tree laid out like "/" in tests); the
// mount table is always the reader's own (<root>/proc/self/mountinfo). All OS calls go through the
// adapter's os_calls seam. Not thread-safe: one thread uses a meter.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "pnmem/linux/procfs.hpp"
#include "pnmem/provenance.hpp"

namespace pnmem::linux_os {

enum class peak_status : std::uint8_t {
  ok,
  missing,            // no such source: no memory cgroup, no memory.peak before Linux 5.19, the process gone
  unsupported,        // reset only: this kernel cannot reset this peak
  permission_denied,  // EACCES / EPERM
  failed,             // another OS error (error_number)
  malformed,          // the file's bytes did not parse (or /proc/<pid>/cgroup, the mount table)
};

constexpr std::string_view to_string(peak_status s) noexcept {
  switch (s) {
    case peak_status::ok: return "ok";
    case peak_status::missing: return "missing";
    case peak_status::unsupported: return "unsupported by this kernel";
    case peak_status::permission_denied: return "permission denied";
    case peak_status::failed: return "failed";
    case peak_status::malformed: return "malformed";
  }
  return "invalid";
}

// One high-water mark.
struct peak_value {
  peak_status status = peak_status::missing;
  std::uint64_t peak_bytes = 0;     // ok: the high-water mark
  std::uint64_t current_bytes = 0;  // ok: the usage now (VmRSS; memory.current / memory.usage_in_bytes)
  int error_number = 0;             // errno of a failure
  constexpr bool ok() const noexcept { return status == peak_status::ok; }
};

struct peak_sample {
  peak_value process;  // VmHWM
  peak_value cgroup;   // memory.peak / memory.max_usage_in_bytes
};

// What a reset did, per peak: ok, or why not (with errno).
struct peak_reset {
  peak_status process = peak_status::missing;
  int process_error_number = 0;
  peak_status cgroup = peak_status::missing;
  int cgroup_error_number = 0;
};

struct peak_meter_options {
  int pid = 0;             // the process measured; 0: this one (/proc/self)
  std::string root = "/";  // every path is read under this directory
};

class peak_meter {
 public:
  peak_meter();
  explicit peak_meter(peak_meter_options options);
  ~peak_meter();
  peak_meter(peak_meter&&) noexcept;             // the moved-from meter may only be
  peak_meter& operator=(peak_meter&&) noexcept;  // destroyed or assigned to
  peak_meter(const peak_meter&) = delete;
  peak_meter& operator=(const peak_meter&) = delete;

  // Both peaks now. Never throws.
  peak_sample read() noexcept;

  // Resets both peaks to the current usage where the kernel allows it. Never throws.
  peak_reset reset() noexcept;

  // The memory cgroup measured: its hierarchy (none when there is none) and directory ("" then), and,
  // when there is none, why: missing (the process is in no memory cgroup, or none is visible here),
  // failed or malformed (/proc/<pid>/cgroup or the mount table could not be read or parsed).
  cgroup_mode cgroup_hierarchy() const noexcept;
  const std::string& cgroup_dir() const noexcept;
  peak_status cgroup_location() const noexcept;
  int cgroup_location_error_number() const noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

// ---- /proc/<pid>/status --------------------------------------------------------------------------

// The parser the meter reads VmHWM and VmRSS with, one of procfs.hpp's parsers: here too, as before.
using procfs::parse_status_memory;
using procfs::status_memory;

}  // namespace pnmem::linux_os
