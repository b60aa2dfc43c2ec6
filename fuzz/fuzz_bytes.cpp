// fuzz_bytes: the size, percent and switch parsers of pnmem/parse.hpp, and the
// command-line tool's argument parsers built on them (tools/pnmem/arg_parsers.hpp,
// tools/pnmem/die_spec.hpp), over any bytes as one argument's text. The die-spec
// list reads the input's lines as one --die each.
//
// Properties:
//   - parse_bytes agrees with a reference reading in 128-bit arithmetic
//     ("<digits>[.<up to 9 digits>]" then optional blanks and a unit B, K/KiB, M/MiB,
//     G/GiB, T/TiB in any case; a fraction needs KiB or larger and is floored; the
//     exact value past 2^64-1 is out_of_range; KB/MB/GB/TB ambiguous; '-' negative);
//     it is case-insensitive throughout; a success reads back from its decimal form
//     and from "<n> <largest unit that divides it>", and format_bytes of it reads back
//     to within the 2 printed decimals;
//   - parse_percent_bp agrees with a reference reading (0..100, at most 2 decimals,
//     an optional '%'), and format_percent_bp of a success reads back exactly;
//   - parse_switch accepts exactly the eight documented words, any case;
//   - every error has a name;
//   - the CLI parsers throw pnmem_cli::usage_error and nothing else (any other
//     exception aborts: a bug); a message starts with the flag, and for bytes and
//     percents is exactly describe_bad_value(flag, text, bytes_problem/percent_problem(error)); their
//     values are the library's; ints, levels and KV formats agree with references;
//     a die spec is 2 or 3 ':'-separated byte sizes; a die list holds at most
//     max_dies and put_dies copies it into a mem_state.
#include <climits>
#include <exception>
#include <string>
#include <vector>

#include "arg_parsers.hpp"
#include "die_spec.hpp"
#include "fuzz_support.hpp"
#include "pnmem/format.hpp"
#include "pnmem/mem_state.hpp"
#include "pnmem/parse.hpp"
#include "usage_error.hpp"

using namespace pnmem_fuzz;

namespace {

__extension__ typedef unsigned __int128 u128;
constexpr u128 u64_limit = UINT64_MAX;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

void check_named(pnmem::parse_errc e) {
  FUZZ_CHECK(e <= pnmem::parse_errc::not_a_switch);
  const std::string_view name = pnmem::to_string(e);
  FUZZ_CHECK(!name.empty() && name != "invalid");
}

// ---- bytes ------------------------------------------------------------------

// "<whole>[.<frac>]" at the front of s.
struct number_ref {
  bool ok = false;       // digits where they belong
  bool huge = false;     // the whole part alone is past 2^64-1
  u128 whole = 0;
  std::uint64_t frac = 0;
  int frac_digits = 0;   // -1: more than the allowed count
  std::size_t length = 0;
};

number_ref read_number(std::string_view s, int max_frac_digits) {
  number_ref n;
  std::size_t i = 0;
  int significant = 0;
  while (i < s.size() && is_digit(s[i])) {
    if (significant > 0 || s[i] != '0') ++significant;
    if (significant <= 21) n.whole = n.whole * 10 + static_cast<unsigned>(s[i] - '0');
    ++i;
  }
  const bool any_whole = i > 0;
  n.huge = significant > 20 || n.whole > u64_limit;
  bool any_frac = false;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && is_digit(s[i])) {
      any_frac = true;
      if (n.frac_digits >= 0 && n.frac_digits < max_frac_digits) {
        n.frac = n.frac * 10 + static_cast<unsigned>(s[i] - '0');
        ++n.frac_digits;
      } else {
        n.frac_digits = -1;
      }
      ++i;
    }
    n.ok = any_frac && n.frac_digits >= 0;
  } else {
    n.ok = any_whole;
  }
  n.length = i;
  return n;
}

std::uint64_t pow10(int n) {
  std::uint64_t v = 1;
  for (int i = 0; i < n; ++i) v *= 10;
  return v;
}

