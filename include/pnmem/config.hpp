// pnmem/config.hpp - the PN_* environment variables, parsed strictly into the settings they set.
//
// The variables, what each sets and its default are in one table below
// (env_variables): settings_from_env() reads exactly those into env_settings (the
// policy, the watcher's cadence and dwell, the sampler's PSI source),
// policy_from_env() the same for the policy part, and the command-line tool prints
// its help from the same table.
//
// A bad value (malformed, negative, overflowing, out of range, empty) is an
// error that names the variable and the value; that setting keeps its default
// and every other variable still applies. Unset variables are not errors.
//
//   auto cfg = pnmem::policy_from_env();
//   for (const auto& e : cfg.errors) log(e.to_string());
//   engine.policy = cfg.value;
//
// The environment applies by default. The process's variables are read once, on first
// need, and kept (process_env_settings()): every runtime entry point that is not given an
// explicit policy or options takes them from there (watcher_options{}, admit_options{},
// gate_options{}, host_ledger's reserve_options{}, cuda::die_feed, linux_sampler_options{},
// prometheus_text without a policy). Their errors are reported once in the process: to
// stderr as "pnmem: <error>", to the function given to set_env_log() before, or not at all
// once take_env_errors() has taken them (an engine that logs them itself). The pure
// decisions (admission.hpp, level.hpp, ladder.hpp) keep default_policy: they stay constexpr.
//
// Not on the decision path: reading the environment allocates. Read it once at start.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pnmem/detail/ascii.hpp"
#include "pnmem/detail/equality.hpp"
#include "pnmem/detail/mutex.hpp"
#include "pnmem/detail/printable.hpp"
#include "pnmem/detail/thread_annotations.hpp"
#include "pnmem/format.hpp"
#include "pnmem/parse.hpp"
#include "pnmem/policy.hpp"

namespace pnmem {

struct config_error {
  std::string variable;  // e.g. "PN_PSI_FULL_REJECT"
  std::string value;     // the text as found
  std::string message;   // what is wrong with it
  std::string kept;      // the setting left in force

  // PN_PSI_FULL_REJECT="abc": not a number; keeping 15.00 %   (the value's control bytes escaped)
  std::string to_string() const {
    return variable + "=\"" + detail::printable(value) + "\": " + message + "; keeping " + kept;
  }
  // The line every part of pnmem logs for it (the C++ runtime, the C library, the tool): "pnmem: " + to_string().
  std::string log_line() const { return "pnmem: " + to_string(); }
};

struct env_config {
  policy value;
  std::vector<config_error> errors;
  bool ok() const noexcept { return errors.empty(); }
};

// Where the host sampler's PSI numbers come from (PN_PSI_SOURCE).
enum class psi_source : std::uint8_t {
  host,    // /proc/pressure/memory: the whole box's stalls (the seed)
  cgroup,  // the process's cgroup v2 memory.pressure: its own cgroup's stalls; where the kernel has
           // none (cgroup v1, no PSI in the cgroup), the host's, and the sampler logs why
  off,     // PSI is not read: the level comes from memory bytes (and dies) alone
};
inline constexpr int psi_source_count = 3;

constexpr std::string_view to_string(psi_source s) noexcept {
  switch (s) {
    case psi_source::host: return "host";
    case psi_source::cgroup: return "cgroup";
    case psi_source::off: return "off";
  }
  return "invalid";
}

namespace detail {
// One of an enum's `count` names (its to_string), case-insensitive, surrounding blanks ignored, into
// `out`; false, leaving `out` as it was, for anything else.
template <class E>
constexpr bool parse_enum_name(std::string_view text, int count, E& out) noexcept {
  const std::string_view s = trim(text);
  for (int i = 0; i < count; ++i) {
    const auto v = static_cast<E>(i);
    if (iequals(s, to_string(v))) {
      out = v;
      return true;
    }
  }
  return false;
}
}  // namespace detail

// "host", "cgroup" or "off" (case-insensitive, surrounding blanks ignored) into `out`; false,
// leaving `out` as it was, for anything else.
constexpr bool parse_psi_source(std::string_view text, psi_source& out) noexcept {
  return detail::parse_enum_name(text, psi_source_count, out);
}

// "hold", "admit" or "reject", as parse_psi_source: policy::zero_cost.
constexpr bool parse_zero_cost_rule(std::string_view text, zero_cost_rule& out) noexcept {
  return detail::parse_enum_name(text, zero_cost_rule_count, out);
}

// Everything the PN_* variables set: the policy, the watcher's cadence and dwell
// (watcher_options), and the host sampler's PSI source (linux_sampler_options). The
// defaults are the seed's.
struct env_settings {
  pnmem::policy policy = default_policy;
  std::chrono::milliseconds poll_interval{250};           // PN_MEMWATCH_POLL_MS: the watcher's period at OK
  std::chrono::milliseconds pressure_poll_interval{100};  // PN_PRESSURE_POLL_MS: at WATCH or worse
  std::chrono::milliseconds step_down_dwell{0};           // PN_STEP_DOWN_DWELL_MS: 0 = step down at once
  pnmem::psi_source psi_source = pnmem::psi_source::host;  // PN_PSI_SOURCE

