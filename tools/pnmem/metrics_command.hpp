// tools/pnmem/metrics_command.hpp - `pnmem metrics` and `pnmem probe`: this box for monitors and orchestrators.
//
//   pnmem metrics [--root DIR]
//       one sample of the box as Prometheus text exposition 0.0.4 (no engine
//       counters: a one-shot sample has none); --json wraps it in an object.
//   pnmem probe [--root DIR] [--max-level LEVEL]
//       a readiness probe: exit 0 while the box's level is at or below LEVEL
//       (default tight), 1 above it, 2 on a bad argument; one line on stdout.
#pragma once

#include <string>

#include "subcommand.hpp"

namespace pnmem_cli {

class metrics_command final : public subcommand {
 public:
  void add_to(CLI::App& parent) override;
  command_output run(const pnmem::policy& env_policy) const override;

 private:
  std::string root_ = "/";
};

class probe_command final : public subcommand {
 public:
  void add_to(CLI::App& parent) override;
  command_output run(const pnmem::policy& env_policy) const override;
  // Streaming only for its exit status: 1 when the box is above --max-level.
  bool streaming() const override { return true; }
  int stream(const pnmem::policy& env_policy, bool json) const override;

 private:
  std::string root_ = "/";
  std::string max_level_ = "tight";
};

}  // namespace pnmem_cli
