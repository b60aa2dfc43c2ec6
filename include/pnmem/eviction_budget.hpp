// pnmem/eviction_budget.hpp - how many tokens a slot keeps when rung 4b evicts, and the bytes that returns.
//
// Rung 4b (ladder.hpp: kv_evict, TIGHT and worse) lets the engine drop KV rows of running slots instead
// of refusing work. keep_set.hpp says which tokens stay; this header says how many, from the bytes
// wanted and the model's costs (cost_model.hpp), and what that frees:
//
//   keep_budget(m, kv, slot_tokens, bytes, min_keep)   one slot: the most tokens it can keep and still
//                                                       give back `bytes`, never fewer than min_keep
//   plan_eviction(m, kv, slots, n, bytes, limits, out)  several slots: every slot longer than one common
//                                                       length L is cut to L (never below its floor),
//                                                       L the longest that frees `bytes`; or the most
//                                                       they can give, when not enough
//
// What eviction frees is the KV of the full-attention layers only: a sliding or chunked layer already
// keeps at most its window of recent tokens (the recent tokens every selection keeps), a recurrent
// layer's state does not depend on the tokens, and a cross-attention layer's KV is per image. So
// the bytes per token evicted are model_cost::full_kv_bytes_per_token in the cache's format; an engine
// that allocates KV in blocks (kv_block_tokens) gets back whole blocks: a slot of n tokens holds
// ceil(n / block) blocks, and keeping K frees ceil(n / block) - ceil(K / block) of them.
//
// Pure, constexpr, no allocation; C++17.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "pnmem/cost_model.hpp"
#include "pnmem/detail/equality.hpp"
#include "pnmem/detail/saturating.hpp"
#include "pnmem/kv_format.hpp"

namespace pnmem {

// One slot's share of an eviction.
struct keep_budget_answer {
  int keep_tokens = 0;           // the tokens the slot keeps (all of them when it gives nothing)
  std::uint64_t freed_bytes = 0; // KV bytes evicting the rest gives back
  bool enough = false;           // freed_bytes >= the bytes asked for

  PNMEM_DEFAULTED_EQUALITY(keep_budget_answer)
};

namespace detail {
// The bytes the full-attention layers hold for `tokens` tokens: whole blocks when the engine allocates
// in blocks. Exact (no saturation): tokens < 2^31, bytes per token < 2^64.
constexpr u128 evictable_bytes(const model_cost& m, kv_format kv, std::int64_t tokens) noexcept {
  const std::uint64_t per = m.full_kv_bytes_per_token[static_cast<std::size_t>(kv)];
  const std::int64_t block = m.kv_block_tokens > 1 ? m.kv_block_tokens : 1;
  const std::int64_t held = (tokens + block - 1) / block * block;
  return static_cast<u128>(per) * static_cast<u128>(held);
}
constexpr std::uint64_t freed_bytes(const model_cost& m, kv_format kv, int tokens, int keep) noexcept {
  return to_u64_sat(evictable_bytes(m, kv, tokens) - evictable_bytes(m, kv, keep));
}
}  // namespace detail

// One slot of `slot_tokens` tokens: the most tokens it can keep while evicting the rest gives back at
// least `bytes_to_free`, and what that frees. Never fewer than min_keep tokens (clamped to [0,
// slot_tokens]): when even that does not free enough, it keeps min_keep and says enough = false. A
// slot that needs to give nothing keeps every token.
constexpr keep_budget_answer keep_budget(const model_cost& m, kv_format kv, int slot_tokens,
                                         std::uint64_t bytes_to_free, int min_keep) noexcept {
  keep_budget_answer a;
  const int n = std::max(slot_tokens, 0);
  a.keep_tokens = n;
  if (bytes_to_free == 0) {
    a.enough = true;
    return a;
  }
  const std::uint64_t per = m.full_kv_bytes_per_token[static_cast<std::size_t>(kv)];
  const int floor = std::clamp(min_keep, 0, n);
  if (per == 0 || n == floor) return a;  // nothing this slot holds can go
  // Keeping K frees per x (held(n) - held(K)) with held rounding up to a block: the largest K whose
  // held(K) <= held(n) - ceil(bytes / per) is that target rounded down to a block.
  const std::int64_t block = m.kv_block_tokens > 1 ? m.kv_block_tokens : 1;
  const std::int64_t held_n = (std::int64_t{n} + block - 1) / block * block;
  const std::uint64_t drop = bytes_to_free / per + (bytes_to_free % per != 0 ? 1 : 0);
  std::int64_t keep = 0;
  if (drop < static_cast<std::uint64_t>(held_n)) keep = (held_n - static_cast<std::int64_t>(drop)) / block * block;
  keep = std::clamp<std::int64_t>(keep, floor, n);
  a.keep_tokens = static_cast<int>(keep);
  a.freed_bytes = detail::freed_bytes(m, kv, n, a.keep_tokens);
  a.enough = a.freed_bytes >= bytes_to_free;
  return a;
}

// The least a slot keeps when several give bytes back: at least min_keep_tokens (the sinks and the
// recent window keep_set.hpp keeps) and at least min_keep_permille / 1000 of its tokens, rounded up.
struct eviction_limits {
  int min_keep_tokens = 36;    // keep_window's 4 sinks + 32 recent
  int min_keep_permille = 100; // 10 %: below it retrieval from the context fails (BENCHMARKS.md)

