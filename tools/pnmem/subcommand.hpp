// tools/pnmem/subcommand.hpp - what every `pnmem <name>` subcommand provides.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "pnmem/policy.hpp"

namespace CLI {
class App;
}

namespace pnmem_cli {

// One answer, in both renderings; main prints the one asked for.
struct command_output {
  nlohmann::ordered_json json;  // --json: one object
  std::string text;     // a few readable lines, each ending in '\n'
};

class subcommand {
 public:
  subcommand() = default;
  subcommand(const subcommand&) = delete;
  subcommand& operator=(const subcommand&) = delete;
  virtual ~subcommand() = default;

  // Registers the subcommand and its options on `parent`; the options bind to
  // this object, which must outlive parsing and run().
  virtual void add_to(CLI::App& parent) = 0;

  // True when the command line selected this subcommand.
  bool selected() const;

  // Validates the option text (throwing usage_error) and answers. `env_policy`
  // is the policy from the PN_* variables; the subcommand's flags override it.
  virtual command_output run(const pnmem::policy& env_policy) const = 0;

  // A streaming subcommand (`pnmem watch`) prints as it goes instead of returning
  // one answer: main calls stream() instead of run() and exits with its status.
  virtual bool streaming() const { return false; }
  virtual int stream(const pnmem::policy& /*env_policy*/, bool /*json*/) const { return 0; }

 protected:
  CLI::App* app_ = nullptr;  // set by add_to()
};

}  // namespace pnmem_cli
