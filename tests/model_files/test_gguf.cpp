// read_gguf / read_gguf_file on GGUF metadata written by gguf_writer.hpp (the documented format, no tensor
// data), and on broken, truncated and hostile files. The layer groups and bytes of the real models are
// worked out by hand below from the models' configs (tests/fixtures/models) and llama.cpp's allocation
// rules (docs/engine-rules-research.md), not taken from pnmem's output.
#include "pnmem/model_files/gguf.hpp"
#include "pnmem/model_files/hf_config.hpp"

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
using pnmem::test::model;
using pnmem::test::window_kv;
using pnmem::test::windowed_kv;

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

gguf_model read_ok(const std::string& bytes, const engine_rule& engine = exact_engine) {
  const exact_bytes exact(bytes);
  const auto r = read_gguf_model(exact.view(), engine);
  REQUIRE_MESSAGE(r.value.has_value(), r.error);
  CHECK(r.error.empty());
  const model_description& d = r.value->description;
  REQUIRE(d.shape.has_value());
  CHECK(d.cost == from_shape(*d.shape, engine));
  CHECK(d.engine == engine);
  CHECK(validate(d.cost).empty());
  CHECK(validate(*d.shape).empty());
  CHECK(d.source == "gguf");
  CHECK(d.shape->state_format == kv_format::fp32);  // llama.cpp keeps recurrent state in f32
  CHECK(d.shape->ssm_state_format == kv_format::fp32);
  // read_gguf says the same.
  const auto plain = read_gguf(exact.view(), engine);
  REQUIRE(plain.value.has_value());
  CHECK(plain.value->cost == d.cost);
  return *r.value;
}

// llama.cpp's rule (its defaults: -ub 512, one sequence per stream).
engine_rule llama_cpp_rule(std::uint32_t seqs = 1) {
  engine_rule e;
  e.engine = kv_engine::llama_cpp;
  e.seqs = seqs;
  return e;
}

// The shape's groups, in order.
std::vector<layer_group> groups_of(const model_description& d) {
  return {d.shape->groups.begin(), d.shape->groups.begin() + d.shape->n_groups};
}

