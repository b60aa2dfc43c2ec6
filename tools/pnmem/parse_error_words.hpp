// tools/pnmem/parse_error_words.hpp - CLI11's parse errors in pnmem's words.
//
// CLI11 words its errors for its own sake ("--max-level: At Most 1 required but received 2",
// "The following arguments were not expected: x ok": the extras listed last first, "file is
// required"). The tool says the same things the way its other diagnostics do: the flag first,
// then what is wrong and what to do.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace pnmem_cli {

// The one-line diagnostic for `e`, thrown by app.parse(); `app` is the tool's, as parse left it
// (it knows which arguments it could not place, in the order given).
std::string parse_error_words(const CLI::ParseError& e, const CLI::App& app);

// Arguments that must come alone: "--version extra" is refused rather than the extra ignored.
// Empty when argv is fine, else the diagnostic.
std::string lone_flag_problem(int argc, const char* const* argv);

}  // namespace pnmem_cli
