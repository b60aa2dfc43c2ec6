// tools/pnmem/engine_options.cpp - the engine flags.

#include "cli11_warnings.hpp"  // first: see there

#include "engine_options.hpp"

#include <cstdint>
#include <utility>

#include <CLI/CLI.hpp>

#include "arg_parsers.hpp"
#include "text_option.hpp"
#include "usage_error.hpp"

namespace pnmem_cli {

namespace {

std::uint32_t count_in(const char* flag, const std::string& text, std::uint64_t lo, std::uint64_t hi) {
  const std::uint64_t v = parse_count_arg(flag, text, lo);
  if (v > hi) {
    throw usage_error(describe_bad_value(flag, text, "out of range (" + std::to_string(lo) + " to " + std::to_string(hi) + ")"));
  }
  return static_cast<std::uint32_t>(v);
}

}  // namespace

void engine_options::add_to(CLI::App& app, const std::string& group_name) {
  const pnmem::engine_rule d{};
  add_text_option(app, "--engine", engine_,
                  "Whose rule turns the layer groups into costs: exact (default: the model's own need: a "
                  "sliding layer keeps its window), vllm (KV in blocks; a sliding layer keeps its window plus "
                  "a prefill chunk in flight; hybrids' state padded to a page) or llama.cpp (the context "
                  "padded to 256 cells, a sliding layer pad256(window x seqs + ubatch), state in f32)")
      ->type_name("ENGINE")
      ->group(group_name);
  add_text_option(app, "--block-tokens", block_tokens_,
                  "vllm: --block-size, tokens per KV block (default " + std::to_string(d.block_tokens) +
                      "; MLA models use at least 64, hybrids more)")
      ->type_name("N")
      ->group(group_name);
  add_text_option(app, "--max-batched-tokens", max_batched_tokens_,
                  "vllm: --max-num-batched-tokens, the prefill chunk a sliding layer holds beside its window "
                  "(default " + std::to_string(d.max_batched_tokens) +
                      ", the API server's on a large GPU; 2048 on smaller ones)")
      ->type_name("N")
      ->group(group_name);
  add_text_option(app, "--state-copies", state_copies_,
                  "vllm: recurrent states held per layer and sequence (default 1; 2 with prefix caching on "
                  "a hybrid model, vLLM's \"align\" mode)")
      ->type_name("N")
      ->group(group_name);
  app.add_flag("--ssm-state-fp32", ssm_state_fp32_, "vllm: --mamba-ssm-cache-dtype float32 (the SSM state in fp32)")
      ->group(group_name);
  app.add_flag("--mtp", mtp_,
               "vllm, exact: the model's MTP layers run as its speculative drafter (vLLM's --speculative-config "
               "with an *_mtp method) and keep KV beside the model's (read from the config: "
               "num_nextn_predict_layers, mtp_num_hidden_layers)")
      ->group(group_name);
  app.add_flag("--disable-hybrid-kv-cache-manager", hybrid_manager_off_,
               "vllm: its hybrid KV-cache manager is off (the flag, or a vLLM that turns it off for chunked "
               "attention by itself: its log says \"Disabling it, by default\"): sliding and chunked layers "
               "hold the whole context")
      ->group(group_name);
  add_text_option(app, "--ubatch", ubatch_,
                  "llama.cpp: -ub, the micro-batch a sliding layer's cache holds beside its window (default " +
                      std::to_string(d.ubatch_tokens) + ")")
      ->type_name("N")
      ->group(group_name);
  add_text_option(app, "--seqs", seqs_,
                  "llama.cpp: sequences sharing one unified KV cache (default 1: llama-server -np N keeps a "
                  "stream per sequence; -np auto is 4 sequences, unified)")
      ->type_name("N")
      ->group(group_name);
}

bool engine_options::given() const {
  return engine_ || block_tokens_ || max_batched_tokens_ || state_copies_ || ssm_state_fp32_ || mtp_ ||
         hybrid_manager_off_ || ubatch_ || seqs_;
}

pnmem::engine_rule engine_options::resolve() const {
  pnmem::engine_rule e;
  if (engine_ && !pnmem::parse_kv_engine(*engine_, e.engine)) {
    throw usage_error(describe_bad_value("--engine", *engine_, "expected exact, vllm or llama.cpp"));
  }
  const std::string engine_name(pnmem::to_string(e.engine));
  auto only_for = [&](const char* flag, bool given, pnmem::kv_engine owner) {
    if (given && e.engine != owner) {
      throw usage_error(std::string(flag) + " applies to --engine " + std::string(pnmem::to_string(owner)) +
                        ", not " + engine_name);
    }
  };
  only_for("--block-tokens", block_tokens_.has_value(), pnmem::kv_engine::vllm);
  only_for("--max-batched-tokens", max_batched_tokens_.has_value(), pnmem::kv_engine::vllm);
  only_for("--state-copies", state_copies_.has_value(), pnmem::kv_engine::vllm);
  only_for("--ssm-state-fp32", ssm_state_fp32_, pnmem::kv_engine::vllm);
  only_for("--disable-hybrid-kv-cache-manager", hybrid_manager_off_, pnmem::kv_engine::vllm);
  if (mtp_ && e.engine == pnmem::kv_engine::llama_cpp) {
    throw usage_error("--mtp applies to --engine vllm or exact, not llama.cpp (its MTP layers are not priced)");
  }
  only_for("--ubatch", ubatch_.has_value(), pnmem::kv_engine::llama_cpp);
  only_for("--seqs", seqs_.has_value(), pnmem::kv_engine::llama_cpp);
  if (block_tokens_) e.block_tokens = count_in("--block-tokens", *block_tokens_, 1, 1u << 20);
  if (max_batched_tokens_) e.max_batched_tokens = count_in("--max-batched-tokens", *max_batched_tokens_, 1, 1u << 30);
  if (state_copies_) e.state_copies = count_in("--state-copies", *state_copies_, 1, 64);
  e.ssm_state_fp32 = ssm_state_fp32_;
  e.mtp = mtp_;
  e.hybrid_manager_off = hybrid_manager_off_;
  if (ubatch_) e.ubatch_tokens = count_in("--ubatch", *ubatch_, 1, 1u << 20);
  if (seqs_) e.seqs = count_in("--seqs", *seqs_, 1, 1u << 16);
  return e;
}

}  // namespace pnmem_cli
