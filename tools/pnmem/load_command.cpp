// tools/pnmem/load_command.cpp - `pnmem load`.
#include "load_command.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "arg_parsers.hpp"
#include "die_spec.hpp"
#include "host_options.hpp"
#include "model_options.hpp"
#include "pnmem/admission.hpp"
#include "pnmem/format.hpp"
#include "policy_options.hpp"
#include "text_option.hpp"
#include "usage_error.hpp"
#include "verdict_output.hpp"

namespace pnmem_cli {

namespace {

// ceil(total / parts) for parts >= 1: one die's share of an even split, so the
// slices together never under-count the total.
constexpr std::uint64_t split_round_up(std::uint64_t total, std::uint64_t parts) noexcept {
  return total / parts + (total % parts != 0 ? 1 : 0);
}

class load_command final : public one_shot_command {
 public:
  load_command() : one_shot_command("load", "Admit or reject a model upload onto the dies (and its host burst)") {}

 private:
  void add_options(CLI::App& app) override;
  command_output answer(const pnmem::policy& env_policy) const override;

  std::string weights_;
  std::optional<std::string> kv_max_ctx_;
  std::optional<std::string> ctx_;
  std::optional<std::string> sequences_;
  std::optional<std::string> least_ctx_;
  std::optional<std::string> kv_;
  std::vector<std::string> dies_;
  host_options host_;
  policy_options policy_;
  model_options model_;
};

void load_command::add_options(CLI::App& app) {
  app.add_option("--weights", weights_, "Model weight bytes")->type_name("BYTES")->required();
  add_text_option(app, "--kv-max-ctx", kv_max_ctx_, "KV cache bytes at the maximum context (or --ctx)")
      ->type_name("BYTES");
  add_text_option(app, "--ctx", ctx_,
                  "Instead of --kv-max-ctx: the maximum context in tokens; the KV at it is computed from the "
                  "model (the model flags, or the seed's): (KV of N tokens + state) x --sequences")
      ->type_name("N");
  add_text_option(app, "--sequences", sequences_, "With --ctx: sequences the KV cache holds, at least 1 (default 1)")
      ->type_name("S");
  add_text_option(app, "--least-ctx", least_ctx_,
                  "With --ctx and the host: the load goes into host memory (a CPU engine, a runner loading into "
                  "RAM): start it with the largest context from --ctx down to N that fits with the host at WATCH "
                  "or better (pnmem_admit_host_load; the weights fixed, each token the model's KV while shorter "
                  "than every window, x --sequences)")
      ->type_name("N");
  add_text_option(app, "--kv", kv_,
                  "With --ctx: the cache's KV format (q4, fp32, f16, bf16, fp8, q8_0, q4_0; default the "
                  "model's normal format)")
      ->type_name("FORMAT");
  app.add_option("--die", dies_,
                 "A die as FREE:BUDGET[:USED] bytes; repeat for up to 16 dies, index = order given; "
                 "without it only the host burst is checked")
      ->type_name("FREE:BUDGET[:USED]")
      ->allow_extra_args(false);
  host_.add_to(app, /*required=*/false, /*with_psi=*/false);
  policy_.add_to(app, flag_die_reserve | flag_load_spike | flag_host_reserve);
  model_.add_to(app);
}

command_output load_command::answer(const pnmem::policy& env_policy) const {
  pnmem::model_load_spec model;
  model.weights_bytes = parse_bytes_arg("--weights", weights_);
  if (kv_max_ctx_ && ctx_) {
    throw usage_error("--kv-max-ctx and --ctx: give the KV bytes at the maximum context or the context, not both");
  }
  if (!ctx_) {
    if (!kv_max_ctx_) {
      throw usage_error("--kv-max-ctx is required (the KV bytes at the maximum context), or --ctx N to compute "
                        "them from the model");
    }
    for (const auto& [flag, given] : {std::pair{"--sequences", sequences_.has_value()}, std::pair{"--kv", kv_.has_value()},
                                      std::pair{"--least-ctx", least_ctx_.has_value()}}) {
      if (given) throw usage_error(std::string(flag) + " needs --ctx N (with --kv-max-ctx the KV bytes are given)");
    }
    if (const std::string flag = model_.first_given(); !flag.empty()) {
      throw usage_error(flag +
                        " needs --ctx N (with --kv-max-ctx the KV bytes are given, not computed from a model)");
    }
    model.kv_max_ctx_bytes = parse_bytes_arg("--kv-max-ctx", *kv_max_ctx_);
  }
  // --ctx: KV at the maximum context from the model, with load_spec_for.
  std::optional<pnmem::model_files::model_description> from_model;
  std::uint64_t ctx_tokens = 0;
  std::uint64_t sequences = 1;
  pnmem::kv_format kv = pnmem::kv_format::fp32;
  if (ctx_) {
    ctx_tokens = parse_count_arg("--ctx", *ctx_);
    if (sequences_) sequences = static_cast<std::uint64_t>(parse_int_arg("--sequences", *sequences_, 1));
    from_model = model_.resolve();
    if (!from_model) from_model = seed_description();
    kv = kv_ ? parse_kv_arg("--kv", *kv_) : from_model->cost.normal_kv;
    model = pnmem::load_spec_for(from_model->cost, model.weights_bytes, ctx_tokens, kv, sequences);
  }
  const std::vector<die_spec> dies = parse_die_specs("--die", dies_);
  const bool host_given = host_.given();
  pnmem::mem_state state;
  host_.put(state);
  put_dies(state, dies);
  const pnmem::policy p = policy_.apply(env_policy);
  // A model load is a question about dies, its host burst one about the host: with
  // neither described there is nothing to answer (and without dies, admit_model_load
  // could only say bad_request: the model has no die to go to).
  if (dies.empty() && !host_given) {
    throw usage_error("nothing to check: give the dies (--die FREE:BUDGET[:USED]) or the host "
                      "(--host-total and --host-avail), or both");
  }

  command_output out;
  nlohmann::ordered_json& j = out.json;
  std::ostringstream t;
  if (dies.empty()) {
    j["model_load"] = nullptr;
    j["per_die"] = nlohmann::ordered_json::array();
    t << "model_load: not checked (give --die FREE:BUDGET[:USED])\n";
  } else {
    const pnmem::admit_result whole = pnmem::admit_model_load(model, state, pnmem::no_die, p);
    j["model_load"] = verdict_json(whole);
    t << verdict_line("model_load", whole, pnmem::answer_kind::model_load) << '\n';
    const std::uint64_t n = dies.size();
    const std::uint64_t weights_slice = split_round_up(model.weights_bytes, n);
    const std::uint64_t kv_slice = split_round_up(model.kv_max_ctx_bytes, n);
    j["per_die"] = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < dies.size(); ++i) {
      const pnmem::admit_result r =
          pnmem::admit_model_load_die(weights_slice, kv_slice, state, static_cast<int>(i), p);
      j["per_die"].push_back(verdict_json(r));
      t << verdict_line("per_die", r, pnmem::answer_kind::load_slice) << '\n';
    }
  }
  if (least_ctx_) {
    // The load into host memory, started with the context that fits (admission.hpp admit_host_load).
    if (!host_given) throw usage_error("--least-ctx: a load into host memory needs the host (--host-total and --host-avail)");
    const int wanted = parse_int_arg("--ctx", *ctx_, 0);
    pnmem::host_load_spec l;
    l.fixed_bytes = pnmem::detail::sat_add(model.weights_bytes,
                                           pnmem::detail::sat_mul(sequences, from_model->cost.state_bytes_per_seq));
    l.bytes_per_token = pnmem::detail::sat_mul(sequences, pnmem::kv_bytes_per_token(from_model->cost, kv));
    l.wanted_tokens = wanted;
    l.least_tokens = parse_int_arg("--least-ctx", *least_ctx_, 0);
    if (l.least_tokens > wanted) {
      throw usage_error("--least-ctx " + std::to_string(l.least_tokens) + ": more than --ctx " + std::to_string(wanted));
    }
    const pnmem::admit_result hl = pnmem::admit_host_load(l, state, p);
    nlohmann::ordered_json hj = verdict_json(hl);
    hj["fit_tokens"] = hl.fit_tokens;
    hj["fixed_bytes"] = l.fixed_bytes;
    hj["bytes_per_token"] = l.bytes_per_token;
    hj["least_tokens"] = l.least_tokens;
    j["host_load"] = hj;
    t << verdict_line("host_load", hl, pnmem::answer_kind::host_load) << '\n';
  }
  if (host_given) {
    const pnmem::admit_result spike = pnmem::admit_load_spike(state, p);
    j["load_spike"] = verdict_json(spike);
    t << verdict_line("load_spike", spike, pnmem::answer_kind::load_spike) << '\n';
  } else {
    j["load_spike"] = nullptr;
    t << "load_spike: not checked (give --host-total and --host-avail)\n";
  }
  j["weights_bytes"] = model.weights_bytes;
  j["kv_max_ctx_bytes"] = model.kv_max_ctx_bytes;
  j["die_reserve_bytes"] = p.die_reserve_bytes;
  j["die_scratch_bytes"] = p.die_scratch_bytes;
  if (from_model) {
    j["ctx_tokens"] = ctx_tokens;
    j["sequences"] = sequences;
    j["kv"] = std::string(pnmem::to_string(kv));
    j["model"] = model_brief_json(*from_model, kv);
    t << "kv_max_ctx: " << pnmem::format_need_bytes(model.kv_max_ctx_bytes) << " (" << model.kv_max_ctx_bytes << " B) = "
      << sequences << (sequences == 1 ? " sequence" : " sequences") << " x " << pnmem::format_count(static_cast<long long>(ctx_tokens), "token") << " in "
      << pnmem::to_string(kv) << '\n';
    t << model_brief_text(*from_model, kv) << '\n';
  }
  out.text = t.str();
  return out;
}

}  // namespace

std::unique_ptr<subcommand> make_load_command() { return std::make_unique<load_command>(); }

}  // namespace pnmem_cli
