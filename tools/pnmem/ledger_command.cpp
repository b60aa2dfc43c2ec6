// tools/pnmem/ledger_command.cpp - `pnmem ledger`.
#include "ledger_command.hpp"

#include <cstdint>
#include <iomanip>
#include <optional>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>

#include "box_sample.hpp"
#include "diagnostics.hpp"
#include "pnmem/engine/metrics.hpp"
#include "pnmem/format.hpp"
#include "pnmem/linux/box_ledger.hpp"
#include "text_option.hpp"
#include "usage_error.hpp"
#include "arg_parsers.hpp"

namespace pnmem_cli {

namespace {

namespace lo = pnmem::linux_os;

lo::box_options options_for(const pnmem::mem_state& s, const std::optional<std::string>& ledger,
                            const std::optional<std::string>& group) {
  lo::box_options o = lo::box_options_from_env();
  if (ledger) o.ledger = *ledger;
  if (group) o.group = *group;
  o.limit_cgroup = std::string(s.provenance.limit_cgroup_path());
  o.box_total_bytes = s.provenance.meminfo_total_bytes;
  return o;
}

double seconds(std::int64_t ns) { return static_cast<double>(ns) / 1e9; }

class ledger_command final : public box_command {
 public:
  ledger_command()
      : box_command("ledger",
                    "The box ledger this box's pnmem processes share: who holds what, and the totals (Linux)") {}

 private:
  void add_command_options(CLI::App& app) override {
    add_text_option(app, "--ledger", ledger_,
                    "The scope, as PN_LEDGER takes it: auto (this user's and memory cgroup's, the default), a "
                    "name, or an absolute path (overrides PN_LEDGER)")
        ->type_name("SCOPE");
    add_text_option(app, "--group", group_, "The group of a ledger shared between users (overrides PN_LEDGER_GROUP)")
        ->type_name("GROUP");
  }

