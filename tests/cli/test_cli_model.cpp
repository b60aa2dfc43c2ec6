// tests/cli/test_cli_model.cpp - the model flags of `pnmem admit`, `load` and `plan`, and `pnmem model`.
//
// Runs the binary named by PNMEM_EXE. Expected host costs are computed by hand (the seed's anchor
// table interpolated) or with pnmem::host_cost_bytes over a model_cost built here, never read back
// from the tool.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>


#include <nlohmann/json.hpp>

#include "pnmem/pnmem.hpp"
#include "cli_support.hpp"
#include "temp_dir.hpp"

namespace {

using nlohmann::json;
using pnmem::GiB;
using pnmem::KiB;
using pnmem::MiB;
using pnmem::TiB;
using pnmem::test::args_t;
using pnmem::test::lines_of;
using pnmem::test::process_result;
using pnmem::test::run;
using pnmem::test::run_json;

args_t operator+(args_t a, const args_t& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::string bytes(std::uint64_t v) { return std::to_string(v); }
std::uint64_t u64(const json& j) { return j.get<std::uint64_t>(); }

using pnmem::test::temp_dir;

// The Llama-3-8B shape: 32 layers x 8 KV heads x 128 dims, f16: 2 x 32 x 8 x 128 x 2 B = 128 KiB per token.
const args_t llama_flags{"--layers", "32", "--kv-heads", "8", "--head-dim", "128", "--kv-dtype", "f16"};
constexpr std::uint64_t llama_f16 = 131072;

// The seed's activation table (cost_model.hpp), written out again so the test does not read it back.
constexpr std::uint64_t seed_anchor_tokens[] = {0, 1024, 4096, 16384, 65536, 262144};
constexpr std::uint64_t seed_anchor_peaks[] = {256 * MiB, 384 * MiB, 3 * GiB / 2, 69 * GiB / 4, 1041 * GiB / 4,
                                               16449 * GiB / 4};

// The seed table's peak at n, by hand: interpolated rounding up inside it (n <= 262144 here).
std::uint64_t seed_peak_by_hand(std::uint64_t n) {
  if (n == 0) return seed_anchor_peaks[0];
  for (std::size_t i = 1; i < 6; ++i) {
    if (n <= seed_anchor_tokens[i]) {
      const std::uint64_t span = seed_anchor_tokens[i] - seed_anchor_tokens[i - 1];
      const std::uint64_t num = (seed_anchor_peaks[i] - seed_anchor_peaks[i - 1]) * (n - seed_anchor_tokens[i - 1]);
      return seed_anchor_peaks[i - 1] + num / span + (num % span != 0 ? 1 : 0);
    }
  }
  FAIL("past the table");
  return 0;
}

// The model the Llama flags describe, built here: 131072 B/token in f16, the seed's activation table.
pnmem::model_cost llama_cost() {
  pnmem::model_cost m = pnmem::seed_model_cost;
  m.full_kv_bytes_per_token.fill(0);
  m.full_kv_bytes_per_token[static_cast<std::size_t>(pnmem::kv_format::f16)] = llama_f16;
  m.normal_kv = pnmem::kv_format::f16;
  return m;
}

args_t admit_args(std::uint64_t total, std::uint64_t avail, int prompt) {
  return {"admit", "--host-total", bytes(total), "--host-avail", bytes(avail), "--prompt", std::to_string(prompt)};
}

// Expects a usage error: exit 2, nothing on stdout, one "pnmem: error:" line naming `flag`.
void check_usage_error(const args_t& args, const std::string& flag) {
  const process_result r = run(args);
  INFO("args: ", json(args).dump(), " stderr: ", r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK(lines_of(r.err).size() == 1);
  CHECK(r.err.rfind("pnmem: error: ", 0) == 0);
  CHECK(r.err.find(flag) != std::string::npos);
}

}  // namespace

// ---------------------------------------------------------------- admit

TEST_CASE("model flags: the Llama-3-8B shape costs 131072 B/token plus the seed's activation peak") {
  for (const int n : {0, 1, 1000, 1024, 4096, 8192, 20000}) {
    CAPTURE(n);
    const json j = run_json(admit_args(1024 * GiB, 1000 * GiB, n) + llama_flags);
    CHECK(j.at("verdict") == "admit");
    CHECK(j.at("kv") == "f16");  // --kv-dtype is also the request's format
    CHECK(u64(j.at("need_bytes")) == llama_f16 * static_cast<std::uint64_t>(n) + seed_peak_by_hand(static_cast<std::uint64_t>(n)));
    CHECK(j.at("model").at("kv_bytes_per_token") == llama_f16);
    CHECK(j.at("model").at("kv") == "f16");
  }
  // Two points by hand, all the way: 1000 tokens interpolate 0..1024, 8192 tokens 4096..16384.
  CHECK(u64(run_json(admit_args(64 * GiB, 60 * GiB, 1000) + llama_flags).at("need_bytes")) ==
        131072ULL * 1000 + 256 * MiB + 131072000ULL);
  CHECK(u64(run_json(admit_args(64 * GiB, 60 * GiB, 8192) + llama_flags).at("need_bytes")) ==
        1 * GiB + 27 * GiB / 4);  // 1 GiB of KV + 6.75 GiB of activation
  // Another request format is priced from the same shape: fp32 twice f16, q8_0 34 B per 32 values.
  CHECK(u64(run_json(admit_args(64 * GiB, 60 * GiB, 1000) + llama_flags + args_t{"--kv", "fp32"}).at("need_bytes")) ==
        262144ULL * 1000 + seed_peak_by_hand(1000));
  CHECK(u64(run_json(admit_args(64 * GiB, 60 * GiB, 1000) + llama_flags + args_t{"--kv", "q8_0"}).at("need_bytes")) ==
        2ULL * 32 * 8 * 128 / 32 * 34 * 1000 + seed_peak_by_hand(1000));
}

TEST_CASE("model flags: a CAP's fit_tokens is tight for the Llama shape (cost(fit) <= limit < cost(fit + 1))") {
  const pnmem::model_cost m = llama_cost();
  struct box { std::uint64_t total, avail; int prompt; };
  const box boxes[] = {
      {8 * GiB, 4 * GiB, 131072},        // inside the first anchor segments
      {16 * GiB, 8 * GiB, 32768},
      {64 * GiB, 40 * GiB, 131072},      // 16384..65536
      {1024 * GiB, 900 * GiB, 262144},   // 65536..262144
      {64 * TiB, 60 * TiB, 2000000},     // past the last anchor: N^2
  };
  for (const box& b : boxes) {
    CAPTURE(b.avail);
    const json j = run_json(admit_args(b.total, b.avail, b.prompt) + llama_flags);
    CHECK(j.at("verdict") == "cap");
    CHECK(j.at("reason") == "host_budget");
    const std::uint64_t limit = b.avail - pnmem::box_reserve_bytes(b.total);
    CHECK(u64(j.at("limit_bytes")) == limit);
    CHECK(u64(j.at("need_bytes")) == pnmem::host_cost_bytes(m, b.prompt, pnmem::kv_format::f16));
    const int fit = j.at("fit_tokens").get<int>();
    CHECK(fit > 0);
    CHECK(fit < b.prompt);
    CHECK(pnmem::host_cost_bytes(m, fit, pnmem::kv_format::f16) <= limit);
    CHECK(pnmem::host_cost_bytes(m, fit + 1, pnmem::kv_format::f16) > limit);
  }
}

TEST_CASE("model flags: --kv-bytes-per-token 0 --activation-anchors 0:0 admits anything above the reserve") {
  // The engine that preallocates its KV and compute buffers at load: a request costs the host nothing.
  const args_t prealloc{"--kv-bytes-per-token", "0", "--activation-anchors", "0:0"};
  const std::uint64_t reserve = pnmem::box_reserve_bytes(8 * GiB);
  for (const char* kv : {"q4", "fp32", "f16", "q4_0"}) {  // every format costs the given 0
    CAPTURE(kv);
    const json j = run_json(admit_args(8 * GiB, reserve + 1, 2000000000) + prealloc + args_t{"--kv", kv});
    CHECK(j.at("verdict") == "admit");
    CHECK(j.at("reason") == "fits");
    CHECK(j.at("fit_tokens") == 2000000000);
    CHECK(u64(j.at("need_bytes")) == 0);
    CHECK(u64(j.at("limit_bytes")) == 1);
  }
  // At the reserve it is still refused: the reserve is what keeps the box alive.
  const json at = run_json(admit_args(8 * GiB, reserve, 10) + prealloc);
  CHECK(at.at("verdict") == "reject");
  CHECK(at.at("reason") == "host_reserve");
  // The seed's model on the same box refuses the same request.
  CHECK(run_json(admit_args(8 * GiB, reserve + 1, 2000000000)).at("verdict") == "reject");
}

TEST_CASE("model flags: the overrides change what they name and nothing else") {
  const std::uint64_t n = 3000;
  const args_t box = admit_args(64 * GiB, 60 * GiB, static_cast<int>(n));
  // --kv-bytes-per-token: every format costs B (here the request's default: the model's normal format,
  // the seed's fp32, as with any model flag).
  const json kv_only = run_json(box + args_t{"--kv-bytes-per-token", "1000"});
  CHECK(u64(kv_only.at("need_bytes")) == 1000 * n + seed_peak_by_hand(n));
  CHECK(kv_only.at("kv") == "fp32");
  CHECK(kv_only.at("model").at("source") == "seed+flags");
  // It overrides the shape's KV too.
  CHECK(u64(run_json(box + llama_flags + args_t{"--kv-bytes-per-token", "1KiB"}).at("need_bytes")) ==
        1024 * n + seed_peak_by_hand(n));
  // --state-bytes-per-seq is paid once.
  CHECK(u64(run_json(box + llama_flags + args_t{"--state-bytes-per-seq", "3MiB"}).at("need_bytes")) ==
        llama_f16 * n + 3 * MiB + seed_peak_by_hand(n));
  // Anchors: 0:1GiB,2000:2GiB,4000:2GiB; at 3000 the peak is flat at 2 GiB.
  CHECK(u64(run_json(box + llama_flags + args_t{"--activation-anchors", "0:1GiB, 2000:2GiB,4000:2GiB"})
                .at("need_bytes")) == llama_f16 * n + 2 * GiB);
  // Coefficients: 100 + 10 N + 1 N^2.
  CHECK(u64(run_json(box + llama_flags + args_t{"--activation-coefficients", "100,10,1"}).at("need_bytes")) ==
        llama_f16 * n + 100 + 10 * n + n * n);
}

TEST_CASE("admit --kv takes every format, for the seed's model too") {
  for (const pnmem::kv_format f : pnmem::all_kv_formats) {
    const std::string name(pnmem::to_string(f));
    CAPTURE(name);
    const json j = run_json(admit_args(64 * GiB, 60 * GiB, 5000) + args_t{"--kv", name});
    CHECK(j.at("kv") == name);
    CHECK(u64(j.at("need_bytes")) == pnmem::host_cost_bytes(5000, f));
    CHECK_FALSE(j.contains("model"));  // no model given: the seed's, and the output as before
  }
  CHECK(run_json(admit_args(64 * GiB, 60 * GiB, 5000) + args_t{"--kv", "F32"}).at("kv") == "fp32");
}

// ---------------------------------------------------------------- pnmem model and --model

TEST_CASE("pnmem model: its output read back with --model answers exactly as the flags do") {
  const temp_dir dir;
  const std::vector<args_t> models = {
      llama_flags,
      llama_flags + args_t{"--state-bytes-per-seq", "1MiB", "--activation-anchors", "0:100MiB,8192:4GiB"},
      {"--kv-bytes-per-token", "0", "--activation-anchors", "0:0"},
      {"--layers", "10", "--kv-heads", "2", "--head-dim", "256", "--kv-dtype", "q4_0",
       "--activation-coefficients", "256MiB,64KiB,64"},
  };
  const std::vector<args_t> questions = {
      admit_args(64 * GiB, 40 * GiB, 1000),
      admit_args(16 * GiB, 8 * GiB, 65536),
      admit_args(8 * GiB, 2 * GiB, 131072) + args_t{"--max-window", "4096"},
      admit_args(8 * GiB, 4 * GiB, 131072) + args_t{"--kv", "q8_0"},
      {"load", "--weights", "16GiB", "--ctx", "8192", "--sequences", "4", "--die", "40GiB:80GiB"},
      {"plan", "--level", "watch", "--slots", "8", "--window", "0"},
      {"plan", "--level", "ok", "--slots", "8", "--window", "0"},
  };
  int k = 0;
  for (const args_t& flags : models) {
    CAPTURE(json(flags).dump());
    const process_result text = run(args_t{"model"} + flags);
    REQUIRE(text.exit_code == 0);
    CHECK(text.err.empty());
    // The same bytes with --json: the description is JSON either way.
    const process_result as_json = run(args_t{"--json", "model"} + flags);
    CHECK(as_json.out == text.out);
    const json d = json::parse(text.out);
    CHECK(d.at("format") == "pnmem-model");
    CHECK(d.at("version") == 2);
    const std::string file = dir.write("m" + std::to_string(k++) + ".json", text.out);
    // Re-read, validated and re-printed: the same description.
    const process_result again = run({"model", "--model", file});
    CHECK(again.exit_code == 0);
    CHECK(again.out == text.out);
    for (const args_t& q : questions) {
      CAPTURE(json(q).dump());
      const json by_flags = run_json(q + flags);
      const json by_file = run_json(q + args_t{"--model", file});
      CHECK(by_file == by_flags);
      CHECK(by_file.contains("model"));
    }
  }
}

TEST_CASE("pnmem model: the Llama flags' description has 131072 B/token in f16 and the seed's table") {
  const json d = run_json(args_t{"model"} + llama_flags + args_t{"--name", "Llama-3-8B"});
  CHECK(d.at("name") == "Llama-3-8B");
  const json& full = d.at("kv_bytes_per_token").at("full");
  CHECK(full.at("f16") == 131072);
  CHECK(full.at("bf16") == 131072);
  CHECK(full.at("fp32") == 262144);
  CHECK(full.at("fp8") == 65536);
  CHECK(full.at("q8_0") == 2 * 32 * 8 * 128 / 32 * 34);  // 69632
  CHECK(full.at("q4_0") == 2 * 32 * 8 * 128 / 32 * 18);  // 36864
  CHECK(d.at("normal_kv") == "f16");
  CHECK(d.at("compact_kv") == "q4_0");
  const json& anchors = d.at("activation").at("anchors");
  REQUIRE(anchors.size() == 6);
  for (std::size_t i = 0; i < 6; ++i) {
    CHECK(u64(anchors.at(i).at(0)) == seed_anchor_tokens[i]);
    CHECK(u64(anchors.at(i).at(1)) == seed_anchor_peaks[i]);
  }
}

TEST_CASE("pnmem model --summary: a readable block on stderr, stdout unchanged") {
  const process_result plain = run(args_t{"model"} + llama_flags);
  const process_result summary = run(args_t{"model", "--summary"} + llama_flags);
  CHECK(summary.exit_code == 0);
  CHECK(summary.out == plain.out);
  CHECK(plain.err.empty());
  for (const char* expect : {"131072 (128.00 KiB)", "normal", "compact", "q8_0", "state per sequence: 0 B",
                             "262144: 4415494815744", "1024 tokens: 512.00 MiB", "8192 tokens: 7.75 GiB",
                             "32768 tokens:", "131072 tokens:"}) {
    CAPTURE(expect);
    CHECK(summary.err.find(expect) != std::string::npos);
  }
  CHECK(lines_of(summary.err).size() <= 40);
}

TEST_CASE("--model: a description with sliding layers, and load --ctx from it") {
  const temp_dir dir;
  // 4 full layers and 8 sliding ones of 1 KiB per token each in f16; sliding layers keep 4096 tokens.
  const std::string file = dir.write("sliding.json", R"({
    "format": "pnmem-model", "version": 1, "name": "slider",
    "kv_bytes_per_token": {
      "full":    {"q4": 100, "fp32": 8192, "f16": 4096, "bf16": 4096, "fp8": 2048, "q8_0": 2176, "q4_0": 1152},
      "sliding": {"q4": 200, "fp32": 16384, "f16": 8192, "bf16": 8192, "fp8": 4096, "q8_0": 4352, "q4_0": 2304}
    },
    "sliding_window": 4096, "state_bytes_per_seq": "2MiB", "normal_kv": "f16", "compact_kv": "q4_0",
    "activation": {"fixed_bytes": "64MiB"}
  })");
  const json load = run_json({"load", "--weights", "10GiB", "--ctx", "32768", "--sequences", "3", "--model", file,
                              "--die", "20GiB:24GiB"});
  const std::uint64_t kv = 3 * (4096ULL * 32768 + 8192ULL * 4096 + 2 * MiB);
  CHECK(u64(load.at("kv_max_ctx_bytes")) == kv);
  CHECK(load.at("ctx_tokens") == 32768);
  CHECK(load.at("sequences") == 3);
  CHECK(load.at("kv") == "f16");
  CHECK(load.at("model").at("name") == "slider");
  CHECK(load.at("model").at("kv_windows") == json::array({{{"window", 4096}, {"bytes_per_token", 8192}}}));
  pnmem::mem_state s;
  s.n_dies = 1;
  s.per_die_free_bytes[0] = 20 * GiB;
  s.per_die_budget_bytes[0] = 24 * GiB;
  const pnmem::admit_result want = pnmem::admit_model_load({10 * GiB, kv}, s);
  CHECK(load.at("model_load").at("need_bytes") == want.need_bytes);
  CHECK(load.at("model_load").at("verdict") == std::string(pnmem::to_string(want.verdict)));
  // --kv picks another of the description's formats.
  CHECK(u64(run_json({"load", "--weights", "1", "--ctx", "100", "--kv", "q4", "--model", file, "--die",
                      "20GiB:24GiB"})
                .at("kv_max_ctx_bytes")) == 100 * 100 + 200 * 100 + 2 * MiB);
  // Admission: KV of the sliding layers stops at the window.
  const json a = run_json(admit_args(64 * GiB, 60 * GiB, 10000) + args_t{"--model", file});
  CHECK(u64(a.at("need_bytes")) == 4096ULL * 10000 + 8192ULL * 4096 + 2 * MiB + 64 * MiB);
  CHECK(a.at("model").at("kv_bytes_per_token") == 4096 + 8192);
  CHECK(a.at("model").at("kv_windows").at(0).at("bytes_per_token") == 8192);
  // An override on top of a file.
  const json o = run_json(admit_args(64 * GiB, 60 * GiB, 10000) + args_t{"--model", file, "--state-bytes-per-seq", "0"});
  CHECK(u64(o.at("need_bytes")) == 4096ULL * 10000 + 8192ULL * 4096 + 64 * MiB);
  CHECK(o.at("model").at("source") == "flags");  // the file had none
}

TEST_CASE("load --ctx without a model uses the seed's; plan says which format new caches use") {
  const json seed = run_json({"load", "--weights", "1GiB", "--ctx", "8192", "--die", "8GiB:8GiB"});
  CHECK(u64(seed.at("kv_max_ctx_bytes")) == 40960ULL * 8192);  // the seed's normal fp32
  CHECK(seed.at("kv") == "fp32");
  CHECK(seed.at("model").at("source") == "seed");
  const json given = run_json({"load", "--weights", "1GiB", "--kv-max-ctx", "1GiB", "--die", "8GiB:8GiB"});
  CHECK_FALSE(given.contains("ctx_tokens"));
  CHECK_FALSE(given.contains("model"));

  const args_t plan{"plan", "--slots", "8", "--window", "0"};
  const json ok = run_json(plan + args_t{"--level", "ok"} + llama_flags);
  CHECK(ok.at("force_kv_q4") == false);
  CHECK(ok.at("model").at("kv") == "f16");
  CHECK(ok.at("model").at("kv_bytes_per_token") == llama_f16);
  CHECK(ok.at("model").at("compact") == false);
  const json watch = run_json(plan + args_t{"--level", "watch"} + llama_flags);
  CHECK(watch.at("force_kv_q4") == true);
  CHECK(watch.at("model").at("kv") == "q4_0");
  CHECK(watch.at("model").at("kv_bytes_per_token") == 36864);
  CHECK(watch.at("model").at("compact") == true);
  const json configured = run_json(plan + args_t{"--level", "ok", "--kv-q4"} + llama_flags);
  CHECK(configured.at("model").at("kv") == "q4_0");
  const process_result text = run(plan + args_t{"--level", "watch"} + llama_flags);
  CHECK(text.out.find("new KV caches: q4_0, 36864 B/token (the model's compact format)\n") != std::string::npos);
  CHECK_FALSE(run_json(plan + args_t{"--level", "watch"}).contains("model"));
}

TEST_CASE("plan --tokens: what rung 4b's eviction gives back from the running slots") {
  const args_t plan{"plan", "--slots", "8", "--window", "0", "--tokens", "32768,8192,1000,20000"};
  // 2 GiB of Llama f16 is 16384 tokens: the 32768 and 20000 slots cut to (52768 - 16384) / 2 = 18192.
  const json tight = run_json(plan + args_t{"--level", "tight", "--free", "2GiB"} + llama_flags);
  const json& e = tight.at("eviction");
  CHECK(e.at("enabled") == true);
  CHECK(e.at("kv") == "f16");  // the running caches' format: configured f16, whatever 4a says for new ones
  CHECK(u64(e.at("evictable_bytes_per_token")) == llama_f16);
  CHECK(u64(e.at("asked_bytes")) == 2 * GiB);
  CHECK(u64(e.at("freed_bytes")) == 2 * GiB);
  CHECK(e.at("enough") == true);
  CHECK(e.at("cut_to_tokens") == 18192);
  CHECK(e.at("slots_cut") == 2);
  const std::vector<std::pair<int, std::uint64_t>> slots{
      {18192, (32768 - 18192) * llama_f16}, {8192, 0}, {1000, 0}, {18192, (20000 - 18192) * llama_f16}};
  REQUIRE(e.at("slots").size() == 4);
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(e.at("slots").at(i).at("keep_tokens") == slots[i].first);
    CHECK(u64(e.at("slots").at(i).at("freed_bytes")) == slots[i].second);
  }
  // Without --free: the most, every slot at its floor (10 %, at least 36 tokens).
  const json most = run_json(plan + args_t{"--level", "critical"} + llama_flags);
  CHECK(most.at("eviction").at("asked_bytes").is_null());
  CHECK(u64(most.at("eviction").at("freed_bytes")) ==
        ((32768 - 3277) + (8192 - 820) + (1000 - 100) + (20000 - 2000)) * llama_f16);
  // Not enough: said so.
  const process_result short_text = run(plan + args_t{"--level", "tight", "--free", "1TiB"} + llama_flags);
  CHECK(short_text.exit_code == 0);
  CHECK(short_text.out.find("not enough even with every slot at its floor") != std::string::npos);
  CHECK(short_text.out.find("  slot 0: 32768 -> 3277 tokens, ") != std::string::npos);
  // The floor in its unit: the library's 100 permille is "10 %" (issue 42 item 11; bindings_defaults compares
  // the defaults themselves across C++, C, Python and the tool).
  REQUIRE(pnmem::eviction_limits{}.min_keep_permille == 100);
  CHECK(short_text.out.find("a slot keeps at least 36 tokens and 10 %):") != std::string::npos);
  // Below TIGHT rung 4b is off: nothing evicted, and the text says why.
  const json watch = run_json(plan + args_t{"--level", "watch", "--free", "2GiB"} + llama_flags);
  CHECK(watch.at("eviction").at("enabled") == false);
  CHECK(u64(watch.at("eviction").at("freed_bytes")) == 0);
  const process_result off = run(plan + args_t{"--level", "ok"} + llama_flags);
  CHECK(off.out.find("eviction: off at ok (rung 4b engages at tight): nothing is evicted\n") != std::string::npos);
  // No --tokens: no eviction object (the plan's output as before).
  CHECK_FALSE(run_json({"plan", "--level", "tight", "--slots", "8", "--window", "0"}).contains("eviction"));
  // Bad input: named.
  check_usage_error(plan + args_t{"--level", "tight"}, "--tokens");  // no model
  check_usage_error({"plan", "--level", "tight", "--slots", "8", "--window", "0", "--free", "1GiB"}, "--free");
  check_usage_error(args_t{"plan", "--level", "tight", "--slots", "8", "--window", "0", "--tokens", "5,,3"} + llama_flags,
                    "--tokens");
  check_usage_error(args_t{"plan", "--level", "tight", "--slots", "8", "--window", "0", "--tokens", "5,-3"} + llama_flags,
                    "--tokens");
  check_usage_error(plan + args_t{"--level", "tight", "--free", "lots"} + llama_flags, "--free");
}