  PNMEM_DEFAULTED_EQUALITY(env_settings)
};

inline constexpr env_settings default_env_settings{};

// The bounds the millisecond variables are held to.
inline constexpr std::uint32_t min_psi_full_window_ms = 2000;  // the kernel's shortest unprivileged PSI window
inline constexpr std::uint32_t max_psi_full_window_ms = 60000;
inline constexpr std::uint32_t max_poll_interval_ms = 60000;
inline constexpr std::uint32_t max_step_down_dwell_ms = 3600000;

struct env_settings_config {
  env_settings value;
  std::vector<config_error> errors;
  bool ok() const noexcept { return errors.empty(); }
};

namespace detail {

inline std::string host_reserve_description(const policy& p) {
  if (p.host_reserve_bp == 0) return format_bytes(p.host_reserve_min_bytes);
  // Both rules (policy.hpp host_reserve_bytes, container_reserve_bytes): a warning or a help text
  // read inside a container must not name a whole box's 1 GiB as the reserve in force there.
  const std::string share = format_percent_bp(p.host_reserve_bp);
  return "max(" + format_bytes(p.host_reserve_min_bytes) + ", " + share + " of MemTotal); in a container max(min(" +
         format_bytes(p.host_reserve_min_bytes) + ", limit/" + std::to_string(container_reserve_min_divisor) + "), " +
         share + " of the limit)";
}
inline std::string show_host_reserve(const env_settings& s) { return host_reserve_description(s.policy); }

// Each variable's two halves: set its field from the text (returning what is
// wrong, empty when it applied, and leaving the policy untouched on error), and
// describe the field as it stands (the "keeping ..." of an error, the "default
// ..." of the CLI's help).

inline std::string set_host_reserve(env_settings& s, const char* text) {
  const auto r = parse_bytes(text);
  if (!r) return std::string(bytes_problem(r.error));
  s.policy.host_reserve_min_bytes = r.value;  // exactly this many bytes: no share of MemTotal
  s.policy.host_reserve_bp = 0;
  return {};
}

inline std::string set_psi_full_reject(env_settings& s, const char* text) {
  const auto r = parse_percent_bp(text);
  if (!r) return std::string(percent_problem(r.error));
  if (r.value == 0) return "must be above 0 (0 % would reject every request)";
  s.policy.psi_full_reject_bp = r.value;
  return {};
}
inline std::string show_psi_full_reject(const env_settings& s) {
  return format_percent_bp(s.policy.psi_full_reject_bp);
}

inline std::string set_psi_some_tight(env_settings& s, const char* text) {
  const auto r = parse_percent_bp(text);
  if (!r) return std::string(percent_problem(r.error));
  if (r.value == 0) return "must be above 0 (0 % would hold every box at TIGHT)";
  s.policy.psi_some_tight_bp = r.value;
  return {};
}
inline std::string show_psi_some_tight(const env_settings& s) { return format_percent_bp(s.policy.psi_some_tight_bp); }

template <std::uint64_t policy::*Field>
std::string set_bytes(env_settings& s, const char* text) {
  const auto r = parse_bytes(text);
  if (!r) return std::string(bytes_problem(r.error));
  s.policy.*Field = r.value;
  return {};
}
template <std::uint64_t policy::*Field>
std::string show_bytes(const env_settings& s) {
  return format_bytes(s.policy.*Field);
}

template <bool policy::*Field>
std::string set_switch(env_settings& s, const char* text) {
  const auto r = parse_switch(text);
  if (!r) return std::string(to_string(r.error));
  s.policy.*Field = r.value;
  return {};
}
template <bool policy::*Field>
std::string show_switch(const env_settings& s) {
  return s.policy.*Field ? "on" : "off";
}

inline std::string set_psi_source(env_settings& s, const char* text) {
  if (!parse_psi_source(text, s.psi_source)) return "not a PSI source (use host, cgroup or off)";
  return {};
}
inline std::string show_psi_source(const env_settings& s) { return std::string(to_string(s.psi_source)); }

inline std::string set_zero_cost(env_settings& s, const char* text) {
  if (!parse_zero_cost_rule(text, s.policy.zero_cost)) return "not a zero-cost rule (use hold, admit or reject)";
  return {};
}
inline std::string show_zero_cost(const env_settings& s) { return std::string(to_string(s.policy.zero_cost)); }

inline std::string ms_text(std::uint64_t ms) { return std::to_string(ms) + " ms"; }

// A whole number of milliseconds in [lo, hi]; `why_lo` says why not below lo.
inline std::string parse_ms_in(const char* text, std::uint32_t lo, std::uint32_t hi, const char* why_lo,
                               std::uint32_t& out) {
  const auto r = parse_milliseconds(text);
  const std::string range = "out of range (" + std::to_string(lo) + " to " + std::to_string(hi) + ")";
  if (!r) return r.error == parse_errc::out_of_range ? range : std::string(to_string(r.error));
  if (r.value < lo) return "below " + std::to_string(lo) + " (" + why_lo + ")";
  if (r.value > hi) return range;
  out = r.value;
  return {};
}

inline std::string set_psi_full_window(env_settings& s, const char* text) {
  return parse_ms_in(text, min_psi_full_window_ms, max_psi_full_window_ms,
                     "the kernel's shortest unprivileged PSI window", s.policy.psi_full_window_ms);
}
inline std::string show_psi_full_window(const env_settings& s) { return ms_text(s.policy.psi_full_window_ms); }

template <std::chrono::milliseconds env_settings::*Field, std::uint32_t Min, std::uint32_t Max>
std::string set_ms(env_settings& s, const char* text) {
  std::uint32_t v = 0;
  std::string problem = parse_ms_in(text, Min, Max, Min == 1 ? "0 would poll without pause" : "", v);
  if (problem.empty()) s.*Field = std::chrono::milliseconds{v};
  return problem;
}
template <std::chrono::milliseconds env_settings::*Field>
std::string show_ms(const env_settings& s) {
  return ms_text(static_cast<std::uint64_t>((s.*Field).count()));
}

}  // namespace detail

// One PN_* variable: its name, what it sets, and how.
struct env_variable {
  const char* name;          // "PN_PSI_FULL_REJECT"
  std::string_view meaning;  // what it sets, one phrase starting with a capital
  // Sets the field from `text`; returns what is wrong (empty when it applied, and
  // leaves the settings untouched when not).
  std::string (*apply)(env_settings& s, const char* text);
  // The field as it stands in `s`: "15.00 %", "max(1.00 GiB, 15.00 % of MemTotal); in a container ...",
  // "250 ms".
  std::string (*setting)(const env_settings& s);
};

// Every variable pnmem reads, in the order it reads them (and reports their errors).
inline constexpr env_variable env_variables[] = {
    {"PN_HOST_RESERVE_BYTES", "Host reserve, exactly this many bytes", detail::set_host_reserve,
     detail::show_host_reserve},
    {"PN_PSI_FULL_REJECT", "PSI full avg10 percent that is CRITICAL and rejects requests, above 0",
     detail::set_psi_full_reject, detail::show_psi_full_reject},
    {"PN_DIE_RESERVE_BYTES", "VRAM held back from each die's budget", detail::set_bytes<&policy::die_reserve_bytes>,
     detail::show_bytes<&policy::die_reserve_bytes>},
    {"PN_LADDER_DISABLE", "The ladder plans the operator config at every level", detail::set_switch<&policy::ladder_disabled>,
     detail::show_switch<&policy::ladder_disabled>},
    {"PN_LOAD_SPIKE_BYTES", "Host burst of a weight upload", detail::set_bytes<&policy::load_spike_bytes>,
     detail::show_bytes<&policy::load_spike_bytes>},
    {"PN_PSI_SOURCE", "Where PSI is read: host (/proc/pressure/memory), cgroup (the cgroup's memory.pressure) or off",
     detail::set_psi_source, detail::show_psi_source},
    {"PN_PSI_SOME_TIGHT", "PSI some percent that is at least TIGHT, above 0", detail::set_psi_some_tight,
     detail::show_psi_some_tight},
    {"PN_PSI_FULL_WINDOW_MS", "Window in ms a fresh full stall must hold over to be CRITICAL, 2000 to 60000",
     detail::set_psi_full_window, detail::show_psi_full_window},
    {"PN_STEP_DOWN_DWELL_MS", "Step a level down only after the lower one held this many ms, 0 to 3600000",
     detail::set_ms<&env_settings::step_down_dwell, 0, max_step_down_dwell_ms>,
     detail::show_ms<&env_settings::step_down_dwell>},
    {"PN_MEMWATCH_POLL_MS", "Watcher poll interval in ms at OK, 1 to 60000",
     detail::set_ms<&env_settings::poll_interval, 1, max_poll_interval_ms>,
     detail::show_ms<&env_settings::poll_interval>},
    {"PN_PRESSURE_POLL_MS", "Watcher poll interval in ms at WATCH or worse, 1 to 60000",
     detail::set_ms<&env_settings::pressure_poll_interval, 1, max_poll_interval_ms>,
     detail::show_ms<&env_settings::pressure_poll_interval>},
    {"PN_EVICT_ON_PSI", "KV eviction (rung 4b) at TIGHT whatever raised the level, PSI included (default: memory only)",
     detail::set_switch<&policy::evict_on_psi>, detail::show_switch<&policy::evict_on_psi>},
    {"PN_ZERO_COST",
     "A request that needs no new host bytes, host memory inside the reserve: hold (until above it), admit or reject",
     detail::set_zero_cost, detail::show_zero_cost},
};

// `lookup(name)` returns the variable's value or nullptr when unset; tests pass a
// map, programs use the overload below. Settings start from `base`.
template <class Lookup>
env_settings_config settings_from_env(Lookup&& lookup, const env_settings& base = default_env_settings) {
  env_settings_config out{base, {}};
  for (const env_variable& v : env_variables) {
    const char* text = lookup(v.name);
    if (text == nullptr) continue;
    std::string problem = v.apply(out.value, text);
    if (!problem.empty()) out.errors.push_back(config_error{v.name, text, std::move(problem), v.setting(out.value)});
  }
  return out;
}

// The process environment.
inline env_settings_config settings_from_env(const env_settings& base = default_env_settings) {
  return settings_from_env([](const char* name) -> const char* { return std::getenv(name); }, base);
}

// The policy part: every variable is read (and a bad one reported), the policy's apply.
template <class Lookup>
env_config policy_from_env(Lookup&& lookup, const policy& base = default_policy) {
  env_settings start = default_env_settings;
  start.policy = base;
  env_settings_config all = settings_from_env(std::forward<Lookup>(lookup), start);
  return env_config{all.value.policy, std::move(all.errors)};
}

// The process environment.
inline env_config policy_from_env(const policy& base = default_policy) {
  return policy_from_env([](const char* name) -> const char* { return std::getenv(name); }, base);
}

// --- The process's settings: read once, applied by default ---------------------------------

using env_log_fn = std::function<void(std::string_view line)>;

namespace detail {

// The one read of the process's environment. Never destroyed (an entry point may still read it
// while the process exits); a reset for tests keeps the settings it replaces, so a reference
// handed out stays valid.
class env_cache {
 public:
  static env_cache& get() {
    static env_cache* c = new env_cache;  // never deleted: reachable, not a leak
    return *c;
  }

