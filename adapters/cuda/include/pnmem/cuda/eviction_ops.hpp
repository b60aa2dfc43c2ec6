// pnmem/cuda/eviction_ops.hpp - rung 4b on the die: the three device operations that evict KV rows.
//
// The ladder turns KV eviction on at TIGHT (rung 4b); eviction_budget.hpp says how many tokens a slot
// keeps, keep_set.hpp which ones (the CPU reference). On a die the same three steps run as stream-
// ordered device work, through device_backend:
//
//   observation_scores_async  SnapKV's scores of one row: the attention the observation window's
//                             queries paid each token, summed over those rows, max-pooled over
//                             `kernel` neighbours (keep_set.hpp's observation_scores)
//   select_keep_async         the positions to keep, increasing: sinks, recent, and the best-scoring
//                             middle tokens (keep_set.hpp's select_keep: the same set, ties and NaN
//                             included)
//   compact_rows_async        in place, rows[i] = rows[keep[i]] for i < kept: the kept rows of one
//                             slot's stripe of one layer's K (or V) move to its front, in order
//
// Every pointer is device memory (or host memory the device may access); nothing is read back to the
// host, so a whole eviction is queued without a synchronisation: the host knows how many positions a
// selection writes (kept_count) before the device has computed them. buffer_owner::try_evict drives
// compaction and then the shrink that gives memory back (buffer_owner.hpp).
//
// The structs below are the calls' arguments; the functions are their host reference, which the fake
// backend runs at the op's completion (so every protocol test exercises the same arithmetic) and
// scripts/gpu-check compares the cudart kernels against. One header, C++20, no allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "pnmem/keep_set.hpp"

namespace pnmem::cuda {

// SnapKV scoring of one row: `attn` is rows x n_tokens floats, row-major; scores gets n_tokens floats.
struct observation_pooling {
  const float* attn = nullptr;
  int rows = 0;
  int n_tokens = 0;
  int kernel = 7;  // pooling width (SnapKV's default); below 2 does not pool
  float* scores = nullptr;
};

// Keep-set selection of one row: writes kept_count(*this) positions, increasing, to keep.
// `scores` may be null: the sinks and the most recent tokens only (StreamingLLM).
struct keep_selection {
  const float* scores = nullptr;
  int n_tokens = 0;
  int budget = 0;
  keep_window window;
  std::int32_t* keep = nullptr;
};

// In-place compaction of one stripe of n_rows rows of row_bytes each: rows[i] = rows[keep[i]] for i < kept.
// keep must be increasing and below n_rows (what select_keep writes); rows past `kept` are left as they
// were (the engine's length for the slot becomes `kept`).
struct row_compaction {
  void* rows = nullptr;
  std::size_t row_bytes = 0;
  int n_rows = 0;
  const std::int32_t* keep = nullptr;
  int kept = 0;
};

// How many positions a selection writes: min(budget, n_tokens), 0 for a negative either.
constexpr int kept_count(const keep_selection& s) noexcept {
  if (s.n_tokens <= 0 || s.budget <= 0) return 0;
  return s.budget < s.n_tokens ? s.budget : s.n_tokens;
}

// The widest pooling a backend takes (the kernel keeps a tile and its halo in shared memory);
// SnapKV pools over 5 to 7.
inline constexpr int max_pool_kernel = 4097;

// The arguments a backend refuses with invalid_value before queuing anything.
constexpr bool valid(const observation_pooling& a) noexcept {
  return a.attn != nullptr && a.scores != nullptr && a.rows > 0 && a.n_tokens > 0 && a.kernel <= max_pool_kernel;
}
constexpr bool valid(const keep_selection& a) noexcept {
  return a.n_tokens > 0 && a.budget >= 0 && a.window.sinks >= 0 && a.window.recent >= 0 &&
         (kept_count(a) == 0 || a.keep != nullptr);
}
constexpr bool valid(const row_compaction& a) noexcept {
  return a.rows != nullptr && a.row_bytes > 0 && a.n_rows > 0 && a.kept >= 0 && a.kept <= a.n_rows &&
         (a.kept == 0 || a.keep != nullptr);
}

// Whether keep[0 .. kept) is increasing and below n_rows: what compaction needs to be a pure gather.
// (The reference checks it before moving anything; the kernel trusts it.)
inline bool keep_list_ok(const std::int32_t* keep, int kept, int n_rows) noexcept {
  std::int64_t prev = -1;
  for (int i = 0; i < kept; ++i) {
    if (keep[i] <= prev || keep[i] >= n_rows) return false;
    prev = keep[i];
  }
  return true;
}

// --- the host reference ---

// `scratch`: n_tokens floats.
inline void observation_scores_reference(const observation_pooling& a, float* scratch) noexcept {
  pnmem::observation_scores(a.attn, a.rows, a.n_tokens, a.kernel, a.scores, scratch);
}

// `positions`: kept_count(a) ints; `scratch`: n_tokens floats. Writes kept_count(a) int32 positions.
inline void select_keep_reference(const keep_selection& a, int* positions, float* scratch) noexcept {
  const int k = pnmem::select_keep(a.scores, a.n_tokens, a.budget, a.window, positions, scratch);
  for (int i = 0; i < k; ++i) a.keep[i] = static_cast<std::int32_t>(positions[i]);
}

// Returns false (nothing moved) when the keep list is not increasing and in range.
inline bool compact_rows_reference(const row_compaction& a) noexcept {
  if (!keep_list_ok(a.keep, a.kept, a.n_rows)) return false;
  auto* base = static_cast<std::byte*>(a.rows);
  // keep[i] >= i (increasing from >= 0): row i is written after every row before it was read, and a
  // later source keep[j] > keep[i] >= i is never a row already written. memmove: keep[i] may be i.
  for (int i = 0; i < a.kept; ++i) {
    if (a.keep[i] != i) {
      std::memmove(base + static_cast<std::size_t>(i) * a.row_bytes,
                   base + static_cast<std::size_t>(a.keep[i]) * a.row_bytes, a.row_bytes);
    }
  }
  return true;
}

}  // namespace pnmem::cuda
