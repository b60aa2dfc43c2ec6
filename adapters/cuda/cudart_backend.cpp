// cudart_backend.cpp - see pnmem/cuda/cudart_backend.hpp.
//
// API floor: CUDA 11.4 (CUDART_VERSION 11040), the newest toolkit the Kepler
// driver branch (470) runs. Every runtime symbol used here, with the release it
// first appeared in; tests/cuda/cuda114_shim/cuda_runtime_api.h declares exactly
// these (and the test cuda_cudart_api_floor compiles this file against it, with
// no real toolkit on the include path):
//   before 11.0 (in every toolkit the floor admits):
//     cudaGetLastError, cudaPeekAtLastError, cudaGetErrorString, cudaGetErrorName,
//     cudaGetDeviceCount, cudaGetDevice, cudaSetDevice, cudaMemGetInfo,
//     cudaMalloc, cudaFree, cudaMallocHost, cudaFreeHost, cudaMemcpyAsync,
//     cudaStreamDestroy, cudaEventDestroy, cudaEventRecord, cudaEventQuery,
//     cudaStreamWaitEvent (3.2), cudaEventCreateWithFlags + cudaEventDisableTiming,
//     cudaMemcpyDefault (4.0, unified addressing), cudaStreamCreateWithFlags +
//     cudaStreamNonBlocking (5.0), cudaDeviceGetAttribute (5.0), cudaGetDeviceProperties
//     (its uuid member: 10.0), cudaErrorSystemNotReady (10.0), cudaErrorSystemDriverMismatch and
//     cudaErrorCompatNotSupportedOnDevice (10.1), and the older error codes below
//   11.1: cudaErrorStubLibrary, cudaErrorCallRequiresNewerDriver
//   11.2: cudaMallocAsync, cudaFreeAsync, cudaDevAttrMemoryPoolsSupported
//   12.0: cudaStreamGetId - only behind `CUDART_VERSION >= 12000`; the 11.x path
//         assigns ids itself (stream_registry.hpp, cudart_backend.hpp)
//   12.8: cudaStreamGetDevice - only behind `CUDART_VERSION >= 12080`: rung 4b's kernels launch
//         with the stream's device current; before 12.8, on the caller's current device
//   (rung 4b's kernel launches live in eviction_kernels.cu, compiled by nvcc, not here)
// Anything newer than 11.4 goes behind a CUDART_VERSION check with an 11.4 path,
// and into the shim's list only if the 11.4 path needs it.
//
// Memory pools are optional even at 11.2+: a device without them (some drivers,
// MIG and vGPU setups) reports cudaDevAttrMemoryPoolsSupported 0, and the buffer
// owner then allocates with cudaMalloc and frees with cudaFree behind its retire
// fence (device_alloc_mode, retire_list.hpp).
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
//   - cudaMalloc / cudaFree (plain mode only): cudaFree synchronises the device
//     and device allocation serialises streams, so the same rule holds - plain
//     blocks are allocated at bind/resize and freed only after the retire fence
//     completed, off the step path (retire_list::reap_scope).
//   - cudaStreamCreate / cudaEventCreate are slow but do not synchronise: streams
//     are created at bind time, events are pooled by the owner.
//   - cudaMallocAsync / cudaFreeAsync / cudaMemcpyAsync / cudaEventRecord /
//     cudaEventQuery / cudaStreamWaitEvent do not block the host. (cudaMemcpyAsync
//     from pageable host memory can; the adapter copies only to and from pinned
//     memory.)
// Nothing here calls cudaDeviceSynchronize; cudaFree only in free_plain.
#include "pnmem/cuda/cudart_backend.hpp"

#if PNMEM_EVICTION_KERNELS
#include "eviction_kernels.hpp"
#endif

#include <cuda_runtime_api.h>

#if !defined(CUDART_VERSION) || CUDART_VERSION < 11040
#error "pnmem's cudart backend needs the CUDA 11.4 runtime API or newer (CUDART_VERSION >= 11040)"
#endif
// cudaStreamGetId: CUDA 12.0.
#if CUDART_VERSION >= 12000
#define PNMEM_CUDART_STREAM_GET_ID 1
#else
#define PNMEM_CUDART_STREAM_GET_ID 0
#endif

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
    case cudaErrorNotSupported: return device_errc::not_supported;
    default: return device_errc::failure;
  }
}

int cudart_backend::compiled_runtime_version() noexcept { return CUDART_VERSION; }

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

device_status cudart_backend::device_uuid(int device, die_uuid& out) noexcept {
  out = die_uuid{};
  cudaDeviceProp prop{};
  const device_status st = run([&] { return cudaGetDeviceProperties(&prop, device); });
  if (st) {
    for (std::size_t i = 0; i < out.bytes.size(); ++i) out.bytes[i] = static_cast<std::uint8_t>(prop.uuid.bytes[i]);
  }
  return st;
}

device_status cudart_backend::device_alloc_mode(int device, alloc_mode& out) noexcept {
  out = alloc_mode::unknown;
  int pools = 0;
  // Per device: one die of a box may have pools and another not (MIG, vGPU).
  const device_status st =
      run([&] { return cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device); });
  if (st) out = pools != 0 && options_.memory_pools ? alloc_mode::stream_ordered : alloc_mode::plain;
  return st;
}

