// adapters/model_files/gguf.cpp - a model's costs from a GGUF file's metadata (gguf.hpp).
//
// --- The format read (ggml's docs/gguf.md, versions 2 and 3; every number little-endian) -----------------
//
//   header:    "GGUF" (4 bytes), uint32 version, uint64 tensor_count, uint64 metadata_kv_count
//   each KV:   key: a string; uint32 value type; the value
//   string:    uint64 length, then that many bytes (UTF-8, no terminator)
//   types:     0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool (one byte, 0 or 1), 8 string,
//              9 array (uint32 element type, uint64 count, the elements; arrays of arrays allowed),
//              10 u64, 11 i64, 12 f64
//   then:      tensor infos, padding, tensor data: never read. The reader stops at the last KV's last byte
//              (gguf_summary::metadata_bytes).
//
// Version 1 (32-bit lengths and counts) is refused by name, as is any other version (a byte-swapped
// version, i.e. a big-endian file, says so). Limits (gguf.hpp): the metadata (header + KVs) at most
// 64 MiB, a string value 1 MiB, a key 65535 bytes (and not empty), 2^20 KVs, 2^24 tensors (a count only),
// 2^24 elements per array, arrays nested 8 deep; a bool other than 0/1, an unknown type and a key seen
// twice are errors. Every read is bounds-checked: input that ends inside the metadata is
//   truncated at byte N while reading <what> of key "k" (entry i of n), which starts at byte M
//
// --- The keys used (arch = general.architecture; all others are skipped) --------------------------------
//
// What llama.cpp allocates for one sequence, from the keys its converters write (convert_hf_to_gguf.py)
// and its loaders read (src/llama-model.cpp, src/models/*.cpp, src/llama-hparams.cpp; the citations are
// in docs/engine-rules-research.md). Each layer is one of: an attention layer with a KV cache, a
// recurrent layer with a fixed state, both (Falcon-H1), or neither (an MLP or MoE layer of a hybrid, a
// layer whose KV is shared with an earlier one). The shape has one group per distinct (kind, KV heads,
// K dims, V dims, span) and one per recurrent state, full groups first, then sliding, chunked,
// recurrent (in layer order within a kind); more than 8 distinct groups is an error.
//
//   general.architecture               required string
//   general.name                       optional string: the description's name (else the architecture)
//   <arch>.block_count                 required integer, 1 to 2^20: the layers, L
//   <arch>.embedding_length            required integer 1 to 2^24 (hidden size)
//   <arch>.context_length              optional integer: kept in gguf_summary, not a cost
//   <arch>.attention.head_count        required (except for mamba and mamba2, whose converters write 0): an
//                                      integer 1 to 2^20, or a per-layer array of L integers
//   <arch>.attention.head_count_kv     optional (absent: head_count, no GQA): an integer 1 to 2^20, or a
//                                      per-layer array of L integers. A layer with 0 KV heads keeps no KV
//                                      cache; each layer with KV is costed at its own count. In each layer
//                                      with KV the KV heads must divide the query heads.
//   <arch>.attention.key_length        optional integer 1 to 2^20 (absent: embedding_length / head_count,
//   <arch>.attention.value_length      which must divide, and head_count must not vary per layer)
//   <arch>.attention.key_length_swa,   optional: the K / V dims of the sliding (and chunked) layers
//   <arch>.attention.value_length_swa  (llama.cpp's n_embd_head_k_swa; absent: the dims above). Gemma 4:
//                                      full layers 512, sliding 256.
//   <arch>.attention.key_length_mla,   MLA (llama_hparams::is_mla: both set). The cache then keeps ONE row
//   <arch>.attention.value_length_mla  per token and layer, of key_length x head_count_kv values (the
//                                      converter writes key_length = kv_lora_rank + rope dims, 576 for
//                                      DeepSeek-V3, and head_count_kv = 1), and no V (has_v = !is_mla in
//                                      llama_kv_cache). key_length must then be given; one of the two keys
//                                      without the other is an error. Files without them (DeepSeek GGUFs
//                                      converted before llama.cpp cached the latent; attention.kv_lora_rank
//                                      alone does not make MLA) are costed as llama.cpp costs them: K and
//                                      V per head, key_length and value_length each.
//   <arch>.attention.sliding_window    optional integer 0 to 2^32-1 (absent or 0: no layer slides)
//   <arch>.attention.sliding_window_pattern   which layers slide, when there is a window:
//                                      an integer N: llama.cpp's set_swa_pattern(N): layer i slides when
//                                      i % N < N - 1 (every N-th layer full; N = 0: every layer slides);
//                                      or a per-layer array of L bools / integers, nonzero = slides.
//                                      Absent: llama.cpp's built-in period for gemma2 (2), gemma3 (6),
//                                      gemma3n (5), gpt-oss (2) and cohere2 (4); any other architecture
//                                      has no sliding layer (llama.cpp keeps a full cache in every layer).
//   Architectures whose window llama.cpp sets itself:
//     gemma2    the window defaults to 4096 when sliding_window is absent (llama.cpp's default)
//     gemma4    sliding_window and a per-layer sliding_window_pattern array are required
//     phi3      no layer slides whatever sliding_window says ("Phi SWA is currently disabled")
//     llama4    chunked attention: layer i keeps the current chunk of 8192 tokens when i % 4 < 3, every
//               token otherwise (set_swa_pattern(4); the chunk is hard-coded, there is no key for it);
//               a sliding_window of 0 turns chunking off (every layer full)
//   <arch>.attention.indexer.key_length   deepseek32 and glm-dsa (DeepSeek Sparse Attention): required; a
//                                      second K-only cache of that many values per cell (the lightning
//                                      indexer's keys, llama_kv_cache_dsa) in every layer with KV, or, for
//                                      glm-dsa, in the layers <arch>.attention.indexer.types flags (a per-layer
//                                      array; absent: every layer). Another architecture carrying it is an
//                                      error naming the key.
//   Layers with no KV of their own (llama.cpp's n_layer_kv_from_start):
//     gemma4    <arch>.attention.shared_kv_layers N (0 to L-1): layers L-N .. L-1 reuse earlier KV
//     gemma3n   layers 20 and on (hard-coded in llama.cpp, which does not read shared_kv_layers)
//     glm4moe, qwen35, qwen35moe   <arch>.nextn_predict_layers N (0 to L-1): the last N layers (the
//               MTP blocks) keep no KV and no state
//   Recurrent layers (llama.cpp's recurrent_layer_arr), by architecture:
//     mamba, mamba2            every layer; no attention
//     jamba, granitehybrid, plamo2   layer i is recurrent iff head_count_kv[i] == 0, else attention
//     nemotron_h, nemotron_h_moe     recurrent iff head_count_kv[i] == 0 and feed_forward_length[i] == 0;
//                              attention iff feed_forward_length[i] == 0 and not recurrent; the others
//                              (MLP, MoE) keep neither. <arch>.feed_forward_length (an integer or a
//                              per-layer array) is required.
//     falcon-h1                every layer holds both attention KV and a Mamba-2 state
//     qwen3next, qwen35, qwen35moe   <arch>.attention.recurrent_layers (a per-layer array, nonzero =
//                              recurrent) when present; else <arch>.full_attention_interval N (1 to 2^20,
//                              default 4): layer i is attention iff (i + 1) % N == 0
//   Their state per layer and sequence, llama.cpp's n_embd_r / n_embd_s:
//     conv values  (ssm.conv_kernel - 1) x (ssm.inner_size + 2 x ssm.group_count x ssm.state_size)
//     SSM values   ssm.state_size x ssm.inner_size
//   from <arch>.ssm.conv_kernel (1 to 2^16), .ssm.inner_size (1 to 2^24), .ssm.state_size (1 to 2^20),
//   .ssm.group_count (0 to 2^20; read for all but mamba and jamba, whose loaders do not: 0), each
//   required when a layer is recurrent. llama.cpp keeps the state in f32: the shape's state formats are
//   fp32. Any other architecture carrying <arch>.ssm.*, .attention.recurrent_layers,
//   .shortconv.l_cache, .wkv.head_size or .kda.head_dim (a recurrent state pnmem cannot place) is an
//   error naming the key.
//   Integers may be of any GGUF integer type (u8 to i64); a negative value, a float, a bool (except in a
//   per-layer flag array) or a string where an integer is expected is an error naming the key.
//
// The KV cache format is not in GGUF (llama.cpp's --cache-type-k/-v default to f16): normal_kv is f16,
// compact_kv q4_0. The costs are from_shape(shape, engine), the shape's activation defaults included.
// (With flash attention off and V widths differing per layer, Gemma 4's, llama.cpp pads every V row to
// the widest, n_embd_v_gqa_max; pnmem costs the rows unpadded, as with flash attention on.)
#include "pnmem/model_files/gguf.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "pnmem/cost_model.hpp"

