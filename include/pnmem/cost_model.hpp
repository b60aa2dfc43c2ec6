// pnmem/cost_model.hpp - how many host bytes a request costs on the CPU path, for any model.
//
// A model's cost is data: a `model_cost` value. For a prompt of n tokens in KV format f, with i encoder
// items (images) in cross-attention,
//
//   host cost(n) = full_kv[f] x n                          layers that keep every token
//                + sum over windows w: kv_w[f] x min(n, w)   layers that keep at most w tokens: sliding
//                                                          windows, attention chunks (after the engine's
//                                                          rule of what it keeps: model_shape.hpp)
//                + state_bytes_per_seq                     fixed per-sequence state (conv + SSM of hybrids)
//                + kv_per_encoder_item[f] x i              cross-attention KV, per image, not per token
//                + activation_peak(n)                      the CPU path's activation high-water mark
//
// The seed's pn_admission.c is the case full_kv = 5898 B (q4) / 40960 B (fp32), no windows, no state,
// no cross-attention, and the anchor table below: `seed_model_cost`, the default of every decision that
// takes a model. A model with several windows (Gemma's sliding layers beside Llama 4's chunks, say) has
// one term per distinct window, at most max_kv_windows; model_shape.hpp builds the terms from layer
// groups (from_shape), with the per-format row sizes of kv_format.hpp, e.g. a Llama-3-8B shape
// (32 layers x 8 KV heads x 128 dims, f16): 2 x 32 x 8 x 128 x 2 B = 128 KiB per token.
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
#include "pnmem/kv_format.hpp"
#include "pnmem/units.hpp"

namespace pnmem {

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

namespace detail {
// The peak at n on the line from anchor a to anchor b (a.tokens < n <= b.tokens), the share rounded up:
// the table must not under-estimate. A product past 2^64 (peaks far beyond any host) is divided exactly
// in 128 bits, not saturated (which would under-estimate).
[[gnu::always_inline]] constexpr std::uint64_t interpolate_up(const activation_anchor& a, const activation_anchor& b,
                                                              std::uint64_t n) noexcept {
  const std::uint64_t span = b.tokens - a.tokens;
  const std::uint64_t rise = sat_sub(b.peak_bytes, a.peak_bytes);
  std::uint64_t num = 0;
  if (__builtin_expect(mul_overflows(rise, n - a.tokens, num), 0)) return sat_add(a.peak_bytes, mul_div_ceil(rise, n - a.tokens, span));
  return sat_add(a.peak_bytes, num / span + (num % span != 0 ? 1 : 0));
}
}  // namespace detail

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
    if (n <= a[i].tokens) return detail::interpolate_up(a[i - 1], a[i], n);
  }
  const activation_anchor last = a[count - 1];
  if (last.tokens == 0) return last.peak_bytes;
  return detail::mul_div(detail::mul_div(last.peak_bytes, n, last.tokens), n, last.tokens);
}

// Layers that keep at most `window` tokens of a sequence (sliding-window layers keep the last W,
// chunked-attention layers the current chunk; the engine's own margin included: model_shape.hpp), and
// the bytes one token adds to them while the sequence is shorter than that. Indexed by kv_format.
struct kv_window {
  std::array<std::uint64_t, kv_format_count> bytes_per_token{};
  std::uint64_t window = 0;  // tokens kept (> 0)

  PNMEM_DEFAULTED_EQUALITY(kv_window)
};

inline constexpr std::size_t max_kv_windows = 4;

// What one model costs the host, as data. A structural type: it can be a constexpr value or a
// template argument. Per-format arrays are indexed by kv_format (static_cast<std::size_t>(f)).
struct model_cost {
  std::array<std::uint64_t, kv_format_count> full_kv_bytes_per_token{};  // layers that keep every token
  // The windowed terms: windows[0 .. n_windows), windows increasing (validate). Entries past n_windows
  // are not read. A model with one sliding window (Gemma 2, Mistral) has one term.
  std::array<kv_window, max_kv_windows> windows{};
  std::uint32_t n_windows = 0;
  // The engine allocates KV in blocks of this many tokens (vLLM's block, llama.cpp's 256-cell padding):
  // n tokens are charged as n rounded up to a whole block, every layer alike. 0 or 1: per token.
  std::uint32_t kv_block_tokens = 0;
  std::uint64_t state_bytes_per_seq = 0;  // fixed per-sequence state (conv + SSM), paid at any length
  // Cross-attention KV of one encoder item (an image: Mllama's tiles x patches), paid per item a request
  // carries (request_spec::encoder_items), not per text token.
  std::array<std::uint64_t, kv_format_count> kv_bytes_per_encoder_item{};
  kv_format normal_kv = kv_format::fp32;  // the model's own KV format
  kv_format compact_kv = kv_format::q4;   // the one the ladder's rung 4a forces on new caches
  activation_model activation{};

