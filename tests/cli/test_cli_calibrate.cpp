// tests/cli/test_cli_calibrate.cpp - `pnmem calibrate`, end to end: a measurements file in a temporary
// directory, the table printed, and that table (parsed back from the output, evaluated by
// cost_model.hpp) never below any line of the file; bad files and flags are exit 2 with one line.
#include <doctest/doctest.h>


#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "pnmem/calibration.hpp"
#include "pnmem/cost_model.hpp"
#include "pnmem/parse.hpp"
#include "cli_support.hpp"
#include "temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using pnmem::test::args_t;
using pnmem::test::lines_of;
using pnmem::test::process_result;
using pnmem::test::run;

using pnmem::test::temp_dir;

// The seed's formula at many prompt lengths, as an engine would write its measurements: a header, a
// comment, units on some lines, and a repeated length measured lower the second time.
struct measurements {
  std::string text;
  std::vector<pnmem::calibration_point> points;
  std::vector<std::size_t> lines;
};

measurements seed_measurements() {
  measurements m;
  m.text = "# measured peaks (VmHWM) per prompt length\ntokens,peak_bytes\n";
  std::size_t line = 2;
  for (std::uint64_t n = 0; n <= 16384; n += 512) {
    const std::uint64_t b = pnmem::activation_peak_model_bytes(n);
    ++line;
    // Every fourth line in KiB with a unit (exact: the formula's values are whole KiB).
    m.text += std::to_string(n) + "," + (n % 2048 == 0 ? std::to_string(b / 1024) + "KiB" : std::to_string(b)) + "\n";
    m.points.push_back({n, b});
    m.lines.push_back(line);
  }
  m.text += "\n4096, 1.25GiB   # a second, lower run\n";
  m.points.push_back({4096, 5 * pnmem::GiB / 4});
  m.lines.push_back(line + 2);
  return m;
}

// "T:B,T:B,..." back into a table.
pnmem::activation_model parse_anchor_list(const std::string& s) {
  pnmem::activation_model m;
  std::size_t start = 0;
  while (start <= s.size()) {
    const std::size_t comma = std::min(s.find(',', start), s.size());
    const std::string pair = s.substr(start, comma - start);
    const std::size_t colon = pair.find(':');
    REQUIRE(colon != std::string::npos);
    REQUIRE(m.n_anchors < pnmem::max_activation_anchors);
    m.anchors[m.n_anchors] = {std::stoull(pair.substr(0, colon)), std::stoull(pair.substr(colon + 1))};
    ++m.n_anchors;
    start = comma + 1;
  }
  return m;
}

json parse_json(const process_result& r) {
  INFO("stderr: ", r.err);
  const json j = json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  REQUIRE_MESSAGE(j.is_object(), "stdout is not a JSON object: ", r.out);
  return j;
}

// The one-line diagnostic of a refused run: exit 2, nothing on stdout.
std::string refusal(const args_t& args) {
  const process_result r = run(args);
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  const auto lines = lines_of(r.err);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].rfind("pnmem: error: ", 0) == 0);
  return lines[0];
}

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("calibrate: the printed anchors, fed to activation_peak_bytes, cover every line of the file") {
  temp_dir d;
  const measurements m = seed_measurements();
  const std::string file = d.write("peaks.csv", m.text);
  const json j = parse_json(run({"--json", "calibrate", file}));

  CHECK(j.at("source") == file);
  CHECK(j.at("measurements") == m.points.size());
  CHECK(j.at("token_counts") == m.points.size() - 1);
  const pnmem::activation_model table = parse_anchor_list(j.at("anchors").get<std::string>());
  CHECK(table.n_anchors == 8);
  pnmem::model_cost mc = pnmem::seed_model_cost;
  mc.activation = table;
  CHECK(pnmem::validate(mc).empty());
  for (std::size_t i = 0; i < m.points.size(); ++i) {
    CAPTURE(m.lines[i]);
    CHECK(pnmem::activation_peak_bytes(table, m.points[i].tokens) >= m.points[i].peak_bytes);
  }
  // The same table as the library fits, and in the model description's format too.
  const pnmem::calibration_result lib = pnmem::calibrate_activation(m.points);
  REQUIRE(lib.ok());
  CHECK(table == lib.table);
  const json& anchors = j.at("activation").at("anchors");
  REQUIRE(anchors.size() == table.n_anchors);
  for (std::size_t k = 0; k < table.n_anchors; ++k) {
    CHECK(anchors[k][0] == table.anchors[k].tokens);
    CHECK(anchors[k][1] == table.anchors[k].peak_bytes);
  }
  CHECK(j.at("activation").size() == 1);

  // Every line's residual, with its line number; the maxima name their lines.
  const json& res = j.at("residuals");
  REQUIRE(res.size() == m.points.size());
  std::uint64_t max_bp = 0;
  for (std::size_t i = 0; i < res.size(); ++i) {
    CHECK(res[i].at("line") == m.lines[i]);
    CHECK(res[i].at("tokens") == m.points[i].tokens);
    CHECK(res[i].at("measured_bytes") == m.points[i].peak_bytes);
    const std::uint64_t v = pnmem::activation_peak_bytes(table, m.points[i].tokens);
    CHECK(res[i].at("table_bytes") == v);
    CHECK(res[i].at("excess_bytes") == v - m.points[i].peak_bytes);
    max_bp = std::max(max_bp, res[i].at("excess_bp").get<std::uint64_t>());
  }
  CHECK(j.at("max_excess_bp") == max_bp);
  CHECK(j.at("max_excess_pct").get<double>() == doctest::Approx(static_cast<double>(max_bp) / 100));
  // The lower repeat of 4096 tokens is the farthest below the table in percent.
  CHECK(j.at("max_excess_pct_line") == m.lines.back());
  CHECK(j.at("longest_measured_tokens") == 16384);
  CHECK(contains(j.at("beyond_longest").get<std::string>(), "N^2"));
}

