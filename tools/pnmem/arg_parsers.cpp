// tools/pnmem/arg_parsers.cpp - option text to values.
#include "arg_parsers.hpp"

#include <charconv>
#include <limits>
#include <system_error>

#include "pnmem/parse.hpp"
#include "usage_error.hpp"

namespace pnmem_cli {

namespace {

std::string_view trim_spaces(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

[[noreturn]] void fail(std::string_view flag, std::string_view text, std::string_view problem) {
  throw usage_error(describe_bad_value(flag, text, problem));
}

}  // namespace

std::string describe_bad_value(std::string_view flag, std::string_view text, std::string_view problem) {
  std::string out(flag);
  out += ": \"";
  out += text;
  out += "\": ";
  out += problem;
  return out;
}

std::uint64_t parse_bytes_arg(std::string_view flag, std::string_view text) {
  const auto r = pnmem::parse_bytes(text);
  if (!r) fail(flag, text, pnmem::bytes_problem(r.error));
  return r.value;
}

pnmem::basis_points parse_percent_arg(std::string_view flag, std::string_view text) {
  const auto r = pnmem::parse_percent_bp(text);
  if (!r) fail(flag, text, pnmem::percent_problem(r.error));
  return r.value;
}

double parse_psi_arg(std::string_view flag, std::string_view text) {
  // bp / 100 is the double nearest the decimal the kernel printed, and the same
  // arithmetic psi_at_least applies to the thresholds, so 15 meets a 15 % threshold.
  return static_cast<double>(parse_percent_arg(flag, text)) / static_cast<double>(pnmem::bp_per_percent);
}

namespace {
// Why `text` is not a plain integer in [min_value, INT_MAX], or "" (then *out is the value).
std::string int_problem(std::string_view text, int min_value, int* out) {
  const std::string_view s = trim_spaces(text);
  if (s.empty()) return std::string(pnmem::to_string(pnmem::parse_errc::empty));
  if (s.front() == '-') return std::string(pnmem::to_string(pnmem::parse_errc::negative));
  long long v = 0;
  const char* const first = s.data();
  const char* const last = s.data() + s.size();
  const auto [ptr, ec] = std::from_chars(first, last, v);
  const std::string range = "out of range (" + std::to_string(min_value) + " to " +
                            std::to_string(std::numeric_limits<int>::max()) + ")";
  if (ec == std::errc::result_out_of_range) return range;
  if (ec != std::errc() || ptr != last) return std::string(pnmem::to_string(pnmem::parse_errc::not_a_number));
  if (v > std::numeric_limits<int>::max()) return range;
  if (v < min_value) return "must be at least " + std::to_string(min_value);
  *out = static_cast<int>(v);
  return {};
}
}  // namespace

int parse_int_arg(std::string_view flag, std::string_view text, int min_value) {
  int v = 0;
  const std::string problem = int_problem(text, min_value, &v);
  if (!problem.empty()) fail(flag, text, problem);
  return v;
}

std::vector<int> parse_int_list_arg(std::string_view flag, std::string_view text, int min_value, std::size_t max_count) {
  std::vector<int> out;
  std::size_t begin = 0;
  while (true) {
    const std::size_t comma = text.find(',', begin);
    const std::string_view piece = text.substr(begin, comma == std::string_view::npos ? std::string_view::npos : comma - begin);
    if (trim_spaces(piece).empty()) fail(flag, text, "an empty entry (a list is N[,N...])");
    if (out.size() == max_count) fail(flag, text, "more than " + std::to_string(max_count) + " entries");
    int v = 0;
    const std::string problem = int_problem(piece, min_value, &v);
    if (!problem.empty()) fail(flag, text, "entry " + std::to_string(out.size() + 1) + ": " + problem);
    out.push_back(v);
    if (comma == std::string_view::npos) break;
    begin = comma + 1;
  }
  return out;
}

pnmem::mem_level parse_level_arg(std::string_view flag, std::string_view text) {
  const auto l = pnmem::parse_mem_level(trim_spaces(text));
  if (!l) fail(flag, text, "not a level (use ok, watch, tight or critical)");
  return *l;
}

std::uint64_t parse_count_arg(std::string_view flag, std::string_view text, std::uint64_t min_value) {
  const std::string_view s = trim_spaces(text);
  if (s.empty()) fail(flag, text, pnmem::to_string(pnmem::parse_errc::empty));
  if (s.front() == '-') fail(flag, text, pnmem::to_string(pnmem::parse_errc::negative));
  std::uint64_t v = 0;
  const char* const first = s.data();
  const char* const last = s.data() + s.size();
  const auto [ptr, ec] = std::from_chars(first, last, v);
  if (ec == std::errc::result_out_of_range) {
    fail(flag, text, "out of range (" + std::to_string(min_value) + " to 18446744073709551615)");
  }
  if (ec != std::errc() || ptr != last) fail(flag, text, pnmem::to_string(pnmem::parse_errc::not_a_number));
  if (v < min_value) fail(flag, text, "must be at least " + std::to_string(min_value));
  return v;
}

pnmem::kv_format parse_kv_arg(std::string_view flag, std::string_view text) {
  // The library's names and aliases (f32 for fp32, ...), any case: what a model description reads.
  pnmem::kv_format f{};
  if (pnmem::parse_kv_format(trim_spaces(text), f)) return f;
  fail(flag, text, "not a KV format (use q4, fp32, f16, bf16, fp8, q8_0 or q4_0)");
}

}  // namespace pnmem_cli
