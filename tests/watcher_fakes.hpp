// tests/watcher_fakes.hpp - a clock and a host sampler the watcher tests drive by hand.
// Shared by test_watcher, test_faults and test_host_ledger. Test code only.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>

#include "pnmem/host_sample.hpp"
#include "pnmem/level.hpp"
#include "pnmem/units.hpp"

namespace pnmem::test {

// Time that only moves when the test says so, forwards or backwards. Copies share one time.
struct fake_clock {
  using rep = std::int64_t;
  using period = std::nano;
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<fake_clock>;

  std::shared_ptr<std::atomic<std::int64_t>> ns = std::make_shared<std::atomic<std::int64_t>>(1'000'000'000);
  time_point now() const { return time_point(duration(ns->load())); }
  void advance(duration d) const { ns->fetch_add(d.count()); }
  void set(std::int64_t v) const { ns->store(v); }
};

// The host as the test wants it; shared between the test and the sampler the watcher
// owns. `alternate`: every other sample is `other`.
struct fake_host {
  std::mutex mu;
  host_sample next;
  host_sample other;
  bool alternate = false;
  int samples = 0;
};

struct fake_sampler {
  std::shared_ptr<fake_host> host;
  host_sample sample() {
    std::lock_guard<std::mutex> lk(host->mu);
    ++host->samples;
    return host->alternate && (host->samples % 2 == 0) ? host->other : host->next;
  }
};

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
  const std::uint64_t r = host_reserve_bytes(h.total_bytes);
  switch (l) {
    case mem_level::ok: break;
    case mem_level::watch: h.avail_bytes = r + r / 2; break;
    case mem_level::tight: h.avail_bytes = r + r / 8; break;
    case mem_level::critical: h.avail_bytes = r; break;
  }
  return h;
}

template <class Host>
void set_next(const std::shared_ptr<Host>& host, host_sample h) {
  std::lock_guard<std::mutex> lk(host->mu);
  host->next = h;
}

template <class Host>
int samples_of(const std::shared_ptr<Host>& host) {
  std::lock_guard<std::mutex> lk(host->mu);
  return host->samples;
}

}  // namespace pnmem::test
