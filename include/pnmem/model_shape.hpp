// pnmem/model_shape.hpp - a model as groups of layers, and the costs they add up to (from_shape).
//
// A model's layers fall into groups that hold memory alike. Each group is a count of layers and one of:
//
//   full       attention over every token: per token and layer a K row of kv_heads x key_dim values
//              and a V row of kv_heads x value_dim values (Llama, Qwen, Mistral without a window)
//   sliding    the same rows, for the last `span` tokens only (Gemma's and GPT-OSS's local layers)
//   chunked    the same rows, for the tokens of the current chunk of `span` tokens (Llama 4)
//   cross      the same rows for an encoder's `span` tokens per item: per image, not per text token
//              (Mllama's cross-attention layers)
//   recurrent  no KV: a fixed per-sequence state of conv_state_values + ssm_state_values values per
//              layer (Mamba, Mamba-2, gated delta net)
//
// A group may keep one row per token instead of two (k_only): MLA (DeepSeek-V2/V3, Kimi-K2) caches one
// latent row of kv_lora_rank + qk_rope_head_dim values per layer, from which K and V are both read
// (vLLM: one KV head of that width; llama.cpp: the K cache, V a view of it). K and V rows may differ
// in size (value_dim: MiMo-V2-Flash's 192 and 128), each stored at its own size, and each group has
// its own KV head count (a model's sliding layers may have more KV heads than its full ones).
//
// A group may also keep caches beside the KV (side_bytes): per token and layer, bytes in a format of
// their own that the KV's format does not change, counted wherever the KV is (every answer, block
// rounding, what eviction frees). DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5) keeps its lightning
// indexer's keys there: index_head_dim fp8 values and one fp32 scale per 128 of them, 132 B a token
// and layer for index_head_dim 128 (vLLM's indexer cache; the KV cache's dtype does not change it, and
// neither does rung 4a: it stays when the KV goes to 4 bits).
//
// Groups need not partition the layers: Falcon-H1's layers each hold attention KV and a Mamba state,
// i.e. two groups of L layers.
//
// from_shape adds the groups up into a model_cost (cost_model.hpp) per KV format: full groups into the
// full term, sliding and chunked groups into a window term per number of tokens kept, cross groups into
// the per-item bytes, recurrent groups into state_bytes_per_seq. What the engine serving the model
// keeps is its rule (engine_rule below; docs/engine-rules-research.md cites the engines' code):
//
//   exact       the model's own need: every token of a full layer, W tokens of a sliding one, C of a
//               chunked one; recurrent state in the shape's formats; KV per token (no blocks)
//   vllm        what vLLM's KV-cache manager holds for a sequence: KV in blocks of block_tokens
//               tokens (raised to 64 for MLA, the FlashMLA backend's; for a hybrid with recurrent
//               layers raised until one attention page of a layer holds one layer's state, as vLLM
//               aligns them), and at its peak, a prefill chunk of max_batched_tokens in flight:
//                 sliding  (ceil((W - 1 + max_batched_tokens) / block) + 1) x block tokens
//                 chunked  ceil((C + max_batched_tokens) / block) x block tokens
//               (vllm/v1/kv_cache_interface.py, SlidingWindowSpec / ChunkedLocalAttentionSpec
//               max_memory_usage_bytes); each layer's state padded to that attention page, held
//               state_copies times (2 with prefix caching on a hybrid: vLLM's "align" mode); and
//               with kinds of layer that keep different tokens (its hybrid manager), each kind's count
//               rounded up to vLLM's group size (the padding layers it adds are paid by every
//               sequence) and one page size for all: a kind with a smaller page in a larger block, or
//               its page padded (engine_layout; every layer rounded to the largest block); an
//               MLA latent of 576 values with an indexer beside it (DeepSeek Sparse Attention) in fp8
//               is stored as fp8_ds_mla rows of 656 B (FlashMLA's sparse backend: 512 fp8 values, their
//               scales and 64 bf16 rope values; FlashInfer's sparse backend keeps 576 B: the higher);
//               with hybrid_manager_off (vLLM's --disable-hybrid-kv-cache-manager) every sliding and
//               chunked layer holds the whole context, in one group
//   llama_cpp   llama.cpp's caches: the context padded to 256 cells; a sliding or chunked layer keeps
//               pad256(W x seqs + ubatch) cells for `seqs` sequences sharing one unified cache, i.e.
//               ceil(pad256(W x seqs + ubatch) / seqs) per sequence (src/llama-kv-cache-iswa.cpp;
//               seqs 1 for llama-server's separate streams); recurrent state in f32
//
// A layer never keeps more than the sequence's own tokens (cost_model.hpp: min(n, window)). The state
// formats are the shape's (the weights' dtype: vLLM's "auto" mamba cache dtype; a config may ask for
// an fp32 SSM state), fp32 for the SSM state when ssm_state_fp32 is set (vLLM's
// --mamba-ssm-cache-dtype float32), fp32 for both under llama.cpp.
//
// The activation formula (cost_model.hpp) is the seed's, from hidden_size and query_heads.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "pnmem/cost_model.hpp"
#include "pnmem/detail/equality.hpp"
#include "pnmem/detail/saturating.hpp"
#include "pnmem/kv_format.hpp"
#include "pnmem/units.hpp"

