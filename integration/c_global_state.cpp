// integration/c_global_state.cpp - the C ABI's process-wide state (c_global_state.hpp).
#include "c_global_state.hpp"

#include "pnmem/config.hpp"

namespace pnmem::c_abi {

void global_state::log(std::string_view line) {
  log_sink s;
  {
    detail::lock_guard lk(mu);
    s = sink;
  }
  if (s.fn != nullptr) s.fn(s.user, std::string(line).c_str());
}

const pnmem::policy& global_state::load_policy() {
  if (!policy_loaded) {
    env_config cfg = policy_from_env();
    policy = cfg.value;
    for (const auto& e : cfg.errors) pending.push_back("pnmem: " + e.to_string());
    policy_loaded = true;
  }
  return policy;
}

platform_watcher& global_state::ensure_watcher() {
  if (!watcher) {
    watcher_options o;
    o.policy = load_policy();
    watcher = std::make_unique<platform_watcher>(platform_sampler{platform_sampler_options{}}, o);
  }
  return *watcher;
}

void global_state::flush() {
  std::vector<std::string> lines;
  {
    detail::lock_guard lk(mu);
    lines.swap(pending);
  }
  for (const auto& l : lines) log(l);
}

global_state& state() {
  static global_state s;
  return s;
}

}  // namespace pnmem::c_abi
