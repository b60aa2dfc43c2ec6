// tools/pnmem/metrics_command.hpp - `pnmem metrics`: this box for monitors.
//
//   pnmem metrics [--root DIR] [--host-reserve B] [--psi-full-reject PCT]
//       one sample of the box as Prometheus text exposition 0.0.4 (no engine
//       counters: a one-shot sample has none); --json wraps it in an object.
#pragma once

#include "subcommand.hpp"

namespace pnmem_cli {
std::unique_ptr<subcommand> make_metrics_command();
}  // namespace pnmem_cli
