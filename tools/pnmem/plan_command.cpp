// tools/pnmem/plan_command.cpp - `pnmem plan`.
#include "plan_command.hpp"

#include <cstdint>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "arg_parsers.hpp"
#include "eviction_output.hpp"
#include "usage_error.hpp"
#include "model_options.hpp"
#include "pnmem/eviction_budget.hpp"
#include "pnmem/format.hpp"
#include "pnmem/ladder.hpp"
#include "policy_options.hpp"

namespace pnmem_cli {

namespace {

class plan_command final : public one_shot_command {
 public:
  plan_command() : one_shot_command("plan", "Degradation-ladder plan for an operator config at a pressure level") {}

 private:
  void add_options(CLI::App& app) override;
  command_output answer(const pnmem::policy& env_policy) const override;

  std::string level_;
  std::string slots_;
  std::string window_;
  bool kv_q4_ = false;
  std::string tokens_;
  std::string free_;
  policy_options policy_;
  model_options model_;
};

void plan_command::add_options(CLI::App& app) {
  app.add_option("--level", level_, "Pressure level: ok, watch, tight or critical (any case)")
      ->type_name("LEVEL")
      ->required();
  app.add_option("--slots", slots_, "Configured decode slots, at least 1")->type_name("N")->required();
  app.add_option("--window", window_, "Configured prefill window in tokens; 0 = no clamp")
      ->type_name("W")
      ->required();
  app.add_flag("--kv-q4", kv_q4_, "KV caches are already configured as Q4");
  app.add_option("--tokens,--running-tokens", tokens_,
                 "Tokens each running slot holds, comma-separated (e.g. 32768,8192): what rung 4b's KV "
                 "eviction can give back from them (needs the model's shape: --model, --from-hf-config, ...)")
      ->type_name("N[,N...]");
  app.add_option("--free", free_,
                 "Bytes the eviction should give back (e.g. 2GiB): which slots give how much. Without it: "
                 "the most it can give (every slot at its floor)")
      ->type_name("BYTES");
  policy_.add_to(app, flag_ladder_disable);
  model_.add_to(app);
}

// Rung 4b with the running slots: what eviction gives back (eviction_budget.hpp), or why nothing.
void add_eviction(command_output& out, std::ostringstream& t, const pnmem::ladder_plan& plan,
                  const pnmem::model_files::model_description& model, pnmem::kv_format kv,
                  const std::vector<int>& slots, bool wanted, std::uint64_t asked) {
  const pnmem::eviction_limits limits{};
  nlohmann::ordered_json e = {{"enabled", plan.kv_evict},
                              {"kv", std::string(pnmem::to_string(kv))},
                              {"evictable_bytes_per_token", model.cost.full_kv_bytes_per_token[static_cast<std::size_t>(kv)]},
                              {"min_keep_tokens", limits.min_keep_tokens},
                              {"min_keep_permille", limits.min_keep_permille}};
  if (!plan.kv_evict) {
    e["freed_bytes"] = 0;
    out.json["eviction"] = e;
    t << "eviction: off at " << pnmem::to_string(plan.level) << " (rung 4b engages at tight): nothing is evicted\n";
    return;
  }
  std::vector<pnmem::keep_budget_answer> each(slots.size());
  // Without --free (asked is the largest count): the most it can give, every slot at its floor.
  const pnmem::eviction_plan ep = pnmem::plan_eviction(model.cost, kv, slots.data(), static_cast<int>(slots.size()),
                                                       asked, limits, each.data());
  e["asked_bytes"] = wanted ? nlohmann::ordered_json(asked) : nlohmann::ordered_json(nullptr);
  e["enough"] = wanted ? nlohmann::ordered_json(ep.enough) : nlohmann::ordered_json(nullptr);
  put_eviction_plan(e, ep, slots, each);
  out.json["eviction"] = e;

  print_eviction_rule(t, model.cost, kv, limits);
  if (wanted) {
    t << "  asked " << pnmem::format_bytes(asked) << ": " << (ep.enough ? "gives " : "gives only ")
      << pnmem::format_bytes(ep.freed_bytes) << " from " << ep.slots_cut << " slot" << (ep.slots_cut == 1 ? "" : "s");
    if (ep.slots_cut > 0) t << ", each cut to " << pnmem::format_count(ep.cut_to, "token") << " (or its floor)";
    t << (ep.enough ? "" : ": not enough even with every slot at its floor") << '\n';
  } else {
    t << "  at most " << pnmem::format_bytes(ep.freed_bytes) << " (every slot at its floor)\n";
  }
  print_eviction_slots(t, slots, each);
}

command_output plan_command::answer(const pnmem::policy& env_policy) const {
  const pnmem::mem_level level = parse_level_arg("--level", level_);
  pnmem::ladder_config cfg;
  cfg.max_slots = parse_int_arg("--slots", slots_, 1);
  cfg.prefill_window = parse_int_arg("--window", window_, 0);
  cfg.kv_q4 = kv_q4_;
  const pnmem::policy p = policy_.apply(env_policy);
  const std::optional<pnmem::model_files::model_description> model = model_.resolve();

  const pnmem::ladder_plan plan = pnmem::ladder_plan_for(level, cfg, p);
  const std::vector<int> slots = tokens_.empty() ? std::vector<int>{} : parse_running_tokens("--tokens", tokens_);
  // A plain flag and count, not an optional: g++ 12 -O2 reads the optional's value as maybe
  // uninitialised once plan_eviction is inlined (-Werror=maybe-uninitialized, CI's gcc leg).
  const bool wanted = !free_.empty();
  const std::uint64_t asked = wanted ? parse_bytes_arg("--free", free_) : std::numeric_limits<std::uint64_t>::max();
  if (wanted && tokens_.empty()) throw usage_error("--free: needs --tokens (the running slots' lengths)");
  if (!tokens_.empty() && !model) {
    throw usage_error(std::string("--tokens: the bytes a token frees are the model's: give ") +
                      model_options::sources_words);
  }

  command_output out;
  out.json = {
      {"level", std::string(pnmem::to_string(plan.level))},
      {"max_slots", plan.max_slots},
      {"force_kv_q4", plan.force_kv_q4},
      {"kv_evict", plan.kv_evict},
      {"prefill_window", plan.prefill_window},
      {"degraded", plan.degraded},
      {"note", std::string(plan.note)},
      {"ladder_disabled", p.ladder_disabled},
      {"config", {{"max_slots", cfg.max_slots}, {"prefill_window", cfg.prefill_window}, {"kv_q4", cfg.kv_q4}}},
  };

  auto yes_no = [](bool b) { return b ? "yes" : "no"; };
  std::ostringstream t;
  t << "plan at " << pnmem::to_string(plan.level) << ": " << (plan.degraded ? "degraded" : "operator config")
    << " (" << plan.note << ")\n";
  t << "max_slots: " << plan.max_slots << " (configured " << cfg.max_slots << ")\n";
  t << "prefill_window: " << plan.prefill_window;
  if (plan.prefill_window == 0) {
    t << " (no clamp)\n";
  } else {
    t << " (configured " << cfg.prefill_window << ")\n";
  }
  t << "force_kv_q4: " << yes_no(plan.force_kv_q4) << ", kv_evict: " << yes_no(plan.kv_evict) << '\n';
  // With a model: the format a KV cache allocated now must use (rung 4a, or a Q4 config, means the
  // model's compact format) and what it costs. Without one the output is what it always was.
  if (model) {
    const pnmem::kv_format kv = plan.force_kv_q4 ? model->cost.compact_kv : model->cost.normal_kv;
    nlohmann::ordered_json m = model_brief_json(*model, kv);
    m["compact"] = plan.force_kv_q4;
    out.json["model"] = m;
    t << "new KV caches: " << pnmem::to_string(kv) << ", " << pnmem::kv_bytes_per_token(model->cost, kv)
      << " B/token (" << (plan.force_kv_q4 ? "the model's compact format" : "the model's normal format") << ")\n";
    t << model_brief_text(*model, kv) << '\n';
  }
  // The running slots' caches were allocated before this plan: in the configured format (the model's
  // compact one when --kv-q4 says they are).
  if (!tokens_.empty()) {
    add_eviction(out, t, plan, *model, kv_q4_ ? model->cost.compact_kv : model->cost.normal_kv, slots, wanted, asked);
  }
  out.text = t.str();
  return out;
}

}  // namespace

std::unique_ptr<subcommand> make_plan_command() { return std::make_unique<plan_command>(); }

}  // namespace pnmem_cli
