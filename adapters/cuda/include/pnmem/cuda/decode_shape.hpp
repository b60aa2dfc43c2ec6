// pnmem/cuda/decode_shape.hpp - what one model's decode state is made of, and its byte sizes.
//
// The buffer owner allocates from these numbers; tests and the die feed's
// estimates use the same functions, so there is one formula per buffer.
// Every buffer is slot-major (slot s occupies one contiguous stripe), which is
// what lets a resize keep live slots by copying stripes.
#pragma once

#include <cstdint>

#include "pnmem/cost_model.hpp"

namespace pnmem::cuda {

struct model_shape {
  int attention_layers = 0;  // each has k and v slot buffers (and, in Q4, sink and window)
  int kv_heads = 0;
  int head_dim = 0;
  int q4_sink_tokens = 4;     // Q4 keeps the first tokens of a sequence in fp32 ...
  int q4_window_tokens = 32;  // ... and the most recent ones, before they are quantised
  int ssm_layers = 0;         // each has a conv and an ssm slot-state buffer
  std::uint64_t conv_state_bytes_per_slot = 0;
  std::uint64_t ssm_state_bytes_per_slot = 0;
  std::uint64_t scratch_bytes_per_slot = 0;  // batch scratch (activations of one decode step)
  std::uint64_t dtoh_bytes_per_slot = 0;     // deferred device-to-host copies of one step
};

namespace detail {
constexpr std::uint64_t nonneg(int v) noexcept { return v < 0 ? 0 : static_cast<std::uint64_t>(v); }
}  // namespace detail

// Q4: blocks of 32 values, 16 bytes of nibbles plus an fp16 scale.
inline constexpr std::uint64_t q4_block_values = 32;
inline constexpr std::uint64_t q4_block_bytes = 18;

// Bytes of one token's K (or V) row in one layer. On the die, Q4 rows are q4_0 blocks (the fp32
// sink and window are buffers of their own); every other format is cost_model.hpp's row.
constexpr std::uint64_t kv_row_bytes(const model_shape& m, kv_format f) noexcept {
  const std::uint64_t values = detail::nonneg(m.kv_heads) * detail::nonneg(m.head_dim);
  if (f == kv_format::q4) return (values + q4_block_values - 1) / q4_block_values * q4_block_bytes;
  return pnmem::kv_row_bytes(values, f);
}

// One layer's K (or V) buffer: slots x max_seq rows.
constexpr std::uint64_t kv_layer_bytes(const model_shape& m, kv_format f, int slots, int max_seq_tokens) noexcept {
  return detail::nonneg(slots) * detail::nonneg(max_seq_tokens) * kv_row_bytes(m, f);
}

// One layer's Q4 sink (or window) buffer: fp32 K and V rows, per slot. 0 in fp32.
constexpr std::uint64_t q4_sink_layer_bytes(const model_shape& m, kv_format f, int slots) noexcept {
  if (f != kv_format::q4) return 0;
  return detail::nonneg(slots) * detail::nonneg(m.q4_sink_tokens) * 2 * kv_row_bytes(m, kv_format::fp32);
}
constexpr std::uint64_t q4_window_layer_bytes(const model_shape& m, kv_format f, int slots) noexcept {
  if (f != kv_format::q4) return 0;
  return detail::nonneg(slots) * detail::nonneg(m.q4_window_tokens) * 2 * kv_row_bytes(m, kv_format::fp32);
}

constexpr std::uint64_t staging_bytes_for(const model_shape& m, int slots) noexcept {
  return detail::nonneg(slots) * m.dtoh_bytes_per_slot;
}

// All device bytes of a decode state (the die feed's "used" for this model).
constexpr std::uint64_t decode_device_bytes(const model_shape& m, kv_format f, int slots, int max_seq_tokens) noexcept {
  const std::uint64_t n = detail::nonneg(slots);
  const std::uint64_t per_attention = 2 * kv_layer_bytes(m, f, slots, max_seq_tokens) +
                                      q4_sink_layer_bytes(m, f, slots) + q4_window_layer_bytes(m, f, slots);
  const std::uint64_t per_ssm = n * (m.conv_state_bytes_per_slot + m.ssm_state_bytes_per_slot);
  return detail::nonneg(m.attention_layers) * per_attention + detail::nonneg(m.ssm_layers) * per_ssm +
         n * m.scratch_bytes_per_slot;
}

}  // namespace pnmem::cuda