namespace pnmem::model_files {

namespace {

enum gguf_type : std::uint32_t {
  t_u8 = 0, t_i8 = 1, t_u16 = 2, t_i16 = 3, t_u32 = 4, t_i32 = 5, t_f32 = 6, t_bool = 7,
  t_string = 8, t_array = 9, t_u64 = 10, t_i64 = 11, t_f64 = 12,
};
constexpr std::uint32_t type_count = 13;

constexpr const char* type_name(std::uint32_t t) noexcept {
  constexpr const char* names[type_count] = {"u8",  "i8",  "u16",  "i16",    "u32",   "i32", "f32",
                                             "bool", "string", "array", "u64", "i64", "f64"};
  return t < type_count ? names[t] : "unknown";
}

// Bytes of a fixed-size value; 0 for strings and arrays.
constexpr std::size_t fixed_size(std::uint32_t t) noexcept {
  switch (t) {
    case t_u8: case t_i8: case t_bool: return 1;
    case t_u16: case t_i16: return 2;
    case t_u32: case t_i32: case t_f32: return 4;
    case t_u64: case t_i64: case t_f64: return 8;
    default: return 0;
  }
}

constexpr bool is_integer_type(std::uint32_t t) noexcept {
  return t == t_u8 || t == t_i8 || t == t_u16 || t == t_i16 || t == t_u32 || t == t_i32 || t == t_u64 ||
         t == t_i64;
}

constexpr bool is_signed_type(std::uint32_t t) noexcept {
  return t == t_i8 || t == t_i16 || t == t_i32 || t == t_i64;
}

struct gguf_failure {
  std::string what;
};

[[noreturn]] void fail(std::string what) { throw gguf_failure{std::move(what)}; }

std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f || c == '"' || c == '\\') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// The in-memory bytes of read_gguf.
class memory_source {
 public:
  explicit memory_source(std::string_view b) : bytes_(b) {}
  std::size_t read(void* dst, std::size_t n) {
    const std::size_t k = std::min(n, bytes_.size() - at_);
    if (k != 0) std::memcpy(dst, bytes_.data() + at_, k);
    at_ += k;
    return k;
  }
  std::uint64_t skip(std::uint64_t n) {
    const std::uint64_t k = std::min<std::uint64_t>(n, bytes_.size() - at_);
    at_ += static_cast<std::size_t>(k);
    return k;
  }
  std::string io_error() const { return {}; }

 private:
  std::string_view bytes_;
  std::size_t at_ = 0;
};

// A file, read front to back through stdio (never seeks, never reads the whole file).
class file_source {
 public:
  explicit file_source(std::FILE* f) : f_(f) {}
  std::size_t read(void* dst, std::size_t n) { return std::fread(dst, 1, n, f_); }
  std::uint64_t skip(std::uint64_t n) {
    char buf[16384];
    std::uint64_t done = 0;
    while (done < n) {
      const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(n - done, sizeof buf));
      const std::size_t got = std::fread(buf, 1, want, f_);
      done += got;
      if (got < want) break;
    }
    return done;
  }
  std::string io_error() const { return std::ferror(f_) != 0 ? std::strerror(errno) : std::string(); }

