// pnmem/macos/macos_sampler.hpp - host memory on macOS (a pnmem::host_sampler).
//
// Built only on macOS. What it reads and how the numbers are combined is in
// vm_arith.hpp, which is pure and tested on every platform.
#pragma once

#include "pnmem/host_sample.hpp"

namespace pnmem {

// Nothing to configure yet; here so that every platform's sampler is built from its options
// (pnmem::platform_sampler_options, platform_sampler.hpp).
struct macos_sampler_options {};

class macos_sampler {
 public:
  macos_sampler() = default;
  explicit macos_sampler(macos_sampler_options) {}

  // One fresh sample: hw.memsize, host_statistics64, kern.memorystatus_vm_pressure_level.
  host_sample sample();
};

static_assert(host_sampler<macos_sampler>);

}  // namespace pnmem
