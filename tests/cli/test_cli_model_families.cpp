// tests/cli/test_cli_model_families.cpp - issue 23's bar, as a user runs it: for every fixture config of
// a public model family (tests/fixtures/models),
//
//   pnmem model --from-hf-config FILE [--engine vllm|llama.cpp] > m.json
//   pnmem admit --model m.json --activation-anchors 0:0 --kv bf16 --prompt N ...
//
// prices N = 1k, 32k and 128k tokens at least at what the engine allocates for one sequence and at most
// 15 % above it (KV and recurrent state; the exact rule: exactly the model's need). What the engines
// allocate is model_files/engine_reference.hpp's account, written down by hand from the configs and the
// engines' code, not read back from pnmem.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../model_files/engine_reference.hpp"
#include "../model_files/gguf_writer.hpp"
#include "cli_support.hpp"
#include "temp_dir.hpp"

namespace {

using nlohmann::json;
using pnmem::test::args_t;
using pnmem::test::env_or_fail;
using pnmem::test::run;
using pnmem::test::run_ok;

}  // namespace

TEST_CASE("every family: pnmem model + pnmem admit price what the engine allocates, within 15 %, at 1k, 32k and 128k") {
  const std::string fixtures = env_or_fail("PNMEM_MODEL_FIXTURES");
  const pnmem::test::temp_dir dir;
  int compared = 0;
  for (const pnmem::test::ref_model& ref : pnmem::test::reference_models()) {
    for (const char* engine : {"exact", "vllm", "llama.cpp"}) {
      CAPTURE(ref.fixture);
      CAPTURE(engine);
      const std::string config = ref.config_text.empty() ? fixtures + "/" + ref.fixture
                                                          : dir.write("assembled.config.json", ref.config_text);
      const std::string description = run_ok({"model", "--from-hf-config", config, "--engine", engine});
      const std::string file = dir.write(ref.fixture + "." + engine + ".json", description);
      for (const std::uint64_t n : {1024ULL, 32768ULL, 131072ULL}) {
        CAPTURE(n);
        const json a = json::parse(run_ok({"--json", "admit", "--model", file, "--activation-anchors", "0:0", "--kv",
                                           "bf16", "--prompt", std::to_string(n), "--host-total", "4TiB",
                                           "--host-avail", "4TiB"}));
        const auto need = a.at("need_bytes").get<std::uint64_t>();
        const std::string e = engine;
        const std::uint64_t want = e == "exact"  ? pnmem::test::exact_bytes(ref, n)
                                   : e == "vllm" ? pnmem::test::vllm_bytes(ref, n)
                                                 : pnmem::test::llama_cpp_bytes(ref, n);
        if (e == "exact") {
          CHECK(need == want);
        } else {
          CHECK(need >= want);
          CHECK(static_cast<double>(need) <= 1.15 * static_cast<double>(want));
        }
        CHECK(a.at("verdict") == "admit");
        ++compared;
      }
    }
  }
  CHECK(compared == 9 * static_cast<int>(pnmem::test::reference_models().size()));
}

TEST_CASE("pnmem admit --encoder-items: each image adds Llama-3.2-Vision's cross-attention KV") {
  const std::string fixtures = env_or_fail("PNMEM_MODEL_FIXTURES");
  const pnmem::test::temp_dir dir;
  const std::string file = dir.write(
      "mllama.json", run_ok({"model", "--from-hf-config", fixtures + "/llama-3.2-90b-vision-instruct.config.json"}));
  const args_t q = {"--json", "admit", "--model", file, "--activation-anchors", "0:0", "--kv", "bf16", "--prompt",
                    "1000", "--host-total", "4TiB", "--host-avail", "4TiB"};
  const auto none = json::parse(run_ok(q)).at("need_bytes").get<std::uint64_t>();
  args_t two = q;
  two.insert(two.end(), {"--images", "2"});
  const json a = json::parse(run_ok(two));
  // 20 layers x 8 KV heads x 128 x 2 (K, V) x 2 B x 6404 tokens an image.
  CHECK(a.at("need_bytes").get<std::uint64_t>() - none == 2ULL * 20 * 4096 * 6404);
  CHECK(a.at("encoder_items") == 2);
}

