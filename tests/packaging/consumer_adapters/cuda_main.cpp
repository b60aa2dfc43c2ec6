// Consumer of the installed CUDA adapter (pkg-config pnmem-cuda, CMake pnmem::cuda). The packaging test
// compiles it with the host compiler (CMake) and, renamed .cu, with nvcc (pkg-config): engines include
// pnmem's headers from CUDA translation units, which nvcc's own front end parses.
// The fake backend always; the cudart backend when the install has it: the device count, or the
// runtime's reason there is none (on a machine without a GPU: "CUDA driver version is insufficient ...").
// Exits 0 either way: it checks that the adapter links and runs, not that a GPU is present.
#include <cstdio>
#include <string>

#include <pnmem/admission.hpp>
#include <pnmem/cuda/fake_backend.hpp>
#if PNMEM_CONSUMER_CUDART
#include <pnmem/cuda/cudart_backend.hpp>
#endif

// Constant evaluation of the seed's model, under whichever front end compiles this file (nvcc's did not
// evaluate the overflow builtins: detail/saturating.hpp).
static_assert(pnmem::host_cost_bytes(1024, pnmem::kv_format::fp32) > pnmem::host_cost_bytes(1024, pnmem::kv_format::q4));

int main() {
  pnmem::cuda::fake_options options;
  options.devices = 2;
  pnmem::cuda::fake_backend fake{options};
  int fake_dies = 0;
  if (!fake.device_count(fake_dies)) {
    std::puts("cuda: the fake backend failed");
    return 1;
  }
  std::printf("cuda fake dies=%d\n", fake_dies);
#if PNMEM_CONSUMER_CUDART
  pnmem::cuda::cudart_backend gpu;
  int n = 0;
  if (const pnmem::cuda::device_status st = gpu.device_count(n); !st) {
    std::printf("cudart: no device: %s\n", std::string(pnmem::cuda::cudart_backend::error_string(st.native)).c_str());
  } else {
    std::printf("cudart: %d device(s)\n", n);
  }
#endif
  return 0;
}