namespace pnmem {

enum class layer_kind : std::uint8_t { full, sliding, chunked, cross, recurrent };

constexpr std::string_view to_string(layer_kind k) noexcept {
  switch (k) {
    case layer_kind::full: return "full";
    case layer_kind::sliding: return "sliding";
    case layer_kind::chunked: return "chunked";
    case layer_kind::cross: return "cross";
    case layer_kind::recurrent: return "recurrent";
  }
  return "invalid";
}

constexpr bool parse_layer_kind(std::string_view s, layer_kind& out) noexcept {
  for (layer_kind k : {layer_kind::full, layer_kind::sliding, layer_kind::chunked, layer_kind::cross,
                       layer_kind::recurrent}) {
    if (s == to_string(k)) {
      out = k;
      return true;
    }
  }
  return false;
}

// One group of layers that hold memory alike (see the top of this file).
struct layer_group {
  layer_kind kind = layer_kind::full;
  std::uint32_t layers = 0;
  std::uint32_t kv_heads = 0;   // KV heads per layer (k_only: rows per token, usually 1)
  std::uint32_t key_dim = 0;    // values per head of a K row
  std::uint32_t value_dim = 0;  // values per head of a V row; 0: key_dim. Not read when k_only.
  bool k_only = false;          // one row per token (MLA's latent), no V row
  std::uint32_t span = 0;       // sliding: the window; chunked: the chunk; cross: encoder tokens per item
  std::uint64_t conv_state_values = 0;  // recurrent: per layer and sequence
  std::uint64_t ssm_state_values = 0;   // recurrent: per layer and sequence
  // Caches beside the KV, per token and layer, in their own format (the DSA indexer's keys: 132 B); the
  // same in every KV format. 0: none. Last, so that a positional initializer of the fields above still reads.
  std::uint32_t side_bytes = 0;

