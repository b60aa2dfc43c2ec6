// Rung 4b's budgets in bytes (eviction_budget.hpp): how many tokens a slot keeps for the bytes wanted, and
// how an eviction spreads over slots. Expected bytes are worked from the models' shapes here, not taken
// from pnmem's output.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

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