  PNMEM_DEFAULTED_EQUALITY(model_cost)
};

// The seed's model: Qwen3.5-MoE's 10 full-attention layers x 2 KV heads x 256 dims (K and V); its KV
// caches are fp32, compacted to the seed's Q4; the seed's activation table. (model_shape.hpp:
// seed_model_shape, which from_shape turns into exactly this.)
inline constexpr model_cost seed_model_cost = [] {
  model_cost m;
  for (kv_format f : all_kv_formats) {
    const auto i = static_cast<std::size_t>(f);
    // q4 is a ratio over all of a token's values; the others store K and V rows of 2 x 256 values.
    m.full_kv_bytes_per_token[i] = f == kv_format::q4 ? kv_row_bytes(10 * 2 * 2 * 256, f) : 10 * 2 * kv_row_bytes(2 * 256, f);
  }
  m.normal_kv = kv_format::fp32;
  m.compact_kv = kv_format::q4;
  const activation_anchor table[] = {{0, 256 * MiB},          {1024, 384 * MiB},         {4096, 3 * GiB / 2},
                                     {16384, 69 * GiB / 4},   {65536, 1041 * GiB / 4},   {262144, 16449 * GiB / 4}};
  m.activation = activation_table(table);
  return m;
}();

// A model whose KV and compute buffers were allocated at load: each request costs the host nothing more.
inline constexpr model_cost preallocated_model_cost = [] {
  model_cost m;
  m.activation = activation_coefficients(0, 0, 0);
  return m;
}();

namespace detail {
constexpr std::size_t window_count(const model_cost& m) noexcept {
  return m.n_windows < max_kv_windows ? m.n_windows : max_kv_windows;
}
}  // namespace detail

// Bytes one token adds to one sequence's KV in format f while it is shorter than every window.
constexpr std::uint64_t kv_bytes_per_token(const model_cost& m, kv_format f) noexcept {
  const std::size_t i = detail::kv_index(f);
  std::uint64_t b = m.full_kv_bytes_per_token[i];
  for (std::size_t w = 0; w < detail::window_count(m); ++w) b = detail::sat_add(b, m.windows[w].bytes_per_token[i]);
  return b;
}

namespace detail {
// n rounded up to the model's KV block (n itself for a model charged per token).
[[gnu::always_inline]] constexpr std::uint64_t kv_tokens(const model_cost& m, std::uint64_t n) noexcept {
  const std::uint64_t g = m.kv_block_tokens;
  if (g <= 1) return n;
  const std::uint64_t partial = (g & (g - 1)) == 0 ? n & (g - 1) : n % g;
  return partial == 0 ? n : sat_add(n, g - partial);
}

// KV bytes of exactly n tokens, not rounded to a block: the line the CAP solve walks.
[[gnu::always_inline]] constexpr std::uint64_t kv_bytes_unblocked(const model_cost& m, kv_format f,
                                                                  std::uint64_t n) noexcept {
  const std::size_t i = kv_index(f);
  std::uint64_t b = sat_mul(m.full_kv_bytes_per_token[i], n);
  const std::size_t count = window_count(m);
  for (std::size_t w = 0; w < count; ++w) {
    const kv_window& t = m.windows[w];
    const std::uint64_t kept = t.window != 0 && n > t.window ? t.window : n;  // a window of 0 (never valid) keeps all
    b = sat_add(b, sat_mul(t.bytes_per_token[i], kept));
  }
  return b;
}
}  // namespace detail

// KV bytes of n tokens of one sequence in format f: n rounded up to the model's block, each windowed
// term kept up to its window.
[[gnu::always_inline]] constexpr std::uint64_t kv_bytes(const model_cost& m, kv_format f, std::uint64_t n) noexcept {
  return detail::kv_bytes_unblocked(m, f, detail::kv_tokens(m, n));
}

// Cross-attention KV of `items` encoder items in format f.
constexpr std::uint64_t encoder_kv_bytes(const model_cost& m, kv_format f, std::uint64_t items) noexcept {
  return detail::sat_mul(m.kv_bytes_per_encoder_item[detail::kv_index(f)], items);
}

// The host cost of a prompt of n_tokens (negative: 0) in format kv: KV, state and activation peak.
[[gnu::always_inline]] constexpr std::uint64_t host_cost_bytes(const model_cost& m, int n_tokens, kv_format kv) noexcept {
  const std::uint64_t n = n_tokens < 0 ? 0 : static_cast<std::uint64_t>(n_tokens);
  return detail::sat_add(detail::sat_add(kv_bytes(m, kv, n), m.state_bytes_per_seq),
                         activation_peak_bytes(m.activation, n));
}

namespace detail {
// host_cost_bytes with the KV not rounded to a block (the same for a model charged per token).
[[gnu::always_inline]] constexpr std::uint64_t host_cost_unblocked(const model_cost& m, std::uint64_t n,
                                                                   kv_format kv) noexcept {
  return sat_add(sat_add(kv_bytes_unblocked(m, kv, n), m.state_bytes_per_seq), activation_peak_bytes(m.activation, n));
}
}  // namespace detail

