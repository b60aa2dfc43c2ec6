// owner_test_support.hpp - shapes, plans and "kernels" shared by the buffer owner's tests and benchmark.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "pnmem/cuda/buffer_owner.hpp"
#include "pnmem/cuda/decode_shape.hpp"
#include "pnmem/ladder.hpp"

namespace pnmem::cuda::test {

using namespace pnmem::cuda;

// The fake's memory-pool mode for the owner suites meson runs once per mode:
// cuda_buffer_owner (pools: alloc_async / free_async) and cuda_buffer_owner_no_pools
// (PNMEM_TEST_FAKE_POOLS=0: a device without pools, so the owner falls back to
// alloc_plain / free_plain behind its retire fence).
inline bool fake_pools_from_env() {
  const char* e = std::getenv("PNMEM_TEST_FAKE_POOLS");
  return e == nullptr || std::string_view(e) != "0";
}

inline alloc_mode expected_mode(bool pools) { return pools ? alloc_mode::stream_ordered : alloc_mode::plain; }

// Small on purpose: the fake backs every byte with host memory.
inline model_shape small_shape() {
  model_shape m;
  m.attention_layers = 2;
  m.kv_heads = 2;
  m.head_dim = 32;
  m.q4_sink_tokens = 2;
  m.q4_window_tokens = 4;
  m.ssm_layers = 2;
  m.conv_state_bytes_per_slot = 256;
  m.ssm_state_bytes_per_slot = 512;
  m.scratch_bytes_per_slot = 128;
  m.dtoh_bytes_per_slot = 64;
  return m;
}

inline pnmem::ladder_plan plan_at(pnmem::mem_level level, int configured_slots = 8) {
  return pnmem::ladder_plan_for(level, pnmem::ladder_config{configured_slots, 0, false});
}

// Every device buffer a decode step reads and writes: what its kernels (or a
// captured graph's nodes) name.
inline std::vector<buffer_use> step_uses(const model_shape& m, const decode_buffers& b) {
  std::vector<buffer_use> uses;
  const auto slots = static_cast<std::uint64_t>(b.slot_capacity);
  auto add = [&](std::span<void* const> v, std::uint64_t bytes) {
    for (void* p : v)
      if (p != nullptr && bytes > 0) uses.push_back({p, static_cast<std::size_t>(bytes), true});
  };
  add(b.k, kv_layer_bytes(m, b.kv, b.slot_capacity, b.max_seq_tokens));
  add(b.v, kv_layer_bytes(m, b.kv, b.slot_capacity, b.max_seq_tokens));
  add(b.sink, q4_sink_layer_bytes(m, b.kv, b.slot_capacity));
  add(b.window, q4_window_layer_bytes(m, b.kv, b.slot_capacity));
  add(b.conv, slots * m.conv_state_bytes_per_slot);
  add(b.ssm, slots * m.ssm_state_bytes_per_slot);
  if (b.scratch != nullptr) uses.push_back({b.scratch, static_cast<std::size_t>(b.scratch_bytes), true});
  return uses;
}

// The step's deferred device-to-host copy: scratch -> staging arena.
inline std::size_t dtoh_bytes(const model_shape& m, const decode_buffers& b) {
  return static_cast<std::size_t>(static_cast<std::uint64_t>(b.bound_slots) * m.dtoh_bytes_per_slot);
}

}  // namespace pnmem::cuda::test
