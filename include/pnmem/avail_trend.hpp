// pnmem/avail_trend.hpp - how fast host available memory is coming back (or going), in bytes per second.
//
// A denied request's retry hint (retry_hint.hpp) needs to know whether the bytes it lacked are on their
// way back: a co-tenant that stopped ramping, a cache the kernel is dropping. One poll interval's change
// of MemAvailable is noisy (a page-cache burst, one allocation), so the trend is an exponentially
// weighted mean of the interval rates with time constant `tau`: an interval of length dt moves it
// dt / tau of the way towards that interval's rate (all the way once dt >= tau). After a steady ramp
// of rate r for a few tau the trend reads r; after the ramp stops it decays towards 0 at e^(-t/tau).
//
// Positive: available memory is rising. Unknown (no host total: the host was not read), or a clock that
// went back, starts the trend over at 0; a reading at the same instant as the last is ignored.
//
// Not thread-safe: the watcher calls it under its sampling mutex.
#pragma once

#include <cstdint>

namespace pnmem {

class avail_trend {
 public:
  // The time constant: about ten of the pressure poll's 100-250 ms intervals, short enough that a
  // ramp that stopped is seen within a couple of seconds.
  static constexpr std::int64_t default_tau_ns = 2'000'000'000;

  constexpr explicit avail_trend(std::int64_t tau_ns = default_tau_ns) noexcept
      : tau_ns_(tau_ns > 0 ? tau_ns : default_tau_ns) {}

  // Records MemAvailable `avail` read at `now_ns` (`known` false: the host was not read) and returns the
  // trend in bytes per second.
  constexpr double update(std::int64_t now_ns, std::uint64_t avail, bool known) noexcept {
    if (!known) {
      has_last_ = false;
      rate_ = 0.0;
      return rate_;
    }
    // A second reading at the same instant (two poll_now() calls racing, a test's clock) teaches nothing:
    // the trend stays, and the interval runs on from the earlier reading.
    if (has_last_ && now_ns == last_ns_) return rate_;
    if (has_last_ && now_ns > last_ns_) {
      const double dt_ns = static_cast<double>(now_ns - last_ns_);
      // The signed difference of two unsigned byte counts, without overflow.
      const double delta = avail >= last_avail_ ? static_cast<double>(avail - last_avail_)
                                                : -static_cast<double>(last_avail_ - avail);
      const double interval_rate = delta * 1e9 / dt_ns;
      const double weight = dt_ns >= static_cast<double>(tau_ns_) ? 1.0 : dt_ns / static_cast<double>(tau_ns_);
      rate_ += (interval_rate - rate_) * weight;
    } else if (has_last_) {
      rate_ = 0.0;  // the clock went back: no rate to learn from, start over
    }
    has_last_ = true;
    last_ns_ = now_ns;
    last_avail_ = avail;
    return rate_;
  }

  constexpr double rate() const noexcept { return rate_; }

 private:
  std::int64_t tau_ns_;
  bool has_last_ = false;
  std::int64_t last_ns_ = 0;
  std::uint64_t last_avail_ = 0;
  double rate_ = 0.0;
};

}  // namespace pnmem
