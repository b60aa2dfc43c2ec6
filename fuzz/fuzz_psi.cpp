// fuzz_psi: procfs::parse_psi over any bytes (/proc/pressure/memory and a
// cgroup's memory.pressure: the same format).
//
// Properties:
//   - the text contract of procfs.hpp, a named error;
//   - a success has every average of `some` (and of `full` when has_full) in [0, 100];
//   - CRLF line ends read the same; a success cut before its last '\n' is `truncated`;
//   - a success rendered back canonically ("some avg10=%.9f ... total=%llu", with an
//     unknown field added, which must be ignored) reads back to the same numbers, bit
//     for bit (the parser reads up to nine decimals);
//   - a second "some" line appended is `duplicate_key`; a "full" line appended is
//     `duplicate_key` when there was one, else it is read as `full` and `some` is kept.
#include <cinttypes>
#include <cmath>
#include <string>

#include "procfs_checks.hpp"

using namespace pnmem_fuzz;

namespace {

procfs::result<procfs::psi> parse(std::string_view t) { return procfs::parse_psi(t); }

bool same_line(const procfs::psi_line& a, const procfs::psi_line& b) {
  return a.avg10_pct == b.avg10_pct && a.avg60_pct == b.avg60_pct && a.avg300_pct == b.avg300_pct &&
         a.total_us == b.total_us;
}

bool same(const procfs::psi& a, const procfs::psi& b) {
  return a.has_full == b.has_full && same_line(a.some, b.some) && (!a.has_full || same_line(a.full, b.full));
}

bool percent_in_range(double v) { return !std::isnan(v) && v >= 0.0 && v <= 100.0; }

void check_line(const procfs::psi_line& l) {
  FUZZ_CHECK(percent_in_range(l.avg10_pct));
  FUZZ_CHECK(percent_in_range(l.avg60_pct));
  FUZZ_CHECK(percent_in_range(l.avg300_pct));
}

std::string render_line(const char* kind, const procfs::psi_line& l) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "%s avg10=%.9f avg60=%.9f future=1 avg300=%.9f total=%" PRIu64 "\n", kind,
                l.avg10_pct, l.avg60_pct, l.avg300_pct, l.total_us);
  return buf;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view t = as_text(data, size);
  const auto r = parse_checked(t, parse);
  check_crlf_same(t, r, parse, same);
  if (!r.ok()) return 0;

  check_line(r.value.some);
  if (r.value.has_full) check_line(r.value.full);
  check_cut_short(t, parse);

  std::string canonical = render_line("some", r.value.some);
  if (r.value.has_full) canonical += render_line("full", r.value.full);
  check_round_trip(canonical, r.value, parse, same);

  constexpr std::string_view extra = "full avg10=1.50 avg60=0.25 avg300=0.05 total=42\n";
  FUZZ_CHECK(parse_appended(t, "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", parse).error ==
             procfs::errc::duplicate_key);
  const auto with_full = parse_appended(t, extra, parse);
  if (r.value.has_full) {
    FUZZ_CHECK(with_full.error == procfs::errc::duplicate_key);
  } else {
    FUZZ_CHECK(with_full.ok() && with_full.value.has_full);
    FUZZ_CHECK(same_line(with_full.value.some, r.value.some));
    FUZZ_CHECK(same_line(with_full.value.full, procfs::psi_line{1.5, 0.25, 0.05, 42}));
  }
  return 0;
}
