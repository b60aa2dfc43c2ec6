// The seed's environment variables: good values apply, bad ones are named and ignored.
#include "pnmem/config.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <iterator>
#include <map>
#include <string>
#include <vector>

using namespace pnmem;

namespace {
struct fake_env {
  std::map<std::string, std::string> vars;
  const char* operator()(const char* name) const {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  }
};

env_config load(std::map<std::string, std::string> vars) { return policy_from_env(fake_env{std::move(vars)}); }
}  // namespace

TEST_CASE("no variables: the seed's defaults, no errors") {
  const env_config c = load({});
  CHECK(c.ok());
  CHECK(c.value == default_policy);
  CHECK(c.value.host_reserve_min_bytes == 1 * GiB);
  CHECK(c.value.host_reserve_bp == 1500);
  CHECK(c.value.psi_full_reject_bp == 1500);
  CHECK(c.value.psi_some_tight_bp == 1000);
  CHECK(c.value.die_reserve_bytes == 1 * GiB);
  CHECK(c.value.die_tight_divisor == 16);
  CHECK(c.value.die_watch_divisor == 8);
  CHECK(c.value.load_spike_bytes == 2576980377);
  CHECK_FALSE(c.value.ladder_disabled);
}

TEST_CASE("every variable applies") {
  const env_config c = load({{"PN_HOST_RESERVE_BYTES", "2GiB"},
                             {"PN_PSI_FULL_REJECT", "20.5"},
                             {"PN_DIE_RESERVE_BYTES", "512MiB"},
                             {"PN_LADDER_DISABLE", "1"},
                             {"PN_LOAD_SPIKE_BYTES", "3221225472"}});
  CHECK(c.ok());
  CHECK(c.value.host_reserve_min_bytes == 2 * GiB);
  CHECK(c.value.host_reserve_bp == 0);
  CHECK(box_reserve_bytes(100 * GiB, c.value) == 2 * GiB);  // exactly the value, not max(.., 15 %)
  CHECK(c.value.psi_full_reject_bp == 2050);
  CHECK(c.value.die_reserve_bytes == 512 * MiB);
  CHECK(c.value.ladder_disabled);
  CHECK(c.value.load_spike_bytes == 3 * GiB);
}

TEST_CASE("a bad value names the variable and the value, keeps the default, spares the rest") {
  struct bad_case {
    const char* var;
    const char* value;
    const char* says;
  };
  const bad_case cases[] = {
      {"PN_HOST_RESERVE_BYTES", "12x", "unknown unit"},
      {"PN_HOST_RESERVE_BYTES", "-1", "negative"},
      {"PN_HOST_RESERVE_BYTES", "99999999999999999999", "out of range"},
      {"PN_HOST_RESERVE_BYTES", "", "empty"},
      {"PN_HOST_RESERVE_BYTES", "4GB", "ambiguous"},
      {"PN_PSI_FULL_REJECT", "abc", "not a number"},
      {"PN_PSI_FULL_REJECT", "-3", "negative"},
      {"PN_PSI_FULL_REJECT", "150", "out of range"},
      {"PN_PSI_FULL_REJECT", "0", "above 0"},
      {"PN_PSI_FULL_REJECT", "12.345", "decimals"},
      {"PN_DIE_RESERVE_BYTES", "1.5", "fraction"},
      {"PN_DIE_RESERVE_BYTES", "18446744073709551616", "out of range"},
      {"PN_LADDER_DISABLE", "maybe", "not a switch"},
      {"PN_LADDER_DISABLE", "", "empty"},
      {"PN_LOAD_SPIKE_BYTES", "two gigs", "not a number"},
  };
  for (const auto& bc : cases) {
    CAPTURE(bc.var);
    CAPTURE(bc.value);
    // The bad variable beside one good one: the good one still applies.
    const std::string other = std::string(bc.var) == "PN_DIE_RESERVE_BYTES" ? "PN_LOAD_SPIKE_BYTES" : "PN_DIE_RESERVE_BYTES";
    const env_config c = load({{bc.var, bc.value}, {other, "3GiB"}});
    REQUIRE(c.errors.size() == 1);
    const config_error& e = c.errors[0];
    CHECK(e.variable == bc.var);
    CHECK(e.value == bc.value);
    const std::string line = e.to_string();
    CHECK(line.find(bc.var) != std::string::npos);
    CHECK(line.find(std::string("\"") + bc.value + "\"") != std::string::npos);
    CHECK(line.find(bc.says) != std::string::npos);
    CHECK(line.find("keeping") != std::string::npos);
    // the default stays for the bad one...
    policy expect = default_policy;
    if (other == "PN_DIE_RESERVE_BYTES") {
      expect.die_reserve_bytes = 3 * GiB;
    } else {
      expect.load_spike_bytes = 3 * GiB;
    }
    CHECK(c.value == expect);  // ...and the good one applied
  }
}

