// The buffer owner's protocol suite (owner_protocol.hpp) on the real CUDA runtime.
// Exits 77 (Meson: SKIP) without a usable device. Run it under
// compute-sanitizer (memcheck) on a GPU machine: there, memcheck is the
// use-after-free detector that the fake's violations() are here.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "owner_protocol.hpp"
#include "pnmem/cuda/cudart_backend.hpp"

namespace owner_test {

// hold(): a host function spinning at the head of the stream until release().
struct cudart_fixture {
  cudart_backend dev;
  std::atomic<bool> open{true};

  cudart_fixture() = default;
  cudart_fixture(const cudart_fixture&) = delete;
  cudart_fixture& operator=(const cudart_fixture&) = delete;
  ~cudart_fixture() {
    release();
    (void)cudaDeviceSynchronize();
  }
  static void CUDART_CB gate(void* flag) {
    const auto* f = static_cast<const std::atomic<bool>*>(flag);
    while (!f->load(std::memory_order_acquire)) std::this_thread::yield();
  }
  device_backend& backend() { return dev; }
  void hold(stream_handle s) {
    open.store(false, std::memory_order_release);
    REQUIRE(cudaLaunchHostFunc(reinterpret_cast<cudaStream_t>(s.value), &gate, &open) == cudaSuccess);
  }
  void release() { open.store(true, std::memory_order_release); }
  // Test-only: the library never synchronises the device.
  void settle() { REQUIRE(cudaDeviceSynchronize() == cudaSuccess); }
  void check_clean() { CHECK(cudaPeekAtLastError() == cudaSuccess); }
};

PNMEM_OWNER_PROTOCOL(cudart_fixture);

}  // namespace owner_test

int main(int argc, char** argv) {
  pnmem::cuda::cudart_backend probe;
  int n = 0;
  if (const pnmem::cuda::device_status st = probe.device_count(n); !st || n == 0) {
    std::printf("no CUDA device: %s\n", std::string(pnmem::cuda::to_string(st.code)).c_str());
    return 77;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
