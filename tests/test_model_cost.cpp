// Any model: model_cost from shapes, per-format KV bytes, sliding windows, per-sequence state,
// activation tables and coefficients, and every token decision on models other than the seed's.
#include <doctest/doctest.h>

#include <climits>
#include <vector>

#include "pnmem/admission.hpp"
#include "pnmem/cost_model.hpp"
#include "pnmem/model_shape.hpp"
#include "test_support.hpp"

using namespace pnmem;
using pnmem::test::add_die;
using pnmem::test::host_state;

namespace {

constexpr std::size_t at(kv_format f) { return static_cast<std::size_t>(f); }

// Three public shapes (Done when of issue 12).
constexpr model_shape llama3_8b = uniform_shape(32, 8, 128, 32, 4096);
constexpr model_shape qwen25_7b = [] {
  model_shape s = uniform_shape(28, 4, 128, 28, 3584);
  s.normal_kv = kv_format::bf16;
  return s;
}();
// Gemma-2-9B: 42 layers, every other one sliding with a 4096-token window, 8 KV heads x 256 dims.
constexpr model_shape gemma2_9b = [] {
  model_shape s;
  s.add(attention_layers(layer_kind::full, 21, 8, 256));
  s.add(attention_layers(layer_kind::sliding, 21, 8, 256, 256, 4096));
  s.query_heads = 16;
  s.hidden_size = 3584;
  s.normal_kv = kv_format::bf16;
  return s;
}();

// A model with K and V heads of different widths (DeepSeek-style 192 / 128).
constexpr model_shape split_kv = [] {
  model_shape s;
  s.add(attention_layers(layer_kind::full, 4, 2, 192, 128));
  s.query_heads = 8;
  s.hidden_size = 1024;
  return s;
}();

const kv_window& first_window(const model_cost& m) {
  REQUIRE(m.n_windows >= 1);
  return m.windows[0];
}

}  // namespace

TEST_CASE("KV bytes per token, every format, exact against hand-computed values") {
  // Llama-3-8B: per token 2 (K, V) x 32 layers x 8 heads x 128 dims = 65536 values; a row is 1024 values.
  const model_cost l = from_shape(llama3_8b);
  CHECK(kv_bytes_per_token(l, kv_format::fp32) == 65536 * 4);
  CHECK(kv_bytes_per_token(l, kv_format::f16) == 128 * KiB);  // 131072: the figure engines quote
  CHECK(kv_bytes_per_token(l, kv_format::bf16) == 131072);
  CHECK(kv_bytes_per_token(l, kv_format::fp8) == 65536);
  CHECK(kv_bytes_per_token(l, kv_format::q8_0) == 64 * (1024 / 32) * 34);  // 64 rows x 32 blocks x 34 B = 69632
  CHECK(kv_bytes_per_token(l, kv_format::q4_0) == 64 * (1024 / 32) * 18);  // 36864
  CHECK(kv_bytes_per_token(l, kv_format::q4) == 37748);                    // ceil(65536 x 5898 / 10240)
  // Qwen2.5-7B: 2 x 28 x 4 x 128 = 28672 values; a row is 512 values.
  const model_cost q = from_shape(qwen25_7b);
  CHECK(kv_bytes_per_token(q, kv_format::f16) == 57344);
  CHECK(kv_bytes_per_token(q, kv_format::bf16) == 57344);
  CHECK(kv_bytes_per_token(q, kv_format::fp32) == 114688);
  CHECK(kv_bytes_per_token(q, kv_format::fp8) == 28672);
  CHECK(kv_bytes_per_token(q, kv_format::q8_0) == 56 * 16 * 34);  // 30464
  CHECK(kv_bytes_per_token(q, kv_format::q4_0) == 56 * 16 * 18);  // 16128
  CHECK(q.normal_kv == kv_format::bf16);
  // Gemma-2-9B: 21 full + 21 sliding layers, each 2 x 8 x 256 = 4096 values per token.
  const model_cost g = from_shape(gemma2_9b);
  CHECK(g.full_kv_bytes_per_token[at(kv_format::bf16)] == 21 * 4096 * 2);
  CHECK(g.n_windows == 1);
  CHECK(first_window(g).bytes_per_token[at(kv_format::bf16)] == 21 * 4096 * 2);
  CHECK(first_window(g).bytes_per_token[at(kv_format::q4_0)] == 21 * 2 * (2048 / 32) * 18);
  CHECK(first_window(g).window == 4096);
  // K and V of different widths: 4 layers x 2 heads x (192 + 128) values.
  const model_cost s = from_shape(split_kv);
  CHECK(kv_bytes_per_token(s, kv_format::f16) == 4 * 2 * (192 + 128) * 2);
  CHECK(kv_bytes_per_token(s, kv_format::q8_0) == 4 * ((384 / 32) * 34 + (256 / 32) * 34));
  // A row that is not a whole number of blocks is rounded up to whole blocks.
  const model_cost odd = from_shape(uniform_shape(1, 1, 33, 1, 64));
  CHECK(kv_bytes_per_token(odd, kv_format::q8_0) == 2 * 2 * 34);
  CHECK(kv_bytes_per_token(odd, kv_format::q4_0) == 2 * 2 * 18);
}

