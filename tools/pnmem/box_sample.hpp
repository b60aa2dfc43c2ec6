// tools/pnmem/box_sample.hpp - reading this box: what `sample`, `watch`, `metrics` and `probe` share.
//
// The sampler is the platform's (pnmem/platform_sampler.hpp), the one choice the
// C ABI makes too; its options a command line can set are registered here.
#pragma once

#include <string>

#include "pnmem/mem_state.hpp"
#include "pnmem/platform_sampler.hpp"
#include "pnmem/policy.hpp"
#include "policy_options.hpp"
#include "subcommand.hpp"

namespace CLI {
class App;
}

namespace pnmem_cli {

class box_options {
 public:
  box_options();  // the sampler's own defaults

  // Registers the sampler's options on a subcommand: --root DIR where the
  // platform's sampler reads its files under a root (Linux).
  void add_to(CLI::App& app);

  // The platform sampler; throws usage_error when --root is not a readable
  // directory. `watching`: arm PSI triggers (the watcher waits on them); a one-shot
  // sample has nothing to wait for, so it does not write triggers into the kernel.
  pnmem::platform_sampler make_sampler(bool watching) const;

  // One snapshot of this box: sampled now, seq 1, level derived under `p`.
  pnmem::mem_state sample(const pnmem::policy& p) const;

  // When the host's memory could not be read in `s` (host_total_bytes 0: every admission would fail
  // open), what an operator reads on stderr: what was missing and where ("meminfo not found under
  // --root /tmp/x (/tmp/x/proc/meminfo)"); empty when it was read.
  std::string unsampled_warning(const pnmem::mem_state& s) const;

 private:
  std::string root_;  // --root, where the platform sampler has one
};

// A one-shot command about one snapshot of this box (sample, metrics, probe): the
// sampler's options and the level's policy flags around the command's own. A snapshot whose host
// memory could not be read is never an all-clear: the command answers (sample says "level:
// unknown", probe "not ready"), adds a warning naming what was missing, and exits 1.
class box_command : public one_shot_command {
 public:
  using one_shot_command::one_shot_command;

 protected:
  // The command's own options, registered between the sampler's and the policy's.
  virtual void add_command_options(CLI::App& /*app*/) {}
  // The answer about `s`, sampled now with its level derived under `p`.
  virtual command_output answer_for(const pnmem::mem_state& s, const pnmem::policy& p) const = 0;

 private:
  void add_options(CLI::App& app) final;
  command_output answer(const pnmem::policy& env_policy) const final;

  box_options box_;
  policy_options policy_;
};

}  // namespace pnmem_cli
