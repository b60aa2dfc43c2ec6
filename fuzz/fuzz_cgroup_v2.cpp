// fuzz_cgroup_v2: the cgroup v2 memory files over any bytes: memory.max and
// memory.high (procfs::parse_cgroup_v2_limit), memory.current (parse_cgroup_bytes)
// and memory.stat (parse_memory_stat_inactive_file with cgroup_mode::v2).
//
// Properties:
//   - the text contract of procfs.hpp, a named error, for each parser;
//   - one-value files agree with a reference reading (one line, one field between
//     blanks, decimal digits, out_of_range past 2^64-1, else malformed), read back
//     from their canonical rendering, and a second line is malformed;
//   - a limit is unset exactly when the field is "max"; otherwise it is what
//     parse_cgroup_bytes reads, set, with the same error when that fails;
//   - memory.stat agrees with a reference reading (inactive_file once, "key
//     <decimal>"; total_inactive_file is a v1 key, ignored here); unrelated keys
//     appended change nothing; cgroup_mode::none is malformed;
//   - CRLF line ends read the same; a success cut before its last '\n' is `truncated`.
#include "cgroup_checks.hpp"

using namespace pnmem_fuzz;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view t = as_text(data, size);

  check_cgroup_bytes(t);  // memory.current

  const auto parse_limit = [](std::string_view s) { return procfs::parse_cgroup_v2_limit(s); };
  const auto limit = parse_limit(t);
  check_kernel_text_contract(t, limit.error);
  const single_value_ref field = reference_single_value(t);
  const bool is_max = field.ok && field.field == "max";
  if (is_max) {
    FUZZ_CHECK(limit.ok() && !limit.value.set);
  } else {
    const auto bytes = procfs::parse_cgroup_bytes(t);
    FUZZ_CHECK(limit.error == bytes.error);
    if (limit.ok()) FUZZ_CHECK(limit.value.set && limit.value.bytes == bytes.value);
  }
  if (limit.ok()) {
    check_cut_short(t, parse_limit);
    check_crlf_same(t, limit, parse_limit, [](const procfs::cgroup_limit& a, const procfs::cgroup_limit& b) {
      return a.set == b.set && (!a.set || a.bytes == b.bytes);
    });
  }

  check_memory_stat(t, pnmem::cgroup_mode::v2);
  return 0;
}
