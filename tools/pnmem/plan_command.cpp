// tools/pnmem/plan_command.cpp - `pnmem plan`.
#include "plan_command.hpp"

#include <sstream>

#include <CLI/CLI.hpp>

#include "arg_parsers.hpp"
#include "pnmem/ladder.hpp"

namespace pnmem_cli {

void plan_command::add_to(CLI::App& parent) {
  app_ = parent.add_subcommand("plan", "Degradation-ladder plan for an operator config at a pressure level");
  app_->add_option("--level", level_, "Pressure level: ok, watch, tight or critical (any case)")
      ->type_name("LEVEL")
      ->required();
  app_->add_option("--slots", slots_, "Configured decode slots, at least 1")->type_name("N")->required();
  app_->add_option("--window", window_, "Configured prefill window in tokens; 0 = no clamp")
      ->type_name("W")
      ->required();
  app_->add_flag("--kv-q4", kv_q4_, "KV caches are already configured as Q4");
  policy_.add_to(*app_, flag_ladder_disable);
}


command_output plan_command::run(const pnmem::policy& env_policy) const {
  const pnmem::mem_level level = parse_level_arg("--level", level_);
  pnmem::ladder_config cfg;
  cfg.max_slots = parse_int_arg("--slots", slots_, 1);
  cfg.prefill_window = parse_int_arg("--window", window_, 0);
  cfg.kv_q4 = kv_q4_;
  const pnmem::policy p = policy_.apply(env_policy);

  const pnmem::ladder_plan plan = pnmem::ladder_plan_for(level, cfg, p);

  command_output out;
  nlohmann::ordered_json& j = out.json;
  j["level"] = std::string(pnmem::to_string(plan.level));
  j["max_slots"] = plan.max_slots;
  j["force_kv_q4"] = plan.force_kv_q4;
  j["kv_evict"] = plan.kv_evict;
  j["prefill_window"] = plan.prefill_window;
  j["degraded"] = plan.degraded;
  j["note"] = std::string(plan.note);
  j["ladder_disabled"] = p.ladder_disabled;
  j["config"] = {{"max_slots", cfg.max_slots}, {"prefill_window", cfg.prefill_window}, {"kv_q4", cfg.kv_q4}};

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
  out.text = t.str();
  return out;
}

}  // namespace pnmem_cli
