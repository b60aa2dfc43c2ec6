// The buffer owner's protocol suite (owner_protocol.hpp) on the real CUDA runtime.
// Exits 77 (Meson: SKIP) without a usable device. Run it under
// compute-sanitizer (memcheck) on a GPU machine: there, memcheck is the
// use-after-free detector that the fake's violations() are here.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "cudart_fixture.hpp"
#include "owner_protocol.hpp"

namespace pnmem::cuda::test {

using pnmem::cuda::test::cudart_fixture;
PNMEM_OWNER_PROTOCOL(cudart_fixture);

}  // namespace pnmem::cuda::test

int main(int argc, char** argv) { return pnmem::cuda::test::run_if_device(argc, argv); }
