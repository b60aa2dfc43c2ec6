// fuzz_calibration_csv: pnmem::parse_calibration_csv (the measurements file of `pnmem calibrate`) over
// any bytes, and calibrate_activation over what it accepts.
//
// Properties:
//   - an error names a line that exists (1 .. the number of lines) and says what is wrong on one line
//     (no control bytes), and leaves no measurements behind;
//   - a success has one line number per measurement, strictly increasing, each within the text, and
//     every measurement within the documented ranges; a header was only taken from the first line that
//     is not blank or a comment;
//   - every '\n' written "\r\n" (for a text without '\r') parses the same; a comment line or a blank
//     line appended changes nothing; the canonical rendering "<tokens>,<bytes>\n" of a success reads
//     back to the same measurements;
//   - for the first 64 measurements of a success, calibrate_activation (1 .. 8 anchors, both
//     objectives, chosen by the input's first byte) and calibrate_activation_coefficients succeed, and
//     cost_model.hpp's evaluator puts the table at or above every measurement.
#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "fuzz_support.hpp"
#include "pnmem/calibration.hpp"

using namespace pnmem_fuzz;

namespace {

std::size_t line_count(std::string_view t) {
  if (t.empty()) return 0;
  std::size_t n = 1;
  for (std::size_t i = 0; i + 1 < t.size(); ++i) {
    if (t[i] == '\n') ++n;
  }
  return n;
}

bool same(const pnmem::calibration_csv& a, const pnmem::calibration_csv& b) {
  return a.ok() == b.ok() && a.points == b.points && a.error_line == b.error_line && a.error == b.error;
}

void check_covered(const std::vector<pnmem::calibration_point>& m, const pnmem::calibration_result& r) {
  FUZZ_CHECK(r.ok());
  FUZZ_CHECK(r.residuals.size() == m.size());
  for (const pnmem::calibration_point& p : m) FUZZ_CHECK(pnmem::activation_peak_bytes(r.table, p.tokens) >= p.peak_bytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const exact_text input(as_text(data, size));
  const std::string_view t = input.view();
  const pnmem::calibration_csv c = pnmem::parse_calibration_csv(t);

  if (!c.ok()) {
    FUZZ_CHECK(c.error_line >= 1 && c.error_line <= line_count(t));
    FUZZ_CHECK(!c.error.empty());
    for (const char ch : c.error) FUZZ_CHECK(static_cast<unsigned char>(ch) >= 0x20 && ch != 0x7f);
    FUZZ_CHECK(c.points.empty() && c.lines.empty());
  } else {
    FUZZ_CHECK(c.points.size() == c.lines.size());
    for (std::size_t i = 0; i < c.lines.size(); ++i) {
      FUZZ_CHECK(c.lines[i] >= 1 && c.lines[i] <= line_count(t));
      FUZZ_CHECK(i == 0 || c.lines[i] > c.lines[i - 1]);
      FUZZ_CHECK(c.points[i].tokens <= pnmem::max_calibration_tokens);
      FUZZ_CHECK(c.points[i].peak_bytes >= 1 && c.points[i].peak_bytes <= pnmem::max_calibration_bytes);
    }
    if (c.has_header && !c.lines.empty()) FUZZ_CHECK(c.lines[0] >= 2);
  }

  if (t.find('\r') == std::string_view::npos) FUZZ_CHECK(same(pnmem::parse_calibration_csv(with_crlf(t)), c));
  if (t.empty() || t.back() == '\n') {
    FUZZ_CHECK(same(pnmem::parse_calibration_csv(std::string(t) + "# a comment, 1,2\n\n"), c));
  }
  if (!c.ok()) return 0;

  std::string canonical;
  for (const pnmem::calibration_point& p : c.points) {
    canonical += std::to_string(p.tokens) + "," + std::to_string(p.peak_bytes) + "\n";
  }
  const pnmem::calibration_csv back = pnmem::parse_calibration_csv(canonical);
  FUZZ_CHECK(back.ok() && back.points == c.points && !back.has_header);

  if (c.points.empty()) return 0;
  const std::vector<pnmem::calibration_point> m(c.points.begin(),
                                                c.points.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(c.points.size(), 64)));
  const std::uint8_t pick = size > 0 ? data[0] : 0;
  pnmem::calibration_options o;
  o.max_anchors = 1 + pick % 8;
  o.objective = (pick & 8) != 0 ? pnmem::calibration_objective::absolute : pnmem::calibration_objective::relative;
  check_covered(m, pnmem::calibrate_activation(m, o));
  check_covered(m, pnmem::calibrate_activation_coefficients(m, o));
  return 0;
}
