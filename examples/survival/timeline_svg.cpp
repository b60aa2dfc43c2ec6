// examples/survival/timeline_svg.cpp - see timeline_svg.hpp.
#include "timeline_svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace survival {

namespace {

constexpr double width = 960;
constexpr double left = 70;
constexpr double right = 20;
constexpr double panel_height = 250;
constexpr double plot_top = 34;     // within a panel
constexpr double plot_height = 160;
constexpr double rug_height = 14;   // request ends, under the axis
constexpr double legend_height = 30;
constexpr double MiB = 1024.0 * 1024.0;

double to_mib(std::uint64_t bytes) { return static_cast<double>(bytes) / MiB; }

const char* level_fill(pnmem::mem_level l) {
  switch (l) {
    case pnmem::mem_level::ok: return "#d8f0d2";
    case pnmem::mem_level::watch: return "#fbf0b8";
    case pnmem::mem_level::tight: return "#fbd3a0";
    case pnmem::mem_level::critical: return "#f4aaaa";
  }
  return "#ffffff";
}

const char* outcome_color(outcome o) {
  switch (o) {
    case outcome::admitted: return "#2e7d32";
    case outcome::capped: return "#ef8f00";
    case outcome::rejected: return "#c62828";
  }
  return "#000000";
}

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

std::string escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// A "nice" tick step: 1, 2 or 5 times a power of ten, about `target` ticks.
double tick_step(double span, int target) {
  const double raw = span / target;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= m * p) return m * p;
  }
  return 10 * p;
}

}  // namespace

