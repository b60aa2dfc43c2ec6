// tools/pnmem/box_sample.cpp
#include "box_sample.hpp"

#include <unistd.h>

#include <CLI/CLI.hpp>

#include "arg_parsers.hpp"
#include "pnmem/clock_ns.hpp"
#include "pnmem/level.hpp"
#include "usage_error.hpp"

namespace pnmem_cli {

namespace {

// Linux's sampler reads /proc and the cgroup files under a root directory (a
// fixture tree in tests) and arms PSI triggers; macOS's has neither. Templates,
// so that the branch a platform lacks is never compiled there.
template <class Options>
constexpr bool has_root = requires(Options o) { o.root; };

template <class Options>
std::string default_root() {
  if constexpr (has_root<Options>) return Options{}.root;
  return {};
}

template <class Options>
Options sampler_options(const std::string& root, bool watching) {
  Options o;
  if constexpr (has_root<Options>) {
    if (root.empty()) throw usage_error("--root: \"\": empty directory");
    if (::access(root.c_str(), R_OK | X_OK) != 0) {
      throw usage_error(describe_bad_value("--root", root, "not a readable directory"));
    }
    o.root = root;
  }
  if constexpr (requires { o.psi_triggers.clear(); }) {
    if (!watching) o.psi_triggers.clear();
  }
  return o;
}

}  // namespace

box_options::box_options() : root_(default_root<pnmem::platform_sampler_options>()) {}

void box_options::add_to(CLI::App& app) {
  if (!has_root<pnmem::platform_sampler_options>) return;
  app.add_option("--root", root_,
                 "Read /proc and the cgroup files under DIR instead of " + root_ + " (a fixture tree laid out like " +
                     root_ + ")")
      ->type_name("DIR");
}

pnmem::platform_sampler box_options::make_sampler(bool watching) const {
  return pnmem::platform_sampler{sampler_options<pnmem::platform_sampler_options>(root_, watching)};
}

pnmem::mem_state box_options::sample(const pnmem::policy& p) const {
  pnmem::platform_sampler sampler = make_sampler(false);
  pnmem::mem_state s;
  pnmem::assign_host(s, sampler.sample());
  s.sample_time_ns = pnmem::steady_now_ns();
  s.seq = 1;
  return pnmem::with_derived_level(s, p);
}

std::string box_options::unsampled_warning(const pnmem::mem_state& s) const {
  const std::string_view why = pnmem::host_unsampled_reason(s);
  if (why.empty()) return {};
  std::string out = "nothing sampled: " + std::string(why);
  if constexpr (has_root<pnmem::platform_sampler_options>) {
    const std::string base = root_.empty() || root_.back() != '/' ? root_ + "/" : root_;
    if (root_ != default_root<pnmem::platform_sampler_options>()) out += " under --root " + root_;
    out += " (" + base + "proc/meminfo)";
  }
  return out + ": this box's level is unknown, and an engine's admissions here would fail open";
}

void box_command::add_options(CLI::App& app) {
  box_.add_to(app);
  add_command_options(app);
  policy_.add_to(app, level_flags);
}

command_output box_command::answer(const pnmem::policy& env_policy) const {
  const pnmem::policy p = policy_.apply(env_policy);
  const pnmem::mem_state s = box_.sample(p);
  command_output out = answer_for(s, p);
  if (const std::string unread = box_.unsampled_warning(s); !unread.empty()) {
    out.warnings.push_back(unread);
    if (out.exit_status == 0) out.exit_status = 1;
  }
  return out;
}

}  // namespace pnmem_cli