TEST_CASE("error lines say what stays in force") {
  CHECK(load({{"PN_PSI_FULL_REJECT", "abc"}}).errors[0].to_string() ==
        "PN_PSI_FULL_REJECT=\"abc\": not a number; keeping 15.00 %");
  CHECK(load({{"PN_HOST_RESERVE_BYTES", "x"}}).errors[0].kept ==
        "max(1.00 GiB, 15.00 % of MemTotal); in a container max(min(1.00 GiB, limit/4), 15.00 % of the limit)");
  CHECK(load({{"PN_DIE_RESERVE_BYTES", "x"}}).errors[0].kept == "1.00 GiB");
  CHECK(load({{"PN_LOAD_SPIKE_BYTES", "x"}}).errors[0].kept == "2.40 GiB");
  CHECK(load({{"PN_LADDER_DISABLE", "x"}}).errors[0].kept == "off");
}

TEST_CASE("several bad variables: one error each") {
  const env_config c = load({{"PN_HOST_RESERVE_BYTES", "x"}, {"PN_PSI_FULL_REJECT", "y"}, {"PN_LADDER_DISABLE", "z"}});
  CHECK(c.errors.size() == 3);
  CHECK(c.value == default_policy);
}

TEST_CASE("settings start from a caller's base policy") {
  policy base;
  base.die_reserve_bytes = 2 * GiB;
  const env_config c = policy_from_env(fake_env{{{"PN_DIE_RESERVE_BYTES", "bad"}}}, base);
  CHECK(c.value.die_reserve_bytes == 2 * GiB);
  CHECK(c.errors[0].kept == "2.00 GiB");
}

TEST_CASE("the process environment is read by the default overload") {
  ::setenv("PN_LOAD_SPIKE_BYTES", "1GiB", 1);
  ::setenv("PN_PSI_FULL_REJECT", "oops", 1);
  const env_config c = policy_from_env();
  ::unsetenv("PN_LOAD_SPIKE_BYTES");
  ::unsetenv("PN_PSI_FULL_REJECT");
  CHECK(c.value.load_spike_bytes == 1 * GiB);
  REQUIRE(c.errors.size() == 1);
  CHECK(c.errors[0].variable == "PN_PSI_FULL_REJECT");
}

TEST_CASE("formatting used by the messages") {
  CHECK(format_bytes(0) == "0 B");
  CHECK(format_bytes(1023) == "1023 B");
  CHECK(format_bytes(1024) == "1.00 KiB");
  CHECK(format_bytes(3 * GiB / 2) == "1.50 GiB");
  CHECK(format_bytes(2 * TiB) == "2.00 TiB");
  CHECK(format_percent_bp(1500) == "15.00 %");
  CHECK(format_percent_bp(25) == "0.25 %");
}

TEST_CASE("the table of variables is what policy_from_env reads, in its order") {
  std::vector<std::string> asked;
  policy_from_env([&asked](const char* name) -> const char* {
    asked.emplace_back(name);
    return nullptr;
  });
  REQUIRE(asked.size() == std::size(env_variables));
  for (std::size_t i = 0; i < asked.size(); ++i) {
    CAPTURE(i);
    CHECK(asked[i] == env_variables[i].name);
    CHECK_FALSE(env_variables[i].meaning.empty());
    // What an error says it keeps is what the table shows for the policy.
    const env_config c = load({{env_variables[i].name, "bad value"}});
    REQUIRE(c.errors.size() == 1);
    CHECK(c.errors[0].kept == env_variables[i].setting(default_env_settings));
  }
  CHECK(env_variables[0].setting(default_env_settings) ==
        "max(1.00 GiB, 15.00 % of MemTotal); in a container max(min(1.00 GiB, limit/4), 15.00 % of the limit)");
}

// --- The PSI knobs, the watcher's cadence and the PSI source ---------------------------------

namespace {
env_settings_config load_all(std::map<std::string, std::string> vars) {
  return settings_from_env(fake_env{std::move(vars)});
}
}  // namespace

