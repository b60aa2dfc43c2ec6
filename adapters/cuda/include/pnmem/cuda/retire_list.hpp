// pnmem/cuda/retire_list.hpp - buffers that moved, released only once no work can touch them.
//
// Buffers that move: never free a buffer that a queued or
// captured launch may still touch. The seed freed a moved buffer at once
// (`fc_buffer_free(d->k_slots_g)`), which is a use-after-free whenever a kernel
// or a DtoH copy queued earlier has not finished.
//
// One retire() call is a batch fenced as one:
//   1. on every other stream that used the buffers, record an event and make
//      the home stream wait for it (device-side; the host never blocks);
//   2. device memory is freed stream-ordered on the home stream (free_async),
//      so the allocator gets it back the moment the stream passes that point,
//      without the owner having to poll;
//   3. record the batch's `done` event on the home stream after all of that.
// Pinned host memory has no stream-ordered free, so it is freed (free_pinned)
// only when reap() sees `done` complete. Neither has device memory on a device
// without memory pools (alloc_mode::plain, from alloc_plain): step 2 skips it and
// it is freed (free_plain, i.e. cudaFree) only when reap() sees `done` complete -
// never earlier, whatever cudaFree's own device-wide wait would paper over - and,
// like pinned memory, never on the step path (cudaFree synchronises the device).
// Until then every byte of the batch is *retiring*: memory pending free is not
// free (vllm-ascend#16315), so it is reported apart from used and free bytes.
//
// If an event cannot be had (no memory), the batch is kept unfenced and nothing
// in it is freed; reap() fences it again later. A later fence is still "after
// the last use": the owner bumped its generation, so no new work names these
// buffers.
//
// Not thread-safe: used only while holding the GPU turn. retiring_bytes() may
// be read from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <vector>

#include "pnmem/cuda/device_backend.hpp"
#include "pnmem/cuda/die_tally.hpp"
#include "pnmem/cuda/event_pool.hpp"

namespace pnmem::cuda {


// device: from alloc_async (freed stream-ordered, free_async); pinned: alloc_pinned;
// device_plain: from alloc_plain (a device without memory pools; freed with
// free_plain once the batch's fence completed, off the step path).
enum class memory_kind : std::uint8_t { device, pinned, device_plain };

struct retired_buffer {
  void* ptr = nullptr;
  std::uint64_t bytes = 0;
  memory_kind kind = memory_kind::device;
};

class retire_list {
 public:
  // `tally` (may be null): the die feed's tally for the device these buffers
  // live on; device bytes move used -> retiring on retire() and leave retiring
  // when their batch is released. Pinned bytes are host memory: not the die's.
  retire_list(device_backend& backend, event_pool& events, die_tally* tally = nullptr) noexcept
      : backend_(&backend), events_(&events), tally_(tally) {}
  retire_list(const retire_list&) = delete;
  retire_list& operator=(const retire_list&) = delete;
  // Batches still pending here are the caller's bug (see buffer_owner::close):
  // their stream-ordered device memory is already freed, their events are
  // destroyed (allowed while pending), but pinned and plain device memory is
  // deliberately leaked: freeing it would be the very use-after-free this class
  // prevents.
  ~retire_list();

  // Retires `buffers`, last used by work queued on `home` and on `other_users`
  // (streams may repeat or include home; both are harmless). Returns the first
  // device error; the buffers are on the list either way.
  device_status retire(stream_handle home, std::span<const stream_handle> other_users,
                       std::span<const retired_buffer> buffers);

  // Where a reap runs. Freeing pinned host memory (cudaFreeHost) or plain device
  // memory (cudaFree) synchronises the whole device, so on the step path
  // (step_begin, poll) a completed batch that still holds either is left for the
  // next reap off that path (bind, resize, release_all, an explicit reap()): a
  // decode step never waits for a retire.
  enum class reap_scope : std::uint8_t { step_path, anywhere };

  // Releases every batch whose `done` event completed (within `scope`); fences
  // unfenced ones. Never blocks on the device. Returns the number released.
  std::size_t reap(reap_scope scope = reap_scope::anywhere) noexcept;

  std::uint64_t retiring_bytes() const noexcept { return retiring_bytes_.load(std::memory_order_relaxed); }
  std::size_t pending_batches() const noexcept { return batches_.size(); }
  bool empty() const noexcept { return batches_.empty(); }

 private:
  struct batch {
    std::vector<retired_buffer> buffers;  // a `device` entry's ptr is nulled once free_async took it
    std::vector<stream_handle> others;
    std::vector<event_handle> events;  // recorded on `others`; pooled again when `done` completed
    stream_handle home;
    event_handle done;  // none while unfenced
    std::uint64_t bytes = 0;
    std::uint64_t device_bytes = 0;
  };

  device_status fence(batch& b) noexcept;
  void release(batch& b) noexcept;

  device_backend* backend_;
  event_pool* events_;
  die_tally* tally_;
  std::vector<batch> batches_;
  std::atomic<std::uint64_t> retiring_bytes_{0};
};

}  // namespace pnmem::cuda