  PNMEM_DEFAULTED_EQUALITY(eviction_limits)
};

constexpr int keep_floor(int slot_tokens, const eviction_limits& l) noexcept {
  const std::int64_t n = std::max(slot_tokens, 0);
  const std::int64_t permille = std::clamp(l.min_keep_permille, 0, 1000);
  const std::int64_t share = (n * permille + 999) / 1000;
  return static_cast<int>(std::min(n, std::max<std::int64_t>(share, std::max(l.min_keep_tokens, 0))));
}

// What an eviction over several slots returns.
struct eviction_plan {
  std::uint64_t freed_bytes = 0;  // in all (saturating)
  int cut_to = 0;                 // L: every slot longer keeps max(L, its floor) tokens
  int slots_cut = 0;              // slots that give anything
  bool enough = false;            // freed_bytes >= the bytes asked for

  PNMEM_DEFAULTED_EQUALITY(eviction_plan)
};

namespace detail {
// Slots cut to `length` (never below their floors): the bytes that frees; per-slot answers to `out`
// when it is not null.
constexpr eviction_plan cut_slots(const model_cost& m, kv_format kv, const int* slot_tokens, int n_slots,
                                  int length, const eviction_limits& l, keep_budget_answer* out) noexcept {
  eviction_plan p;
  p.cut_to = length;
  for (int i = 0; i < n_slots; ++i) {
    const int n = std::max(slot_tokens[i], 0);
    const int keep = std::min(n, std::max(length, keep_floor(n, l)));
    const std::uint64_t freed = freed_bytes(m, kv, n, keep);
    p.freed_bytes = sat_add(p.freed_bytes, freed);
    if (freed > 0) ++p.slots_cut;
    if (out != nullptr) out[i] = keep_budget_answer{keep, freed, true};
  }
  return p;
}
}  // namespace detail

// Which slots give how much for `bytes_to_free`: the longest length L such that cutting every slot
// longer than L to L (each keeping at least its keep_floor) frees the bytes, so the longest
// contexts lose tokens first and short requests are untouched. Not enough even at L = 0 (every slot
// at its floor): that plan, enough = false. `out` (n_slots answers, or nullptr): each slot's keep
// tokens and bytes; their `enough` is the plan's. A negative n_slots is taken as 0.
constexpr eviction_plan plan_eviction(const model_cost& m, kv_format kv, const int* slot_tokens, int n_slots,
                                      std::uint64_t bytes_to_free, const eviction_limits& l,
                                      keep_budget_answer* out) noexcept {
  n_slots = std::max(n_slots, 0);
  int longest = 0;
  for (int i = 0; i < n_slots; ++i) longest = std::max(longest, slot_tokens[i]);
  // freed(L) does not grow with L: find the largest L in [0, longest] with freed(L) >= bytes.
  int length = longest;  // cuts nothing
  if (bytes_to_free > 0) {
    if (detail::cut_slots(m, kv, slot_tokens, n_slots, 0, l, nullptr).freed_bytes < bytes_to_free) {
      length = 0;
    } else {
      int lo = 0, hi = longest;  // freed(lo) >= bytes; the answer is in [lo, hi]
      while (lo < hi) {
        const int mid = lo + (hi - lo + 1) / 2;
        if (detail::cut_slots(m, kv, slot_tokens, n_slots, mid, l, nullptr).freed_bytes >= bytes_to_free) {
          lo = mid;
        } else {
          hi = mid - 1;
        }
      }
      length = lo;
    }
  }
  eviction_plan p = detail::cut_slots(m, kv, slot_tokens, n_slots, length, l, out);
  p.enough = p.freed_bytes >= bytes_to_free;
  if (out != nullptr) {
    for (int i = 0; i < n_slots; ++i) out[i].enough = p.enough;
  }
  return p;
}

}  // namespace pnmem
