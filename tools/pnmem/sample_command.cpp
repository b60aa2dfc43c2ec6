// tools/pnmem/sample_command.cpp - `pnmem sample`.
#include "sample_command.hpp"

#include "box_sample.hpp"
#include "state_output.hpp"

namespace pnmem_cli {

namespace {

class sample_command final : public box_command {
 public:
  sample_command() : box_command("sample", "One snapshot of this box's host memory, PSI and cgroup, with provenance") {}

 private:
  command_output answer_for(const pnmem::mem_state& s, const pnmem::policy& p) const override {
    command_output out;
    out.json = state_json(s, p);
    out.text = state_text(s, p);
    return out;
  }
};

}  // namespace

std::unique_ptr<subcommand> make_sample_command() { return std::make_unique<sample_command>(); }

}  // namespace pnmem_cli
