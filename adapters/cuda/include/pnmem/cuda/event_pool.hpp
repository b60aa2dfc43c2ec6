// pnmem/cuda/event_pool.hpp - reusable ordering events for one device.
//
// Events are pooled because creating them is slow (cudaEventCreate takes a
// driver lock and can cost microseconds; a retire per resize and a fence per
// step would otherwise create events on the hot path). An event returns to the
// pool only once nothing waits on its current record: callers release an event
// after it has completed (event_query ok) or when it was never recorded.
//
// Not thread-safe: the buffer owner uses it only while holding the GPU turn.
#pragma once

#include <cstdint>
#include <vector>

#include "pnmem/cuda/device_backend.hpp"

namespace pnmem::cuda {

class event_pool {
 public:
  event_pool(device_backend& backend, int device) noexcept : backend_(&backend), device_(device) {}
  event_pool(const event_pool&) = delete;
  event_pool& operator=(const event_pool&) = delete;
  ~event_pool() {
    for (const event_handle e : idle_) (void)backend_->event_destroy(e);
  }

  // An idle event, or a new one when the pool is empty.
  device_status acquire(event_handle& out) noexcept {
    if (!idle_.empty()) {
      out = idle_.back();
      idle_.pop_back();
      return {};
    }
    const device_status st = backend_->event_create(device_, out);
    if (st) ++created_;
    return st;
  }

  // Back to the pool. The pool keeps every event it ever created, so its size
  // is the high-water mark of events in use at once.
  void release(event_handle e) noexcept {
    if (!e) return;
    try {
      idle_.push_back(e);
    } catch (...) {
      // No memory to keep it: destroying is always safe for a completed event.
      (void)backend_->event_destroy(e);
    }
  }

  std::uint64_t created() const noexcept { return created_; }
  std::size_t idle() const noexcept { return idle_.size(); }

 private:
  device_backend* backend_;
  int device_;
  std::vector<event_handle> idle_;
  std::uint64_t created_ = 0;
};

}  // namespace pnmem::cuda