TEST_CASE("the seed's model is from_shape of the seed's shape, and the seed-only API is that model") {
  CHECK(kv_bytes_per_token(seed_model_cost, kv_format::q4) == 5898);
  CHECK(kv_bytes_per_token(seed_model_cost, kv_format::fp32) == 40960);
  REQUIRE(seed_model_cost.activation.n_anchors == activation_anchors.size());
  for (std::size_t i = 0; i < activation_anchors.size(); ++i) CHECK(seed_model_cost.activation.anchors[i] == activation_anchors[i]);
  CHECK(seed_model_cost.normal_kv == kv_format::fp32);
  CHECK(seed_model_cost.compact_kv == kv_format::q4);
  CHECK(seed_model_cost.state_bytes_per_seq == 0);
  CHECK(seed_model_cost.n_windows == 0);
  CHECK(seed_model_cost.kv_block_tokens == 0);
  CHECK(from_shape(seed_model_shape) == seed_model_cost);
  for (int n : {0, 1, 511, 4096, 70000, 300000, INT_MAX}) {
    CHECK(host_cost_bytes(n, kv_format::q4) == host_cost_bytes(seed_model_cost, n, kv_format::q4));
    CHECK(host_cost_bytes(n, kv_format::fp32) == host_cost_bytes(seed_model_cost, n, kv_format::fp32));
  }
  CHECK(validate(seed_model_cost).empty());
}

TEST_CASE("a sliding layer's KV stops growing at its window; full layers keep growing") {
  const model_cost g = from_shape(gemma2_9b);
  const std::uint64_t full = g.full_kv_bytes_per_token[at(kv_format::bf16)];
  const std::uint64_t slide = first_window(g).bytes_per_token[at(kv_format::bf16)];
  CHECK(kv_bytes(g, kv_format::bf16, 100) == (full + slide) * 100);
  CHECK(kv_bytes(g, kv_format::bf16, 4096) == (full + slide) * 4096);
  CHECK(kv_bytes(g, kv_format::bf16, 4097) == full * 4097 + slide * 4096);
  CHECK(kv_bytes(g, kv_format::bf16, 100000) == full * 100000 + slide * 4096);
  // Past the window each token costs only the full layers.
  for (std::uint64_t n : {4096u, 5000u, 20000u}) {
    CHECK(kv_bytes(g, kv_format::bf16, n + 1) - kv_bytes(g, kv_format::bf16, n) == full);
  }
  // A term whose window is 0 (refused by validate, but decisions take any value): its layers grow like
  // full ones (never an under-estimate).
  model_cost no_window = g;
  no_window.windows[0].window = 0;
  CHECK_FALSE(validate(no_window).empty());
  CHECK(kv_bytes(no_window, kv_format::bf16, 100000) == (full + slide) * 100000);
  // All layers sliding (Mistral-7B-v0.1: 32 layers, 8 KV heads x 128, window 4096).
  model_shape all_sliding;
  all_sliding.add(attention_layers(layer_kind::sliding, 32, 8, 128, 128, 4096));
  const model_cost mistral = from_shape(all_sliding);
  CHECK(kv_bytes(mistral, kv_format::f16, 1000000) == kv_bytes(mistral, kv_format::f16, 4096));
  CHECK(kv_bytes(mistral, kv_format::f16, 4096) == 131072ULL * 4096);
}

TEST_CASE("per-sequence state is paid at any length, the empty prompt included") {
  model_cost m = from_shape(llama3_8b);
  const std::uint64_t without = host_cost_bytes(m, 1000, kv_format::f16);
  m.state_bytes_per_seq = 75 * MiB;
  CHECK(host_cost_bytes(m, 1000, kv_format::f16) == without + 75 * MiB);
  CHECK(host_cost_bytes(m, 0, kv_format::f16) == activation_peak_bytes(m.activation, 0) + 75 * MiB);
  // and in the load check's KV at max context, per sequence
  const model_load_spec spec = load_spec_for(m, 16 * GiB, 8192, kv_format::f16, 4);
  CHECK(spec.weights_bytes == 16 * GiB);
  CHECK(spec.kv_max_ctx_bytes == 4 * (131072ULL * 8192 + 75 * MiB));
}

