// fuzz/cgroup_checks.hpp - reference readings of the cgroup files (procfs.hpp's
// documented formats, written apart from the parsers) and the checks the v1 and
// v2 targets share.
#pragma once

#include <string>
#include <string_view>

#include "procfs_checks.hpp"

namespace pnmem_fuzz {

// A one-line file: one field, surrounded by blanks at most. ok: the field.
struct single_value_ref {
  bool ok = false;
  std::string_view field;
};

inline single_value_ref reference_single_value(std::string_view t) {
  if (!well_formed_kernel_text(t)) return {};
  const auto lines = kernel_lines(t);
  if (lines.size() != 1) return {};
  const auto fields = blank_fields(lines[0]);
  if (fields.size() != 1) return {};
  return {true, fields[0]};
}

// What a well-formed text's one decimal number must parse to: the number, or
// out_of_range past 2^64-1, or malformed.
inline procfs::result<std::uint64_t> reference_cgroup_bytes(std::string_view t) {
  const single_value_ref v = reference_single_value(t);
  if (!v.ok) return {0, procfs::errc::malformed};
  const u64_ref n = reference_u64(v.field);
  if (n.state == 0) return {0, procfs::errc::malformed};
  if (n.state == 2) return {0, procfs::errc::out_of_range};
  return {n.value, procfs::errc::ok};
}

// memory.current / memory.usage_in_bytes.
inline void check_cgroup_bytes(std::string_view t) {
  const auto parse = [](std::string_view s) { return procfs::parse_cgroup_bytes(s); };
  const auto r = parse(t);
  check_kernel_text_contract(t, r.error);
  if (well_formed_kernel_text(t)) {
    const auto ref = reference_cgroup_bytes(t);
    FUZZ_CHECK(r.error == ref.error);
    if (r.ok()) FUZZ_CHECK(r.value == ref.value);
  }
  check_crlf_same(t, r, parse, [](std::uint64_t a, std::uint64_t b) { return a == b; });
  if (!r.ok()) return;
  check_cut_short(t, parse);
  const std::string canonical = " \t" + std::to_string(r.value) + "\t \n";
  const exact_text again(canonical);
  const auto back = parse(again.view());
  FUZZ_CHECK(back.ok() && back.value == r.value);
  // A second line is not a one-value file.
  FUZZ_CHECK(parse_appended(t, "0\n", parse).error == procfs::errc::malformed);
}

// memory.stat's reclaimable page cache, read the documented way: v2 `inactive_file`;
// v1 `total_inactive_file` when present, else `inactive_file`. Each key at most
// once, as "key <decimal>"; other keys are not looked at.
struct stat_ref {
  bool ok = false;
  std::uint64_t value = 0;
};

inline stat_ref reference_memory_stat(std::string_view t, pnmem::cgroup_mode mode) {
  if (mode == pnmem::cgroup_mode::none || !well_formed_kernel_text(t)) return {};
  int seen_local = 0;
  int seen_total = 0;
  std::uint64_t local = 0;
  std::uint64_t total = 0;
  for (const std::string_view line : kernel_lines(t)) {
    const auto fields = blank_fields(line);
    if (fields.empty()) continue;
    std::uint64_t* slot = nullptr;
    if (fields[0] == "inactive_file") {
      slot = &local;
      ++seen_local;
    } else if (mode == pnmem::cgroup_mode::v1 && fields[0] == "total_inactive_file") {
      slot = &total;
      ++seen_total;
    } else {
      continue;
    }
    if (seen_local > 1 || seen_total > 1 || fields.size() != 2) return {};
    const u64_ref n = reference_u64(fields[1]);
    if (n.state != 1) return {};
    *slot = n.value;
  }
  if (seen_total == 1) return {true, total};
  if (seen_local == 1) return {true, local};
  return {};
}

inline void check_memory_stat(std::string_view t, pnmem::cgroup_mode mode) {
  const auto parse = [mode](std::string_view s) { return procfs::parse_memory_stat_inactive_file(s, mode); };
  const auto r = parse(t);
  check_kernel_text_contract(t, r.error);
  FUZZ_CHECK(procfs::parse_memory_stat_inactive_file(t, pnmem::cgroup_mode::none).error == procfs::errc::malformed);
  const stat_ref ref = reference_memory_stat(t, mode);
  FUZZ_CHECK(r.ok() == ref.ok);
  if (r.ok()) FUZZ_CHECK(r.value == ref.value);
  check_crlf_same(t, r, parse, [](std::uint64_t a, std::uint64_t b) { return a == b; });
  if (!r.ok()) return;
  check_cut_short(t, parse);
  const auto unrelated = parse_appended(t, "pgfault 12\nworkingset_refault_file 0\n", parse);
  FUZZ_CHECK(unrelated.ok() && unrelated.value == r.value);
  const std::string v = std::to_string(r.value);
  const std::string canonical = mode == pnmem::cgroup_mode::v1
                                    ? "cache 4096\ninactive_file 1\ntotal_inactive_file " + v + "\n"
                                    : "anon 4096\ninactive_file " + v + "\nactive_file 1\n";
  const exact_text again(canonical);
  const auto back = parse(again.view());
  FUZZ_CHECK(back.ok() && back.value == r.value);
}

}  // namespace pnmem_fuzz
