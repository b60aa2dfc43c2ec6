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
// Device-scoped calls (mem_get_info, alloc_async, stream_create, event_create)
// select the device with cudaSetDevice and restore the caller's current device
// before returning: the backend never changes a thread's device behind its back.
#pragma once

#include <string_view>

#include "pnmem/cuda/device_backend.hpp"

namespace pnmem::cuda {

// The runtime's error code mapped onto device_errc (the native code is kept in device_status).
device_errc cudart_errc(int cuda_error) noexcept;

class cudart_backend final : public device_backend {
 public:
  cudart_backend() = default;

  // cudaGetErrorName / cudaGetErrorString of a native code, for messages.
  static std::string_view error_name(int cuda_error) noexcept;
  static std::string_view error_string(int cuda_error) noexcept;

  std::string_view name() const noexcept override { return "cudart"; }
  device_status device_count(int& out) noexcept override;
  device_status mem_get_info(int device, std::uint64_t& free_bytes, std::uint64_t& total_bytes) noexcept override;
  device_status alloc_async(int device, std::size_t bytes, stream_handle s, void*& out) noexcept override;
  device_status free_async(void* p, stream_handle s) noexcept override;
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
};

}  // namespace pnmem::cuda
