// retire_list.cpp - see pnmem/cuda/retire_list.hpp for the protocol.
#include "pnmem/cuda/retire_list.hpp"

#include <algorithm>
#include <cstddef>
#include <utility>

#include "pnmem/cuda/die_feed.hpp"

namespace pnmem::cuda {

retire_list::~retire_list() {
  for (batch& b : batches_) {
    for (const event_handle e : b.events) (void)backend_->event_destroy(e);
    if (b.done) (void)backend_->event_destroy(b.done);
  }
}

device_status retire_list::retire(stream_handle home, std::span<const stream_handle> other_users,
                                  std::span<const retired_buffer> buffers) {
  batch b;
  b.home = home;
  for (const stream_handle s : other_users)
    if (s && s != home) b.others.push_back(s);
  for (const retired_buffer& r : buffers) {
    if (r.ptr == nullptr) continue;
    b.buffers.push_back(r);
    b.bytes += r.bytes;
    if (r.kind != memory_kind::pinned) b.device_bytes += r.bytes;
  }
  if (b.buffers.empty()) return {};
  retiring_bytes_.fetch_add(b.bytes, std::memory_order_relaxed);
  if (tally_ != nullptr) tally_->retire(b.device_bytes);
  batches_.push_back(std::move(b));
  return fence(batches_.back());
}

device_status retire_list::fence(batch& b) noexcept {
  // Step 1: the home stream waits for every other user. Done again in full on
  // a retry: an extra wait is harmless, a missing one is not.
  for (const stream_handle s : b.others) {
    event_handle e;
    if (const device_status st = events_->acquire(e); !st) return st;
    if (const device_status st = backend_->event_record(e, s); !st) {
      events_->release(e);  // never recorded: nothing waits on it
      return st;
    }
    // Pushed before the wait so that a failed wait still pools it later.
    try {
      b.events.push_back(e);
    } catch (...) {
      // Recorded but cannot be kept: leave it pending-owned by nobody rather
      // than pool an event something may wait on. Cannot happen without OOM.
      return device_status{device_errc::out_of_memory, 0};
    }
    if (const device_status st = backend_->stream_wait_event(b.home, e); !st) return st;
  }
  // Step 2: device memory goes back stream-ordered, after the waits above.
  // (Plain device memory has no stream-ordered free: it waits for `done`, release().)
  for (retired_buffer& r : b.buffers) {
    if (r.kind != memory_kind::device || r.ptr == nullptr) continue;
    if (const device_status st = backend_->free_async(r.ptr, b.home); !st) return st;
    r.ptr = nullptr;
  }
  // Step 3: one event says the whole batch is past.
  event_handle done;
  if (const device_status st = events_->acquire(done); !st) return st;
  if (const device_status st = backend_->event_record(done, b.home); !st) {
    events_->release(done);
    return st;
  }
  b.done = done;
  return {};
}

void retire_list::release(batch& b) noexcept {
  for (retired_buffer& r : b.buffers) {
    // Only pinned and plain device memory is still here, and `done` completed:
    // no queued work uses it. A failed free keeps nothing we could retry safely,
    // so the bytes are accounted as gone either way.
    if (r.ptr != nullptr) {
      if (r.kind == memory_kind::pinned) (void)backend_->free_pinned(r.ptr);
      if (r.kind == memory_kind::device_plain) (void)backend_->free_plain(r.ptr);
    }
    r.ptr = nullptr;
  }
  for (const event_handle e : b.events) events_->release(e);
  events_->release(b.done);
  retiring_bytes_.fetch_sub(b.bytes, std::memory_order_relaxed);
  if (tally_ != nullptr) tally_->sub_retiring(b.device_bytes);
}

std::size_t retire_list::reap(reap_scope scope) noexcept {
  std::size_t released = 0;
  std::size_t keep = 0;
  for (std::size_t i = 0; i < batches_.size(); ++i) {
    batch& b = batches_[i];
    bool complete = false;
    if (!b.done) {
      (void)fence(b);  // still unfenced: try again next time
    } else {
      complete = backend_->event_query(b.done).ok();  // any error: keep it, never free on doubt
    }
    if (complete && scope == reap_scope::step_path) {
      complete = std::none_of(b.buffers.begin(), b.buffers.end(), [](const retired_buffer& r) {
        return r.kind != memory_kind::device && r.ptr != nullptr;  // pinned or plain: a synchronising free
      });
    }
    if (complete) {
      release(b);
      ++released;
      continue;
    }
    if (keep != i) batches_[keep] = std::move(b);
    ++keep;
  }
  batches_.erase(batches_.begin() + static_cast<std::ptrdiff_t>(keep), batches_.end());
  return released;
}

}  // namespace pnmem::cuda
