// The backend conformance suite on the real CUDA runtime.
//
// Exits 77 (Meson: SKIP) with one line when there is no usable device, so a
// machine without a GPU reports "skipped", never "passed". scripts/gpu-check runs
// it where a GPU is, and fails if it skips there.
#define DOCTEST_CONFIG_IMPLEMENT
#include "backend_conformance.hpp"

#include "cudart_fixture.hpp"

TYPE_TO_STRING(pnmem::cuda::test::cudart_fixture);
TYPE_TO_STRING(pnmem::cuda::test::cudart_fixture_plain);

namespace pnmem::cuda::test {

PNMEM_BACKEND_CONFORMANCE(cudart_fixture);
// Pools turned off (cudart_options::memory_pools): alloc_async refused, the plain path works.
TEST_CASE_TEMPLATE_INVOKE(conformance_plain, cudart_fixture_plain);

}  // namespace pnmem::cuda::test

int main(int argc, char** argv) { return pnmem::cuda::test::run_if_device(argc, argv); }