TEST_CASE("admit --running-tokens: at TIGHT a request host memory caps is admitted after eviction, with the bytes") {
  // Llama f16 without activation: 32k tokens need 4 GiB. Reserve 4 GiB, 4.5 GiB available: the host bands
  // are TIGHT (below 1.25 x the reserve), memory's own level, so rung 4b is on as the library's live path
  // has it (ladder_plan_from_state). Short by 4 + 4 - 4.5 = 3.5 GiB = 28672 tokens: the 32768 and 20000
  // slots cut to (52768 - 28672) / 2 = 12048.
  const args_t a{"admit", "--host-total", "64GiB", "--host-avail", "4.5GiB", "--host-reserve", "4GiB",
                 "--activation-anchors", "0:0", "--running-tokens", "32768,8192,1000,20000"};
  const json j = run_json(a + args_t{"--prompt", "32768"} + llama_flags);
  CHECK(j.at("level") == "tight");
  CHECK(j.at("verdict") == "cap");  // the decision as it is stays what it was
  CHECK(j.at("reason") == "host_budget");
  const json& e = j.at("eviction");
  CHECK(e.at("enabled") == true);
  CHECK(e.at("considered") == true);
  CHECK(e.at("after_eviction") == true);
  CHECK(u64(e.at("evict_bytes")) == 7 * GiB / 2);
  CHECK(e.at("cut_to_tokens") == 12048);
  CHECK(u64(e.at("slots").at(0).at("freed_bytes")) == (32768 - 12048) * llama_f16);
  const process_result text = run(a + args_t{"--prompt", "32768"} + llama_flags);
  CHECK(text.out.find("  admit after evicting 3.50 GiB from 2 slots (each cut to 12048 tokens or its floor): all 32768 "
                      "prompt tokens fit\n") != std::string::npos);

  // TIGHT from PSI alone (some 12 %, memory at OK): the library does not evict for a stall (PN_EVICT_ON_PSI
  // off, the default), and the tool says so; with PN_EVICT_ON_PSI=1 it does. (Llama f16, 64k tokens: 8 GiB;
  // 6 GiB available less the 1 GiB reserve is 5; short by 3 GiB: the 32768 and 20000 slots cut to 14096.)
  const args_t stalled{"admit", "--host-total", "64GiB", "--host-avail", "6GiB", "--host-reserve", "1GiB", "--psi-some", "12",
                       "--activation-anchors", "0:0", "--running-tokens", "32768,8192,1000,20000", "--prompt", "65536"};
  const json psi_only = run_json(stalled + llama_flags);
  CHECK(psi_only.at("level") == "tight");
  CHECK(psi_only.at("eviction").at("enabled") == false);
  CHECK(psi_only.at("eviction").at("considered") == false);
  CHECK(run(stalled + llama_flags).out.find("eviction: off at tight: PSI alone raised the level, memory is at ok") !=
        std::string::npos);
  const json on_psi = run_json(stalled + llama_flags, {{"PN_EVICT_ON_PSI", "1"}});
  CHECK(on_psi.at("eviction").at("enabled") == true);
  CHECK(on_psi.at("eviction").at("after_eviction") == true);
  CHECK(on_psi.at("eviction").at("cut_to_tokens") == 14096);
  // A confirmed full stall rejects: eviction is not considered, and the words name the stall, not memory.
  const args_t full{"admit", "--host-total", "64GiB", "--host-avail", "4.5GiB", "--host-reserve", "4GiB", "--psi-full", "30",
                    "--activation-anchors", "0:0", "--running-tokens", "32768,8192,1000,20000", "--prompt", "32768"};
  const process_result stall = run(full + llama_flags);
  CHECK(stall.out.find("verdict: reject (psi_stall)") != std::string::npos);
  CHECK(stall.out.find("eviction: not considered (the box is stalled on memory (PSI full): evicting KV does not end the "
                       "stall)") != std::string::npos);
  // Too big for what the slots hold: said so, with the most they give.
  const process_result big = run(a + args_t{"--prompt", "1000000"} + llama_flags);
  CHECK(big.out.find("  eviction cannot make room: short by ") != std::string::npos);
  CHECK(run_json(a + args_t{"--prompt", "1000000"} + llama_flags).at("eviction").at("after_eviction") == false);
  // Fits as it is, or rung 4b off: nothing considered.
  CHECK(run_json(a + args_t{"--prompt", "1000"} + llama_flags).at("eviction").at("considered") == false);
  const args_t calm{"admit", "--host-total", "64GiB", "--host-avail", "6GiB", "--host-reserve", "1GiB", "--activation-anchors",
                    "0:0", "--running-tokens", "32768", "--prompt", "65536"};
  const json off = run_json(calm + llama_flags);
  CHECK(off.at("eviction").at("enabled") == false);
  CHECK(off.at("eviction").at("considered") == false);
  // Without a model the bytes per token are unknown: a usage error naming the flag.
  check_usage_error({"admit", "--host-total", "64GiB", "--host-avail", "6GiB", "--prompt", "10", "--running-tokens", "5"},
                    "--running-tokens");
  check_usage_error(a + args_t{"--prompt", "10", "--running-tokens", "5,x"} + llama_flags, "--running-tokens");
}

