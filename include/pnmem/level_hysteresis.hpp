// pnmem/level_hysteresis.hpp - when a lower level may be published (levels must not flap).
//
// A higher level is published on the first sample that shows it; a lower one
// only after the raw level stayed below the published one for `dwell` (a clock
// that goes back restarts the dwell). A dwell of 0 is exactly the seed: every
// sample's level is published as it is.
//
// Not thread-safe: the watcher calls it under its write mutex.
#pragma once

#include <chrono>
#include <cstdint>

#include "pnmem/mem_level.hpp"

namespace pnmem {

class level_hysteresis {
 public:
  explicit level_hysteresis(std::chrono::nanoseconds dwell) noexcept : dwell_(dwell) {}

  // The level to publish for a raw level observed at `now_ns`.
  mem_level update(mem_level raw, std::int64_t now_ns) noexcept {
    if (raw >= published_) {
      published_ = raw;
      below_ = false;
      return published_;
    }
    if (dwell_.count() <= 0) {
      published_ = raw;
      return published_;
    }
    if (!below_) {
      below_ = true;
      below_since_ns_ = now_ns;
    } else {
      // A clock that went backwards restarts the dwell from now: the jump never
      // counts as time waited, and the level is not held for as long as the jump
      // was (hours, for a wall clock set back) either.
      if (now_ns < below_since_ns_) below_since_ns_ = now_ns;
      // Unsigned: the difference of any two int64 times, with no overflow.
      const std::uint64_t waited = static_cast<std::uint64_t>(now_ns) - static_cast<std::uint64_t>(below_since_ns_);
      if (waited >= static_cast<std::uint64_t>(dwell_.count())) {
        published_ = raw;
        below_ = false;
      }
    }
    return published_;
  }

  mem_level published() const noexcept { return published_; }
  // When the published level steps down if the raw level stays below it: below-since plus the dwell;
  // 0 when no step down is pending (the last raw level was not below, or there is no dwell).
  std::int64_t step_down_at_ns() const noexcept {
    if (!below_ || dwell_.count() <= 0) return 0;
    const std::int64_t at = below_since_ns_ + static_cast<std::int64_t>(dwell_.count());
    return at > 0 ? at : 1;  // 0 means "none": a step down due at the epoch reads as 1 ns after it
  }

 private:
  std::chrono::nanoseconds dwell_;
  mem_level published_ = mem_level::ok;
  bool below_ = false;               // raw level has been below published_ ...
  std::int64_t below_since_ns_ = 0;  // ... since this time
};

}  // namespace pnmem