 private:
  std::FILE* f_;
};

// The value of a key the reader uses: its integers (one for a scalar, one per element for an array of
// integers or bools) or its string.
struct kept_value {
  std::uint32_t type = 0;       // the GGUF type (t_array for an array)
  std::uint32_t elem_type = 0;  // an array's element type
  std::vector<std::uint64_t> ints;
  bool negative = false;        // some integer was below 0 (kept as 0 in `ints`)
  std::string text;
};

// The keys kept: general.architecture, general.name, and <anything>.<suffix> for these suffixes.
constexpr std::string_view kept_suffixes[] = {
    "block_count",          "attention.head_count",     "attention.head_count_kv",
    "attention.key_length", "attention.value_length",   "attention.key_length_swa",
    "attention.value_length_swa", "embedding_length",   "context_length",
    "attention.sliding_window",   "attention.sliding_window_pattern",
    "attention.key_length_mla",   "attention.value_length_mla", "attention.shared_kv_layers",
    "attention.recurrent_layers", "full_attention_interval",    "nextn_predict_layers",
    "feed_forward_length",        "ssm.conv_kernel",            "ssm.inner_size",
    "ssm.state_size",             "ssm.group_count",            "ssm.time_step_rank",
    "shortconv.l_cache",          "wkv.head_size",              "kda.head_dim",
    "attention.indexer.key_length", "attention.indexer.types",
};

// Keys that say a layer holds a recurrent state: an architecture pnmem does not know to have one and
// carrying one of these is refused (its state would be missing from the costs).
constexpr std::string_view recurrent_markers[] = {
    "ssm.conv_kernel", "ssm.inner_size",    "ssm.state_size", "ssm.group_count", "ssm.time_step_rank",
    "attention.recurrent_layers", "shortconv.l_cache", "wkv.head_size", "kda.head_dim",
};

// How llama.cpp tells an architecture's recurrent layers from its attention layers (the
// recurrent_layer_arr each loader fills, and the memory filters of llama_model::create_memory).
enum class layer_rule : std::uint8_t {
  attention,    // no recurrent layer: every architecture not listed in arch_rules
  all_mamba,    // mamba, mamba2: every layer recurrent, no attention
  kv_zero,      // recurrent iff head_count_kv[i] == 0, else attention (jamba, granitehybrid, plamo2)
  nemotron_h,   // recurrent iff head_count_kv[i] == 0 and feed_forward_length[i] == 0; attention iff
                // feed_forward_length[i] == 0 and not recurrent; MLP / MoE layers neither
  parallel,     // every layer both (falcon-h1)
  gated_delta,  // attention.recurrent_layers, else full_attention_interval (qwen3next, qwen35, qwen35moe)
};

struct arch_rule {
  std::string_view arch;
  layer_rule rule;
  bool ssm_groups;  // the loader reads ssm.group_count (mamba and jamba do not: 0 groups)
};

constexpr arch_rule arch_rules[] = {
    {"mamba", layer_rule::all_mamba, false},          {"mamba2", layer_rule::all_mamba, true},
    {"jamba", layer_rule::kv_zero, false},            {"granitehybrid", layer_rule::kv_zero, true},
    {"plamo2", layer_rule::kv_zero, true},            {"nemotron_h", layer_rule::nemotron_h, true},
    {"nemotron_h_moe", layer_rule::nemotron_h, true}, {"falcon-h1", layer_rule::parallel, true},
    {"qwen3next", layer_rule::gated_delta, true},     {"qwen35", layer_rule::gated_delta, true},
    {"qwen35moe", layer_rule::gated_delta, true},
};

bool kept_key(std::string_view key) {
  if (key == "general.architecture" || key == "general.name") return true;
  const std::size_t dot = key.find('.');
  if (dot == std::string_view::npos) return false;
  const std::string_view suffix = key.substr(dot + 1);
  for (const std::string_view s : kept_suffixes) {
    if (suffix == s) return true;
  }
  return false;
}

// A per-layer array longer than this cannot match block_count (at most 2^20): refused before storing it.
constexpr std::uint64_t max_kept_array = std::uint64_t{1} << 20;

template <class Source>
class parser {
 public:
  parser(Source& src, const engine_rule& engine) : src_(src), engine_(engine) {}

  gguf_model run() {
    gguf_model out;
    gguf_summary& sum = out.summary;
    context_ = "the header";
    char magic[4];
    need(magic, 4, "the magic");
    if (std::memcmp(magic, "GGUF", 4) != 0) {
      fail("not a GGUF file: the magic (the first 4 bytes) is " + quoted(std::string_view(magic, 4)) +
           ", expected \"GGUF\"");
    }
    sum.version = static_cast<std::uint32_t>(number(4, "the version"));
    if (sum.version == 1) {
      fail("version: 1 (GGUF v1, with 32-bit lengths and counts) is not read by pnmem (it reads versions 2 and 3)");
    }
    if (sum.version != 2 && sum.version != 3) {
      const bool swapped = (sum.version & 0xffffu) == 0 && (sum.version >> 24) >= 1 && (sum.version >> 24) <= 3;
      fail("version: " + std::to_string(sum.version) + " is not a GGUF version pnmem reads (2 or 3)" +
           (swapped ? "; it looks byte-swapped: a big-endian GGUF file, which pnmem does not read" : ""));
    }
    sum.tensor_count = number(8, "tensor_count");
    if (sum.tensor_count > gguf_max_tensor_count) {
      fail("tensor_count: " + std::to_string(sum.tensor_count) + " is more than " +
           std::to_string(gguf_max_tensor_count) + " tensors (not a model file, or a corrupt header)");
    }
    sum.metadata_kv_count = number(8, "metadata_kv_count");
    if (sum.metadata_kv_count > gguf_max_kv_count) {
      fail("metadata_kv_count: " + std::to_string(sum.metadata_kv_count) + " is more than " +
           std::to_string(gguf_max_kv_count) + " key/values (a corrupt header?)");
    }
    for (std::uint64_t i = 0; i < sum.metadata_kv_count; ++i) read_kv(i, sum.metadata_kv_count);
    sum.metadata_bytes = pos_;
    context_.clear();
    interpret(out);
    return out;
  }