TEST_CASE("text mode: a model adds one line to admit") {
  const process_result r = run(admit_args(64 * GiB, 60 * GiB, 10) + llama_flags);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("verdict: admit (fits)") == 0);
  CHECK(r.out.find("model: (flags), kv f16 131072 B/token (128.00 KiB), state 0 B\n") != std::string::npos);
  CHECK(run(admit_args(64 * GiB, 60 * GiB, 10)).out.find("model:") == std::string::npos);
}

// ---------------------------------------------------------------- bad arguments

TEST_CASE("model flags: every bad value is one line on stderr naming the flag, exit 2") {
  const temp_dir dir;
  const std::string config = dir.write("config.json", R"({"num_hidden_layers": 32, "num_key_value_heads": 8})");
  const std::string garbage = dir.write("garbage.json", "hello");
  const std::string v2 = dir.write("v2.json", R"({"format": "pnmem-model", "version": 2})");
  const std::string bad_anchors = dir.write("bad_anchors.json", R"({"format": "pnmem-model", "version": 1,
      "kv_bytes_per_token": 0, "activation": {"anchors": [[10, 5], [5, 6]]}})");
  const args_t a = admit_args(8 * GiB, 4 * GiB, 10);
  struct row { args_t args; std::string flag; };
  const std::vector<row> rows = {
      {a + args_t{"--layers", "-1", "--kv-heads", "8", "--head-dim", "128"}, "--layers"},
      {a + args_t{"--layers", "32", "--kv-heads", "0", "--head-dim", "128"}, "--kv-heads"},
      {a + args_t{"--layers", "32", "--kv-heads", "8", "--head-dim", "x"}, "--head-dim"},
      {a + args_t{"--layers", "32", "--kv-heads", "8", "--head-dim", "128", "--kv-dtype", "fp16"}, "--kv-dtype"},
      {a + args_t{"--layers", "32"}, "--layers needs --kv-heads and --head-dim"},
      {a + args_t{"--kv-heads", "8", "--head-dim", "128"}, "--kv-heads needs --layers"},
      {a + args_t{"--kv-dtype", "f16"}, "--kv-dtype needs"},
      {a + args_t{"--kv-bytes-per-token", "-5"}, "--kv-bytes-per-token"},
      {a + args_t{"--kv-bytes-per-token", "lots"}, "--kv-bytes-per-token"},
      {a + args_t{"--state-bytes-per-seq", "1.5"}, "--state-bytes-per-seq"},
      {a + args_t{"--state-bytes-per-seq", "-1"}, "--state-bytes-per-seq"},
      {a + args_t{"--activation-anchors", "0:1GiB,10:0"}, "--activation-anchors"},          // peaks decreasing
      {a + args_t{"--activation-anchors", "10:0,5:1"}, "--activation-anchors"},             // tokens decreasing
      {a + args_t{"--activation-anchors", "10:0,10:1"}, "--activation-anchors"},            // tokens repeated
      {a + args_t{"--activation-anchors", "0:0,1:1,2:2,3:3,4:4,5:5,6:6,7:7,8:8"}, "--activation-anchors"},  // 9
      {a + args_t{"--activation-anchors", "0-1GiB"}, "--activation-anchors"},               // malformed pair
      {a + args_t{"--activation-anchors", "0:1:2"}, "--activation-anchors"},
      {a + args_t{"--activation-anchors", "0:"}, "--activation-anchors"},
      {a + args_t{"--activation-anchors", "x:1"}, "--activation-anchors"},
      {a + args_t{"--activation-anchors", "-1:1"}, "--activation-anchors"},
      {a + args_t{"--activation-anchors", "0:1GiB,"}, "--activation-anchors"},
      {a + args_t{"--activation-anchors", ""}, "--activation-anchors"},
      {a + args_t{"--activation-coefficients", "1,2"}, "--activation-coefficients"},
      {a + args_t{"--activation-coefficients", "1,2,-3"}, "--activation-coefficients"},
      {a + args_t{"--activation-anchors", "0:0", "--activation-coefficients", "1,2,3"}, "--activation-coefficients"},
      {a + args_t{"--model", dir.path("missing.json")}, "--model"},
      {a + args_t{"--model", config}, "--model"},        // a config.json, not a description
      {a + args_t{"--model", garbage}, "--model"},
      {a + args_t{"--model", v2}, "--model"},
      {a + args_t{"--model", bad_anchors}, "--model"},
      {a + args_t{"--model", garbage, "--layers", "1", "--kv-heads", "1", "--head-dim", "1"}, "--model and --layers"},
      {a + args_t{"--kv", "fp16"}, "--kv"},
      {{"load", "--weights", "1GiB", "--die", "8GiB:8GiB"}, "--kv-max-ctx"},
      {{"load", "--weights", "1GiB", "--kv-max-ctx", "1GiB", "--ctx", "10", "--die", "8GiB:8GiB"}, "--ctx"},
      {{"load", "--weights", "1GiB", "--ctx", "-1", "--die", "8GiB:8GiB"}, "--ctx"},
      {{"load", "--weights", "1GiB", "--ctx", "10", "--sequences", "0", "--die", "8GiB:8GiB"}, "--sequences"},
      {{"load", "--weights", "1GiB", "--kv-max-ctx", "1GiB", "--sequences", "2", "--die", "8GiB:8GiB"}, "--sequences"},
      {{"load", "--weights", "1GiB", "--kv-max-ctx", "1GiB", "--kv", "f16", "--die", "8GiB:8GiB"}, "--kv"},
      {{"load", "--weights", "1GiB", "--kv-max-ctx", "1GiB", "--model", config, "--die", "8GiB:8GiB"}, "--model"},
      {{"load", "--weights", "1GiB", "--ctx", "10", "--kv", "f17", "--die", "8GiB:8GiB"}, "--kv"},
      {{"plan", "--level", "ok", "--slots", "1", "--window", "0", "--layers", "32", "--kv-heads", "8"}, "--head-dim"},
      {{"model"}, "no model given"},
      {{"model", "--from-hf-config", config, "--model", garbage}, "--from-hf-config and --model"},
      {{"model", "--from-hf-config", config, "--from-gguf", garbage}, "--from-hf-config and --from-gguf"},
      {{"model", "--from-hf-config", dir.path("missing.json")}, "--from-hf-config"},
      {{"model", "--from-hf-config", garbage}, "--from-hf-config"},
      {{"model", "--from-gguf", dir.path("missing.gguf")}, "--from-gguf"},
      {{"model", "--from-gguf", config}, "--from-gguf"},
      {{"model", "--model", v2}, "--model"},
      {{"model", "--layers", "1", "--kv-heads", "1", "--head-dim", "1", "--activation-anchors", "5:1,4:1"},
       "--activation-anchors"},
  };
  for (const row& r : rows) check_usage_error(r.args, r.flag);
}

