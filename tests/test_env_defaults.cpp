// The PN_* variables apply by default: every runtime entry point not given an explicit policy or
// options takes the process's (config.hpp process_env_settings: read once), and their errors are
// reported once. Real environment variables, set with setenv before each first use (the cache is
// reset between cases); the pure decisions keep the seed's default_policy.
#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "pnmem/admission.hpp"
#include "pnmem/config.hpp"
#include "pnmem/engine/admit.hpp"
#include "pnmem/engine/backpressure_gate.hpp"
#include "pnmem/engine/host_ledger.hpp"
#include "pnmem/engine/metrics.hpp"
#include "pnmem/fake_sampler.hpp"
#include "pnmem/level.hpp"
#include "pnmem/watcher.hpp"
#include "test_support.hpp"

using namespace pnmem;
using namespace std::chrono_literals;
using pnmem::test::host_state;

namespace {

// Sets the variables for one case, with a fresh cache; unsets them and resets again after.
class scoped_env {
 public:
  scoped_env(std::initializer_list<std::pair<const char*, const char*>> vars) : vars_(vars.begin(), vars.end()) {
    for (const auto& [name, value] : vars_) ::setenv(name.c_str(), value.c_str(), 1);
    detail::reset_process_env_for_testing();
  }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;
  ~scoped_env() {
    for (const auto& kv : vars_) ::unsetenv(kv.first.c_str());
    detail::reset_process_env_for_testing();
  }

 private:
  std::vector<std::pair<std::string, std::string>> vars_;
};

// Lines the environment's errors were reported as.
struct captured_log {
  std::vector<std::string> lines;
  captured_log() {
    set_env_log([this](std::string_view l) { lines.emplace_back(l); });
  }
};

// Anything with running() and read() is a watcher to admit() and the ledger.
struct fake_watcher {
  mem_state state;
  bool running() const { return true; }
  mem_state read() const { return state; }
};

// A box whose PSI full avg10 is 20 %: CRITICAL and a psi_stall rejection at the seed's 15 %,
// only TIGHT at PN_PSI_FULL_REJECT=50.
mem_state stalled_box() { return with_derived_level(host_state(64 * GiB, 60 * GiB, 0.0, 20.0)); }

}  // namespace

TEST_CASE("watcher_options{} is the environment's; seed_watcher_options is the seed's") {
  const scoped_env env({{"PN_MEMWATCH_POLL_MS", "500"},
                        {"PN_PRESSURE_POLL_MS", "40"},
                        {"PN_STEP_DOWN_DWELL_MS", "3000"},
                        {"PN_PSI_FULL_REJECT", "50"},
                        {"PN_PSI_SOME_TIGHT", "30"},
                        {"PN_PSI_FULL_WINDOW_MS", "4000"}});
  const watcher_options o{};
  CHECK(o.poll_interval == 500ms);
  CHECK(o.pressure_poll_interval == 40ms);
  CHECK(o.step_down_dwell == 3000ms);
  CHECK(o.policy.psi_full_reject_bp == 5000);
  CHECK(o.policy.psi_some_tight_bp == 3000);
  CHECK(o.policy.psi_full_window_ms == 4000);
  // A field the engine sets wins; the others still come from the environment.
  const watcher_options mine{.poll_interval = 20ms};
  CHECK(mine.poll_interval == 20ms);
  CHECK(mine.pressure_poll_interval == 40ms);
  CHECK(mine.policy.psi_full_reject_bp == 5000);

  // A watcher started without options runs with the environment's: its level goes by them.
  fake_sampler sampler;
  host_sample h;
  h.total_bytes = 64 * GiB;
  h.avail_bytes = 60 * GiB;
  h.psi_full_avg10 = 20.0;
  sampler.host->next = h;
  watcher<fake_sampler> w{sampler};
  CHECK(w.options().poll_interval == 500ms);
  CHECK(w.options().step_down_dwell == 3000ms);
  w.poll_now();
  CHECK(w.read().level == mem_level::tight);  // the seed's 15 % would make it CRITICAL

  // The seed's options, whatever the environment: a constant.
  static_assert(seed_watcher_options.poll_interval == 250ms);
  static_assert(seed_watcher_options.pressure_poll_interval == 100ms);
  static_assert(seed_watcher_options.step_down_dwell == 0ms);
  static_assert(seed_watcher_options.policy == default_policy);
  constexpr watcher_options spelled{250ms, 100ms, 0ms, default_policy};  // every field named: constant too
  static_assert(spelled.policy == seed_watcher_options.policy);
}

