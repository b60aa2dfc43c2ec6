// tools/pnmem/metrics_command.cpp - `pnmem metrics`.
#include "metrics_command.hpp"

#include <string>

#include "box_sample.hpp"
#include "pnmem/engine/metrics.hpp"
#if defined(__linux__)
#include "ledger_command.hpp"
#endif

namespace pnmem_cli {

namespace {

class metrics_command final : public box_command {
 public:
  metrics_command() : box_command("metrics", "One sample of this box as Prometheus text exposition (format 0.0.4)") {}

 private:
  command_output answer_for(const pnmem::mem_state& s, const pnmem::policy& p) const override {
    command_output out;
    out.text = pnmem::prometheus_text(s, nullptr, p);
#if defined(__linux__)
    out.text += box_ledger_metrics(s);  // the box ledger's families, when its scope has a file
#endif
    out.json["content_type"] = std::string(pnmem::prometheus_content_type);
    out.json["exposition"] = out.text;
    return out;
  }
};

}  // namespace

std::unique_ptr<subcommand> make_metrics_command() { return std::make_unique<metrics_command>(); }

}  // namespace pnmem_cli
