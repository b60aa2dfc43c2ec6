// pnmem/config.hpp - the seed's environment variables, parsed strictly into a policy.
//
//   variable                type     default                         effect
//   PN_HOST_RESERVE_BYTES   bytes    max(1 GiB, 15 % of MemTotal)    host reserve, exactly this many bytes
//   PN_PSI_FULL_REJECT      percent  15                              full avg10 that is CRITICAL and rejects
//   PN_DIE_RESERVE_BYTES    bytes    1 GiB                           VRAM held back from each die's budget
//   PN_LADDER_DISABLE       switch   off                             ladder plans the operator config always
//   PN_LOAD_SPIKE_BYTES     bytes    2.4 GiB                         host burst of a weight upload
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

}  // namespace detail

// `lookup(name)` returns the variable's value or nullptr when unset; tests pass a
// map, programs use the overload below. Settings start from `base`.
template <class Lookup>
env_config policy_from_env(Lookup&& lookup, const policy& base = default_policy) {
  env_config out{base, {}};
  policy& p = out.value;
  auto fail = [&](const char* name, const char* text, std::string message, std::string kept) {
    out.errors.push_back(config_error{name, text, std::move(message), std::move(kept)});
  };

  if (const char* v = lookup("PN_HOST_RESERVE_BYTES")) {
    if (const auto r = parse_bytes(v)) {
      p.host_reserve_min_bytes = r.value;
      p.host_reserve_bp = 0;
    } else {
      fail("PN_HOST_RESERVE_BYTES", v, std::string(to_string(r.error)), detail::host_reserve_description(p));
    }
  }
  if (const char* v = lookup("PN_PSI_FULL_REJECT")) {
    const auto r = parse_percent_bp(v);
    if (r && r.value > 0) {
      p.psi_full_reject_bp = r.value;
    } else {
      fail("PN_PSI_FULL_REJECT", v,
           r ? std::string("must be above 0 (0 % would reject every request)") : std::string(to_string(r.error)),
           format_percent_bp(p.psi_full_reject_bp));
    }
  }
  if (const char* v = lookup("PN_DIE_RESERVE_BYTES")) {
    if (const auto r = parse_bytes(v)) {
      p.die_reserve_bytes = r.value;
    } else {
      fail("PN_DIE_RESERVE_BYTES", v, std::string(to_string(r.error)), format_bytes(p.die_reserve_bytes));
    }
  }
  if (const char* v = lookup("PN_LADDER_DISABLE")) {
    if (const auto r = parse_switch(v)) {
      p.ladder_disabled = r.value;
    } else {
      fail("PN_LADDER_DISABLE", v, std::string(to_string(r.error)), p.ladder_disabled ? "on" : "off");
    }
  }
  if (const char* v = lookup("PN_LOAD_SPIKE_BYTES")) {
    if (const auto r = parse_bytes(v)) {
      p.load_spike_bytes = r.value;
    } else {
      fail("PN_LOAD_SPIKE_BYTES", v, std::string(to_string(r.error)), format_bytes(p.load_spike_bytes));
    }
  }
  return out;
}

// The process environment.
inline env_config policy_from_env(const policy& base = default_policy) {
  return policy_from_env([](const char* name) -> const char* { return std::getenv(name); }, base);
}

}  // namespace pnmem