TEST_CASE("admit(), the gate, the ledger and the metrics take the environment's policy by default") {
  const scoped_env env({{"PN_PSI_FULL_REJECT", "50"}, {"PN_HOST_RESERVE_BYTES", "3GiB"}});
  const fake_watcher w{stalled_box()};
  const model_desc m{.gpu_resident = true};

  // The admit wrapper: not a psi_stall at 20 % when the threshold is 50 %.
  CHECK(admit_options{}.policy.psi_full_reject_bp == 5000);
  CHECK(admit(w, m, 100).status == admit_status::admitted);
  // An explicit policy is the engine's: the seed's 15 % rejects.
  CHECK(admit(w, m, 100, {.policy = default_policy}).reason == admit_reason::psi_stall);
  // The pure decision keeps the seed's default_policy (it stays constexpr); given process_policy() it
  // decides as the runtime entry points do.
  CHECK(admit_request({.n_prompt = 100, .gpu_resident = true}, w.state).reason == admit_reason::psi_stall);
  CHECK(admit_request({.n_prompt = 100, .gpu_resident = true}, w.state, process_policy()).reason ==
        admit_reason::fits);
  // The former name is the same object (deprecated: one name for the process's policy).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  CHECK(&env_policy() == &process_policy());
#pragma GCC diagnostic pop

  // The gate's release re-check, the ledger's byte reservations.
  CHECK(gate_options{}.policy == process_policy());
  CHECK(gate_options{.max_slots = 4}.policy.psi_full_reject_bp == 5000);
  CHECK(host_ledger::reserve_options{}.policy == process_policy());
  host_ledger ledger;
  // 8 GiB box, 3.5 GiB available: 1 GiB fits above the seed's 1.2 GiB reserve, not above 3 GiB.
  const fake_watcher box{with_derived_level(host_state(8 * GiB, 3 * GiB + 512 * MiB))};
  const auto r = ledger.reserve_bytes(box, 1 * GiB);
  CHECK(r.answer.status == admit_status::capped);
  CHECK(r.answer.detail.limit_bytes == 512 * MiB);

  // Metrics without a policy: the environment's reserve.
  const std::string text = prometheus_text(box.state);
  CHECK(text.find("pnmem_host_reserve_bytes 3221225472\n") != std::string::npos);
}

TEST_CASE("errors are reported once, naming the variable and the value") {
  const scoped_env env({{"PN_MEMWATCH_POLL_MS", "0"}, {"PN_PSI_SOURCE", "cgroups"}, {"PN_PSI_FULL_REJECT", "40"}});
  const captured_log log;
  const watcher_options first{};
  const watcher_options second{};
  const admit_options third{};
  (void)third;
  CHECK(first.poll_interval == 250ms);  // the bad one keeps its default ...
  CHECK(second.policy.psi_full_reject_bp == 4000);  // ... the good one applies
  REQUIRE(log.lines.size() == 2);
  CHECK(log.lines[0] == "pnmem: PN_PSI_SOURCE=\"cgroups\": not a PSI source (use host, cgroup or off); keeping host");
  CHECK(log.lines[1] == "pnmem: PN_MEMWATCH_POLL_MS=\"0\": below 1 (0 would poll without pause); keeping 250 ms");
  CHECK(take_env_errors().empty());  // reported: nothing left to take
  report_env_errors();
  CHECK(log.lines.size() == 2);
}

TEST_CASE("an engine that takes the errors first logs them itself: nothing is reported after") {
  const scoped_env env({{"PN_LOAD_SPIKE_BYTES", "lots"}});
  const captured_log log;
  const std::vector<config_error> errors = take_env_errors();
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].variable == "PN_LOAD_SPIKE_BYTES");
  CHECK(errors[0].value == "lots");
  const watcher_options o{};
  CHECK(o.policy.load_spike_bytes == default_policy.load_spike_bytes);
  CHECK(log.lines.empty());
  CHECK(take_env_errors().empty());
}

TEST_CASE("without a log the errors go to stderr, once") {
  const scoped_env env({{"PN_PRESSURE_POLL_MS", "fast"}});
  std::fflush(stderr);
  char path[] = "/tmp/pnmem_env_stderr_XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  const int saved = ::dup(STDERR_FILENO);
  ::dup2(fd, STDERR_FILENO);
  (void)process_policy();
  (void)process_policy();
  (void)watcher_options{};
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  ::close(fd);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  ::unlink(path);
  CHECK(text.str() == "pnmem: PN_PRESSURE_POLL_MS=\"fast\": not a number; keeping 100 ms\n");
}

TEST_CASE("the environment is read once: a change after the first use does not apply until a reset") {
  const scoped_env env({{"PN_MEMWATCH_POLL_MS", "700"}});
  CHECK(watcher_options{}.poll_interval == 700ms);
  ::setenv("PN_MEMWATCH_POLL_MS", "900", 1);
  CHECK(watcher_options{}.poll_interval == 700ms);
  const env_settings& before = process_env_settings();
  detail::reset_process_env_for_testing();
  CHECK(watcher_options{}.poll_interval == 900ms);
  CHECK(before.poll_interval == 700ms);  // a reference handed out stays valid
}
