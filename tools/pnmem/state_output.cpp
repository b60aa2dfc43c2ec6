// tools/pnmem/state_output.cpp
#include "state_output.hpp"

#include <cstddef>
#include <cstdint>
#include <iomanip>
#include <sstream>
#include <string_view>
#include <vector>

#include "pnmem/format.hpp"
#include "pnmem/level.hpp"
#include "pnmem/provenance.hpp"

namespace pnmem_cli {

namespace {

// The names of the sources set in `bits`, in bit order.
std::vector<std::string_view> source_names(std::uint32_t bits) {
  std::vector<std::string_view> names;
  for (const pnmem::host_source s : pnmem::all_host_sources) {
    if ((bits & static_cast<std::uint32_t>(s)) != 0) names.push_back(pnmem::to_string(s));
  }
  return names;
}

nlohmann::ordered_json source_list(std::uint32_t bits) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const std::string_view name : source_names(bits)) a.push_back(std::string(name));
  return a;
}

std::string source_words(std::uint32_t bits) {
  std::string out;
  for (const std::string_view name : source_names(bits)) {
    if (!out.empty()) out += ' ';
    out += name;
  }
  return out.empty() ? "none" : out;
}

std::string level_name(pnmem::mem_level l) { return std::string(pnmem::to_string(l)); }

}  // namespace

std::string level_word(const pnmem::mem_state& s) {
  const std::string name(pnmem::to_string(s.level));
  if (s.host_total_bytes != 0) return name;
  return s.level == pnmem::mem_level::ok ? "unknown" : "at least " + name;
}

nlohmann::ordered_json state_json(const pnmem::mem_state& s, const pnmem::policy& p) {
  nlohmann::ordered_json j;
  pnmem::for_each_host_number([&](std::string_view name, auto field) { j[std::string(name)] = field(s); });
  // The full-stall rate over the policy's window (watcher history; 0 in a one-shot sample).
  j["host_psi_full_sustained"] = s.host_psi_full_sustained;
  const int n = pnmem::die_count(s);
  j["n_dies"] = n;
  auto die_array = [&](const auto& arr) {
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (int i = 0; i < n; ++i) a.push_back(arr[static_cast<std::size_t>(i)]);
    return a;
  };
  j["per_die_free"] = die_array(s.per_die_free_bytes);
  j["per_die_budget"] = die_array(s.per_die_budget_bytes);
  j["per_die_used"] = die_array(s.per_die_used_bytes);
  j["per_die_retiring"] = die_array(s.per_die_retiring_bytes);
  j["level"] = level_word(s);
  j["sampled"] = s.host_total_bytes != 0;
  j["raw_level"] = level_name(s.raw_level);
  j["host_os_level"] = level_name(s.host_os_level);
  j["seq"] = s.seq;
  j["sample_time_ns"] = s.sample_time_ns;
  j["host_reserve_bytes"] = pnmem::host_reserve_bytes(s, p);  // the snapshot's: a container's limit scales it

  const pnmem::sample_provenance& pv = s.provenance;
  nlohmann::ordered_json prov;
  prov["sources_read"] = source_list(pv.sources_read);
  prov["sources_failed"] = source_list(pv.sources_failed);
  prov["cgroup_mode"] = std::string(pnmem::to_string(pv.cgroup));
  prov["psi_mode"] = std::string(pnmem::to_string(pv.psi));
  prov["meminfo_total_bytes"] = pv.meminfo_total_bytes;
  prov["meminfo_avail_bytes"] = pv.meminfo_avail_bytes;
  prov["cgroup_limit_bytes"] = pv.cgroup_limit_bytes;
  prov["cgroup_working_set_bytes"] = pv.cgroup_working_set_bytes;
  const std::string_view path = pv.limit_cgroup_path();
  if (path.empty()) {
    prov["limit_cgroup"] = nullptr;
  } else {
    prov["limit_cgroup"] = std::string(path);
  }
  j["provenance"] = prov;
  return j;
}

