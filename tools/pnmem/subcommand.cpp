// tools/pnmem/subcommand.cpp
#include "subcommand.hpp"

#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "diagnostics.hpp"

namespace pnmem_cli {

void subcommand::add_to(CLI::App& parent) {
  app_ = parent.add_subcommand(std::string(name_), std::string(description_));
  add_options(*app_);
}

bool subcommand::selected() const { return app_ != nullptr && app_->parsed(); }

int one_shot_command::run(const pnmem::env_settings_config& env, bool json) const {
  // Answer first: a bad argument is the one line on stderr, with no warning beside it.
  const command_output out = answer(env.value.policy);
  print_warnings(env.errors);
  if (json) {
    std::cout << out.json.dump(out.json_one_line ? -1 : 2) << '\n';
  } else {
    std::cout << out.text;
  }
  std::cout.flush();
  for (const std::string& w : out.warnings) std::cerr << "pnmem: warning: " << one_line(w) << '\n';
  return std::cout ? out.exit_status : exit_failure;
}

int streaming_command::run(const pnmem::env_settings_config& env, bool json) const {
  // Warnings first: the stream prints until it is stopped.
  print_warnings(env.errors);
  return stream(env.value, json);
}

}  // namespace pnmem_cli
