// Rung 4b's budgets in bytes (eviction_budget.hpp): how many tokens a slot keeps for the bytes wanted, and
// how an eviction spreads over slots. Expected bytes are worked from the models' shapes here, not taken
// from pnmem's output.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "pnmem/eviction_admission.hpp"
#include "pnmem/eviction_budget.hpp"
#include "pnmem/model_shape.hpp"
#include "splitmix64.hpp"

using namespace pnmem;

namespace {

// Llama-3-8B: 32 layers x 8 KV heads x 128, K and V, bf16: 32 x 8 x 128 x 2 x 2 = 131,072 B per token.
constexpr std::uint64_t llama_token = 32ULL * 8 * 128 * 2 * 2;
const model_cost llama = from_shape(uniform_shape(32, 8, 128, 32, 4096));

// Gemma-2-9B-like: 21 full layers and 21 sliding ones (window 4096) of 8 x 256, K and V: only the full
// layers' KV can be evicted, 21 x 8 x 256 x 2 x 2 = 172,032 B per token in bf16.
model_cost gemma() {
  model_shape s;
  s.add(attention_layers(layer_kind::full, 21, 8, 256));
  s.add(attention_layers(layer_kind::sliding, 21, 8, 256, 0, 4096));
  s.query_heads = 16;
  s.hidden_size = 3584;
  return from_shape(s);
}

// The same Llama served in vLLM's blocks of 16 tokens.
model_cost llama_blocks() {
  engine_rule v;
  v.engine = kv_engine::vllm;
  return from_shape(uniform_shape(32, 8, 128, 32, 4096), v);
}

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

}  // namespace

TEST_CASE("keep_budget: the most tokens a slot keeps and still frees the bytes, per token") {
  REQUIRE(llama.full_kv_bytes_per_token[static_cast<std::size_t>(kv_format::bf16)] == llama_token);
  // A 32k slot asked for 1 GiB: 1 GiB / 128 KiB = 8192 tokens go, 24576 stay.
  auto a = keep_budget(llama, kv_format::bf16, 32768, GiB, 36);
  CHECK(a.keep_tokens == 24576);
  CHECK(a.freed_bytes == GiB);
  CHECK(a.enough);
  // One byte more: one token more goes.
  a = keep_budget(llama, kv_format::bf16, 32768, GiB + 1, 36);
  CHECK(a.keep_tokens == 24575);
  CHECK(a.freed_bytes == GiB + llama_token);
  // More than the slot holds above its floor: the floor, not enough.
  a = keep_budget(llama, kv_format::bf16, 32768, 8 * GiB, 3277);
  CHECK(a.keep_tokens == 3277);
  CHECK(a.freed_bytes == (32768ULL - 3277) * llama_token);
  CHECK_FALSE(a.enough);
  // Nothing asked: everything stays.
  a = keep_budget(llama, kv_format::bf16, 32768, 0, 36);
  CHECK(a == keep_budget_answer{32768, 0, true});
  // Bad arguments: no tokens, a floor past the slot, a negative slot.
  CHECK(keep_budget(llama, kv_format::bf16, 0, GiB, 36) == keep_budget_answer{0, 0, false});
  CHECK(keep_budget(llama, kv_format::bf16, 100, GiB, 500) == keep_budget_answer{100, 0, false});
  CHECK(keep_budget(llama, kv_format::bf16, -5, GiB, 0) == keep_budget_answer{0, 0, false});
}

TEST_CASE("keep_budget: sliding layers hold no evictable surplus") {
  const model_cost g = gemma();
  const std::uint64_t full_token = 21ULL * 8 * 256 * 2 * 2;
  REQUIRE(g.full_kv_bytes_per_token[static_cast<std::size_t>(kv_format::bf16)] == full_token);
  // 512 MiB from a 16k slot: ceil(512 MiB / 168 KiB) tokens of the full layers.
  const auto a = keep_budget(g, kv_format::bf16, 16384, 512 * MiB, 36);
  const std::uint64_t drop = ceil_div(512 * MiB, full_token);
  CHECK(a.keep_tokens == 16384 - static_cast<int>(drop));
  CHECK(a.freed_bytes == drop * full_token);
  // A model with windows only (Mistral-style: every layer slides) frees nothing.
  model_shape s;
  s.add(attention_layers(layer_kind::sliding, 32, 8, 128, 0, 4096));
  s.query_heads = 32;
  s.hidden_size = 4096;
  CHECK(keep_budget(from_shape(s), kv_format::bf16, 16384, MiB, 36) == keep_budget_answer{16384, 0, false});
}

