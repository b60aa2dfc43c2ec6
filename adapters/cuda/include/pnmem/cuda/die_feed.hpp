// pnmem/cuda/die_feed.hpp - per-die VRAM numbers for the watcher.
//
// The seed's die sampling, through a device_backend (so it runs on the fake):
//   - at construction: enumerate the dies and measure each one's total once;
//     budget = total - die reserve (policy::die_reserve_bytes, PN_DIE_RESERVE_BYTES),
//     floored at 0;
//   - poll(): query free memory on every die and push
//     (die, free, budget, used, retiring) to a sink.
// `used` and `retiring` are the adapter's own tallies: whoever allocates on a die
// reports into that die's die_tally. Retiring bytes (released by the owner but
// still waiting for in-flight work: memory pending free is not free) are pushed
// apart from free: the driver does not count them as free either.
//
//   pnmem::cuda::cudart_backend gpu;
//   pnmem::cuda::die_feed feed{gpu, policy};
//   if (feed.die_count() == 0) log(feed.reason());      // no GPU: nothing to feed
//   auto conn = pnmem::cuda::feed_every_sample(feed, w);  // polled on each watcher tick, in its snapshot
//   // or by hand, when the engine wants to:
//   feed.poll(pnmem::cuda::watcher_sink(w));            // w.set_die(...) per die
//
//   // in the buffer owner:
//   feed.tally(die).add_used(bytes);                    // after alloc
//   feed.tally(die).retire(bytes);                      // on the retire list
//   feed.tally(die).sub_retiring(bytes);                // released for good
//
// Each die's UUID (the backend's device_uuid, read at construction) is what every process of the box
// calls the GPU, whatever index its CUDA_VISIBLE_DEVICES gives it: name_dies(feed, ledger) names the
// host ledger's dies by them, so model loads and die reservations are counted box-wide
// (engine/host_ledger.hpp, docs/multi-process.md).
//
// Never throws from its own logic (a std::function sink may), never crashes:
// a backend with no device, an insufficient driver or a failing query yields
// zero dies (or skips the die that failed) and says why.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "pnmem/change_delivery.hpp"
#include "pnmem/config.hpp"
#include "pnmem/cuda/device_backend.hpp"
#include "pnmem/cuda/die_tally.hpp"
#include "pnmem/mem_state.hpp"
#include "pnmem/policy.hpp"

namespace pnmem::cuda {

class die_feed {
 public:
  using sink = std::function<void(int die, std::uint64_t free_bytes, std::uint64_t budget_bytes,
                                  std::uint64_t used_bytes, std::uint64_t retiring_bytes)>;

  struct poll_result {
    int pushed = 0;        // dies pushed to the sink
    device_status status;  // the first failed query (ok if none); its die was skipped
    int failed_die = -1;
  };

  // Enumerates and measures at once. Dies beyond pnmem::max_dies are not fed
  // (a snapshot has room for max_dies). Without a policy, the process's (the PN_*
  // variables, PN_DIE_RESERVE_BYTES among them: config.hpp process_policy()).
  explicit die_feed(device_backend& backend, const policy& p = process_policy());
  die_feed(const die_feed&) = delete;
  die_feed& operator=(const die_feed&) = delete;

  int die_count() const noexcept { return static_cast<int>(dies_.size()); }

  // Why the feed has the dies it has: ok, or the failed device_count's status.
  device_status status() const noexcept { return status_; }
  // One line for logs: "2 dies" / "no dies: cudart device_count: driver_insufficient (native 35)".
  const std::string& reason() const noexcept { return reason_; }

  // As measured at construction; 0 for a die out of range or whose first
  // mem_get_info failed (such a die has budget 0 and is never pushed).
  std::uint64_t total_bytes(int die) const noexcept;
  std::uint64_t budget_bytes(int die) const noexcept;
  // As read at construction; empty for a die out of range or whose backend has none.
  die_uuid uuid(int die) const noexcept;

  // The die's tally, for the buffer owner to report into. `die` must be in
  // [0, die_count()); out of range returns a tally nobody reads.
  die_tally& tally(int die) noexcept;

  // Queries every measured die and pushes it; dies whose query fails are skipped
  // (an unreadable die is unknown, never a false "0 bytes free").
  poll_result poll(const sink& out);

 private:
  struct die_info {
    std::uint64_t total_bytes = 0;
    std::uint64_t budget_bytes = 0;
    bool measured = false;
    die_uuid uuid{};
    std::unique_ptr<die_tally> tally = std::make_unique<die_tally>();
  };

  device_backend& backend_;
  std::vector<die_info> dies_;
  die_tally unread_;  // out-of-range tally() calls land here
  device_status status_{};
  std::string reason_;
};

// A sink that feeds a pnmem::watcher (or anything with the same set_die), so the
// feed does not depend on the watcher's template parameters.
template <class Watcher>
die_feed::sink watcher_sink(Watcher& w) {
  return [&w](int die, std::uint64_t free_bytes, std::uint64_t budget_bytes, std::uint64_t used_bytes,
              std::uint64_t retiring_bytes) { (void)w.set_die(die, free_bytes, budget_bytes, used_bytes, retiring_bytes); };
}

// Registers the feed as a die source of `w` (watcher::add_die_source): every sample the watcher
// takes polls the dies, and their numbers are published in the same snapshot as the host's.
// Returns the registration; the feed and the watcher must outlive it.
// Names each die of `ledger` (a pnmem::host_ledger, or anything with name_die(int, die_uuid)) by its
// GPU's UUID. Returns how many were named.
template <class Ledger>
int name_dies(const die_feed& feed, Ledger& ledger) {
  int named = 0;
  for (int d = 0; d < feed.die_count(); ++d) {
    if (ledger.name_die(d, feed.uuid(d))) ++named;
  }
  return named;
}

template <class Watcher>
[[nodiscard]] scoped_subscription feed_every_sample(die_feed& feed, Watcher& w) {
  const auto id = w.add_die_source([&feed](const auto& sink) { (void)feed.poll(sink); });
  return scoped_subscription([&w, id] { w.remove_die_source(id); });
}

}  // namespace pnmem::cuda