struct bytes_ref {
  int state = 0;  // 0: not a size; 1: `value`; 2: a size past 2^64-1
  std::uint64_t value = 0;
  bool ambiguous = false;  // a well-formed number with KB/MB/GB/TB
};

bytes_ref reference_bytes(std::string_view text) {
  const std::string_view s = trim(text);
  if (s.empty() || !(is_digit(s.front()) || s.front() == '.')) return {};
  const number_ref n = read_number(s, 9);
  if (!n.ok) return {};
  std::string_view after = s.substr(n.length);  // (s is trimmed: nothing blank at its end)
  if (!after.empty() && after.front() == ' ') after.remove_prefix(1);  // one space before the unit, no other blank
  const std::string unit = lower(after);
  std::uint64_t scale = 0;
  if (unit.empty() || unit == "b") scale = 1;
  if (unit == "k" || unit == "kib") scale = pnmem::KiB;
  if (unit == "m" || unit == "mib") scale = pnmem::MiB;
  if (unit == "g" || unit == "gib") scale = pnmem::GiB;
  if (unit == "t" || unit == "tib") scale = pnmem::TiB;
  if (scale == 0) {
    bytes_ref r;
    r.ambiguous = !n.huge && (unit == "kb" || unit == "mb" || unit == "gb" || unit == "tb");
    return r;
  }
  if (n.frac_digits > 0 && scale == 1) return {};
  if (n.huge) return {2, 0, false};
  const u128 v = n.whole * scale + static_cast<u128>(n.frac) * scale / pow10(n.frac_digits);
  if (v > u64_limit) return {2, 0, false};
  return {1, static_cast<std::uint64_t>(v), false};
}

void check_bytes(std::string_view t) {
  const auto r = pnmem::parse_bytes(t);
  check_named(r.error);
  const bytes_ref ref = reference_bytes(t);
  FUZZ_CHECK(r.ok() == (ref.state == 1));
  if (r.ok()) FUZZ_CHECK(r.value == ref.value);
  if (ref.state == 2) FUZZ_CHECK(r.error == pnmem::parse_errc::out_of_range);
  if (ref.ambiguous) FUZZ_CHECK(r.error == pnmem::parse_errc::ambiguous_unit);
  const std::string_view s = trim(t);
  if (s.empty()) FUZZ_CHECK(r.error == pnmem::parse_errc::empty);
  if (!s.empty() && s.front() == '-') FUZZ_CHECK(r.error == pnmem::parse_errc::negative);

  // Units are case-insensitive, and nothing else in a size has a case.
  for (const std::string& cased : {upper(t), lower(t)}) {
    const exact_text text(cased);
    const auto c = pnmem::parse_bytes(text.view());
    FUZZ_CHECK(c.error == r.error && c.value == r.value);
  }
  if (!r.ok()) return;

  const std::uint64_t v = r.value;
  FUZZ_CHECK(pnmem::parse_bytes(std::to_string(v)).value == v && pnmem::parse_bytes(std::to_string(v)).ok());
  struct named {
    std::uint64_t scale;
    const char* name;
  };
  for (const named u : {named{pnmem::TiB, "TiB"}, named{pnmem::GiB, "g"}, named{pnmem::MiB, "MiB"},
                        named{pnmem::KiB, "K"}}) {
    if (v == 0 || v % u.scale != 0) continue;
    const auto back = pnmem::parse_bytes(std::to_string(v / u.scale) + " " + u.name);
    FUZZ_CHECK(back.ok() && back.value == v);
    break;
  }
  // format_bytes prints 2 decimals of the largest unit <= v: reads back within 1/100 of it.
  std::uint64_t unit = 1;
  for (const std::uint64_t u : {pnmem::TiB, pnmem::GiB, pnmem::MiB, pnmem::KiB}) {
    if (v >= u) {
      unit = u;
      break;
    }
  }
  const std::string shown = pnmem::format_bytes(v);
  const auto back = pnmem::parse_bytes(shown);
  const std::uint64_t slack = unit == 1 ? 0 : unit / 100 + 1;
  if (back.ok()) {
    const std::uint64_t diff = back.value > v ? back.value - v : v - back.value;
    FUZZ_CHECK(diff <= slack);
  } else {
    FUZZ_CHECK(back.error == pnmem::parse_errc::out_of_range && v > UINT64_MAX - slack);  // rounded up past 2^64
  }
}

