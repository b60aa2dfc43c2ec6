// pnmem/cuda/device_backend.hpp - the few device operations the CUDA adapter needs.
//
// Two implementations stand behind this one interface (Abseil's waiter model):
//   cudart_backend  the real CUDA runtime (cudart_backend.hpp)
//   fake_backend    host memory on a simulated timeline, for tests and benchmarks:
//                   freed memory is poisoned and every queued op checks, when it
//                   runs and when it completes, that the buffers it uses are alive
//                   (fake_backend.hpp)
// The buffer owner and the die feed are written against this interface only, and
// one typed test suite runs against both backends.
//
// Rules every implementation keeps:
//   - no call synchronises the whole device (no cudaDeviceSynchronize, no
//     implicit-sync frees on the hot path): stream-ordered frees exist for that.
//     The one exception is free_plain (cudaFree), the fallback for a device
//     without memory pools: callers free with it only after an event covering
//     every use completed, and never on a step's path (see alloc_mode);
//   - every call is noexcept and reports failure as a device_status;
//   - handles are opaque non-zero 64-bit values; 0 is "none".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "pnmem/cuda/eviction_ops.hpp"
#include "pnmem/die_uuid.hpp"

namespace pnmem::cuda {

enum class device_errc : std::uint8_t {
  ok,
  not_ready,            // event_query: the work before the event has not finished
  out_of_memory,
  no_device,            // no GPU, or the device id does not exist
  driver_insufficient,  // the toolkit is newer than the driver (or no driver at all)
  invalid_value,        // a bad argument: null pointer, unknown handle, zero size
  failure,              // anything else the runtime reported
  not_supported,        // the device cannot do this (alloc_async on a device without memory pools)
};

constexpr std::string_view to_string(device_errc e) noexcept {
  switch (e) {
    case device_errc::ok: return "ok";
    case device_errc::not_ready: return "not_ready";
    case device_errc::out_of_memory: return "out_of_memory";
    case device_errc::no_device: return "no_device";
    case device_errc::driver_insufficient: return "driver_insufficient";
    case device_errc::invalid_value: return "invalid_value";
    case device_errc::failure: return "failure";
    case device_errc::not_supported: return "not_supported";
  }
  return "invalid";
}

// How device memory is allocated and freed on one device.
//   stream_ordered  alloc_async / free_async (cudaMallocAsync / cudaFreeAsync) from the
//                   device's memory pool: a free waits for the stream, never for the host.
//   plain           alloc_plain / free_plain (cudaMalloc / cudaFree): the device has no
//                   memory pools (cudaDevAttrMemoryPoolsSupported is 0: some drivers, MIG
//                   and vGPU setups), or pools were turned off (cudart_options). free_plain
//                   frees at once and synchronises the device, so memory that queued work
//                   may still read is freed only after an event recorded behind that work
//                   completed, off the step path (retire_list.hpp).
//   unknown         not asked yet (a buffer_owner before its first bind).
enum class alloc_mode : std::uint8_t { unknown, stream_ordered, plain };

constexpr std::string_view to_string(alloc_mode m) noexcept {
  switch (m) {
    case alloc_mode::unknown: return "unknown";
    case alloc_mode::stream_ordered: return "stream_ordered";
    case alloc_mode::plain: return "plain";
  }
  return "invalid";
}

struct device_status {
  device_errc code = device_errc::ok;
  int native = 0;  // the backend's own error number (cudaError_t), 0 for the fake

  constexpr bool ok() const noexcept { return code == device_errc::ok; }
  constexpr explicit operator bool() const noexcept { return ok(); }
  friend constexpr bool operator==(const device_status&, const device_status&) = default;
};

struct stream_handle {
  std::uint64_t value = 0;
  constexpr explicit operator bool() const noexcept { return value != 0; }
  friend constexpr bool operator==(const stream_handle&, const stream_handle&) = default;
};

struct event_handle {
  std::uint64_t value = 0;
  constexpr explicit operator bool() const noexcept { return value != 0; }
  friend constexpr bool operator==(const event_handle&, const event_handle&) = default;
};

// What one piece of device work reads or writes: the fake backend checks these.
struct buffer_use {
  const void* ptr = nullptr;
  std::size_t bytes = 0;
  bool writes = false;
};

class device_backend {
 public:
  device_backend() = default;
  device_backend(const device_backend&) = delete;
  device_backend& operator=(const device_backend&) = delete;
  virtual ~device_backend() = default;

  virtual std::string_view name() const noexcept = 0;  // "cudart", "fake"