  PNMEM_DEFAULTED_EQUALITY(layer_group)
};

// The common groups (C++17 has no designated initializers).
constexpr layer_group attention_layers(layer_kind kind, std::uint32_t layers, std::uint32_t kv_heads,
                                       std::uint32_t key_dim, std::uint32_t value_dim = 0,
                                       std::uint32_t span = 0) noexcept {
  layer_group g;
  g.kind = kind;
  g.layers = layers;
  g.kv_heads = kv_heads;
  g.key_dim = key_dim;
  g.value_dim = value_dim;
  g.span = span;
  return g;
}

// MLA: one latent row of `latent_dim` values (kv_lora_rank + qk_rope_head_dim) per token and layer.
constexpr layer_group latent_layers(std::uint32_t layers, std::uint32_t latent_dim) noexcept {
  layer_group g = attention_layers(layer_kind::full, layers, 1, latent_dim);
  g.k_only = true;
  return g;
}

// The bytes DeepSeek Sparse Attention's lightning indexer keeps beside the KV per token and layer, for
// keys of index_head_dim values: fp8 values and one fp32 scale per 128 of them (vLLM's indexer cache:
// index_head_dim + index_head_dim / 128 x 4, 132 for 128), whatever the KV's format.
constexpr std::uint64_t dsa_indexer_bytes(std::uint64_t index_head_dim) noexcept {
  return index_head_dim + index_head_dim / 128 * 4;
}

constexpr layer_group recurrent_layers(std::uint32_t layers, std::uint64_t conv_state_values,
                                       std::uint64_t ssm_state_values) noexcept {
  layer_group g;
  g.kind = layer_kind::recurrent;
  g.layers = layers;
  g.conv_state_values = conv_state_values;
  g.ssm_state_values = ssm_state_values;
  return g;
}

inline constexpr std::size_t max_layer_groups = 8;

// A model's shape: its layer groups and what the activation formula needs.
struct model_shape {
  std::array<layer_group, max_layer_groups> groups{};
  std::uint32_t n_groups = 0;
  std::uint32_t query_heads = 0;
  std::uint32_t hidden_size = 0;
  std::uint64_t fixed_activation_bytes = 256 * MiB;
  kv_format normal_kv = kv_format::f16;     // the KV cache's format by default (the weights' dtype)
  kv_format compact_kv = kv_format::q4_0;   // rung 4a's
  kv_format state_format = kv_format::f16;      // recurrent conv state's (the weights' dtype: vLLM's "auto")
  kv_format ssm_state_format = kv_format::f16;  // recurrent SSM / temporal state's

  // Appends a group; false (nothing changed) when all max_layer_groups are taken.
  constexpr bool add(const layer_group& g) noexcept {
    if (n_groups >= max_layer_groups) return false;
    groups[n_groups++] = g;
    return true;
  }

  PNMEM_DEFAULTED_EQUALITY(model_shape)
};

// A shape of `layers` full-attention layers of kv_heads x head_dim, K and V (Llama-style).
constexpr model_shape uniform_shape(std::uint32_t layers, std::uint32_t kv_heads, std::uint32_t head_dim,
                                    std::uint32_t query_heads, std::uint32_t hidden_size) noexcept {
  model_shape s;
  s.add(attention_layers(layer_kind::full, layers, kv_heads, head_dim));
  s.query_heads = query_heads;
  s.hidden_size = hidden_size;
  return s;
}

// --- the engine's rule -----------------------------------------------------------------------------------

enum class kv_engine : std::uint8_t { exact, vllm, llama_cpp };

constexpr std::string_view to_string(kv_engine e) noexcept {
  switch (e) {
    case kv_engine::exact: return "exact";
    case kv_engine::vllm: return "vllm";
    case kv_engine::llama_cpp: return "llama.cpp";
  }
  return "invalid";
}

constexpr bool parse_kv_engine(std::string_view s, kv_engine& out) noexcept {
  if (s == "exact") {
    out = kv_engine::exact;
  } else if (s == "vllm") {
    out = kv_engine::vllm;
  } else if (s == "llama.cpp" || s == "llama_cpp" || s == "llamacpp") {
    out = kv_engine::llama_cpp;
  } else {
    return false;
  }
  return true;
}

// How the engine serving the model keeps its KV and state (see the top of this file). The defaults
// are each engine's own: vLLM's --block-size 16 and the API server's max_num_batched_tokens on a
// large GPU (8192; 2048 on smaller ones, 16384 for the LLM class), llama.cpp's -ub 512.
struct engine_rule {
  kv_engine engine = kv_engine::exact;
  std::uint32_t block_tokens = 16;          // vllm: --block-size
  std::uint32_t max_batched_tokens = 8192;  // vllm: --max-num-batched-tokens (the prefill chunk in flight)
  std::uint32_t ubatch_tokens = 512;        // llama.cpp: -ub
  std::uint32_t seqs = 1;                   // llama.cpp: the sequences sharing one unified cache
                                            // (llama-server -np auto: 4, unified; -np N: 1 per stream)
  std::uint32_t state_copies = 1;           // vllm: states held per recurrent layer and sequence
                                            // (2: prefix caching on a hybrid, "align" mode)
  bool ssm_state_fp32 = false;              // vllm: --mamba-ssm-cache-dtype float32
  bool mtp = false;                         // vllm, exact: the model's MTP layers run as its speculative
                                            // drafter (--speculative-config with an *_mtp method) and keep
                                            // KV beside the model's: the readers add them to the shape
  bool hybrid_manager_off = false;          // vllm: --disable-hybrid-kv-cache-manager, or a vLLM that turns
                                            // it off for chunked attention (Llama 4; its log says "Disabling
                                            // it, by default"): sliding and chunked layers hold the whole
                                            // context, as full ones, in one group

