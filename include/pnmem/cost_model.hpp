// pnmem/cost_model.hpp - how many host bytes a prompt of n tokens costs on the CPU path, for any model.
//
// A model's cost is data: a `model_cost` value. For a prompt of n tokens in KV format f,
//
//   host cost(n) = full_kv[f] x n                      full-attention layers: grow with every token
//                + sliding_kv[f] x min(n, window)      sliding-window layers: stop at their window
//                + state_bytes_per_seq                 fixed per-sequence state (SSM / conv of hybrid models)
//                + activation_peak(n)                  the CPU path's activation high-water mark
//
// The seed's pn_admission.c is the case full_kv = 5898 B (q4) / 40960 B (fp32), no sliding layers, no
// state, and the anchor table below: `seed_model_cost`, the default of every decision that takes a model.
//
// --- KV bytes per token, from a model's shape (from_shape) ---------------------------------------------
//
// One token adds, in each attention layer, a K row of kv_heads x key_dim values and a V row of
// kv_heads x value_dim values. A format stores a row as:
//
//   fp32 (f32)  4 B per value        bf16   2 B per value
//   f16         2 B per value        fp8    1 B per value
//   q8_0        34 B per block of 32 values (32 int8 + an fp16 scale), rows rounded up to whole blocks
//   q4_0        18 B per block of 32 values (16 B of nibbles + an fp16 scale), rows rounded up
//   q4          the seed's own Q4 figure: 5898 B for its 10240 values per token (sink and window rows
//               kept in fp32 beside the blocks), i.e. ceil(values x 5898 / 10240) for any shape
//
// e.g. a Llama-3-8B shape (32 layers x 8 KV heads x 128 dims, f16): 2 x 32 x 8 x 128 x 2 B = 128 KiB.
// The seed's shape (10 full-attention layers x 2 KV heads x 256 dims) gives 40960 B in fp32, 5898 in q4.
//
// --- The activation peak (CPU path) ---------------------------------------------------------------------
//
// Either an anchor table (up to 8 (tokens, peak) pairs, linearly interpolated rounding up, constant before
// the first anchor, growing with N^2 from the last one past it) or coefficients (fixed + per_token x N +
// per_token_sq x N^2), whichever the engine gives (a table from `pnmem calibrate`, or its own formula).
// from_shape derives the seed's formula from the shape, every term rounded up:
//
//   peak(N) = fixed_activation_bytes        dequant scratch, logits, graph (256 MiB unless given)
//           + hidden x 4 B x 8 x N          per-token activations: 8 live fp32 tensors of width hidden
//           + query_heads x 4 B x N^2       one layer's attention scores for all query heads, fp32
//
// and samples it at 0, 1024, 4096, 16384, 65536 and 262144 tokens into an anchor table. For the seed's
// shape (hidden 2048, 16 query heads) that is 256 MiB + 64 KiB x N + 64 B x N^2:
//
//   N (tokens)    peak
//   0             256 MiB
//   1 024         384 MiB
//   4 096         1.5 GiB
//   16 384        17.25 GiB
//   65 536        260.25 GiB
//   262 144       4112.25 GiB
//
// The formula is convex, so straight lines between its samples lie above it: interpolation over-estimates,
// never under-estimates. Past the last anchor the peak grows with N^2 from the last anchor (again an
// over-estimate), saturating at 2^64-1. On the GPU-resident path none of this applies: the scores live
// on-die in bounded flash tiles, and admission declares the host cost 0.
//
// An engine that preallocates its KV and compute buffers at load (llama.cpp does) declares a model whose
// per-request costs are 0 (`preallocated_model_cost`), checks the preallocation once with the model-load
// check and admits later growth (prompt caches) with admit_host_bytes (admission.hpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "pnmem/detail/equality.hpp"
#include "pnmem/detail/saturating.hpp"
#include "pnmem/units.hpp"