  const env_settings_config& read() PNMEM_EXCLUDES(mu_) {
    if (const env_settings_config* c = current_.load(std::memory_order_acquire)) return *c;
    lock_guard lk(mu_);
    if (const env_settings_config* c = current_.load(std::memory_order_relaxed)) return *c;
    auto c = std::make_unique<env_settings_config>(settings_from_env());
    const env_settings_config* raw = c.get();
    kept_.push_back(std::move(c));
    unreported_.store(!raw->errors.empty(), std::memory_order_relaxed);
    current_.store(raw, std::memory_order_release);
    return *raw;
  }

  // The errors of the read, the first time they are asked for; afterwards none.
  std::vector<config_error> take() PNMEM_EXCLUDES(mu_) {
    const env_settings_config& c = read();
    if (!unreported_.load(std::memory_order_acquire)) return {};
    lock_guard lk(mu_);
    if (!unreported_.exchange(false, std::memory_order_acq_rel)) return {};
    return c.errors;
  }

  void set_log(env_log_fn fn) PNMEM_EXCLUDES(mu_) {
    lock_guard lk(mu_);
    log_ = std::make_shared<const env_log_fn>(std::move(fn));
  }

  // Takes the errors and writes each, "pnmem: <error>", to the log (stderr when none is set).
  void report() PNMEM_EXCLUDES(mu_) {
    if (!unreported_.load(std::memory_order_acquire) && current_.load(std::memory_order_acquire) != nullptr) return;
    const std::vector<config_error> errors = take();
    if (errors.empty()) return;
    std::shared_ptr<const env_log_fn> log;
    {
      lock_guard lk(mu_);
      log = log_;
    }
    for (const config_error& e : errors) {
      const std::string line = e.log_line();
      if (log && *log) {
        (*log)(line);
      } else {
        std::fprintf(stderr, "%s\n", line.c_str());
      }
    }
  }