TEST_CASE("pnmem model --check: one line, known for a snapshot pnmem can price, refused naming the key otherwise") {
  const std::string fixtures = env_or_fail("PNMEM_MODEL_FIXTURES");
  const pnmem::test::temp_dir dir;
  std::filesystem::create_directory(dir.path("v32"));
  std::filesystem::copy_file(fixtures + "/deepseek-v3.2.config.json", dir.path("v32/config.json"));
  // A good snapshot directory: every layer's cache known, the indexer's included (61 x (1152 + 132) B).
  const std::string good = run_ok({"model", "--check", dir.path("v32")});
  CHECK(good == "known: DeepseekV32ForCausalLM (" + dir.path("v32") +
                    "): every layer's cache is known: 78324 B per token in bf16, 0 B of state per sequence, "
                    "under the exact rule\n");
  CHECK(run_ok({"model", "--check", dir.path("v32"), "--engine", "llama.cpp"}).find("85888 B per token in bf16") !=
        std::string::npos);
  // A family pnmem cannot read: refused, naming the key, exit 1.
  std::filesystem::create_directory(dir.path("unknown"));
  dir.write("unknown/config.json", R"({"model_type": "mystery_v9", "num_hidden_layers": 4, "hidden_size": 512,
                                      "num_attention_heads": 8})");
  const auto unknown = run({"model", "--check", dir.path("unknown")});
  CHECK(unknown.exit_code == 1);
  CHECK(unknown.out.rfind("refused: " + dir.path("unknown/config.json") + ": head_dim: missing, and pnmem does not know "
                          "the default of model_type \"mystery_v9\"", 0) == 0);
  CHECK(std::count(unknown.out.begin(), unknown.out.end(), '\n') == 1);
  // A structural key the family's rule does not read (a lightning layer of MiniMax's).
  std::ifstream in(fixtures + "/minimax-m2.config.json");
  json minimax = json::parse(in);
  minimax["attn_type_list"][3] = 0;
  const auto lightning = run({"model", "--check", dir.write("minimax.json", minimax.dump())});
  CHECK(lightning.exit_code == 1);
  CHECK(lightning.out.find("attn_type_list[3]: 0: a lightning (linear) attention layer") != std::string::npos);
  // A broken file, and a directory with no config.json.
  const auto broken = run({"model", "--check", dir.write("broken.json", "{\"num_hidden_layers\": 4,")});
  CHECK(broken.exit_code == 1);
  CHECK(broken.out.rfind("refused: " + dir.path("broken.json") + ": ", 0) == 0);
  std::filesystem::create_directory(dir.path("empty"));
  const auto empty = run({"model", "--check", dir.path("empty")});
  CHECK(empty.exit_code == 1);
  CHECK(empty.out.rfind("refused: ", 0) == 0);
  // A GGUF file, told by its magic.
  const std::string gguf = dir.write("v3.gguf", pnmem::test::deepseek_v3_gguf().bytes());
  CHECK(run_ok({"model", "--check", gguf}).rfind("known: DeepSeek V3 (" + gguf + "): every layer's cache is known: 70272 B "
                                                 "per token in f16", 0) == 0);
  // --json: one object.
  const json j = json::parse(run({"--json", "model", "--check", dir.path("unknown")}).out);
  CHECK(j.at("known") == false);
  CHECK(j.at("error").get<std::string>().find("head_dim: missing") != std::string::npos);
  const json k = pnmem::test::run_json({"model", "--check", dir.path("v32"), "--engine", "vllm"});
  CHECK(k.at("known") == true);
  CHECK(k.at("kv_bytes_per_token") == 78324);
  CHECK(k.at("engine") == "vllm");
  // It reads the model at PATH only: another model flag is a usage error (2).
  CHECK(run({"model", "--check", dir.path("v32"), "--from-hf-config", dir.path("v32")}).exit_code == 2);
}

TEST_CASE("DeepSeek-V3.2 in fp8: vLLM's fp8_ds_mla rows (656 B) under the vllm rule, the model's 576 under exact") {
  const std::string fixtures = env_or_fail("PNMEM_MODEL_FIXTURES");
  const pnmem::test::temp_dir dir;
  const std::string config = fixtures + "/deepseek-v3.2.config.json";
  const auto need = [&](const char* engine) {
    const std::string file = dir.write(std::string("v32.") + engine + ".json",
                                       run_ok({"model", "--from-hf-config", config, "--engine", engine}));
    const json a = json::parse(run_ok({"--json", "admit", "--model", file, "--activation-anchors", "0:0", "--kv",
                                       "fp8", "--prompt", "1000", "--host-total", "4TiB", "--host-avail", "4TiB"}));
    return a.at("need_bytes").get<std::uint64_t>();
  };
  // 61 layers: the latent row and the indexer's 132 B; vLLM's in 64-token blocks (1000 -> 1024 tokens).
  CHECK(need("vllm") == 1024ULL * 61 * (656 + 132));
  CHECK(need("exact") == 1000ULL * 61 * (576 + 132));
  // The summary says so.
  const pnmem::test::process_result r = run({"model", "--from-hf-config", config, "--engine", "vllm", "--summary"});
  CHECK(r.exit_code == 0);
  CHECK(r.err.find("fp8 as vLLM's fp8_ds_mla rows of 656 B") != std::string::npos);
  CHECK(run({"model", "--from-hf-config", config, "--engine", "exact", "--summary"}).err.find("fp8_ds_mla") ==
        std::string::npos);
}