  command_output answer_for(const pnmem::mem_state& s, const pnmem::policy& /*p*/) const override {
    const lo::box_options o = options_for(s, ledger_, group_);
    const lo::box_path where = lo::box_path_for(o);
    if (ledger_ && !where.problem.empty()) {
      throw usage_error(describe_bad_value("--ledger", *ledger_,
                                           "not a scope (use off, auto, a name of up to 64 letters, digits, '-', '_' "
                                           "and '.', or an absolute path)"));
    }
    command_output out;
    if (where.off || !where.problem.empty()) {
      out.text = where.off ? "ledger: off (PN_LEDGER=off): each process counts only its own promises\n"
                           : "ledger: " + where.problem + "\n";
      out.json["path"] = nullptr;
      out.json["off"] = where.off;
      if (!where.off) {
        out.json["problem"] = where.problem;
        out.exit_status = 1;
      }
      return out;
    }
    const lo::box_read r = lo::read_box(o);
    out.json["path"] = where.path;
    if (!r.view) {
      out.json["problem"] = r.problem;
      out.json["holders"] = nlohmann::ordered_json::array();
      if (r.missing) {
        out.text = "ledger: " + where.path + ": no process has joined it yet (it is made by the first)\n";
        out.json["processes"] = 0;
      } else {
        out.text = "ledger: " + r.problem + "\n";
        out.exit_status = 1;
      }
      return out;
    }
    const lo::box_view& v = *r.view;
    const std::uint64_t pending = v.unsettled_bytes + v.settled_unseen_bytes;
    out.json["scope"] = v.scope;
    out.json["processes"] = v.holders.size();
    out.json["pending_bytes"] = pending;
    out.json["reserved_bytes"] = v.unsettled_bytes;
    out.json["settled_unseen_bytes"] = v.settled_unseen_bytes;
    out.json["credited_unseen_bytes"] = v.credited_unseen_bytes;
    nlohmann::ordered_json holders = nlohmann::ordered_json::array();
    std::ostringstream t;
    t << "ledger: " << one_line(where.path) << " (" << one_line(v.scope) << "), " << v.holders.size()
      << (v.holders.size() == 1 ? " process" : " processes") << '\n';
    t << "pending: " << pnmem::format_bytes(pending) << " (" << pending << " B): "
      << pnmem::format_bytes(v.unsettled_bytes) << " reserved, " << pnmem::format_bytes(v.settled_unseen_bytes)
      << " settled that the newest sample has not seen; credited " << pnmem::format_bytes(v.credited_unseen_bytes) << '\n';
    if (!v.holders.empty()) {
      t << std::left << "  " << std::setw(9) << "pid" << std::setw(17) << "command" << std::setw(20) << "reserved"
        << std::setw(14) << "settled" << std::setw(14) << "credited" << "holding for" << '\n';
    }
    for (const lo::box_holder_view& h : v.holders) {
      const pnmem::box_holder& x = h.holder;
      const std::string comm = one_line(x.comm);
      // Since it first held something, at most since it joined (a hold is stamped with the box's newest sample).
      const std::int64_t since = x.holding_since_ns > x.joined_ns ? x.holding_since_ns : x.joined_ns;
      const double held = x.reservations > 0 && v.now_ns > since ? seconds(v.now_ns - since) : 0.0;
      nlohmann::ordered_json j;
      j["pid"] = x.pid;
      j["command"] = comm;
      j["reservations"] = x.reservations;
      j["reserved_bytes"] = x.unsettled_bytes;
      j["settled_unseen_bytes"] = h.settled_unseen_bytes;
      j["credited_unseen_bytes"] = h.credited_unseen_bytes;
      j["settled_bytes_total"] = x.settled_bytes;
      j["credited_bytes_total"] = x.credited_bytes;
      j["holding_for_seconds"] = held;
      j["joined_seconds_ago"] = v.now_ns > x.joined_ns ? seconds(v.now_ns - x.joined_ns) : 0.0;
      holders.push_back(j);
      std::ostringstream held_text;
      held_text << std::fixed << std::setprecision(1) << held << " s";
      t << "  " << std::setw(9) << x.pid << std::setw(17) << comm << std::setw(20)
        << (pnmem::format_bytes(x.unsettled_bytes) + " (" + std::to_string(x.reservations) + ")") << std::setw(14)
        << pnmem::format_bytes(h.settled_unseen_bytes) << std::setw(14) << pnmem::format_bytes(h.credited_unseen_bytes)
        << (x.reservations > 0 ? held_text.str() : std::string("-")) << '\n';
    }
    out.json["holders"] = holders;
    // The GPUs of the book, by UUID (processes that name their dies: pnmem_set_die_uuid, name_dies).
    nlohmann::ordered_json dies = nlohmann::ordered_json::array();
    if (!v.dies.empty()) {
      t << "dies:" << '\n';
      t << std::left << "  " << std::setw(42) << "gpu" << std::setw(20) << "reserved" << std::setw(14) << "settled"
        << "retiring" << '\n';
    }
    for (const lo::box_die_view& d : v.dies) {
      const std::string gpu = pnmem::to_string(d.uuid);
      t << "  " << std::setw(42) << gpu << std::setw(20)
        << (pnmem::format_bytes(d.reserved_bytes) + " (" + std::to_string(d.reservations) + ")") << std::setw(14)
        << pnmem::format_bytes(d.settled_unseen_bytes) << pnmem::format_bytes(d.retiring_bytes) << '\n';
      nlohmann::ordered_json j;
      j["gpu"] = gpu;
      j["reservations"] = d.reservations;
      j["reserved_bytes"] = d.reserved_bytes;
      j["settled_unseen_bytes"] = d.settled_unseen_bytes;
      j["retiring_bytes"] = d.retiring_bytes;
      nlohmann::ordered_json by = nlohmann::ordered_json::array();
      for (const auto& h : d.holders) {
        by.push_back({{"pid", h.pid},
                      {"reservations", h.reservations},
                      {"reserved_bytes", h.reserved_bytes},
                      {"retiring_bytes", h.retiring_bytes}});
      }
      j["holders"] = by;
      dies.push_back(j);
    }
    out.json["dies"] = dies;
    out.text = t.str();
    return out;
  }

  std::optional<std::string> ledger_;
  std::optional<std::string> group_;
};

}  // namespace

std::unique_ptr<subcommand> make_ledger_command() { return std::make_unique<ledger_command>(); }

std::string box_ledger_metrics(const pnmem::mem_state& s) {
  const lo::box_read r = lo::read_box(options_for(s, std::nullopt, std::nullopt));
  if (!r.view) return {};
  const lo::box_view& v = *r.view;
  pnmem::ledger_load l{v.scope, v.holders.size(), v.unsettled_bytes + v.settled_unseen_bytes, v.credited_unseen_bytes};
  for (const lo::box_die_view& d : v.dies) {
    l.dies.push_back({pnmem::to_string(d.uuid), d.reserved_bytes + d.settled_unseen_bytes, d.retiring_bytes});
  }
  return pnmem::prometheus_ledger_text(l);
}

}  // namespace pnmem_cli
