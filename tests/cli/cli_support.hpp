// tests/cli/cli_support.hpp - what the CLI tests share: the variables meson test sets, and running the
// `pnmem` binary (PNMEM_EXE) with its death by a signal a failed check.
#pragma once

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "run_process.hpp"

namespace pnmem::test {

using args_t = std::vector<std::string>;
using env_t = std::map<std::string, std::string>;

// The environment variable `name`; a failed REQUIRE when it is not set.
inline std::string env_or_fail(const char* name) {
  const char* v = std::getenv(name);
  REQUIRE_MESSAGE(v != nullptr, name, " is not set (run through meson test)");
  return v;
}

// The tree `name` of tests/fixtures/linux (PNMEM_LINUX_FIXTURES).
inline std::string fixture(const std::string& name) { return env_or_fail("PNMEM_LINUX_FIXTURES") + "/" + name; }

// pnmem with `args`, and `env` added to its environment.
inline process_result run(const args_t& args, const env_t& env = {}) {
  const process_result r = run_process(env_or_fail("PNMEM_EXE"), args, env);
  CHECK_MESSAGE(r.term_signal == 0, "pnmem died of signal ", r.term_signal);
  return r;
}

// Runs pnmem, expects success and no stderr, returns its stdout.
inline std::string run_ok(const args_t& args, const env_t& env = {}) {
  const process_result r = run(args, env);
  INFO("args: ", nlohmann::json(args).dump(), " stderr: ", r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  return r.out;
}

// Runs pnmem with --json before `args`, expects success and no stderr, returns the parsed object.
inline nlohmann::json run_json(const args_t& args, const env_t& env = {}) {
  args_t a{"--json"};
  a.insert(a.end(), args.begin(), args.end());
  const std::string out = run_ok(a, env);
  const nlohmann::json j = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  REQUIRE_MESSAGE(j.is_object(), "stdout is not a JSON object: ", out);
  return j;
}

}  // namespace pnmem::test