std::string read_error(const std::string& bytes) {
  const exact_bytes exact(bytes);
  const auto r = read_gguf(exact.view());
  CHECK_FALSE(r.value.has_value());
  CHECK_FALSE(r.error.empty());
  return r.error;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

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
  // One group: 32 full layers x 8 KV heads x 128 dims (4096 / 32), K and V.
  CHECK(groups_of(d) == std::vector<layer_group>{attention_layers(layer_kind::full, 32, 8, 128, 128)});
  CHECK(d.cost.n_windows == 0);
  CHECK(d.cost.state_bytes_per_seq == 0);
  CHECK(d.shape->query_heads == 32);
  CHECK(d.shape->hidden_size == 4096);
  CHECK(full_kv(d.cost, kv_format::f16) == 2 * 32 * 8 * 128 * 2);  // 131072
  CHECK(full_kv(d.cost, kv_format::f16) == 131072);
  CHECK(full_kv(d.cost, kv_format::q8_0) == 69632);
  CHECK(full_kv(d.cost, kv_format::q4_0) == 36864);
  // MTP layers are read from a config.json, not a GGUF: the rule's mtp is refused, saying where to look.
  engine_rule mtp;
  mtp.mtp = true;
  const auto refused = read_gguf(bytes, mtp);
  CHECK_FALSE(refused.value.has_value());
  CHECK(refused.error.find("the engine rule's mtp: pnmem reads a model's MTP layers from its config.json") !=
        std::string::npos);
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
    CHECK(k.description.shape->groups[0].key_dim == 192);
    CHECK(k.description.shape->groups[0].value_dim == 128);
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

TEST_CASE("per-layer head_count_kv: a layer with 0 KV heads keeps no KV, the others one group per count") {
  // A DeciLM (Nemotron-NAS) style model: attention in one layer of 8 (the others no-op), 8 KV heads each.
  std::vector<std::int64_t> kv(32, 0);
  for (std::size_t i = 4; i < 32; i += 8) kv[i] = 8;  // layers 4, 12, 20, 28
  gguf_writer w;
  w.str("general.architecture", "deci")
      .u32("deci.block_count", 32)
      .u32("deci.attention.head_count", 32)
      .ints("deci.attention.head_count_kv", gguf_t::i32, kv)
      .u32("deci.embedding_length", 4096)
      .u32("deci.context_length", 131072);
  gguf_model g = read_ok(w.bytes());
  CHECK(groups_of(g.description) == std::vector<layer_group>{attention_layers(layer_kind::full, 4, 8, 128, 128)});
  CHECK(full_kv(g.description.cost, kv_format::f16) == 4 * 2 * 8 * 128 * 2);  // 16384
  CHECK(g.summary.context_length == 131072);

  SUBCASE("uneven counts: each layer costed at its own, one group per count") {
    kv[4] = 2;
    kv[12] = 4;
    gguf_writer u;
    u.str("general.architecture", "deci").u32("deci.block_count", 32).u32("deci.attention.head_count", 32)
        .ints("deci.attention.head_count_kv", gguf_t::u16, kv).u32("deci.embedding_length", 4096);
    g = read_ok(u.bytes());
    CHECK(groups_of(g.description) == std::vector<layer_group>{attention_layers(layer_kind::full, 1, 2, 128, 128),
                                                               attention_layers(layer_kind::full, 1, 4, 128, 128),
                                                               attention_layers(layer_kind::full, 2, 8, 128, 128)});
    // (2 + 4 + 8 + 8) KV heads x 2 (K, V) x 128 dims x 2 bytes
    CHECK(full_kv(g.description.cost, kv_format::f16) == (2 + 4 + 8 + 8) * 2 * 128 * 2);  // 11264
  }
  SUBCASE("a per-layer head_count array too") {
    std::vector<std::int64_t> q(32, 0);
    for (std::size_t i = 4; i < 32; i += 8) q[i] = 32;
    gguf_writer u;
    u.str("general.architecture", "deci").u32("deci.block_count", 32).ints("deci.attention.head_count", gguf_t::u32, q)
        .ints("deci.attention.head_count_kv", gguf_t::u32, kv).u32("deci.embedding_length", 4096);
    g = read_ok(u.bytes());
    CHECK(g.description.shape->query_heads == 32);
    CHECK(g.description.shape->groups[0].key_dim == 128);
  }
  SUBCASE("more than 8 distinct groups is refused") {
    // KV heads 1 .. 9 in layers 0 .. 8: 2520 query heads divide by each.
    gguf_writer u;
    u.str("general.architecture", "deci").u32("deci.block_count", 9).u32("deci.attention.head_count", 2520)
        .ints("deci.attention.head_count_kv", gguf_t::u32, {1, 2, 3, 4, 5, 6, 7, 8, 9})
        .u32("deci.attention.key_length", 64).u32("deci.attention.value_length", 64).u32("deci.embedding_length", 4096);
    CHECK(contains(read_error(u.bytes()), "deci.block_count: more than 8 distinct kinds of layer"));
  }
  SUBCASE("errors") {
    gguf_writer u;
    u.str("general.architecture", "deci").u32("deci.block_count", 32).u32("deci.attention.head_count", 32)
        .ints("deci.attention.head_count_kv", gguf_t::u32, std::vector<std::int64_t>(31, 8))
        .u32("deci.embedding_length", 4096);
    CHECK(contains(read_error(u.bytes()), "deci.attention.head_count_kv: 31 entries for 32 layers"));
    gguf_writer z;
    z.str("general.architecture", "deci").u32("deci.block_count", 2).u32("deci.attention.head_count", 32)
        .ints("deci.attention.head_count_kv", gguf_t::u32, {0, 0}).u32("deci.embedding_length", 4096);
    CHECK(contains(read_error(z.bytes()), "deci.attention.head_count_kv: every layer has 0 KV heads"));
    gguf_writer n;
    n.str("general.architecture", "deci").u32("deci.block_count", 2).u32("deci.attention.head_count", 32)
        .ints("deci.attention.head_count_kv", gguf_t::i32, {8, -8}).u32("deci.embedding_length", 4096);
    CHECK(contains(read_error(n.bytes()), "deci.attention.head_count_kv: a negative entry"));
    gguf_writer d;
    d.str("general.architecture", "deci").u32("deci.block_count", 2).u32("deci.attention.head_count", 32)
        .ints("deci.attention.head_count_kv", gguf_t::u32, {8, 6}).u32("deci.embedding_length", 4096);
    CHECK(contains(read_error(d.bytes()), "6 KV heads in layer 1 do not divide its 32 query heads"));
  }
}

TEST_CASE("sliding windows: gemma2 alternates, gemma3 every 6th full, gpt-oss alternates, explicit patterns") {
  SUBCASE("gemma2 (google/gemma-2-9b): 42 layers, 21 slide at 4096") {
    gguf_writer w = model("gemma2", 42, 16, 8, 3584);
    w.u32("gemma2.attention.key_length", 256).u32("gemma2.attention.value_length", 256)
        .u32("gemma2.attention.sliding_window", 4096).u32("gemma2.context_length", 8192);
    const model_description d = read_ok(w.bytes()).description;
    // Period 2: even layers slide, odd layers are full.
    CHECK(groups_of(d) == std::vector<layer_group>{attention_layers(layer_kind::full, 21, 8, 256, 256),
                                                   attention_layers(layer_kind::sliding, 21, 8, 256, 256, 4096)});
    CHECK(full_kv(d.cost, kv_format::f16) == 21 * 2 * 8 * 256 * 2);  // 172032
    CHECK(window_kv(d.cost, kv_format::f16, 4096) == 172032);
    CHECK(d.cost.n_windows == 1);
    CHECK(d.cost.windows[0].window == 4096);
  }
  SUBCASE("gemma2 without sliding_window: llama.cpp's default window, 4096") {
    gguf_writer w = model("gemma2", 42, 16, 8, 3584);
    w.u32("gemma2.attention.key_length", 256).u32("gemma2.attention.value_length", 256);
    const model_description d = read_ok(w.bytes()).description;
    CHECK(window_kv(d.cost, kv_format::f16, 4096) == 21 * 2 * 8 * 256 * 2);
  }
  SUBCASE("gemma3 (google/gemma-3-1b-it): 26 layers, 22 slide at 512") {
    gguf_writer w = model("gemma3", 26, 4, 1, 1152);
    w.u32("gemma3.attention.key_length", 256).u32("gemma3.attention.value_length", 256)
        .u32("gemma3.attention.sliding_window", 512);
    const model_description d = read_ok(w.bytes()).description;
    // Layers 5, 11, 17, 23 are full (i % 6 == 5).
    CHECK(groups_of(d) == std::vector<layer_group>{attention_layers(layer_kind::full, 4, 1, 256, 256),
                                                   attention_layers(layer_kind::sliding, 22, 1, 256, 256, 512)});
    CHECK(full_kv(d.cost, kv_format::f16) == 4 * 2 * 1 * 256 * 2);  // 4096
    CHECK(window_kv(d.cost, kv_format::f16, 512) == 22 * 2 * 1 * 256 * 2);  // 22528
  }
  SUBCASE("gpt-oss (openai/gpt-oss-20b): 24 layers, 12 slide at 128") {
    gguf_writer w = model("gpt-oss", 24, 64, 8, 2880);
    w.u32("gpt-oss.attention.key_length", 64).u32("gpt-oss.attention.value_length", 64)
        .u32("gpt-oss.attention.sliding_window", 128);
    const model_description d = read_ok(w.bytes()).description;
    CHECK(d.shape->groups[1] == attention_layers(layer_kind::sliding, 12, 8, 64, 64, 128));
    CHECK(full_kv(d.cost, kv_format::f16) == 12 * 2 * 8 * 64 * 2);  // 24576
    CHECK(d.cost.windows[0].window == 128);
  }
  SUBCASE("an explicit period: every N-th layer full; 0: every layer slides") {
    gguf_writer w = model("gemma3", 26, 4, 1, 1152);
    w.u32("gemma3.attention.key_length", 256).u32("gemma3.attention.sliding_window", 512)
        .u32("gemma3.attention.sliding_window_pattern", 4);
    // Period 4: layers 3, 7, ..., 23 full (6 of them), 20 slide. (No value_length: 1152 / 4 = 288.)
    CHECK(read_ok(w.bytes()).description.shape->groups[1] == attention_layers(layer_kind::sliding, 20, 1, 256, 288, 512));
    gguf_writer all = model("mistral", 32, 32, 8, 4096);
    all.u32("mistral.attention.sliding_window", 4096).u32("mistral.attention.sliding_window_pattern", 0);
    CHECK(groups_of(read_ok(all.bytes()).description) ==
          std::vector<layer_group>{attention_layers(layer_kind::sliding, 32, 8, 128, 128, 4096)});
  }
  SUBCASE("a per-layer pattern array (bools, nonzero = sliding), counted among KV layers only") {
    gguf_writer w = model("cohere2moe", 4, 8, 2, 512);
    w.u32("cohere2moe.attention.sliding_window", 64)
        .ints("cohere2moe.attention.sliding_window_pattern", gguf_t::boolean, {1, 1, 0, 1});
    const model_description d = read_ok(w.bytes()).description;
    CHECK(d.shape->groups[1].layers == 3);
    CHECK(full_kv(d.cost, kv_format::f16) == 1 * 2 * 2 * 64 * 2);
    CHECK(window_kv(d.cost, kv_format::f16, 64) == 3 * 2 * 2 * 64 * 2);
    gguf_writer short_pattern = model("cohere2moe", 4, 8, 2, 512);
    short_pattern.u32("cohere2moe.attention.sliding_window", 64)
        .ints("cohere2moe.attention.sliding_window_pattern", gguf_t::boolean, {1, 1, 0});
    CHECK(contains(read_error(short_pattern.bytes()), "sliding_window_pattern: 3 entries for 4 layers"));
  }
  SUBCASE("an architecture with no built-in period and no pattern: no layer slides (llama.cpp keeps them full)") {
    gguf_writer w = model("qwen2", 28, 28, 4, 3584);
    w.u32("qwen2.attention.sliding_window", 131072);
    const model_description d = read_ok(w.bytes()).description;
    CHECK(groups_of(d) == std::vector<layer_group>{attention_layers(layer_kind::full, 28, 4, 128, 128)});
    CHECK(d.cost.n_windows == 0);
  }
  SUBCASE("no window: the pattern is ignored") {
    gguf_writer w = model("gemma3", 26, 4, 1, 1152);
    w.u32("gemma3.attention.key_length", 256).u32("gemma3.attention.sliding_window_pattern", 6);
    CHECK(groups_of(read_ok(w.bytes()).description) ==
          std::vector<layer_group>{attention_layers(layer_kind::full, 26, 1, 256, 288)});
  }
  SUBCASE("key_length_swa / value_length_swa: the sliding layers' own dims") {
    gguf_writer w = model("gemma3n", 10, 8, 2, 2048);
    w.u32("gemma3n.attention.key_length", 256).u32("gemma3n.attention.value_length", 256)
        .u32("gemma3n.attention.key_length_swa", 512).u32("gemma3n.attention.value_length_swa", 512)
        .u32("gemma3n.attention.sliding_window", 512);
    const model_description d = read_ok(w.bytes()).description;
    // Period 5: layers 4 and 9 full at 256 dims, the 8 others slide at 512.
    CHECK(groups_of(d) == std::vector<layer_group>{attention_layers(layer_kind::full, 2, 2, 256, 256),
                                                   attention_layers(layer_kind::sliding, 8, 2, 512, 512, 512)});
    CHECK(full_kv(d.cost, kv_format::f16) == 2 * 2 * 2 * 256 * 2);          // 4096
    CHECK(window_kv(d.cost, kv_format::f16, 512) == 8 * 2 * 2 * 512 * 2);   // 32768
  }
  SUBCASE("gemma3n: layers 20 and on share earlier layers' KV (llama.cpp's n_layer_kv_from_start = 20)") {
    // google/gemma-3n-E2B's shape: 30 layers, 8 heads, 2 KV heads, head_dim 256, window 512, period 5.
    gguf_writer w = model("gemma3n", 30, 8, 2, 2048);
    w.u32("gemma3n.attention.key_length", 256).u32("gemma3n.attention.value_length", 256)
        .u32("gemma3n.attention.sliding_window", 512);
    const model_description d = read_ok(w.bytes()).description;
    // Layers 0 .. 19: 4 full (4, 9, 14, 19) and 16 sliding; layers 20 .. 29 nothing.
    CHECK(groups_of(d) == std::vector<layer_group>{attention_layers(layer_kind::full, 4, 2, 256, 256),
                                                   attention_layers(layer_kind::sliding, 16, 2, 256, 256, 512)});
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

// --- the layer-group models ----------------------------------------------------------------------------

TEST_CASE("DeepSeek-V3 (deepseek2, MLA): one 576-value latent row per token and layer, no V") {
  const model_description d = read_ok(pnmem::test::deepseek_v3_gguf().bytes()).description;
  CHECK(d.name == "DeepSeek V3");
  // key_length_mla and value_length_mla are set: the cache keeps K only, one row of key_length =
  // kv_lora_rank + qk_rope_head_dim = 512 + 64 = 576 values per token in each of the 61 layers.
  CHECK(groups_of(d) == std::vector<layer_group>{latent_layers(61, 576)});
  CHECK(full_kv(d.cost, kv_format::f16) == 61 * 576 * 2);  // 70,272
  CHECK(full_kv(d.cost, kv_format::f16) == 70272);
  // q8_0: 576 values are 18 blocks of 32, 34 bytes each: 612 bytes a row.
  CHECK(full_kv(d.cost, kv_format::q8_0) == 61 * 18 * 34);  // 37,332
  CHECK(d.cost.state_bytes_per_seq == 0);
  CHECK(d.shape->query_heads == 128);
  pnmem::test::check_json_round_trip(d);

  SUBCASE("under llama.cpp's rule: the same rows, in blocks of 256 cells") {
    const model_description l = read_ok(pnmem::test::deepseek_v3_gguf().bytes(), llama_cpp_rule()).description;
    CHECK(full_kv(l.cost, kv_format::f16) == 70272);
    CHECK(l.cost.kv_block_tokens == 256);
    CHECK(kv_bytes(l.cost, kv_format::f16, 1) == 256 * 70272);
  }
  SUBCASE("an older file without the _mla keys: K and V per head, as llama.cpp costs it") {
    // Converted before llama.cpp cached the latent: head_count_kv 128, key_length qk_nope + qk_rope (192),
    // value_length v_head_dim (128); kv_lora_rank is still written and does not make it MLA.
    gguf_writer w;
    w.str("general.architecture", "deepseek2").u32("deepseek2.block_count", 61).u32("deepseek2.embedding_length", 7168)
        .u32("deepseek2.attention.head_count", 128).u32("deepseek2.attention.head_count_kv", 128)
        .u32("deepseek2.attention.kv_lora_rank", 512).u32("deepseek2.attention.key_length", 192)
        .u32("deepseek2.attention.value_length", 128);
    const model_description old = read_ok(w.bytes()).description;
    CHECK(groups_of(old) == std::vector<layer_group>{attention_layers(layer_kind::full, 61, 128, 192, 128)});
    CHECK(full_kv(old.cost, kv_format::f16) == 61 * 128 * (192 + 128) * 2);  // 4,997,120
  }
  SUBCASE("refused: key_length_mla without key_length, or one _mla key without the other") {
    gguf_writer no_k;
    no_k.str("general.architecture", "deepseek2").u32("deepseek2.block_count", 61)
        .u32("deepseek2.embedding_length", 7168).u32("deepseek2.attention.head_count", 128)
        .u32("deepseek2.attention.head_count_kv", 1).u32("deepseek2.attention.key_length_mla", 192)
        .u32("deepseek2.attention.value_length_mla", 128);
    CHECK(contains(read_error(no_k.bytes()), "deepseek2.attention.key_length: missing (an MLA model"));
    gguf_writer half;
    half.str("general.architecture", "deepseek2").u32("deepseek2.block_count", 61)
        .u32("deepseek2.embedding_length", 7168).u32("deepseek2.attention.head_count", 128)
        .u32("deepseek2.attention.head_count_kv", 1).u32("deepseek2.attention.key_length", 576)
        .u32("deepseek2.attention.key_length_mla", 192);
    CHECK(contains(read_error(half.bytes()),
                   "deepseek2.attention.value_length_mla: missing, but deepseek2.attention.key_length_mla is set"));
  }
}

TEST_CASE("DeepSeek-V3.2 (deepseek32) and GLM-5 (glm-dsa): the lightning indexer's keys in a second K-only cache") {
  // What the converters write (DeepseekV32Model / GlmMoeDsaModel): the MLA keys, and the indexer's
  // head count, key length (index_head_dim) and top-k; glm-dsa also indexer.types when the config has them.
  const auto dsa = pnmem::test::dsa_gguf;
  // llama.cpp (llama_kv_cache_dsa): the latent (576 values) and the indexer's keys (128 values), both of
  // the KV's type, in every layer: f16 61 x (1152 + 256) B, q8_0 61 x (18 + 4 blocks of 34 B).
  const model_description v32 = read_ok(dsa("deepseek32", 61).bytes()).description;
  CHECK(groups_of(v32) == std::vector<layer_group>{latent_layers(61, 576), latent_layers(61, 128)});
  CHECK(full_kv(v32.cost, kv_format::f16) == 61 * (1152 + 256));
  CHECK(full_kv(v32.cost, kv_format::q8_0) == 61 * (18 + 4) * 34);
  const model_description glm = read_ok(dsa("glm-dsa", 78).bytes()).description;
  CHECK(full_kv(glm.cost, kv_format::f16) == 78 * (1152 + 256));
  // glm-dsa's indexer.types: only the flagged layers keep the indexer's cache.
  std::vector<std::int64_t> types(78, 0);
  for (std::size_t i = 0; i < types.size(); ++i) types[i] = i < 3 || (i - 2) % 4 == 0 ? 1 : 0;
  gguf_writer typed = dsa("glm-dsa", 78);
  typed.ints("glm-dsa.attention.indexer.types", gguf_t::boolean, types);
  CHECK(full_kv(read_ok(typed.bytes()).description.cost, kv_format::f16) == 78 * 1152 + 21 * 256);
  // Nothing dropped: the indexer's width missing, or an indexer on an architecture pnmem does not place it for.
  gguf_writer missing;
  missing.str("general.architecture", "deepseek32").u32("deepseek32.block_count", 61).u32("deepseek32.embedding_length", 7168)
      .u32("deepseek32.attention.head_count", 128).u32("deepseek32.attention.head_count_kv", 1)
      .u32("deepseek32.attention.key_length", 576).u32("deepseek32.attention.key_length_mla", 192)
      .u32("deepseek32.attention.value_length_mla", 128);
  CHECK(contains(read_error(missing.bytes()), "deepseek32.attention.indexer.key_length: missing"));
  gguf_writer other = pnmem::test::deepseek_v3_gguf();
  other.u32("deepseek2.attention.indexer.key_length", 128);
  CHECK(contains(read_error(other.bytes()), "deepseek2.attention.indexer.key_length: present, but pnmem does not know"));
}

TEST_CASE("MiMo-V2-Flash (mimo2): per-layer KV heads, a per-layer sliding pattern, K 192 and V 128") {
  // What llama.cpp's converter writes (MimoV2Model): head_count_kv per layer (8 sliding, 4 full), the
  // sliding pattern as a per-layer array (1 slides), key_length head_dim, value_length v_head_dim.
  const gguf_writer w = pnmem::test::mimo_v2_flash_gguf();
  const model_description d = read_ok(w.bytes()).description;
  CHECK(groups_of(d) == std::vector<layer_group>{attention_layers(layer_kind::full, 9, 4, 192, 128),
                                                 attention_layers(layer_kind::sliding, 39, 8, 192, 128, 128)});
  CHECK(full_kv(d.cost, kv_format::f16) == 9 * 4 * (192 + 128) * 2);
}

TEST_CASE("Qwen3-Next-80B-A3B (qwen3next): 12 attention layers, 36 gated-delta layers with an f32 state") {
  const model_description d = read_ok(pnmem::test::qwen3_next_gguf().bytes()).description;
  // full_attention_interval 4: layer i attends iff (i + 1) % 4 == 0 (3, 7, ..., 47): 12 layers; 36 recurrent.
  // Recurrent state per layer: conv (conv_kernel - 1) x (inner + 2 x groups x state) = 3 x (4096 + 2 x 16 x 128)
  // = 3 x 8192 = 24,576 values; SSM state x inner = 128 x 4096 = 524,288 values.
  CHECK(groups_of(d) == std::vector<layer_group>{attention_layers(layer_kind::full, 12, 2, 256, 256),
                                                 recurrent_layers(36, 24576, 524288)});
  CHECK(full_kv(d.cost, kv_format::f16) == 12 * 2 * 2 * 256 * 2);  // 24,576 bytes a token
  CHECK(full_kv(d.cost, kv_format::f16) == 24576);
  // f32: (24,576 + 524,288) x 4 = 2,195,456 bytes a layer, x 36 layers.
  CHECK(d.cost.state_bytes_per_seq == 36 * (24576 + 524288) * 4);  // 79,036,416
  CHECK(d.cost.state_bytes_per_seq == 79036416);
  pnmem::test::check_json_round_trip(d);

  SUBCASE("under llama.cpp's rule: the same f32 state, KV in blocks of 256 cells") {
    const model_description l = read_ok(pnmem::test::qwen3_next_gguf().bytes(), llama_cpp_rule()).description;
    CHECK(l.cost.state_bytes_per_seq == 79036416);
    CHECK(l.cost.kv_block_tokens == 256);
    // 1000 tokens hold 1024 cells: 1024 x 24,576 bytes of KV (and the state, whatever the length).
    CHECK(kv_bytes(l.cost, kv_format::f16, 1000) == 1024ULL * 24576);
  }
  SUBCASE("a per-layer attention.recurrent_layers array wins over the interval") {
    gguf_writer w = pnmem::test::qwen3_next_gguf();
    w.ints("qwen3next.attention.recurrent_layers", gguf_t::boolean,
           pnmem::test::per_layer(48, [](std::size_t i) { return i % 2 == 0; }));  // 24 recurrent, 24 attention
    const model_description a = read_ok(w.bytes()).description;
    CHECK(groups_of(a) == std::vector<layer_group>{attention_layers(layer_kind::full, 24, 2, 256, 256),
                                                   recurrent_layers(24, 24576, 524288)});
  }
  SUBCASE("another interval") {
    gguf_writer w;
    w.str("general.architecture", "qwen3next").u32("qwen3next.block_count", 8).u32("qwen3next.embedding_length", 2048)
        .u32("qwen3next.attention.head_count", 16).u32("qwen3next.attention.head_count_kv", 2)
        .u32("qwen3next.attention.key_length", 256).u32("qwen3next.attention.value_length", 256)
        .u32("qwen3next.ssm.conv_kernel", 4).u32("qwen3next.ssm.state_size", 128).u32("qwen3next.ssm.group_count", 16)
        .u32("qwen3next.ssm.inner_size", 4096).u32("qwen3next.full_attention_interval", 2);
    // Interval 2: layers 1, 3, 5, 7 attend.
    CHECK(groups_of(read_ok(w.bytes()).description) ==
          std::vector<layer_group>{attention_layers(layer_kind::full, 4, 2, 256, 256), recurrent_layers(4, 24576, 524288)});
  }
  SUBCASE("refused: a recurrent layer without the keys its state is sized from, a bad interval or flag array") {
    auto without = [](const std::string& drop) {
      gguf_writer w;
      w.str("general.architecture", "qwen3next").u32("qwen3next.block_count", 48)
          .u32("qwen3next.embedding_length", 2048).u32("qwen3next.attention.head_count", 16)
          .u32("qwen3next.attention.head_count_kv", 2).u32("qwen3next.attention.key_length", 256);
      for (const char* k : {"conv_kernel", "state_size", "group_count", "inner_size"}) {
        if (drop != k) w.u32(std::string("qwen3next.ssm.") + k, std::string(k) == "conv_kernel" ? 4 : 128);
      }
      return read_error(w.bytes());
    };
    CHECK(contains(without("inner_size"), "qwen3next.ssm.inner_size: missing (qwen3next layer 0 is recurrent"));
    CHECK(contains(without("conv_kernel"), "qwen3next.ssm.conv_kernel: missing"));
    CHECK(contains(without("state_size"), "qwen3next.ssm.state_size: missing"));
    CHECK(contains(without("group_count"), "qwen3next.ssm.group_count: missing"));
    gguf_writer w;
    w.str("general.architecture", "qwen3next").u32("qwen3next.block_count", 48).u32("qwen3next.embedding_length", 2048)
        .u32("qwen3next.attention.head_count", 16).u32("qwen3next.attention.head_count_kv", 2)
        .u32("qwen3next.full_attention_interval", 0);
    CHECK(contains(read_error(w.bytes()), "qwen3next.full_attention_interval: 0 is out of range (1 to 1048576)"));
    gguf_writer flag = pnmem::test::qwen3_next_gguf();
    flag.u32("qwen3next.attention.recurrent_layers", 1);
    CHECK(contains(read_error(flag.bytes()), "qwen3next.attention.recurrent_layers: expected a per-layer array"));
    gguf_writer count = pnmem::test::qwen3_next_gguf();
    count.ints("qwen3next.attention.recurrent_layers", gguf_t::boolean, {1, 0});
    CHECK(contains(read_error(count.bytes()), "qwen3next.attention.recurrent_layers: 2 entries for 48 layers"));
  }
}

TEST_CASE("Qwen3.5-9B (qwen35) with its MTP block: the last nextn_predict_layers keep no KV and no state") {
  const model_description d = read_ok(pnmem::test::qwen35_9b_gguf().bytes()).description;
  // 33 layers, the last (32) the MTP block. Of layers 0 .. 31, (i + 1) % 4 == 0 attend: 8 layers of 4 KV
  // heads x 256; the other 24 are gated-delta layers (the same state as Qwen3-Next's: 24,576 + 524,288).
  CHECK(groups_of(d) == std::vector<layer_group>{attention_layers(layer_kind::full, 8, 4, 256, 256),
                                                 recurrent_layers(24, 24576, 524288)});
  CHECK(full_kv(d.cost, kv_format::f16) == 8 * 2 * 4 * 256 * 2);               // 32,768
  CHECK(d.cost.state_bytes_per_seq == 24ULL * (24576 + 524288) * 4);          // 52,690,944
  gguf_writer big;
  big.str("general.architecture", "qwen35").u32("qwen35.block_count", 33).u32("qwen35.embedding_length", 4096)
      .u32("qwen35.attention.head_count", 16).u32("qwen35.nextn_predict_layers", 33);
  CHECK(contains(read_error(big.bytes()), "qwen35.nextn_predict_layers: 33 is out of range (0 to 32)"));
}

TEST_CASE("Llama-4-Scout (llama4): 36 layers keep a chunk of 8192 tokens, 12 keep every token") {
  const model_description d = read_ok(pnmem::test::llama4_scout_gguf().bytes()).description;
  // set_swa_pattern(4): layer i is chunked iff i % 4 < 3: 36 chunked, 12 full (3, 7, ..., 47).
  CHECK(groups_of(d) == std::vector<layer_group>{attention_layers(layer_kind::full, 12, 8, 128, 128),
                                                 attention_layers(layer_kind::chunked, 36, 8, 128, 128, 8192)});
  // 2 (K, V) x 8 heads x 128 dims x 2 bytes = 4096 bytes a layer.
  CHECK(full_kv(d.cost, kv_format::f16) == 12 * 4096);                  // 49,152
  CHECK(window_kv(d.cost, kv_format::f16, 8192) == 36 * 4096);          // 147,456

  SUBCASE("under llama.cpp's rule the chunked layers keep pad256(8192 + 512) = 8704 cells") {
    const model_description l = read_ok(pnmem::test::llama4_scout_gguf().bytes(), llama_cpp_rule()).description;
    CHECK(window_kv(l.cost, kv_format::f16, 8704) == 147456);
    CHECK(l.cost.kv_block_tokens == 256);
  }
  SUBCASE("a sliding_window of 0 turns chunking off; any other value is not the chunk") {
    gguf_writer off = pnmem::test::llama4_scout_gguf();
    off.u32("llama4.attention.sliding_window", 0);
    CHECK(groups_of(read_ok(off.bytes()).description) ==
          std::vector<layer_group>{attention_layers(layer_kind::full, 48, 8, 128, 128)});
    gguf_writer other = pnmem::test::llama4_scout_gguf();
    other.u32("llama4.attention.sliding_window", 4096);
    CHECK(read_ok(other.bytes()).description.shape->groups[1].span == 8192);
  }
}

TEST_CASE("Gemma 3 27B (gemma3): 10 full layers, 52 sliding at 1024; llama.cpp keeps 1536 of them") {
  const std::string bytes = pnmem::test::gemma3_27b_gguf().bytes();
  const model_description d = read_ok(bytes).description;
  // Period 6: layers 5, 11, ..., 59 full (62 / 6 = 10 of them), 52 slide.
  CHECK(groups_of(d) == std::vector<layer_group>{attention_layers(layer_kind::full, 10, 16, 128, 128),
                                                 attention_layers(layer_kind::sliding, 52, 16, 128, 128, 1024)});
  // 2 x 16 x 128 x 2 = 8192 bytes a layer.
  CHECK(full_kv(d.cost, kv_format::f16) == 10 * 8192);                 // 81,920
  CHECK(window_kv(d.cost, kv_format::f16, 1024) == 52 * 8192);         // 425,984
  // 100,000 tokens: every token in the full layers, 1024 in the sliding ones.
  CHECK(kv_bytes(d.cost, kv_format::f16, 100000) == 100000ULL * 81920 + 1024ULL * 425984);  // 8,628,207,616
  pnmem::test::check_json_round_trip(d);

  SUBCASE("llama.cpp, one sequence a stream: the window becomes pad256(1024 + 512) = 1536, the context 256-cell blocks") {
    const model_description l = read_ok(bytes, llama_cpp_rule()).description;
    CHECK(l.cost.kv_block_tokens == 256);
    CHECK(l.cost.n_windows == 1);
    CHECK(window_kv(l.cost, kv_format::f16, 1536) == 425984);
    CHECK(full_kv(l.cost, kv_format::f16) == 81920);
    // 100,000 tokens hold 100,096 cells (391 x 256): all in the full layers, 1536 in the sliding ones.
    CHECK(kv_bytes(l.cost, kv_format::f16, 100000) == 100096ULL * 81920 + 1536ULL * 425984);  // 8,854,175,744
    // 1000 tokens: 1024 cells in every layer.
    CHECK(kv_bytes(l.cost, kv_format::f16, 1000) == 1024ULL * (81920 + 425984));
    pnmem::test::check_json_round_trip(l);
  }
  SUBCASE("llama-server -np auto (4 sequences, one unified cache): ceil(pad256(4 x 1024 + 512) / 4) = 1152") {
    const model_description l = read_ok(bytes, llama_cpp_rule(4)).description;
    CHECK(window_kv(l.cost, kv_format::f16, 1152) == 425984);
  }
}

TEST_CASE("Nemotron-3-Nano-30B-A3B (nemotron_h_moe): 6 attention layers, 23 Mamba-2 layers, 23 MoE layers") {
  const model_description d = read_ok(pnmem::test::nemotron3_nano_gguf().bytes()).description;
  // Layer i: recurrent iff head_count_kv[i] == 0 and feed_forward_length[i] == 0 (the 23 M layers);
  // attention iff feed_forward_length[i] == 0 and not recurrent (the 6 * layers); the 23 E layers neither.
  // Mamba-2 state: conv 3 x (4096 + 2 x 8 x 128) = 3 x 6144 = 18,432 values, SSM 128 x 4096 = 524,288.
  CHECK(groups_of(d) == std::vector<layer_group>{attention_layers(layer_kind::full, 6, 2, 128, 128),
                                                 recurrent_layers(23, 18432, 524288)});
  CHECK(full_kv(d.cost, kv_format::f16) == 6 * 2 * 2 * 128 * 2);               // 6,144
  CHECK(d.cost.state_bytes_per_seq == 23ULL * (18432 + 524288) * 4);          // 49,930,240
  CHECK(d.cost.state_bytes_per_seq == 49930240);
  CHECK(d.shape->query_heads == 32);

  SUBCASE("refused: no feed_forward_length (the MoE layers could not be told from the Mamba ones)") {
    gguf_writer w;
    w.str("general.architecture", "nemotron_h_moe").u32("nemotron_h_moe.block_count", 3)
        .u32("nemotron_h_moe.embedding_length", 2688).u32("nemotron_h_moe.attention.head_count", 32)
        .ints("nemotron_h_moe.attention.head_count_kv", gguf_t::i32, {0, 0, 2});
    CHECK(contains(read_error(w.bytes()), "nemotron_h_moe.feed_forward_length: missing"));
  }
  SUBCASE("refused: nothing but MLP layers keeps neither KV nor state") {
    gguf_writer w;
    w.str("general.architecture", "nemotron_h").u32("nemotron_h.block_count", 2).u32("nemotron_h.embedding_length", 2688)
        .u32("nemotron_h.attention.head_count", 32).ints("nemotron_h.attention.head_count_kv", gguf_t::i32, {0, 0})
        .u32("nemotron_h.feed_forward_length", 1856);
    CHECK(contains(read_error(w.bytes()), "nemotron_h.block_count: no layer of this nemotron_h model keeps a KV cache or a recurrent state"));
  }
}

TEST_CASE("Falcon-H1 (falcon-h1): every layer holds attention KV and a Mamba-2 state") {
  // Illustrative values in Falcon-H1-0.5B's shape (no fixture): 36 layers, 8 heads, 2 KV heads of 64,
  // mamba_d_ssm 1536, d_state 128, 1 group, d_conv 4, as FalconH1Model writes them.
  gguf_writer w;
  w.str("general.architecture", "falcon-h1").u32("falcon-h1.block_count", 36).u32("falcon-h1.embedding_length", 1024)
      .u32("falcon-h1.feed_forward_length", 2048).u32("falcon-h1.attention.head_count", 8)
      .u32("falcon-h1.attention.head_count_kv", 2).u32("falcon-h1.attention.key_length", 64)
      .u32("falcon-h1.attention.value_length", 64).u32("falcon-h1.ssm.conv_kernel", 4)
      .u32("falcon-h1.ssm.inner_size", 1536).u32("falcon-h1.ssm.state_size", 128)
      .u32("falcon-h1.ssm.time_step_rank", 24).u32("falcon-h1.ssm.group_count", 1);
  const model_description d = read_ok(w.bytes()).description;
  // conv 3 x (1536 + 2 x 1 x 128) = 5,376 values; SSM 128 x 1536 = 196,608.
  CHECK(groups_of(d) == std::vector<layer_group>{attention_layers(layer_kind::full, 36, 2, 64, 64),
                                                 recurrent_layers(36, 5376, 196608)});
  CHECK(full_kv(d.cost, kv_format::f16) == 36 * 2 * 2 * 64 * 2);             // 18,432
  CHECK(d.cost.state_bytes_per_seq == 36ULL * (5376 + 196608) * 4);          // 29,085,696
}

TEST_CASE("Gemma 4 (gemma4): full layers 512 dims and fewer KV heads, sliding 256; shared KV layers") {
  SUBCASE("gemma-4-31B-it: 10 full layers of 4 KV heads x 512, 50 sliding of 16 x 256 at 1024") {
    const model_description d = read_ok(pnmem::test::gemma4_31b_gguf().bytes()).description;
    CHECK(groups_of(d) == std::vector<layer_group>{attention_layers(layer_kind::full, 10, 4, 512, 512),
                                                   attention_layers(layer_kind::sliding, 50, 16, 256, 256, 1024)});
    CHECK(full_kv(d.cost, kv_format::f16) == 10 * 2 * 4 * 512 * 2);               // 81,920
    CHECK(window_kv(d.cost, kv_format::f16, 1024) == 50 * 2 * 16 * 256 * 2);      // 819,200
    pnmem::test::check_json_round_trip(d);
  }
  SUBCASE("gemma-4-E2B-it: the last 20 of 35 layers share KV; of layers 0 .. 14, 4, 9, 14 are full") {
    const model_description d = read_ok(pnmem::test::gemma4_e2b_gguf().bytes()).description;
    CHECK(groups_of(d) == std::vector<layer_group>{attention_layers(layer_kind::full, 3, 1, 512, 512),
                                                   attention_layers(layer_kind::sliding, 12, 1, 256, 256, 512)});
    CHECK(full_kv(d.cost, kv_format::f16) == 3 * 2 * 1 * 512 * 2);               // 6,144
    CHECK(window_kv(d.cost, kv_format::f16, 512) == 12 * 2 * 1 * 256 * 2);        // 12,288
  }
  SUBCASE("refused: no per-layer pattern, no window, every layer shared") {
    gguf_writer base;
    base.str("general.architecture", "gemma4").u32("gemma4.block_count", 6).u32("gemma4.embedding_length", 1536)
        .u32("gemma4.attention.head_count", 8).u32("gemma4.attention.head_count_kv", 1)
        .u32("gemma4.attention.key_length", 512);
    gguf_writer no_pattern = base;
    no_pattern.u32("gemma4.attention.sliding_window", 512);
    CHECK(contains(read_error(no_pattern.bytes()), "gemma4.attention.sliding_window_pattern: missing"));
    gguf_writer scalar_pattern = base;
    scalar_pattern.u32("gemma4.attention.sliding_window", 512).u32("gemma4.attention.sliding_window_pattern", 6);
    CHECK(contains(read_error(scalar_pattern.bytes()), "gemma4.attention.sliding_window_pattern: expected a per-layer array"));
    CHECK(contains(read_error(base.bytes()), "gemma4.attention.sliding_window: missing"));
    gguf_writer shared = base;
    shared.u32("gemma4.attention.shared_kv_layers", 6);
    CHECK(contains(read_error(shared.bytes()), "gemma4.attention.shared_kv_layers: 6 is out of range (0 to 5)"));
  }
}

TEST_CASE("Jamba 1.5 Mini (jamba): 4 attention layers, 28 Mamba layers (no groups)") {
  const model_description d = read_ok(pnmem::test::jamba_mini_gguf().bytes()).description;
  // head_count_kv 8 in layers 4, 12, 20, 28; 0 elsewhere: recurrent. Mamba-1 state (llama.cpp reads no
  // group count for jamba): conv 3 x 8192 = 24,576 values, SSM 16 x 8192 = 131,072.
  CHECK(groups_of(d) == std::vector<layer_group>{attention_layers(layer_kind::full, 4, 8, 128, 128),
                                                 recurrent_layers(28, 24576, 131072)});
  CHECK(full_kv(d.cost, kv_format::f16) == 4 * 2 * 8 * 128 * 2);              // 16,384
  CHECK(d.cost.state_bytes_per_seq == 28ULL * (24576 + 131072) * 4);         // 17,432,576
  CHECK(d.cost.state_bytes_per_seq == 17432576);

  SUBCASE("refused: a Mamba layer without the ssm keys") {
    gguf_writer w;
    w.str("general.architecture", "jamba").u32("jamba.block_count", 2).u32("jamba.attention.head_count", 32)
        .ints("jamba.attention.head_count_kv", gguf_t::u32, {0, 8}).u32("jamba.embedding_length", 4096);
    CHECK(contains(read_error(w.bytes()), "jamba.ssm.conv_kernel: missing (jamba layer 0 is recurrent"));
  }
}

TEST_CASE("granitehybrid: a layer with 0 KV heads is a Mamba-2 layer") {
  // Illustrative: 4 layers, the last one attention (2 KV heads x 64), Mamba-2 inner 512, state 64, 1 group.
  gguf_writer w;
  w.str("general.architecture", "granitehybrid").u32("granitehybrid.block_count", 4)
      .u32("granitehybrid.embedding_length", 256).u32("granitehybrid.attention.head_count", 4)
      .ints("granitehybrid.attention.head_count_kv", gguf_t::i32, {0, 0, 0, 2})
      .u32("granitehybrid.attention.key_length", 64).u32("granitehybrid.attention.value_length", 64)
      .u32("granitehybrid.ssm.conv_kernel", 4).u32("granitehybrid.ssm.inner_size", 512)
      .u32("granitehybrid.ssm.state_size", 64).u32("granitehybrid.ssm.group_count", 1)
      .u32("granitehybrid.ssm.time_step_rank", 8);
  const model_description d = read_ok(w.bytes()).description;
  // conv 3 x (512 + 2 x 1 x 64) = 1,920 values; SSM 64 x 512 = 32,768.
  CHECK(groups_of(d) == std::vector<layer_group>{attention_layers(layer_kind::full, 1, 2, 64, 64),
                                                 recurrent_layers(3, 1920, 32768)});
  CHECK(d.cost.state_bytes_per_seq == 3ULL * (1920 + 32768) * 4);  // 416,256
}

TEST_CASE("pure SSMs: Mamba-Codestral (mamba2) and Mamba (mamba), every layer a state, no KV") {
  SUBCASE("Mamba-Codestral-7B-v0.1: 64 Mamba-2 layers") {
    const model_description d = read_ok(pnmem::test::mamba_codestral_gguf().bytes()).description;
    // conv 3 x (8192 + 2 x 8 x 128) = 3 x 10,240 = 30,720 values; SSM 128 x 8192 = 1,048,576.
    CHECK(groups_of(d) == std::vector<layer_group>{recurrent_layers(64, 30720, 1048576)});
    CHECK(full_kv(d.cost, kv_format::f16) == 0);
    CHECK(d.cost.n_windows == 0);
    CHECK(d.cost.state_bytes_per_seq == 64ULL * (30720 + 1048576) * 4);  // 276,299,776
    CHECK(d.shape->query_heads == 0);
    // Under llama.cpp's rule: the same f32 state, whatever the length.
    const model_description l = read_ok(pnmem::test::mamba_codestral_gguf().bytes(), llama_cpp_rule()).description;
    CHECK(l.cost.state_bytes_per_seq == 276299776);
    CHECK(kv_bytes(l.cost, kv_format::f16, 100000) == 0);
    pnmem::test::check_json_round_trip(d);
  }
  SUBCASE("mamba (Mamba-1, state-spaces/mamba-130m's shape): no group count") {
    gguf_writer w;
    w.str("general.architecture", "mamba").u32("mamba.context_length", 1048576).u32("mamba.embedding_length", 768)
        .u32("mamba.feed_forward_length", 0).u32("mamba.attention.head_count", 0).u32("mamba.block_count", 24)
        .u32("mamba.ssm.conv_kernel", 4).u32("mamba.ssm.inner_size", 1536).u32("mamba.ssm.state_size", 16)
        .u32("mamba.ssm.time_step_rank", 48).boolean("mamba.ssm.dt_b_c_rms", false);
    const model_description d = read_ok(w.bytes()).description;
    // conv 3 x 1536 = 4,608 values; SSM 16 x 1536 = 24,576.
    CHECK(groups_of(d) == std::vector<layer_group>{recurrent_layers(24, 4608, 24576)});
    CHECK(d.cost.state_bytes_per_seq == 24ULL * (4608 + 24576) * 4);  // 2,801,664
  }
  SUBCASE("refused: mamba2 without its group count") {
    gguf_writer w;
    w.str("general.architecture", "mamba2").u32("mamba2.embedding_length", 4096).u32("mamba2.block_count", 64)
        .u32("mamba2.ssm.conv_kernel", 4).u32("mamba2.ssm.inner_size", 8192).u32("mamba2.ssm.state_size", 128);
    CHECK(contains(read_error(w.bytes()), "mamba2.ssm.group_count: missing (mamba2 layer 0 is recurrent"));
  }
}

TEST_CASE("phi3: llama.cpp disables sliding windows, every layer keeps every token") {
  const model_description d = read_ok(pnmem::test::phi3_mini_gguf().bytes()).description;
  // Phi-3-mini-4k: sliding_window 2047 is in the file; 32 layers x 32 KV heads x 96 dims (3072 / 32), full.
  CHECK(groups_of(d) == std::vector<layer_group>{attention_layers(layer_kind::full, 32, 32, 96, 96)});
  CHECK(full_kv(d.cost, kv_format::f16) == 32 * 2 * 32 * 96 * 2);  // 393,216
  CHECK(d.cost.n_windows == 0);
  gguf_writer w = pnmem::test::phi3_mini_gguf();
  w.u32("phi3.attention.sliding_window_pattern", 2);
  CHECK(read_ok(w.bytes()).description.cost.n_windows == 0);
}

TEST_CASE("a recurrent state pnmem cannot place is refused, naming the key") {
  gguf_writer ssm = model("mystery", 4, 8, 2, 512);
  ssm.u32("mystery.ssm.state_size", 16);
  CHECK(contains(read_error(ssm.bytes()), "mystery.ssm.state_size: present, but pnmem does not know which layers of a \"mystery\" model"));
  gguf_writer lfm = model("lfm2", 4, 8, 2, 512);
  lfm.u32("lfm2.shortconv.l_cache", 3);
  CHECK(contains(read_error(lfm.bytes()), "lfm2.shortconv.l_cache: present"));
  gguf_writer rwkv = model("rwkv7", 4, 8, 2, 512);
  rwkv.u32("rwkv7.wkv.head_size", 64);
  CHECK(contains(read_error(rwkv.bytes()), "rwkv7.wkv.head_size: present"));
  gguf_writer kda = model("kimi_linear", 4, 8, 2, 512);
  kda.u32("kimi_linear.kda.head_dim", 128);
  CHECK(contains(read_error(kda.bytes()), "kimi_linear.kda.head_dim: present"));
  // Another architecture's keys are not this one's.
  gguf_writer other = model("llama", 4, 8, 2, 512);
  other.u32("mamba.ssm.state_size", 16);
  CHECK(read_ok(other.bytes()).description.cost.state_bytes_per_seq == 0);
}

TEST_CASE("the GGUF reader agrees with the config.json reader on the same models (under llama.cpp's rule)") {
  // gguf_writer.hpp writes each model's metadata with the keys llama.cpp's converter writes for the
  // config.json beside it in tests/fixtures/models; both readers must then price the same model the same
  // way: the KV of every format, the windows, the state, the blocks (GGUF has no dtype: its normal
  // format is f16 where the config says bf16, so the formats are left out).
  pnmem::engine_rule llama;
  llama.engine = pnmem::kv_engine::llama_cpp;
  auto same = [](model_cost a, model_cost b) {
    a.normal_kv = b.normal_kv;
    a.compact_kv = b.compact_kv;
    return a == b;
  };
  const struct {
    const char* fixture;
    std::string gguf;
  } pairs[] = {
      {"deepseek-v3.config.json", pnmem::test::deepseek_v3_gguf().bytes()},
      {"qwen3-next-80b-a3b-thinking.config.json", pnmem::test::qwen3_next_gguf().bytes()},
      {"gemma-3-27b-it.config.json", pnmem::test::gemma3_27b_gguf().bytes()},
      {"nemotron-3-nano-30b-a3b.config.json", pnmem::test::nemotron3_nano_gguf().bytes()},
      {"mamba-codestral-7b-v0.1.config.json", pnmem::test::mamba_codestral_gguf().bytes()},
  };
  for (const auto& p : pairs) {
    CAPTURE(p.fixture);
    const auto hf = pnmem::model_files::read_hf_config(pnmem::test::model_fixture(p.fixture), llama);
    const auto gg = read_gguf(p.gguf, llama);
    REQUIRE_MESSAGE(hf.value.has_value(), hf.error);
    REQUIRE_MESSAGE(gg.value.has_value(), gg.error);
    CHECK(same(hf.value->cost, gg.value->cost));
    CHECK(hf.value->cost.state_bytes_per_seq == gg.value->cost.state_bytes_per_seq);
    CHECK(pnmem::kv_bytes(hf.value->cost, kv_format::f16, 131072) == pnmem::kv_bytes(gg.value->cost, kv_format::f16, 131072));
  }
  // Llama 4 Scout: no public config.json is stored here (tests/fixtures/models/README.md); the config
  // with transformers' keys and Scout's sizes, as test_hf_config.cpp reads it.
  const std::string scout = R"({"architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4",
    "text_config": {"model_type": "llama4_text", "num_hidden_layers": 48, "num_attention_heads": 40,
    "num_key_value_heads": 8, "head_dim": 128, "hidden_size": 5120, "attention_chunk_size": 8192}})";
  const auto hf = pnmem::model_files::read_hf_config(scout, llama);
  const auto gg = read_gguf(pnmem::test::llama4_scout_gguf().bytes(), llama);
  REQUIRE_MESSAGE(hf.value.has_value(), hf.error);
  REQUIRE_MESSAGE(gg.value.has_value(), gg.error);
  CHECK(same(hf.value->cost, gg.value->cost));
}
