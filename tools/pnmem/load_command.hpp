// tools/pnmem/load_command.hpp - `pnmem load`: may this model upload start?
//
//   pnmem load --weights B (--kv-max-ctx B | --ctx N [--sequences S] [--kv FORMAT] [model flags])
//              [--die FREE:BUDGET[:USED]]... [--host-total B --host-avail B]
//              [--die-reserve B] [--load-spike B] [--host-reserve B]
//
// The KV at the maximum context is given (--kv-max-ctx) or computed with pnmem::load_spec_for
// from the model (model_options.hpp; the seed's without model flags): S sequences of N tokens in
// FORMAT (default the model's normal format), each with its fixed state. With --ctx the JSON gains
// ctx_tokens, sequences, kv and a "model" object, and the text a kv_max_ctx and a model line.
//
// Checks what is described: the dies (--die), the host (--host-total and
// --host-avail), or both; describing neither is a usage error. Three verdicts:
//   model_load  pnmem::admit_model_load: the whole model on the roomiest die;
//               null when no die is described
//   per_die     pnmem::admit_model_load_die for each die, the weights and the KV
//               split evenly over the given dies (slices rounded up)
//   load_spike  pnmem::admit_load_spike: the host burst of the upload; null when
//               the host is not described
#pragma once

#include "subcommand.hpp"

namespace pnmem_cli {
std::unique_ptr<subcommand> make_load_command();
}  // namespace pnmem_cli