  PNMEM_DEFAULTED_EQUALITY(engine_rule)
};

inline constexpr engine_rule exact_engine{};

// What is wrong with a rule, or "".
constexpr std::string_view validate(const engine_rule& e) noexcept {
  if (static_cast<std::size_t>(e.engine) > static_cast<std::size_t>(kv_engine::llama_cpp)) return "not an engine";
  if (e.block_tokens == 0) return "block_tokens is 0";
  if (e.seqs == 0) return "seqs is 0";
  if (e.state_copies == 0) return "state_copies is 0";
  if (e.mtp && e.engine == kv_engine::llama_cpp) return "mtp is for the vllm and exact rules (llama.cpp's MTP layers are not priced)";
  if (e.hybrid_manager_off && e.engine != kv_engine::vllm) return "hybrid_manager_off is for the vllm rule";
  return {};
}

namespace detail {
constexpr std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) noexcept { return a / b + (a % b != 0 ? 1 : 0); }
}  // namespace detail

// Tokens a sliding (span = its window) or chunked (span = its chunk) layer of one sequence keeps under
// the engine's rule, KV allocated in blocks of `block` tokens (vllm: the block from_shape settles on).
constexpr std::uint64_t kept_tokens(const engine_rule& e, layer_kind kind, std::uint64_t span,
                                    std::uint64_t block) noexcept {
  using detail::ceil_div;
  using detail::sat_add;
  if (span == 0) return 0;
  if (block == 0) block = 1;
  const std::uint64_t seqs = e.seqs == 0 ? 1 : e.seqs;
  switch (e.engine) {
    case kv_engine::exact: return span;
    case kv_engine::vllm:
      return kind == layer_kind::chunked ? ceil_div(sat_add(span, e.max_batched_tokens), block) * block
                                         : (ceil_div(sat_add(span - 1, e.max_batched_tokens), block) + 1) * block;
    case kv_engine::llama_cpp:
      return ceil_div(ceil_div(sat_add(detail::sat_mul(span, seqs), e.ubatch_tokens), 256) * 256, seqs);
  }
  return span;
}

// --- shapes to costs ---------------------------------------------------------------------------------------

// vLLM's row for DeepSeek Sparse Attention's latent in fp8: FlashMLA's sparse backend turns an fp8 cache
// into fp8_ds_mla, a fixed 656 B a token and layer (vllm/v1/kv_cache_interface.py MLAAttentionSpec
// real_page_size_bytes: block_size * 656) for its 512 + 64 latent. vllm_fp8_ds_mla says whether a group
// in a format is stored so: an MLA latent of 576 values with side caches (the indexer's keys: only a
// sparse model has them) in fp8. Any other group, format or latent keeps its plain rows. (FlashInfer's
// sparse backend keeps 576 B; pnmem prices the higher, as an admission must not come out low.)
inline constexpr std::uint64_t vllm_fp8_ds_mla_row_bytes = 656;
inline constexpr std::uint32_t vllm_fp8_ds_mla_latent = 576;

