// tools/pnmem/calibrate_command.cpp - `pnmem calibrate`.
#include "calibrate_command.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

#include <CLI/CLI.hpp>

#include "arg_parsers.hpp"
#include "pnmem/calibration.hpp"
#include "pnmem/detail/ascii.hpp"
#include "pnmem/format.hpp"
#include "pnmem/model_files/model_json.hpp"
#include "text_option.hpp"
#include "usage_error.hpp"

namespace pnmem_cli {

namespace {

class calibrate_command final : public one_shot_command {
 public:
  calibrate_command()
      : one_shot_command("calibrate",
                         "Fit an activation table to measured (tokens, peak bytes) lines: never below any measurement, "
                         "and as little above them as the objective allows") {}

 private:
  void add_options(CLI::App& app) override;
  command_output answer(const pnmem::policy& env_policy) const override;

  std::string file_;
  std::optional<std::string> max_anchors_;
  std::string objective_{"relative"};
  bool coefficients_ = false;
  std::optional<std::string> max_margin_;
};

void calibrate_command::add_options(CLI::App& app) {
  app.add_option("file", file_,
                 "Measurements: one tokens,peak_bytes line each (bytes may carry units, e.g. 384MiB; an "
                 "optional header; # comments); - reads stdin")
      ->type_name("FILE|-")
      ->required();
  add_text_option(app, "--max-anchors", max_anchors_, "Anchors in the table, 1 to 8 (default 8)")->type_name("N");
  app.add_option("--objective", objective_,
                 "What the fit minimises: the largest excess as a percentage of its measurement (relative) "
                 "or in bytes (absolute)")
      ->type_name("relative|absolute")
      ->capture_default_str();
  app.add_flag("--coefficients", coefficients_,
               "Fit FIXED + PER_TOKEN x N + PER_TOKEN_SQ x N^2 instead of an anchor table");
  add_text_option(app, "--max-margin", max_margin_,
                  "Exit 1 (after printing) when the table is above some measurement by more than PCT %")
      ->type_name("PCT");
}

// The measurements' text: the file's, or stdin's for "-". A failure is a usage_error naming the file.
std::string read_measurements(const std::string& file) {
  if (file == "-") {
    std::string text;
    char buf[65536];
    for (;;) {
      const std::size_t n = std::fread(buf, 1, sizeof buf, stdin);
      text.append(buf, n);
      if (text.size() > (64u << 20)) throw usage_error("-: stdin holds more than 64 MiB");
      if (n < sizeof buf) break;
    }
    if (std::ferror(stdin) != 0) throw usage_error("-: cannot read stdin");
    return text;
  }
  pnmem::model_files::read_result<std::string> r = pnmem::model_files::read_text_file(file);
  if (!r) throw usage_error(r.error);
  return std::move(*r.value);
}

// "3.52 %" from basis points (rounded up already: the statement stays true).
std::string percent_text(std::uint64_t bp) {
  return std::to_string(bp / 100) + "." + (bp % 100 < 10 ? "0" : "") + std::to_string(bp % 100) + " %";
}

double percent_value(std::uint64_t bp) { return static_cast<double>(bp) / 100.0; }

// The --activation-anchors / --activation-coefficients form of a model.
std::string flag_form(const pnmem::activation_model& m) {
  std::string out;
  if (m.n_anchors == 0) {
    return std::to_string(m.fixed_bytes) + "," + std::to_string(m.per_token_bytes) + "," +
           std::to_string(m.per_token_sq_bytes);
  }
  for (std::size_t i = 0; i < m.n_anchors; ++i) {
    if (i > 0) out += ',';
    out += std::to_string(m.anchors[i].tokens) + ":" + std::to_string(m.anchors[i].peak_bytes);
  }
  return out;
}

// The "activation" object of a model description (model_json.hpp's format).
nlohmann::ordered_json activation_json(const pnmem::activation_model& m) {
  if (m.n_anchors == 0) {
    return {{"fixed_bytes", m.fixed_bytes}, {"per_token_bytes", m.per_token_bytes},
            {"per_token_sq_bytes", m.per_token_sq_bytes}};
  }
  nlohmann::ordered_json t = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < m.n_anchors; ++i) t.push_back({m.anchors[i].tokens, m.anchors[i].peak_bytes});
  return {{"anchors", t}};
}

command_output calibrate_command::answer(const pnmem::policy&) const {
  // Options first: a bad flag is reported before the file is read.
  pnmem::calibration_options options;
  if (max_anchors_) {
    const int n = parse_int_arg("--max-anchors", *max_anchors_, 1);
    if (n > static_cast<int>(pnmem::max_activation_anchors)) {
      throw usage_error(describe_bad_value("--max-anchors", *max_anchors_, "out of range (1 to 8)"));
    }
    options.max_anchors = static_cast<std::size_t>(n);
  }
  if (pnmem::detail::iequals(objective_, "relative")) {
    options.objective = pnmem::calibration_objective::relative;
  } else if (pnmem::detail::iequals(objective_, "absolute")) {
    options.objective = pnmem::calibration_objective::absolute;
  } else {
    throw usage_error(describe_bad_value("--objective", objective_, "expected relative or absolute"));
  }
  std::optional<std::uint64_t> max_margin_bp;
  if (max_margin_) max_margin_bp = parse_percent_arg("--max-margin", *max_margin_);

  const std::string source = file_;
  const pnmem::calibration_csv csv = pnmem::parse_calibration_csv(read_measurements(file_));
  if (!csv.ok()) throw usage_error(source + ":" + std::to_string(csv.error_line) + ": " + csv.error);
  const pnmem::calibration_result r = coefficients_ ? pnmem::calibrate_activation_coefficients(csv.points, options)
                                                    : pnmem::calibrate_activation(csv.points, options);
  if (!r.ok()) {
    if (r.error == pnmem::calibration_errc::not_covered) {
      throw std::runtime_error(std::string(pnmem::to_string(r.error)));  // exit 1: pnmem's fault, not the file's
    }
    const bool at_line = r.error == pnmem::calibration_errc::tokens_out_of_range ||
                         r.error == pnmem::calibration_errc::bytes_out_of_range;
    throw usage_error(source + (at_line ? ":" + std::to_string(csv.lines[r.error_index]) : std::string()) + ": " +
                      std::string(pnmem::to_string(r.error)));
  }

  const pnmem::activation_model& t = r.table;
  const std::size_t worst_bp = r.max_excess_bp_index;
  const std::size_t worst_bytes = r.max_excess_bytes_index;
  std::uint64_t longest = 0;
  for (const pnmem::calibration_point& p : csv.points) longest = std::max(longest, p.tokens);
  const bool over_margin = max_margin_bp && r.max_excess_bp > *max_margin_bp;

  command_output out;
  out.exit_status = over_margin ? 1 : 0;
  nlohmann::ordered_json& j = out.json;
  j["source"] = source;
  j["measurements"] = csv.points.size();
  j["token_counts"] = r.distinct_tokens;
  j["objective"] = options.objective == pnmem::calibration_objective::relative ? "relative" : "absolute";
  if (t.n_anchors > 0) {
    j["anchors"] = flag_form(t);
  } else {
    j["coefficients"] = flag_form(t);
  }
  j["activation"] = activation_json(t);
  j["max_excess_bp"] = r.max_excess_bp;
  j["max_excess_pct"] = percent_value(r.max_excess_bp);
  j["max_excess_pct_line"] = csv.lines[worst_bp];
  j["max_excess_bytes"] = r.max_excess_bytes;
  j["max_excess_bytes_line"] = csv.lines[worst_bytes];
  if (max_margin_bp) {
    j["max_margin_bp"] = *max_margin_bp;
    j["within_max_margin"] = !over_margin;
  }
  j["longest_measured_tokens"] = longest;
  j["beyond_longest"] = t.n_anchors > 0 ? "grows with N^2 from the last anchor: last peak x (N / last tokens)^2"
                                        : "the formula, extrapolated";
  nlohmann::ordered_json residuals = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < r.residuals.size(); ++i) {
    const pnmem::calibration_residual& x = r.residuals[i];
    residuals.push_back({{"line", csv.lines[i]},
                         {"tokens", x.tokens},
                         {"measured_bytes", x.measured_bytes},
                         {"table_bytes", x.table_bytes},
                         {"excess_bytes", x.excess_bytes},
                         {"excess_bp", x.excess_bp}});
  }
  j["residuals"] = residuals;