TEST_CASE("no variables: the seed's settings (the watcher's 250 / 100 ms, no dwell, host PSI)") {
  const env_settings_config c = load_all({});
  CHECK(c.ok());
  CHECK(c.value == default_env_settings);
  CHECK(c.value.policy == default_policy);
  CHECK(c.value.poll_interval == std::chrono::milliseconds{250});
  CHECK(c.value.pressure_poll_interval == std::chrono::milliseconds{100});
  CHECK(c.value.step_down_dwell == std::chrono::milliseconds{0});
  CHECK(c.value.psi_source == psi_source::host);
  CHECK(c.value.policy.psi_full_window_ms == 3000);
}

TEST_CASE("the PSI source, the PSI thresholds, the dwell and the poll intervals apply") {
  const env_settings_config c = load_all({{"PN_PSI_SOURCE", "cgroup"},
                                          {"PN_PSI_SOME_TIGHT", "25.5"},
                                          {"PN_PSI_FULL_REJECT", "40"},
                                          {"PN_PSI_FULL_WINDOW_MS", "5000"},
                                          {"PN_STEP_DOWN_DWELL_MS", "4000"},
                                          {"PN_MEMWATCH_POLL_MS", "500"},
                                          {"PN_PRESSURE_POLL_MS", "50"}});
  CHECK(c.ok());
  CHECK(c.value.psi_source == psi_source::cgroup);
  CHECK(c.value.policy.psi_some_tight_bp == 2550);
  CHECK(c.value.policy.psi_full_reject_bp == 4000);
  CHECK(c.value.policy.psi_full_window_ms == 5000);
  CHECK(c.value.step_down_dwell == std::chrono::milliseconds{4000});
  CHECK(c.value.poll_interval == std::chrono::milliseconds{500});
  CHECK(c.value.pressure_poll_interval == std::chrono::milliseconds{50});
  // The rest stays the seed's.
  env_settings expect = default_env_settings;
  expect.psi_source = psi_source::cgroup;
  expect.policy.psi_some_tight_bp = 2550;
  expect.policy.psi_full_reject_bp = 4000;
  expect.policy.psi_full_window_ms = 5000;
  expect.step_down_dwell = std::chrono::milliseconds{4000};
  expect.poll_interval = std::chrono::milliseconds{500};
  expect.pressure_poll_interval = std::chrono::milliseconds{50};
  CHECK(c.value == expect);

  CHECK(load_all({{"PN_PSI_SOURCE", " OFF "}}).value.psi_source == psi_source::off);
  CHECK(load_all({{"PN_PSI_SOURCE", "host"}}).value.psi_source == psi_source::host);
  CHECK(load_all({{"PN_PSI_FULL_WINDOW_MS", "2000"}}).value.policy.psi_full_window_ms == 2000);  // the floor itself
  CHECK(load_all({{"PN_STEP_DOWN_DWELL_MS", "0"}}).ok());
}

