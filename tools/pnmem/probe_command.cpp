// tools/pnmem/probe_command.cpp - `pnmem probe`.
#include "probe_command.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "arg_parsers.hpp"
#include "box_sample.hpp"
#include "state_output.hpp"
#include "pnmem/level.hpp"
#include "usage_error.hpp"

namespace pnmem_cli {

namespace {

// The highest level still ready when --max-level is not given.
constexpr pnmem::mem_level default_max_level = pnmem::mem_level::tight;

// What the sampler could not read: "not sampled: meminfo unreadable" (the host: every admission fails
// open), "psi unreadable" (a source that exists but failed); empty when everything read.
std::vector<std::string> unread(const pnmem::mem_state& s) {
  std::vector<std::string> out;
  if (const std::string_view host = pnmem::host_unsampled_reason(s); !host.empty()) {
    out.push_back("not sampled: " + std::string(host) + ", admissions fail open");
  }
  for (const pnmem::host_source src : pnmem::all_host_sources) {
    if (src == pnmem::host_source::meminfo && s.host_total_bytes == 0) continue;  // said above
    if (s.provenance.failed(src)) out.push_back(std::string(pnmem::to_string(src)) + " unreadable");
  }
  return out;
}

// "host critical, psi tight, die 1 tight": the parts above OK, or "all ok", after what could not be
// read; with nothing read only what could be ("not sampled: meminfo not found, admissions fail open"),
// never "all ok".
std::string why(const pnmem::level_report& r, const std::vector<std::string>& problems, bool sampled) {
  std::string levels;
  const auto add = [&levels](const std::string& part, pnmem::mem_level l) {
    if (l == pnmem::mem_level::ok) return;
    if (!levels.empty()) levels += ", ";
    levels += part + ' ' + std::string(pnmem::to_string(l));
  };
  add("host", r.host_level);
  add("psi", r.psi_level);
  add("os", r.os_level);
  if (r.worst_die != pnmem::no_die) add("die " + std::to_string(r.worst_die), r.worst_die_level);
  std::string out;
  for (const std::string& p : problems) out += p + "; ";
  if (levels.empty() && !sampled) return out.substr(0, out.size() - 2);  // nothing read: no "all ok"
  return out + (levels.empty() ? "all ok" : levels);
}

class probe_command final : public box_command {
 public:
  probe_command()
      : box_command("probe", "Readiness probe: exit 0 while this box's level is at or below --max-level, 1 above it") {}

 private:
  void add_command_options(CLI::App& app) override {
    app.add_option("--max-level", max_level_,
                   "Highest level still ready: ok, watch, tight, critical (default " + max_level_ + ")")
        ->type_name("LEVEL");
  }

  command_output answer_for(const pnmem::mem_state& s, const pnmem::policy& p) const override {
    const std::optional<pnmem::mem_level> max = pnmem::parse_mem_level(max_level_);
    if (!max) {
      throw usage_error(describe_bad_value("--max-level", max_level_, "expected ok, watch, tight or critical"));
    }
    // Nothing read is never ready: the level is unknown, and a pod with a blind pnmem is unprotected.
    const bool ready = s.host_total_bytes != 0 && s.level <= *max;
    const std::vector<std::string> problems = unread(s);
    const std::string reason = why(pnmem::explain_level(s, p), problems, s.host_total_bytes != 0);

    command_output out;
    out.exit_status = ready ? 0 : 1;
    out.json_one_line = true;
    out.json["ready"] = ready;
    out.json["level"] = level_word(s);
    out.json["max_level"] = std::string(pnmem::to_string(*max));
    out.json["why"] = reason;
    out.json["sampled"] = s.host_total_bytes != 0;
    out.json["unread"] = problems;
    const std::string compared = s.host_total_bytes == 0 ? "" : (ready ? " <= " : " > ") + std::string(pnmem::to_string(*max));
    out.text = std::string(ready ? "ready: level " : "not ready: level ") + level_word(s) + compared + " (" + reason + ")\n";
    return out;
  }

  std::string max_level_{pnmem::to_string(default_max_level)};
};

}  // namespace

std::unique_ptr<subcommand> make_probe_command() { return std::make_unique<probe_command>(); }

}  // namespace pnmem_cli