TEST_CASE("calibrate: the text says the table, the margin, what lies past the last anchor, each residual") {
  temp_dir d;
  const measurements m = seed_measurements();
  const std::string file = d.write("peaks.csv", m.text);
  const process_result r = run({"calibrate", file});
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  const pnmem::calibration_result lib = pnmem::calibrate_activation(m.points);
  std::string anchors;
  for (std::size_t k = 0; k < lib.table.n_anchors; ++k) {
    anchors += (k > 0 ? "," : "") + std::to_string(lib.table.anchors[k].tokens) + ":" +
               std::to_string(lib.table.anchors[k].peak_bytes);
  }
  const auto lines = lines_of(r.out);
  REQUIRE(lines.size() >= 7 + m.points.size());
  CHECK(lines[0] == "measurements: " + std::to_string(m.points.size()) + " lines, " +
                        std::to_string(m.points.size() - 1) + " token counts (" + file + ")");
  CHECK(lines[1].rfind("anchors: " + anchors + " ", 0) == 0);
  CHECK(lines[2].rfind("activation: {\"anchors\":[[0,", 0) == 0);
  CHECK(lines[3].rfind("margin: never below a measurement; above each by at most ", 0) == 0);
  CHECK(contains(lines[3], "(line " + std::to_string(m.lines.back()) + ", 4096 tokens)"));
  CHECK(lines[4].rfind("beyond 16384 tokens (the longest measured): no measurement; the table grows with N^2", 0) == 0);
  CHECK(lines[5] == "residuals (table - measured):");
  CHECK(contains(lines.back(), "4096"));
  CHECK(contains(lines.back(), "1.25 GiB"));
}

TEST_CASE("calibrate: --max-anchors, --objective, --coefficients") {
  temp_dir d;
  const measurements m = seed_measurements();
  const std::string file = d.write("peaks.csv", m.text);
  for (const char* n : {"1", "3", "8"}) {
    const json j = parse_json(run({"--json", "calibrate", file, "--max-anchors", n}));
    const pnmem::activation_model t = parse_anchor_list(j.at("anchors").get<std::string>());
    CHECK(t.n_anchors <= static_cast<std::uint32_t>(std::stoul(n)));
    for (const auto& p : m.points) CHECK(pnmem::activation_peak_bytes(t, p.tokens) >= p.peak_bytes);
  }
  const json rel = parse_json(run({"--json", "calibrate", file, "--objective", "relative"}));
  const json abs = parse_json(run({"--json", "calibrate", file, "--objective", "ABSOLUTE"}));
  CHECK(abs.at("objective") == "absolute");
  CHECK(abs.at("max_excess_bytes").get<std::uint64_t>() <= rel.at("max_excess_bytes").get<std::uint64_t>());
  CHECK(rel.at("max_excess_bp").get<std::uint64_t>() <= abs.at("max_excess_bp").get<std::uint64_t>());

  const json c = parse_json(run({"--json", "calibrate", file, "--coefficients"}));
  CHECK_FALSE(c.contains("anchors"));
  const json& a = c.at("activation");
  const pnmem::activation_model coef = pnmem::activation_coefficients(
      a.at("fixed_bytes").get<std::uint64_t>(), a.at("per_token_bytes").get<std::uint64_t>(),
      a.at("per_token_sq_bytes").get<std::uint64_t>());
  CHECK(c.at("coefficients") == std::to_string(coef.fixed_bytes) + "," + std::to_string(coef.per_token_bytes) + "," +
                                    std::to_string(coef.per_token_sq_bytes));
  for (const auto& p : m.points) CHECK(pnmem::activation_peak_bytes(coef, p.tokens) >= p.peak_bytes);
}

