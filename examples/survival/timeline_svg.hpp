// examples/survival/timeline_svg.hpp - the survival run's level timeline as a picture.
//
// One panel per run: the cgroup's memory usage over time (sampled by the
// supervisor) against the limit and the reserve line, on background bands colored
// by the level the workload's watcher published (OK green, WATCH yellow, TIGHT
// orange, CRITICAL red), with each request's end marked under the axis (admitted,
// capped, rejected) and the OOM kill, if any, with the requests it lost.
// Plain SVG 1.1, no scripts or external resources: any browser or viewer shows it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "events.hpp"

namespace survival {

struct usage_point {
  double t_ms = 0;
  std::uint64_t bytes = 0;
};

struct timeline_panel {
  std::string title;
  std::vector<usage_point> usage;    // supervisor's samples of the cgroup's usage
  std::vector<level_event> levels;   // the workload's published snapshots
  std::vector<ended_event> ended;    // request ends
  double end_ms = 0;                 // when the workload exited (or was killed)
  std::optional<double> kill_ms;     // set when the kernel killed it
  int lost = 0;                      // requests queued and never ended
  std::uint64_t limit_bytes = 0;
  std::uint64_t reserve_bytes = 0;
};

// The whole SVG document, panels stacked, sharing one time axis.
std::string render_timeline_svg(const std::vector<timeline_panel>& panels);

}  // namespace survival