// ---- percent ----------------------------------------------------------------

struct percent_ref {
  int state = 0;  // 0: not a percent; 1: `bp`; 2: well-formed but above 100
  std::uint32_t bp = 0;
};

percent_ref reference_percent(std::string_view text) {
  std::string_view s = trim(text);
  if (!s.empty() && s.back() == '%') s = trim(s.substr(0, s.size() - 1));
  if (s.empty() || !(is_digit(s.front()) || s.front() == '.')) return {};
  const number_ref n = read_number(s, 2);
  if (!n.ok || n.length != s.size()) return {};
  if (n.huge) return {2, 0};
  const u128 bp = n.whole * 100 + n.frac * (n.frac_digits == 1 ? 10 : 1);
  if (bp > pnmem::bp_whole) return {2, 0};
  return {1, static_cast<std::uint32_t>(bp)};
}

void check_percent(std::string_view t) {
  const auto r = pnmem::parse_percent_bp(t);
  check_named(r.error);
  const percent_ref ref = reference_percent(t);
  FUZZ_CHECK(r.ok() == (ref.state == 1));
  if (r.ok()) FUZZ_CHECK(r.value == ref.bp && r.value <= pnmem::bp_whole);
  if (ref.state == 2) FUZZ_CHECK(r.error == pnmem::parse_errc::out_of_range);
  if (!r.ok()) return;
  const auto back = pnmem::parse_percent_bp(pnmem::format_percent_bp(r.value));
  FUZZ_CHECK(back.ok() && back.value == r.value);
  const std::string_view s = trim(t);
  if (s.back() != '%') {
    const auto with_sign = pnmem::parse_percent_bp(std::string(t) + "%");
    FUZZ_CHECK(with_sign.ok() && with_sign.value == r.value);
  }
}

// ---- switch -----------------------------------------------------------------

void check_switch(std::string_view t) {
  const auto r = pnmem::parse_switch(t);
  check_named(r.error);
  const std::string w = lower(trim(t));
  const bool yes = w == "1" || w == "true" || w == "yes" || w == "on";
  const bool no = w == "0" || w == "false" || w == "no" || w == "off";
  FUZZ_CHECK(r.ok() == (yes || no));
  if (r.ok()) FUZZ_CHECK(r.value == yes);
  if (w.empty()) FUZZ_CHECK(r.error == pnmem::parse_errc::empty);
}

// ---- the CLI's argument parsers ---------------------------------------------

constexpr std::string_view flag = "--fuzz-arg";

template <class T>
struct cli_result {
  bool ok = false;
  T value{};
  std::string message;  // the usage_error's, when !ok
};

// A message as usage_error::what() returns it: a C string, so text up to a NUL
// byte (a command-line argument never holds one; the fuzzer's text may).
std::string as_what(const std::string& s) { return s.substr(0, s.find('\0')); }

bool has_prefix(const std::string& message, const std::string& prefix) {
  const std::string p = as_what(prefix);
  return message.compare(0, p.size(), p) == 0;
}

// Runs one CLI parser: its value, or its usage_error's message. Any other
// exception is a bug.
template <class F>
auto call_cli(F&& f) -> cli_result<decltype(f())> {
  try {
    return {true, f(), {}};
  } catch (const pnmem_cli::usage_error& e) {
    const std::string message = e.what();
    FUZZ_CHECK(message.compare(0, flag.size(), flag) == 0);
    return {false, {}, message};
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_bytes: a CLI parser threw something other than usage_error: %s\n", e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "fuzz_bytes: a CLI parser threw a non-exception\n");
    std::abort();
  }
}

std::string_view trim_blanks(std::string_view s) {
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  while (true) {
    const std::size_t at = s.find(sep);
    out.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return out;
    s.remove_prefix(at + 1);
  }
}

