// fuzz_meminfo: procfs::parse_meminfo over any bytes (/proc/meminfo), and
// procfs::parse_status_memory (/proc/<pid>/status, the same "Key: <n> kB" format)
// over the same bytes.
//
// Properties of parse_meminfo (parse_status_memory: the text contract, the
// reference reading with VmHWM and VmRSS for keys and 0 allowed, CRLF):
//   - the text contract of procfs.hpp (empty / NUL / no final newline), a named error;
//   - a success agrees with a reference reading of the documented format: exactly
//     one "MemTotal:" and one "MemAvailable:" line, each "<n> kB" (n decimal, no
//     sign, n * 1024 within 64 bits), other lines ignored; the values are those
//     numbers times 1024, MemTotal is never 0;
//   - CRLF line ends read the same; a success cut before its last '\n' is `truncated`;
//   - an unrelated line appended changes nothing; a second MemTotal or MemAvailable
//     line appended is `duplicate_key`; the canonical rendering of a success reads back.
#include <cinttypes>
#include <string>

#include "procfs_checks.hpp"

using namespace pnmem_fuzz;

namespace {

procfs::result<procfs::meminfo> parse(std::string_view t) { return procfs::parse_meminfo(t); }

bool same(const procfs::meminfo& a, const procfs::meminfo& b) {
  return a.total_bytes == b.total_bytes && a.avail_bytes == b.avail_bytes;
}

// The reference reading of the two keys `a` and `b` of a "Key: <n> kB" file: ok
// with their values in bytes, or some error.
struct reference {
  bool ok = false;
  std::uint64_t a_bytes = 0;
  std::uint64_t b_bytes = 0;
};

reference read_reference(std::string_view t, std::string_view a, std::string_view b) {
  if (!well_formed_kernel_text(t)) return {};
  int seen_a = 0;
  int seen_b = 0;
  reference r;
  for (const std::string_view line : kernel_lines(t)) {
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, colon);
    std::uint64_t* slot = nullptr;
    if (key == a) {
      slot = &r.a_bytes;
      ++seen_a;
    } else if (key == b) {
      slot = &r.b_bytes;
      ++seen_b;
    } else {
      continue;
    }
    if (seen_a > 1 || seen_b > 1) return {};
    const auto fields = blank_fields(line.substr(colon + 1));
    if (fields.size() != 2 || fields[1] != "kB") return {};
    const u64_ref kib = reference_u64(fields[0]);
    if (kib.state != 1 || kib.value > UINT64_MAX / 1024) return {};
    *slot = kib.value * 1024;
  }
  if (seen_a != 1 || seen_b != 1) return {};
  r.ok = true;
  return r;
}

procfs::result<procfs::status_memory> parse_status(std::string_view t) { return procfs::parse_status_memory(t); }

bool same_status(const procfs::status_memory& a, const procfs::status_memory& b) {
  return a.hwm_bytes == b.hwm_bytes && a.rss_bytes == b.rss_bytes;
}

// parse_status_memory over the same bytes: the text contract, the reference
// reading with its own keys, CRLF.
void check_status(std::string_view t) {
  const auto s = parse_checked(t, parse_status);
  const reference ref = read_reference(t, "VmHWM", "VmRSS");
  FUZZ_CHECK(s.ok() == ref.ok);
  if (s.ok()) FUZZ_CHECK(s.value.hwm_bytes == ref.a_bytes && s.value.rss_bytes == ref.b_bytes);
  check_crlf_same(t, s, parse_status, same_status);
}

std::string render(const procfs::meminfo& m) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "MemTotal:       %" PRIu64 " kB\nMemFree:  1 kB\nMemAvailable:   %" PRIu64 " kB\n",
                m.total_bytes / 1024, m.avail_bytes / 1024);
  return buf;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view t = as_text(data, size);
  const auto r = parse_checked(t, parse);

  check_status(t);

  const reference ref = read_reference(t, "MemTotal", "MemAvailable");
  FUZZ_CHECK(r.ok() == (ref.ok && ref.a_bytes != 0));
  if (r.ok()) {
    FUZZ_CHECK(r.value.total_bytes == ref.a_bytes && r.value.avail_bytes == ref.b_bytes);
    FUZZ_CHECK(r.value.total_bytes != 0);
    FUZZ_CHECK(r.value.total_bytes % 1024 == 0 && r.value.avail_bytes % 1024 == 0);
  }

  check_crlf_same(t, r, parse, same);
  if (!r.ok()) return 0;

  check_cut_short(t, parse);
  const auto unrelated = parse_appended(t, "Zswap:  12 kB\nHugePages_Total:       0\nnot a meminfo line\n", parse);
  FUZZ_CHECK(unrelated.ok() && same(unrelated.value, r.value));
  FUZZ_CHECK(parse_appended(t, "MemTotal: 1 kB\n", parse).error == procfs::errc::duplicate_key);
  FUZZ_CHECK(parse_appended(t, "MemAvailable: 1 kB\n", parse).error == procfs::errc::duplicate_key);

  check_round_trip(render(r.value), r.value, parse, same);
  return 0;
}
