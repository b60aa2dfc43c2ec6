// The buffer owner's protocol suite (owner_protocol.hpp) on the real CUDA runtime.
// Both allocation modes: the device's own, and the plain fallback forced
// (cudart_fixture_plain). Exits 77 (Meson: SKIP) without a usable device. Run it under
// compute-sanitizer (memcheck) on a GPU machine: there, memcheck is the
// use-after-free detector that the fake's violations() are here.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "cudart_fixture.hpp"
#include "owner_protocol.hpp"

TYPE_TO_STRING(pnmem::cuda::test::cudart_fixture);
TYPE_TO_STRING(pnmem::cuda::test::cudart_fixture_plain);

namespace pnmem::cuda::test {

PNMEM_OWNER_PROTOCOL(cudart_fixture);        // the device's own mode (stream_ordered where it has pools)
PNMEM_OWNER_PROTOCOL(cudart_fixture_plain);  // pools turned off: the cudaMalloc / cudaFree fallback

}  // namespace pnmem::cuda::test

int main(int argc, char** argv) { return pnmem::cuda::test::run_if_device(argc, argv); }
