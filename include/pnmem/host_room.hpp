// pnmem/host_room.hpp - how many host bytes may be taken, or must be given back, for the host's
// byte bands to stay at, or come back to, a level.
//
// The bands (level.hpp) put MemAvailable against the reserve r:
//
//   level     MemAvailable at least      (slack = avail - r)
//   OK        2r                         slack >= r
//   WATCH     r + r/4                    slack >= r/4
//   TIGHT     r + 1                      avail > r
//   CRITICAL  0
//
// so for each level the room is the distance to that floor: above it, the bytes that may be taken
// with the bands still at that level or better (sizing a cache so the box stays calm: take_bytes(OK),
// not "everything above the reserve", which leaves it TIGHT); below it, the bytes to free to get back
// there (shedding a cache: free exactly free_bytes(WATCH), then credit them to the ledger,
// engine/host_ledger.hpp, and the next answer is at WATCH without waiting for a sample).
//
// Host bytes only: a PSI stall or a die keeps the level up on its own (explain_level in level.hpp says
// which source put it where); freeing host memory does not end a stall elsewhere on the box.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "pnmem/detail/saturating.hpp"
#include "pnmem/mem_level.hpp"
#include "pnmem/mem_state.hpp"
#include "pnmem/policy.hpp"

namespace pnmem {

// The least MemAvailable at which the bands read `l` or better, for reserve `r`.
// Anything at or below r is CRITICAL, so every other floor is at least r + 1 (a reserve under 4 B
// has r/4 = 0, and a reserve of 0 makes 2r = 0).
constexpr std::uint64_t host_floor_bytes(mem_level l, std::uint64_t r) noexcept {
  const std::uint64_t above = detail::sat_add(r, 1);
  const auto at_least_above = [above](std::uint64_t f) { return f > above ? f : above; };
  switch (l) {
    case mem_level::ok: return at_least_above(detail::sat_add(r, r));
    case mem_level::watch: return at_least_above(detail::sat_add(r, r / 4));
    case mem_level::tight: return above;
    case mem_level::critical: break;
  }
  return 0;
}

struct host_room {
  static constexpr std::size_t levels = static_cast<std::size_t>(mem_level_count);
  bool sampled = false;            // false: the host was not sampled (total 0): no room is known, all zeros
  mem_level level = mem_level::ok; // the bands' level on avail_bytes
  std::uint64_t avail_bytes = 0;   // the MemAvailable measured on (a ledger's: sampled - pending + credited)
  std::uint64_t reserve_bytes = 0;
  std::uint64_t pending_bytes = 0;   // a ledger's room: promised and not yet sampled (taken off avail_bytes)
  std::uint64_t credited_bytes = 0;  // a ledger's room: freed and not yet sampled (added to avail_bytes)
  // Indexed by level (OK, WATCH, TIGHT, CRITICAL): bytes that may be taken with the bands still at
  // that level or better, and bytes to free to bring them back to it. At most one of the two is
  // non-zero for a level; CRITICAL's take is all of avail_bytes and its free 0.
  std::array<std::uint64_t, levels> take{};
  std::array<std::uint64_t, levels> give_back{};

  constexpr std::uint64_t take_bytes(mem_level l) const noexcept { return take[static_cast<std::size_t>(l)]; }
  constexpr std::uint64_t free_bytes(mem_level l) const noexcept { return give_back[static_cast<std::size_t>(l)]; }
};

// The room on `avail` bytes available of `total` (0: not sampled) above reserve `reserve`.
constexpr host_room room_for(std::uint64_t total, std::uint64_t avail, std::uint64_t reserve) noexcept {
  host_room out;
  if (total == 0) return out;
  out.sampled = true;
  out.avail_bytes = avail;
  out.reserve_bytes = reserve;
  out.level = mem_level::critical;
  for (std::size_t i = host_room::levels; i-- > 0;) {
    const auto l = static_cast<mem_level>(i);
    const std::uint64_t floor = host_floor_bytes(l, reserve);
    if (avail >= floor) {
      out.take[i] = avail - floor;
      out.level = l;
    } else {
      out.give_back[i] = floor - avail;
    }
  }
  return out;
}

// A snapshot's room: its MemAvailable against its own reserve (policy.hpp host_reserve_bytes(s, p)).
constexpr host_room room_for(const mem_state& s, const policy& p = default_policy) noexcept {
  return room_for(s.host_total_bytes, s.host_avail_bytes, host_reserve_bytes(s, p));
}

// Making room for a cache insert (host_ledger::make_room): a cache (a prompt cache, offloaded KV) about
// to grow by `bytes` may grow while the host bands stay at WATCH or better after it; when they would
// not, its own older entries make the room. The bytes to free first so the insert fits at WATCH:
//   bytes + the WATCH floor - avail   (0 when it fits already; the whole way back to WATCH below it)
// Not sampled: 0 (nothing is known to be short).
constexpr std::uint64_t insert_shortfall_bytes(std::uint64_t bytes, const host_room& r) noexcept {
  if (!r.sampled) return 0;
  const std::uint64_t floor = host_floor_bytes(mem_level::watch, r.reserve_bytes);
  return detail::sat_sub(detail::sat_add(bytes, floor), r.avail_bytes);
}

}  // namespace pnmem