  // --- devices ---
  virtual device_status device_count(int& out) noexcept = 0;
  // cudaMemGetInfo on `device`: free and total bytes as the driver sees them.
  virtual device_status mem_get_info(int device, std::uint64_t& free_bytes, std::uint64_t& total_bytes) noexcept = 0;
  // The device's UUID (cudaDeviceProp::uuid: the same in every process, whatever index its
  // CUDA_VISIBLE_DEVICES gives the device; a MIG instance's own). Not pure: a backend without one
  // answers not_supported, and its dies are counted by this process alone (die_feed::uuid).
  virtual device_status device_uuid(int device, die_uuid& out) noexcept {
    static_cast<void>(device);
    out = die_uuid{};
    return device_status{device_errc::not_supported, 0};
  }

  // --- device memory ---
  // Which pair below `device` supports (see alloc_mode): stream_ordered where the
  // device has memory pools, else plain. Never unknown on success.
  virtual device_status device_alloc_mode(int device, alloc_mode& out) noexcept = 0;
  // Stream-ordered: the memory is usable by work queued on `s` after this call
  // (cudaMallocAsync), and free_async returns it once the work queued on `s`
  // before the free has finished (cudaFreeAsync). Neither blocks the host.
  // On a device in plain mode alloc_async answers not_supported.
  virtual device_status alloc_async(int device, std::size_t bytes, stream_handle s, void*& out) noexcept = 0;
  virtual device_status free_async(void* p, stream_handle s) noexcept = 0;
  // Plain (cudaMalloc / cudaFree), on every device: the fallback where there are
  // no pools. The memory is usable by any stream once alloc_plain returns.
  // free_plain frees at once: the caller guarantees (by an event) that no queued
  // work still uses the block. On a real device it also waits for the whole
  // device; that wait is a cost, never the guarantee - the fake does not wait
  // and reports a free under queued work as a violation.
  virtual device_status alloc_plain(int device, std::size_t bytes, void*& out) noexcept = 0;
  virtual device_status free_plain(void* p) noexcept = 0;

  // --- pinned host memory (staging for device-to-host copies) ---
  // free_pinned frees at once: the caller guarantees (by an event) that no copy
  // still writes into it.
  virtual device_status alloc_pinned(std::size_t bytes, void*& out) noexcept = 0;
  virtual device_status free_pinned(void* p) noexcept = 0;

  // --- streams and events ---
  virtual device_status stream_create(int device, stream_handle& out) noexcept = 0;
  virtual device_status stream_destroy(stream_handle s) noexcept = 0;
  // Events are for ordering only (no timing): creating them is slow, so pool them.
  virtual device_status event_create(int device, event_handle& out) noexcept = 0;
  virtual device_status event_destroy(event_handle e) noexcept = 0;
  // Completes when all work queued on `s` before it has finished.
  virtual device_status event_record(event_handle e, stream_handle s) noexcept = 0;
  // ok when complete, not_ready while pending. Never blocks.
  virtual device_status event_query(event_handle e) noexcept = 0;
  // Work queued on `s` after this waits for `e` (device-side; the host does not block).
  virtual device_status stream_wait_event(stream_handle s, event_handle e) noexcept = 0;
  // A stable identity for a stream: handles may be reused after destruction,
  // ids are not. (cudart: cudaStreamGetId from CUDA 12.0; built against an older
  // toolkit, an id the backend assigns to the streams it knows - see
  // cudart_backend.hpp.)
  virtual device_status stream_id(stream_handle s, std::uint64_t& out) noexcept = 0;

  // --- copies ---
  // Stream-ordered copy in any direction (cudaMemcpyAsync with cudaMemcpyDefault).
  virtual device_status copy_async(void* dst, const void* src, std::size_t bytes, stream_handle s) noexcept = 0;

  // --- rung 4b: KV eviction (eviction_ops.hpp) ---
  // Stream-ordered on `s`, like a kernel the engine queues; nothing is read back to the host.
  // invalid_value for arguments eviction_ops.hpp's valid() refuses (nothing queued); not_supported
  // where the backend has no kernels (cudart built without nvcc).
  virtual device_status observation_scores_async(const observation_pooling& a, stream_handle s) noexcept = 0;
  virtual device_status select_keep_async(const keep_selection& a, stream_handle s) noexcept = 0;
  virtual device_status compact_rows_async(const row_compaction& a, stream_handle s) noexcept = 0;
};

}  // namespace pnmem::cuda
