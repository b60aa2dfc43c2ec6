// cudart_backend.cpp - see pnmem/cuda/cudart_backend.hpp.
//
// Which calls may block the host, and why none of them is on a step's path:
//   - cudaFreeHost in practice synchronises the device (it waits for outstanding
//     work before unpinning; PyTorch's pinned allocator caches blocks to avoid
//     it), and the programming guide lists page-locked allocation among the
//     operations that implicitly serialise streams, so cudaMallocHost too. Hence
//     the rule for callers: pinned memory is allocated and freed only at
//     bind/resize (inside the GPU turn, after the event of the last copies into
//     it completed), never between a step's begin and its poll and never on
//     the decode path - a device-wide wait there would stall every model's step.
//   - cudaStreamCreate / cudaEventCreate are slow but do not synchronise: streams
//     are created at bind time, events are pooled by the owner.
//   - cudaMallocAsync / cudaFreeAsync / cudaMemcpyAsync / cudaEventRecord /
//     cudaEventQuery / cudaStreamWaitEvent do not block the host. (cudaMemcpyAsync
//     from pageable host memory can; the adapter copies only to and from pinned
//     memory.)
// Nothing here calls cudaDeviceSynchronize or cudaFree (which synchronises).
#include "pnmem/cuda/cudart_backend.hpp"

#include <cuda_runtime_api.h>

namespace pnmem::cuda {

namespace {

device_status from(cudaError_t e) noexcept {
  return device_status{cudart_errc(static_cast<int>(e)), static_cast<int>(e)};
}

constexpr device_status invalid() noexcept { return device_status{device_errc::invalid_value, 0}; }

// Every failure is returned as a device_status. The runtime also remembers it as
// the thread's "last error", where an engine's own cudaGetLastError after a kernel
// launch would later find it and blame its kernel. So a failure of ours is cleared
// from that slot - unless the slot already held an error before our call (the
// engine's, left for the engine). Sticky errors cannot be cleared and stay.
// not_ready (an event still pending) is not an error and is left alone.
template <class Call>
device_status run(Call call) noexcept {
  const cudaError_t before = cudaPeekAtLastError();
  const cudaError_t e = call();
  if (e != cudaSuccess && e != cudaErrorNotReady && before == cudaSuccess) (void)cudaGetLastError();
  return from(e);
}

// Handles are the runtime's pointers carried as 64-bit values.
cudaStream_t to_stream(stream_handle s) noexcept { return reinterpret_cast<cudaStream_t>(s.value); }
cudaEvent_t to_event(event_handle e) noexcept { return reinterpret_cast<cudaEvent_t>(e.value); }

// Runs `call` with `device` current and restores the thread's current device
// afterwards (the caller's own device choice must survive our calls).
template <class Call>
cudaError_t on_device(int device, Call call) noexcept {
  int previous = 0;
  if (const cudaError_t e = cudaGetDevice(&previous); e != cudaSuccess) return e;
  if (previous == device) return call();
  if (const cudaError_t e = cudaSetDevice(device); e != cudaSuccess) return e;
  const cudaError_t e = call();
  (void)cudaSetDevice(previous);
  return e;
}

}  // namespace

device_errc cudart_errc(int cuda_error) noexcept {
  switch (static_cast<cudaError_t>(cuda_error)) {
    case cudaSuccess: return device_errc::ok;
    case cudaErrorNotReady: return device_errc::not_ready;
    case cudaErrorMemoryAllocation: return device_errc::out_of_memory;
    case cudaErrorNoDevice:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable: return device_errc::no_device;
    case cudaErrorInsufficientDriver:
    case cudaErrorStubLibrary:  // libcuda.so is the toolkit's link stub: no driver installed
    case cudaErrorCallRequiresNewerDriver:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorSystemNotReady: return device_errc::driver_insufficient;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidResourceHandle:
    case cudaErrorInvalidDevicePointer: return device_errc::invalid_value;
    default: return device_errc::failure;
  }
}

std::string_view cudart_backend::error_name(int cuda_error) noexcept {
  const char* s = cudaGetErrorName(static_cast<cudaError_t>(cuda_error));
  return s != nullptr ? s : "unknown CUDA error";
}

std::string_view cudart_backend::error_string(int cuda_error) noexcept {
  const char* s = cudaGetErrorString(static_cast<cudaError_t>(cuda_error));
  return s != nullptr ? s : "unknown CUDA error";
}

device_status cudart_backend::device_count(int& out) noexcept {
  out = 0;
  int n = 0;
  const device_status st = run([&] { return cudaGetDeviceCount(&n); });
  if (!st) return st;
  out = n;
  return n > 0 ? st : from(cudaErrorNoDevice);
}

device_status cudart_backend::mem_get_info(int device, std::uint64_t& free_bytes, std::uint64_t& total_bytes) noexcept {
  std::size_t f = 0;
  std::size_t t = 0;
  const device_status st = run([&] { return on_device(device, [&] { return cudaMemGetInfo(&f, &t); }); });
  if (st) {
    free_bytes = f;
    total_bytes = t;
  }
  return st;
}

device_status cudart_backend::alloc_async(int device, std::size_t bytes, stream_handle s, void*& out) noexcept {
  out = nullptr;
  if (bytes == 0 || !s) return invalid();
  void* p = nullptr;
  // From the pool of the stream's device; never blocks the host.
  const device_status st =
      run([&] { return on_device(device, [&] { return cudaMallocAsync(&p, bytes, to_stream(s)); }); });
  if (st) out = p;
  return st;
}

device_status cudart_backend::free_async(void* p, stream_handle s) noexcept {
  if (p == nullptr || !s) return invalid();
  return run([&] { return cudaFreeAsync(p, to_stream(s)); });
}

device_status cudart_backend::alloc_pinned(std::size_t bytes, void*& out) noexcept {
  out = nullptr;
  if (bytes == 0) return invalid();
  void* p = nullptr;
  const device_status st = run([&] { return cudaMallocHost(&p, bytes); });
  if (st) out = p;
  return st;
}

device_status cudart_backend::free_pinned(void* p) noexcept {
  if (p == nullptr) return invalid();
  // May synchronise the device (see the top of this file): keep it off the step
  // path; call it only after the event covering the last copies into `p` completed.
  return run([&] { return cudaFreeHost(p); });
}

device_status cudart_backend::stream_create(int device, stream_handle& out) noexcept {
  out = {};
  cudaStream_t s = nullptr;
  // Non-blocking: no implicit synchronisation with the legacy default stream.
  const device_status st =
      run([&] { return on_device(device, [&] { return cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); }); });
  if (st) out.value = reinterpret_cast<std::uint64_t>(s);
  return st;
}

