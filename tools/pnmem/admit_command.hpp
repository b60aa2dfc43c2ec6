// tools/pnmem/admit_command.hpp - `pnmem admit`: may this request start?
//
//   pnmem admit --host-total B --host-avail B [--psi-full PCT] [--psi-some PCT]
//               --prompt N [--kv FORMAT] [--gpu-resident] [--die FREE:BUDGET[:USED]]
//               [--max-window W] [--host-reserve B] [--psi-full-reject PCT]
//               [model flags: model_options.hpp]
//
// Answers with pnmem::admit_request for the model the flags describe (the seed's
// without them); the --die, when given, is die 0 of the state and the request's die,
// so its free VRAM also bounds the host path. need_bytes is the model's host cost of
// the prompt (or the window), fit_tokens the largest prompt whose cost fits in
// limit_bytes. With a model, the JSON gains a "model" object (model_brief_json) and
// the text a "model:" line; without one the output is what it always was. --kv
// defaults to q4, or with any model flag to the model's normal format (fp32 for the
// seed's), so a description read back with --model answers as the flags did.
#pragma once

#include "subcommand.hpp"

namespace pnmem_cli {
std::unique_ptr<subcommand> make_admit_command();
}  // namespace pnmem_cli