TEST_CASE("keep_budget: in blocks, whole blocks come back") {
  const model_cost b = llama_blocks();
  REQUIRE(b.kv_block_tokens == 16);
  // A slot of 1000 tokens holds 63 blocks (1008 tokens' bytes). Asking for one token's bytes frees one
  // whole block: keep 992 (62 blocks).
  auto a = keep_budget(b, kv_format::bf16, 1000, 1, 36);
  CHECK(a.keep_tokens == 992);
  CHECK(a.freed_bytes == 16 * llama_token);
  // 17 tokens' bytes: two blocks.
  a = keep_budget(b, kv_format::bf16, 1000, 17 * llama_token, 36);
  CHECK(a.keep_tokens == 976);
  CHECK(a.freed_bytes == 32 * llama_token);
  // Against a brute force over every keep: the largest K >= floor that frees enough.
  test::splitmix64 rng{5};
  for (int round = 0; round < 400; ++round) {
    const int n = rng.between_int(0, 700);
    const int floor = rng.between_int(-3, 80);
    const std::uint64_t want = rng.below(static_cast<std::uint64_t>(n + 40) * llama_token);
    const auto got = keep_budget(b, kv_format::bf16, n, want, floor);
    const int lo = std::clamp(floor, 0, n);
    auto held = [](std::uint64_t t) { return (t + 15) / 16 * 16 * llama_token; };
    int best = lo;
    for (int k = n; k >= lo; --k) {
      if (held(static_cast<std::uint64_t>(n)) - held(static_cast<std::uint64_t>(k)) >= want) {
        best = k;
        break;
      }
    }
    if (want == 0) best = n;
    CAPTURE(n);
    CAPTURE(floor);
    CAPTURE(want);
    CHECK(got.keep_tokens == best);
    CHECK(got.freed_bytes == held(static_cast<std::uint64_t>(n)) - held(static_cast<std::uint64_t>(got.keep_tokens)));
    CHECK(got.enough == (got.freed_bytes >= want));
  }
}

TEST_CASE("keep_budget: a token evicted frees its caches beside the KV too (DeepSeek-V3.2's indexer keys)") {
  // 61 layers of a 576-value latent (1152 B in bf16) and 132 B of indexer keys beside it, in vLLM's
  // 64-token blocks: a token is 61 x 1284 B, and whole blocks of them come back.
  model_shape s;
  layer_group g = latent_layers(61, 576);
  g.side_bytes = 132;
  s.add(g);
  engine_rule v;
  v.engine = kv_engine::vllm;
  const model_cost dsa = from_shape(s, v);
  constexpr std::uint64_t token = 61ULL * (1152 + 132);
  const auto a = keep_budget(dsa, kv_format::bf16, 8192, 64 * token, 36);
  CHECK(a.keep_tokens == 8192 - 64);
  CHECK(a.freed_bytes == 64 * token);
  CHECK(a.enough);
  // Rung 4a's 4-bit KV shrinks the latent, not the indexer's bytes.
  const auto q = keep_budget(dsa, kv_format::q4_0, 8192, 1, 36);
  CHECK(q.freed_bytes == 64 * 61ULL * (18 * 18 + 132));
}

TEST_CASE("keep_floor: the tokens and the share a slot never goes below") {
  const eviction_limits l{};  // 36 tokens, 10 %
  CHECK(keep_floor(32768, l) == 3277);  // ceil(3276.8)
  CHECK(keep_floor(100, l) == 36);
  CHECK(keep_floor(20, l) == 20);  // never more than the slot
  CHECK(keep_floor(-1, l) == 0);
  CHECK(keep_floor(1000, eviction_limits{0, 0}) == 0);
  CHECK(keep_floor(1000, eviction_limits{0, 2000}) == 1000);  // a share past 1000 is all of it
}