TEST_CASE("from_shape's activation: the seed's formula from the shape, sampled into an anchor table") {
  const model_cost l = from_shape(llama3_8b);
  // hidden 4096 x 4 B x 8 tensors = 128 KiB per token; 32 query heads x 4 B = 128 B per token^2.
  const activation_model formula = activation_coefficients(256 * MiB, 128 * KiB, 128);
  REQUIRE(l.activation.n_anchors == 6);
  for (std::size_t i = 0; i < 6; ++i) {
    CHECK(l.activation.anchors[i].tokens == shape_anchor_tokens[i]);
    CHECK(l.activation.anchors[i].peak_bytes == activation_peak_bytes(formula, shape_anchor_tokens[i]));
  }
  // The table never under-estimates the formula (convex: chords lie above it), past the last anchor too.
  for (std::uint64_t n = 0; n <= 600000; n += (n < 3000 ? 1 : 313)) {
    CAPTURE(n);
    CHECK(activation_peak_bytes(l.activation, n) >= activation_peak_bytes(formula, n));
  }
}

TEST_CASE("activation tables: constant before the first anchor, rounding up between, N^2 after the last") {
  const activation_model t = activation_table({{100, 1000}, {200, 1001}, {400, 5000}});
  CHECK(activation_peak_bytes(t, 0) == 1000);
  CHECK(activation_peak_bytes(t, 100) == 1000);
  CHECK(activation_peak_bytes(t, 101) == 1001);  // 1000 + ceil(1/100)
  CHECK(activation_peak_bytes(t, 200) == 1001);
  CHECK(activation_peak_bytes(t, 300) == 3001);  // half-way
  CHECK(activation_peak_bytes(t, 800) == 20000);  // 5000 x (800/400)^2
  CHECK(activation_peak_bytes(activation_table({{0, 7}}), 1000000) == 7);
  const activation_model c = activation_coefficients(10, 3, 2);
  CHECK(activation_peak_bytes(c, 0) == 10);
  CHECK(activation_peak_bytes(c, 5) == 10 + 15 + 50);
  CHECK(activation_peak_bytes(c, UINT64_MAX / 2) == UINT64_MAX);  // saturates, never wraps
}

TEST_CASE("validate names what is wrong") {
  model_cost m = from_shape(llama3_8b);
  CHECK(validate(m).empty());
  m.activation.anchors[2].tokens = m.activation.anchors[1].tokens;
  CHECK(validate(m) == "activation anchors' tokens must increase");
  m = from_shape(llama3_8b);
  m.activation.anchors[3].peak_bytes = 1;
  CHECK(validate(m) == "activation anchors' peaks must not decrease");
  m = from_shape(llama3_8b);
  m.activation.n_anchors = 9;
  CHECK(validate(m) == "more than 8 activation anchors");
  m = from_shape(llama3_8b);
  m.activation.fixed_bytes = 1;
  CHECK(validate(m) == "an activation model is an anchor table or coefficients, not both");
  m = from_shape(llama3_8b);
  m.normal_kv = static_cast<kv_format>(7);
  CHECK(validate(m) == "normal_kv is not a KV format");
  m = from_shape(gemma2_9b);
  m.n_windows = 5;
  CHECK(validate(m) == "more than 4 KV windows");
  m = from_shape(gemma2_9b);
  m.windows[1] = m.windows[0];
  m.n_windows = 2;
  CHECK(validate(m) == "KV windows must increase");
  m.windows[1].window = 0;
  CHECK(validate(m) == "a KV window of 0 tokens (layers that keep every token are full_kv_bytes_per_token)");
}

TEST_CASE("KV format names: every format round-trips, aliases are accepted, junk is refused") {
  for (kv_format f : all_kv_formats) {
    kv_format back{};
    REQUIRE(parse_kv_format(to_string(f), back));
    CHECK(back == f);
  }
  kv_format f{};
  CHECK((parse_kv_format("F32", f) && f == kv_format::fp32));
  CHECK((parse_kv_format("bfloat16", f) && f == kv_format::bf16));
  CHECK((parse_kv_format("float16", f) && f == kv_format::f16));
  CHECK((parse_kv_format("fp8_e4m3", f) && f == kv_format::fp8));
  CHECK_FALSE(parse_kv_format("q4_1", f));
  CHECK_FALSE(parse_kv_format("", f));
  CHECK(to_string(kv_format::fp32) == "fp32");  // the seed's name, unchanged
}

// --- decisions on any model ------------------------------------------------------------------------------

namespace {

int reference_fit(const model_cost& m, int n_max, kv_format kv, std::uint64_t limit) {
  int lo = 0;
  int hi = n_max;
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    (host_cost_bytes(m, mid, kv) <= limit ? lo : hi) = mid;
  }
  return lo;
}

