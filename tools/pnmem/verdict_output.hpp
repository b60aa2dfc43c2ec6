// tools/pnmem/verdict_output.hpp - an admission verdict as JSON and as text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "pnmem/admission.hpp"
#include "pnmem/engine/admit.hpp"

namespace pnmem_cli {

// A die index, or null for pnmem::no_die.
nlohmann::ordered_json die_json(int die);

// {"verdict", "reason", "die", "need_bytes", "limit_bytes"}.
nlohmann::ordered_json verdict_json(const pnmem::admit_result& r);

// "<label>: cap (host_budget): 4962 tokens fit: the prompt needs 7.06 GiB (7580934144 B), the host has ...":
// the verdict, its reason, and pnmem_explain's words for this kind of answer (engine/explain.hpp).
std::string verdict_line(std::string_view label, const pnmem::admit_result& r, pnmem::answer_kind kind);

// The same for a request, whose windows the words name (a prompt capped to the model's window, or to the
// ladder's prefill window below it).
std::string verdict_line(std::string_view label, const pnmem::admit_result& r, const pnmem::request_spec& rq);

}  // namespace pnmem_cli
