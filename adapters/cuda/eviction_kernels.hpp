// eviction_kernels.hpp - host launchers of the rung 4b kernels (eviction_kernels.cu, compiled by nvcc).
//
// Private to the cudart backend: cudart_backend.cpp calls these when PNMEM_EVICTION_KERNELS is 1 (the
// build found nvcc), and answers not_supported otherwise. Each queues its kernel on `stream` (a
// cudaStream_t) with the current device and returns the launch's cudaError_t as an int; arguments were
// checked with eviction_ops.hpp's valid() before. No CUDA header here, so host-compiled code includes it.
#pragma once

#include "pnmem/cuda/eviction_ops.hpp"

namespace pnmem::cuda::kernels {

int launch_observation_scores(const observation_pooling& a, void* stream) noexcept;
int launch_select_keep(const keep_selection& a, void* stream) noexcept;
int launch_compact_rows(const row_compaction& a, void* stream) noexcept;

}  // namespace pnmem::cuda::kernels