// A random model: a shape of 1 to 5 layer groups (full, sliding, chunked, MLA-like K-only, recurrent,
// cross-attention) under a random engine rule (KV blocks, windows with the engine's margin), or a
// random anchor table, or coefficients, or the engine-that-preallocates (per-token KV 0, a fixed peak).
model_cost random_model(pnmem::test::rng& g) {
  model_shape s;
  const std::uint32_t heads = 1 + static_cast<std::uint32_t>(g.below(16));
  const int groups = 1 + static_cast<int>(g.below(5));
  for (int i = 0; i < groups; ++i) {
    const auto layers = 1 + static_cast<std::uint32_t>(g.below(60));
    const auto kv_heads = 1 + static_cast<std::uint32_t>(g.below(16));
    const auto key_dim = 32 * (1 + static_cast<std::uint32_t>(g.below(8)));
    const auto value_dim = g.below(4) == 0 ? 32 * (1 + static_cast<std::uint32_t>(g.below(8))) : 0;
    const auto span = static_cast<std::uint32_t>(1 + g.below(g.below(2) == 0 ? 300 : 40000));
    switch (g.below(7)) {
      case 0: s.add(attention_layers(layer_kind::sliding, layers, kv_heads, key_dim, value_dim, span)); break;
      case 1: s.add(attention_layers(layer_kind::chunked, layers, kv_heads, key_dim, value_dim, span)); break;
      case 2: s.add(latent_layers(layers, 64 * (1 + static_cast<std::uint32_t>(g.below(9))))); break;
      case 3: s.add(recurrent_layers(layers, g.below(100000), g.below(2000000))); break;
      case 4: s.add(attention_layers(layer_kind::cross, layers, kv_heads, key_dim, value_dim, span)); break;
      default: s.add(attention_layers(layer_kind::full, layers, kv_heads, key_dim, value_dim)); break;
    }
  }
  s.query_heads = heads * (1 + static_cast<std::uint32_t>(g.below(8)));
  s.hidden_size = 512 * (1 + static_cast<std::uint32_t>(g.below(16)));
  engine_rule e;
  e.engine = static_cast<kv_engine>(g.below(3));
  e.block_tokens = g.below(2) == 0 ? 16 : 1 + static_cast<std::uint32_t>(g.below(700));
  e.max_batched_tokens = static_cast<std::uint32_t>(g.below(20000));
  e.seqs = 1 + static_cast<std::uint32_t>(g.below(4));
  e.state_copies = 1 + static_cast<std::uint32_t>(g.below(2));
  model_cost m = from_shape(s, e);
  if (g.below(3) == 0) m.state_bytes_per_seq = g.below(200 * MiB);
  switch (g.below(4)) {
    case 0: break;  // from_shape's table
    case 1: {       // a calibrated-looking table: 1 to 8 anchors, tokens increasing, peaks non-decreasing
      activation_model a;
      a.n_anchors = 1 + static_cast<std::uint32_t>(g.below(8));
      std::uint64_t t = g.below(3) == 0 ? g.below(2000) : 0;
      std::uint64_t p = g.below(512 * MiB);
      for (std::uint32_t i = 0; i < a.n_anchors; ++i) {
        a.anchors[i] = {t, p};
        t += 1 + g.below(g.below(2) == 0 ? 100 : 60000);
        p += g.below(4) == 0 ? 0 : g.below(8 * GiB);
      }
      m.activation = a;
      break;
    }
    case 2:  // coefficients, with and without an N^2 term
      m.activation = activation_coefficients(g.below(1 * GiB), g.below(256 * KiB), g.below(3) == 0 ? 0 : g.below(300));
      break;
    default:  // preallocated KV: only a small fixed peak and maybe state
      m.full_kv_bytes_per_token.fill(0);
      m.windows = {};
      m.n_windows = 0;
      m.activation = activation_coefficients(g.below(64 * MiB), g.below(2) * g.below(1024), 0);
      break;
  }
  return m;
}

kv_format random_format(pnmem::test::rng& g) { return all_kv_formats[g.below(kv_format_count)]; }

int rank(verdict v) { return v == verdict::admit ? 2 : (v == verdict::cap ? 1 : 0); }

}  // namespace

TEST_CASE("the CAP solve is the largest fitting prompt for any model (against a plain binary search)") {
  pnmem::test::rng g{1207};
  int solved = 0;
  for (int i = 0; i < 30000; ++i) {
    const model_cost m = random_model(g);
    REQUIRE(validate(m).empty());
    const kv_format kv = random_format(g);
    const int n_max = 2 + static_cast<int>(g.below(g.below(4) == 0 ? 3000000 : 200000));
    const std::uint64_t lo_cost = host_cost_bytes(m, 0, kv);
    REQUIRE(detail::host_cost_at_zero(m) == lo_cost);  // admit_request's shortcut for cost(0)
    const std::uint64_t hi_cost = host_cost_bytes(m, n_max, kv);
    if (hi_cost <= lo_cost) continue;
    // A limit anywhere, or exactly at / one byte off the cost of a random n: where an off-by-one lives.
    std::uint64_t limit = lo_cost + g.below(hi_cost - lo_cost);
    if (g.below(2) == 0) {
      const std::uint64_t c = host_cost_bytes(m, static_cast<int>(g.below(static_cast<std::uint64_t>(n_max))), kv);
      limit = c - 1 + g.below(3);
      if (limit < lo_cost || limit >= hi_cost) continue;
    }
    CAPTURE(i);
    CAPTURE(n_max);
    CAPTURE(limit);
    CAPTURE(to_string(kv));
    const int fit = detail::largest_fitting_prompt(m, n_max, kv, limit);
    REQUIRE(fit == reference_fit(m, n_max, kv, limit));
    ++solved;
  }
  CHECK(solved > 20000);
}

