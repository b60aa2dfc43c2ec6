// tools/pnmem/main.cpp - the `pnmem` command-line tool: what-if questions to the policy.
//
//   pnmem [--json] level|plan|admit|load|sample|watch|metrics|probe [options]   (pnmem --help, pnmem <cmd> --help)
//
// Exit status: 0 answered (whatever the verdict), 2 bad argument (one line on
// stderr, nothing on stdout), 1 anything else. PN_* variables set the policy;
// a bad one is a warning line on stderr and its default stays.

// GCC 12 reports a -Wnull-dereference false positive inside libstdc++'s
// std::string when it inlines CLI11's CLI::detail::split into this file. The
// warning is issued after inlining, at a location in <string>, so it has to be
// silenced before the first include; the rest of the project keeps the flag.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic ignored "-Wnull-dereference"
#endif

#include <array>
#include <exception>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "admit_command.hpp"
#include "level_command.hpp"
#include "load_command.hpp"
#include "plan_command.hpp"
#if PNMEM_TOOL_SAMPLER
#include "metrics_command.hpp"
#include "sample_command.hpp"
#endif
#include "pnmem/config.hpp"
#include "pnmem/version.hpp"
#include "usage_error.hpp"

namespace {

constexpr int exit_failure = 1;

// Control characters (a newline inside an argument) would break the one-line rule.
std::string one_line(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u == 0x7f) ? '?' : c;
  }
  return out;
}

void print_error(std::string_view message) { std::cerr << "pnmem: error: " << one_line(message) << std::endl; }

int run(int argc, char** argv) {
  CLI::App app{"pnmem: memory-pressure what-if questions (level, ladder plan, request and model-load admission)",
               "pnmem"};
  app.set_help_all_flag("--help-all", "Print this help and every subcommand's options, then exit");
  app.set_version_flag("--version", pnmem::version_string);
  bool json = false;
  app.add_flag("--json", json, "Machine-readable output: one JSON object on stdout");
  app.require_subcommand(0, 1);
  // Options a subcommand does not know (--json after it) are offered to pnmem itself.
  app.fallthrough();
  app.footer(
      "Policy: PN_HOST_RESERVE_BYTES, PN_PSI_FULL_REJECT, PN_DIE_RESERVE_BYTES, PN_LADDER_DISABLE,\n"
      "PN_LOAD_SPIKE_BYTES; each subcommand's flags override them. Bytes: 1073741824, 512KiB, 1.5GiB.\n"
      "--json may come before or after the subcommand. Exit status: 0 answered (whatever the\n"
      "verdict), 2 bad argument, 1 other failure.");

  pnmem_cli::level_command level;
  pnmem_cli::plan_command plan;
  pnmem_cli::admit_command admit;
  pnmem_cli::load_command load;
#if PNMEM_TOOL_SAMPLER
  pnmem_cli::sample_command sample;
  pnmem_cli::watch_command watch;
  pnmem_cli::metrics_command metrics;
  pnmem_cli::probe_command probe;
  const std::array<pnmem_cli::subcommand*, 8> commands{&level, &plan, &admit, &load, &sample, &watch, &metrics, &probe};
#else
  const std::array<pnmem_cli::subcommand*, 4> commands{&level, &plan, &admit, &load};
#endif
  for (auto* c : commands) c->add_to(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::cout << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::CallForVersion& e) {
    std::cout << e.what() << '\n';
    return 0;
  } catch (const CLI::ParseError& e) {
    print_error(e.what());
    return pnmem_cli::exit_usage;
  }

  pnmem_cli::subcommand* chosen = nullptr;
  for (auto* c : commands) {
    if (c->selected()) chosen = c;
  }
  if (chosen == nullptr) {
    print_error(
        "no subcommand given (use level, plan, admit, load, sample, watch, metrics or probe; see pnmem --help)");
    return pnmem_cli::exit_usage;
  }

  const pnmem::env_config env = pnmem::policy_from_env();
  if (chosen->streaming()) {
    for (const auto& e : env.errors) std::cerr << "pnmem: warning: " << one_line(e.to_string()) << '\n';
    try {
      return chosen->stream(env.value, json);
    } catch (const pnmem_cli::usage_error& e) {
      print_error(e.what());
      return pnmem_cli::exit_usage;
    }
  }
  pnmem_cli::command_output out;
  try {
    out = chosen->run(env.value);
  } catch (const pnmem_cli::usage_error& e) {
    print_error(e.what());
    return pnmem_cli::exit_usage;
  }
  for (const auto& e : env.errors) std::cerr << "pnmem: warning: " << one_line(e.to_string()) << '\n';

  if (json) {
    std::cout << out.json.dump(2) << '\n';
  } else {
    std::cout << out.text;
  }
  std::cout.flush();
  return std::cout ? 0 : exit_failure;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    print_error(std::string("internal: ") + e.what());
  } catch (...) {
    print_error("internal: unknown exception");
  }
  return exit_failure;
}
