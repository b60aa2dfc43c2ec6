// tools/pnmem/box_sample.hpp - reading this box: what `sample`, `watch`, `metrics` and `probe` share.
#pragma once

#include <string>

#include "pnmem/linux/linux_sampler.hpp"
#include "pnmem/mem_state.hpp"
#include "pnmem/policy.hpp"

namespace CLI {
class App;
}

namespace pnmem_cli {

using platform_sampler = pnmem::linux_sampler;

// Registers --root DIR (bound to `root`) on a subcommand.
void add_root_option(CLI::App& app, std::string& root);

// The platform sampler reading under `root`; throws usage_error when `root` is not
// a readable directory. `watching`: arm PSI triggers (the watcher waits on them);
// a one-shot sample has nothing to wait for, so it does not write triggers into the kernel.
platform_sampler make_sampler(const std::string& root, bool watching);

// One snapshot of the box under `root`: sampled now, seq 1, level derived under `p`.
pnmem::mem_state sample_box(const std::string& root, const pnmem::policy& p);

}  // namespace pnmem_cli