TEST_CASE("CAP stays tight to one token for any model: cost(fit) <= limit < cost(fit + 1)") {
  pnmem::test::rng g{77};
  const std::uint64_t total = 64 * GiB;
  const std::uint64_t reserve = box_reserve_bytes(total);
  int caps = 0;
  for (int i = 0; i < 20000; ++i) {
    const model_cost m = random_model(g);
    const kv_format kv = random_format(g);
    const int n = 1 + static_cast<int>(g.below(g.below(3) == 0 ? 1000000 : 65536));
    const std::uint64_t avail = reserve + g.below(total - reserve);
    const admit_result r = admit_request(m, {.n_prompt = n, .kv = kv}, host_state(total, avail));
    const std::uint64_t limit = avail - reserve;
    CAPTURE(i);
    REQUIRE(r.limit_bytes == limit);
    REQUIRE(r.need_bytes == host_cost_bytes(m, n, kv));
    if (r.verdict == verdict::cap) {
      ++caps;
      REQUIRE(r.fit_tokens >= 1);
      REQUIRE(r.fit_tokens < n);
      CHECK(host_cost_bytes(m, r.fit_tokens, kv) <= limit);
      CHECK(host_cost_bytes(m, r.fit_tokens + 1, kv) > limit);
    } else if (r.verdict == verdict::admit) {
      CHECK(r.need_bytes <= limit);
    } else {
      CHECK(host_cost_bytes(m, 1, kv) > limit);
    }
  }
  CHECK(caps > 1000);
}

TEST_CASE("more memory never gives a worse verdict, for any model") {
  pnmem::test::rng g{4242};
  const std::uint64_t total = 32 * GiB;
  for (int i = 0; i < 300; ++i) {
    const model_cost m = random_model(g);
    const request_spec rq{.n_prompt = static_cast<int>(g.below(200000)), .kv = random_format(g),
                          .gpu_resident = g.below(5) == 0, .die = 0,
                          .max_window = g.below(3) == 0 ? static_cast<int>(g.below(50000)) : 0};
    const std::uint64_t vram = g.below(80 * GiB);
    admit_result prev{};
    for (std::uint64_t avail = 0; avail <= total; avail += 256 * MiB) {
      const admit_result r = admit_request(m, rq, add_die(host_state(total, avail), vram, 80 * GiB));
      CAPTURE(avail);
      if (avail > 0) {
        CHECK(rank(r.verdict) >= rank(prev.verdict));
        CHECK(r.fit_tokens >= prev.fit_tokens);
      }
      prev = r;
    }
  }
}

TEST_CASE("a preallocating engine's model: requests cost nothing above the reserve, and are still refused inside it") {
  const std::uint64_t total = 1 * GiB;  // a 1 GiB container: the reserve is 1 GiB unless set
  policy p;
  p.host_reserve_min_bytes = 256 * MiB;
  p.host_reserve_bp = 0;
  const request_spec rq{.n_prompt = 32768, .kv = kv_format::f16};
  CHECK(admit_request(preallocated_model_cost, rq, host_state(total, 300 * MiB), p).verdict == verdict::admit);
  CHECK(admit_request(preallocated_model_cost, rq, host_state(total, 300 * MiB), p).need_bytes == 0);
  CHECK(admit_request(preallocated_model_cost, rq, host_state(total, 200 * MiB), p).reason == admit_reason::host_reserve);
  // The seed's model on the same box would cap the prompt: the library's default is not that engine's cost.
  CHECK(admit_request(rq, host_state(total, 715 * MiB), p).verdict != verdict::admit);
}

TEST_CASE("admit_host_bytes: admit, or how many bytes fit, with a reason") {
  const std::uint64_t total = 8 * GiB;
  const std::uint64_t reserve = box_reserve_bytes(total);
  const mem_state s = host_state(total, reserve + 500 * MiB);
  const admit_result a = admit_host_bytes(188 * MiB, s);
  CHECK(a.verdict == verdict::admit);
  CHECK(a.reason == admit_reason::fits);
  CHECK(a.need_bytes == 188 * MiB);
  CHECK(a.limit_bytes == 500 * MiB);
  const admit_result c = admit_host_bytes(600 * MiB, s);
  CHECK(c.verdict == verdict::cap);
  CHECK(c.reason == admit_reason::host_budget);
  CHECK(c.limit_bytes == 500 * MiB);  // what would fit
  CHECK(admit_host_bytes(500 * MiB, s).verdict == verdict::admit);      // exactly at the limit
  CHECK(admit_host_bytes(500 * MiB + 1, s).verdict == verdict::cap);
  const admit_result r = admit_host_bytes(1, host_state(total, reserve));
  CHECK(r.verdict == verdict::reject);
  CHECK(r.reason == admit_reason::host_reserve);
  CHECK(r.limit_bytes == reserve);
  // Not sampled: fail open.
  CHECK(admit_host_bytes(UINT64_MAX, host_state(0, 0)).verdict == verdict::admit);
  // The load-spike check is the same rule with the policy's spike, where a part is refused.
  for (std::uint64_t avail : {std::uint64_t{0}, reserve, reserve + 1, reserve + 2 * GiB, reserve + 12 * GiB / 5, 8 * GiB}) {
    const mem_state box = host_state(total, avail);
    const admit_result bytes = admit_host_bytes(default_policy.load_spike_bytes, box);
    const admit_result spike = admit_load_spike(box);
    CHECK(spike.need_bytes == bytes.need_bytes);
    CHECK(spike.limit_bytes == bytes.limit_bytes);
    CHECK(spike.reason == bytes.reason);
    CHECK(spike.verdict == (bytes.verdict == verdict::cap ? verdict::reject : bytes.verdict));
  }
}