device_status cudart_backend::alloc_async(int device, std::size_t bytes, stream_handle s, void*& out) noexcept {
  out = nullptr;
  if (bytes == 0 || !s) return invalid();
  // Pools turned off: as a device without them (where cudaMallocAsync itself
  // answers cudaErrorNotSupported).
  if (!options_.memory_pools) return from(cudaErrorNotSupported);
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

device_status cudart_backend::alloc_plain(int device, std::size_t bytes, void*& out) noexcept {
  out = nullptr;
  if (bytes == 0) return invalid();
  void* p = nullptr;
  // Serialises streams (an implicit synchronisation point): bind/resize only.
  const device_status st = run([&] { return on_device(device, [&] { return cudaMalloc(&p, bytes); }); });
  if (st) out = p;
  return st;
}

device_status cudart_backend::free_plain(void* p) noexcept {
  if (p == nullptr) return invalid();
  // Synchronises the device. The caller frees only after the retire fence
  // completed (nothing queued still uses `p`): that wait is a cost, not the guarantee.
  return run([&] { return cudaFree(p); });
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
  if (!st) return st;
  const stream_handle made{reinterpret_cast<std::uint64_t>(s)};
#if !PNMEM_CUDART_STREAM_GET_ID
  // A fresh id even if the runtime reused a destroyed stream's handle.
  if (streams_.add(made.value) == 0) {
    (void)cudaStreamDestroy(s);
    return from(cudaErrorMemoryAllocation);
  }
#endif
  out = made;
  return st;
}

device_status cudart_backend::stream_destroy(stream_handle s) noexcept {
  if (!s) return invalid();
  // Forgotten first: once destroyed, the handle may come back for another stream.
  (void)streams_.remove(s.value);
  // Returns at once; work already queued on the stream still completes.
  return run([&] { return cudaStreamDestroy(to_stream(s)); });
}

device_status cudart_backend::adopt_stream(stream_handle s) noexcept {
  if (!s) return invalid();
#if PNMEM_CUDART_STREAM_GET_ID
  std::uint64_t id = 0;
  return stream_id(s, id);  // any stream has an id: just check the handle
#else
  return streams_.adopt(s.value) != 0 ? device_status{} : from(cudaErrorMemoryAllocation);
#endif
}

device_status cudart_backend::forget_stream(stream_handle s) noexcept {
  if (!s) return invalid();
  (void)streams_.remove(s.value);
  return {};
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
#if PNMEM_CUDART_STREAM_GET_ID
  unsigned long long id = 0;
  const device_status st = run([&] { return cudaStreamGetId(to_stream(s), &id); });
  if (st) out = id;
  return st;
#else
  // CUDA 11.x: only streams this backend created or adopted have an id.
  return streams_.find(s.value, out) ? device_status{} : from(cudaErrorInvalidResourceHandle);
#endif
}

device_status cudart_backend::copy_async(void* dst, const void* src, std::size_t bytes, stream_handle s) noexcept {
  if (dst == nullptr || src == nullptr || bytes == 0 || !s) return invalid();
  // cudaMemcpyDefault: the direction comes from unified addressing.
  return run([&] { return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, to_stream(s)); });
}

// --- rung 4b ---
//
// A kernel runs on the device current when it is launched, and the stream belongs to its own device:
// launch with the stream's device current (cudaStreamGetDevice needs CUDA 12.8; before it the
// caller's current device is used, which must then be the stream's).
namespace {
template <class Launch>
device_status launch_on_stream_device(stream_handle s, Launch launch) noexcept {
#if CUDART_VERSION >= 12080
  int device = 0;
  if (const cudaError_t e = cudaStreamGetDevice(to_stream(s), &device); e != cudaSuccess) return run([e] { return e; });
  return run([&] { return on_device(device, [&] { return static_cast<cudaError_t>(launch()); }); });
#else
  (void)s;  // launched on the caller's current device
  return run([&] { return static_cast<cudaError_t>(launch()); });
#endif
}
}  // namespace

#if PNMEM_EVICTION_KERNELS
bool cudart_backend::has_eviction_kernels() noexcept { return true; }

device_status cudart_backend::observation_scores_async(const observation_pooling& a, stream_handle s) noexcept {
  if (!valid(a) || !s) return invalid();
  return launch_on_stream_device(s, [&] { return kernels::launch_observation_scores(a, to_stream(s)); });
}
device_status cudart_backend::select_keep_async(const keep_selection& a, stream_handle s) noexcept {
  if (!valid(a) || !s) return invalid();
  return launch_on_stream_device(s, [&] { return kernels::launch_select_keep(a, to_stream(s)); });
}
device_status cudart_backend::compact_rows_async(const row_compaction& a, stream_handle s) noexcept {
  if (!valid(a) || !s) return invalid();
  return launch_on_stream_device(s, [&] { return kernels::launch_compact_rows(a, to_stream(s)); });
}
#else
bool cudart_backend::has_eviction_kernels() noexcept { return false; }

device_status cudart_backend::observation_scores_async(const observation_pooling& a, stream_handle s) noexcept {
  if (!valid(a) || !s) return invalid();
  return device_status{device_errc::not_supported, 0};
}
device_status cudart_backend::select_keep_async(const keep_selection& a, stream_handle s) noexcept {
  if (!valid(a) || !s) return invalid();
  return device_status{device_errc::not_supported, 0};
}
device_status cudart_backend::compact_rows_async(const row_compaction& a, stream_handle s) noexcept {
  if (!valid(a) || !s) return invalid();
  return device_status{device_errc::not_supported, 0};
}
#endif

}  // namespace pnmem::cuda