TEST_CASE("model flags: the messages say what is wrong") {
  const temp_dir dir;
  const std::string config = dir.write("config.json", R"({"num_hidden_layers": 32, "num_key_value_heads": 8})");
  struct row { args_t args; std::string line; };
  const args_t a = admit_args(8 * GiB, 4 * GiB, 10);
  const std::vector<row> rows = {
      {a + args_t{"--activation-anchors", "0:1GiB,10:0"},
       R"(--activation-anchors: "0:1GiB,10:0": anchor 2 "10:0": peak must not decrease (0 after 1073741824))"},
      {a + args_t{"--activation-anchors", "10:0,5:1"},
       R"(--activation-anchors: "10:0,5:1": anchor 2 "5:1": tokens must increase (5 after 10))"},
      {a + args_t{"--activation-anchors", "0:0,1:1,2:2,3:3,4:4,5:5,6:6,7:7,8:8"},
       R"(--activation-anchors: "0:0,1:1,2:2,3:3,4:4,5:5,6:6,7:7,8:8": 9 anchors (1 to 8 TOKENS:BYTES pairs))"},
      {a + args_t{"--activation-anchors", "0-1GiB"},
       R"(--activation-anchors: "0-1GiB": anchor 1 "0-1GiB": expected TOKENS:BYTES)"},
      {a + args_t{"--kv-dtype", "fp16", "--layers", "1", "--kv-heads", "1", "--head-dim", "1"},
       R"(--kv-dtype: "fp16": not a KV format (use q4, fp32, f16, bf16, fp8, q8_0 or q4_0))"},
      {a + args_t{"--layers", "32"},
       "--layers needs --kv-heads and --head-dim (the shape flags --layers, --kv-heads and --head-dim go together)"},
      {a + args_t{"--model", dir.path("missing.json")},
       "--model: \"" + dir.path("missing.json") + "\": No such file or directory"},
      {{"model", "--from-hf-config", dir.path("missing.json")},
       "--from-hf-config: \"" + dir.path("missing.json") + "\": No such file or directory"},
  };
  for (const row& r : rows) {
    const process_result p = run(r.args);
    CHECK(p.exit_code == 2);
    CHECK(p.err == "pnmem: error: " + r.line + "\n");
  }
  // A config.json given to --model: the reader's message, and how to convert it.
  const process_result c = run(a + args_t{"--model", config});
  CHECK(c.err.find("--model: \"" + config + "\": ") != std::string::npos);
  CHECK(c.err.find("pnmem model --from-hf-config FILE") != std::string::npos);
}