constexpr bool vllm_fp8_ds_mla(const layer_group& g, kv_format f) noexcept {
  return f == kv_format::fp8 && g.k_only && g.side_bytes != 0 && g.kv_heads == 1 && g.key_dim == vllm_fp8_ds_mla_latent;
}

namespace detail {
// Bytes one token adds to the `g.layers` layers of group g in format f: its K and V rows in f, and its
// side caches in their own format.
constexpr std::uint64_t group_token_bytes(const layer_group& g, kv_format f) noexcept {
  const std::uint64_t k = std::uint64_t{g.kv_heads} * g.key_dim;
  const std::uint64_t v = g.k_only ? 0 : std::uint64_t{g.kv_heads} * (g.value_dim == 0 ? g.key_dim : g.value_dim);
  const std::uint64_t side = sat_mul(g.layers, g.side_bytes);
  // The seed's q4 is a ratio over all of a token's values; block formats never span a K and a V row.
  if (f == kv_format::q4) return sat_add(kv_row_bytes(sat_mul(g.layers, k + v), f), side);
  return sat_add(sat_mul(g.layers, sat_add(kv_row_bytes(k, f), v == 0 ? 0 : kv_row_bytes(v, f))), side);
}

// group_token_bytes under an engine's rule: vLLM's fp8_ds_mla rows where they apply.
constexpr std::uint64_t engine_token_bytes(const layer_group& g, kv_format f, kv_engine e) noexcept {
  if (e == kv_engine::vllm && vllm_fp8_ds_mla(g, f)) {
    return sat_mul(g.layers, sat_add(vllm_fp8_ds_mla_row_bytes, g.side_bytes));
  }
  return group_token_bytes(g, f);
}
}  // namespace detail

// What is wrong with a shape, or "".
constexpr std::string_view validate(const model_shape& s) noexcept {
  if (s.n_groups > max_layer_groups) return "more than 8 layer groups";
  for (kv_format f : {s.normal_kv, s.compact_kv, s.state_format, s.ssm_state_format}) {
    if (static_cast<std::size_t>(f) >= kv_format_count) return "a format is not a KV format";
  }
  for (std::size_t i = 0; i < s.n_groups; ++i) {
    const layer_group& g = s.groups[i];
    if (static_cast<std::size_t>(g.kind) > static_cast<std::size_t>(layer_kind::recurrent)) return "a group's kind is not a layer kind";
    if ((g.kind == layer_kind::sliding || g.kind == layer_kind::chunked || g.kind == layer_kind::cross) && g.span == 0) {
      return "a sliding, chunked or cross group with a span of 0";
    }
    if (g.kind == layer_kind::recurrent && g.side_bytes != 0) return "a recurrent group with side caches (they are per token)";
  }
  return {};
}

// The costs of a shape under an engine's rule. The activation is the seed's formula from hidden_size and
// query_heads, sampled at shape_anchor_tokens.
inline constexpr std::array<std::uint64_t, 6> shape_anchor_tokens{0, 1024, 4096, 16384, 65536, 262144};

namespace detail {
// One recurrent layer's state, conv and SSM in their formats.
constexpr std::uint64_t state_layer_bytes(const layer_group& g, kv_format conv, kv_format ssm) noexcept {
  return sat_add(kv_row_bytes(g.conv_state_values, conv), kv_row_bytes(g.ssm_state_values, ssm));
}
}  // namespace detail

