// pnmem/host_sample.hpp - what a host sampler produces, and the contract samplers meet.
//
// A sampler (adapters/linux, adapters/macos, or a fake in tests) returns the host
// half of a snapshot as a fresh value; the watcher copies it into its mem_state
// beside the die numbers it was fed. Samplers never see or touch die fields,
// levels or sequence numbers.
//
// A source that is missing or unreadable leaves its fields at 0 (unknown) and is
// marked in the provenance: a host total of 0 is skipped by the level rules, PSI
// of 0 is no pressure. Never a false CRITICAL.
#pragma once

#include "pnmem/detail/cxx.hpp"  // PNMEM_HAS_*: which of the standard headers below this C++ has

#include <chrono>
#if PNMEM_HAS_CONCEPTS
#include <concepts>
#endif
#include <cstdint>
#if !PNMEM_HAS_CONCEPTS
#include <type_traits>
#include <utility>
#endif

#include "pnmem/mem_level.hpp"
#include "pnmem/mem_state.hpp"
#include "pnmem/provenance.hpp"

namespace pnmem {

struct host_sample {
  std::uint64_t total_bytes = 0;           // container-aware: min(MemTotal, effective limit); 0 = unknown
  std::uint64_t avail_bytes = 0;           // container-aware: min(MemAvailable, limit - working set)
  double psi_some_avg10 = 0.0;             // percent
  double psi_full_avg10 = 0.0;
  double psi_some_rate = 0.0;              // percent of the interval since the previous sample
  double psi_full_rate = 0.0;
  // The kernel's cumulative full-stall counter (total=, microseconds) at this sample, for the
  // watcher's sustained rate over policy::psi_full_window_ms; psi_full_total_known false when
  // the sampler has none (no PSI, or a sampler that only reports averages).
  std::uint64_t psi_full_total_us = 0;
  bool psi_full_total_known = false;
  std::uint64_t cgroup_current_bytes = 0;  // usage of the limiting cgroup (0 = none)
  std::uint64_t cgroup_high_bytes = 0;     // effective memory.high over the ancestors (0 = unset)
  std::uint64_t cgroup_max_bytes = 0;      // effective memory.max / limit_in_bytes over the ancestors (0 = unset)
  mem_level os_level = mem_level::ok;      // the OS's own verdict (macOS); ok elsewhere
  sample_provenance provenance{};
};

// Copies the host half into a snapshot; die fields, level and seq are untouched.
constexpr void assign_host(mem_state& s, const host_sample& h) noexcept {
  s.host_total_bytes = h.total_bytes;
  s.host_avail_bytes = h.avail_bytes;
  s.host_psi_some_avg10 = h.psi_some_avg10;
  s.host_psi_full_avg10 = h.psi_full_avg10;
  s.host_psi_some_rate = h.psi_some_rate;
  s.host_psi_full_rate = h.psi_full_rate;
  s.cgroup_current_bytes = h.cgroup_current_bytes;
  s.cgroup_high_bytes = h.cgroup_high_bytes;
  s.cgroup_max_bytes = h.cgroup_max_bytes;
  s.host_os_level = h.os_level;
  s.provenance = h.provenance;
}

// Why a sampler's wait returned.
enum class wake : std::uint8_t {
  timeout,      // the interval passed
  event,        // a pressure event (PSI trigger): sample now
  interrupted,  // interrupt() was called (the watcher is stopping)
};

// C++17 (no concepts: detail/cxx.hpp): both below are constexpr bools with the same answers,
// and watcher<Sampler> static_asserts host_sampler<Sampler>.
#if PNMEM_HAS_CONCEPTS
// Every sampler can sample.
template <class S>
concept host_sampler = requires(S& s) {
  { s.sample() } -> std::same_as<host_sample>;
};

// Some samplers can also wait for pressure events (Linux PSI triggers). The
// watcher's thread then waits through them instead of a plain timed wait;
// interrupt() must be callable from any thread and make the current or next
// wait return wake::interrupted.
template <class S>
concept event_sampler = host_sampler<S> && requires(S& s, std::chrono::nanoseconds d) {
  { s.wait_for(d) } -> std::same_as<wake>;
  { s.interrupt() } -> std::same_as<void>;
};
#else
namespace detail {
template <class S, class = void>
struct is_host_sampler : std::false_type {};
template <class S>
struct is_host_sampler<S, std::void_t<decltype(std::declval<S&>().sample())>>
    : std::is_same<decltype(std::declval<S&>().sample()), host_sample> {};
template <class S, class = void>
struct waits_for_events : std::false_type {};
template <class S>
struct waits_for_events<S, std::void_t<decltype(std::declval<S&>().wait_for(std::declval<std::chrono::nanoseconds&>())),
                                       decltype(std::declval<S&>().interrupt())>>
    : std::bool_constant<std::is_same_v<decltype(std::declval<S&>().wait_for(std::declval<std::chrono::nanoseconds&>())),
                                        wake> &&
                         std::is_same_v<decltype(std::declval<S&>().interrupt()), void>> {};
}  // namespace detail

template <class S>
inline constexpr bool host_sampler = detail::is_host_sampler<S>::value;

template <class S>
inline constexpr bool event_sampler = host_sampler<S> && detail::waits_for_events<S>::value;
#endif

}  // namespace pnmem