std::string render_timeline_svg(const std::vector<timeline_panel>& panels) {
  double t_max = 1000;
  std::uint64_t y_max_bytes = 0;
  for (const auto& p : panels) {
    t_max = std::max(t_max, p.end_ms);
    y_max_bytes = std::max(y_max_bytes, p.limit_bytes);
    for (const auto& u : p.usage) {
      t_max = std::max(t_max, u.t_ms);
      y_max_bytes = std::max(y_max_bytes, u.bytes);
    }
  }
  const double y_max = std::max(1.0, to_mib(y_max_bytes) * 1.1);  // MiB
  const double plot_w = width - left - right;
  const double height = static_cast<double>(panels.size()) * panel_height + legend_height;
  const auto x = [&](double t_ms) { return left + plot_w * std::clamp(t_ms / t_max, 0.0, 1.0); };

  std::string s;
  s += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" + num(width) + "\" height=\"" +
       num(height) + "\" viewBox=\"0 0 " + num(width) + " " + num(height) +
       "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"11\">\n";
  s += "<rect x=\"0\" y=\"0\" width=\"" + num(width) + "\" height=\"" + num(height) + "\" fill=\"#ffffff\"/>\n";

  for (std::size_t i = 0; i < panels.size(); ++i) {
    const timeline_panel& p = panels[i];
    const double top = static_cast<double>(i) * panel_height + plot_top;
    const double bottom = top + plot_height;
    const auto y = [&](double mib) { return bottom - plot_height * std::clamp(mib / y_max, 0.0, 1.0); };

    s += "<text x=\"" + num(left) + "\" y=\"" + num(top - 12) + "\" font-size=\"13\" font-weight=\"bold\">" +
         escape(p.title) + "</text>\n";

    // Level bands: each published level holds until the next one (or the end).
    // Runs of one level become one rectangle (no seams between neighbours).
    for (std::size_t k = 0; k < p.levels.size();) {
      std::size_t next = k + 1;
      while (next < p.levels.size() && p.levels[next].level == p.levels[k].level) ++next;
      const double from = p.levels[k].t_ms;
      const double to = next < p.levels.size() ? p.levels[next].t_ms : p.end_ms;
      const std::size_t at = k;
      k = next;
      if (to <= from) continue;
      s += "<rect x=\"" + num(x(from)) + "\" y=\"" + num(top) + "\" width=\"" + num(x(to) - x(from)) +
           "\" height=\"" + num(plot_height) + "\" fill=\"" + level_fill(p.levels[at].level) + "\"/>\n";
    }
    // Axes and grid.
    const double ystep = tick_step(y_max, 5);
    for (double v = 0; v <= y_max + 1e-9; v += ystep) {
      s += "<line x1=\"" + num(left) + "\" x2=\"" + num(left + plot_w) + "\" y1=\"" + num(y(v)) + "\" y2=\"" +
           num(y(v)) + "\" stroke=\"#000\" stroke-opacity=\"0.12\"/>\n";
      s += "<text x=\"" + num(left - 6) + "\" y=\"" + num(y(v) + 4) + "\" text-anchor=\"end\">" +
           std::to_string(static_cast<long long>(v)) + "</text>\n";
    }
    const double tstep = tick_step(t_max / 1000.0, 10);
    for (double t = 0; t <= t_max / 1000.0 + 1e-9; t += tstep) {
      s += "<text x=\"" + num(x(t * 1000)) + "\" y=\"" + num(bottom + rug_height + 14) +
           "\" text-anchor=\"middle\">" + num(t) + "</text>\n";
    }
    s += "<text x=\"" + num(left + plot_w) + "\" y=\"" + num(bottom + rug_height + 28) +
         "\" text-anchor=\"end\">time (s)</text>\n";
    s += "<text transform=\"translate(16," + num((top + bottom) / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">cgroup usage (MiB)</text>\n";
    s += "<rect x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(plot_w) + "\" height=\"" +
         num(plot_height) + "\" fill=\"none\" stroke=\"#444\"/>\n";

    // The limit and the reserve line (usage above it leaves less than the reserve).
    const double limit_mib = to_mib(p.limit_bytes);
    s += "<line x1=\"" + num(left) + "\" x2=\"" + num(left + plot_w) + "\" y1=\"" + num(y(limit_mib)) + "\" y2=\"" +
         num(y(limit_mib)) + "\" stroke=\"#c62828\" stroke-width=\"1.5\" stroke-dasharray=\"6 3\"/>\n";
    s += "<text x=\"" + num(left + plot_w - 4) + "\" y=\"" + num(y(limit_mib) - 4) +
         "\" text-anchor=\"end\" fill=\"#c62828\">limit " + std::to_string(static_cast<long long>(limit_mib)) +
         " MiB</text>\n";
    if (p.reserve_bytes > 0 && p.reserve_bytes < p.limit_bytes) {
      const double line_mib = to_mib(p.limit_bytes - p.reserve_bytes);
      s += "<line x1=\"" + num(left) + "\" x2=\"" + num(left + plot_w) + "\" y1=\"" + num(y(line_mib)) +
           "\" y2=\"" + num(y(line_mib)) + "\" stroke=\"#555\" stroke-dasharray=\"2 3\"/>\n";
      s += "<text x=\"" + num(left + plot_w - 4) + "\" y=\"" + num(y(line_mib) + 12) +
           "\" text-anchor=\"end\" fill=\"#555\">limit - reserve (" +
           std::to_string(static_cast<long long>(to_mib(p.reserve_bytes))) + " MiB)</text>\n";
    }

    // Usage.
    if (!p.usage.empty()) {
      s += "<polyline fill=\"none\" stroke=\"#1f4e9c\" stroke-width=\"1.6\" points=\"";
      for (const auto& u : p.usage) s += num(x(u.t_ms)) + "," + num(y(to_mib(u.bytes))) + " ";
      s += "\"/>\n";
    }

    // Request ends under the axis.
    for (const auto& e : p.ended) {
      s += "<line x1=\"" + num(x(e.t_ms)) + "\" x2=\"" + num(x(e.t_ms)) + "\" y1=\"" + num(bottom + 2) + "\" y2=\"" +
           num(bottom + rug_height - 2) + "\" stroke=\"" + outcome_color(e.result) + "\" stroke-width=\"1.4\"/>\n";
    }

    if (p.kill_ms) {
      const double kx = x(*p.kill_ms);
      s += "<line x1=\"" + num(kx) + "\" x2=\"" + num(kx) + "\" y1=\"" + num(top) + "\" y2=\"" + num(bottom) +
           "\" stroke=\"#7b0000\" stroke-width=\"2\"/>\n";
      s += "<text x=\"" + num(kx + 5) + "\" y=\"" + num(top + 34) + "\" fill=\"#7b0000\" font-weight=\"bold\">" +
           "OOM kill: " + std::to_string(p.lost) + " requests lost</text>\n";
    }
  }

  // Legend.
  const double ly = static_cast<double>(panels.size()) * panel_height + 8;
  double lx = left;
  const auto swatch = [&](const char* fill, const std::string& label) {
    s += "<rect x=\"" + num(lx) + "\" y=\"" + num(ly) + "\" width=\"14\" height=\"10\" fill=\"" + fill +
         "\" stroke=\"#888\"/>\n";
    s += "<text x=\"" + num(lx + 18) + "\" y=\"" + num(ly + 9) + "\">" + label + "</text>\n";
    lx += 26 + 7.0 * static_cast<double>(label.size());
  };
  swatch(level_fill(pnmem::mem_level::ok), "OK");
  swatch(level_fill(pnmem::mem_level::watch), "WATCH");
  swatch(level_fill(pnmem::mem_level::tight), "TIGHT");
  swatch(level_fill(pnmem::mem_level::critical), "CRITICAL");
  lx += 20;
  swatch(outcome_color(outcome::admitted), "admitted");
  swatch(outcome_color(outcome::capped), "capped");
  swatch(outcome_color(outcome::rejected), "rejected");
  s += "</svg>\n";
  return s;
}

}  // namespace survival
