// pnmem/host_room.hpp: the bytes to take or give back for the host's byte bands to sit at a level,
// checked against the bands themselves (level.hpp) one byte either side of every floor.
#include "pnmem/host_room.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "pnmem/level.hpp"

using namespace pnmem;

namespace {

constexpr std::uint64_t box = 8 * GiB;
constexpr std::uint64_t r8 = box_reserve_bytes(box);  // 1288490188: 15 % of 8 GiB, floored

// The seed's 8 GiB box: OK from 2r available, WATCH from r + r/4, TIGHT above r.
static_assert(host_floor_bytes(mem_level::ok, r8) == 2576980376);
static_assert(host_floor_bytes(mem_level::watch, r8) == 1288490188 + 322122547);
static_assert(host_floor_bytes(mem_level::tight, r8) == 1288490189);
static_assert(host_floor_bytes(mem_level::critical, r8) == 0);
static_assert(room_for(box, 3 * GiB, r8).level == mem_level::ok);
static_assert(room_for(box, 3 * GiB, r8).take_bytes(mem_level::ok) == 3 * GiB - 2576980376);
static_assert(room_for(box, GiB + GiB / 4, r8).level == mem_level::tight);
static_assert(room_for(box, GiB + GiB / 4, r8).free_bytes(mem_level::watch) == 1610612735 - (GiB + GiB / 4));

mem_level bands(std::uint64_t avail, std::uint64_t r) { return detail::host_bands(box, avail, r); }

}  // namespace

TEST_CASE("room_for: taking take_bytes(L) keeps the bands at L, one byte more does not") {
  const std::vector<std::uint64_t> reserves = {r8, 0, 1, 3, 4, 5, 256 * MiB, GiB, 7 * GiB + 3};
  for (const std::uint64_t r : reserves) {
    std::vector<std::uint64_t> avails = {0, 1, box};
    for (int l = 0; l < mem_level_count; ++l) {
      const std::uint64_t f = host_floor_bytes(static_cast<mem_level>(l), r);
      for (const std::uint64_t d : {0ULL, 1ULL, 2ULL, 4096ULL}) {
        avails.push_back(f + d);
        if (f >= d) avails.push_back(f - d);
      }
    }
    for (const std::uint64_t avail : avails) {
      CAPTURE(r);
      CAPTURE(avail);
      const host_room room = room_for(box, avail, r);
      REQUIRE(room.sampled);
      CHECK(room.level == bands(avail, r));
      CHECK(room.avail_bytes == avail);
      CHECK(room.reserve_bytes == r);
      for (int l = 0; l < mem_level_count; ++l) {
        const auto level = static_cast<mem_level>(l);
        CAPTURE(l);
        const std::uint64_t take = room.take_bytes(level);
        const std::uint64_t give = room.free_bytes(level);
        CHECK((take == 0 || give == 0));
        if (level >= room.level) {
          // Already there: give nothing; take `take` and still be at `level` or better, one more and not.
          CHECK(give == 0);
          CHECK(bands(avail - take, r) <= level);
          if (take < avail) CHECK(bands(avail - take - 1, r) > level);
        } else {
          // Worse than `level`: free exactly `give` to reach it; a byte less is not enough.
          CHECK(take == 0);
          REQUIRE(give > 0);
          CHECK(bands(avail + give, r) <= level);
          CHECK(bands(avail + give - 1, r) > level);
        }
      }
      CHECK(room.take_bytes(mem_level::critical) == avail);
      CHECK(room.free_bytes(mem_level::critical) == 0);
    }
  }
}

TEST_CASE("room_for: an unsampled host has no room to give") {
  const host_room room = room_for(0, 0, r8);
  CHECK_FALSE(room.sampled);
  CHECK(room.level == mem_level::ok);
  for (int l = 0; l < mem_level_count; ++l) {
    CHECK(room.take_bytes(static_cast<mem_level>(l)) == 0);
    CHECK(room.free_bytes(static_cast<mem_level>(l)) == 0);
  }
}

TEST_CASE("room_for(mem_state): a container's own reserve, as the level uses") {
  mem_state s{};
  s.host_total_bytes = GiB;
  s.cgroup_max_bytes = GiB;  // the total is the limit: the reserve scales down to 256 MiB
  s.host_avail_bytes = 400 * MiB;
  const host_room room = room_for(s);
  CHECK(room.reserve_bytes == 256 * MiB);
  CHECK(room.level == host_level(s));
  CHECK(room.level == mem_level::watch);  // slack 144 MiB >= 64 MiB, < 256 MiB
  CHECK(room.free_bytes(mem_level::ok) == 512 * MiB - 400 * MiB);
  CHECK(room.take_bytes(mem_level::watch) == 400 * MiB - 320 * MiB);
}
