// eviction_kernels.cu - rung 4b on the die: SnapKV pooling, keep-set selection and in-place row
// compaction (see pnmem/cuda/eviction_ops.hpp for what each computes; keep_set.hpp is the reference
// these match exactly: the same sums in the same order, the same kept set, ties and NaN included).
#include <cuda_runtime.h>

#include <cstdint>

#include "eviction_kernels.hpp"

namespace pnmem::cuda::kernels {
namespace {

constexpr int pool_tile = 256;       // tokens per block of the pooling kernel
constexpr int select_threads = 1024;  // one block selects one row
constexpr int compact_threads = 256;  // one block compacts one stripe
constexpr int compact_tile_bytes = 32 * 1024;

// keep_set.hpp's rank_key: NaN ranks as -infinity.
__device__ __forceinline__ float rank_key(float x) { return isnan(x) ? -INFINITY : x; }

// --- observation pooling -------------------------------------------------------------------------
// Block b scores tokens [b * pool_tile, (b + 1) * pool_tile): it sums the rows of its tile and of a
// halo of `half` tokens on each side into shared memory (each column's rows in row order, as the
// reference adds them), then takes each token's max over its neighbourhood.
__global__ void observation_kernel(const float* __restrict__ attn, int rows, int n, int half,
                                   float* __restrict__ scores) {
  extern __shared__ float col[];
  const int tile0 = static_cast<int>(blockIdx.x) * pool_tile;
  const int lo = max(0, tile0 - half);
  const int hi = min(n, tile0 + pool_tile + half);  // exclusive
  for (int t = lo + static_cast<int>(threadIdx.x); t < hi; t += static_cast<int>(blockDim.x)) {
    float s = 0.0f;
    for (int r = 0; r < rows; ++r) s += attn[static_cast<std::int64_t>(r) * n + t];
    col[t - lo] = rank_key(s);
  }
  __syncthreads();
  const int t = tile0 + static_cast<int>(threadIdx.x);
  if (t >= n) return;
  const int a = max(0, t - half);
  const int b = min(n - 1, t + half);
  float best = col[a - lo];
  for (int u = a + 1; u <= b; ++u) {
    const float c = col[u - lo];
    best = best < c ? c : best;  // std::max's rule: the first of equals
  }
  scores[t] = best;
}

// --- selection -----------------------------------------------------------------------------------
// A float as an unsigned key with the same order (rank_key first; -0 is +0, as they compare equal).
__device__ __forceinline__ std::uint32_t order_key(float x) {
  float f = rank_key(x);
  if (f == 0.0f) f = 0.0f;
  const std::uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) != 0 ? ~u : (u | 0x80000000u);
}

// Exclusive prefix sum of x over the block (blockDim.x a multiple of 32, at most 1024); *total gets
// the sum. `warp_sums` is 33 ints of shared memory. Every thread must call it.
__device__ int block_exclusive_sum(int x, int* warp_sums, int* total) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  const int warps = static_cast<int>(blockDim.x) >> 5;
  int inc = x;
  for (int o = 1; o < 32; o <<= 1) {
    const int y = __shfl_up_sync(0xffffffffu, inc, o);
    if (lane >= o) inc += y;
  }
  if (lane == 31) warp_sums[warp] = inc;
  __syncthreads();
  if (warp == 0) {
    const int w = lane < warps ? warp_sums[lane] : 0;
    int wi = w;
    for (int o = 1; o < 32; o <<= 1) {
      const int y = __shfl_up_sync(0xffffffffu, wi, o);
      if (lane >= o) wi += y;
    }
    if (lane < warps) warp_sums[lane] = wi - w;
    if (lane == 31) warp_sums[32] = wi;
  }
  __syncthreads();
  const int r = warp_sums[warp] + inc - x;
  *total = warp_sums[32];
  __syncthreads();  // warp_sums is reused by the next call
  return r;
}

