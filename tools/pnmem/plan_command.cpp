// tools/pnmem/plan_command.cpp - `pnmem plan`.
#include "plan_command.hpp"

#include <optional>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>

#include "arg_parsers.hpp"
#include "model_options.hpp"
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
  policy_.add_to(app, flag_ladder_disable);
  model_.add_to(app);
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
  out.text = t.str();
  return out;
}

}  // namespace

std::unique_ptr<subcommand> make_plan_command() { return std::make_unique<plan_command>(); }

}  // namespace pnmem_cli
