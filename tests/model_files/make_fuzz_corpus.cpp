// tests/model_files/make_fuzz_corpus.cpp - writes the seed corpora of fuzz_gguf and fuzz_model_json
// (fuzz/corpus/<target>/) from gguf_writer.hpp and the real readers/writer. Not a test; built on request:
//
//   meson compile -C BUILD tests/model_files/make_model_files_corpus
//   BUILD/tests/model_files/make_model_files_corpus fuzz/corpus tests/fixtures/models
//
// fuzz_hf_config's corpus is the fixture configs themselves plus hand-written edge cases (kept as files).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gguf_writer.hpp"
#include "pnmem/cost_model.hpp"
#include "pnmem/model_files/gguf.hpp"
#include "pnmem/model_files/hf_config.hpp"
#include "pnmem/model_files/model_json.hpp"

namespace fs = std::filesystem;
using pnmem::test::gguf_t;
using pnmem::test::gguf_writer;
using pnmem::test::le;
using pnmem::test::model;

namespace {

bool write(const fs::path& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) std::fprintf(stderr, "cannot write %s\n", path.c_str());
  return static_cast<bool>(f);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s FUZZ_CORPUS_DIR MODEL_FIXTURES_DIR\n", argv[0]);
    return 2;
  }
  const fs::path corpus = argv[1];
  const fs::path fixtures = argv[2];
  const fs::path g = corpus / "fuzz_gguf";
  const fs::path j = corpus / "fuzz_model_json";
  fs::create_directories(g);
  fs::create_directories(j);
  bool ok = true;

  // --- GGUF ------------------------------------------------------------------------------------------
  std::vector<std::pair<std::string, std::string>> ggufs;
  const std::string llama = pnmem::test::llama3_8b_gguf().bytes();
  ggufs.emplace_back("llama3-8b-v3", llama);
  ggufs.emplace_back("llama3-8b-v2", pnmem::test::llama3_8b_gguf(2).bytes());
  ggufs.emplace_back("llama3-8b-tensor-infos", llama + pnmem::test::gguf_string("token_embd.weight") + le(2, 4) +
                                                   le(4096, 8) + le(128256, 8) + le(12, 4) + le(0, 8));
  ggufs.emplace_back("truncated-in-header", llama.substr(0, 20));
  ggufs.emplace_back("truncated-in-key", llama.substr(0, 40));
  ggufs.emplace_back("truncated-last-byte", llama.substr(0, llama.size() - 1));
  ggufs.emplace_back("bad-magic", gguf_writer(pnmem::test::llama3_8b_gguf()).magic("GGML").bytes());
  ggufs.emplace_back("version-1", gguf_writer(pnmem::test::llama3_8b_gguf()).version(1).bytes());
  ggufs.emplace_back("big-endian-version", gguf_writer(pnmem::test::llama3_8b_gguf()).version(0x03000000).bytes());
  ggufs.emplace_back("huge-kv-count", gguf_writer(pnmem::test::llama3_8b_gguf()).count_override(1ULL << 62).bytes());
  ggufs.emplace_back("huge-tensor-count", gguf_writer(pnmem::test::llama3_8b_gguf()).tensor_count(1ULL << 40).bytes());
  ggufs.emplace_back("huge-string", model("llama", 32, 32, 8, 4096).raw_kv("x.s", 8, le(1ULL << 40, 8)).bytes());
  ggufs.emplace_back("huge-array", model("llama", 32, 32, 8, 4096).raw_kv("x.a", 9, le(10, 4) + le(1ULL << 24, 8)).bytes());
  ggufs.emplace_back("duplicate-key", model("llama", 32, 32, 8, 4096).u32("llama.block_count", 16).bytes());
  ggufs.emplace_back("bad-bool", model("llama", 32, 32, 8, 4096).raw_kv("x.b", 7, le(2, 1)).bytes());
  ggufs.emplace_back("unknown-type", model("llama", 32, 32, 8, 4096).raw_kv("x.t", 13, le(0, 4)).bytes());
  // The architectures issue 23 added (gguf_writer.hpp: the keys llama.cpp's converter writes for them).
  ggufs.emplace_back("jamba-per-layer-kv", pnmem::test::jamba_mini_gguf().bytes());
  ggufs.emplace_back("deepseek-v3-mla", pnmem::test::deepseek_v3_gguf().bytes());
  ggufs.emplace_back("qwen3next", pnmem::test::qwen3_next_gguf().bytes());
  ggufs.emplace_back("qwen35-mtp", pnmem::test::qwen35_9b_gguf().bytes());
  ggufs.emplace_back("llama4-chunked", pnmem::test::llama4_scout_gguf().bytes());
  ggufs.emplace_back("gemma3-27b", pnmem::test::gemma3_27b_gguf().bytes());
  ggufs.emplace_back("gemma4-31b", pnmem::test::gemma4_31b_gguf().bytes());
  ggufs.emplace_back("gemma4-e2b-shared", pnmem::test::gemma4_e2b_gguf().bytes());
  ggufs.emplace_back("nemotron-h", pnmem::test::nemotron3_nano_gguf().bytes());
  ggufs.emplace_back("mamba2", pnmem::test::mamba_codestral_gguf().bytes());
  ggufs.emplace_back("phi3-swa-off", pnmem::test::phi3_mini_gguf().bytes());
  ggufs.emplace_back("deepseek32-indexer", pnmem::test::dsa_gguf("deepseek32", 61).bytes());
  ggufs.emplace_back("glm-dsa-indexer-types",
                     pnmem::test::dsa_gguf("glm-dsa", 8).ints("glm-dsa.attention.indexer.types", gguf_t::boolean,
                                                              {1, 1, 1, 0, 0, 0, 1, 0}).bytes());
  ggufs.emplace_back("mimo2-per-layer-kv", pnmem::test::mimo_v2_flash_gguf().bytes());
  {
    gguf_writer w = model("gemma2", 42, 16, 8, 3584);
    w.u32("gemma2.attention.key_length", 256).u32("gemma2.attention.value_length", 256)
        .u32("gemma2.attention.sliding_window", 4096).u32("gemma2.context_length", 8192);
    ggufs.emplace_back("gemma2-9b", w.bytes());
  }
  {
    gguf_writer w = model("gemma3", 26, 4, 1, 1152);
    w.u32("gemma3.attention.key_length", 256).u32("gemma3.attention.value_length", 256)
        .u32("gemma3.attention.sliding_window", 512).u32("gemma3.context_length", 32768);
    ggufs.emplace_back("gemma3-1b", w.bytes());
  }
  {
    gguf_writer w = model("gpt-oss", 24, 64, 8, 2880);
    w.u32("gpt-oss.attention.key_length", 64).u32("gpt-oss.attention.value_length", 64)
        .u32("gpt-oss.attention.sliding_window", 128).u32("gpt-oss.context_length", 131072);
    ggufs.emplace_back("gpt-oss-20b", w.bytes());
  }
  {
    gguf_writer w = model("cohere2moe", 4, 8, 2, 512);
    w.u32("cohere2moe.attention.sliding_window", 64)
        .ints("cohere2moe.attention.sliding_window_pattern", gguf_t::boolean, {1, 1, 0, 1});
    ggufs.emplace_back("pattern-array", w.bytes());
  }
  {
    gguf_writer w = model("mistral", 32, 32, 8, 4096);
    w.u32("mistral.attention.sliding_window", 4096).u32("mistral.attention.sliding_window_pattern", 0);
    ggufs.emplace_back("pattern-zero-all-slide", w.bytes());
  }
  {
    gguf_writer w;
    w.u8("x.u8", 1).i8("x.i8", -1).u16("x.u16", 2).i16("x.i16", -2).u32("x.u32", 3).i32("x.i32", -3)
        .f32("x.f32", 0.5f).boolean("x.bool", true).str("x.string", "text").u64("x.u64", 4).i64("x.i64", -4)
        .f64("x.f64", 0.25).ints("x.bools", gguf_t::boolean, {0, 1, 1}).ints("x.u64s", gguf_t::u64, {1, 2, 3})
        .nested_strings("x.nested", {{"a", "bc"}, {}, {"def"}}).strings("x.strings", {"", "one"});
    w.str("general.architecture", "llama").u8("llama.block_count", 32).i16("llama.attention.head_count", 32)
        .u64("llama.attention.head_count_kv", 8).i64("llama.embedding_length", 4096)
        .u32("llama.attention.key_length", 128).u32("llama.attention.value_length", 128);
    ggufs.emplace_back("every-type", w.bytes());
  }
  ggufs.emplace_back("not-dividing", model("llama", 32, 32, 6, 4096).bytes());
  ggufs.emplace_back("empty", "");
  for (const auto& [name, bytes] : ggufs) ok = write(g / name, bytes) && ok;

  // --- model JSON: what write_model_json writes for the fixtures and the GGUFs, and edge cases --------
  std::vector<std::pair<std::string, std::string>> jsons;
  for (const char* f : {"llama-3-8b", "qwen2.5-7b", "mistral-7b-v0.1", "gemma-2-9b", "gemma-3-1b-it",
                        "gemma-3-27b-it", "gpt-oss-20b", "deepseek-v3", "qwen3-next-80b-a3b-thinking",
                        "llama-3.2-90b-vision-instruct", "gemma-4-31b-it", "nemotron-3-nano-30b-a3b",
                        "deepseek-v3.2"}) {
    const auto text = pnmem::model_files::read_text_file((fixtures / (std::string(f) + ".config.json")).string());
    const auto d = text ? pnmem::model_files::read_hf_config(*text.value) : decltype(pnmem::model_files::read_hf_config("")){};
    if (!d) {
      std::fprintf(stderr, "%s: %s%s\n", f, text.error.c_str(), d.error.c_str());
      return 1;
    }
    jsons.emplace_back(std::string("hf-") + f, pnmem::model_files::write_model_json(*d.value));
  }
  for (const auto& [name, bytes] : ggufs) {
    if (name != "llama3-8b-v3" && name != "jamba-per-layer-kv" && name != "gemma2-9b" && name != "pattern-array" &&
        name != "qwen3next" && name != "llama4-chunked") {
      continue;
    }
    const auto d = pnmem::model_files::read_gguf(bytes);
    if (!d) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), d.error.c_str());
      return 1;
    }
    jsons.emplace_back("gguf-" + name, pnmem::model_files::write_model_json(*d.value, -1));
  }
  pnmem::model_files::model_description seed;
  seed.cost = pnmem::seed_model_cost;
  seed.shape = pnmem::seed_model_shape;
  seed.name = "seed";
  jsons.emplace_back("seed", pnmem::model_files::write_model_json(seed));
  pnmem::model_files::model_description pre;
  pre.cost = pnmem::preallocated_model_cost;
  pre.source = "flags";
  jsons.emplace_back("preallocated", pnmem::model_files::write_model_json(pre));
  const std::string minimal =
      R"({"format": "pnmem-model", "version": 1, "kv_bytes_per_token": "128KiB", "activation": {"anchors": [[0, "256MiB"], [1024, "384MiB"]]}})";
  jsons.emplace_back("minimal-units", minimal);
  jsons.emplace_back("coefficients",
                     R"({"format": "pnmem-model", "version": 1, "kv_bytes_per_token": 0, "state_bytes_per_seq": "1GiB", "normal_kv": "bf16", "compact_kv": "q8_0", "activation": {"fixed_bytes": 1, "per_token_sq_bytes": 64}})");
  jsons.emplace_back("shape-value-dim-0",
                     R"({"format": "pnmem-model", "version": 1, "shape": {"layers": 2, "kv_heads": 1, "key_dim": 64}, "kv_bytes_per_token": 512, "activation": {"anchors": [[0, 0]]}})");
  jsons.emplace_back("error-unknown-key", R"({"format": "pnmem-model", "version": 1, "colour": 1})");
  jsons.emplace_back("error-version-3", R"({"format": "pnmem-model", "version": 3})");
  jsons.emplace_back("error-windows-decreasing",
                     R"({"format": "pnmem-model", "version": 2, "kv_bytes_per_token": {"full": 1, "windows": [{"window": 512, "bytes_per_token": 1}, {"window": 128, "bytes_per_token": 1}]}, "activation": {"fixed_bytes": 0}})");
  jsons.emplace_back("v1-sliding",
                     R"({"format": "pnmem-model", "version": 1, "kv_bytes_per_token": {"full": {"q4": 1, "fp32": 2, "f16": 3, "bf16": 4, "fp8": 5, "q8_0": 6, "q4_0": 7}, "sliding": {"q4": 1, "fp32": 2, "f16": 3, "bf16": 4, "fp8": 5, "q8_0": 6, "q4_0": 7}}, "sliding_window": 4096, "activation": {"fixed_bytes": 0}})");
  jsons.emplace_back("error-anchors-decreasing",
                     R"({"format": "pnmem-model", "version": 1, "kv_bytes_per_token": 1, "activation": {"anchors": [[1024, 1], [0, 2]]}})");
  jsons.emplace_back("error-negative", R"({"format": "pnmem-model", "version": 1, "kv_bytes_per_token": -1, "activation": {"fixed_bytes": 0}})");
  jsons.emplace_back("error-not-json", R"({"format": "pnmem-model", )");
  for (const auto& [name, bytes] : jsons) ok = write(j / name, bytes) && ok;

  std::printf("wrote %zu GGUF and %zu JSON inputs\n", ggufs.size(), jsons.size());
  return ok ? 0 : 1;
}
