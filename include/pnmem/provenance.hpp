// pnmem/provenance.hpp - where a snapshot's host numbers came from.
//
// Every snapshot says which sources were read, which failed, how the cgroup and
// PSI were reached, and which cgroup's limit is in force: an operator can tell a
// box under pressure from a box whose sampler could not see. Plain data, fixed
// size, trivially copyable (it travels inside mem_state through the seqlock).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace pnmem {

enum class cgroup_mode : std::uint8_t { none, v1, v2 };
enum class psi_mode : std::uint8_t { none, poll, trigger };

constexpr std::string_view to_string(cgroup_mode m) noexcept {
  return m == cgroup_mode::v1 ? "v1" : (m == cgroup_mode::v2 ? "v2" : "none");
}
constexpr std::string_view to_string(psi_mode m) noexcept {
  return m == psi_mode::trigger ? "trigger" : (m == psi_mode::poll ? "poll" : "none");
}

// One bit per source a sampler can read.
enum class host_source : std::uint32_t {
  meminfo = 1U << 0,         // /proc/meminfo MemTotal, MemAvailable
  psi = 1U << 1,             // /proc/pressure/memory
  cgroup_usage = 1U << 2,    // memory.current | memory.usage_in_bytes
  cgroup_limit = 1U << 3,    // memory.max/high | memory.limit_in_bytes, over the ancestors
  cgroup_stat = 1U << 4,     // memory.stat (inactive_file)
  cgroup_pressure = 1U << 5, // the cgroup's memory.pressure (v2)
  macos_vm = 1U << 6,        // hw.memsize, host_statistics64
  macos_pressure = 1U << 7,  // kern.memorystatus_vm_pressure_level
};

// Sources are bits 0 .. host_source_count - 1; every one, in bit order (JSON lists, metric labels).
inline constexpr int host_source_count = 8;
inline constexpr std::array<host_source, host_source_count> all_host_sources = [] {
  std::array<host_source, host_source_count> a{};
  for (int i = 0; i < host_source_count; ++i) a[static_cast<std::size_t>(i)] = static_cast<host_source>(1U << i);
  return a;
}();
static_assert(all_host_sources.back() == host_source::macos_pressure);

// Names as written in JSON, metric labels and the command-line tool.
constexpr std::string_view to_string(host_source s) noexcept {
  switch (s) {
    case host_source::meminfo: return "meminfo";
    case host_source::psi: return "psi";
    case host_source::cgroup_usage: return "cgroup_usage";
    case host_source::cgroup_limit: return "cgroup_limit";
    case host_source::cgroup_stat: return "cgroup_stat";
    case host_source::cgroup_pressure: return "cgroup_pressure";
    case host_source::macos_vm: return "macos_vm";
    case host_source::macos_pressure: return "macos_pressure";
  }
  return "invalid";
}

inline constexpr std::size_t cgroup_path_capacity = 256;

struct sample_provenance {
  std::uint32_t sources_read = 0;    // host_source bits that gave numbers
  std::uint32_t sources_failed = 0;  // host_source bits that exist but could not be read or parsed
  cgroup_mode cgroup = cgroup_mode::none;
  psi_mode psi = psi_mode::none;
  std::uint64_t meminfo_total_bytes = 0;       // MemTotal as the kernel reports it (before the container)
  std::uint64_t meminfo_avail_bytes = 0;       // MemAvailable as the kernel reports it
  std::uint64_t cgroup_limit_bytes = 0;        // effective limit over the cgroup and its ancestors; 0 = none
  std::uint64_t cgroup_working_set_bytes = 0;  // usage - inactive_file of the limiting cgroup
  // Path (relative to the cgroup mount) of the cgroup whose limit is in force,
  // NUL-terminated and truncated to fit; empty when there is no limit.
  std::array<char, cgroup_path_capacity> limit_cgroup{};

  constexpr bool read(host_source s) const noexcept { return (sources_read & static_cast<std::uint32_t>(s)) != 0; }
  constexpr bool failed(host_source s) const noexcept {
    return (sources_failed & static_cast<std::uint32_t>(s)) != 0;
  }
  constexpr void mark_read(host_source s) noexcept { sources_read |= static_cast<std::uint32_t>(s); }
  constexpr void mark_failed(host_source s) noexcept { sources_failed |= static_cast<std::uint32_t>(s); }

  constexpr std::string_view limit_cgroup_path() const noexcept {
    std::size_t n = 0;
    while (n < limit_cgroup.size() && limit_cgroup[n] != '\0') ++n;
    return {limit_cgroup.data(), n};
  }
  // Stores a path, truncated to capacity - 1 characters.
  constexpr void set_limit_cgroup_path(std::string_view p) noexcept {
    std::size_t n = p.size() < limit_cgroup.size() - 1 ? p.size() : limit_cgroup.size() - 1;
    for (std::size_t i = 0; i < n; ++i) limit_cgroup[i] = p[i];
    for (std::size_t i = n; i < limit_cgroup.size(); ++i) limit_cgroup[i] = '\0';
  }
};

}  // namespace pnmem
