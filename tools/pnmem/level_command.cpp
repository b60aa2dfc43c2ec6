// tools/pnmem/level_command.cpp - `pnmem level`.
#include "level_command.hpp"

#include <cstddef>
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "die_spec.hpp"
#include "host_options.hpp"
#include "pnmem/format.hpp"
#include "pnmem/level.hpp"
#include "policy_options.hpp"
#include "verdict_output.hpp"

namespace pnmem_cli {

namespace {

class level_command final : public one_shot_command {
 public:
  level_command()
      : one_shot_command("level", "Pressure level (ok/watch/tight/critical) of a described host and dies") {}

 private:
  void add_options(CLI::App& app) override;
  command_output answer(const pnmem::policy& env_policy) const override;

  host_options host_;
  std::vector<std::string> dies_;
  policy_options policy_;
};

void level_command::add_options(CLI::App& app) {
  host_.add_to(app, /*required=*/true, /*with_psi=*/true);
  app.add_option("--die", dies_,
                   "A die as FREE:BUDGET[:USED] bytes (BUDGET = total VRAM - die reserve; 0 = not measured); "
                   "repeat for up to 16 dies, index = order given")
      ->type_name("FREE:BUDGET[:USED]")
      ->allow_extra_args(false);
  policy_.add_to(app, level_flags);
}

command_output level_command::answer(const pnmem::policy& env_policy) const {
  pnmem::mem_state state;
  host_.put(state);
  const std::vector<die_spec> dies = parse_die_specs("--die", dies_);
  put_dies(state, dies);
  const pnmem::policy p = policy_.apply(env_policy);

  const pnmem::level_report r = pnmem::explain_level(state, p);

  command_output out;
  nlohmann::ordered_json& j = out.json;
  j["level"] = std::string(pnmem::to_string(r.level));
  j["host_level"] = std::string(pnmem::to_string(r.host_level));
  j["psi_level"] = std::string(pnmem::to_string(r.psi_level));
  j["die_levels"] = nlohmann::ordered_json::array();
  for (int i = 0; i < r.n_dies; ++i) {
    j["die_levels"].push_back(std::string(pnmem::to_string(r.die_levels[static_cast<std::size_t>(i)])));
  }
  j["worst_die"] = die_json(r.worst_die);
  j["worst_die_level"] = std::string(pnmem::to_string(r.worst_die_level));
  j["host_reserve_bytes"] = r.host_reserve_bytes;
  j["host_total_bytes"] = state.host_total_bytes;
  j["host_avail_bytes"] = state.host_avail_bytes;
  j["psi_some_avg10"] = state.host_psi_some_avg10;
  j["psi_full_avg10"] = state.host_psi_full_avg10;
  j["psi_full_reject_pct"] = static_cast<double>(p.psi_full_reject_bp) / static_cast<double>(pnmem::bp_per_percent);
  j["dies"] = nlohmann::ordered_json::array();
  for (const auto& d : dies) {
    j["dies"].push_back({{"free_bytes", d.free_bytes}, {"budget_bytes", d.budget_bytes}, {"used_bytes", d.used_bytes}});
  }

  std::ostringstream t;
  t << std::fixed << std::setprecision(2);
  t << "level: " << pnmem::to_string(r.level) << '\n';
  t << "host: " << pnmem::to_string(r.host_level);
  if (state.host_total_bytes == 0) {
    t << " (not sampled: host total 0)\n";
  } else {
    t << " (avail " << pnmem::format_bytes(state.host_avail_bytes) << " of "
      << pnmem::format_bytes(state.host_total_bytes) << ", reserve " << pnmem::format_bytes(r.host_reserve_bytes)
      << ")\n";
  }
  t << "psi: " << pnmem::to_string(r.psi_level) << " (some " << state.host_psi_some_avg10 << " %, full "
    << state.host_psi_full_avg10 << " %, reject at " << pnmem::format_percent_bp(p.psi_full_reject_bp) << ")\n";
  for (std::size_t i = 0; i < dies.size(); ++i) {
    t << "die " << i << ": " << pnmem::to_string(r.die_levels[i]);
    if (dies[i].budget_bytes == 0) {
      t << " (not measured: budget 0)\n";
    } else {
      t << " (free " << pnmem::format_bytes(dies[i].free_bytes) << " of "
        << pnmem::format_bytes(dies[i].budget_bytes) << " budget)\n";
    }
  }
  out.text = t.str();
  return out;
}

}  // namespace

std::unique_ptr<subcommand> make_level_command() { return std::make_unique<level_command>(); }

}  // namespace pnmem_cli
