// fuzz_env: pnmem::settings_from_env(lookup, base) (and policy_from_env, its policy part) over
// environments built from any bytes.
//
// Input: assignments separated by NUL bytes (a value never holds one). The first
// byte of each picks the variable (its value mod 16: 0 PN_HOST_RESERVE_BYTES,
// 1 PN_PSI_FULL_REJECT, 2 PN_DIE_RESERVE_BYTES, 3 PN_LADDER_DISABLE,
// 4 PN_LOAD_SPIKE_BYTES, 8 PN_PSI_SOURCE, 9 PN_PSI_SOME_TIGHT, 10 PN_PSI_FULL_WINDOW_MS,
// 11 PN_STEP_DOWN_DWELL_MS, 12 PN_MEMWATCH_POLL_MS, 13 PN_PRESSURE_POLL_MS, 14 PN_ZERO_COST,
// 15 PN_EVICT_ON_PSI; 5-7 names pnmem does not read: as characters, '0'-'4' and '8'-'?' pick the
// documented ones);
// the rest is its value, any bytes. A later assignment of a variable replaces an earlier one;
// an empty assignment is skipped. So "02GiB\0" + "1abc" sets the reserve to 2GiB and the
// PSI threshold to "abc". Each environment is read over the default settings and
// over settings where every field differs from the default.
//
// Properties (config.hpp's contract):
//   - lookup is asked only for the documented names, each at most once;
//   - a variable that is set and valid for its parser (parse_bytes,
//     parse_percent_bp above 0, parse_switch, parse_psi_source, parse_zero_cost_rule, parse_milliseconds in
//     the variable's range) sets exactly its field (and PN_HOST_RESERVE_BYTES zeroes the
//     percentage share); one that is not gives exactly one error, which names the
//     variable, carries the value as found, says what is wrong and what is kept, and the
//     field keeps the base value;
//   - unset variables and the fields no variable governs keep the base values;
//   - policy_from_env gives the same policy and the same errors;
//   - ok() is errors.empty(); to_string() names the variable and the value.
#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include "fuzz_support.hpp"
#include "pnmem/config.hpp"
#include "pnmem/detail/printable.hpp"

using namespace pnmem_fuzz;