// ---------------------------------------------------------------- readers

TEST_CASE("pnmem model --from-hf-config: a Llama-3-8B config.json gives 131072 B/token in f16") {
  const temp_dir dir;
  const std::string config = dir.write("config.json", R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 8192,
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "torch_dtype": "float16", "vocab_size": 128256
  })");
  const process_result r = run({"model", "--from-hf-config", config});
  INFO("stderr: ", r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  const json d = json::parse(r.out);
  CHECK(d.at("source") == "hf-config");
  CHECK(d.at("kv_bytes_per_token").at("full").at("f16") == 131072);
  CHECK(d.at("normal_kv") == "f16");
  const json& group = d.at("shape").at("groups").at(0);
  CHECK(group.at("kind") == "full");
  CHECK(group.at("layers") == 32);
  CHECK(group.at("kv_heads") == 8);
  CHECK(group.at("key_dim") == 128);
  CHECK(d.at("engine").at("engine") == "exact");
  // The model's directory (a downloaded snapshot) stands for its config.json.
  const process_result from_dir = run({"model", "--from-hf-config", dir.path("")});
  CHECK(from_dir.exit_code == 0);
  CHECK(from_dir.out == r.out);
  const std::string bare = dir.path("snapshot");
  REQUIRE(std::filesystem::create_directory(bare));
  const process_result none = run({"model", "--from-hf-config", bare});
  CHECK(none.exit_code == 2);
  CHECK(none.err == "pnmem: error: --from-hf-config: \"" + bare + "\": " + bare + "/config.json: No such file or directory\n");

  // Read back by admit: need = 131072 x n + the description's own activation table, interpolated.
  const std::string file = dir.write("llama.json", r.out);
  pnmem::model_cost m{};
  m.full_kv_bytes_per_token[static_cast<std::size_t>(pnmem::kv_format::f16)] = 131072;
  const json& anchors = d.at("activation").at("anchors");
  REQUIRE(anchors.size() <= pnmem::max_activation_anchors);
  for (std::size_t i = 0; i < anchors.size(); ++i) {
    m.activation.anchors[i] = {u64(anchors.at(i).at(0)), u64(anchors.at(i).at(1))};
  }
  m.activation.n_anchors = static_cast<std::uint32_t>(anchors.size());
  const json j = run_json(admit_args(16 * GiB, 8 * GiB, 8192) + args_t{"--model", file});
  CHECK(j.at("kv") == "f16");
  CHECK(u64(j.at("need_bytes")) == pnmem::host_cost_bytes(m, 8192, pnmem::kv_format::f16));
  const int fit = j.at("fit_tokens").get<int>();
  const std::uint64_t limit = 8 * GiB - pnmem::box_reserve_bytes(16 * GiB);
  CHECK(pnmem::host_cost_bytes(m, fit, pnmem::kv_format::f16) <= limit);
  CHECK(pnmem::host_cost_bytes(m, fit + 1, pnmem::kv_format::f16) > limit);
  // Overrides apply on top of a config; --name names it.
  const json named = run_json({"model", "--from-hf-config", config, "--name", "Llama-3-8B", "--kv-bytes-per-token", "0"});
  CHECK(named.at("name") == "Llama-3-8B");
  CHECK(named.at("kv_bytes_per_token").at("full").at("f16") == 0);
  CHECK(named.at("source") == "hf-config+flags");
  CHECK_FALSE(named.contains("shape"));
}

