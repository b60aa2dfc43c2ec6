// die_feed.cpp - see pnmem/cuda/die_feed.hpp.
#include "pnmem/cuda/die_feed.hpp"

#include <algorithm>

namespace pnmem::cuda {

namespace {
std::uint64_t sub_floor0(std::uint64_t a, std::uint64_t b) noexcept { return a > b ? a - b : 0; }
}  // namespace

die_feed::die_feed(device_backend& backend, const policy& p) : backend_(backend) {
  const std::string who(backend_.name());
  int n = 0;
  status_ = backend_.device_count(n);
  if (!status_ || n <= 0) {
    if (status_) status_ = device_status{device_errc::no_device, 0};
    reason_ = "no dies: " + who + " device_count: " + std::string(to_string(status_.code)) + " (native " +
              std::to_string(status_.native) + ")";
    return;
  }
  dies_.resize(static_cast<std::size_t>(std::min(n, max_dies)));
  int measured = 0;
  for (std::size_t i = 0; i < dies_.size(); ++i) {
    std::uint64_t free_bytes = 0;
    std::uint64_t total = 0;
    if (backend_.mem_get_info(static_cast<int>(i), free_bytes, total)) {
      dies_[i].total_bytes = total;
      dies_[i].budget_bytes = sub_floor0(total, p.die_reserve_bytes);
      dies_[i].measured = true;
      ++measured;
    }
    die_uuid id;
    if (backend_.device_uuid(static_cast<int>(i), id)) dies_[i].uuid = id;
  }
  reason_ = std::to_string(dies_.size()) + (dies_.size() == 1 ? " die" : " dies");
  if (measured < die_count()) reason_ += " (" + std::to_string(die_count() - measured) + " not measurable: skipped)";
  if (n > max_dies) reason_ += " (" + std::to_string(n - max_dies) + " beyond max_dies not fed)";
}

std::uint64_t die_feed::total_bytes(int die) const noexcept {
  return die >= 0 && die < die_count() ? dies_[static_cast<std::size_t>(die)].total_bytes : 0;
}

std::uint64_t die_feed::budget_bytes(int die) const noexcept {
  return die >= 0 && die < die_count() ? dies_[static_cast<std::size_t>(die)].budget_bytes : 0;
}

die_uuid die_feed::uuid(int die) const noexcept {
  return die >= 0 && die < die_count() ? dies_[static_cast<std::size_t>(die)].uuid : die_uuid{};
}

die_tally& die_feed::tally(int die) noexcept {
  return die >= 0 && die < die_count() ? *dies_[static_cast<std::size_t>(die)].tally : unread_;
}

die_feed::poll_result die_feed::poll(const sink& out) {
  poll_result r;
  for (std::size_t i = 0; i < dies_.size(); ++i) {
    const die_info& d = dies_[i];
    if (!d.measured) continue;
    const int id = static_cast<int>(i);
    std::uint64_t free_bytes = 0;
    std::uint64_t total = 0;
    const device_status st = backend_.mem_get_info(id, free_bytes, total);
    if (!st) {
      if (r.status) {
        r.status = st;
        r.failed_die = id;
      }
      continue;
    }
    const die_tally::counts c = d.tally->read();
    if (out) out(id, free_bytes, d.budget_bytes, c.used, c.retiring);
    ++r.pushed;
  }
  return r;
}

}  // namespace pnmem::cuda
