// tools/pnmem/subcommand.hpp - what every `pnmem <name>` subcommand provides.
//
// Two kinds, each with the one method its kind means:
//   one_shot_command   answer(): returns one answer; the base prints it as text
//                      or as one JSON object (level, plan, admit, load, sample,
//                      metrics, probe)
//   streaming_command  stream(): prints as it goes until stopped, and returns
//                      the exit status (watch)
// A command is built by its make_*_command() (one header and source per command);
// main registers them all and runs the one the command line selected.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "pnmem/config.hpp"
#include "pnmem/policy.hpp"

namespace CLI {
class App;
}

namespace pnmem_cli {

class subcommand {
 public:
  subcommand(std::string_view name, std::string_view description) : name_(name), description_(description) {}
  subcommand(const subcommand&) = delete;
  subcommand& operator=(const subcommand&) = delete;
  virtual ~subcommand() = default;

  // `pnmem <name>`: the one place a subcommand's name is written.
  std::string_view name() const { return name_; }

  // Registers the subcommand and its options on `parent`; the options bind to
  // this object, which must outlive parsing and run().
  void add_to(CLI::App& parent);

  // True when the command line selected this subcommand.
  bool selected() const;

  // Validates the option text (throwing usage_error before anything is printed),
  // answers, prints and returns the exit status. `env` is the settings from the PN_*
  // variables (the policy, the watcher's cadence, the PSI source) with their errors
  // (printed as warnings); the flags override them.
  virtual int run(const pnmem::env_settings_config& env, bool json) const = 0;

 protected:
  // Registers the subcommand's own options on `app` (the subcommand's App).
  virtual void add_options(CLI::App& app) = 0;

 private:
  std::string_view name_;
  std::string_view description_;
  CLI::App* app_ = nullptr;  // set by add_to()
};

// One answer, in both renderings; the command prints the one asked for.
struct command_output {
  nlohmann::ordered_json json;  // --json: one object
  std::string text;             // a few readable lines, each ending in '\n'
  int exit_status = 0;          // 0 answered; 1 the box could not be read (sample, metrics), probe not ready
  bool json_one_line = false;   // the object on one line (probe: one line on stdout, either way)
  std::vector<std::string> warnings;  // each a "pnmem: warning: ..." line on stderr, after the answer
};

class one_shot_command : public subcommand {
 public:
  using subcommand::subcommand;
  int run(const pnmem::env_settings_config& env, bool json) const final;

 protected:
  // Throws usage_error on a bad option value.
  virtual command_output answer(const pnmem::policy& env_policy) const = 0;
};

class streaming_command : public subcommand {
 public:
  using subcommand::subcommand;
  int run(const pnmem::env_settings_config& env, bool json) const final;

 protected:
  // Runs until stopped (a signal, a count), printing as it goes; the exit status.
  // Throws usage_error on a bad option value before it prints anything.
  virtual int stream(const pnmem::env_settings& env, bool json) const = 0;
};

}  // namespace pnmem_cli
