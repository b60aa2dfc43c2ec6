// pnmem/config.hpp - the seed's environment variables, parsed strictly into a policy.
//
// The variables, what each sets and its default are in one table below
// (env_variables): policy_from_env() reads exactly those, and the command-line
// tool prints its help from the same table.
//
// A bad value (malformed, negative, overflowing, out of range, empty) is an
// error that names the variable and the value; that setting keeps its default
// and every other variable still applies. Unset variables are not errors.
//
//   auto cfg = pnmem::policy_from_env();
//   for (const auto& e : cfg.errors) log(e.to_string());
//   engine.policy = cfg.value;
//
// Not on the decision path: reading the environment allocates. Read it once at start.
#pragma once

#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "pnmem/format.hpp"
#include "pnmem/parse.hpp"
#include "pnmem/policy.hpp"

namespace pnmem {

struct config_error {
  std::string variable;  // e.g. "PN_PSI_FULL_REJECT"
  std::string value;     // the text as found
  std::string message;   // what is wrong with it
  std::string kept;      // the setting left in force

  // PN_PSI_FULL_REJECT="abc": not a number; keeping 15.00 %
  std::string to_string() const {
    return variable + "=\"" + value + "\": " + message + "; keeping " + kept;
  }
};

struct env_config {
  policy value;
  std::vector<config_error> errors;
  bool ok() const noexcept { return errors.empty(); }
};

namespace detail {

inline std::string host_reserve_description(const policy& p) {
  if (p.host_reserve_bp == 0) return format_bytes(p.host_reserve_min_bytes);
  return "max(" + format_bytes(p.host_reserve_min_bytes) + ", " + format_percent_bp(p.host_reserve_bp) +
         " of MemTotal)";
}

// Each variable's two halves: set its field from the text (returning what is
// wrong, empty when it applied, and leaving the policy untouched on error), and
// describe the field as it stands (the "keeping ..." of an error, the "default
// ..." of the CLI's help).

inline std::string set_host_reserve(policy& p, const char* text) {
  const auto r = parse_bytes(text);
  if (!r) return std::string(to_string(r.error));
  p.host_reserve_min_bytes = r.value;  // exactly this many bytes: no share of MemTotal
  p.host_reserve_bp = 0;
  return {};
}

inline std::string set_psi_full_reject(policy& p, const char* text) {
  const auto r = parse_percent_bp(text);
  if (!r) return std::string(to_string(r.error));
  if (r.value == 0) return "must be above 0 (0 % would reject every request)";
  p.psi_full_reject_bp = r.value;
  return {};
}
inline std::string show_psi_full_reject(const policy& p) { return format_percent_bp(p.psi_full_reject_bp); }

template <std::uint64_t policy::*Field>
std::string set_bytes(policy& p, const char* text) {
  const auto r = parse_bytes(text);
  if (!r) return std::string(to_string(r.error));
  p.*Field = r.value;
  return {};
}
template <std::uint64_t policy::*Field>
std::string show_bytes(const policy& p) {
  return format_bytes(p.*Field);
}

inline std::string set_ladder_disabled(policy& p, const char* text) {
  const auto r = parse_switch(text);
  if (!r) return std::string(to_string(r.error));
  p.ladder_disabled = r.value;
  return {};
}
inline std::string show_ladder_disabled(const policy& p) { return p.ladder_disabled ? "on" : "off"; }

}  // namespace detail

// One PN_* variable: its name, what it sets, and how.
struct env_variable {
  const char* name;          // "PN_PSI_FULL_REJECT"
  std::string_view meaning;  // what it sets, one phrase starting with a capital
  // Sets the field from `text`; returns what is wrong (empty when it applied).
  std::string (*apply)(policy& p, const char* text);
  // The field as it stands in `p`: "15.00 %", "max(1.00 GiB, 15.00 % of MemTotal)".
  std::string (*setting)(const policy& p);
};

// Every variable pnmem reads, in the order it reads them (and reports their errors).
inline constexpr env_variable env_variables[] = {
    {"PN_HOST_RESERVE_BYTES", "Host reserve, exactly this many bytes", detail::set_host_reserve,
     detail::host_reserve_description},
    {"PN_PSI_FULL_REJECT", "PSI full avg10 percent that is CRITICAL and rejects requests, above 0",
     detail::set_psi_full_reject, detail::show_psi_full_reject},
    {"PN_DIE_RESERVE_BYTES", "VRAM held back from each die's budget", detail::set_bytes<&policy::die_reserve_bytes>,
     detail::show_bytes<&policy::die_reserve_bytes>},
    {"PN_LADDER_DISABLE", "The ladder plans the operator config at every level", detail::set_ladder_disabled,
     detail::show_ladder_disabled},
    {"PN_LOAD_SPIKE_BYTES", "Host burst of a weight upload", detail::set_bytes<&policy::load_spike_bytes>,
     detail::show_bytes<&policy::load_spike_bytes>},
};

// `lookup(name)` returns the variable's value or nullptr when unset; tests pass a
// map, programs use the overload below. Settings start from `base`.
template <class Lookup>
env_config policy_from_env(Lookup&& lookup, const policy& base = default_policy) {
  env_config out{base, {}};
  for (const env_variable& v : env_variables) {
    const char* text = lookup(v.name);
    if (text == nullptr) continue;
    std::string problem = v.apply(out.value, text);
    if (!problem.empty()) out.errors.push_back(config_error{v.name, text, std::move(problem), v.setting(out.value)});
  }
  return out;
}

// The process environment.
inline env_config policy_from_env(const policy& base = default_policy) {
  return policy_from_env([](const char* name) -> const char* { return std::getenv(name); }, base);
}

}  // namespace pnmem
