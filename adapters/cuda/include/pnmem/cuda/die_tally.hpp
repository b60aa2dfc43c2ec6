// pnmem/cuda/die_tally.hpp - the adapter's own byte counts on one die: used and retiring.
//
// Whoever allocates on a die reports into its tally (the buffer owner, its
// retire list); the die feed reads it on every poll and pushes it to the
// watcher beside the driver's free figure. Retiring bytes were released by the
// owner but still wait for in-flight work (memory pending free is not free):
// the driver does not count them as free either.
//
// Thread-safe. Counts never go below 0: a subtraction past zero clamps (a tally
// bug must not read as 16 EiB used).
#pragma once

#include <cstdint>

#include "pnmem/detail/mutex.hpp"
#include "pnmem/detail/thread_annotations.hpp"

namespace pnmem::cuda {

class die_tally {
 public:
  struct counts {
    std::uint64_t used = 0;
    std::uint64_t retiring = 0;
  };

  void add_used(std::uint64_t bytes) noexcept { update([&](counts& c) { c.used += bytes; }); }
  void sub_used(std::uint64_t bytes) noexcept { update([&](counts& c) { c.used = sub_floor0(c.used, bytes); }); }
  void add_retiring(std::uint64_t bytes) noexcept { update([&](counts& c) { c.retiring += bytes; }); }
  void sub_retiring(std::uint64_t bytes) noexcept {
    update([&](counts& c) { c.retiring = sub_floor0(c.retiring, bytes); });
  }
  // used -> retiring in one step (a buffer put on a retire list), so a poll never
  // sees the bytes in neither or both.
  void retire(std::uint64_t bytes) noexcept {
    update([&](counts& c) {
      c.used = sub_floor0(c.used, bytes);
      c.retiring += bytes;
    });
  }

  counts read() const noexcept PNMEM_EXCLUDES(mu_) {
    pnmem::detail::lock_guard lk(mu_);
    return c_;
  }
  std::uint64_t used() const noexcept { return read().used; }
  std::uint64_t retiring() const noexcept { return read().retiring; }

 private:
  static constexpr std::uint64_t sub_floor0(std::uint64_t a, std::uint64_t b) noexcept { return a > b ? a - b : 0; }

  template <class Change>
  void update(Change change) noexcept PNMEM_EXCLUDES(mu_) {
    pnmem::detail::lock_guard lk(mu_);
    change(c_);
  }

  mutable pnmem::detail::mutex mu_;
  counts c_ PNMEM_GUARDED_BY(mu_);
};

}  // namespace pnmem::cuda
