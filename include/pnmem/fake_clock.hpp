// pnmem/fake_clock.hpp - a clock that moves only when told: for testing code that uses a watcher.
//
// A std::chrono clock (the watcher's Clock parameter): time stands still until
// advance() or set() moves it, forwards or backwards, so a test of hysteresis,
// dwell times or snapshot ages never sleeps and never flakes on a busy machine.
// Copies share one time: the test keeps one copy, the watcher another.
//
//   pnmem::fake_clock clock;
//   pnmem::watcher<pnmem::fake_sampler, pnmem::fake_clock> w{pnmem::fake_sampler{host}, options, clock};
//   clock.advance(std::chrono::seconds(5));
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

namespace pnmem {

struct fake_clock {
  using rep = std::int64_t;
  using period = std::nano;
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<fake_clock>;
  static constexpr bool is_steady = false;  // it may be set back

  // Starts at 1 s: a time of 0 reads as "never sampled" in a snapshot.
  std::shared_ptr<std::atomic<std::int64_t>> ns = std::make_shared<std::atomic<std::int64_t>>(1'000'000'000);

  time_point now() const { return time_point(duration(ns->load())); }
  void advance(duration d) const { ns->fetch_add(d.count()); }
  void set(std::int64_t v) const { ns->store(v); }
};

}  // namespace pnmem