// A model fixed at compile time, as a template argument (model_cost is a structural type).
template <model_cost M>
struct compiled_engine {
  static constexpr admit_result admit(int n, const mem_state& s) { return admit_request<M>({.n_prompt = n, .kv = M.normal_kv}, s); }
};
constexpr model_cost llama_cost = from_shape(llama3_8b);
constexpr model_cost gemma_cost = from_shape(gemma2_9b);
constexpr model_cost coefficients_cost = [] {
  model_cost m = from_shape(gemma2_9b);  // a window and an N^2 term: the quadratic piece's exact check
  m.activation = activation_coefficients(256 * MiB, 128 * KiB, 128);
  return m;
}();
static_assert(kv_bytes_per_token(llama_cost, kv_format::f16) == 131072);
static_assert(compiled_engine<llama_cost>::admit(1000, host_state(64 * GiB, 32 * GiB)).verdict == verdict::admit);
static_assert(compiled_engine<llama_cost>::admit(100000, host_state(16 * GiB, 8 * GiB)).verdict == verdict::cap);
static_assert(compiled_engine<llama_cost>::admit(100000, host_state(16 * GiB, 8 * GiB)) ==
              admit_request(llama_cost, {.n_prompt = 100000, .kv = kv_format::f16}, host_state(16 * GiB, 8 * GiB)));
static_assert(admit_host_bytes(1 * GiB, host_state(8 * GiB, 2 * GiB)).verdict == verdict::cap);

namespace {
// admit_request<M> (the model folded into the code) against admit_request(M, ...) (the model read
// through a reference the compiler cannot see into) on random requests and hosts.
template <model_cost M>
void check_compiled_matches_data(std::uint64_t seed) {
  static const model_cost as_data = M;
  const volatile model_cost* escaped = &as_data;  // so this copy is not folded too
  const model_cost& data = *const_cast<const model_cost*>(escaped);
  pnmem::test::rng g{seed};
  int caps = 0;
  for (int i = 0; i < 20000; ++i) {
    const request_spec rq{.n_prompt = static_cast<int>(g.below(g.below(4) == 0 ? 2000000 : 150000)),
                          .kv = all_kv_formats[g.below(kv_format_count)], .die = g.below(3) == 0 ? 0 : no_die,
                          .max_window = g.below(4) == 0 ? static_cast<int>(g.below(100000)) : 0};
    const std::uint64_t total = (1 + g.below(512)) * GiB;
    const mem_state s = add_die(host_state(total, g.below(total)), g.below(80 * GiB), 80 * GiB);
    const admit_result r = admit_request<M>(rq, s);
    CAPTURE(i);
    REQUIRE(r == admit_request(data, rq, s));
    caps += r.verdict == verdict::cap ? 1 : 0;
  }
  CHECK(caps > 1000);  // the solve ran, not only the early answers
}
}  // namespace

TEST_CASE("a model as a template argument answers as the same model at run time") {
  volatile std::uint64_t avail = 8 * GiB;
  const mem_state s = host_state(16 * GiB, avail);
  const admit_result r = compiled_engine<llama_cost>::admit(100000, s);
  CHECK(r == admit_request(llama_cost, {.n_prompt = 100000, .kv = kv_format::f16}, s));
  CHECK(host_cost_bytes(llama_cost, r.fit_tokens, kv_format::f16) <= r.limit_bytes);
  CHECK(host_cost_bytes(llama_cost, r.fit_tokens + 1, kv_format::f16) > r.limit_bytes);
  check_compiled_matches_data<llama_cost>(1);
  check_compiled_matches_data<gemma_cost>(2);
  check_compiled_matches_data<coefficients_cost>(3);
  check_compiled_matches_data<seed_model_cost>(4);
}