// How the engine's rule lays out a shape's KV: the block each group is allocated in, a page padded
// past a group's own rows, and what one recurrent layer's state costs. from_shape prices with it, and
// `pnmem model --summary` shows it.
struct engine_layout {
  std::uint64_t block = 1;       // the rule's block (vllm: raised for MLA, and for state beside attention)
  std::uint64_t state_page = 0;  // vllm, state beside attention: bytes one recurrent layer's state is padded to
  bool hybrid = false;           // vllm: its hybrid manager holds the KV (kinds that keep different tokens)
  kv_format conv = kv_format::fp32;  // the formats the rule keeps recurrent state in
  kv_format ssm = kv_format::fp32;
  std::array<std::uint64_t, max_layer_groups> group_block{};  // the block each group is allocated in
  std::array<std::uint64_t, max_layer_groups> page_pad{};     // a page padded to the largest: its bytes
                                                              // a token in the normal format (0: none)
  // The block model_cost rounds every layer to: the largest any group gets.
  constexpr std::uint64_t largest_block() const noexcept {
    std::uint64_t b = block;
    for (std::uint64_t g : group_block) b = g > b ? g : b;
    return b;
  }
};

constexpr engine_layout layout_of(const model_shape& s, const engine_rule& e = exact_engine) noexcept {
  using detail::sat_mul;
  engine_layout out;
  const std::size_t groups = s.n_groups < max_layer_groups ? s.n_groups : max_layer_groups;
  const bool llama = e.engine == kv_engine::llama_cpp;
  const bool vllm = e.engine == kv_engine::vllm;
  out.conv = llama ? kv_format::fp32 : s.state_format;
  out.ssm = llama || (vllm && e.ssm_state_fp32) ? kv_format::fp32 : s.ssm_state_format;

  // The KV block, and what one recurrent layer's state costs (vLLM pads it to an attention page).
  std::uint64_t block = vllm ? (e.block_tokens == 0 ? 1 : e.block_tokens) : llama ? 256 : 1;
  std::uint64_t attn_1tok = 0;  // vllm: the widest attention layer's bytes per token, normal format
  if (vllm) {
    std::uint64_t state_raw = 0;  // the largest recurrent layer's state
    bool latent = false;
    bool attention = false;
    layer_kind kind = layer_kind::full;
    std::uint64_t span = 0;
    for (std::size_t gi = 0; gi < groups; ++gi) {
      layer_group one = s.groups[gi];
      if (one.layers == 0) continue;
      if (one.kind == layer_kind::recurrent) {
        const std::uint64_t b = detail::state_layer_bytes(one, out.conv, out.ssm);
        state_raw = b > state_raw ? b : state_raw;
      } else if (one.kind != layer_kind::cross) {
        one.layers = 1;
        const std::uint64_t b = detail::engine_token_bytes(one, s.normal_kv, e.engine);
        attn_1tok = b > attn_1tok ? b : attn_1tok;
        latent = latent || one.k_only;
        // Which of vLLM's managers holds the KV: one group for a model whose layers all keep the same
        // tokens (every attention layer full, or all of one window or chunk: UniformTypeKVCacheSpecs,
        // however their rows differ; with the hybrid manager off every layer holds the whole context),
        // else the hybrid manager (kinds of layer that keep different tokens, or state beside attention).
        const layer_kind held = e.hybrid_manager_off ? layer_kind::full : one.kind;
        const std::uint64_t kept = held == layer_kind::full ? 0 : one.span;
        out.hybrid = out.hybrid || (attention && (held != kind || kept != span));
        attention = true;
        kind = held;
        span = kept;
      }
    }
    out.hybrid = out.hybrid || (state_raw != 0 && attention);
    if (latent && block % 64 != 0) block = detail::ceil_div(block, 64) * 64;
    if (state_raw != 0 && attn_1tok != 0) {
      const std::uint64_t aligned = detail::ceil_div(state_raw, sat_mul(block, attn_1tok)) * block;
      block = aligned > block ? aligned : block;
      out.state_page = sat_mul(block, attn_1tok);
    }
  }
  out.block = block;
  for (std::size_t gi = 0; gi < groups; ++gi) out.group_block[gi] = block;
  // The hybrid manager allocates pages of one size: a kind whose page (block x its layer's bytes per
  // token) is smaller than the largest gets a larger block, the largest page over its own (Gemma 4's and
  // MiMo-V2-Flash's full layers, half their sliding layers' bytes, get blocks of 32 where those keep 16),
  // or where that is no whole number its page padded to the largest (vllm/v1/core/kv_cache_utils.py
  // unify_kv_cache_spec_page_size). model_cost rounds every layer to one block: the largest any kind
  // gets, so a kind with a smaller block is charged up to the difference more, never less; each kind's
  // window or chunk is counted in its own blocks.
  for (std::size_t gi = 0; out.hybrid && gi < groups; ++gi) {
    layer_group one = s.groups[gi];
    if (one.layers == 0 || one.kind == layer_kind::cross || one.kind == layer_kind::recurrent) continue;
    one.layers = 1;
    const std::uint64_t b = detail::engine_token_bytes(one, s.normal_kv, e.engine);
    if (b == 0 || b == attn_1tok) continue;
    if (attn_1tok % b == 0) {
      out.group_block[gi] = sat_mul(block, attn_1tok / b);
    } else {
      out.page_pad[gi] = attn_1tok;
    }
  }
  return out;
}