struct die_ref {
  bool ok = false;
  pnmem_cli::die_spec value;
};

die_ref reference_die(std::string_view text) {
  const auto fields = split(text, ':');
  if (fields.size() < 2 || fields.size() > 3) return {};
  std::uint64_t v[3] = {0, 0, 0};
  for (std::size_t i = 0; i < fields.size(); ++i) {
    const auto r = pnmem::parse_bytes(fields[i]);
    if (!r) return {};
    v[i] = r.value;
  }
  return {true, {v[0], v[1], v[2]}};
}

bool same_die(const pnmem_cli::die_spec& a, const pnmem_cli::die_spec& b) {
  return a.free_bytes == b.free_bytes && a.budget_bytes == b.budget_bytes && a.used_bytes == b.used_bytes;
}

// The CLI's answer for `t` is the library's: the same value, or the library's
// error in the CLI's message.
template <class Parsed, class CliResult>
void check_cli_agrees(std::string_view t, const Parsed& library, const CliResult& cli,
                      std::string_view (*problem)(pnmem::parse_errc) noexcept) {
  FUZZ_CHECK(cli.ok == library.ok());
  if (cli.ok) {
    FUZZ_CHECK(cli.value == library.value);
  } else {
    FUZZ_CHECK(cli.message == as_what(pnmem_cli::describe_bad_value(flag, t, problem(library.error))));
  }
}