namespace {

constexpr std::array<const char*, 16> names = {
    "PN_HOST_RESERVE_BYTES", "PN_PSI_FULL_REJECT",    "PN_DIE_RESERVE_BYTES",  "PN_LADDER_DISABLE",
    "PN_LOAD_SPIKE_BYTES",   "PN_HOST_RESERVE",       "pn_psi_full_reject",    "PN_LOAD_SPIKE_BYTES ",
    "PN_PSI_SOURCE",         "PN_PSI_SOME_TIGHT",     "PN_PSI_FULL_WINDOW_MS", "PN_STEP_DOWN_DWELL_MS",
    "PN_MEMWATCH_POLL_MS",   "PN_PRESSURE_POLL_MS",   "PN_ZERO_COST",          "PN_EVICT_ON_PSI",
};
constexpr bool documented(std::size_t i) { return i < 5 || i >= 8; }

constexpr pnmem::policy other_base = [] {
  pnmem::policy p;
  p.host_reserve_min_bytes = 3 * pnmem::GiB + 5;
  p.host_reserve_bp = 0;
  p.psi_full_reject_bp = 2025;
  p.psi_some_tight_bp = 333;
  p.die_reserve_bytes = 7 * pnmem::MiB;
  p.die_tight_divisor = 5;
  p.die_watch_divisor = 3;
  p.die_scratch_bytes = 9;
  p.load_spike_bytes = 0;
  p.ladder_disabled = true;
  p.evict_on_psi = true;
  p.zero_cost = pnmem::zero_cost_rule::reject;
  return p;
}();

constexpr pnmem::env_settings other_settings = [] {
  pnmem::env_settings s;
  s.policy = other_base;
  s.poll_interval = std::chrono::milliseconds{777};
  s.pressure_poll_interval = std::chrono::milliseconds{33};
  s.step_down_dwell = std::chrono::milliseconds{4321};
  s.psi_source = pnmem::psi_source::off;
  return s;
}();

const std::string* find(const std::map<std::string, std::string>& env, const char* name) {
  const auto it = env.find(name);
  return it == env.end() ? nullptr : &it->second;
}

// The one error about `name`, or nullptr; two about it is a violation.
const pnmem::config_error* error_for(const pnmem::env_settings_config& cfg, const char* name) {
  const pnmem::config_error* hit = nullptr;
  for (const auto& e : cfg.errors) {
    if (e.variable != name) continue;
    FUZZ_CHECK(hit == nullptr);
    hit = &e;
  }
  return hit;
}

void check_error(const pnmem::config_error& e, const std::string& value, const std::string& kept) {
  FUZZ_CHECK(e.value == value);
  FUZZ_CHECK(!e.message.empty() && e.message != "invalid");
  FUZZ_CHECK(e.kept == kept);
  const std::string line = e.to_string();
  FUZZ_CHECK(line.find(e.variable) == 0);
  FUZZ_CHECK(line.find(pnmem::detail::printable(value)) != std::string::npos);  // control bytes escaped
  for (const char c : line) FUZZ_CHECK(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f);  // one line, no escape codes
}

void check(const std::map<std::string, std::string>& env, const pnmem::env_settings& base_settings) {
  const pnmem::policy& base = base_settings.policy;
  std::array<int, names.size()> asked{};
  const auto lookup = [&](const char* name) -> const char* {
    std::size_t i = 0;
    while (i < names.size() && !(documented(i) && std::string_view(names[i]) == name)) ++i;
    FUZZ_CHECK(i < names.size());
    ++asked[i];
    const std::string* v = find(env, name);
    return v == nullptr ? nullptr : v->c_str();
  };
  const pnmem::env_settings_config cfg = pnmem::settings_from_env(lookup, base_settings);
  const pnmem::env_settings& st = cfg.value;
  const pnmem::policy& p = st.policy;
  for (std::size_t i = 0; i < names.size(); ++i) FUZZ_CHECK(asked[i] <= 1);
  FUZZ_CHECK(cfg.ok() == cfg.errors.empty());

  std::size_t bad = 0;
  for (const auto& e : cfg.errors) {
    bool named = false;
    for (std::size_t i = 0; i < names.size(); ++i) named = named || (documented(i) && e.variable == names[i]);
    FUZZ_CHECK(named);
  }

  // PN_HOST_RESERVE_BYTES
  if (const std::string* v = find(env, names[0])) {
    const auto r = pnmem::parse_bytes(*v);
    const auto* e = error_for(cfg, names[0]);
    FUZZ_CHECK(r.ok() == (e == nullptr));
    if (r.ok()) {
      FUZZ_CHECK(p.host_reserve_min_bytes == r.value && p.host_reserve_bp == 0);
    } else {
      ++bad;
      check_error(*e, *v, pnmem::detail::host_reserve_description(base));
      FUZZ_CHECK(p.host_reserve_min_bytes == base.host_reserve_min_bytes && p.host_reserve_bp == base.host_reserve_bp);
    }
  } else {
    FUZZ_CHECK(error_for(cfg, names[0]) == nullptr);
    FUZZ_CHECK(p.host_reserve_min_bytes == base.host_reserve_min_bytes && p.host_reserve_bp == base.host_reserve_bp);
  }

  // PN_PSI_FULL_REJECT
  if (const std::string* v = find(env, names[1])) {
    const auto r = pnmem::parse_percent_bp(*v);
    const bool valid = r.ok() && r.value > 0;
    const auto* e = error_for(cfg, names[1]);
    FUZZ_CHECK(valid == (e == nullptr));
    if (valid) {
      FUZZ_CHECK(p.psi_full_reject_bp == r.value && r.value <= pnmem::bp_whole);
    } else {
      ++bad;
      check_error(*e, *v, pnmem::format_percent_bp(base.psi_full_reject_bp));
      FUZZ_CHECK(p.psi_full_reject_bp == base.psi_full_reject_bp);
    }
  } else {
    FUZZ_CHECK(error_for(cfg, names[1]) == nullptr && p.psi_full_reject_bp == base.psi_full_reject_bp);
  }

  // A variable whose every parsed value applies as it is: `parse` is its parser, `kept` the words an
  // error says the base value is kept as.
  const auto plain_var = [&](const char* name, auto got, auto base_value, auto parse, const std::string& kept) {
    if (const std::string* v = find(env, name)) {
      const auto r = parse(*v);
      const auto* e = error_for(cfg, name);
      FUZZ_CHECK(r.ok() == (e == nullptr));
      if (r.ok()) {
        FUZZ_CHECK(got == r.value);
      } else {
        ++bad;
        check_error(*e, *v, kept);
        FUZZ_CHECK(got == base_value);
      }
    } else {
      FUZZ_CHECK(error_for(cfg, name) == nullptr && got == base_value);
    }
  };
  // PN_DIE_RESERVE_BYTES and PN_LOAD_SPIKE_BYTES: plain byte sizes.
  const auto bytes = [](const std::string& t) { return pnmem::parse_bytes(t); };
  plain_var(names[2], p.die_reserve_bytes, base.die_reserve_bytes, bytes, pnmem::format_bytes(base.die_reserve_bytes));
  plain_var(names[4], p.load_spike_bytes, base.load_spike_bytes, bytes, pnmem::format_bytes(base.load_spike_bytes));
  // PN_LADDER_DISABLE and PN_EVICT_ON_PSI: switches.
  const auto switches = [](const std::string& t) { return pnmem::parse_switch(t); };
  plain_var(names[3], p.ladder_disabled, base.ladder_disabled, switches, base.ladder_disabled ? "on" : "off");
  plain_var(names[15], p.evict_on_psi, base.evict_on_psi, switches, base.evict_on_psi ? "on" : "off");

  // PN_PSI_SOURCE
  if (const std::string* v = find(env, names[8])) {
    pnmem::psi_source want = base_settings.psi_source;
    const bool valid = pnmem::parse_psi_source(*v, want);
    const auto* e = error_for(cfg, names[8]);
    FUZZ_CHECK(valid == (e == nullptr));
    if (valid) {
      FUZZ_CHECK(st.psi_source == want);
    } else {
      ++bad;
      check_error(*e, *v, std::string(pnmem::to_string(base_settings.psi_source)));
      FUZZ_CHECK(st.psi_source == base_settings.psi_source);
    }
  } else {
    FUZZ_CHECK(error_for(cfg, names[8]) == nullptr && st.psi_source == base_settings.psi_source);
  }

  // PN_ZERO_COST: hold, admit or reject.
  if (const std::string* v = find(env, names[14])) {
    pnmem::zero_cost_rule want = base.zero_cost;
    const bool valid = pnmem::parse_zero_cost_rule(*v, want);
    const auto* e = error_for(cfg, names[14]);
    FUZZ_CHECK(valid == (e == nullptr));
    if (valid) {
      FUZZ_CHECK(p.zero_cost == want);
    } else {
      ++bad;
      check_error(*e, *v, std::string(pnmem::to_string(base.zero_cost)));
      FUZZ_CHECK(p.zero_cost == base.zero_cost);
    }
  } else {
    FUZZ_CHECK(error_for(cfg, names[14]) == nullptr && p.zero_cost == base.zero_cost);
  }

  // PN_PSI_SOME_TIGHT: a percentage above 0.
  if (const std::string* v = find(env, names[9])) {
    const auto r = pnmem::parse_percent_bp(*v);
    const bool valid = r.ok() && r.value > 0;
    const auto* e = error_for(cfg, names[9]);
    FUZZ_CHECK(valid == (e == nullptr));
    if (valid) {
      FUZZ_CHECK(p.psi_some_tight_bp == r.value && r.value <= pnmem::bp_whole);
    } else {
      ++bad;
      check_error(*e, *v, pnmem::format_percent_bp(base.psi_some_tight_bp));
      FUZZ_CHECK(p.psi_some_tight_bp == base.psi_some_tight_bp);
    }
  } else {
    FUZZ_CHECK(error_for(cfg, names[9]) == nullptr && p.psi_some_tight_bp == base.psi_some_tight_bp);
  }

  // The millisecond variables: a whole number in the variable's range.
  const auto ms_var = [&](const char* name, std::uint64_t got, std::uint64_t base_value, std::uint32_t lo,
                          std::uint32_t hi) {
    if (const std::string* v = find(env, name)) {
      const auto r = pnmem::parse_milliseconds(*v);
      const bool valid = r.ok() && r.value >= lo && r.value <= hi;
      const auto* e = error_for(cfg, name);
      FUZZ_CHECK(valid == (e == nullptr));
      if (valid) {
        FUZZ_CHECK(got == r.value);
      } else {
        ++bad;
        check_error(*e, *v, std::to_string(base_value) + " ms");
        FUZZ_CHECK(got == base_value);
      }
    } else {
      FUZZ_CHECK(error_for(cfg, name) == nullptr && got == base_value);
    }
  };
  const auto ms = [](std::chrono::milliseconds d) { return static_cast<std::uint64_t>(d.count()); };
  ms_var(names[10], p.psi_full_window_ms, base.psi_full_window_ms, pnmem::min_psi_full_window_ms,
         pnmem::max_psi_full_window_ms);
  ms_var(names[11], ms(st.step_down_dwell), ms(base_settings.step_down_dwell), 0, pnmem::max_step_down_dwell_ms);
  ms_var(names[12], ms(st.poll_interval), ms(base_settings.poll_interval), 1, pnmem::max_poll_interval_ms);
  ms_var(names[13], ms(st.pressure_poll_interval), ms(base_settings.pressure_poll_interval), 1,
         pnmem::max_poll_interval_ms);

  FUZZ_CHECK(cfg.errors.size() == bad);
  // Fields no variable governs.
  FUZZ_CHECK(p.die_tight_divisor == base.die_tight_divisor && p.die_watch_divisor == base.die_watch_divisor);
  FUZZ_CHECK(p.die_scratch_bytes == base.die_scratch_bytes);
  // Without any documented variable, the base comes back whole.
  bool any = false;
  for (std::size_t i = 0; i < names.size(); ++i) any = any || (documented(i) && find(env, names[i]) != nullptr);
  if (!any) FUZZ_CHECK(st == base_settings && cfg.ok());

  // policy_from_env: the policy part, the same errors.
  const pnmem::env_config pc = pnmem::policy_from_env(
      [&](const char* name) -> const char* {
        const std::string* v = find(env, name);
        return v == nullptr ? nullptr : v->c_str();
      },
      base);
  FUZZ_CHECK(pc.value == p);
  FUZZ_CHECK(pc.errors.size() == cfg.errors.size());
  for (std::size_t i = 0; i < pc.errors.size() && i < cfg.errors.size(); ++i) {
    // What is kept may differ (policy_from_env keeps the seed's cadence and PSI source).
    FUZZ_CHECK(pc.errors[i].variable == cfg.errors[i].variable && pc.errors[i].value == cfg.errors[i].value &&
               pc.errors[i].message == cfg.errors[i].message);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view rest = as_text(data, size);
  std::map<std::string, std::string> env;
  while (!rest.empty()) {
    const std::size_t nul = rest.find('\0');
    const std::string_view assignment = rest.substr(0, nul);
    rest.remove_prefix(nul == std::string_view::npos ? rest.size() : nul + 1);
    if (assignment.empty()) continue;
    const auto which = static_cast<unsigned char>(assignment.front()) % names.size();
    env[names[which]] = std::string(assignment.substr(1));
  }
  check(env, pnmem::default_env_settings);
  check(env, other_settings);
  return 0;
}
