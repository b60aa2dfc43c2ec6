// tools/pnmem/metrics_command.cpp
#include "metrics_command.hpp"

#include <iostream>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "arg_parsers.hpp"
#include "box_sample.hpp"
#include "pnmem/engine/metrics.hpp"
#include "pnmem/level.hpp"
#include "usage_error.hpp"

namespace pnmem_cli {

// --- metrics -------------------------------------------------------------------

void metrics_command::add_to(CLI::App& parent) {
  app_ = parent.add_subcommand("metrics", "One sample of this box as Prometheus text exposition (format 0.0.4)");
  add_root_option(*app_, root_);
}

command_output metrics_command::run(const pnmem::policy& env_policy) const {
  const pnmem::mem_state s = sample_box(root_, env_policy);
  command_output out;
  out.text = pnmem::prometheus_text(s, nullptr, env_policy);
  out.json["content_type"] = std::string(pnmem::prometheus_content_type);
  out.json["exposition"] = out.text;
  return out;
}

// --- probe ---------------------------------------------------------------------

namespace {

// "host critical, psi tight, die 1 tight": the parts above OK, or "all ok".
std::string why(const pnmem::level_report& r) {
  std::string out;
  const auto add = [&out](const std::string& part, pnmem::mem_level l) {
    if (l == pnmem::mem_level::ok) return;
    if (!out.empty()) out += ", ";
    out += part + ' ' + std::string(pnmem::to_string(l));
  };
  add("host", r.host_level);
  add("psi", r.psi_level);
  add("os", r.os_level);
  if (r.worst_die != pnmem::no_die) add("die " + std::to_string(r.worst_die), r.worst_die_level);
  return out.empty() ? "all ok" : out;
}

}  // namespace

void probe_command::add_to(CLI::App& parent) {
  app_ = parent.add_subcommand(
      "probe", "Readiness probe: exit 0 while this box's level is at or below --max-level, 1 above it");
  add_root_option(*app_, root_);
  app_->add_option("--max-level", max_level_, "Highest level still ready: ok, watch, tight, critical (default tight)")
      ->type_name("LEVEL");
}

command_output probe_command::run(const pnmem::policy&) const { return {}; }

int probe_command::stream(const pnmem::policy& env_policy, bool json) const {
  const std::optional<pnmem::mem_level> max = pnmem::parse_mem_level(max_level_);
  if (!max) {
    throw usage_error(describe_bad_value("--max-level", max_level_, "expected ok, watch, tight or critical"));
  }
  const pnmem::mem_state s = sample_box(root_, env_policy);
  const bool ready = s.level <= *max;
  const std::string reason = why(pnmem::explain_level(s, env_policy));
  if (json) {
    nlohmann::ordered_json j;
    j["ready"] = ready;
    j["level"] = std::string(pnmem::to_string(s.level));
    j["max_level"] = std::string(pnmem::to_string(*max));
    j["why"] = reason;
    std::cout << j.dump() << '\n';
  } else {
    std::cout << (ready ? "ready: level " : "not ready: level ") << pnmem::to_string(s.level)
              << (ready ? " <= " : " > ") << pnmem::to_string(*max) << " (" << reason << ")\n";
  }
  std::cout.flush();
  if (!std::cout) return 1;
  return ready ? 0 : 1;
}

}  // namespace pnmem_cli