 private:
  Source& src_;
  engine_rule engine_;
  std::uint64_t pos_ = 0;
  std::uint64_t item_start_ = 0;  // where the key/value being read starts
  std::string context_;           // what is being read: "the header", "key \"k\" (entry 3 of 12)"
  std::unordered_map<std::string, std::uint64_t> seen_;  // every key -> its entry number
  std::unordered_map<std::string, kept_value> kept_;

  std::string where() const {
    return context_ + (context_ == "the header" ? "" : ", which starts at byte " + std::to_string(item_start_));
  }

  void check_room(std::uint64_t n, const char* what) const {
    if (n > gguf_max_metadata_bytes || pos_ > gguf_max_metadata_bytes - n) {
      fail("the metadata is larger than " + std::to_string(gguf_max_metadata_bytes >> 20) + " MiB (at byte " +
           std::to_string(pos_) + ", " + what + " of " + where() + ")");
    }
  }

  [[noreturn]] void cut_short(std::uint64_t got, const char* what) const {
    const std::string io = src_.io_error();
    if (!io.empty()) fail("read error at byte " + std::to_string(pos_ + got) + " (" + what + " of " + where() + "): " + io);
    fail("truncated at byte " + std::to_string(pos_ + got) + " while reading " + what + " of " + where());
  }

  void need(void* dst, std::size_t n, const char* what) {
    check_room(n, what);
    const std::size_t got = src_.read(dst, n);
    if (got < n) cut_short(got, what);
    pos_ += n;
  }

  void skip(std::uint64_t n, const char* what) {
    check_room(n, what);
    const std::uint64_t got = src_.skip(n);
    if (got < n) cut_short(got, what);
    pos_ += n;
  }

  // A little-endian unsigned number of `size` bytes (1, 2, 4 or 8).
  std::uint64_t number(std::size_t size, const char* what) {
    unsigned char b[8];
    need(b, size, what);
    std::uint64_t v = 0;
    for (std::size_t i = size; i-- > 0;) v = (v << 8) | b[i];
    return v;
  }

  std::string key_string(std::uint64_t entry, std::uint64_t count) {
    const std::uint64_t len = number(8, "the key's length");
    const std::string which = "key length " + std::to_string(len) + " of entry " + std::to_string(entry + 1) + " of " +
                              std::to_string(count) + " (at byte " + std::to_string(item_start_) + ")";
    if (len == 0) fail(which + ": a key cannot be empty");
    if (len > gguf_max_key_bytes) fail(which + ": longer than " + std::to_string(gguf_max_key_bytes) + " bytes");
    std::string key(static_cast<std::size_t>(len), '\0');
    need(key.data(), key.size(), "the key");
    return key;
  }

  void read_kv(std::uint64_t i, std::uint64_t count) {
    item_start_ = pos_;
    const std::string entry = "entry " + std::to_string(i + 1) + " of " + std::to_string(count);
    context_ = entry;
    std::string key = key_string(i, count);
    context_ = "key " + quoted(key) + " (" + entry + ")";
    const auto [it, fresh] = seen_.emplace(key, i + 1);
    if (!fresh) {
      fail(quoted(key) + ": the key appears twice (entries " + std::to_string(it->second) + " and " +
           std::to_string(i + 1) + ")");
    }
    const auto type = static_cast<std::uint32_t>(number(4, "the value type"));
    kept_value* keep = nullptr;
    if (kept_key(key)) keep = &kept_[key];
    read_value(type, 0, keep, key);
  }

  void check_type(std::uint32_t t, const std::string& key) const {
    if (t >= type_count) {
      fail(quoted(key) + ": value type " + std::to_string(t) + " is not a GGUF type (0 to 12), at byte " +
           std::to_string(pos_ - 4));
    }
  }

  // One value of type t; its integers (or string) go to `keep` when set.
  void read_value(std::uint32_t t, int depth, kept_value* keep, const std::string& key) {
    check_type(t, key);
    if (keep != nullptr && depth == 0) keep->type = t;
    if (t == t_string) {
      const std::uint64_t len = number(8, "a string's length");
      if (len > gguf_max_string_bytes) {
        fail(quoted(key) + ": a string of " + std::to_string(len) + " bytes at byte " + std::to_string(pos_ - 8) +
             " (more than " + std::to_string(gguf_max_string_bytes) + ")");
      }
      if (keep != nullptr && depth == 0) {
        keep->text.assign(static_cast<std::size_t>(len), '\0');
        need(keep->text.data(), keep->text.size(), "a string");
      } else {
        skip(len, "a string");
      }
      return;
    }
    if (t == t_array) {
      if (depth >= gguf_max_array_depth) {
        fail(quoted(key) + ": arrays nested more than " + std::to_string(gguf_max_array_depth) + " deep");
      }
      const auto elem = static_cast<std::uint32_t>(number(4, "an array's element type"));
      check_type(elem, key);
      const std::uint64_t n = number(8, "an array's count");
      if (n > gguf_max_array_count) {
        fail(quoted(key) + ": an array of " + std::to_string(n) + " elements at byte " + std::to_string(pos_ - 8) +
             " (more than " + std::to_string(gguf_max_array_count) + ")");
      }
      kept_value* into = nullptr;
      if (keep != nullptr && depth == 0) {
        keep->elem_type = elem;
        if (is_integer_type(elem) || elem == t_bool) {
          if (n > max_kept_array) {
            fail(quoted(key) + ": " + std::to_string(n) + " per-layer entries (more than " +
                 std::to_string(max_kept_array) + " layers)");
          }
          keep->ints.reserve(static_cast<std::size_t>(n));
          into = keep;
        }
      }
      const std::size_t size = fixed_size(elem);
      if (into == nullptr && size != 0 && elem != t_bool) {
        skip(n * size, "an array's elements");
        return;
      }
      for (std::uint64_t k = 0; k < n; ++k) read_element(elem, depth + 1, into, key);
      return;
    }
    read_element(t, depth, keep != nullptr && depth == 0 ? keep : nullptr, key);
  }