  std::ostringstream s;
  s << "measurements: " << csv.points.size() << " lines, " << r.distinct_tokens << " token counts (" << source
    << ")\n";
  if (t.n_anchors > 0) {
    s << "anchors: " << flag_form(t) << "   (--activation-anchors)\n";
  } else {
    s << "coefficients: " << flag_form(t) << "   (--activation-coefficients: " << pnmem::format_bytes(t.fixed_bytes)
      << " + " << t.per_token_bytes << " B x N + " << t.per_token_sq_bytes << " B x N^2)\n";
  }
  s << "activation: " << activation_json(t).dump() << "\n";
  s << "margin: never below a measurement; above each by at most " << percent_text(r.max_excess_bp) << " (line "
    << csv.lines[worst_bp] << ", " << r.residuals[worst_bp].tokens << " tokens) and at most "
    << pnmem::format_bytes(r.max_excess_bytes) << " (line " << csv.lines[worst_bytes] << ", "
    << r.residuals[worst_bytes].tokens << " tokens)\n";
  if (max_margin_bp) {
    s << "max margin " << percent_text(*max_margin_bp) << ": " << (over_margin ? "EXCEEDED" : "met") << "\n";
  }
  if (t.n_anchors > 0) {
    const pnmem::activation_anchor& last = t.anchors[t.n_anchors - 1];
    s << "beyond " << last.tokens << " tokens (the longest measured): no measurement; the table grows with N^2, "
      << pnmem::format_bytes(last.peak_bytes) << " x (N / " << last.tokens << ")^2\n";
  } else {
    s << "beyond " << longest << " tokens (the longest measured): no measurement; the formula is extrapolated\n";
  }
  s << "residuals (table - measured):\n";
  s << "  line    tokens      measured         table        excess\n";
  for (std::size_t i = 0; i < r.residuals.size(); ++i) {
    const pnmem::calibration_residual& x = r.residuals[i];
    char row[160];
    std::snprintf(row, sizeof row, "  %4zu  %8llu  %12s  %12s  %12s  %s\n", csv.lines[i],
                  static_cast<unsigned long long>(x.tokens), pnmem::format_bytes(x.measured_bytes).c_str(),
                  pnmem::format_bytes(x.table_bytes).c_str(), pnmem::format_bytes(x.excess_bytes).c_str(),
                  percent_text(x.excess_bp).c_str());
    s << row;
  }
  out.text = s.str();
  return out;
}

}  // namespace

std::unique_ptr<subcommand> make_calibrate_command() { return std::make_unique<calibrate_command>(); }

}  // namespace pnmem_cli
