// tests/watcher_fakes.hpp - host samples the watcher tests set on the library's fakes.
// The fakes themselves (pnmem/fake_clock.hpp, pnmem/fake_sampler.hpp) are public,
// beside host_sample.hpp, for engines to test with too. Test code only.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "pnmem/fake_clock.hpp"
#include "pnmem/fake_sampler.hpp"
#include "pnmem/host_sample.hpp"
#include "pnmem/level.hpp"
#include "pnmem/units.hpp"
#include "pnmem/watcher.hpp"

namespace pnmem::test {

// 64 GiB, 60 GiB available: OK.
inline host_sample roomy() {
  host_sample h;
  h.total_bytes = 64 * GiB;
  h.avail_bytes = 60 * GiB;
  h.provenance.mark_read(host_source::meminfo);
  return h;
}

// roomy()'s box with MemAvailable inside the byte band of `l`.
inline host_sample at_level(mem_level l) {
  host_sample h = roomy();
  const std::uint64_t r = box_reserve_bytes(h.total_bytes);
  switch (l) {
    case mem_level::ok: break;
    case mem_level::watch: h.avail_bytes = r + r / 2; break;
    case mem_level::tight: h.avail_bytes = r + r / 8; break;
    case mem_level::critical: h.avail_bytes = r; break;
  }
  return h;
}

// A fake host that samples as roomy().
inline std::shared_ptr<fake_host> roomy_host() {
  auto host = std::make_shared<fake_host>();
  host->next = roomy();
  return host;
}

// Watcher options that poll every `interval` at OK: for tests that race the poll thread.
inline watcher_options polling_every(std::chrono::milliseconds interval) {
  watcher_options o;
  o.poll_interval = interval;
  return o;
}

}  // namespace pnmem::test