// One block: the sinks, the recent, and the middle tokens first in (score descending, position
// ascending). The cut value v (the mid_keep-th largest key) comes from a radix select in four 8-bit
// passes over the middle; then one pass in position order writes every key above v and the first
// `equal_kept` keys equal to it, exactly as the reference does.
__global__ void select_kernel(const float* __restrict__ scores, int n, int budget, int sinks_in, int recent_in,
                              std::int32_t* __restrict__ keep) {
  __shared__ unsigned hist[256];
  __shared__ int warp_sums[33];
  __shared__ std::uint32_t s_prefix;
  __shared__ int s_rank;
  const int tid = static_cast<int>(threadIdx.x);
  const int step = static_cast<int>(blockDim.x);
  if (n <= budget) {
    for (int t = tid; t < n; t += step) keep[t] = t;
    return;
  }
  const int sinks = min(max(sinks_in, 0), budget);
  const int recent = min(max(recent_in, 0), budget - sinks);
  const int mid_begin = sinks;
  const int mid_end = n - recent;
  const int mid_keep = budget - sinks - recent;
  for (int t = tid; t < sinks; t += step) keep[t] = t;
  for (int t = tid; t < recent; t += step) keep[sinks + mid_keep + t] = mid_end + t;
  if (mid_keep <= 0) return;
  if (scores == nullptr) {
    for (int t = tid; t < mid_keep; t += step) keep[sinks + t] = mid_end - mid_keep + t;
    return;
  }
  // Radix select: after the passes, prefix is v's key and rank how many of the keys equal to v are kept.
  std::uint32_t prefix = 0;
  std::uint32_t mask = 0;
  int rank = mid_keep;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = tid; i < 256; i += step) hist[i] = 0;
    __syncthreads();
    for (int t = mid_begin + tid; t < mid_end; t += step) {
      const std::uint32_t k = order_key(scores[t]);
      if ((k & mask) == prefix) atomicAdd(&hist[(k >> shift) & 0xffu], 1u);
    }
    __syncthreads();
    if (tid == 0) {
      int above = 0;
      int d = 255;
      for (; d > 0; --d) {
        if (above + static_cast<int>(hist[d]) >= rank) break;
        above += static_cast<int>(hist[d]);
      }
      s_rank = rank - above;
      s_prefix = prefix | (static_cast<std::uint32_t>(d) << shift);
    }
    __syncthreads();
    rank = s_rank;
    prefix = s_prefix;
    mask |= 0xffu << shift;
    __syncthreads();
  }
  const std::uint32_t v = prefix;
  const int equal_kept = rank;
  int kept_before = 0;   // middle tokens written by earlier chunks
  int equal_before = 0;  // keys equal to v seen by earlier chunks
  for (int base = mid_begin; base < mid_end; base += step) {
    const int t = base + tid;
    const std::uint32_t k = t < mid_end ? order_key(scores[t]) : 0;
    const int is_equal = t < mid_end && k == v ? 1 : 0;
    int equal_total = 0;
    const int equal_rank = equal_before + block_exclusive_sum(is_equal, warp_sums, &equal_total);
    const int kept = t < mid_end && (k > v || (is_equal != 0 && equal_rank < equal_kept)) ? 1 : 0;
    int kept_total = 0;
    const int at = kept_before + block_exclusive_sum(kept, warp_sums, &kept_total);
    if (kept != 0) keep[sinks + at] = t;
    kept_before += kept_total;
    equal_before += equal_total;
  }
}