// What the engine cannot hold of a shape under its rule, or "": vLLM with its hybrid KV-cache manager
// off cannot hold recurrent layers beside attention (it refuses to start: its layers cannot be made one
// kind). from_shape prices such a pair as the manager on; the readers refuse it.
constexpr std::string_view rule_problem(const model_shape& s, const engine_rule& e) noexcept {
  if (e.engine != kv_engine::vllm || !e.hybrid_manager_off) return {};
  bool recurrent = false;
  bool attention = false;
  for (std::size_t gi = 0; gi < s.n_groups && gi < max_layer_groups; ++gi) {
    if (s.groups[gi].layers == 0 || s.groups[gi].kind == layer_kind::cross) continue;
    (s.groups[gi].kind == layer_kind::recurrent ? recurrent : attention) = true;
  }
  return recurrent && attention ? "vLLM does not run a model with recurrent layers beside attention with its hybrid "
                                  "KV-cache manager off (hybrid_manager_off)"
                                : std::string_view{};
}

constexpr model_cost from_shape(const model_shape& s, const engine_rule& e = exact_engine) noexcept {
  using detail::sat_add;
  using detail::sat_mul;
  model_cost m;
  const std::size_t groups = s.n_groups < max_layer_groups ? s.n_groups : max_layer_groups;
  const bool vllm = e.engine == kv_engine::vllm;
  const engine_layout layout = layout_of(s, e);
  const bool hybrid = layout.hybrid;
  const std::uint64_t state_page = layout.state_page;
  const std::uint64_t largest_block = layout.largest_block();
  m.kv_block_tokens =
      largest_block > 1 ? static_cast<std::uint32_t>(largest_block > 0xffffffffULL ? 0xffffffffULL : largest_block) : 0;

  // vLLM's hybrid KV-cache manager (layout.hybrid) splits each kind into groups of
  // group_size layers (the fewest layers of any kind, or the most when that is under 1.5x the fewest)
  // and pads a kind's last group with layers that hold nothing but are paid for: a kind of n layers
  // costs as ceil(n / group_size) x group_size (vllm/v1/core/kv_cache_utils.py). Kinds: groups of the
  // same kind, span and row shape, or recurrent groups of the same state.
  std::array<std::uint64_t, max_layer_groups> paid{};  // layers each group is charged for
  for (std::size_t gi = 0; gi < groups; ++gi) paid[gi] = s.groups[gi].layers;
  if (vllm) {
    std::array<std::size_t, max_layer_groups> kind_of{};  // the first group of the same kind
    std::array<std::uint64_t, max_layer_groups> count{};
    std::size_t kinds = 0;
    std::uint64_t fewest = 0;
    std::uint64_t most = 0;
    for (std::size_t gi = 0; gi < groups; ++gi) {
      const layer_group& g = s.groups[gi];
      kind_of[gi] = gi;
      if (g.kind == layer_kind::cross || g.layers == 0) continue;
      for (std::size_t hj = 0; hj < gi; ++hj) {
        layer_group a = s.groups[hj];
        a.layers = g.layers;
        if (a == g && s.groups[hj].kind != layer_kind::cross) {
          kind_of[gi] = kind_of[hj];
          break;
        }
      }
      if (kind_of[gi] == gi) ++kinds;
      count[kind_of[gi]] += g.layers;
    }
    for (std::size_t gi = 0; gi < groups; ++gi) {
      if (count[gi] == 0) continue;
      fewest = fewest == 0 || count[gi] < fewest ? count[gi] : fewest;
      most = count[gi] > most ? count[gi] : most;
    }
    if (hybrid && kinds > 1) {
      const std::uint64_t group_size = 2 * most < 3 * fewest ? most : fewest;
      for (std::size_t gi = 0; gi < groups; ++gi) {
        if (count[gi] == 0) continue;
        // The padding goes to the kind's first group (its layers are all alike).
        paid[gi] += detail::ceil_div(count[gi], group_size) * group_size - count[gi];
      }
    }
  }

  for (std::size_t gi = 0; gi < groups; ++gi) {
    layer_group g = s.groups[gi];
    g.layers = static_cast<std::uint32_t>(paid[gi] > 0xffffffffULL ? 0xffffffffULL : paid[gi]);
    if (g.kind == layer_kind::recurrent) {
      std::uint64_t per_layer = detail::state_layer_bytes(g, layout.conv, layout.ssm);
      if (per_layer < state_page) per_layer = state_page;
      const std::uint64_t copies = e.state_copies == 0 ? 1 : e.state_copies;
      m.state_bytes_per_seq = sat_add(m.state_bytes_per_seq, sat_mul(sat_mul(g.layers, per_layer), copies));
      continue;
    }
    std::array<std::uint64_t, kv_format_count> bytes{};
    for (kv_format f : all_kv_formats) {
      std::uint64_t b = detail::engine_token_bytes(g, f, e.engine);
      if (layout.page_pad[gi] != 0) {  // a page padded to the largest: its bytes scaled as the normal format's are
        layer_group one = g;
        one.layers = 1;
        b = detail::mul_div_ceil(b, layout.page_pad[gi], detail::engine_token_bytes(one, s.normal_kv, e.engine));
      }
      bytes[static_cast<std::size_t>(f)] = b;
    }
    if (g.kind == layer_kind::cross) {
      for (std::size_t i = 0; i < kv_format_count; ++i) {
        m.kv_bytes_per_encoder_item[i] = sat_add(m.kv_bytes_per_encoder_item[i], sat_mul(bytes[i], g.span));
      }
      continue;
    }
    const bool whole_context = g.kind == layer_kind::full || (vllm && e.hybrid_manager_off);
    add_kv_term(m, bytes, whole_context ? 0 : kept_tokens(e, g.kind, g.span, layout.group_block[gi]));
  }
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

// The seed's shape: Qwen3.5-MoE's 10 full-attention layers x 2 KV heads x 256 dims, hidden 2048, 16
// query heads; its KV caches are fp32, compacted to the seed's Q4. (Its 30 linear-attention layers'
// state is not in the seed's figures, and not here.)
inline constexpr model_shape seed_model_shape = [] {
  model_shape s = uniform_shape(10, 2, 256, 16, 2048);
  s.normal_kv = kv_format::fp32;
  s.compact_kv = kv_format::q4;
  s.state_format = kv_format::fp32;
  s.ssm_state_format = kv_format::fp32;
  return s;
}();

static_assert(from_shape(seed_model_shape) == seed_model_cost, "the seed's model is its shape's costs");

}  // namespace pnmem
