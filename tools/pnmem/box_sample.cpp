// tools/pnmem/box_sample.cpp
#include "box_sample.hpp"

#include <unistd.h>

#include <chrono>

#include <CLI/CLI.hpp>

#include "arg_parsers.hpp"
#include "pnmem/level.hpp"
#include "usage_error.hpp"

namespace pnmem_cli {

void add_root_option(CLI::App& app, std::string& root) {
  app.add_option("--root", root,
                 "Read /proc and the cgroup files under DIR instead of / (a fixture tree laid out like /)")
      ->type_name("DIR");
}

platform_sampler make_sampler(const std::string& root, bool watching) {
  if (root.empty()) throw usage_error("--root: \"\": empty directory");
  if (::access(root.c_str(), R_OK | X_OK) != 0) {
    throw usage_error(describe_bad_value("--root", root, "not a readable directory"));
  }
  pnmem::linux_sampler_options o;
  o.root = root;
  if (!watching) o.psi_triggers.clear();
  return platform_sampler{o};
}

pnmem::mem_state sample_box(const std::string& root, const pnmem::policy& p) {
  platform_sampler sampler = make_sampler(root, false);
  pnmem::mem_state s;
  pnmem::assign_host(s, sampler.sample());
  s.sample_time_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  s.seq = 1;
  return pnmem::with_derived_level(s, p);
}

}  // namespace pnmem_cli
