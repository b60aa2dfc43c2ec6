// pnmem/engine/gate_status.hpp - what a back-pressure gate's acquire ended with.
#pragma once

#include <cstdint>
#include <string_view>

namespace pnmem {

enum class gate_status : std::uint8_t {
  acquired,    // a slot is yours
  overloaded,  // pushed level CRITICAL: shed, "overloaded, retry" (the seed's 503)
  timed_out,   // the deadline passed first (try_acquire: a slot was not free at once)
  cancelled,   // the stop_token was stopped first
  queue_full,  // max_waiters acquirers already waiting
};

constexpr std::string_view to_string(gate_status s) noexcept {
  switch (s) {
    case gate_status::acquired: return "acquired";
    case gate_status::overloaded: return "overloaded";
    case gate_status::timed_out: return "timed_out";
    case gate_status::cancelled: return "cancelled";
    case gate_status::queue_full: return "queue_full";
  }
  return "invalid";
}

}  // namespace pnmem
