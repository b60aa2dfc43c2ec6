// tools/pnmem/main.cpp - the `pnmem` command-line tool: what-if questions to the policy.
//
//   pnmem [--json] <subcommand> [options]   (pnmem --help, pnmem <subcommand> --help)
//
// The subcommands are listed once, in commands() below; `sample`, `watch`,
// `metrics` and `probe` read this box and exist where pnmem has a platform
// sampler (pnmem/platform_sampler.hpp).
//
// Exit status: 0 answered (whatever the verdict), 2 bad argument (one line on
// stderr, nothing on stdout), 1 answered but not an all-clear (probe not ready, calibrate
// over its margin, a box whose memory could not be read) or anything else (help_footer says
// it to the user). PN_* variables set the policy,
// the watcher's cadence and the PSI source; a bad one is a warning line on stderr and its
// default stays.

#include "cli11_warnings.hpp"  // first: see there

#include <cstddef>
#include <exception>
#include <iterator>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "admit_command.hpp"
#include "calibrate_command.hpp"
#include "diagnostics.hpp"
#include "level_command.hpp"
#include "load_command.hpp"
#include "model_command.hpp"
#include "parse_error_words.hpp"
#include "plan_command.hpp"
#include "pnmem/config.hpp"
#include "pnmem/platform_sampler.hpp"
#include "pnmem/version.hpp"
#include "usage_error.hpp"
#if PNMEM_HAS_PLATFORM_SAMPLER
#include "metrics_command.hpp"
#include "probe_command.hpp"
#include "sample_command.hpp"
#include "watch_command.hpp"
#endif
#if defined(__linux__)
#include "ledger_command.hpp"
#endif

namespace {

using pnmem_cli::subcommand;

// Every subcommand, in the order --help lists them.
std::vector<std::unique_ptr<subcommand>> commands() {
  std::vector<std::unique_ptr<subcommand>> c;
  c.push_back(pnmem_cli::make_level_command());
  c.push_back(pnmem_cli::make_plan_command());
  c.push_back(pnmem_cli::make_admit_command());
  c.push_back(pnmem_cli::make_load_command());
  c.push_back(pnmem_cli::make_model_command());
  c.push_back(pnmem_cli::make_calibrate_command());
#if PNMEM_HAS_PLATFORM_SAMPLER
  c.push_back(pnmem_cli::make_sample_command());
  c.push_back(pnmem_cli::make_watch_command());
  c.push_back(pnmem_cli::make_metrics_command());
  c.push_back(pnmem_cli::make_probe_command());
#endif
#if defined(__linux__)
  c.push_back(pnmem_cli::make_ledger_command());
#endif
  return c;
}

// "level, plan, admit or load": the names, as a sentence lists them.
std::string name_list(const std::vector<std::unique_ptr<subcommand>>& cs) {
  std::string out;
  for (std::size_t i = 0; i < cs.size(); ++i) {
    if (i > 0) out += i + 1 == cs.size() ? " or " : ", ";
    out += cs[i]->name();
  }
  return out;
}

// `text` with each space that would carry a line past `width` columns made a line break.
std::string wrap(const std::string& text, std::size_t width) {
  std::string out;
  std::size_t line_start = 0;
  std::size_t last_space = std::string::npos;
  for (const char c : text) {
    if (c == ' ') last_space = out.size();
    out += c;
    if (out.size() - line_start > width && last_space != std::string::npos && last_space >= line_start) {
      out[last_space] = '\n';
      line_start = last_space + 1;
    }
  }
  return out;
}

// The footer of every --help: the PN_* variables (config.hpp's table), then the rules.
std::string help_footer() {
  std::string policy = "Policy:";
  const std::size_t n = std::size(pnmem::env_variables);
  for (std::size_t i = 0; i < n; ++i) {
    policy += ' ';
    policy += pnmem::env_variables[i].name;
    policy += i + 1 < n ? "," : ";";
  }
  policy += " each subcommand's flags override them. Bytes: 1073741824, 512KiB, 1.5GiB.";
  return wrap(policy, 95) +
         "\n--json may come before or after the subcommand.\n"
         "Exit status: 0 answered, whatever the verdict; 1 answered but not all clear (probe: not\n"
         "ready; calibrate: a fit above --max-margin; sample, metrics, watch, probe: this box's memory\n"
         "could not be read), or another failure said on stderr; 2 a bad argument (one line on\n"
         "stderr, nothing on stdout).";
}

int run(int argc, char** argv) {
  pnmem_cli::keep_stdout_errors();
  // The PN_* variables, as every library default reads them (once, config.hpp), their errors
  // taken before anything could report them: the tool prints them itself, as warnings, once it
  // has an answer (none with --help, none beside a bad argument).
  const pnmem::env_settings_config env{pnmem::process_env_config().value, pnmem::take_env_errors()};

  CLI::App app{"pnmem: memory-pressure what-if questions (level, ladder plan, request and model-load admission), "
               "for the seed's model or yours (pnmem model)",
               "pnmem"};
  app.set_help_all_flag("--help-all", "Print this help and every subcommand's options, then exit");
  app.set_version_flag("--version", pnmem::version_string);
  bool json = false;
  app.add_flag("--json", json, "Machine-readable output: one JSON object on stdout");
  app.require_subcommand(0, 1);
  // Options a subcommand does not know (--json after it) are offered to pnmem itself.
  app.fallthrough();
  app.footer(help_footer());

  const std::vector<std::unique_ptr<subcommand>> cs = commands();
  for (const auto& c : cs) c->add_to(app);

  if (const std::string problem = pnmem_cli::lone_flag_problem(argc, argv); !problem.empty()) {
    pnmem_cli::print_error(problem);
    return pnmem_cli::exit_usage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return pnmem_cli::stdout_ok() ? 0 : pnmem_cli::exit_failure;
  } catch (const CLI::CallForAllHelp&) {
    std::cout << app.help("", CLI::AppFormatMode::All);
    return pnmem_cli::stdout_ok() ? 0 : pnmem_cli::exit_failure;
  } catch (const CLI::CallForVersion& e) {
    std::cout << e.what() << '\n';
    return pnmem_cli::stdout_ok() ? 0 : pnmem_cli::exit_failure;
  } catch (const CLI::ParseError& e) {
    pnmem_cli::print_error(pnmem_cli::parse_error_words(e, app));
    return pnmem_cli::exit_usage;
  }

  const subcommand* chosen = nullptr;
  for (const auto& c : cs) {
    if (c->selected()) chosen = c.get();
  }
  if (chosen == nullptr) {
    pnmem_cli::print_error("no subcommand given (use " + name_list(cs) + "; see pnmem --help)");
    return pnmem_cli::exit_usage;
  }

  try {
    const int status = chosen->run(env, json);
    // An answer that did not reach standard output is a failure, whatever it said.
    return pnmem_cli::stdout_ok() ? status : pnmem_cli::exit_failure;
  } catch (const pnmem_cli::usage_error& e) {
    pnmem_cli::print_error(e.what());
    return pnmem_cli::exit_usage;
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    pnmem_cli::print_error(std::string("internal: ") + e.what());
  } catch (...) {
    pnmem_cli::print_error("internal: unknown exception");
  }
  return pnmem_cli::exit_failure;
}
