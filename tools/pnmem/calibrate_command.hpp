// tools/pnmem/calibrate_command.hpp - `pnmem calibrate`: an activation table from measured peaks.
//
//   pnmem calibrate FILE|- [--max-anchors N] [--objective relative|absolute] [--coefficients]
//                          [--max-margin PCT]
//
// Reads `tokens,peak_bytes` lines (pnmem/calibration.hpp's measurements file; `-` reads stdin), fits
// pnmem::calibrate_activation (or, with --coefficients, calibrate_activation_coefficients) and prints
//   - the table as --activation-anchors takes it (T:B,...; --coefficients: --activation-coefficients
//     F,P,Q) and as the "activation" object of a model description (model_files/model_json.hpp);
//   - the margin: never below a measurement, not above any by more than X % (and the largest excess in
//     bytes), each with the line it is on; what happens past the longest measured prompt;
//   - every measurement's residual (table - measured), with its line.
// --json: all of it as one object. A bad line is exit 2 with one stderr line `FILE:LINE: what`; so are
// an unreadable file and a file without measurements. --max-margin: exit 1 (after printing) when the
// table is above some measurement by more than PCT %.
#pragma once

#include "subcommand.hpp"

namespace pnmem_cli {
std::unique_ptr<subcommand> make_calibrate_command();
}  // namespace pnmem_cli
