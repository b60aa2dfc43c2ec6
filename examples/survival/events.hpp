// examples/survival/events.hpp - what the workload tells the supervisor, one line per event.
//
// The workload appends lines to a file with one write() each (O_APPEND), so every
// line written before an OOM kill is there for the supervisor to read after it:
//
//   Q <t_ms> <id> <prompt> <decode>            request queued
//   E <t_ms> <id> <outcome> <reason> <tokens>  request ended: admitted | capped | rejected
//   L <t_ms> <level> <avail_bytes> <seq>       a snapshot the workload's watcher published
//
// Times are milliseconds since the workload started. A request queued and never
// ended is lost.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pnmem/mem_level.hpp"

namespace survival {

enum class outcome : std::uint8_t { admitted, capped, rejected };

constexpr std::string_view to_string(outcome o) noexcept {
  switch (o) {
    case outcome::admitted: return "admitted";
    case outcome::capped: return "capped";
    case outcome::rejected: return "rejected";
  }
  return "?";
}

struct queued_event {
  double t_ms = 0;
  int id = 0;
  int prompt = 0;
  int decode = 0;
};

struct ended_event {
  double t_ms = 0;
  int id = 0;
  outcome result = outcome::rejected;
  std::string reason;
  int tokens = 0;
};

struct level_event {
  double t_ms = 0;
  pnmem::mem_level level = pnmem::mem_level::ok;
  std::uint64_t avail_bytes = 0;
  std::uint64_t seq = 0;
};

struct event_log {
  std::vector<queued_event> queued;
  std::vector<ended_event> ended;
  std::vector<level_event> levels;
  int bad_lines = 0;  // lines that did not parse (a torn last line after a kill, at most)
};

// Parses the whole file's text. A line that does not parse is counted, not trusted.
event_log parse_events(std::string_view text);

std::string format_queued(const queued_event& e);
std::string format_ended(const ended_event& e);
std::string format_level(const level_event& e);

std::optional<outcome> parse_outcome(std::string_view s) noexcept;

}  // namespace survival
