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
struct cudart_fixture {
  static constexpr bool simulated = false;

  cudart_backend dev;
  std::atomic<bool> open{true};

  cudart_fixture() = default;
  cudart_fixture(const cudart_fixture&) = delete;
  cudart_fixture& operator=(const cudart_fixture&) = delete;
  ~cudart_fixture() {
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
  doctest::Context ctx(argc, argv);
  return ctx.run();
}

}  // namespace pnmem::cuda::test