  // Tests: the next read() reads the environment again, and its errors are reported again.
  void reset_for_testing() PNMEM_EXCLUDES(mu_) {
    lock_guard lk(mu_);
    current_.store(nullptr, std::memory_order_release);
    unreported_.store(false, std::memory_order_relaxed);
    log_.reset();
  }

 private:
  env_cache() = default;

  mutex mu_;
  std::atomic<const env_settings_config*> current_{nullptr};
  std::atomic<bool> unreported_{false};
  std::vector<std::unique_ptr<const env_settings_config>> kept_ PNMEM_GUARDED_BY(mu_);
  std::shared_ptr<const env_log_fn> log_ PNMEM_GUARDED_BY(mu_);
};

}  // namespace detail

// The process's PN_* settings and their errors: the environment is read by the first call
// (thread-safe), and every later call returns the same object. Reports nothing.
inline const env_settings_config& process_env_config() { return detail::env_cache::get().read(); }

// The process's settings, as the runtime entry points take them by default; the first use
// reports their errors (report_env_errors).
inline const env_settings& process_env_settings() {
  const env_settings_config& c = process_env_config();
  detail::env_cache::get().report();
  return c.value;
}

// The process's policy: the PN_* variables over the built-in, read once. The one way to get it, and the
// default of every runtime entry point that takes a policy. A pure decision (admit_request, derive_level,
// ladder_plan_for, ...) defaults to the built-in default_policy to stay constexpr: an engine that calls
// one passes this (or its watcher's options().policy, when it gave the watcher another).
inline const policy& process_policy() { return process_env_settings().policy; }

// Its former name.
[[deprecated("use pnmem::process_policy()")]] inline const policy& env_policy() { return process_policy(); }

// The errors of the process's settings not yet reported, taken: the first call gets them (and
// nothing reports them after), every later one none. For an engine that logs them itself: call
// it before the first watcher, admission or gate.
inline std::vector<config_error> take_env_errors() { return detail::env_cache::get().take(); }

// Reports the errors not yet reported (take_env_errors), one line each, "pnmem: <error>", to the
// function set_env_log() gave, else to stderr. Every default use of the settings does this.
inline void report_env_errors() { detail::env_cache::get().report(); }

// Where report_env_errors() writes from now on; empty: stderr.
inline void set_env_log(env_log_fn fn) { detail::env_cache::get().set_log(std::move(fn)); }

namespace detail {
// Tests only: forget the settings read (references to them stay valid), the errors' report and
// the log, so the next use reads the environment again.
inline void reset_process_env_for_testing() { env_cache::get().reset_for_testing(); }
}  // namespace detail

}  // namespace pnmem
