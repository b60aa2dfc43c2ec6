// tests/c/test_c_hpp.cpp - pnmem/pnmem_c.hpp, the C ABI for a C++17 engine, compiled as C++17.
//
// A tree box (pnmem_watcher_options.root): 8 GiB, hour-long poll intervals, so samples come only when the
// test calls pnmem_watcher_poll_now. Each wrapper against the C call it wraps: explain and metrics_text
// whole at any length, Retry-After in seconds, a reservation that cancels itself, make_room with a
// lambda (and its exception rethrown), a subscription and shed hooks that end with their scope.
#include "pnmem/pnmem_c.hpp"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "c_check.h"
#include "c_tree.h"

namespace {

constexpr std::uint64_t MiB = std::uint64_t{1} << 20;
constexpr std::uint64_t GiB = std::uint64_t{1} << 30;
constexpr std::uint64_t total = 8 * GiB;
constexpr std::uint64_t reserve = 1288490188;  // 15 % of 8 GiB
constexpr std::uint64_t watch_floor = reserve + reserve / 4;

void meminfo(std::uint64_t avail) {
  tree_meminfo(total, avail);
  pnmem_watcher_poll_now();
}

std::uint64_t pending() {
  pnmem_room room;
  pnmem_room_init(&room);
  pnmem_host_room(&room);
  return room.pending_bytes;
}

}  // namespace

int main() {
  if (tree_make("hpp") != 0) return 1;
  tree_meminfo(total, (watch_floor + 64 * MiB + 1023) / 1024 * 1024);  // 64 MiB above WATCH's floor
  pnmem_watcher_options o;
  CHECK(pnmem_watcher_options_init(&o) == 0);
  o.poll_interval_ms = 3600000;
  o.pressure_poll_interval_ms = 3600000;
  o.root = tree_root;
  CHECK(pnmem_watcher_start_with(&o) == 0);

  // explain: the C line, whole, short or longer than any fixed buffer.
  pnmem_admit_answer a;
  {
    pnmem::c::reservation r = pnmem::c::reserve_bytes(1 * MiB, a);
    CHECK(a.status == PNMEM_ADMITTED && r);
    char line[1024];
    const int n = pnmem_explain(&a, line, sizeof line);
    CHECK(pnmem::c::explain(a) == std::string(line, static_cast<std::size_t>(n)));
    CHECK(pending() == 1 * MiB);
  }  // dropped unsettled: cancelled, its bytes back at once
  CHECK(pending() == 0);
  {
    // Long numbers, and a pending reservation so the line ends ", pending ...": past 256 characters.
    pnmem::c::reservation held = pnmem::c::reserve_bytes(10 * MiB, a);
    CHECK(held);
    pnmem::c::reservation r =
        pnmem::c::make_room(UINT64_MAX - 1, [](std::uint64_t) { return std::uint64_t{0}; }, a);
    CHECK(!r && a.status == PNMEM_CAPPED);
    const std::string long_line = pnmem::c::explain(a);
    CHECK(long_line.size() > 256);  // longer than explain's first buffer
    char line[1024];
    CHECK(pnmem_explain(&a, line, sizeof line) == static_cast<int>(long_line.size()));
    CHECK(long_line == line);
  }

  // make_room with a lambda: the cache is asked for the shortfall, and the insert reserved.
  std::vector<std::uint64_t> asked;
  {
    pnmem::c::reservation r = pnmem::c::make_room(96 * MiB, [&](std::uint64_t want) {
      asked.push_back(want);
      return want;
    }, a);
    CHECK(a.status == PNMEM_ADMITTED && r);
    CHECK(asked.size() == 1 && asked[0] >= 31 * MiB && asked[0] <= 33 * MiB);  // 96 - 64, the kB rounding aside
    pnmem::c::reservation moved = std::move(r);
    CHECK(!r && moved);
    moved.settle();
    CHECK(!moved);
    moved.settle();  // once only
  }
  pnmem_watcher_poll_now();  // the settle and the credit seen
  // What the callable throws comes out of make_room; nothing stays reserved.
  bool thrown = false;
  try {
    (void)pnmem::c::make_room(96 * MiB, [](std::uint64_t) -> std::uint64_t { throw std::runtime_error("cache gone"); }, a);
  } catch (const std::runtime_error& e) {
    thrown = std::strcmp(e.what(), "cache gone") == 0;
  }
  CHECK(thrown);
  CHECK(pending() == 0);

  // Retry-After in seconds, rounded up; metrics whole.
  meminfo(reserve / 2);  // CRITICAL
  CHECK(pnmem_check_bytes(1 * MiB, -1, &a) == 0);
  CHECK(a.status == PNMEM_DENIED);
  const pnmem::c::retry_hint hint = pnmem::c::retry_after(a);
  CHECK(hint.ms == pnmem_retry_after_ms(&a, nullptr));
  CHECK(hint.seconds() == (hint.ms + 999) / 1000);
  CHECK(std::strlen(hint.basis) > 0);
  CHECK((pnmem::c::retry_hint{1, ""}.seconds() == 1 && pnmem::c::retry_hint{1000, ""}.seconds() == 1 &&
         pnmem::c::retry_hint{1001, ""}.seconds() == 2 && pnmem::c::retry_hint{0, ""}.seconds() == 0));
  const std::string metrics = pnmem::c::metrics_text();
  CHECK(metrics.find("\npnmem_level 3\n") != std::string::npos);
  CHECK(static_cast<int>(metrics.size()) >= pnmem_metrics_text(nullptr, 0, PNMEM_METRICS_ALL) - 16);

  // A subscription: called on each level change while it lives, not after.
  int changes = 0;
  {
    pnmem::c::subscription sub = pnmem::c::subscribe([&](const pnmem_level_change& c) {
      if (c.to == PNMEM_LEVEL_OK) ++changes;
    });
    CHECK(static_cast<bool>(sub));
    meminfo(total);  // OK
    CHECK(changes == 1);
    pnmem::c::subscription moved = std::move(sub);
    meminfo(reserve / 2);
    meminfo(total);
    CHECK(changes == 2);
  }
  meminfo(reserve / 2);
  meminfo(total);
  CHECK(changes == 2);

  // Shed hooks: the newest is the one called; the older one's end does not remove it; its own does.
  int first_calls = 0;
  int second_calls = 0;
  {
    pnmem::c::shed_hook first{[&](std::uint64_t) {
      ++first_calls;
      return std::uint64_t{0};
    }};
    {
      pnmem::c::shed_hook second{[&](std::uint64_t want) {
        ++second_calls;
        return want;
      }};
      first.end();  // replaced already: removes nothing
      meminfo(watch_floor - 64 * MiB);  // TIGHT: shed
      CHECK(second_calls == 1 && first_calls == 0);
    }
    meminfo(watch_floor - 64 * MiB);
    CHECK(second_calls == 1);  // ended with its scope
  }
  CHECK(first_calls == 0);

  pnmem_watcher_stop();
  tree_remove();
  if (failures != 0) return 1;
  std::printf("c hpp: all checks passed\n");
  return 0;
}