// --- compaction ----------------------------------------------------------------------------------
// In place, rows[i] = rows[keep[i]], in chunks of rows that fit the shared tile: a chunk's sources are
// all read before any of its destinations is written, and a later chunk's sources (keep[j] >= j) lie
// past every destination written so far. W is the widest word the rows' size and address allow.
template <class W>
__global__ void compact_kernel(W* rows, int row_words, const std::int32_t* __restrict__ keep, int kept,
                               int chunk_rows) {
  extern __shared__ __align__(16) unsigned char tile_bytes[];
  W* tile = reinterpret_cast<W*>(tile_bytes);
  const int tid = static_cast<int>(threadIdx.x);
  const int step = static_cast<int>(blockDim.x);
  if (chunk_rows > 0) {
    for (int first = 0; first < kept; first += chunk_rows) {
      const int count = min(chunk_rows, kept - first);
      const int words = count * row_words;
      for (int w = tid; w < words; w += step) {
        const int r = w / row_words;
        tile[w] = rows[static_cast<std::int64_t>(keep[first + r]) * row_words + (w - r * row_words)];
      }
      __syncthreads();
      for (int w = tid; w < words; w += step) rows[static_cast<std::int64_t>(first) * row_words + w] = tile[w];
      __syncthreads();
    }
    return;
  }
  // Rows wider than the tile: one row at a time, straight from its source (a different row, or itself).
  for (int i = 0; i < kept; ++i) {
    const std::int64_t src = keep[i];
    if (src != i) {
      for (int w = tid; w < row_words; w += step)
        rows[static_cast<std::int64_t>(i) * row_words + w] = rows[src * row_words + w];
    }
    __syncthreads();
  }
}

template <class W>
cudaError_t launch_compact(const row_compaction& a, cudaStream_t s) {
  const auto row_words = static_cast<int>(a.row_bytes / sizeof(W));
  const int chunk_rows = a.row_bytes <= static_cast<std::size_t>(compact_tile_bytes)
                             ? static_cast<int>(static_cast<std::size_t>(compact_tile_bytes) / a.row_bytes)
                             : 0;
  const std::size_t shared = chunk_rows > 0 ? static_cast<std::size_t>(chunk_rows) * a.row_bytes : 0;
  compact_kernel<W><<<1, compact_threads, shared, s>>>(static_cast<W*>(a.rows), row_words, a.keep, a.kept,
                                                       chunk_rows);
  return cudaPeekAtLastError();
}

}  // namespace

int launch_observation_scores(const observation_pooling& a, void* stream) noexcept {
  const int half = a.kernel < 2 ? 0 : a.kernel / 2;
  const int blocks = (a.n_tokens + pool_tile - 1) / pool_tile;
  const std::size_t shared = static_cast<std::size_t>(pool_tile + 2 * half) * sizeof(float);
  observation_kernel<<<blocks, pool_tile, shared, static_cast<cudaStream_t>(stream)>>>(a.attn, a.rows, a.n_tokens,
                                                                                       half, a.scores);
  return static_cast<int>(cudaPeekAtLastError());
}

int launch_select_keep(const keep_selection& a, void* stream) noexcept {
  if (kept_count(a) == 0) return static_cast<int>(cudaSuccess);
  select_kernel<<<1, select_threads, 0, static_cast<cudaStream_t>(stream)>>>(
      a.scores, a.n_tokens, a.budget, a.window.sinks, a.window.recent, a.keep);
  return static_cast<int>(cudaPeekAtLastError());
}

int launch_compact_rows(const row_compaction& a, void* stream) noexcept {
  if (a.kept == 0) return static_cast<int>(cudaSuccess);
  const auto s = static_cast<cudaStream_t>(stream);
  const auto address = reinterpret_cast<std::uintptr_t>(a.rows);
  auto fits = [&](std::size_t w) { return a.row_bytes % w == 0 && address % w == 0; };
  if (fits(16)) return static_cast<int>(launch_compact<uint4>(a, s));
  if (fits(4)) return static_cast<int>(launch_compact<std::uint32_t>(a, s));
  if (fits(2)) return static_cast<int>(launch_compact<std::uint16_t>(a, s));
  return static_cast<int>(launch_compact<std::uint8_t>(a, s));
}

}  // namespace pnmem::cuda::kernels
