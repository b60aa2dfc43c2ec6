// tests/cuda/cudart_fixture.hpp - the real runtime as a test device, shared by the
// cudart runs of the backend conformance suite and the buffer owner's protocol suite.
#pragma once

#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "pnmem/cuda/cudart_backend.hpp"

namespace pnmem::cuda::test {

// Holding a stream without a kernel: a host function queued on it spins until
// released, so everything queued behind it waits, deterministically.
// Pools: the device's own allocation mode (memory pools where it has them), or
// (false) pools turned off, so the plain fallback (cudaMalloc / cudaFree behind
// the retire fence) runs on a device that has pools too: scripts/gpu-check runs
// both on the GPU.
template <bool Pools>
struct cudart_fixture_t {
  static constexpr bool simulated = false;
  static constexpr bool force_plain = !Pools;
  static const inline bool eviction_kernels = cudart_backend::has_eviction_kernels();

  cudart_backend dev{cudart_options{.memory_pools = Pools}};
  std::atomic<bool> open{true};

  cudart_fixture_t() = default;
  cudart_fixture_t(const cudart_fixture_t&) = delete;
  cudart_fixture_t& operator=(const cudart_fixture_t&) = delete;
  ~cudart_fixture_t() {
    release();  // a failed REQUIRE must not leave a stream spinning
    (void)cudaDeviceSynchronize();
  }

  static void CUDART_CB gate(void* flag) {
    const auto* open_flag = static_cast<const std::atomic<bool>*>(flag);
    while (!open_flag->load(std::memory_order_acquire)) std::this_thread::yield();
  }

  device_backend& backend() { return dev; }
  void hold(stream_handle s) {
    open.store(false, std::memory_order_release);
    // The backend's handle is the runtime's cudaStream_t (cudart_backend.hpp).
    REQUIRE(cudaLaunchHostFunc(reinterpret_cast<cudaStream_t>(s.value), &gate, &open) == cudaSuccess);
  }
  void release() { open.store(true, std::memory_order_release); }
  // Far longer than any unblocked copy in the suites takes.
  void let_time_pass() { std::this_thread::sleep_for(std::chrono::milliseconds(50)); }
  // Test-only: the library never synchronises the device.
  void settle() { REQUIRE(cudaDeviceSynchronize() == cudaSuccess); }
  void check_clean() { CHECK(cudaPeekAtLastError() == cudaSuccess); }
};

using cudart_fixture = cudart_fixture_t<true>;
using cudart_fixture_plain = cudart_fixture_t<false>;

// main() of a cudart suite: exit 77 (Meson: SKIP) with one line when there is
// no usable device, so a machine without a GPU reports "skipped", never "passed".
inline int run_if_device(int argc, char** argv) {
  cudart_backend probe;
  int n = 0;
  const device_status st = probe.device_count(n);
  if (!st || n == 0) {
    std::printf("no CUDA device: %s (%s, %s)\n", std::string(to_string(st.code)).c_str(),
                std::string(cudart_backend::error_name(st.native)).c_str(),
                std::string(cudart_backend::error_string(st.native)).c_str());
    return 77;
  }
  alloc_mode mode = alloc_mode::unknown;
  const device_status ms = probe.device_alloc_mode(0, mode);
  std::printf("cudart (built against CUDART_VERSION %d): %d device(s); device 0 allocation mode: %s%s\n",
              cudart_backend::compiled_runtime_version(), n, std::string(to_string(mode)).c_str(),
              ms ? "" : " (device_alloc_mode failed)");
  doctest::Context ctx(argc, argv);
  return ctx.run();
}

}  // namespace pnmem::cuda::test