  // A fixed-size value (or, inside an array, any value); its integer is appended to `into` when set.
  void read_element(std::uint32_t t, int depth, kept_value* into, const std::string& key) {
    const std::size_t size = fixed_size(t);
    if (size == 0) {
      read_value(t, depth, nullptr, key);
      return;
    }
    const std::uint64_t raw = number(size, t == t_bool ? "a bool" : "a number");
    if (t == t_bool && raw > 1) {
      fail(quoted(key) + ": a bool of value " + std::to_string(raw) + " at byte " + std::to_string(pos_ - 1) +
           " (a GGUF bool is 0 or 1)");
    }
    if (into == nullptr || t == t_f32 || t == t_f64) return;
    std::uint64_t v = raw;
    if (is_signed_type(t)) {
      const unsigned bits = static_cast<unsigned>(size * 8);
      const bool neg = (raw >> (bits - 1)) & 1u;
      if (neg) {
        into->negative = true;
        v = 0;
      }
    }
    into->ints.push_back(v);
  }

  // --- from the kept keys to a shape ---------------------------------------------------------------

  const kept_value* find(const std::string& key) const {
    const auto it = kept_.find(key);
    return it == kept_.end() ? nullptr : &it->second;
  }

  static std::string type_text(const kept_value& v) {
    if (v.type == t_array) return std::string("an array of ") + type_name(v.elem_type);
    return type_name(v.type);
  }

  static void check_range(const std::string& key, std::uint64_t x, std::uint64_t lo, std::uint64_t hi,
                          const std::string& at = {}) {
    if (x < lo || x > hi) {
      fail(key + ": " + std::to_string(x) + at + " is out of range (" + std::to_string(lo) + " to " +
           std::to_string(hi) + ")");
    }
  }

  std::optional<std::uint64_t> scalar(const std::string& key, std::uint64_t lo, std::uint64_t hi, bool required) const {
    const kept_value* v = find(key);
    if (v == nullptr) {
      if (required) fail(key + ": missing");
      return std::nullopt;
    }
    if (!is_integer_type(v->type)) fail(key + ": expected an integer, got " + type_text(*v));
    if (v->negative) fail(key + ": negative");
    check_range(key, v->ints.at(0), lo, hi);
    return v->ints[0];
  }

  struct per_layer_values {
    std::vector<std::uint64_t> values;  // one per layer
    bool is_array = false;
  };

  // An integer (every layer the same) or an array of exactly `layers` integers (bools too if allowed).
  std::optional<per_layer_values> per_layer(const std::string& key, std::uint64_t layers, std::uint64_t lo,
                                            std::uint64_t hi, bool bools) const {
    const kept_value* v = find(key);
    if (v == nullptr) return std::nullopt;
    per_layer_values out;
    const auto layers_n = static_cast<std::size_t>(layers);
    if (v->type == t_array) {
      if (!is_integer_type(v->elem_type) && !(bools && v->elem_type == t_bool)) {
        fail(key + ": expected integers, got " + type_text(*v));
      }
      if (v->ints.size() != layers_n) {
        fail(key + ": " + std::to_string(v->ints.size()) + " entries for " + std::to_string(layers) +
             " layers (block_count)");
      }
      if (v->negative) fail(key + ": a negative entry");
      for (std::size_t i = 0; i < layers_n; ++i) check_range(key, v->ints[i], lo, hi, " (layer " + std::to_string(i) + ")");
      out.values = v->ints;
      out.is_array = true;
      return out;
    }
    if (!is_integer_type(v->type) && !(bools && v->type == t_bool)) fail(key + ": expected an integer, got " + type_text(*v));
    if (v->negative) fail(key + ": negative");
    check_range(key, v->ints.at(0), lo, hi);
    out.values.assign(layers_n, v->ints[0]);
    return out;
  }

  std::string string_key(const std::string& key, bool required) const {
    const kept_value* v = find(key);
    if (v == nullptr) {
      if (required) fail(key + ": missing");
      return {};
    }
    if (v->type != t_string) fail(key + ": expected a string, got " + type_text(*v));
    return v->text;
  }

  // key_length / value_length: given, or embedding_length / head_count.
  std::uint64_t head_dim(const std::string& key, std::uint64_t embd, const per_layer_values& q,
                         const std::vector<bool>& kv_layer, const std::string& head_key) const {
    if (const auto d = scalar(key, 1, std::uint64_t{1} << 20, false)) return *d;
    std::uint64_t heads = 0;
    for (std::size_t i = 0; i < q.values.size(); ++i) {
      if (!kv_layer[i]) continue;
      if (heads != 0 && q.values[i] != heads) {
        fail(key + ": missing, and " + head_key + " varies per layer (cannot derive it from embedding_length)");
      }
      heads = q.values[i];
    }
    if (heads == 0 || embd % heads != 0) {
      fail(key + ": missing, and embedding_length (" + std::to_string(embd) + ") is not a multiple of " + head_key +
           " (" + std::to_string(heads) + ")");
    }
    return embd / heads;
  }

  static const arch_rule* rule_of(const std::string& arch) {
    for (const arch_rule& r : arch_rules) {
      if (arch == r.arch) return &r;
    }
    return nullptr;
  }

  // An architecture with no recurrent layer (as far as pnmem knows) must not carry a recurrent state.
  void refuse_recurrent_markers(const std::string& p, const std::string& arch) const {
    for (const std::string_view m : recurrent_markers) {
      const std::string key = p + std::string(m);
      if (find(key) != nullptr) {
        fail(key + ": present, but pnmem does not know which layers of a " + quoted(arch) +
             " model hold a recurrent state, or what it holds (it reads mamba, mamba2, jamba, granitehybrid, "
             "plamo2, nemotron_h, nemotron_h_moe, falcon-h1, qwen3next, qwen35 and qwen35moe)");
      }
    }
  }