TEST_CASE("plan_eviction cuts the longest slots first, to one length, never below a floor") {
  const int slots[] = {32768, 8192, 1000, 20000};
  std::vector<keep_budget_answer> out(4);
  // 2 GiB = 16384 tokens of Llama: cutting 32768 and 20000 to L frees (32768 - L) + (20000 - L) tokens
  // while L >= 8192: L = (52768 - 16384) / 2 = 18192.
  auto p = plan_eviction(llama, kv_format::bf16, slots, 4, 2 * GiB, eviction_limits{}, out.data());
  CHECK(p.enough);
  CHECK(p.cut_to == 18192);
  CHECK(p.slots_cut == 2);
  CHECK(p.freed_bytes == 2 * GiB);
  CHECK(out[0] == keep_budget_answer{18192, (32768ULL - 18192) * llama_token, true});
  CHECK(out[1] == keep_budget_answer{8192, 0, true});
  CHECK(out[2] == keep_budget_answer{1000, 0, true});
  CHECK(out[3] == keep_budget_answer{18192, (20000ULL - 18192) * llama_token, true});
  // More than all of them hold above their floors: each at its floor, not enough.
  p = plan_eviction(llama, kv_format::bf16, slots, 4, 64 * GiB, eviction_limits{}, out.data());
  CHECK_FALSE(p.enough);
  CHECK(p.cut_to == 0);
  const int floors[] = {3277, 820, 100, 2000};
  std::uint64_t all = 0;
  for (int i = 0; i < 4; ++i) {
    CHECK(out[static_cast<std::size_t>(i)].keep_tokens == floors[i]);
    all += static_cast<std::uint64_t>(slots[i] - floors[i]) * llama_token;
  }
  CHECK(p.freed_bytes == all);
  CHECK_FALSE(out[0].enough);
  // Nothing asked: nothing cut.
  p = plan_eviction(llama, kv_format::bf16, slots, 4, 0, eviction_limits{}, nullptr);
  CHECK(p == eviction_plan{0, 32768, 0, true});
  // No slots.
  CHECK(plan_eviction(llama, kv_format::bf16, slots, 0, MiB, eviction_limits{}, nullptr).enough == false);
  CHECK(plan_eviction(llama, kv_format::bf16, slots, -3, 0, eviction_limits{}, nullptr).enough);
}

TEST_CASE("plan_eviction: the longest length that frees enough (brute force)") {
  test::splitmix64 rng{11};
  const model_cost b = llama_blocks();
  for (int round = 0; round < 300; ++round) {
    const int n_slots = rng.between_int(1, 6);
    std::vector<int> slots(static_cast<std::size_t>(n_slots));
    for (auto& s : slots) s = rng.between_int(0, 3000);
    const model_cost& m = round % 2 == 0 ? llama : b;
    const std::uint64_t want = rng.below(6000) * llama_token;
    const eviction_limits l{rng.between_int(0, 64), rng.between_int(0, 300)};
    const auto p = plan_eviction(m, kv_format::bf16, slots.data(), n_slots, want, l, nullptr);
    const int longest = *std::max_element(slots.begin(), slots.end());
    auto freed_at = [&](int length) {
      std::uint64_t f = 0;
      for (int n : slots) {
        const int keep = std::min(n, std::max(length, keep_floor(n, l)));
        const std::uint64_t blk = m.kv_block_tokens > 1 ? m.kv_block_tokens : 1;
        auto held = [&](std::uint64_t t) { return (t + blk - 1) / blk * blk * llama_token; };
        f += held(static_cast<std::uint64_t>(n)) - held(static_cast<std::uint64_t>(keep));
      }
      return f;
    };
    int expect = want == 0 ? longest : 0;
    if (want > 0) {
      for (int length = longest; length >= 0; --length) {
        if (freed_at(length) >= want) {
          expect = length;
          break;
        }
      }
    }
    CAPTURE(round);
    CHECK(p.cut_to == expect);
    CHECK(p.freed_bytes == freed_at(expect));
    CHECK(p.enough == (p.freed_bytes >= want));
  }
}

