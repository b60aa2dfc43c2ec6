// pnmem/platform_sampler.hpp - the host sampler of the platform being compiled for.
//
// One compile-time choice, made here and nowhere else (the CLI and the C ABI both
// take it from this header):
//
//   Linux   pnmem::linux_sampler  (/proc, PSI with triggers, cgroup v1/v2)
//   macOS   pnmem::macos_sampler  (sysctl, Mach VM statistics, memorystatus)
//   other   none: PNMEM_HAS_PLATFORM_SAMPLER is 0 and the names below are absent
//
// Every choice is a pnmem::host_sampler with an options struct, so code written
// against platform_sampler / platform_sampler_options builds on each platform:
//
//   pnmem::watcher<pnmem::platform_sampler> w{pnmem::platform_sampler{pnmem::platform_sampler_options{}}};
#pragma once

#include <string_view>

#if defined(__linux__)
#include "pnmem/linux/linux_sampler.hpp"
#define PNMEM_HAS_PLATFORM_SAMPLER 1
namespace pnmem {
using platform_sampler = linux_sampler;
using platform_sampler_options = linux_sampler_options;
inline constexpr std::string_view platform_name = "linux";
}  // namespace pnmem
#elif defined(__APPLE__)
#include "pnmem/macos/macos_sampler.hpp"
#define PNMEM_HAS_PLATFORM_SAMPLER 1
namespace pnmem {
using platform_sampler = macos_sampler;
using platform_sampler_options = macos_sampler_options;
inline constexpr std::string_view platform_name = "macos";
}  // namespace pnmem
#else
#define PNMEM_HAS_PLATFORM_SAMPLER 0
#endif

#if PNMEM_HAS_PLATFORM_SAMPLER
namespace pnmem {
static_assert(host_sampler<platform_sampler>);
}  // namespace pnmem
#endif
