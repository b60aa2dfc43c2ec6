// pnmem/macos/macos_sampler.hpp - host memory on macOS (a pnmem::host_sampler).
//
// Built only on macOS. What it reads and how the numbers are combined is in
// vm_arith.hpp, which is pure and tested on every platform.
#pragma once

#include "pnmem/host_sample.hpp"

namespace pnmem {

class macos_sampler {
 public:
  // One fresh sample: hw.memsize, host_statistics64, kern.memorystatus_vm_pressure_level.
  host_sample sample();
};

static_assert(host_sampler<macos_sampler>);

}  // namespace pnmem
