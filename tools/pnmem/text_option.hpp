// tools/pnmem/text_option.hpp - an option kept as the text given, parsed by the command.
//
// Values are parsed after CLI11 is done (arg_parsers.hpp), so every bad value
// gets the same one-line diagnostic naming the flag; an option whose absence
// matters is held in a std::optional.
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace pnmem_cli {

// --name TEXT: `value` holds the text once the option is given, and stays empty otherwise.
inline CLI::Option* add_text_option(CLI::App& app, const std::string& name, std::optional<std::string>& value,
                                    const std::string& description) {
  return app.add_option_function<std::string>(name, [&value](const std::string& text) { value = text; },
                                              description);
}

}  // namespace pnmem_cli