  // The first layer of those flagged, for messages.
  static std::size_t first_of(const std::vector<bool>& flags) {
    std::size_t i = 0;
    while (i < flags.size() && !flags[i]) ++i;
    return i;
  }

  // A key a recurrent layer's state is sized from: required once a layer is recurrent.
  std::uint64_t state_key(const std::string& key, std::uint64_t lo, std::uint64_t hi, const std::string& why) const {
    if (find(key) == nullptr) fail(key + ": missing (" + why + ")");
    return *scalar(key, lo, hi, true);
  }

  // Which layers are sliding (or chunked), their kind and span; span 0: none.
  struct local_layers {
    std::vector<bool> flags;  // per layer
    layer_kind kind = layer_kind::sliding;
    std::uint64_t span = 0;
  };

  local_layers which_local(const std::string& arch, const std::string& p, std::uint64_t layers) const {
    constexpr std::uint64_t max_count = std::uint64_t{1} << 20;
    local_layers out;
    out.flags.assign(static_cast<std::size_t>(layers), false);
    const std::string window_key = p + "attention.sliding_window";
    const std::string pattern_key = p + "attention.sliding_window_pattern";
    const std::optional<std::uint64_t> given = scalar(window_key, 0, 0xffffffffULL, arch == "gemma4");

    if (arch == "llama4") {  // llama.cpp: chunked, n_swa = 8192, set_swa_pattern(4), unless the window is 0
      if (given && *given == 0) return out;
      out.kind = layer_kind::chunked;
      out.span = 8192;
      for (std::size_t i = 0; i < out.flags.size(); ++i) out.flags[i] = i % 4 < 3;
      return out;
    }
    if (arch == "phi3") return out;  // llama.cpp: "Phi SWA is currently disabled"

    const std::uint64_t window = given.value_or(arch == "gemma2" ? 4096 : 0);
    if (window == 0) return out;
    out.span = window;
    const kept_value* pat = find(pattern_key);
    if (arch == "gemma4" && (pat == nullptr || pat->type != t_array)) {
      fail(pattern_key + (pat == nullptr ? ": missing" : ": expected a per-layer array, got " + type_text(*pat)) +
           " (gemma4 says which layers slide with a per-layer array)");
    }
    std::uint64_t period = 0;
    bool have_period = false;
    if (pat != nullptr && pat->type == t_array) {
      const auto flags = per_layer(pattern_key, layers, 0, detail::u64_max, true);
      for (std::size_t i = 0; i < out.flags.size(); ++i) out.flags[i] = flags->values[i] != 0;
    } else if (pat != nullptr) {
      period = *scalar(pattern_key, 0, max_count, true);
      have_period = true;
    } else {
      constexpr struct {
        std::string_view arch;
        std::uint64_t period;
      } builtin[] = {{"gemma2", 2}, {"gemma3", 6}, {"gemma3n", 5}, {"gpt-oss", 2}, {"cohere2", 4}};
      for (const auto& b : builtin) {
        if (arch == b.arch) {
          period = b.period;
          have_period = true;
        }
      }
    }
    if (have_period) {
      for (std::size_t i = 0; i < out.flags.size(); ++i) out.flags[i] = period == 0 || i % period < period - 1;
    }
    return out;
  }

  // Layers from this one on keep no KV of their own (llama.cpp's n_layer_kv_from_start), and, for the
  // MTP blocks of nextn_predict_layers, no state either.
  std::uint64_t kv_layers_from_start(const std::string& arch, const std::string& p, std::uint64_t layers) const {
    if (arch == "gemma4") {
      return layers - scalar(p + "attention.shared_kv_layers", 0, layers - 1, false).value_or(0);
    }
    if (arch == "gemma3n") return std::min<std::uint64_t>(layers, 20);
    if (arch == "glm4moe" || arch == "qwen35" || arch == "qwen35moe") {
      return layers - scalar(p + "nextn_predict_layers", 0, layers - 1, false).value_or(0);
    }
    return layers;
  }

