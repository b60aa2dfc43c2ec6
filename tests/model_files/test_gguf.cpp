// read_gguf / read_gguf_file on GGUF metadata written by gguf_writer.hpp (the documented format, no tensor
// data), and on broken, truncated and hostile files.
#include "pnmem/model_files/gguf.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gguf_writer.hpp"
#include "model_files_support.hpp"

using namespace pnmem;
using namespace pnmem::model_files;
using pnmem::test::full_kv;
using pnmem::test::gguf_t;
using pnmem::test::gguf_writer;
using pnmem::test::le;
using pnmem::test::sliding_kv;

namespace {

// The bytes in a heap buffer of exactly their size: a read past the end is an ASan report in a
// sanitizer build, and the reader cannot see anything after them.
class exact_bytes {
 public:
  explicit exact_bytes(const std::string& s) : size_(s.size()), p_(new char[s.size() + 1]) {
    if (size_ != 0) std::memcpy(p_.get(), s.data(), size_);
  }
  std::string_view view() const { return {p_.get(), size_}; }

 private:
  std::size_t size_;
  std::unique_ptr<char[]> p_;
};

gguf_model read_ok(const std::string& bytes) {
  const exact_bytes exact(bytes);
  const auto r = read_gguf_model(exact.view());
  REQUIRE_MESSAGE(r.value.has_value(), r.error);
  CHECK(r.error.empty());
  const model_description& d = r.value->description;
  REQUIRE(d.shape.has_value());
  CHECK(d.cost == from_shape(*d.shape));
  CHECK(validate(d.cost).empty());
  CHECK(d.source == "gguf");
  // read_gguf says the same.
  const auto plain = read_gguf(exact.view());
  REQUIRE(plain.value.has_value());
  CHECK(plain.value->cost == d.cost);
  return *r.value;
}

std::string read_error(const std::string& bytes) {
  const exact_bytes exact(bytes);
  const auto r = read_gguf(exact.view());
  CHECK_FALSE(r.value.has_value());
  CHECK_FALSE(r.error.empty());
  return r.error;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// An architecture's minimum: name, block_count, heads, embedding.
gguf_writer model(const std::string& arch, std::uint32_t layers, std::uint32_t heads, std::uint32_t kv_heads,
                  std::uint32_t embd) {
  gguf_writer w;
  w.str("general.architecture", arch)
      .u32(arch + ".block_count", layers)
      .u32(arch + ".attention.head_count", heads)
      .u32(arch + ".attention.head_count_kv", kv_heads)
      .u32(arch + ".embedding_length", embd);
  return w;
}

std::string temp_path(const char* name) {
  return (std::filesystem::temp_directory_path() / (std::string("pnmem-test-") + name + "-" +
                                                    std::to_string(std::chrono::steady_clock::now().time_since_epoch().count())))
      .string();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(f.good());
}

}  // namespace

TEST_CASE("Llama-3-8B GGUF: 32 layers x 8 KV heads x 128 dims (4096 / 32), f16 = 128 KiB per token") {
  const std::string bytes = pnmem::test::llama3_8b_gguf().bytes();
  const gguf_model g = read_ok(bytes);
  const model_description& d = g.description;
  CHECK(d.name == "Meta-Llama-3-8B");
  CHECK(d.shape->layers == 32);
  CHECK(d.shape->sliding_layers == 0);
  CHECK(d.shape->kv_heads == 8);
  CHECK(d.shape->key_dim == 128);
  CHECK(d.shape->value_dim == 128);
  CHECK(d.shape->query_heads == 32);
  CHECK(d.shape->hidden_size == 4096);
  CHECK(full_kv(d.cost, kv_format::f16) == 2 * 32 * 8 * 128 * 2);  // 131072
  CHECK(full_kv(d.cost, kv_format::f16) == 131072);
  CHECK(full_kv(d.cost, kv_format::q8_0) == 69632);
  CHECK(full_kv(d.cost, kv_format::q4_0) == 36864);
  CHECK(d.cost.normal_kv == kv_format::f16);  // GGUF has no KV format: llama.cpp's default
  CHECK(d.cost.compact_kv == kv_format::q4_0);
  CHECK(g.summary.version == 3);
  CHECK(g.summary.tensor_count == 291);
  CHECK(g.summary.metadata_kv_count == 22);
  CHECK(g.summary.metadata_bytes == bytes.size());
  CHECK(g.summary.architecture == "llama");
  CHECK(g.summary.context_length == 8192);
  pnmem::test::check_json_round_trip(d);

  SUBCASE("version 2 reads the same") {
    const gguf_model v2 = read_ok(pnmem::test::llama3_8b_gguf(2).bytes());
    CHECK(v2.summary.version == 2);
    CHECK(v2.description.cost == d.cost);
  }
  SUBCASE("explicit key_length / value_length win over embedding_length / head_count") {
    gguf_writer w = pnmem::test::llama3_8b_gguf();
    w.u32("llama.attention.key_length", 192).u32("llama.attention.value_length", 128);
    const gguf_model k = read_ok(w.bytes());
    CHECK(k.description.shape->key_dim == 192);
    CHECK(full_kv(k.description.cost, kv_format::f16) == 32 * 8 * (192 + 128) * 2);
  }
  SUBCASE("head_count_kv absent: every head has its own KV (no GQA)") {
    gguf_writer w;
    w.str("general.architecture", "llama").u32("llama.block_count", 32).u32("llama.attention.head_count", 32)
        .u32("llama.embedding_length", 4096);
    CHECK(full_kv(read_ok(w.bytes()).description.cost, kv_format::f16) == 2 * 32 * 32 * 128 * 2);
  }
  SUBCASE("no general.name: named after the architecture") {
    CHECK(read_ok(model("qwen2", 28, 28, 4, 3584).bytes()).description.name == "qwen2");
    CHECK(full_kv(read_ok(model("qwen2", 28, 28, 4, 3584).bytes()).description.cost, kv_format::f16) == 57344);
  }
}

TEST_CASE("the reader stops at the end of the metadata: the exact prefix reads, what follows is never looked at") {
  const std::string meta = pnmem::test::llama3_8b_gguf().bytes();
  const gguf_model alone = read_ok(meta);  // exactly the metadata, in a buffer of exactly that size
  // Tensor infos (291 of them in the header) and data after it change nothing.
  std::string tail = pnmem::test::gguf_string("token_embd.weight") + le(2, 4) + le(4096, 8) + le(128256, 8) +
                     le(12, 4) + le(0, 8);
  tail += std::string(4096, '\xa5');
  const gguf_model with_tail = read_ok(meta + tail);
  CHECK(with_tail.description.cost == alone.description.cost);
  CHECK(with_tail.summary.metadata_bytes == meta.size());
  // Garbage after the metadata, even garbage that is not tensor infos, is not read.
  CHECK(read_ok(meta + std::string(64, '\xff')).description.cost == alone.description.cost);
}

TEST_CASE("truncated at every byte offset of a valid file: an error naming the offset, never a value") {
  const std::string bytes = pnmem::test::llama3_8b_gguf().bytes();
  for (std::size_t k = 0; k < bytes.size(); ++k) {
    CAPTURE(k);
    const exact_bytes cut(bytes.substr(0, k));
    const auto r = read_gguf(cut.view());
    REQUIRE_FALSE(r.value.has_value());
    REQUIRE(contains(r.error, "truncated at byte " + std::to_string(k) + " while reading "));
    // Past the header the message names the key being read (or its entry number, inside the key).
    if (k >= 24) CHECK((contains(r.error, " of key \"") || contains(r.error, " of entry ")));
  }
  // One example in full.
  const std::size_t at = bytes.find("llama.block_count") + std::string("llama.block_count").size() + 4 + 2;
  CHECK(read_error(bytes.substr(0, at)) ==
        "truncated at byte " + std::to_string(at) + " while reading a number of key \"llama.block_count\" (entry 3 of 22), "
        "which starts at byte " + std::to_string(at - 2 - 4 - 17 - 8));
}

TEST_CASE("per-layer head_count_kv (Jamba): layers with 0 KV heads are not KV layers, the others use the max") {
  std::vector<std::int64_t> kv(32, 0);
  for (std::size_t i = 4; i < 32; i += 8) kv[i] = 8;  // one attention layer in 8, at offset 4
  gguf_writer w;
  w.str("general.architecture", "jamba")
      .u32("jamba.block_count", 32)
      .u32("jamba.attention.head_count", 32)
      .ints("jamba.attention.head_count_kv", gguf_t::i32, kv)
      .u32("jamba.embedding_length", 4096)
      .u32("jamba.context_length", 262144);
  gguf_model g = read_ok(w.bytes());
  CHECK(g.description.shape->layers == 4);
  CHECK(g.description.shape->kv_heads == 8);
  CHECK(full_kv(g.description.cost, kv_format::f16) == 4 * 2 * 8 * 128 * 2);  // 16384
  CHECK(g.summary.context_length == 262144);

  SUBCASE("uneven counts cost every KV layer at the largest") {
    kv[4] = 2;
    kv[12] = 4;
    gguf_writer u;
    u.str("general.architecture", "jamba").u32("jamba.block_count", 32).u32("jamba.attention.head_count", 32)
        .ints("jamba.attention.head_count_kv", gguf_t::u16, kv).u32("jamba.embedding_length", 4096);
    g = read_ok(u.bytes());
    CHECK(g.description.shape->layers == 4);
    CHECK(g.description.shape->kv_heads == 8);
    CHECK(full_kv(g.description.cost, kv_format::f16) == 16384);
  }
  SUBCASE("a per-layer head_count array too") {
    std::vector<std::int64_t> q(32, 0);
    for (std::size_t i = 4; i < 32; i += 8) q[i] = 32;
    gguf_writer u;
    u.str("general.architecture", "jamba").u32("jamba.block_count", 32).ints("jamba.attention.head_count", gguf_t::u32, q)
        .ints("jamba.attention.head_count_kv", gguf_t::u32, kv).u32("jamba.embedding_length", 4096);
    g = read_ok(u.bytes());
    CHECK(g.description.shape->query_heads == 32);
    CHECK(g.description.shape->key_dim == 128);
  }
  SUBCASE("errors") {
    gguf_writer u;
    u.str("general.architecture", "jamba").u32("jamba.block_count", 32).u32("jamba.attention.head_count", 32)
        .ints("jamba.attention.head_count_kv", gguf_t::u32, std::vector<std::int64_t>(31, 8))
        .u32("jamba.embedding_length", 4096);
    CHECK(contains(read_error(u.bytes()), "jamba.attention.head_count_kv: 31 entries for 32 layers"));
    gguf_writer z;
    z.str("general.architecture", "jamba").u32("jamba.block_count", 2).u32("jamba.attention.head_count", 32)
        .ints("jamba.attention.head_count_kv", gguf_t::u32, {0, 0}).u32("jamba.embedding_length", 4096);
    CHECK(contains(read_error(z.bytes()), "jamba.attention.head_count_kv: every layer has 0 KV heads"));
    gguf_writer n;
    n.str("general.architecture", "jamba").u32("jamba.block_count", 2).u32("jamba.attention.head_count", 32)
        .ints("jamba.attention.head_count_kv", gguf_t::i32, {8, -8}).u32("jamba.embedding_length", 4096);
    CHECK(contains(read_error(n.bytes()), "jamba.attention.head_count_kv: a negative entry"));
    gguf_writer d;
    d.str("general.architecture", "jamba").u32("jamba.block_count", 2).u32("jamba.attention.head_count", 32)
        .ints("jamba.attention.head_count_kv", gguf_t::u32, {8, 6}).u32("jamba.embedding_length", 4096);
    CHECK(contains(read_error(d.bytes()), "6 KV heads in layer 1 do not divide its 32 query heads"));
  }
}

TEST_CASE("sliding windows: gemma2 alternates, gemma3 every 6th full, gpt-oss alternates, explicit patterns") {
  SUBCASE("gemma2 (google/gemma-2-9b): 42 layers, 21 slide at 4096") {
    gguf_writer w = model("gemma2", 42, 16, 8, 3584);
    w.u32("gemma2.attention.key_length", 256).u32("gemma2.attention.value_length", 256)
        .u32("gemma2.attention.sliding_window", 4096).u32("gemma2.context_length", 8192);
    const model_description d = read_ok(w.bytes()).description;
    CHECK(d.shape->sliding_layers == 21);
    CHECK(full_kv(d.cost, kv_format::f16) == 21 * 2 * 8 * 256 * 2);  // 172032
    CHECK(sliding_kv(d.cost, kv_format::f16) == 172032);
    CHECK(d.cost.sliding_window == 4096);
  }
  SUBCASE("gemma3 (google/gemma-3-1b-it): 26 layers, 22 slide at 512") {
    gguf_writer w = model("gemma3", 26, 4, 1, 1152);
    w.u32("gemma3.attention.key_length", 256).u32("gemma3.attention.value_length", 256)
        .u32("gemma3.attention.sliding_window", 512);
    const model_description d = read_ok(w.bytes()).description;
    CHECK(d.shape->sliding_layers == 22);
    CHECK(full_kv(d.cost, kv_format::f16) == 4 * 2 * 1 * 256 * 2);  // 4096
    CHECK(sliding_kv(d.cost, kv_format::f16) == 22 * 2 * 1 * 256 * 2);  // 22528
  }
  SUBCASE("gpt-oss (openai/gpt-oss-20b): 24 layers, 12 slide at 128") {
    gguf_writer w = model("gpt-oss", 24, 64, 8, 2880);
    w.u32("gpt-oss.attention.key_length", 64).u32("gpt-oss.attention.value_length", 64)
        .u32("gpt-oss.attention.sliding_window", 128);
    const model_description d = read_ok(w.bytes()).description;
    CHECK(d.shape->sliding_layers == 12);
    CHECK(full_kv(d.cost, kv_format::f16) == 12 * 2 * 8 * 64 * 2);  // 24576
    CHECK(d.cost.sliding_window == 128);
  }
  SUBCASE("an explicit period: every N-th layer full; 0: every layer slides") {
    gguf_writer w = model("gemma3", 26, 4, 1, 1152);
    w.u32("gemma3.attention.key_length", 256).u32("gemma3.attention.sliding_window", 512)
        .u32("gemma3.attention.sliding_window_pattern", 4);
    CHECK(read_ok(w.bytes()).description.shape->sliding_layers == 20);  // 26 - 26 / 4
    gguf_writer all = model("mistral", 32, 32, 8, 4096);
    all.u32("mistral.attention.sliding_window", 4096).u32("mistral.attention.sliding_window_pattern", 0);
    CHECK(read_ok(all.bytes()).description.shape->sliding_layers == 32);
  }
  SUBCASE("a per-layer pattern array (bools, nonzero = sliding), counted among KV layers only") {
    gguf_writer w = model("cohere2moe", 4, 8, 2, 512);
    w.u32("cohere2moe.attention.sliding_window", 64)
        .ints("cohere2moe.attention.sliding_window_pattern", gguf_t::boolean, {1, 1, 0, 1});
    const model_description d = read_ok(w.bytes()).description;
    CHECK(d.shape->sliding_layers == 3);
    CHECK(full_kv(d.cost, kv_format::f16) == 1 * 2 * 2 * 64 * 2);
    CHECK(sliding_kv(d.cost, kv_format::f16) == 3 * 2 * 2 * 64 * 2);
    gguf_writer short_pattern = model("cohere2moe", 4, 8, 2, 512);
    short_pattern.u32("cohere2moe.attention.sliding_window", 64)
        .ints("cohere2moe.attention.sliding_window_pattern", gguf_t::boolean, {1, 1, 0});
    CHECK(contains(read_error(short_pattern.bytes()), "sliding_window_pattern: 3 entries for 4 layers"));
  }
  SUBCASE("an architecture with no built-in period and no pattern: no layer slides (llama.cpp keeps them full)") {
    gguf_writer w = model("phi3", 32, 32, 32, 3072);
    w.u32("phi3.attention.sliding_window", 2047);
    const model_description d = read_ok(w.bytes()).description;
    CHECK(d.shape->sliding_layers == 0);
    CHECK(d.cost.sliding_window == 0);
  }
  SUBCASE("no window: the pattern is ignored") {
    gguf_writer w = model("gemma3", 26, 4, 1, 1152);
    w.u32("gemma3.attention.key_length", 256).u32("gemma3.attention.sliding_window_pattern", 6);
    CHECK(read_ok(w.bytes()).description.shape->sliding_layers == 0);
  }
  SUBCASE("key_length_swa larger than key_length: the larger dims cost every layer") {
    gguf_writer w = model("gemma3n", 10, 8, 2, 2048);
    w.u32("gemma3n.attention.key_length", 256).u32("gemma3n.attention.value_length", 256)
        .u32("gemma3n.attention.key_length_swa", 512).u32("gemma3n.attention.value_length_swa", 512)
        .u32("gemma3n.attention.sliding_window", 512);
    const model_description d = read_ok(w.bytes()).description;
    CHECK(d.shape->sliding_layers == 8);  // period 5: layers 4 and 9 full
    CHECK(d.shape->key_dim == 512);
  }
}

TEST_CASE("every value type is read or skipped in place, nested arrays too") {
  gguf_writer w;
  w.u8("x.u8", 1).i8("x.i8", -1).u16("x.u16", 2).i16("x.i16", -2).u32("x.u32", 3).i32("x.i32", -3)
      .f32("x.f32", 0.5f).boolean("x.bool", true).str("x.string", "text").u64("x.u64", 4).i64("x.i64", -4)
      .f64("x.f64", 0.25).ints("x.bools", gguf_t::boolean, {0, 1, 1})
      .ints("x.u64s", gguf_t::u64, {1, 2, 3})
      .nested_strings("x.nested", {{"a", "bc"}, {}, {"def"}})
      .strings("x.strings", {"", "one"});
  // The model's keys after all of them, and as other integer types: u8, i16, u64, i64.
  w.str("general.architecture", "llama").u8("llama.block_count", 32).i16("llama.attention.head_count", 32)
      .u64("llama.attention.head_count_kv", 8).i64("llama.embedding_length", 4096);
  const gguf_model g = read_ok(w.bytes());
  CHECK(full_kv(g.description.cost, kv_format::f16) == 131072);
  CHECK(g.summary.metadata_kv_count == 21);
}

TEST_CASE("bad headers and hostile counts: errors naming them") {
  const gguf_writer good = pnmem::test::llama3_8b_gguf();
  CHECK(contains(read_error(gguf_writer(good).magic("GGML").bytes()), "not a GGUF file: the magic"));
  CHECK(contains(read_error(gguf_writer(good).magic("FUGG").bytes()), "expected \"GGUF\""));
  CHECK(contains(read_error(gguf_writer(good).version(1).bytes()), "version: 1 (GGUF v1"));
  CHECK(contains(read_error(gguf_writer(good).version(4).bytes()), "version: 4 is not a GGUF version"));
  CHECK(contains(read_error(gguf_writer(good).version(0x03000000).bytes()), "big-endian"));
  CHECK(contains(read_error(gguf_writer(good).tensor_count(1ULL << 40).bytes()), "tensor_count: 1099511627776 is more than"));
  CHECK(contains(read_error(gguf_writer(good).count_override(1ULL << 63).bytes()), "metadata_kv_count: 9223372036854775808 is more than"));
  CHECK(contains(read_error(gguf_writer(good).count_override(23).bytes()), "truncated at byte"));
  CHECK(contains(read_error("GG"), "truncated at byte 2 while reading the magic of the header"));

  CHECK(contains(read_error(gguf_writer(good).raw_kv("x.huge", 8, le(1ULL << 40, 8)).bytes()), "\"x.huge\": a string of 1099511627776 bytes"));
  CHECK(contains(read_error(gguf_writer(good).raw_kv("x.arr", 9, le(0, 4) + le(1ULL << 62, 8)).bytes()), "\"x.arr\": an array of 4611686018427387904 elements"));
  // 2^24 u64s declare 128 MiB: over the 64 MiB limit before a byte of them is read.
  CHECK(contains(read_error(gguf_writer(good).raw_kv("x.big", 9, le(10, 4) + le(1ULL << 24, 8)).bytes()), "the metadata is larger than 64 MiB"));
  CHECK(contains(read_error(gguf_writer(good).raw_kv("x.type", 13, le(0, 4)).bytes()), "\"x.type\": value type 13 is not a GGUF type"));
  CHECK(contains(read_error(gguf_writer(good).raw_kv("x.elem", 9, le(99, 4) + le(1, 8)).bytes()), "value type 99"));
  CHECK(contains(read_error(gguf_writer(good).raw_kv("x.bool", 7, le(2, 1)).bytes()), "\"x.bool\": a bool of value 2"));
  CHECK(contains(read_error(gguf_writer(good).u32("llama.block_count", 32).bytes()), "\"llama.block_count\": the key appears twice (entries 3 and 23)"));
  CHECK(contains(read_error(gguf_writer(good).raw(le(0, 8) + le(4, 4) + le(0, 4)).count_override(23).bytes()), "a key cannot be empty"));
  CHECK(contains(read_error(gguf_writer(good).raw(le(1 << 20, 8)).count_override(23).bytes()), "longer than 65535 bytes"));
  std::string deep = le(9, 4) + le(1, 8);  // array of arrays ... 9 deep
  for (int i = 0; i < 8; ++i) deep += le(9, 4) + le(1, 8);
  deep += le(0, 4) + le(0, 8);
  CHECK(contains(read_error(gguf_writer(good).raw_kv("x.deep", 9, deep).bytes()), "nested more than 8 deep"));
}

TEST_CASE("bad model keys: errors naming the key") {
  auto without = [](const std::string& drop) {
    gguf_writer w;
    if (drop != "general.architecture") w.str("general.architecture", "llama");
    if (drop != "llama.block_count") w.u32("llama.block_count", 32);
    if (drop != "llama.attention.head_count") w.u32("llama.attention.head_count", 32);
    if (drop != "llama.embedding_length") w.u32("llama.embedding_length", 4096);
    return read_error(w.bytes());
  };
  CHECK(contains(without("general.architecture"), "general.architecture: missing"));
  CHECK(contains(without("llama.block_count"), "llama.block_count: missing"));
  CHECK(contains(without("llama.attention.head_count"), "llama.attention.head_count: missing"));
  CHECK(contains(without("llama.embedding_length"), "llama.embedding_length: missing"));

  CHECK(contains(read_error(model("llama", 0, 32, 8, 4096).bytes()), "llama.block_count: 0 is out of range"));
  CHECK(contains(read_error(model("llama", (1u << 20) + 1, 32, 8, 4096).bytes()), "llama.block_count: 1048577 is out of range"));
  CHECK(contains(read_error(model("llama", 32, 0, 8, 4096).bytes()), "llama.attention.head_count: 0"));
  CHECK(contains(read_error(model("llama", 32, 32, 0, 4096).bytes()), "llama.attention.head_count_kv: 0"));
  CHECK(contains(read_error(model("llama", 32, 32, 6, 4096).bytes()), "6 KV heads in layer 0 do not divide its 32 query heads"));
  CHECK(contains(read_error(model("llama", 32, 24, 8, 4000).bytes()), "llama.attention.key_length: missing, and embedding_length (4000) is not a multiple of"));

  gguf_writer s;
  s.str("general.architecture", "llama").str("llama.block_count", "32");
  CHECK(contains(read_error(s.bytes()), "llama.block_count: expected an integer, got string"));
  gguf_writer f;
  f.str("general.architecture", "llama").f32("llama.block_count", 32.0f);
  CHECK(contains(read_error(f.bytes()), "llama.block_count: expected an integer, got f32"));
  gguf_writer n;
  n.str("general.architecture", "llama").i32("llama.block_count", -32);
  CHECK(contains(read_error(n.bytes()), "llama.block_count: negative"));
  gguf_writer a;
  a.u32("general.architecture", 1);
  CHECK(contains(read_error(a.bytes()), "general.architecture: expected a string, got u32"));
  gguf_writer sw = model("gemma2", 42, 16, 8, 3584);
  sw.i32("gemma2.attention.sliding_window", -1);
  CHECK(contains(read_error(sw.bytes()), "gemma2.attention.sliding_window: negative"));
}

TEST_CASE("read_gguf_file: reads the metadata of a large file without reading the file") {
  const std::string meta = pnmem::test::llama3_8b_gguf().bytes();
  const std::string path = temp_path("gguf");
  write_file(path, meta);
  // 8 GiB of (sparse) tensor data after the metadata: reading it would take long and show in the time.
  std::filesystem::resize_file(path, 8ULL << 30);
  const auto start = std::chrono::steady_clock::now();
  const auto r = read_gguf_model_file(path);
  const auto took = std::chrono::steady_clock::now() - start;
  std::filesystem::remove(path);
  REQUIRE_MESSAGE(r.value.has_value(), r.error);
  CHECK(full_kv(r.value->description.cost, kv_format::f16) == 131072);
  CHECK(r.value->summary.metadata_bytes == meta.size());
  CHECK(took < std::chrono::seconds(2));

  const auto plain = read_gguf_file(path);  // removed now
  REQUIRE_FALSE(plain.value.has_value());
  CHECK(contains(plain.error, path + ": "));

  const std::string cut_path = temp_path("gguf-cut");
  write_file(cut_path, meta.substr(0, meta.size() - 3));
  const auto cut = read_gguf_file(cut_path);
  std::filesystem::remove(cut_path);
  REQUIRE_FALSE(cut.value.has_value());
  CHECK(cut.error.rfind(cut_path + ": truncated at byte " + std::to_string(meta.size() - 3), 0) == 0);
}