namespace pnmem {

// KV cache formats. q4 and fp32 keep their values (0 and 1) from before the others existed.
enum class kv_format : std::uint8_t { q4, fp32, f16, bf16, fp8, q8_0, q4_0 };
inline constexpr std::size_t kv_format_count = 7;
inline constexpr std::array<kv_format, kv_format_count> all_kv_formats{
    kv_format::q4, kv_format::fp32, kv_format::f16, kv_format::bf16, kv_format::fp8, kv_format::q8_0, kv_format::q4_0};

constexpr std::string_view to_string(kv_format f) noexcept {
  switch (f) {
    case kv_format::q4: return "q4";
    case kv_format::fp32: return "fp32";
    case kv_format::f16: return "f16";
    case kv_format::bf16: return "bf16";
    case kv_format::fp8: return "fp8";
    case kv_format::q8_0: return "q8_0";
    case kv_format::q4_0: return "q4_0";
  }
  return "invalid";
}

// A format by name: the names above, plus "f32"/"float32" (fp32), "float16"/"half" (f16),
// "bfloat16" (bf16) and "fp8_e4m3"/"fp8_e5m2" (fp8); ASCII case ignored. false if unknown.
constexpr bool parse_kv_format(std::string_view s, kv_format& out) noexcept {
  auto eq = [](std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      char c = a[i];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      if (c != b[i]) return false;
    }
    return true;
  };
  for (kv_format f : all_kv_formats) {
    if (eq(s, to_string(f))) {
      out = f;
      return true;
    }
  }
  struct alias {
    std::string_view name;
    kv_format f;
  };
  constexpr alias aliases[] = {{"f32", kv_format::fp32},      {"float32", kv_format::fp32}, {"float16", kv_format::f16},
                               {"half", kv_format::f16},      {"bfloat16", kv_format::bf16}, {"fp8_e4m3", kv_format::fp8},
                               {"fp8_e5m2", kv_format::fp8}};
  for (const alias& a : aliases) {
    if (eq(s, a.name)) {
      out = a.f;
      return true;
    }
  }
  return false;
}

// Bytes one row of `values` values takes in format f (block formats: whole blocks, scales included).
// q4 is the seed's ratio (5898 B per 10240 values), rounded up.
constexpr std::uint64_t kv_row_bytes(std::uint64_t values, kv_format f) noexcept {
  using detail::sat_mul;
  switch (f) {
    case kv_format::fp32: return sat_mul(values, 4);
    case kv_format::f16:
    case kv_format::bf16: return sat_mul(values, 2);
    case kv_format::fp8: return values;
    case kv_format::q8_0: return sat_mul(values / 32 + (values % 32 != 0 ? 1 : 0), 34);
    case kv_format::q4_0: return sat_mul(values / 32 + (values % 32 != 0 ? 1 : 0), 18);
    case kv_format::q4: return detail::mul_div_ceil(values, 5898, 10240);
  }
  return sat_mul(values, 4);
}

struct activation_anchor {
  std::uint64_t tokens;
  std::uint64_t peak_bytes;
  PNMEM_DEFAULTED_EQUALITY(activation_anchor)
};

inline constexpr std::size_t max_activation_anchors = 8;

// The host activation peak on the CPU path: an anchor table when n_anchors > 0, else coefficients.
struct activation_model {
  std::array<activation_anchor, max_activation_anchors> anchors{};
  std::uint32_t n_anchors = 0;
  std::uint64_t fixed_bytes = 0;         // coefficients: peak(N) = fixed + per_token x N + per_token_sq x N^2
  std::uint64_t per_token_bytes = 0;
  std::uint64_t per_token_sq_bytes = 0;

  PNMEM_DEFAULTED_EQUALITY(activation_model)
};

// Builds an anchor-table activation model (the first n <= 8 entries of a list).
template <std::size_t N>
constexpr activation_model activation_table(const activation_anchor (&a)[N]) noexcept {
  static_assert(N >= 1 && N <= max_activation_anchors, "an activation table has 1 to 8 anchors");
  activation_model m;
  for (std::size_t i = 0; i < N; ++i) m.anchors[i] = a[i];
  m.n_anchors = static_cast<std::uint32_t>(N);
  return m;
}

constexpr activation_model activation_coefficients(std::uint64_t fixed, std::uint64_t per_token,
                                                   std::uint64_t per_token_sq) noexcept {
  activation_model m;
  m.fixed_bytes = fixed;
  m.per_token_bytes = per_token;
  m.per_token_sq_bytes = per_token_sq;
  return m;
}

