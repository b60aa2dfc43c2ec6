// tools/pnmem/model_command.hpp - `pnmem model`: a model description, from the files engines have.
//
//   pnmem model (--from-hf-config FILE|DIR | --from-gguf FILE | --model FILE |
//                --layers L --kv-heads H --head-dim D [--kv-dtype FORMAT])
//               [--kv-bytes-per-token B] [--state-bytes-per-seq B]
//               [--activation-anchors T:B,... | --activation-coefficients F,P,Q]
//               [--name TEXT] [--summary]
//
// Prints the description as pnmem's model JSON (pnmem/model_files/model_json.hpp, versioned) on
// stdout, the same bytes with or without --json, so that
//   pnmem model --from-hf-config config.json > m.json && pnmem admit --model m.json ...
// works. Exactly one source: a Hugging Face config.json (what vLLM and SGLang load), a GGUF file's
// metadata (what llama.cpp loads), a description to re-read, validate and re-print, or a shape; the
// overrides (model_options.hpp) apply on top of it, or on the seed's model when they are all that is
// given. --summary adds a readable block on stderr (stdout stays the JSON): KV bytes per token per
// format (full and sliding layers, the window), the normal and compact formats, the state, the
// activation model and the host cost at 1k, 8k, 32k and 128k tokens in the normal format.
//
// A file that cannot be read or parsed is one line naming the flag, the file and the reader's
// message, exit 2.
#pragma once

#include "subcommand.hpp"

namespace pnmem_cli {
std::unique_ptr<subcommand> make_model_command();
}  // namespace pnmem_cli