  void interpret(gguf_model& out) {
    const std::string arch = string_key("general.architecture", true);
    if (arch.empty()) fail("general.architecture: empty");
    if (engine_.mtp) {
      fail("the engine rule's mtp: pnmem reads a model's MTP layers from its config.json (--from-hf-config), not "
           "from a GGUF file");
    }
    out.summary.architecture = arch;
    const std::string p = arch + ".";
    constexpr std::uint64_t max_count = std::uint64_t{1} << 20;

    const std::uint64_t layers = *scalar(p + "block_count", 1, max_count, true);
    const auto n = static_cast<std::size_t>(layers);
    const arch_rule* known = rule_of(arch);
    const layer_rule rule = known != nullptr ? known->rule : layer_rule::attention;
    if (rule == layer_rule::attention) refuse_recurrent_markers(p, arch);
    const std::string q_key = p + "attention.head_count";
    const std::string kv_key = p + "attention.head_count_kv";

    // Query and KV heads per layer (a pure Mamba model has no attention: its converter writes 0 heads).
    per_layer_values q;
    per_layer_values kv;
    if (rule == layer_rule::all_mamba) {
      q = per_layer(q_key, layers, 0, max_count, false).value_or(per_layer_values{std::vector<std::uint64_t>(n, 0), false});
      kv.values.assign(n, 0);
    } else {
      const auto given_q = per_layer(q_key, layers, 0, max_count, false);
      if (!given_q) fail(q_key + ": missing");
      q = *given_q;
      if (!q.is_array && q.values[0] == 0) fail(q_key + ": 0 (a model has at least one attention head)");
      kv = per_layer(kv_key, layers, 0, max_count, false).value_or(q);
      // Where 0 KV heads does not mark the recurrent layers, a single 0 leaves no layer with KV.
      const bool zero_kv_marks_recurrent = rule == layer_rule::kv_zero || rule == layer_rule::nemotron_h;
      if (!zero_kv_marks_recurrent && !kv.is_array && kv.values[0] == 0) fail(kv_key + ": 0 (no layer would keep a KV cache)");
    }

    // Which layers attend and which hold a recurrent state.
    std::vector<bool> attends(n, false);
    std::vector<bool> recurrent(n, false);
    const std::uint64_t kv_from = kv_layers_from_start(arch, p, layers);
    switch (rule) {
      case layer_rule::attention: attends.assign(n, true); break;
      case layer_rule::all_mamba: recurrent.assign(n, true); break;
      case layer_rule::kv_zero:
        for (std::size_t i = 0; i < n; ++i) {
          recurrent[i] = kv.values[i] == 0;
          attends[i] = !recurrent[i];
        }
        break;
      case layer_rule::nemotron_h: {
        const std::string ff_key = p + "feed_forward_length";
        const auto ff = per_layer(ff_key, layers, 0, detail::u64_max, false);
        if (!ff) fail(ff_key + ": missing (" + arch + " tells its Mamba layers from its MLP and MoE layers by it)");
        for (std::size_t i = 0; i < n; ++i) {
          recurrent[i] = kv.values[i] == 0 && ff->values[i] == 0;
          attends[i] = ff->values[i] == 0 && !recurrent[i];
        }
        break;
      }
      case layer_rule::parallel:
        attends.assign(n, true);
        recurrent.assign(n, true);
        break;
      case layer_rule::gated_delta: {
        const std::string flags_key = p + "attention.recurrent_layers";
        if (const auto flags = per_layer(flags_key, layers, 0, detail::u64_max, true); flags && flags->is_array) {
          for (std::size_t i = 0; i < n; ++i) recurrent[i] = flags->values[i] != 0;
        } else if (flags) {
          fail(flags_key + ": expected a per-layer array, got " + type_text(*find(flags_key)));
        } else {
          const std::uint64_t interval = scalar(p + "full_attention_interval", 1, max_count, false).value_or(4);
          for (std::size_t i = 0; i < n; ++i) recurrent[i] = i < kv_from && (i + 1) % interval != 0;
        }
        for (std::size_t i = 0; i < n; ++i) attends[i] = !recurrent[i];
        break;
      }
    }

    // The layers that keep a KV cache of their own.
    std::vector<bool> kv_layer(n, false);
    std::uint64_t n_kv_layers = 0;
    std::uint64_t q_max = 0;
    for (std::size_t i = 0; i < n; ++i) {
      q_max = std::max(q_max, q.values[i]);
      if (!attends[i] || kv.values[i] == 0 || i >= kv_from) continue;
      if (q.values[i] == 0) {
        fail(q_key + ": 0 query heads in layer " + std::to_string(i) + ", which has " + std::to_string(kv.values[i]) +
             " KV heads");
      }
      if (q.values[i] % kv.values[i] != 0) {
        fail(kv_key + ": " + std::to_string(kv.values[i]) + " KV heads in layer " + std::to_string(i) +
             " do not divide its " + std::to_string(q.values[i]) + " query heads (" + q_key + ")");
      }
      kv_layer[i] = true;
      ++n_kv_layers;
    }
    const std::size_t first_recurrent = first_of(recurrent);
    if (n_kv_layers == 0 && first_recurrent == n) {
      if (rule == layer_rule::attention) fail(kv_key + ": every layer has 0 KV heads (no layer keeps a KV cache)");
      fail(p + "block_count: no layer of this " + arch + " model keeps a KV cache or a recurrent state");
    }

    const std::uint64_t embd = *scalar(p + "embedding_length", 1, std::uint64_t{1} << 24, true);
    out.summary.context_length = scalar(p + "context_length", 0, detail::u64_max, false).value_or(0);

    model_shape s;
    std::vector<layer_group> found;  // distinct groups, in layer order (at most max_layer_groups)
    auto add = [&found, &p](layer_group g) {
      for (layer_group& f : found) {
        layer_group same = g;
        same.layers = f.layers;
        if (same == f) {
          ++f.layers;
          return;
        }
      }
      if (found.size() == max_layer_groups) {
        fail(p + "block_count: more than " + std::to_string(max_layer_groups) + " distinct kinds of layer (kind, KV "
             "heads, K and V dims, window, state); pnmem holds at most " + std::to_string(max_layer_groups));
      }
      g.layers = 1;
      found.push_back(g);
    };

    if (n_kv_layers > 0) {
      // MLA: one latent row of key_length values per token and layer, no V.
      const std::string k_key = p + "attention.key_length";
      const std::string kmla_key = p + "attention.key_length_mla";
      const std::string vmla_key = p + "attention.value_length_mla";
      const bool kmla = scalar(kmla_key, 1, max_count, false).has_value();
      const bool vmla = scalar(vmla_key, 1, max_count, false).has_value();
      if (kmla != vmla) {
        fail((kmla ? vmla_key : kmla_key) + ": missing, but " + (kmla ? kmla_key : vmla_key) +
             " is set (llama.cpp caches the MLA latent only with both)");
      }
      const bool mla = kmla && vmla;
      if (mla && find(k_key) == nullptr) {
        fail(k_key + ": missing (an MLA model, " + kmla_key + " is set: the cached latent's width, kv_lora_rank + "
             "rope dims, is key_length and cannot be derived)");
      }
      const std::uint64_t key_dim = head_dim(k_key, embd, q, kv_layer, q_key);
      const std::uint64_t value_dim = mla ? 0 : head_dim(p + "attention.value_length", embd, q, kv_layer, q_key);

      const local_layers local = which_local(arch, p, layers);
      std::uint64_t key_dim_local = key_dim;
      std::uint64_t value_dim_local = value_dim;
      bool any_local = false;
      for (std::size_t i = 0; i < n; ++i) any_local = any_local || (kv_layer[i] && local.span != 0 && local.flags[i]);
      if (any_local) {
        key_dim_local = scalar(p + "attention.key_length_swa", 1, max_count, false).value_or(key_dim);
        if (!mla) value_dim_local = scalar(p + "attention.value_length_swa", 1, max_count, false).value_or(value_dim);
      }
      for (std::size_t i = 0; i < n; ++i) {
        if (!kv_layer[i]) continue;
        const bool is_local = local.span != 0 && local.flags[i];
        layer_group g = attention_layers(is_local ? local.kind : layer_kind::full, 1,
                                         static_cast<std::uint32_t>(kv.values[i]),
                                         static_cast<std::uint32_t>(is_local ? key_dim_local : key_dim),
                                         static_cast<std::uint32_t>(is_local ? value_dim_local : value_dim),
                                         is_local ? static_cast<std::uint32_t>(local.span) : 0);
        g.k_only = mla;
        add(g);
      }

      // DeepSeek Sparse Attention (deepseek32, glm-dsa): llama.cpp keeps the lightning indexer's keys in a
      // second K-only cache (llama_kv_cache_dsa): attention.indexer.key_length values of the KV's type per
      // cell, in every layer with KV, or (glm-dsa) in those attention.indexer.types flags (absent: every
      // layer, as GLM-5 and 5.1 files have none).
      const std::string index_key = p + "attention.indexer.key_length";
      const bool dsa = arch == "deepseek32" || arch == "glm-dsa";
      if (!dsa && find(index_key) != nullptr) {
        fail(index_key + ": present, but pnmem does not know where a " + quoted(arch) +
             " model keeps a lightning indexer's keys (it reads deepseek32 and glm-dsa)");
      }
      if (dsa) {
        if (find(index_key) == nullptr) {
          fail(index_key + ": missing (a " + arch + " model keeps its lightning indexer's keys in a second cache this wide)");
        }
        const std::uint64_t index_dim = *scalar(index_key, 1, max_count, true);
        std::vector<bool> owns(n, true);
        const std::string types_key = p + "attention.indexer.types";
        if (arch == "glm-dsa" && find(types_key) != nullptr) {
          const auto flags = per_layer(types_key, layers, 0, detail::u64_max, true);
          for (std::size_t i = 0; i < n; ++i) owns[i] = flags->values[i] != 0;
        }
        for (std::size_t i = 0; i < n; ++i) {
          if (kv_layer[i] && owns[i]) add(latent_layers(1, static_cast<std::uint32_t>(index_dim)));
        }
      }
    }

    if (first_recurrent != n) {
      const std::string why = arch + " layer " + std::to_string(first_recurrent) +
                              " is recurrent, and llama.cpp sizes its state from this key";
      const std::uint64_t kernel = state_key(p + "ssm.conv_kernel", 1, std::uint64_t{1} << 16, why);
      const std::uint64_t inner = state_key(p + "ssm.inner_size", 1, std::uint64_t{1} << 24, why);
      const std::uint64_t state = state_key(p + "ssm.state_size", 1, max_count, why);
      const std::uint64_t groups = known->ssm_groups ? state_key(p + "ssm.group_count", 0, max_count, why) : 0;
      // llama_hparams::n_embd_r and n_embd_s (below 2^58 and 2^44 within these ranges).
      const layer_group state_group = recurrent_layers(1, (kernel - 1) * (inner + 2 * groups * state), state * inner);
      for (std::size_t i = 0; i < n; ++i) {
        if (recurrent[i]) add(state_group);
      }
    }

    std::stable_sort(found.begin(), found.end(), [](const layer_group& a, const layer_group& b) {
      return static_cast<int>(a.kind) < static_cast<int>(b.kind);
    });
    for (const layer_group& g : found) s.add(g);
    s.query_heads = static_cast<std::uint32_t>(q_max);
    s.hidden_size = static_cast<std::uint32_t>(embd);
    s.normal_kv = kv_format::f16;
    s.compact_kv = kv_format::q4_0;
    s.state_format = kv_format::fp32;  // llama.cpp's recurrent state is f32 (create_memory)
    s.ssm_state_format = kv_format::fp32;

    if (const std::string_view problem = rule_problem(s, engine_); !problem.empty()) {
      fail("the engine rule: " + std::string(problem));
    }
    model_description& d = out.description;
    d.cost = from_shape(s, engine_);
    d.shape = s;
    d.engine = engine_;
    d.source = "gguf";
    const std::string name = string_key("general.name", false);
    d.name = name.empty() ? arch : name;
  }
};

