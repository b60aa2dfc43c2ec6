// tools/pnmem/die_spec.cpp - parsing `--die FREE:BUDGET[:USED]`.
#include "die_spec.hpp"

#include <array>
#include <cstddef>

#include "pnmem/parse.hpp"
#include "usage_error.hpp"
#include "arg_parsers.hpp"

namespace pnmem_cli {

die_spec parse_die_spec(std::string_view flag, std::string_view text) {
  constexpr std::size_t max_fields = 3;
  constexpr std::array<std::string_view, max_fields> names{"FREE", "BUDGET", "USED"};
  std::array<std::string_view, max_fields> fields{};
  std::size_t n = 0;
  std::string_view rest = text;
  while (true) {
    const std::size_t colon = rest.find(':');
    if (n == max_fields) {
      throw usage_error(describe_bad_value(flag, text, "too many fields (expected FREE:BUDGET[:USED])"));
    }
    fields[n++] = rest.substr(0, colon);
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  if (n < 2) throw usage_error(describe_bad_value(flag, text, "expected FREE:BUDGET[:USED]"));

  std::array<std::uint64_t, max_fields> values{};
  for (std::size_t i = 0; i < n; ++i) {
    const auto r = pnmem::parse_bytes(fields[i]);
    if (!r) {
      std::string problem(names[i]);
      problem += " \"";
      problem += fields[i];
      problem += "\": ";
      problem += pnmem::bytes_problem(r.error);
      throw usage_error(describe_bad_value(flag, text, problem));
    }
    values[i] = r.value;
  }
  return die_spec{values[0], values[1], values[2]};
}

std::vector<die_spec> parse_die_specs(std::string_view flag, const std::vector<std::string>& texts) {
  if (texts.size() > static_cast<std::size_t>(pnmem::max_dies)) {
    throw usage_error(std::string(flag) + ": at most " + std::to_string(pnmem::max_dies) + " dies (got " +
                      std::to_string(texts.size()) + ")");
  }
  std::vector<die_spec> out;
  out.reserve(texts.size());
  for (const auto& t : texts) out.push_back(parse_die_spec(flag, t));
  return out;
}

void put_dies(pnmem::mem_state& state, const std::vector<die_spec>& dies) {
  std::size_t n = dies.size();
  if (n > static_cast<std::size_t>(pnmem::max_dies)) n = static_cast<std::size_t>(pnmem::max_dies);
  state.n_dies = static_cast<int>(n);
  for (std::size_t i = 0; i < n; ++i) {
    state.per_die_free_bytes[i] = dies[i].free_bytes;
    state.per_die_budget_bytes[i] = dies[i].budget_bytes;
    state.per_die_used_bytes[i] = dies[i].used_bytes;
  }
}

}  // namespace pnmem_cli
