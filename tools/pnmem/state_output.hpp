// tools/pnmem/state_output.hpp - a live snapshot as JSON and as text.
//
// Shared by `pnmem sample` and `pnmem watch`: JSON field
// names are the mem_state field names, plus "provenance".
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "pnmem/mem_state.hpp"
#include "pnmem/policy.hpp"

namespace pnmem_cli {

// The snapshot's level as an operator must read it: its name, except where the host's memory was not
// read (every admission fails open on it): "unknown" when nothing else raised it, "at least <level>"
// when PSI or a die did. Nothing read never reads as "ok".
std::string level_word(const pnmem::mem_state& s);

// Every mem_state field (die arrays cut to n_dies) and the provenance; "level" is level_word's (and
// "sampled" says whether the host was read).
nlohmann::ordered_json state_json(const pnmem::mem_state& s, const pnmem::policy& p);

// A few readable lines: level, host, PSI, cgroup, dies, sources.
std::string state_text(const pnmem::mem_state& s, const pnmem::policy& p);

// One compact line for a live display (no newline).
std::string state_line(const pnmem::mem_state& s);

}  // namespace pnmem_cli