namespace {

// A GGUF file's header and metadata (ggml's docs/gguf.md, version 3, little-endian), no tensors.
class gguf_writer {
 public:
  explicit gguf_writer(std::uint64_t n_kv) {
    bytes_ = "GGUF";
    u32(3);
    u64(0);  // tensors
    u64(n_kv);
  }
  void kv_u32(const std::string& key, std::uint32_t v) {
    str(key);
    u32(4);
    u32(v);
  }
  void kv_str(const std::string& key, const std::string& v) {
    str(key);
    u32(8);
    str(v);
  }
  const std::string& bytes() const { return bytes_; }

 private:
  void u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) bytes_ += static_cast<char>((v >> (8 * i)) & 0xffU);
  }
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) bytes_ += static_cast<char>((v >> (8 * i)) & 0xffU);
  }
  void str(const std::string& s) {
    u64(s.size());
    bytes_ += s;
  }
  std::string bytes_;
};

// A Llama-3-8B GGUF header: 32 blocks, 32 query heads, 8 KV heads, embedding 4096 (head dim 4096 / 32 = 128).
gguf_writer llama_gguf() {
  gguf_writer w(5);
  w.kv_str("general.architecture", "llama");
  w.kv_u32("llama.block_count", 32);
  w.kv_u32("llama.attention.head_count", 32);
  w.kv_u32("llama.attention.head_count_kv", 8);
  w.kv_u32("llama.embedding_length", 4096);
  return w;
}

}  // namespace

