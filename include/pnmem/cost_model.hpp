// pnmem/cost_model.hpp - how many host bytes a prompt of n tokens costs on the CPU path.
//
// host cost(n) = kv_bytes_per_token x n + activation_peak_bytes(n)     (seed: pn_admission.c)
//
// KV per token is the seed's: 5898 B in Q4, 40960 B in fp32. 40960 is
// 10 full-attention layers x (K + V) x 2 KV heads x 256 dims x 4 B, the shape of
// the seed's Qwen3.5-MoE; the anchors below use the same shape.
//
// The activation peak is a 6-anchor table, linearly interpolated. The seed's
// anchors are conservative CPU-path measurements where the O(N^2) attention
// scores dominate; it does not list them, so pnmem derives them from that shape
// with every term rounded up:
//
//   peak(N) = 256 MiB                 fixed buffers (dequant scratch, logits, graph)
//           + 64 KiB x N              per-token activations (hidden 2048 x fp32 x 8 live tensors)
//           + 64 B x N^2              scores of one layer materialised for all 16 query heads, fp32
//
//   N (tokens)    peak
//   0             256 MiB
//   1 024         384 MiB
//   4 096         1.5 GiB
//   16 384        17.25 GiB
//   65 536        260.25 GiB
//   262 144       4112.25 GiB
//
// The formula is convex, so straight lines between its samples lie above it:
// interpolation over-estimates, never under-estimates. Past the last anchor the
// peak grows with N^2 from the last anchor (again an over-estimate), saturating
// at 2^64-1. On the GPU-resident path none of this applies: the scores live
// on-die in bounded flash tiles, and admission declares the host cost 0.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "pnmem/detail/saturating.hpp"
#include "pnmem/units.hpp"

namespace pnmem {

enum class kv_format : std::uint8_t { q4, fp32 };

constexpr std::string_view to_string(kv_format f) noexcept { return f == kv_format::q4 ? "q4" : "fp32"; }

inline constexpr std::uint64_t kv_bytes_per_token_q4 = 5898;     // ~5.76 KiB
inline constexpr std::uint64_t kv_bytes_per_token_fp32 = 40960;  // 40 KiB

constexpr std::uint64_t kv_bytes_per_token(kv_format f) noexcept {
  return f == kv_format::q4 ? kv_bytes_per_token_q4 : kv_bytes_per_token_fp32;
}

struct activation_anchor {
  std::uint64_t tokens;
  std::uint64_t peak_bytes;
};

// The model the anchors were taken from; kept so tests can prove the table
// never under-estimates it.
constexpr std::uint64_t activation_peak_model_bytes(std::uint64_t n) noexcept {
  using detail::sat_add;
  using detail::sat_mul;
  return sat_add(sat_add(256 * MiB, sat_mul(64 * KiB, n)), sat_mul(64, sat_mul(n, n)));
}

inline constexpr std::array<activation_anchor, 6> activation_anchors{{
    {0, 256 * MiB},
    {1024, 384 * MiB},
    {4096, 3 * GiB / 2},
    {16384, 69 * GiB / 4},      // 17.25 GiB
    {65536, 1041 * GiB / 4},    // 260.25 GiB
    {262144, 16449 * GiB / 4},  // 4112.25 GiB
}};

constexpr std::uint64_t activation_peak_bytes(int n_tokens) noexcept {
  const std::uint64_t n = n_tokens < 0 ? 0 : static_cast<std::uint64_t>(n_tokens);
  const auto& a = activation_anchors;
  for (std::size_t i = 1; i < a.size(); ++i) {
    if (n <= a[i].tokens) {
      const std::uint64_t span = a[i].tokens - a[i - 1].tokens;
      const std::uint64_t rise = a[i].peak_bytes - a[i - 1].peak_bytes;
      // Round the interpolated share up: the table must not under-estimate.
      const std::uint64_t num = detail::sat_mul(rise, n - a[i - 1].tokens);
      return a[i - 1].peak_bytes + (num + span - 1) / span;
    }
  }
  const activation_anchor last = a.back();
  return detail::mul_div(detail::mul_div(last.peak_bytes, n, last.tokens), n, last.tokens);
}

constexpr std::uint64_t host_cost_bytes(int n_tokens, kv_format kv) noexcept {
  const std::uint64_t n = n_tokens < 0 ? 0 : static_cast<std::uint64_t>(n_tokens);
  return detail::sat_add(detail::sat_mul(kv_bytes_per_token(kv), n), activation_peak_bytes(n_tokens));
}

}  // namespace pnmem
