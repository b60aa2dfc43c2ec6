// fuzz/procfs_checks.hpp - properties every parser of pnmem/linux/procfs.hpp owes
// any input, whatever its format.
#pragma once

#include <string>
#include <string_view>

#include "fuzz_support.hpp"
#include "pnmem/linux/procfs.hpp"

namespace pnmem_fuzz {

namespace procfs = pnmem::procfs;

// The error is one of the enum's values, with a name.
inline void check_error_named(procfs::errc e) {
  FUZZ_CHECK(e <= procfs::errc::duplicate_key);
  const std::string_view name = procfs::to_string(e);
  FUZZ_CHECK(!name.empty() && name != "invalid");
}

// procfs.hpp's contract on the bytes of a file: empty is `empty`; a NUL byte is
// `malformed`; no final '\n' is `truncated` (a text that is both may be either);
// a parse succeeds only on a text that ends with '\n' and holds no NUL.
inline void check_kernel_text_contract(std::string_view t, procfs::errc e) {
  check_error_named(e);
  if (t.empty()) {
    FUZZ_CHECK(e == procfs::errc::empty);
    return;
  }
  const bool nul = t.find('\0') != std::string_view::npos;
  const bool newline = t.back() == '\n';
  if (nul && newline) FUZZ_CHECK(e == procfs::errc::malformed);
  if (!nul && !newline) FUZZ_CHECK(e == procfs::errc::truncated);
  if (nul && !newline) FUZZ_CHECK(e == procfs::errc::malformed || e == procfs::errc::truncated);
  if (e == procfs::errc::ok) FUZZ_CHECK(well_formed_kernel_text(t));
}

// A text that parsed, cut before its final '\n', is a file cut short: never a
// parse of the shorter number. (Not when the cut text still ends with '\n'.)
template <class Parse>
void check_cut_short(std::string_view t, Parse&& parse) {
  if (t.size() >= 2 && t[t.size() - 2] == '\n') return;
  const exact_text cut(t.substr(0, t.size() - 1));
  const procfs::errc e = parse(cut.view()).error;
  FUZZ_CHECK(e == (t.size() == 1 ? procfs::errc::empty : procfs::errc::truncated));
}

// A text without '\r' gives the same answer with CRLF line ends. `same` compares values.
template <class Result, class Parse, class Same>
void check_crlf_same(std::string_view t, const Result& r, Parse&& parse, Same&& same) {
  if (t.find('\r') != std::string_view::npos) return;
  const std::string crlf = with_crlf(t);
  const exact_text text(crlf);
  const auto r2 = parse(text.view());
  FUZZ_CHECK(r2.error == r.error);
  if (r.ok()) FUZZ_CHECK(same(r.value, r2.value));
}

// What `parse` answers for `t`, once the contract every kernel text parser
// keeps (check_kernel_text_contract) is checked.
template <class Parse>
auto parse_checked(std::string_view t, Parse&& parse) {
  auto r = parse(t);
  check_kernel_text_contract(t, r.error);
  return r;
}

// `canonical`, a value written back the kernel's way, parses to that value again.
template <class Value, class Parse, class Same>
void check_round_trip(std::string_view canonical, const Value& value, Parse&& parse, Same&& same) {
  const exact_text again(canonical);
  const auto back = parse(again.view());
  FUZZ_CHECK(back.ok() && same(back.value, value));
}

// `t` followed by `line` (which ends with '\n'), in an exact-size buffer, parsed.
template <class Parse>
auto parse_appended(std::string_view t, std::string_view line, Parse&& parse) {
  std::string both(t);
  both += line;
  const exact_text text(both);
  return parse(text.view());
}

}  // namespace pnmem_fuzz