TEST_CASE("pnmem model --from-gguf: a Llama-3-8B GGUF header gives 131072 B/token in f16") {
  const temp_dir dir;
  const gguf_writer w = llama_gguf();
  const std::string file = dir.write("llama.gguf", w.bytes());
  const process_result r = run({"model", "--from-gguf", file});
  INFO("stderr: ", r.err);
  REQUIRE(r.exit_code == 0);
  const json d = json::parse(r.out);
  CHECK(d.at("source") == "gguf");
  CHECK(d.at("kv_bytes_per_token").at("full").at("f16") == 131072);
  CHECK(d.at("normal_kv") == "f16");
  // Cut inside the metadata: the reader's message, naming the flag and the file.
  const std::string cut = dir.write("cut.gguf", w.bytes().substr(0, w.bytes().size() - 3));
  check_usage_error({"model", "--from-gguf", cut}, "--from-gguf: \"" + cut + "\": ");
}

TEST_CASE("admit, load and plan take every model source pnmem model takes, with its engine rule (issue 39 item 4)") {
  const temp_dir dir;
  const std::string gguf = dir.write("llama.gguf", llama_gguf().bytes());
  const std::string fixtures = pnmem::test::env_or_fail("PNMEM_MODEL_FIXTURES");
  const std::string config = fixtures + "/llama-3-8b.config.json";
  const std::string gemma = fixtures + "/gemma-2-9b.config.json";
  const args_t box{"--host-total", "64GiB", "--host-avail", "40GiB", "--activation-anchors", "0:0"};
  for (const args_t& source : {args_t{"--from-hf-config", config}, args_t{"--from-hf-config", fixtures + "/../models/llama-3-8b.config.json"},
                               args_t{"--from-gguf", gguf}, args_t{"--from-hf-config", gemma, "--engine", "vllm"},
                               args_t{"--from-hf-config", gemma, "--engine", "llama.cpp", "--ubatch", "256"},
                               args_t{"--from-hf-config", fixtures + "/deepseek-v3.config.json", "--engine", "vllm", "--mtp"}}) {
    CAPTURE(json(source).dump());
    // The description pnmem model prints, read back with --model, answers exactly as the flags do.
    const std::string desc = dir.write("m.json", run(args_t{"model"} + source).out);
    for (const args_t& cmd : {args_t{"admit", "--prompt", "20000"} + box,
                              args_t{"load", "--weights", "16GiB", "--ctx", "32768", "--die", "40GiB:80GiB"},
                              args_t{"plan", "--level", "tight", "--slots", "8", "--window", "16384", "--tokens", "30000,500"}}) {
      CAPTURE(cmd[0]);
      json by_flags = run_json(cmd + source);
      json by_file = run_json(cmd + args_t{"--model", desc});
      by_flags.erase("model");  // its name and source say where it came from: "hf-config" against "file"
      by_file.erase("model");
      CHECK(by_flags == by_file);
    }
  }
  // Llama-3-8B is bf16: 20000 tokens of KV are 20000 x 131072 B, priced in bf16 (not Q4) with no --kv.
  const json a = run_json(args_t{"admit", "--prompt", "20000", "--from-hf-config", config} + box);
  CHECK(a.at("kv") == "bf16");
  CHECK(u64(a.at("need_bytes")) == 20000ull * 131072);
  // The messages that ask for a model name flags the command takes.
  const process_result r = run({"admit", "--host-total", "64GiB", "--host-avail", "6GiB", "--prompt", "10", "--running-tokens", "5"});
  CHECK(r.exit_code == 2);
  CHECK(r.err == "pnmem: error: --running-tokens: the bytes a token frees are the model's: give --from-hf-config "
                 "FILE|DIR, --from-gguf FILE, --model FILE, or --layers L --kv-heads H --head-dim D\n");
  const std::string help = run({"admit", "--help"}).out + run({"plan", "--help"}).out + run({"load", "--help"}).out;
  for (const char* flag : {"--from-hf-config", "--from-gguf", "--model", "--layers", "--engine"}) {
    CAPTURE(flag);
    CHECK(help.find(std::string("  ") + flag + " ") != std::string::npos);
  }
  // Two sources, an engine rule without a model, a directory without a config.json: one line each.
  check_usage_error(args_t{"admit", "--prompt", "1", "--from-hf-config", config, "--from-gguf", gguf} + box,
                    "--from-hf-config and --from-gguf: give one model source");
  check_usage_error(args_t{"admit", "--prompt", "1", "--from-hf-config", config, "--layers", "2", "--kv-heads", "2", "--head-dim", "2"} + box,
                    "--from-hf-config and --layers");
  check_usage_error({"admit", "--prompt", "1", "--engine", "vllm", "--host-total", "64GiB", "--host-avail", "40GiB"},
                    "--engine and its settings need the model");
  check_usage_error(args_t{"admit", "--prompt", "1", "--from-hf-config", dir.path(".")} + box,
                    "/config.json: No such file or directory");
}

