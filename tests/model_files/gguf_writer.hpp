// tests/model_files/gguf_writer.hpp - writes GGUF headers and metadata for the tests, from ggml's
// docs/gguf.md (versions 2 and 3), independently of the reader: no tensor infos, no tensor data.
//
//   gguf_writer w;                        // version 3, tensor_count 0
//   w.str("general.architecture", "llama").u32("llama.block_count", 32);
//   std::string bytes = w.bytes();        // "GGUF", version, tensor_count, kv count, the KVs
//
// raw_kv() appends any bytes as a KV (for malformed values); count_override() and the header fields
// can be set to anything, so the tests can write broken files too.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pnmem::test {

enum class gguf_t : std::uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
  string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};

// `v`'s low `size` bytes, little-endian.
inline std::string le(std::uint64_t v, std::size_t size) {
  std::string out;
  for (std::size_t i = 0; i < size; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}

inline std::string gguf_string(std::string_view s) { return le(s.size(), 8) + std::string(s); }

class gguf_writer {
 public:
  explicit gguf_writer(std::uint32_t version = 3, std::uint64_t tensor_count = 0)
      : version_(version), tensor_count_(tensor_count) {}

  gguf_writer& u8(std::string_view key, std::uint8_t v) { return kv(key, gguf_t::u8, le(v, 1)); }
  gguf_writer& i8(std::string_view key, std::int8_t v) { return kv(key, gguf_t::i8, le(static_cast<std::uint8_t>(v), 1)); }
  gguf_writer& u16(std::string_view key, std::uint16_t v) { return kv(key, gguf_t::u16, le(v, 2)); }
  gguf_writer& i16(std::string_view key, std::int16_t v) { return kv(key, gguf_t::i16, le(static_cast<std::uint16_t>(v), 2)); }
  gguf_writer& u32(std::string_view key, std::uint32_t v) { return kv(key, gguf_t::u32, le(v, 4)); }
  gguf_writer& i32(std::string_view key, std::int32_t v) { return kv(key, gguf_t::i32, le(static_cast<std::uint32_t>(v), 4)); }
  gguf_writer& u64(std::string_view key, std::uint64_t v) { return kv(key, gguf_t::u64, le(v, 8)); }
  gguf_writer& i64(std::string_view key, std::int64_t v) { return kv(key, gguf_t::i64, le(static_cast<std::uint64_t>(v), 8)); }
  gguf_writer& f32(std::string_view key, float v) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &v, 4);
    return kv(key, gguf_t::f32, le(bits, 4));
  }
  gguf_writer& f64(std::string_view key, double v) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &v, 8);
    return kv(key, gguf_t::f64, le(bits, 8));
  }
  gguf_writer& boolean(std::string_view key, bool v) { return kv(key, gguf_t::boolean, le(v ? 1 : 0, 1)); }
  gguf_writer& str(std::string_view key, std::string_view v) { return kv(key, gguf_t::string, gguf_string(v)); }

  // Arrays of fixed-size integers: elem gives the element type (and so the element size).
  gguf_writer& ints(std::string_view key, gguf_t elem, const std::vector<std::int64_t>& v) {
    std::string body = le(static_cast<std::uint32_t>(elem), 4) + le(v.size(), 8);
    for (const std::int64_t x : v) body += le(static_cast<std::uint64_t>(x), size_of(elem));
    return kv(key, gguf_t::array, body);
  }
  gguf_writer& strings(std::string_view key, const std::vector<std::string>& v) {
    std::string body = le(static_cast<std::uint32_t>(gguf_t::string), 4) + le(v.size(), 8);
    for (const std::string& s : v) body += gguf_string(s);
    return kv(key, gguf_t::array, body);
  }
  // An array of arrays of strings.
  gguf_writer& nested_strings(std::string_view key, const std::vector<std::vector<std::string>>& v) {
    std::string body = le(static_cast<std::uint32_t>(gguf_t::array), 4) + le(v.size(), 8);
    for (const auto& inner : v) {
      body += le(static_cast<std::uint32_t>(gguf_t::string), 4) + le(inner.size(), 8);
      for (const std::string& s : inner) body += gguf_string(s);
    }
    return kv(key, gguf_t::array, body);
  }

  // A KV whose type and value bytes are given as they are.
  gguf_writer& raw_kv(std::string_view key, std::uint32_t type, std::string_view value_bytes) {
    kvs_ += gguf_string(key) + le(type, 4) + std::string(value_bytes);
    ++count_;
    return *this;
  }
  // Bytes appended to the KV section as they are (not counted as a KV).
  gguf_writer& raw(std::string_view bytes) {
    kvs_ += bytes;
    return *this;
  }

  gguf_writer& magic(std::string_view m) {
    magic_ = std::string(m);
    return *this;
  }
  gguf_writer& version(std::uint32_t v) {
    version_ = v;
    return *this;
  }
  gguf_writer& tensor_count(std::uint64_t n) {
    tensor_count_ = n;
    return *this;
  }
  // The header's metadata_kv_count, instead of the number of KVs written.
  gguf_writer& count_override(std::uint64_t n) {
    count_override_ = n;
    return *this;
  }

  std::size_t kv_count() const { return count_; }

  // The header and the KVs: exactly the metadata, nothing after it.
  std::string bytes() const {
    return magic_ + le(version_, 4) + le(tensor_count_, 8) + le(count_override_.value_or(count_), 8) + kvs_;
  }

  static std::size_t size_of(gguf_t t) {
    switch (t) {
      case gguf_t::u8: case gguf_t::i8: case gguf_t::boolean: return 1;
      case gguf_t::u16: case gguf_t::i16: return 2;
      case gguf_t::u32: case gguf_t::i32: case gguf_t::f32: return 4;
      default: return 8;
    }
  }

 private:
  gguf_writer& kv(std::string_view key, gguf_t t, const std::string& value) {
    return raw_kv(key, static_cast<std::uint32_t>(t), value);
  }

  std::string magic_ = "GGUF";
  std::uint32_t version_;
  std::uint64_t tensor_count_;
  std::optional<std::uint64_t> count_override_;
  std::string kvs_;
  std::size_t count_ = 0;
};