TEST_CASE("the new variables are parsed strictly: each error names the variable and the value, the rest applies") {
  struct bad_case {
    const char* var;
    const char* value;
    const char* line;  // the whole error line
  };
  const bad_case cases[] = {
      {"PN_PSI_SOURCE", "cgroups", "PN_PSI_SOURCE=\"cgroups\": not a PSI source (use host, cgroup or off); keeping host"},
      {"PN_PSI_SOURCE", "", "PN_PSI_SOURCE=\"\": not a PSI source (use host, cgroup or off); keeping host"},
      {"PN_PSI_SOME_TIGHT", "0", "PN_PSI_SOME_TIGHT=\"0\": must be above 0 (0 % would hold every box at TIGHT); keeping 10.00 %"},
      {"PN_PSI_SOME_TIGHT", "101", "PN_PSI_SOME_TIGHT=\"101\": out of range (0 to 100); keeping 10.00 %"},
      {"PN_PSI_FULL_WINDOW_MS", "1000",
       "PN_PSI_FULL_WINDOW_MS=\"1000\": below 2000 (the kernel's shortest unprivileged PSI window); keeping 3000 ms"},
      {"PN_PSI_FULL_WINDOW_MS", "60001", "PN_PSI_FULL_WINDOW_MS=\"60001\": out of range (2000 to 60000); keeping 3000 ms"},
      {"PN_PSI_FULL_WINDOW_MS", "3s", "PN_PSI_FULL_WINDOW_MS=\"3s\": not a number; keeping 3000 ms"},
      {"PN_STEP_DOWN_DWELL_MS", "-5", "PN_STEP_DOWN_DWELL_MS=\"-5\": negative value; keeping 0 ms"},
      {"PN_STEP_DOWN_DWELL_MS", "1.5", "PN_STEP_DOWN_DWELL_MS=\"1.5\": not a whole number; keeping 0 ms"},
      {"PN_MEMWATCH_POLL_MS", "0", "PN_MEMWATCH_POLL_MS=\"0\": below 1 (0 would poll without pause); keeping 250 ms"},
      {"PN_MEMWATCH_POLL_MS", "99999999999", "PN_MEMWATCH_POLL_MS=\"99999999999\": out of range (1 to 60000); keeping 250 ms"},
      {"PN_PRESSURE_POLL_MS", "fast", "PN_PRESSURE_POLL_MS=\"fast\": not a number; keeping 100 ms"},
      {"PN_PRESSURE_POLL_MS", " ", "PN_PRESSURE_POLL_MS=\" \": empty value; keeping 100 ms"},
      // The value as found, its control bytes and bytes that are not UTF-8 escaped: one line, nothing a
      // terminal acts on.
      {"PN_PSI_SOURCE", "\x1b[2Jhost\n", "PN_PSI_SOURCE=\"\\x1b[2Jhost\\n\": not a PSI source (use host, cgroup or off); keeping host"},
      {"PN_DIE_RESERVE_BYTES", "2\tGiB", "PN_DIE_RESERVE_BYTES=\"2\\tGiB\": unknown unit (use B, KiB, MiB, GiB or TiB); keeping 1.00 GiB"},
      {"PN_DIE_RESERVE_BYTES", "1\xffGiB", "PN_DIE_RESERVE_BYTES=\"1\\xffGiB\": unknown unit (use B, KiB, MiB, GiB or TiB); keeping 1.00 GiB"},
      {"PN_DIE_RESERVE_BYTES", "99999999999999999999", "PN_DIE_RESERVE_BYTES=\"99999999999999999999\": out of range (at most 18446744073709551615 B, 2^64-1); keeping 1.00 GiB"},
  };
  for (const auto& bc : cases) {
    CAPTURE(bc.var);
    CAPTURE(bc.value);
    const env_settings_config c = load_all({{bc.var, bc.value}, {"PN_LOAD_SPIKE_BYTES", "3GiB"}});
    REQUIRE(c.errors.size() == 1);
    CHECK(c.errors[0].variable == bc.var);
    CHECK(c.errors[0].value == bc.value);
    CHECK(c.errors[0].to_string() == bc.line);
    env_settings expect = default_env_settings;
    expect.policy.load_spike_bytes = 3 * GiB;
    CHECK(c.value == expect);  // the bad one kept its default, the good one applied
  }
}

TEST_CASE("policy_from_env reads every variable: its errors include the watcher's, its value is the policy part") {
  const env_config c = load({{"PN_PSI_SOME_TIGHT", "5"}, {"PN_MEMWATCH_POLL_MS", "zero"}});
  CHECK(c.value.psi_some_tight_bp == 500);
  REQUIRE(c.errors.size() == 1);
  CHECK(c.errors[0].variable == "PN_MEMWATCH_POLL_MS");
}

TEST_CASE("parse_milliseconds: whole numbers only") {
  CHECK(parse_milliseconds("250").value == 250);
  CHECK(parse_milliseconds(" 4294967295 ").value == 4294967295U);
  CHECK(parse_milliseconds("4294967296").error == parse_errc::out_of_range);
  CHECK(parse_milliseconds("2.5").error == parse_errc::not_whole);
  CHECK(parse_milliseconds("250ms").error == parse_errc::not_a_number);
  CHECK(parse_milliseconds("-1").error == parse_errc::negative);
  CHECK(parse_milliseconds("").error == parse_errc::empty);
  CHECK(parse_milliseconds(".5").error == parse_errc::not_a_number);
}

TEST_CASE("PN_EVICT_ON_PSI: a switch for the seed's evict rule, off by default") {
  CHECK_FALSE(default_policy.evict_on_psi);
  CHECK(load({{"PN_EVICT_ON_PSI", "1"}}).value.evict_on_psi);
  CHECK_FALSE(load({{"PN_EVICT_ON_PSI", "off"}}).value.evict_on_psi);
  const env_config bad = load({{"PN_EVICT_ON_PSI", "psi"}});
  REQUIRE(bad.errors.size() == 1);
  CHECK(bad.errors[0].to_string() ==
        "PN_EVICT_ON_PSI=\"psi\": not a switch (use 1/0, true/false, yes/no, on/off); keeping off");
}