[[gnu::always_inline]] constexpr std::uint64_t activation_peak_bytes(const activation_model& m, std::uint64_t n) noexcept {
  using detail::sat_add;
  using detail::sat_mul;
  if (m.n_anchors == 0) {
    return sat_add(sat_add(m.fixed_bytes, sat_mul(m.per_token_bytes, n)), sat_mul(m.per_token_sq_bytes, sat_mul(n, n)));
  }
  const std::size_t count = m.n_anchors > max_activation_anchors ? max_activation_anchors : m.n_anchors;
  const auto& a = m.anchors;
  if (n <= a[0].tokens) return a[0].peak_bytes;
  // Unrolled (at most 8 anchors): for a model known at compile time (the seed's) every span and rise is
  // then a constant and the division a multiplication; without the pragma g++ kept the loop, reading
  // the table and dividing in hardware (the seed's admit_request CAP: 477 -> 273 instructions a call).
#if !defined(__CUDACC__)  // nvcc's front end does not know the pragma (a warning in every .cu file)
#pragma GCC unroll 8
#endif
  for (std::size_t i = 1; i < count; ++i) {
    if (n <= a[i].tokens) {
      const std::uint64_t span = a[i].tokens - a[i - 1].tokens;
      const std::uint64_t rise = detail::sat_sub(a[i].peak_bytes, a[i - 1].peak_bytes);
      // Round the interpolated share up: the table must not under-estimate. A product past 2^64 (peaks
      // far beyond any host) is divided exactly in 128 bits, not saturated (which would under-estimate).
      std::uint64_t num = 0;
      if (__builtin_expect(detail::mul_overflows(rise, n - a[i - 1].tokens, num), 0)) {
        return sat_add(a[i - 1].peak_bytes, detail::mul_div_ceil(rise, n - a[i - 1].tokens, span));
      }
      return sat_add(a[i - 1].peak_bytes, num / span + (num % span != 0 ? 1 : 0));
    }
  }
  const activation_anchor last = a[count - 1];
  if (last.tokens == 0) return last.peak_bytes;
  return detail::mul_div(detail::mul_div(last.peak_bytes, n, last.tokens), n, last.tokens);
}

// What one model costs the host, as data. A structural type: it can be a constexpr value or a
// template argument. Indexed by kv_format (static_cast<std::size_t>(f)).
struct model_cost {
  std::array<std::uint64_t, kv_format_count> full_kv_bytes_per_token{};     // full-attention layers
  std::array<std::uint64_t, kv_format_count> sliding_kv_bytes_per_token{};  // sliding-window layers
  std::uint64_t sliding_window = 0;       // tokens a sliding layer keeps; 0 = none (sliding layers grow as full ones)
  std::uint64_t state_bytes_per_seq = 0;  // fixed per-sequence state (SSM / conv), paid at any length
  kv_format normal_kv = kv_format::fp32;  // the model's own KV format
  kv_format compact_kv = kv_format::q4;   // the one the ladder's rung 4a forces on new caches
  activation_model activation{};

  PNMEM_DEFAULTED_EQUALITY(model_cost)
};

// A model's shape, the input of from_shape. Zero fields count as zero (a shape with no K/V heads costs no KV).
struct model_shape {
  std::uint32_t layers = 0;          // attention layers (full + sliding; SSM-only layers are not counted)
  std::uint32_t sliding_layers = 0;  // of which sliding-window layers (at most `layers`)
  std::uint32_t sliding_window = 0;  // tokens a sliding layer keeps
  std::uint32_t kv_heads = 0;
  std::uint32_t key_dim = 0;         // per-head K dim
  std::uint32_t value_dim = 0;       // per-head V dim; 0 = key_dim
  std::uint32_t query_heads = 0;
  std::uint32_t hidden_size = 0;
  std::uint64_t state_bytes_per_seq = 0;
  std::uint64_t fixed_activation_bytes = 256 * MiB;
  kv_format normal_kv = kv_format::f16;
  kv_format compact_kv = kv_format::q4_0;

  PNMEM_DEFAULTED_EQUALITY(model_shape)
};

// The token counts from_shape samples the activation formula at.
inline constexpr std::array<std::uint64_t, 6> shape_anchor_tokens{0, 1024, 4096, 16384, 65536, 262144};

