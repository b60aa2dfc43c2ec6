// pnmem/cuda/cudart_backend.hpp - device_backend over the CUDA runtime.
//
// Plain C++ calling the runtime API (no kernels): built by the host compiler
// against cuda_runtime_api.h and linked with libcudart. This header does not
// include any CUDA header, so an engine can hold a backend without seeing them.
//
//   pnmem::cuda::cudart_backend gpu;
//   int n = 0;
//   if (auto st = gpu.device_count(n); !st) {
//     std::puts(std::string(pnmem::cuda::cudart_backend::error_string(st.native)).c_str());
//   }
//
// Handles carry the runtime's own cudaStream_t / cudaEvent_t values. The runtime
// cannot tell a destroyed handle from a live one, so only "none" (0) is refused
// here (as invalid_value): the legacy default stream is never used, because it
// synchronises with every other blocking stream.
//
// Device-scoped calls (mem_get_info, alloc_async, alloc_plain, stream_create,
// event_create) select the device with cudaSetDevice and restore the caller's
// current device before returning: the backend never changes a thread's device
// behind its back.
//
// Toolkits: CUDA 11.4 or newer (the last that Kepler's driver 470 runs; the API
// floor and the calls behind CUDART_VERSION checks are listed at the top of
// cudart_backend.cpp). This header is the same for every toolkit.
//
// Memory pools are optional: device_alloc_mode(d) answers stream_ordered where
// device d reports cudaDevAttrMemoryPoolsSupported, plain (cudaMalloc / cudaFree)
// elsewhere or when cudart_options::memory_pools is false.
//
// Stream ids: built against CUDA 12.0 or newer, stream_id is cudaStreamGetId and
// works for any stream. Built against 11.x, the backend assigns ids to the streams
// it knows (stream_registry.hpp): those it created, and those an engine created
// itself and handed over with adopt_stream (and takes back with forget_stream
// before destroying them); any other stream is invalid_value there. Engines that
// bring their own streams call adopt_stream/forget_stream with every toolkit:
// with 12.0+ they are cheap checks.
#pragma once

#include <string_view>

#include "pnmem/cuda/device_backend.hpp"
#include "pnmem/cuda/stream_registry.hpp"

namespace pnmem::cuda {

// The runtime's error code mapped onto device_errc (the native code is kept in device_status).
device_errc cudart_errc(int cuda_error) noexcept;

struct cudart_options {
  // false: every device is in plain mode (cudaMalloc / cudaFree) even where it has
  // memory pools, and alloc_async answers not_supported. For tests (scripts/gpu-check
  // runs the owner on both paths of one GPU) and for a setup whose pools misbehave.
  bool memory_pools = true;
};

class cudart_backend final : public device_backend {
 public:
  explicit cudart_backend(cudart_options options = {}) noexcept : options_(options) {}

  const cudart_options& options() const noexcept { return options_; }

  // The CUDART_VERSION this backend was compiled against (e.g. 11040, 13000).
  static int compiled_runtime_version() noexcept;

  // A stream the engine created itself (not through stream_create) becomes known
  // to stream_id; forget_stream before destroying it. Needed with CUDA 11.x only
  // (see above); harmless with 12.0+. invalid_value for "none".
  device_status adopt_stream(stream_handle s) noexcept;
  device_status forget_stream(stream_handle s) noexcept;

  // cudaGetErrorName / cudaGetErrorString of a native code, for messages.
  static std::string_view error_name(int cuda_error) noexcept;
  static std::string_view error_string(int cuda_error) noexcept;

  std::string_view name() const noexcept override { return "cudart"; }
  device_status device_count(int& out) noexcept override;
  device_status mem_get_info(int device, std::uint64_t& free_bytes, std::uint64_t& total_bytes) noexcept override;
  device_status device_uuid(int device, die_uuid& out) noexcept override;
  device_status device_alloc_mode(int device, alloc_mode& out) noexcept override;
  device_status alloc_async(int device, std::size_t bytes, stream_handle s, void*& out) noexcept override;
  device_status free_async(void* p, stream_handle s) noexcept override;
  device_status alloc_plain(int device, std::size_t bytes, void*& out) noexcept override;
  device_status free_plain(void* p) noexcept override;
  device_status alloc_pinned(std::size_t bytes, void*& out) noexcept override;
  device_status free_pinned(void* p) noexcept override;
  device_status stream_create(int device, stream_handle& out) noexcept override;
  device_status stream_destroy(stream_handle s) noexcept override;
  device_status event_create(int device, event_handle& out) noexcept override;
  device_status event_destroy(event_handle e) noexcept override;
  device_status event_record(event_handle e, stream_handle s) noexcept override;
  device_status event_query(event_handle e) noexcept override;
  device_status stream_wait_event(stream_handle s, event_handle e) noexcept override;
  device_status stream_id(stream_handle s, std::uint64_t& out) noexcept override;
  device_status copy_async(void* dst, const void* src, std::size_t bytes, stream_handle s) noexcept override;
  // Rung 4b's kernels (eviction_kernels.cu) on the stream's device. not_supported where the build had
  // no nvcc (has_eviction_kernels() false: meson's summary says "eviction kernels (nvcc)").
  device_status observation_scores_async(const observation_pooling& a, stream_handle s) noexcept override;
  device_status select_keep_async(const keep_selection& a, stream_handle s) noexcept override;
  device_status compact_rows_async(const row_compaction& a, stream_handle s) noexcept override;
  static bool has_eviction_kernels() noexcept;

 private:
  cudart_options options_;
  stream_registry streams_;  // used only when built against CUDA < 12.0 (no cudaStreamGetId)
};

}  // namespace pnmem::cuda
