// fuzz_cgroup_v1: the cgroup v1 memory files over any bytes: memory.limit_in_bytes
// (procfs::parse_cgroup_v1_limit), memory.usage_in_bytes (parse_cgroup_bytes) and
// memory.stat (parse_memory_stat_inactive_file with cgroup_mode::v1).
//
// Properties:
//   - the text contract of procfs.hpp, a named error, for each parser;
//   - one-value files agree with a reference reading (one line, one field between
//     blanks, decimal digits, out_of_range past 2^64-1, else malformed), read back
//     from their canonical rendering, and a second line is malformed;
//   - the limit is the byte count, unset exactly from v1_unlimited_threshold_bytes
//     (2^62) up, with the same error as parse_cgroup_bytes otherwise;
//   - memory.stat agrees with a reference reading (total_inactive_file preferred over
//     inactive_file, each at most once, "key <decimal>"); unrelated keys appended
//     change nothing; cgroup_mode::none is malformed;
//   - CRLF line ends read the same; a success cut before its last '\n' is `truncated`.
#include "cgroup_checks.hpp"

using namespace pnmem_fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view t = as_text(data, size);

  check_cgroup_bytes(t);  // memory.usage_in_bytes

  const auto bytes = procfs::parse_cgroup_bytes(t);
  const auto limit = procfs::parse_cgroup_v1_limit(t);
  check_kernel_text_contract(t, limit.error);
  FUZZ_CHECK(limit.error == bytes.error);
  if (limit.ok()) {
    FUZZ_CHECK(limit.value.set == (bytes.value < procfs::v1_unlimited_threshold_bytes));
    if (limit.value.set) FUZZ_CHECK(limit.value.bytes == bytes.value);
    check_crlf_same(t, limit, [](std::string_view s) { return procfs::parse_cgroup_v1_limit(s); },
                    [](const procfs::cgroup_limit& a, const procfs::cgroup_limit& b) {
                      return a.set == b.set && (!a.set || a.bytes == b.bytes);
                    });
  }

  check_memory_stat(t, pnmem::cgroup_mode::v1);
  return 0;
}