device_status cudart_backend::stream_destroy(stream_handle s) noexcept {
  if (!s) return invalid();
  // Returns at once; work already queued on the stream still completes.
  return run([&] { return cudaStreamDestroy(to_stream(s)); });
}

device_status cudart_backend::event_create(int device, event_handle& out) noexcept {
  out = {};
  cudaEvent_t ev = nullptr;
  // Ordering only: timing events cost more to record and to query.
  const device_status st =
      run([&] { return on_device(device, [&] { return cudaEventCreateWithFlags(&ev, cudaEventDisableTiming); }); });
  if (st) out.value = reinterpret_cast<std::uint64_t>(ev);
  return st;
}

device_status cudart_backend::event_destroy(event_handle e) noexcept {
  if (!e) return invalid();
  return run([&] { return cudaEventDestroy(to_event(e)); });
}

device_status cudart_backend::event_record(event_handle e, stream_handle s) noexcept {
  if (!e || !s) return invalid();
  return run([&] { return cudaEventRecord(to_event(e), to_stream(s)); });
}

device_status cudart_backend::event_query(event_handle e) noexcept {
  if (!e) return invalid();
  return run([&] { return cudaEventQuery(to_event(e)); });
}

device_status cudart_backend::stream_wait_event(stream_handle s, event_handle e) noexcept {
  if (!e || !s) return invalid();
  return run([&] { return cudaStreamWaitEvent(to_stream(s), to_event(e), 0); });
}

device_status cudart_backend::stream_id(stream_handle s, std::uint64_t& out) noexcept {
  if (!s) return invalid();
  unsigned long long id = 0;
  const device_status st = run([&] { return cudaStreamGetId(to_stream(s), &id); });
  if (st) out = id;
  return st;
}

device_status cudart_backend::copy_async(void* dst, const void* src, std::size_t bytes, stream_handle s) noexcept {
  if (dst == nullptr || src == nullptr || bytes == 0 || !s) return invalid();
  // cudaMemcpyDefault: the direction comes from unified addressing.
  return run([&] { return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, to_stream(s)); });
}

}  // namespace pnmem::cuda