TEST_CASE("a coefficient model's cost is its polynomial on each piece between its windows, saturated") {
  // The CAP solve checks its guess on a quadratic piece with detail::coefficient_piece_of, not with
  // host_cost_unblocked: the two must agree for every model and n, extreme values included.
  pnmem::test::rng g{9001};
  auto value = [&g](std::uint64_t typical) {
    switch (g.below(8)) {
      case 0: return std::uint64_t{0};
      case 1: return UINT64_MAX - g.below(3);
      case 2: return g.next();
      default: return g.below(typical);
    }
  };
  int past = 0;
  for (int i = 0; i < 200000; ++i) {
    model_cost m;
    const kv_format kv = all_kv_formats[g.below(kv_format_count)];
    m.full_kv_bytes_per_token[at(kv)] = value(512 * KiB);
    m.n_windows = static_cast<std::uint32_t>(g.below(max_kv_windows + 1));
    std::uint64_t window = 0;
    for (std::uint32_t w = 0; w < m.n_windows; ++w) {
      window += 1 + g.below(g.below(2) == 0 ? 64 : 60000);
      m.windows[w].window = window;
      m.windows[w].bytes_per_token[at(kv)] = g.below(3) == 0 ? 0 : value(512 * KiB);
    }
    m.state_bytes_per_seq = g.below(3) == 0 ? value(GiB) : 0;
    m.activation = activation_coefficients(value(GiB), value(256 * KiB), g.below(3) == 0 ? 0 : value(512));
    const int n = static_cast<int>(g.below(4) == 0 ? g.below(INT_MAX + 1ULL) : g.below(300000));
    const auto un = static_cast<std::uint64_t>(n);
    past += m.n_windows != 0 && un >= m.windows[0].window ? 1 : 0;
    // Any `from` on the same piece gives the same polynomial: n itself, or the largest window at or
    // below it (where the piece starts).
    std::uint64_t from = un;
    if (g.below(2) == 0) {
      for (std::uint32_t w = 0; w < m.n_windows; ++w) {
        if (m.windows[w].window <= un) from = m.windows[w].window;
      }
    }
    const detail::u128 exact = detail::coefficient_piece_of(m, kv, from).at(un);
    const std::uint64_t saturated = exact > UINT64_MAX ? UINT64_MAX : static_cast<std::uint64_t>(exact);
    CAPTURE(i);
    REQUIRE(saturated == detail::host_cost_unblocked(m, un, kv));
    REQUIRE(saturated == host_cost_bytes(m, n, kv));  // no blocks: the same cost
  }
  CHECK(past > 20000);  // pieces past a window were checked
}

TEST_CASE("interpolation whose product passes 2^64 is exact, not saturated below the line") {
  // rise x (n - a) = 2^62 x 2^10 overflows 64 bits; the exact share is ceil(2^62 x 1024 / 2048) = 2^61.
  const activation_model t = activation_table({{0, 0}, {2048, std::uint64_t{1} << 62}});
  CHECK(activation_peak_bytes(t, 1024) == std::uint64_t{1} << 61);
  CHECK(activation_peak_bytes(t, 1) == (std::uint64_t{1} << 62) / 2048);
  CHECK(activation_peak_bytes(t, 2047) == (std::uint64_t{1} << 62) / 2048 * 2047);
}

TEST_CASE("several windows: each term keeps at most its window, the full layers every token") {
  model_cost m;
  const auto f = at(kv_format::bf16);
  m.full_kv_bytes_per_token[f] = 100;
  m.n_windows = 3;
  m.windows[0].window = 128;
  m.windows[0].bytes_per_token[f] = 10;
  m.windows[1].window = 1024;
  m.windows[1].bytes_per_token[f] = 20;
  m.windows[2].window = 8192;
  m.windows[2].bytes_per_token[f] = 30;
  REQUIRE(validate(m).empty());
  CHECK(kv_bytes_per_token(m, kv_format::bf16) == 160);
  CHECK(kv_bytes(m, kv_format::bf16, 100) == 160 * 100);
  CHECK(kv_bytes(m, kv_format::bf16, 128) == 160 * 128);
  CHECK(kv_bytes(m, kv_format::bf16, 129) == 150 * 129 + 10 * 128);
  CHECK(kv_bytes(m, kv_format::bf16, 5000) == 130 * 5000 + 10 * 128 + 20 * 1024);
  CHECK(kv_bytes(m, kv_format::bf16, 100000) == 100 * 100000 + 10 * 128 + 20 * 1024 + 30 * 8192);
  // The terms' order does not change a decision (validate wants them increasing; decisions take any).
  model_cost shuffled = m;
  std::swap(shuffled.windows[0], shuffled.windows[2]);
  CHECK_FALSE(validate(shuffled).empty());
  const std::uint64_t total = 64 * GiB;
  for (std::uint64_t avail : {8 * GiB + 100, 9 * GiB + 7777, 9 * GiB + 123456}) {
    for (int n : {100, 5000, 1000000, 100000000}) {
      const request_spec rq{.n_prompt = n, .kv = kv_format::bf16};
      CHECK(admit_request(m, rq, host_state(total, avail)) == admit_request(shuffled, rq, host_state(total, avail)));
    }
  }
}