// The same, with the cross-attention KV of `encoder_items` items (images) the request carries.
constexpr std::uint64_t host_cost_bytes(const model_cost& m, int n_tokens, kv_format kv, int encoder_items) noexcept {
  return detail::sat_add(host_cost_bytes(m, n_tokens, kv),
                         encoder_kv_bytes(m, kv, encoder_items < 0 ? 0 : static_cast<std::uint64_t>(encoder_items)));
}

namespace detail {

// A model given as coefficients (no anchor table), on one piece between its windows: its host cost
// of n tokens (KV not rounded to a block) is the polynomial a + b*n + c*n^2, here without saturation,
// in 128 bits. Every term is non-negative and n < 2^31, so the sum stays below 2^127 and
// host_cost_unblocked(m, n, kv) == min(2^64-1, at(n)) for every n on that piece (tested): the CAP solve checks a guess against a limit
// with one polynomial instead of host_cost_bytes' saturating steps.
struct coefficient_piece {
  u128 a = 0;
  u128 b = 0;
  u128 c = 0;
  [[gnu::always_inline]] constexpr u128 at(std::uint64_t n) const noexcept { return a + b * n + c * (n * n); }
};

// The piece that holds `from` and runs up to the next window above it: windows at or below `from`
// keep their whole window (a constant), the others grow with every token.
[[gnu::always_inline]] constexpr coefficient_piece coefficient_piece_of(const model_cost& m, kv_format kv,
                                                                        std::uint64_t from) noexcept {
  const std::size_t i = kv_index(kv);
  const activation_model& act = m.activation;
  coefficient_piece p;
  p.a = u128{m.state_bytes_per_seq} + act.fixed_bytes;
  p.b = u128{m.full_kv_bytes_per_token[i]} + act.per_token_bytes;
  for (std::size_t w = 0; w < window_count(m); ++w) {
    const kv_window& t = m.windows[w];
    if (t.window != 0 && t.window <= from) {
      p.a += u128{t.bytes_per_token[i]} * t.window;
    } else {
      p.b += t.bytes_per_token[i];
    }
  }
  p.c = act.per_token_sq_bytes;
  return p;
}

}  // namespace detail

// What is wrong with a model_cost, or "" when nothing is. Decisions take any value and stay
// conservative; this is for values read from files and callers (the C ABI, the CLI) to refuse.
constexpr std::string_view validate(const model_cost& m) noexcept {
  if (static_cast<std::size_t>(m.normal_kv) >= kv_format_count) return "normal_kv is not a KV format";
  if (static_cast<std::size_t>(m.compact_kv) >= kv_format_count) return "compact_kv is not a KV format";
  if (m.n_windows > max_kv_windows) return "more than 4 KV windows";
  for (std::size_t w = 0; w < m.n_windows; ++w) {
    if (m.windows[w].window == 0) return "a KV window of 0 tokens (layers that keep every token are full_kv_bytes_per_token)";
    if (w > 0 && m.windows[w].window <= m.windows[w - 1].window) return "KV windows must increase";
  }
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

// Adds `bytes_per_token` (per format) kept up to `window` tokens to m: to the full term for window 0,
// else to the window's term, a new term in order when there is none yet. With every term taken, the
// bytes go to the smallest window above (keeping more than they do: an over-estimate, never under) or,
// above the largest, to the largest term, which then keeps `window` tokens (its layers a few more).
constexpr void add_kv_term(model_cost& m, const std::array<std::uint64_t, kv_format_count>& bytes_per_token,
                           std::uint64_t window) noexcept {
  auto add_to = [&](std::array<std::uint64_t, kv_format_count>& into) {
    for (std::size_t i = 0; i < kv_format_count; ++i) into[i] = detail::sat_add(into[i], bytes_per_token[i]);
  };
  if (window == 0) {
    add_to(m.full_kv_bytes_per_token);
    return;
  }
  const std::size_t count = detail::window_count(m);
  std::size_t at = 0;
  while (at < count && m.windows[at].window < window) ++at;
  if (at < count && m.windows[at].window == window) {
    add_to(m.windows[at].bytes_per_token);
    return;
  }
  if (count < max_kv_windows) {
    for (std::size_t j = count; j > at; --j) m.windows[j] = m.windows[j - 1];
    m.windows[at] = kv_window{};
    m.windows[at].window = window;
    add_to(m.windows[at].bytes_per_token);
    m.n_windows = static_cast<std::uint32_t>(count + 1);
    return;
  }
  if (at == count) {  // above every term: the largest grows to this window
    at = count - 1;
    m.windows[at].window = window;
  }
  add_to(m.windows[at].bytes_per_token);
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
