// pnmem/linux/procfs.hpp - parsers of the kernel's memory text files.
//
// /proc/meminfo, /proc/<pid>/status, /proc/pressure/memory (and a cgroup's
// memory.pressure, same format), cgroup v1/v2 single-value files, memory.stat,
// /proc/self/cgroup and /proc/self/mountinfo. Pure functions over the bytes of one file: no I/O, no
// heap, no exceptions, and any input gives an answer (they are fuzzed).
//
// Every kernel text file ends with '\n' and never holds a NUL byte, so
//   - an empty file is `empty`;
//   - a file whose last byte is not '\n' was cut short: `truncated`, never a
//     parse of the cut number ("MemAvailable: 12" read from "12345678");
//   - a NUL byte anywhere is `malformed`.
// A trailing '\r' on a line is accepted (a fixture edited on Windows).
// A key that must be there and is not is `missing_key`; twice is `duplicate_key`:
// garbage is reported, never read as 0.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "pnmem/parse.hpp"
#include "pnmem/provenance.hpp"

namespace pnmem::procfs {

enum class errc : std::uint8_t {
  ok,
  empty,          // zero bytes
  truncated,      // does not end with '\n'
  malformed,      // not the kernel's format (stray characters, a sign, a NUL byte)
  out_of_range,   // a number too large for its type or unit, a percent above 100
  missing_key,    // a required key or line is absent
  duplicate_key,  // a required key or line appears twice
};

constexpr std::string_view to_string(errc e) noexcept {
  switch (e) {
    case errc::ok: return "ok";
    case errc::empty: return "empty file";
    case errc::truncated: return "truncated (no final newline)";
    case errc::malformed: return "malformed";
    case errc::out_of_range: return "out of range";
    case errc::missing_key: return "missing key";
    case errc::duplicate_key: return "duplicate key";
  }
  return "invalid";
}

// pnmem's one parse-result type, with this family's errors.
template <class T>
using result = parsed<T, errc>;

// ---- /proc/meminfo ----------------------------------------------------------

struct meminfo {
  std::uint64_t total_bytes = 0;  // MemTotal, never 0 in a successful parse
  std::uint64_t avail_bytes = 0;  // MemAvailable
};

// MemTotal and MemAvailable ("<n> kB"), converted to bytes with an overflow check.
// Other lines are not looked at (their set changes between kernels).
result<meminfo> parse_meminfo(std::string_view text) noexcept;

// ---- /proc/<pid>/status ------------------------------------------------------

struct status_memory {
  std::uint64_t hwm_bytes = 0;  // VmHWM
  std::uint64_t rss_bytes = 0;  // VmRSS
};

// The VmHWM and VmRSS lines ("VmHWM:\t    1900 kB"), read as parse_meminfo reads
// its keys: "<n> kB" in bytes, each required exactly once (a kernel thread has
// neither: missing_key), other lines not looked at. 0 is a value (unlike MemTotal).
result<status_memory> parse_status_memory(std::string_view text) noexcept;

// ---- PSI: /proc/pressure/memory, <cgroup>/memory.pressure ---------------------

struct psi_line {
  double avg10_pct = 0.0;   // percent of the last 10 s stalled, as the kernel averages it
  double avg60_pct = 0.0;
  double avg300_pct = 0.0;
  std::uint64_t total_us = 0;  // stall time since boot, microseconds (monotonic counter)
};

struct psi {
  psi_line some;          // at least one task stalled on memory
  psi_line full;          // every non-idle task stalled; only valid when has_full
  bool has_full = false;  // kernels before 5.x-ish print no "full" line: full is unknown
};

// "some avg10=.. avg60=.. avg300=.. total=.." and optionally the same for "full".
// Every field is required once per line; unknown fields are ignored. Averages
// outside [0, 100] are out of range.
result<psi> parse_psi(std::string_view text) noexcept;

// ---- cgroup single-value files ------------------------------------------------

// A memory limit: `set` false means "no limit" (v2 "max", v1 the huge sentinel).
struct cgroup_limit {
  std::uint64_t bytes = 0;
  bool set = false;
};

// v1 reports "no limit" as PAGE_COUNTER_MAX rounded to pages (9223372036854771712
// with 4 KiB pages, other values with other page sizes). Nobody sets a real limit
// of 4 EiB, so anything from 2^62 up is read as unlimited.
inline constexpr std::uint64_t v1_unlimited_threshold_bytes = 1ULL << 62;

// memory.current (v2), memory.usage_in_bytes (v1): one decimal number of bytes.
result<std::uint64_t> parse_cgroup_bytes(std::string_view text) noexcept;
// memory.max, memory.high (v2): a number of bytes or "max" (unset).
result<cgroup_limit> parse_cgroup_v2_limit(std::string_view text) noexcept;
// memory.limit_in_bytes (v1): a number; >= v1_unlimited_threshold_bytes is unset.
result<cgroup_limit> parse_cgroup_v1_limit(std::string_view text) noexcept;

// memory.stat: reclaimable page cache in bytes. v2: `inactive_file`. v1: the
// hierarchical `total_inactive_file` when present (it counts the children, as
// usage_in_bytes does), else `inactive_file`. `hierarchy` is v1 or v2 (none: malformed).
result<std::uint64_t> parse_memory_stat_inactive_file(std::string_view text, cgroup_mode hierarchy) noexcept;

// ---- /proc/self/cgroup --------------------------------------------------------

// Paths as the kernel prints them, viewing into the parsed text; empty when the
// process is in no such hierarchy. Each non-empty path starts with '/'.
struct self_cgroup {
  std::string_view v2_path;         // "0::/path"
  std::string_view v1_memory_path;  // "N:memory:/path", "N:cpu,memory:/path"
};

// Every line must be "id:controllers:/path". Two v2 lines or two lines naming
// `memory` are duplicate_key.
result<self_cgroup> parse_self_cgroup(std::string_view text) noexcept;

// ---- /proc/self/mountinfo -----------------------------------------------------

inline constexpr std::size_t mount_path_capacity = 4096;  // PATH_MAX

// An unescaped path from the mount table (the kernel writes ' ', '\t', '\n' and
// '\\' as \ooo octal escapes).
struct mount_path {
  std::array<char, mount_path_capacity> bytes{};
  std::size_t size = 0;
  constexpr std::string_view view() const noexcept { return {bytes.data(), size}; }
};

// Decodes a mountinfo field into `out`. False on a bad escape, a decoded NUL
// byte, or a path longer than the capacity.
bool unescape_mount_field(std::string_view field, mount_path& out) noexcept;

struct cgroup_mount {
  mount_path mount_point;  // where the hierarchy is mounted, e.g. /sys/fs/cgroup/memory
  mount_path root;         // the hierarchy's directory shown there: "/" on a host,
                           // the container's own cgroup when a container mounts a sub-tree
};

enum class mount_lookup : std::uint8_t {
  found,        // `mount` shows the cgroup
  absent,       // no mount of that hierarchy at all
  not_visible,  // mounted, but no mount shows this cgroup (outside every mounted
                // sub-tree, or a path with "." / ".." components: outside a cgroup namespace)
};

struct cgroup_mount_match {
  mount_lookup lookup = mount_lookup::absent;
  cgroup_mount mount;  // valid when lookup == found
};

// The first mount of `hierarchy` (v2: fstype cgroup2; v1: fstype cgroup with
// `memory` among its super options) whose root contains `cgroup_path` (a path
// from /proc/self/cgroup) and that no later line mounts over (a mount stacked at
// the same mount point hides it: a container runtime's cgroup2 mount over the
// host's, with another root). The cgroup's directory is then
//   mount_point + (cgroup_path - root).
// A line without the 10 fields and the "-" separator is malformed, anywhere in
// the table.
result<cgroup_mount_match> find_cgroup_mount(std::string_view mountinfo, cgroup_mode hierarchy,
                                             std::string_view cgroup_path) noexcept;

// The part of `cgroup_path` below `root` ("" when they are equal), assuming
// find_cgroup_mount matched them: "/a/b" under "/a" is "/b"; anything under "/" is
// itself without a trailing '/'.
std::string_view path_below_root(std::string_view cgroup_path, std::string_view root) noexcept;

}  // namespace pnmem::procfs
