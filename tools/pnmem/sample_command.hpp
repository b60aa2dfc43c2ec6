// tools/pnmem/sample_command.hpp - `pnmem sample` and `pnmem watch`: what this box sees now.
//
//   pnmem sample [--root DIR]
//       one snapshot from the platform sampler, with its provenance
//   pnmem watch [--root DIR] [--interval MS] [--pressure-interval MS] [--dwell MS] [--count N]
//       runs the watcher: level changes as they happen and a compact live line
//       (in a terminal), one line per interval otherwise; JSON lines with --json.
//       Stops on SIGINT/SIGTERM or after N lines.
#pragma once

#include <string>

#include "subcommand.hpp"

namespace pnmem_cli {

class sample_command final : public subcommand {
 public:
  void add_to(CLI::App& parent) override;
  command_output run(const pnmem::policy& env_policy) const override;

 private:
  std::string root_ = "/";
};

class watch_command final : public subcommand {
 public:
  void add_to(CLI::App& parent) override;
  command_output run(const pnmem::policy& env_policy) const override;
  bool streaming() const override { return true; }
  int stream(const pnmem::policy& env_policy, bool json) const override;

 private:
  std::string root_ = "/";
  std::string interval_ = "250";
  std::string pressure_interval_ = "100";
  std::string dwell_ = "0";
  std::string count_ = "0";
};

}  // namespace pnmem_cli