TEST_CASE("KV in blocks: n tokens are charged as whole blocks, and CAP is still the largest n that fits") {
  model_cost m = from_shape(gemma2_9b);
  m.kv_block_tokens = 16;
  const model_cost per_token = from_shape(gemma2_9b);
  for (std::uint64_t n : {0u, 1u, 15u, 16u, 17u, 4095u, 4096u, 4097u, 100000u}) {
    const std::uint64_t blocks = (n + 15) / 16 * 16;
    CAPTURE(n);
    CHECK(kv_bytes(m, kv_format::bf16, n) == kv_bytes(per_token, kv_format::bf16, blocks));
  }
  m.kv_block_tokens = 544;  // vLLM's attention block for Qwen3-Next: not a power of two
  CHECK(kv_bytes(m, kv_format::bf16, 1024) == kv_bytes(per_token, kv_format::bf16, 1088));
  CHECK(kv_bytes(m, kv_format::bf16, 1088) == kv_bytes(per_token, kv_format::bf16, 1088));
  // Exhaustive near the answer: for every limit between cost(b) and cost(b + 3 blocks), the solve is
  // the plain search's. Inside one line of the table (20000), blocks across an anchor (3800 and 16000:
  // the anchors 4096 and 16384 inside a block, tested before the line is solved), and past the last
  // anchor (270000: the table's quadratic, solved off the table).
  for (const std::uint32_t block : {16u, 544u, 256u}) {
    m.kv_block_tokens = block;
    for (const int start : {20000, 3800, 16000, 270000}) {
      const std::uint64_t step = start > 100000 ? 1 * MiB : 97 * KiB;
      for (std::uint64_t limit = host_cost_bytes(m, start, kv_format::bf16);
           limit < host_cost_bytes(m, start + 3 * static_cast<int>(block), kv_format::bf16); limit += step) {
        CAPTURE(block);
        CAPTURE(start);
        CAPTURE(limit);
        REQUIRE(detail::largest_fitting_prompt(m, 400000, kv_format::bf16, limit) == reference_fit(m, 400000, kv_format::bf16, limit));
      }
    }
  }
}

TEST_CASE("encoder items: their cross-attention KV is paid per item, off the budget the prompt is solved in") {
  model_shape s = uniform_shape(32, 8, 128, 32, 4096);
  s.add(attention_layers(layer_kind::cross, 8, 8, 128, 128, 6404));  // Mllama-style: 8 layers, 6404 tokens an image
  s.normal_kv = kv_format::bf16;
  const model_cost m = from_shape(s);
  const std::uint64_t per_item = 8ULL * 2 * 8 * 128 * 2 * 6404;  // 209,846,272 B
  CHECK(m.kv_bytes_per_encoder_item[at(kv_format::bf16)] == per_item);
  CHECK(kv_bytes_per_token(m, kv_format::bf16) == 131072);  // the cross layers cost nothing per text token
  CHECK(host_cost_bytes(m, 1000, kv_format::bf16, 2) == host_cost_bytes(m, 1000, kv_format::bf16) + 2 * per_item);
  CHECK(host_cost_bytes(m, 1000, kv_format::bf16, -1) == host_cost_bytes(m, 1000, kv_format::bf16));
  const std::uint64_t total = 64 * GiB;
  const std::uint64_t reserve = box_reserve_bytes(total);
  pnmem::test::rng g{31};
  int caps = 0;
  for (int i = 0; i < 3000; ++i) {
    const int items = static_cast<int>(g.below(6));
    const int n = 1 + static_cast<int>(g.below(100000));
    const std::uint64_t avail = reserve + g.below(24 * GiB);
    const admit_result r = admit_request(m, {.n_prompt = n, .kv = kv_format::bf16, .encoder_items = items}, host_state(total, avail));
    const std::uint64_t limit = avail - reserve;
    CAPTURE(i);
    REQUIRE(r.need_bytes == host_cost_bytes(m, n, kv_format::bf16, items));
    if (r.verdict == verdict::cap) {
      ++caps;
      CHECK(host_cost_bytes(m, r.fit_tokens, kv_format::bf16, items) <= limit);
      CHECK(host_cost_bytes(m, r.fit_tokens + 1, kv_format::bf16, items) > limit);
    } else if (r.verdict == verdict::reject) {
      CHECK(host_cost_bytes(m, 1, kv_format::bf16, items) > limit);
    }
  }
  CHECK(caps > 100);
  CHECK(admit_request(m, {.n_prompt = 10, .encoder_items = -1}, host_state(total, total)).reason == admit_reason::bad_request);
  // The load check holds each sequence's items too.
  CHECK(load_spec_for(m, 0, 1000, kv_format::bf16, 2, 1).kv_max_ctx_bytes == 2 * (kv_bytes(m, kv_format::bf16, 1000) + per_item));
}