void check_cli(std::string_view t) {
  check_cli_agrees(t, pnmem::parse_bytes(t), call_cli([&] { return pnmem_cli::parse_bytes_arg(flag, t); }),
                   &pnmem::bytes_problem);
  const auto percent = pnmem::parse_percent_bp(t);
  check_cli_agrees(t, percent, call_cli([&] { return pnmem_cli::parse_percent_arg(flag, t); }),
                   &pnmem::percent_problem);

  const auto psi = call_cli([&] { return pnmem_cli::parse_psi_arg(flag, t); });
  FUZZ_CHECK(psi.ok == percent.ok());
  if (psi.ok) {
    FUZZ_CHECK(psi.value == static_cast<double>(percent.value) / 100.0);
    FUZZ_CHECK(psi.value >= 0.0 && psi.value <= 100.0);
  }

  const std::string prefix = pnmem_cli::describe_bad_value(flag, t, "");
  const std::string_view digits = trim_blanks(t);
  const u64_ref n = reference_u64(digits);
  for (const int min_value : {0, 4096}) {
    const auto i = call_cli([&] { return pnmem_cli::parse_int_arg(flag, t, min_value); });
    const bool expect = n.state == 1 && n.value <= INT_MAX && n.value >= static_cast<std::uint64_t>(min_value);
    FUZZ_CHECK(i.ok == expect);
    if (i.ok) {
      FUZZ_CHECK(static_cast<std::uint64_t>(i.value) == n.value);
    } else {
      FUZZ_CHECK(has_prefix(i.message, prefix));
      FUZZ_CHECK(prefix.find('\0') != std::string::npos || i.message.size() > prefix.size());  // says why
    }
  }

  // A list (--tokens, --running-tokens): the text split on ',' into 1..4 entries, each one parse_int_arg
  // accepts; the same values in order. Anything else is refused with the flag's prefix.
  {
    const auto list = call_cli([&] { return pnmem_cli::parse_int_list_arg(flag, t, 0, 4); });
    std::vector<int> want;
    bool fine = true;
    std::size_t begin = 0;
    while (fine) {
      const std::size_t comma = t.find(',', begin);
      const std::string_view piece = t.substr(begin, comma == std::string_view::npos ? std::string_view::npos : comma - begin);
      const auto one = call_cli([&] { return pnmem_cli::parse_int_arg(flag, piece, 0); });
      fine = one.ok && !trim_blanks(piece).empty() && want.size() < 4;
      if (fine) want.push_back(one.value);
      if (comma == std::string_view::npos) break;
      begin = comma + 1;
    }
    FUZZ_CHECK(list.ok == fine);
    if (list.ok) FUZZ_CHECK(list.value == want);
    if (!list.ok) FUZZ_CHECK(has_prefix(list.message, prefix));
  }

  const std::string word = lower(trim_blanks(t));
  const auto level = call_cli([&] { return pnmem_cli::parse_level_arg(flag, t); });
  bool is_level = false;
  for (int l = 0; l < pnmem::mem_level_count; ++l) {
    const auto candidate = static_cast<pnmem::mem_level>(l);
    if (word == pnmem::to_string(candidate)) {
      is_level = true;
      FUZZ_CHECK(level.ok && level.value == candidate);
    }
  }
  FUZZ_CHECK(level.ok == is_level);
  if (!level.ok) FUZZ_CHECK(has_prefix(level.message, prefix));

  const auto kv = call_cli([&] { return pnmem_cli::parse_kv_arg(flag, t); });
  // The reference: every name and alias docs/models.md lists, written out here rather than taken from the library.
  struct kv_name {
    const char* name;
    pnmem::kv_format f;
  };
  static constexpr kv_name kv_names[] = {
      {"q4", pnmem::kv_format::q4},         {"fp32", pnmem::kv_format::fp32},     {"f32", pnmem::kv_format::fp32},
      {"float32", pnmem::kv_format::fp32},  {"f16", pnmem::kv_format::f16},       {"float16", pnmem::kv_format::f16},
      {"half", pnmem::kv_format::f16},      {"bf16", pnmem::kv_format::bf16},     {"bfloat16", pnmem::kv_format::bf16},
      {"fp8", pnmem::kv_format::fp8},       {"fp8_e4m3", pnmem::kv_format::fp8},  {"fp8_e5m2", pnmem::kv_format::fp8},
      {"q8_0", pnmem::kv_format::q8_0},     {"q4_0", pnmem::kv_format::q4_0}};
  const kv_name* kv_expect = nullptr;
  for (const kv_name& k : kv_names) {
    if (word == k.name) kv_expect = &k;
  }
  FUZZ_CHECK(kv.ok == (kv_expect != nullptr));
  if (kv.ok) {
    FUZZ_CHECK(kv.value == kv_expect->f);
  } else {
    FUZZ_CHECK(has_prefix(kv.message, prefix));
  }

  const auto die = call_cli([&] { return pnmem_cli::parse_die_spec(flag, t); });
  const die_ref dref = reference_die(t);
  FUZZ_CHECK(die.ok == dref.ok);
  if (die.ok) {
    FUZZ_CHECK(same_die(die.value, dref.value));
  } else {
    FUZZ_CHECK(has_prefix(die.message, prefix));
  }

  std::vector<std::string> lines;
  for (const std::string_view line : split(t, '\n')) lines.emplace_back(line);
  const auto dies = call_cli([&] { return pnmem_cli::parse_die_specs(flag, lines); });
  bool all_ok = lines.size() <= static_cast<std::size_t>(pnmem::max_dies);
  for (const auto& line : lines) all_ok = all_ok && reference_die(line).ok;
  FUZZ_CHECK(dies.ok == all_ok);
  if (dies.ok) {
    FUZZ_CHECK(dies.value.size() == lines.size());
    pnmem::mem_state state;
    pnmem_cli::put_dies(state, dies.value);
    FUZZ_CHECK(state.n_dies == static_cast<int>(lines.size()));
    for (std::size_t i = 0; i < lines.size(); ++i) {
      FUZZ_CHECK(same_die(dies.value[i], reference_die(lines[i]).value));
      FUZZ_CHECK(state.per_die_free_bytes[i] == dies.value[i].free_bytes);
      FUZZ_CHECK(state.per_die_budget_bytes[i] == dies.value[i].budget_bytes);
      FUZZ_CHECK(state.per_die_used_bytes[i] == dies.value[i].used_bytes);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view t = as_text(data, size);
  check_bytes(t);
  check_percent(t);
  check_switch(t);
  check_cli(t);
  return 0;
}