TEST_CASE("eviction budgets are constant expressions") {
  constexpr model_cost m = from_shape(uniform_shape(32, 8, 128, 32, 4096));
  static_assert(keep_budget(m, kv_format::bf16, 32768, GiB, 36).keep_tokens == 24576);
  constexpr int slots[] = {32768, 20000};
  // 1 GiB is 8192 tokens: cutting only the 32k slot to 24576 frees it exactly.
  static_assert(plan_eviction(m, kv_format::bf16, slots, 2, GiB, eviction_limits{}, nullptr).cut_to == 24576);
  // The same at run time.
  volatile int n = 32768;
  CHECK(keep_budget(m, kv_format::bf16, n, GiB, 36).keep_tokens == 24576);
}

// --- admit_after_eviction (eviction_admission.hpp) ----------------------------------------------------

namespace {

// Llama f16 without an activation term: a request of n tokens needs n x 128 KiB, nothing else.
model_cost llama_kv_only() {
  model_cost m = llama;
  m.activation = activation_model{};
  return m;
}

// A 64 GiB box with `avail` available; the reserve exactly 1 GiB.
mem_state box(std::uint64_t avail) {
  mem_state s;
  s.host_total_bytes = 64 * GiB;
  s.host_avail_bytes = avail;
  return s;
}

policy one_gib_reserve() {
  policy p;
  p.host_reserve_min_bytes = GiB;
  p.host_reserve_bp = 0;
  return p;
}

request_spec host_request(int n) {
  request_spec rq;
  rq.n_prompt = n;
  rq.kv = kv_format::f16;
  return rq;
}

const int running[] = {32768, 8192, 1000, 20000};

}  // namespace

TEST_CASE("admit_after_eviction: a request capped for host memory fits once the running slots give the rest") {
  const model_cost m = llama_kv_only();
  const policy p = one_gib_reserve();
  REQUIRE(admit_request(m, host_request(1), box(11 * GiB), p).need_bytes == llama_token);  // no activation
  // 96k tokens need 12 GiB; 11 GiB available less the 1 GiB reserve leaves 10: CAP to 80k. Short by 2 GiB.
  std::vector<keep_budget_answer> out(4);
  const auto a = admit_after_eviction(m, host_request(98304), box(11 * GiB), p, true, kv_format::f16, running, 4,
                                      eviction_limits{}, out.data());
  CHECK(a.decision.verdict == verdict::cap);
  CHECK(a.decision.reason == admit_reason::host_budget);
  CHECK(a.decision.fit_tokens == 81920);
  CHECK(a.considered);
  CHECK(a.after_eviction);
  CHECK(a.evict_bytes == 2 * GiB);
  CHECK(a.plan.cut_to == 18192);  // as plan_eviction's worked example
  CHECK(a.plan.freed_bytes == 2 * GiB);
  CHECK(out[0].keep_tokens == 18192);
  // Rung 4b off (below TIGHT, or the ladder disabled): the decision alone.
  const auto off = admit_after_eviction(m, host_request(98304), box(11 * GiB), p, false, kv_format::f16, running, 4,
                                        eviction_limits{}, nullptr);
  CHECK(off.decision == a.decision);
  CHECK_FALSE(off.considered);
  CHECK_FALSE(off.after_eviction);
  CHECK(off.evict_bytes == 0);
}

TEST_CASE("admit_after_eviction: inside the reserve, the bytes short count the way out of it") {
  const model_cost m = llama_kv_only();
  const policy p = one_gib_reserve();
  // 512 MiB available, reserve 1 GiB: rejected (host_reserve). 8192 tokens need 1 GiB: short by 1.5 GiB.
  const auto a = admit_after_eviction(m, host_request(8192), box(512 * MiB), p, true, kv_format::f16, running, 4,
                                      eviction_limits{}, nullptr);
  CHECK(a.decision.verdict == verdict::reject);
  CHECK(a.decision.reason == admit_reason::host_reserve);
  CHECK(a.considered);
  CHECK(a.evict_bytes == 3 * GiB / 2);
  CHECK(a.after_eviction);
}

