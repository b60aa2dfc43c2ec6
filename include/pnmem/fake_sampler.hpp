// pnmem/fake_sampler.hpp - a host sampler that returns what a test says: for testing code that uses a watcher.
//
// The host_sampler counterpart of the CUDA adapter's fake backend. The test and
// the sampler (owned by the watcher) share one fake_host; the test sets the next
// sample, the watcher's samples return it.
//
//   auto host = std::make_shared<pnmem::fake_host>();
//   host->set(sample_at_8_gib);                       // every sample from now on
//   pnmem::watcher w{pnmem::fake_sampler{host}};
//   w.poll_now();                                     // w.read() now shows it
//   CHECK(host->sample_count() == 1);
//
// Thread-safe through `mu`: set() and sample_count() take it; code that writes
// the fields directly while a watcher thread runs must take it too.
#pragma once

#include <memory>
#include <mutex>

#include "pnmem/host_sample.hpp"

namespace pnmem {

struct fake_host {
  std::mutex mu;
  host_sample next;        // what sample() returns ...
  host_sample other;       // ... or, with `alternate`, every other sample returns this
  bool alternate = false;
  int samples = 0;         // sample() calls so far

  void set(const host_sample& h) {
    std::lock_guard<std::mutex> lk(mu);
    next = h;
  }
  int sample_count() {
    std::lock_guard<std::mutex> lk(mu);
    return samples;
  }
};

struct fake_sampler {
  std::shared_ptr<fake_host> host = std::make_shared<fake_host>();

  host_sample sample() {
    std::lock_guard<std::mutex> lk(host->mu);
    ++host->samples;
    return host->alternate && (host->samples % 2 == 0) ? host->other : host->next;
  }
};

static_assert(host_sampler<fake_sampler>);

}  // namespace pnmem