// --- models, with the keys llama.cpp's converters write (values of the public models) -------------------

// Meta-Llama-3-8B as convert_hf_to_gguf.py writes it (Q4_K_M: file_type 15, 291 tensors); the tokenizer
// arrays are cut to a few entries (the reader skips them either way).
inline gguf_writer llama3_8b_gguf(std::uint32_t version = 3) {
  gguf_writer w(version, 291);
  w.str("general.architecture", "llama")
      .str("general.name", "Meta-Llama-3-8B")
      .u32("llama.block_count", 32)
      .u32("llama.context_length", 8192)
      .u32("llama.embedding_length", 4096)
      .u32("llama.feed_forward_length", 14336)
      .u32("llama.attention.head_count", 32)
      .u32("llama.attention.head_count_kv", 8)
      .f32("llama.rope.freq_base", 500000.0f)
      .f32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
      .u32("general.file_type", 15)
      .u32("llama.vocab_size", 128256)
      .u32("llama.rope.dimension_count", 128)
      .str("tokenizer.ggml.model", "gpt2")
      .str("tokenizer.ggml.pre", "llama-bpe")
      .strings("tokenizer.ggml.tokens", {"!", "\"", "#", "$", "%"})
      .ints("tokenizer.ggml.token_type", gguf_t::i32, {1, 1, 1, 1, 1})
      .strings("tokenizer.ggml.merges", {"\xc4\xa0 \xc4\xa0", "\xc4\xa0\xc4\xa0 \xc4\xa0\xc4\xa0"})
      .u32("tokenizer.ggml.bos_token_id", 128000)
      .u32("tokenizer.ggml.eos_token_id", 128001)
      .str("tokenizer.chat_template", "{% set loop_messages = messages %}")
      .u32("general.quantization_version", 2);
  return w;
}

}  // namespace pnmem::test