TEST_CASE("--mtp: the model's MTP layers keep KV; said in the description; refused where they are not priced") {
  const std::string fixtures = pnmem::test::env_or_fail("PNMEM_MODEL_FIXTURES");
  const std::string v3 = fixtures + "/deepseek-v3.config.json";
  const json plain = run_json({"model", "--from-hf-config", v3, "--engine", "vllm"});
  const json mtp = run_json({"model", "--from-hf-config", v3, "--engine", "vllm", "--mtp"});
  CHECK(u64(plain.at("kv_bytes_per_token").at("full").at("bf16")) == 61ull * 1152);
  CHECK(u64(mtp.at("kv_bytes_per_token").at("full").at("bf16")) == 62ull * 1152);
  CHECK(mtp.at("engine").at("mtp") == true);
  CHECK_FALSE(plain.at("engine").contains("mtp"));
  check_usage_error({"model", "--from-hf-config", v3, "--engine", "llama.cpp", "--mtp"},
                    "--mtp applies to --engine vllm or exact, not llama.cpp");
  const process_result kimi = run({"model", "--from-hf-config", fixtures + "/kimi-k2-instruct.config.json", "--mtp"});
  CHECK(kimi.exit_code == 2);
  CHECK(kimi.err.find("num_nextn_predict_layers: 0: the model has no MTP layers") != std::string::npos);
  // A shape from anywhere but a config.json holds what it holds: --mtp there is refused.
  check_usage_error({"model", "--layers", "4", "--kv-heads", "2", "--head-dim", "64", "--mtp"},
                    "--mtp: the MTP layers are read from the model's config.json");
}

TEST_CASE("--disable-hybrid-kv-cache-manager: vLLM's sliding layers hold the whole context; said in the description") {
  const std::string fixtures = pnmem::test::env_or_fail("PNMEM_MODEL_FIXTURES");
  const std::string gemma = fixtures + "/gemma-3-27b-it.config.json";
  const json off = run_json({"model", "--from-hf-config", gemma, "--engine", "vllm", "--disable-hybrid-kv-cache-manager"});
  CHECK(off.at("kv_bytes_per_token").at("windows").empty());
  CHECK(u64(off.at("kv_bytes_per_token").at("full").at("bf16")) == 62ull * 8192);
  CHECK(off.at("engine").at("hybrid_manager_off") == true);
  CHECK_FALSE(run_json({"model", "--from-hf-config", gemma, "--engine", "vllm"}).at("engine").contains("hybrid_manager_off"));
  check_usage_error({"model", "--from-hf-config", gemma, "--disable-hybrid-kv-cache-manager"},
                    "--disable-hybrid-kv-cache-manager applies to --engine vllm, not exact");
  const process_result qn = run({"model", "--from-hf-config", fixtures + "/qwen3-next-80b-a3b-thinking.config.json",
                                 "--engine", "vllm", "--disable-hybrid-kv-cache-manager"});
  CHECK(qn.exit_code == 2);
  CHECK(qn.err.find("recurrent layers beside attention") != std::string::npos);
}

// ---------------------------------------------------------------- help

TEST_CASE("--help: pnmem model and the model flags are explained") {
  const process_result top = run({"--help"});
  CHECK(top.exit_code == 0);
  CHECK(top.out.find("model ") != std::string::npos);
  const process_result model = run({"model", "--help"});
  CHECK(model.exit_code == 0);
  for (const char* expect : {"--from-hf-config", "--from-gguf", "--model", "--layers", "--kv-dtype", "--summary",
                             "--activation-anchors", "pnmem-model", "version 2", "with or without --json", "--engine",
                             "--max-batched-tokens", "--ubatch"}) {
    CAPTURE(expect);
    CHECK(model.out.find(expect) != std::string::npos);
  }
  for (const char* cmd : {"admit", "load", "plan"}) {
    const process_result h = run({cmd, "--help"});
    CAPTURE(cmd);
    for (const char* expect : {"--model", "--layers", "--kv-bytes-per-token", "--state-bytes-per-seq",
                               "--activation-anchors", "--activation-coefficients", "the seed's model"}) {
      CAPTURE(expect);
      CHECK(h.out.find(expect) != std::string::npos);
    }
  }
  CHECK(run({"load", "--help"}).out.find("--ctx") != std::string::npos);
}