constexpr model_cost from_shape(const model_shape& s) noexcept {
  using detail::sat_add;
  using detail::sat_mul;
  model_cost m;
  const std::uint32_t sliding = s.sliding_layers > s.layers ? s.layers : s.sliding_layers;
  const std::uint64_t full = s.layers - sliding;
  const std::uint64_t vdim = s.value_dim == 0 ? s.key_dim : s.value_dim;
  const std::uint64_t k_values = std::uint64_t{s.kv_heads} * s.key_dim;
  const std::uint64_t v_values = std::uint64_t{s.kv_heads} * vdim;
  for (kv_format f : all_kv_formats) {
    const auto i = static_cast<std::size_t>(f);
    if (f == kv_format::q4) {  // a ratio over all of a token's values
      m.full_kv_bytes_per_token[i] = kv_row_bytes(sat_mul(full, k_values + v_values), f);
      m.sliding_kv_bytes_per_token[i] = kv_row_bytes(sat_mul(sliding, k_values + v_values), f);
    } else {  // per row: blocks do not span a K and a V row
      const std::uint64_t per_layer = sat_add(kv_row_bytes(k_values, f), kv_row_bytes(v_values, f));
      m.full_kv_bytes_per_token[i] = sat_mul(full, per_layer);
      m.sliding_kv_bytes_per_token[i] = sat_mul(sliding, per_layer);
    }
  }
  m.sliding_window = sliding == 0 ? 0 : s.sliding_window;
  m.state_bytes_per_seq = s.state_bytes_per_seq;
  m.normal_kv = s.normal_kv;
  m.compact_kv = s.compact_kv;
  const activation_model formula =
      activation_coefficients(s.fixed_activation_bytes, sat_mul(std::uint64_t{s.hidden_size}, 4 * 8),
                              sat_mul(std::uint64_t{s.query_heads}, 4));
  for (std::size_t i = 0; i < shape_anchor_tokens.size(); ++i) {
    m.activation.anchors[i] = {shape_anchor_tokens[i], activation_peak_bytes(formula, shape_anchor_tokens[i])};
  }
  m.activation.n_anchors = static_cast<std::uint32_t>(shape_anchor_tokens.size());
  return m;
}

// The seed's model: Qwen3.5-MoE's 10 full-attention layers x 2 KV heads x 256 dims, hidden 2048, 16 query
// heads; its KV caches are fp32, compacted to the seed's Q4.
inline constexpr model_shape seed_model_shape = [] {
  model_shape s;
  s.layers = 10;
  s.kv_heads = 2;
  s.key_dim = 256;
  s.query_heads = 16;
  s.hidden_size = 2048;
  s.normal_kv = kv_format::fp32;
  s.compact_kv = kv_format::q4;
  return s;
}();
inline constexpr model_cost seed_model_cost = from_shape(seed_model_shape);

// A model whose KV and compute buffers were allocated at load: each request costs the host nothing more.
inline constexpr model_cost preallocated_model_cost = [] {
  model_cost m;
  m.activation = activation_coefficients(0, 0, 0);
  return m;
}();

namespace detail {
// Where format f sits in a model's per-format arrays; a value outside the enum reads as fp32's.
constexpr std::size_t kv_index(kv_format f) noexcept {
  return static_cast<std::size_t>(f) < kv_format_count ? static_cast<std::size_t>(f) : 1;
}
}  // namespace detail

constexpr std::uint64_t kv_bytes_per_token(const model_cost& m, kv_format f) noexcept {
  const std::size_t i = detail::kv_index(f);
  return detail::sat_add(m.full_kv_bytes_per_token[i], m.sliding_kv_bytes_per_token[i]);
}

// KV bytes of n tokens of one sequence in format f.
[[gnu::always_inline]] constexpr std::uint64_t kv_bytes(const model_cost& m, kv_format f, std::uint64_t n) noexcept {
  const std::size_t i = detail::kv_index(f);
  const std::uint64_t kept = m.sliding_window != 0 && n > m.sliding_window ? m.sliding_window : n;
  return detail::sat_add(detail::sat_mul(m.full_kv_bytes_per_token[i], n),
                         detail::sat_mul(m.sliding_kv_bytes_per_token[i], kept));
}

[[gnu::always_inline]] constexpr std::uint64_t host_cost_bytes(const model_cost& m, int n_tokens, kv_format kv) noexcept {
  const std::uint64_t n = n_tokens < 0 ? 0 : static_cast<std::uint64_t>(n_tokens);
  return detail::sat_add(detail::sat_add(kv_bytes(m, kv, n), m.state_bytes_per_seq),
                         activation_peak_bytes(m.activation, n));
}

