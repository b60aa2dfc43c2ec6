// pnmem/psi_window.hpp - the full-stall rate over a window of at least N ms, from PSI's total= counter.
//
// One poll interval's stall rate (the sampler's psi_full_rate) sees a stall within 100 ms, which is why
// pnmem reacts before avg10 moves; but one 100 ms interval of stall is a blip (a model load, a page-cache
// burst), and the seed sets its reject threshold so that a transient stall only reaches TIGHT. So a fresh
// stall is CRITICAL only when it holds over a window: the rate between the newest reading at least
// `window` old and now (the window is therefore between `window` and `window` plus one poll interval).
// Until that much history exists the rate is unknown, reported as 0: avg10 still confirms on its own.
//
// A gap (a reading without a counter) or a counter that went back (another PSI file, a reset) starts the
// history over; a clock that went back does too. Holds at most `capacity` readings: when full, the
// second-oldest is dropped, so the oldest stays a valid reference (the window only widens).
//
// Not thread-safe: the watcher calls it under its sampling mutex.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace pnmem {

// The kernel's PSI averages (avg10, avg60, avg300) are updated once per 2 s period, and each period's stall
// enters them in whole percent (kernel/sched/psi.c calc_avgs: pct = time * 100 / period, truncated): a period
// with under 1 % of it stalled, 20 ms, never moves avg10, and the seed's rules (full avg10 > 0, some avg10 > 0)
// never see it. One poll interval's stall rate goes by the same resolution: a stall counts when the last
// kernel period (at least 2 s, or as much history as there is) holds at least 1 % of it stalled. Without this
// a box with a trickle of microsecond stalls (reclaim in a container near its limit) would read TIGHT
// on every poll while its avg10 stays 0.00.
inline constexpr std::int64_t psi_kernel_period_ns = 2'000'000'000;

// True when `stall_us` over `span_ns` is a stall the kernel's averages register: at least 1 % of the span,
// and of a whole 2 s period where the span is shorter (20 ms).
constexpr bool psi_stall_registers(std::uint64_t stall_us, std::uint64_t span_ns) noexcept {
  const std::uint64_t basis_ns =
      span_ns > static_cast<std::uint64_t>(psi_kernel_period_ns) ? span_ns : static_cast<std::uint64_t>(psi_kernel_period_ns);
  // 1 % of basis_ns, in microseconds, rounded up: basis_ns / 100 / 1000.
  const std::uint64_t need_us = basis_ns / 100'000 + (basis_ns % 100'000 != 0 ? 1 : 0);
  return stall_us >= need_us;
}

class psi_window {
 public:
  static constexpr std::size_t capacity = 64;

  // Records a reading taken at `now_ns` and returns the percent of the last >= window_ns stalled, or 0
  // while the history is shorter than the window. `known` false (no counter this time) clears the history.
  constexpr double update(std::int64_t now_ns, std::uint64_t total_us, bool known, std::int64_t window_ns) noexcept {
    if (!known) {
      size_ = 0;
      return 0.0;
    }
    if (size_ > 0) {
      const reading& last = at(size_ - 1);
      if (now_ns < last.t_ns || total_us < last.total_us) size_ = 0;
    }
    push({now_ns, total_us});
    // Drop readings older than the newest one that is still at least a window old: it is the reference.
    while (size_ >= 2 && age(at(1), now_ns) >= window_ns) pop_front();
    const reading& ref = at(0);
    if (size_ < 2 || age(ref, now_ns) < window_ns || window_ns <= 0) return 0.0;
    const auto span_ns = static_cast<std::uint64_t>(now_ns) - static_cast<std::uint64_t>(ref.t_ns);
    const double pct = 100.0 * static_cast<double>(total_us - ref.total_us) * 1000.0 / static_cast<double>(span_ns);
    return pct > 100.0 ? 100.0 : pct;
  }

  constexpr std::size_t size() const noexcept { return size_; }

  // The stall between the oldest reading held and the newest, and the time between them: after update(),
  // the newest reading at least the window old (or the first one, while the history is shorter) to now.
  struct span {
    std::uint64_t stall_us = 0;
    std::uint64_t span_ns = 0;
  };
  constexpr span held() const noexcept {
    if (size_ < 2) return {};
    const reading& oldest = at(0);
    const reading& newest = at(size_ - 1);
    return {newest.total_us - oldest.total_us,
            static_cast<std::uint64_t>(newest.t_ns) - static_cast<std::uint64_t>(oldest.t_ns)};
  }

 private:
  struct reading {
    std::int64_t t_ns = 0;
    std::uint64_t total_us = 0;
  };

  static constexpr std::int64_t age(const reading& r, std::int64_t now_ns) noexcept {
    // Unsigned difference: no overflow for any pair of times (now_ns >= r.t_ns here).
    const std::uint64_t d = static_cast<std::uint64_t>(now_ns) - static_cast<std::uint64_t>(r.t_ns);
    return d > static_cast<std::uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<std::int64_t>(d);
  }

  constexpr const reading& at(std::size_t i) const noexcept { return ring_[(head_ + i) % capacity]; }

  constexpr void push(reading r) noexcept {
    if (size_ == capacity) {
      // Keep the oldest (the reference): shift it over the second-oldest.
      ring_[(head_ + 1) % capacity] = ring_[head_];
      head_ = (head_ + 1) % capacity;
      --size_;
    }
    ring_[(head_ + size_) % capacity] = r;
    ++size_;
  }

  constexpr void pop_front() noexcept {
    head_ = (head_ + 1) % capacity;
    --size_;
  }

  std::array<reading, capacity> ring_{};
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

}  // namespace pnmem