TEST_CASE("calibrate: --max-margin, exit 1 when the table is farther above a measurement, after printing") {
  temp_dir d;
  const std::string file = d.write("peaks.csv", seed_measurements().text);
  const json within = parse_json(run({"--json", "calibrate", file}));
  const std::uint64_t bp = within.at("max_excess_bp").get<std::uint64_t>();
  REQUIRE(bp > 100);  // the lower repeat: over 1 %

  const process_result over = run({"--json", "calibrate", file, "--max-margin", "1"});
  CHECK(over.exit_code == 1);
  const json o = parse_json(over);
  CHECK(o.at("within_max_margin") == false);
  CHECK(o.at("max_margin_bp") == 100);
  const process_result met = run({"calibrate", file, "--max-margin", std::to_string(bp / 100 + 1)});
  CHECK(met.exit_code == 0);
  CHECK(contains(met.out, ": met"));
  const process_result text_over = run({"calibrate", file, "--max-margin", "1"});
  CHECK(text_over.exit_code == 1);
  CHECK(contains(text_over.out, "max margin 1.00 %: EXCEEDED"));
}

TEST_CASE("calibrate -: the measurements from stdin") {
  const process_result r = pnmem::test::run_process(
      "/bin/sh", {"-c", "printf 'tokens,peak_bytes\\n0,256MiB\\n1024,384MiB\\n' | \"$0\" --json calibrate -", pnmem::test::env_or_fail("PNMEM_EXE")});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json j = parse_json(r);
  CHECK(j.at("anchors") == "0:268435456,1024:402653184");
  CHECK(j.at("source") == "-");
  CHECK(j.at("residuals")[1].at("line") == 3);
  // run_process's own stdin is /dev/null: nothing to calibrate.
  CHECK(contains(refusal({"calibrate", "-"}), "-: no measurements"));
}

TEST_CASE("calibrate: a bad file is exit 2, one line naming the file, the line and what is wrong") {
  temp_dir d;
  struct bad {
    const char* text;
    const char* says;  // after "<file>:"
  };
  const bad cases[] = {
      {"tokens,peak_bytes\n0,256MiB\n1024\n", "3: expected 2 fields (tokens,peak_bytes), found 1"},
      {"0,256MiB\n-1,300MiB\n", "2: tokens \"-1\": negative value"},
      {"0,256MiB\n1,-300MiB\n", "2: peak_bytes \"-300MiB\": negative value"},
      {"# x\n0,256MiB\n\n1,lots\n", "4: peak_bytes \"lots\": not a number"},
      {"0,256MiB\n1,2,3\n", "2: expected 2 fields (tokens,peak_bytes), found 3"},
      {"0,256MiB\n1,300MB\n", "2: peak_bytes \"300MB\": ambiguous unit (write KiB, MiB, GiB or TiB: units are binary)"},
      {"0,0\n", "1: peak_bytes \"0\": out of range (1 B to 1 TiB)"},
      {"9999999,1GiB\n", "1: tokens \"9999999\": out of range (0 to 4194304)"},
      {"garbage\n", "1: expected 2 fields (tokens,peak_bytes), found 1"},
  };
  int i = 0;
  for (const bad& b : cases) {
    const std::string file = d.write("bad" + std::to_string(i++) + ".csv", b.text);
    const std::string line = refusal({"calibrate", file});
    CHECK_MESSAGE(line == "pnmem: error: " + file + ":" + b.says, line);
  }
  CHECK(refusal({"calibrate", d.write("empty.csv", "# nothing measured\n")}) ==
        "pnmem: error: " + d.path("empty.csv") + ": no measurements");
  const std::string missing = d.path("absent.csv");
  CHECK(refusal({"calibrate", missing}) == "pnmem: error: " + missing + ": No such file or directory");
  CHECK(refusal({"calibrate"}) == "pnmem: error: missing FILE (see pnmem calibrate --help)");
}

TEST_CASE("calibrate: bad flags are exit 2 naming the flag") {
  temp_dir d;
  const std::string file = d.write("ok.csv", "0,1GiB\n");
  CHECK(contains(refusal({"calibrate", file, "--max-anchors", "0"}), "--max-anchors: \"0\""));
  CHECK(contains(refusal({"calibrate", file, "--max-anchors", "9"}), "--max-anchors: \"9\": out of range (1 to 8)"));
  CHECK(contains(refusal({"calibrate", file, "--max-anchors", "x"}), "--max-anchors: \"x\""));
  CHECK(contains(refusal({"calibrate", file, "--objective", "median"}), "--objective: \"median\": expected relative or absolute"));
  CHECK(contains(refusal({"calibrate", file, "--max-margin", "150"}), "--max-margin: \"150\""));
}
