// examples/survival/events.cpp - the workload's event lines, written and read back.
#include "events.hpp"

#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace survival {

namespace {

std::optional<pnmem::mem_level> parse_level(std::string_view s) noexcept {
  for (const auto l : {pnmem::mem_level::ok, pnmem::mem_level::watch, pnmem::mem_level::tight,
                       pnmem::mem_level::critical}) {
    if (s == pnmem::to_string(l)) return l;
  }
  return std::nullopt;
}

}  // namespace

std::optional<outcome> parse_outcome(std::string_view s) noexcept {
  for (const auto o : {outcome::admitted, outcome::capped, outcome::rejected}) {
    if (s == to_string(o)) return o;
  }
  return std::nullopt;
}

std::string format_queued(const queued_event& e) {
  char line[96];
  std::snprintf(line, sizeof line, "Q %.1f %d %d %d\n", e.t_ms, e.id, e.prompt, e.decode);
  return line;
}

std::string format_ended(const ended_event& e) {
  char line[160];
  std::snprintf(line, sizeof line, "E %.1f %d %s %s %d\n", e.t_ms, e.id, std::string(to_string(e.result)).c_str(),
                e.reason.c_str(), e.tokens);
  return line;
}

std::string format_level(const level_event& e) {
  char line[128];
  std::snprintf(line, sizeof line, "L %.1f %s %llu %llu\n", e.t_ms, std::string(pnmem::to_string(e.level)).c_str(),
                static_cast<unsigned long long>(e.avail_bytes), static_cast<unsigned long long>(e.seq));
  return line;
}

event_log parse_events(std::string_view text) {
  event_log log;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::istringstream f(line);
    std::string kind;
    f >> kind;
    bool ok = false;
    if (kind == "Q") {
      queued_event e;
      ok = static_cast<bool>(f >> e.t_ms >> e.id >> e.prompt >> e.decode);
      if (ok) log.queued.push_back(e);
    } else if (kind == "E") {
      ended_event e;
      std::string what;
      ok = static_cast<bool>(f >> e.t_ms >> e.id >> what >> e.reason >> e.tokens);
      const auto o = parse_outcome(what);
      ok = ok && o.has_value();
      if (ok) {
        e.result = *o;
        log.ended.push_back(e);
      }
    } else if (kind == "L") {
      level_event e;
      std::string level;
      ok = static_cast<bool>(f >> e.t_ms >> level >> e.avail_bytes >> e.seq);
      const auto l = parse_level(level);
      ok = ok && l.has_value();
      if (ok) {
        e.level = *l;
        log.levels.push_back(e);
      }
    }
    if (!ok) ++log.bad_lines;
  }
  return log;
}

}  // namespace survival