template <class Source>
read_result<gguf_model> parse(Source& src, const engine_rule& engine) {
  try {
    parser<Source> p(src, engine);
    return read_result<gguf_model>::ok(p.run());
  } catch (const gguf_failure& e) {
    return read_result<gguf_model>::fail(e.what);
  } catch (const std::bad_alloc&) {
    return read_result<gguf_model>::fail("out of memory reading the metadata");
  }
}

read_result<model_description> description_of(read_result<gguf_model> r) {
  if (!r) return read_result<model_description>::fail(std::move(r.error));
  return read_result<model_description>::ok(std::move(r.value->description));
}

}  // namespace

read_result<gguf_model> read_gguf_model(std::string_view bytes, const engine_rule& engine) {
  memory_source src(bytes);
  return parse(src, engine);
}

read_result<gguf_model> read_gguf_model_file(const std::string& path, const engine_rule& engine) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return read_result<gguf_model>::fail(path + ": " + std::strerror(errno));
  file_source src(f);
  read_result<gguf_model> r = parse(src, engine);
  std::fclose(f);
  if (!r) r.error = path + ": " + r.error;
  return r;
}

read_result<model_description> read_gguf(std::string_view bytes, const engine_rule& engine) {
  return description_of(read_gguf_model(bytes, engine));
}

read_result<model_description> read_gguf_file(const std::string& path, const engine_rule& engine) {
  return description_of(read_gguf_model_file(path, engine));
}

}  // namespace pnmem::model_files
