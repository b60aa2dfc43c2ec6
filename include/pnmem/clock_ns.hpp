// pnmem/clock_ns.hpp - clock readings as the int64 nanoseconds every snapshot carries.
//
// mem_state's times (sample_time_ns, host_read_ns) and the ledger's are nanoseconds
// since the clock's epoch, of std::chrono::steady_clock unless a watcher was given
// another clock. One conversion, so that every producer means the same number.
#pragma once

#include <chrono>
#include <cstdint>

namespace pnmem {

// `t` as nanoseconds since its clock's epoch.
template <class Clock, class Duration>
constexpr std::int64_t to_ns(std::chrono::time_point<Clock, Duration> t) noexcept {
  return static_cast<std::int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
}

// std::chrono::steady_clock::now() in nanoseconds.
inline std::int64_t steady_now_ns() noexcept { return to_ns(std::chrono::steady_clock::now()); }

}  // namespace pnmem
