// pnmem/macos/vm_arith.hpp - macOS memory numbers to a host_sample, as pure functions.
//
// The macOS sampler (macos_sampler.cpp, built only on macOS) reads three things:
//   hw.memsize                            total bytes
//   host_statistics64(HOST_VM_INFO64)     page counts
//   kern.memorystatus_vm_pressure_level   the kernel's own pressure verdict
// Everything it does with them is here, so it is tested on every platform.
//
// Available memory (the formula):
//   avail = (free + inactive + purgeable) pages x page size, at most total
// free pages are unused; inactive pages are clean or cheaply reclaimed before
// anything is compressed; purgeable pages are ones applications marked
// discardable, which the kernel drops under pressure. Active, wired and
// compressed pages are not available. (macOS has no MemAvailable; this is the
// same spirit: memory an allocation can get without swapping or compressing.)
//
// Pressure verdict (sysctl values of DISPATCH_MEMORYPRESSURE_*):
//   1 normal -> OK, 2 warn -> TIGHT (the compressor and swap are working: the
//   ladder should already shed concurrency), 4 critical -> CRITICAL.
// Any other value is not a verdict: the source is marked failed and the level
// stays OK (never a false CRITICAL). PSI and cgroups do not exist on macOS: 0.
#pragma once

#include <cstdint>
#include <optional>

#include "pnmem/detail/saturating.hpp"
#include "pnmem/host_sample.hpp"
#include "pnmem/mem_level.hpp"
#include "pnmem/provenance.hpp"

namespace pnmem::macos {

// The page counts of vm_statistics64 this library uses.
struct vm_page_counts {
  std::uint64_t free = 0;
  std::uint64_t inactive = 0;
  std::uint64_t purgeable = 0;
};

constexpr std::uint64_t pages_to_bytes(std::uint64_t pages, std::uint64_t page_size_bytes) noexcept {
  return detail::sat_mul(pages, page_size_bytes);
}

constexpr std::uint64_t available_bytes(const vm_page_counts& c, std::uint64_t page_size_bytes,
                                        std::uint64_t total_bytes) noexcept {
  const std::uint64_t pages = detail::sat_add(detail::sat_add(c.free, c.inactive), c.purgeable);
  const std::uint64_t bytes = pages_to_bytes(pages, page_size_bytes);
  return bytes < total_bytes ? bytes : total_bytes;
}

inline constexpr int pressure_normal = 1;
inline constexpr int pressure_warn = 2;
inline constexpr int pressure_critical = 4;

constexpr std::optional<mem_level> level_from_pressure(int sysctl_value) noexcept {
  switch (sysctl_value) {
    case pressure_normal: return mem_level::ok;
    case pressure_warn: return mem_level::tight;
    case pressure_critical: return mem_level::critical;
    default: return std::nullopt;
  }
}

// What the three reads gave; a read that failed is std::nullopt.
struct vm_reading {
  std::optional<std::uint64_t> total_bytes;  // hw.memsize
  std::optional<vm_page_counts> pages;       // host_statistics64
  std::uint64_t page_size_bytes = 0;         // vm_kernel_page_size / hw.pagesize
  std::optional<int> pressure;               // kern.memorystatus_vm_pressure_level
};

constexpr host_sample make_host_sample(const vm_reading& r) noexcept {
  host_sample h;
  sample_provenance& p = h.provenance;
  // Without a total the host is "not sampled" (total 0): skipped by the level rules.
  if (r.total_bytes && *r.total_bytes != 0 && r.pages && r.page_size_bytes != 0) {
    h.total_bytes = *r.total_bytes;
    h.avail_bytes = available_bytes(*r.pages, r.page_size_bytes, h.total_bytes);
    p.meminfo_total_bytes = h.total_bytes;
    p.meminfo_avail_bytes = h.avail_bytes;
    p.mark_read(host_source::macos_vm);
  } else {
    p.mark_failed(host_source::macos_vm);
  }
  if (r.pressure) {
    if (const auto l = level_from_pressure(*r.pressure)) {
      h.os_level = *l;
      p.mark_read(host_source::macos_pressure);
    } else {
      p.mark_failed(host_source::macos_pressure);
    }
  } else {
    p.mark_failed(host_source::macos_pressure);
  }
  return h;
}

}  // namespace pnmem::macos
