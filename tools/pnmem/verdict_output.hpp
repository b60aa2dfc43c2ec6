// tools/pnmem/verdict_output.hpp - an admission verdict as JSON and as text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "pnmem/admission.hpp"

namespace pnmem_cli {

// A die index, or null for pnmem::no_die.
nlohmann::ordered_json die_json(int die);

// {"verdict", "reason", "die", "need_bytes", "limit_bytes"}.
nlohmann::ordered_json verdict_json(const pnmem::admit_result& r);

// "<label>: admit (fits) on die 0: need 20.00 GiB, limit 30.00 GiB"
std::string verdict_line(std::string_view label, const pnmem::admit_result& r);

}  // namespace pnmem_cli