std::string state_text(const pnmem::mem_state& s, const pnmem::policy& p) {
  const pnmem::level_report r = pnmem::explain_level(s, p);
  const pnmem::sample_provenance& pv = s.provenance;
  std::ostringstream t;
  t << std::fixed << std::setprecision(2);
  t << "level: " << level_word(s);
  if (s.raw_level != s.level) t << " (raw " << pnmem::to_string(s.raw_level) << ", stepping down after the dwell)";
  if (s.host_total_bytes == 0) t << " (not sampled: " << pnmem::host_unsampled_reason(s) << "; admissions fail open)";
  t << '\n';
  if (s.host_total_bytes == 0) {
    t << "host: not sampled (" << pnmem::host_unsampled_reason(s) << ")\n";
  } else {
    t << "host: " << pnmem::to_string(r.host_level);
    t << " (avail " << pnmem::format_bytes(s.host_avail_bytes) << " of " << pnmem::format_bytes(s.host_total_bytes)
      << ", reserve " << pnmem::format_bytes(r.host_reserve_bytes) << ")\n";
  }
  // PSI not read (no file under the root, an old kernel, PN_PSI_SOURCE=off) is not "ok" either.
  t << "psi: " << (pv.psi == pnmem::psi_mode::none ? std::string("not read") : std::string(pnmem::to_string(r.psi_level)))
    << " (some avg10 " << s.host_psi_some_avg10 << " % rate "
    << s.host_psi_some_rate << " %, full avg10 " << s.host_psi_full_avg10 << " % rate " << s.host_psi_full_rate
    << " % over " << p.psi_full_window_ms << " ms " << s.host_psi_full_sustained << " %; " << pnmem::to_string(pv.psi) << ")\n";
  t << "cgroup: " << pnmem::to_string(pv.cgroup);
  if (pv.cgroup_limit_bytes != 0) {
    t << ", limit " << pnmem::format_bytes(pv.cgroup_limit_bytes) << " at " << pv.limit_cgroup_path()
      << ", working set " << pnmem::format_bytes(pv.cgroup_working_set_bytes);
  } else if (pv.cgroup != pnmem::cgroup_mode::none) {
    t << ", no limit";
  }
  t << '\n';
  if (pv.meminfo_total_bytes != 0) {
    t << "meminfo: MemTotal " << pnmem::format_bytes(pv.meminfo_total_bytes) << ", MemAvailable "
      << pnmem::format_bytes(pv.meminfo_avail_bytes) << '\n';
  }
  if (s.host_os_level != pnmem::mem_level::ok) t << "os: " << pnmem::to_string(s.host_os_level) << '\n';
  for (int i = 0; i < r.n_dies; ++i) {
    const auto k = static_cast<std::size_t>(i);
    t << "die " << i << ": " << pnmem::to_string(r.die_levels[k]) << " (free " << pnmem::format_bytes(s.per_die_free_bytes[k])
      << " of " << pnmem::format_bytes(s.per_die_budget_bytes[k]) << " budget)\n";
  }
  t << "sources: " << source_words(pv.sources_read);
  if (pv.sources_failed != 0) t << "; failed: " << source_words(pv.sources_failed);
  t << '\n';
  return t.str();
}

std::string state_line(const pnmem::mem_state& s) {
  std::ostringstream t;
  t << std::fixed << std::setprecision(2);
  t << std::left << std::setw(8) << level_word(s) << " avail ";
  if (s.host_total_bytes == 0) {
    t << "unknown";
  } else {
    t << pnmem::format_bytes(s.host_avail_bytes) << " / " << pnmem::format_bytes(s.host_total_bytes);
  }
  t << "  psi some " << s.host_psi_some_avg10 << "/" << s.host_psi_some_rate << " full " << s.host_psi_full_avg10
    << "/" << s.host_psi_full_rate << " %";
  if (s.provenance.cgroup_limit_bytes != 0) t << "  cgroup " << pnmem::to_string(s.provenance.cgroup) << " limit " << pnmem::format_bytes(s.provenance.cgroup_limit_bytes);
  for (int i = 0; i < pnmem::die_count(s); ++i) {
    t << "  die" << i << " " << pnmem::format_bytes(s.per_die_free_bytes[static_cast<std::size_t>(i)]);
  }
  return t.str();
}

}  // namespace pnmem_cli
