// The host-sampler conformance suite (host_sampler_conformance.hpp) over the samplers
// that build on every platform: the public fake, and the macOS sampler's arithmetic
// (vm_arith.hpp: what macos_sampler does with its three reads) behind a sampler that
// returns fixed reads. The Linux sampler runs the same suite on fixture trees in
// tests/linux/test_linux_conformance.cpp.
#include "host_sampler_conformance.hpp"

#include <doctest/doctest.h>

#include "pnmem/fake_sampler.hpp"
#include "pnmem/macos/vm_arith.hpp"
#include "pnmem/units.hpp"

namespace {

using namespace pnmem;

struct fake_rig {
  using sampler = fake_sampler;
  static constexpr host_source total_source = host_source::meminfo;

  static sampler with(const host_sample& h) {
    sampler s;
    s.host->set(h);
    return s;
  }
  sampler roomy() {
    host_sample h;
    h.total_bytes = 64 * GiB;
    h.avail_bytes = 60 * GiB;
    h.provenance.mark_read(host_source::meminfo);
    return with(h);
  }
  sampler unreadable() {
    host_sample h;
    h.provenance.mark_failed(host_source::meminfo);
    return with(h);
  }
};

// The macOS sampler's reads, fixed: everything it does with them is vm_arith.hpp.
struct vm_reading_sampler {
  macos::vm_reading reading;
  host_sample sample() const { return macos::make_host_sample(reading); }
};

struct macos_arith_rig {
  using sampler = vm_reading_sampler;
  static constexpr host_source total_source = host_source::macos_vm;

  sampler roomy() {
    macos::vm_reading r;
    r.total_bytes = 32 * GiB;
    r.page_size_bytes = 16384;
    r.pages = macos::vm_page_counts{.free = (8 * GiB) / 16384, .inactive = (8 * GiB) / 16384, .purgeable = 0};
    r.pressure = macos::pressure_normal;
    return {r};
  }
  sampler unreadable() {
    macos::vm_reading r;  // hw.memsize and host_statistics64 failed
    r.pressure = macos::pressure_normal;
    return {r};
  }
};

}  // namespace

TEST_CASE_TEMPLATE_INVOKE(host_sampler_conformance, fake_rig, macos_arith_rig);