namespace detail {

// A model given as coefficients (no anchor table), on one side of its sliding window: its host cost
// of n tokens is the polynomial a + b*n + c*n^2, here without saturation, in 128 bits. Every term is
// non-negative and n < 2^31, so the sum stays below 2^127 and host_cost_bytes(m, n, kv) ==
// min(2^64-1, at(n)) for every n on that side (tested): the CAP solve checks a guess against a limit
// with one polynomial instead of host_cost_bytes' saturating steps.
struct coefficient_piece {
  u128 a = 0;
  u128 b = 0;
  u128 c = 0;
  [[gnu::always_inline]] constexpr u128 at(std::uint64_t n) const noexcept { return a + b * n + c * (n * n); }
};

// past_window: n >= m.sliding_window (a sliding layer then keeps the window, not n); false when the
// model has no window.
[[gnu::always_inline]] constexpr coefficient_piece coefficient_piece_of(const model_cost& m, kv_format kv,
                                                                        bool past_window) noexcept {
  const std::size_t i = kv_index(kv);
  const std::uint64_t slide = m.sliding_kv_bytes_per_token[i];
  const activation_model& act = m.activation;
  coefficient_piece p;
  p.a = u128{m.state_bytes_per_seq} + act.fixed_bytes + (past_window ? u128{slide} * m.sliding_window : 0);
  p.b = u128{m.full_kv_bytes_per_token[i]} + act.per_token_bytes + (past_window ? 0 : slide);
  p.c = act.per_token_sq_bytes;
  return p;
}

}  // namespace detail

// What is wrong with a model_cost, or "" when nothing is. Decisions take any value and stay
// conservative; this is for values read from files and callers (the C ABI, the CLI) to refuse.
constexpr std::string_view validate(const model_cost& m) noexcept {
  if (static_cast<std::size_t>(m.normal_kv) >= kv_format_count) return "normal_kv is not a KV format";
  if (static_cast<std::size_t>(m.compact_kv) >= kv_format_count) return "compact_kv is not a KV format";
  const activation_model& a = m.activation;
  if (a.n_anchors > max_activation_anchors) return "more than 8 activation anchors";
  for (std::size_t i = 1; i < a.n_anchors; ++i) {
    if (a.anchors[i].tokens <= a.anchors[i - 1].tokens) return "activation anchors' tokens must increase";
    if (a.anchors[i].peak_bytes < a.anchors[i - 1].peak_bytes) return "activation anchors' peaks must not decrease";
  }
  if (a.n_anchors > 0 && (a.fixed_bytes != 0 || a.per_token_bytes != 0 || a.per_token_sq_bytes != 0)) {
    return "an activation model is an anchor table or coefficients, not both";
  }
  return {};
}

// --- the seed's model, under the names the seed-only API had -------------------------------------------

inline constexpr std::uint64_t kv_bytes_per_token_q4 = 5898;     // ~5.76 KiB
inline constexpr std::uint64_t kv_bytes_per_token_fp32 = 40960;  // 40 KiB

constexpr std::uint64_t kv_bytes_per_token(kv_format f) noexcept { return kv_bytes_per_token(seed_model_cost, f); }

// The seed's formula the anchors were taken from; kept so tests can prove the table never under-estimates it.
constexpr std::uint64_t activation_peak_model_bytes(std::uint64_t n) noexcept {
  return activation_peak_bytes(activation_coefficients(256 * MiB, 64 * KiB, 64), n);
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
  return activation_peak_bytes(seed_model_cost.activation, n_tokens < 0 ? 0 : static_cast<std::uint64_t>(n_tokens));
}

constexpr std::uint64_t host_cost_bytes(int n_tokens, kv_format kv) noexcept {
  return host_cost_bytes(seed_model_cost, n_tokens, kv);
}

// The seed model is what pn_admission.c hard-codes, to the byte.
static_assert(kv_bytes_per_token(kv_format::q4) == kv_bytes_per_token_q4);
static_assert(kv_bytes_per_token(kv_format::fp32) == kv_bytes_per_token_fp32);
static_assert(seed_model_cost.activation.n_anchors == activation_anchors.size());
static_assert(seed_model_cost.activation.anchors[5] == activation_anchors[5] &&
              seed_model_cost.activation.anchors[1] == activation_anchors[1]);

}  // namespace pnmem