TEST_CASE("admit_after_eviction: not enough, or nothing eviction can help") {
  const model_cost m = llama_kv_only();
  const policy p = one_gib_reserve();
  // 1M tokens need 128 GiB: the slots at their floors give about 6.7 GiB.
  const auto big = admit_after_eviction(m, host_request(1 << 20), box(11 * GiB), p, true, kv_format::f16, running, 4,
                                        eviction_limits{}, nullptr);
  CHECK(big.considered);
  CHECK_FALSE(big.after_eviction);
  CHECK(big.evict_bytes == 128 * GiB + GiB - 11 * GiB);
  CHECK(big.plan.freed_bytes == ((32768 - 3277) + (8192 - 820) + (1000 - 100) + (20000 - 2000)) * llama_token);
  // Fits already: admitted, nothing considered.
  const auto fits = admit_after_eviction(m, host_request(1000), box(11 * GiB), p, true, kv_format::f16, running, 4,
                                         eviction_limits{}, nullptr);
  CHECK(fits.decision.verdict == verdict::admit);
  CHECK_FALSE(fits.considered);
  // A full PSI stall: no eviction makes that go away at admission.
  mem_state stalled = box(11 * GiB);
  stalled.host_psi_full_avg10 = 50.0;
  const auto psi = admit_after_eviction(m, host_request(98304), stalled, p, true, kv_format::f16, running, 4,
                                        eviction_limits{}, nullptr);
  CHECK(psi.decision.reason == admit_reason::psi_stall);
  CHECK_FALSE(psi.considered);
  // A GPU-resident request: its KV is not in host RAM.
  request_spec gpu = host_request(98304);
  gpu.gpu_resident = true;
  CHECK_FALSE(admit_after_eviction(m, gpu, box(512 * MiB), p, true, kv_format::f16, running, 4, eviction_limits{},
                                   nullptr)
                  .considered);
  // A die that bounds the host path and cannot hold the request: host RAM freed does not help.
  mem_state with_die = box(11 * GiB);
  with_die.n_dies = 1;
  with_die.per_die_free_bytes[0] = 11 * GiB;  // above the host's 10 GiB limit, below the 12 GiB need
  with_die.per_die_budget_bytes[0] = 16 * GiB;
  request_spec on_die = host_request(98304);
  on_die.die = 0;
  const auto die = admit_after_eviction(m, on_die, with_die, p, true, kv_format::f16, running, 4, eviction_limits{},
                                        nullptr);
  CHECK(die.decision.reason == admit_reason::host_budget);
  CHECK_FALSE(die.considered);
  with_die.per_die_free_bytes[0] = 13 * GiB;  // the die holds it: eviction helps
  CHECK(admit_after_eviction(m, on_die, with_die, p, true, kv_format::f16, running, 4, eviction_limits{}, nullptr)
            .after_eviction);
  // A window cap is not memory: not considered.
  request_spec windowed = host_request(98304);
  windowed.max_window = 4096;
  CHECK_FALSE(admit_after_eviction(m, windowed, box(11 * GiB), p, true, kv_format::f16, running, 4, eviction_limits{},
                                   nullptr)
                  .considered);
}

TEST_CASE("admit_after_eviction: a request that needs no host bytes at exactly the reserve is not admitted after "
          "evicting nothing") {
  const policy p = one_gib_reserve();
  const mem_state at_reserve = box(GiB);  // CRITICAL: available memory is the reserve, to the byte
  // An empty prompt of a model with no activation term needs 0 B: still refused (host_reserve), and the way
  // out of the reserve is one byte past it, which the running slots must give.
  const model_cost m = llama_kv_only();
  REQUIRE(admit_request(m, host_request(0), at_reserve, p).need_bytes == 0);
  const auto empty = admit_after_eviction(m, host_request(0), at_reserve, p, true, kv_format::f16, running, 4,
                                          eviction_limits{}, nullptr);
  CHECK(empty.decision.reason == admit_reason::host_reserve);
  CHECK(empty.considered);
  CHECK(empty.evict_bytes == 1);
  CHECK(empty.after_eviction);
  CHECK(empty.plan.freed_bytes >= 1);
  // A preallocated engine's request (every cost 0): its slots give nothing back, so eviction cannot admit it.
  const auto prealloc = admit_after_eviction(preallocated_model_cost, host_request(512), at_reserve, p, true,
                                             kv_format::f16, running, 4, eviction_limits{}, nullptr);
  CHECK(prealloc.decision.reason == admit_reason::host_reserve);
  CHECK(prealloc.evict_bytes == 1);
  CHECK_FALSE(prealloc.after_eviction);
  CHECK(prealloc.plan.freed_bytes == 0);
}
