// tools/pnmem/parse_error_words.cpp
#include "parse_error_words.hpp"

#include <cstddef>
#include <string_view>
#include <vector>

#include "arg_parsers.hpp"

namespace pnmem_cli {

namespace {

// Whether `text` starts with `prefix`; when it does, `text` is left holding what follows it.
bool strip_prefix(std::string_view& text, std::string_view prefix) {
  if (text.substr(0, prefix.size()) != prefix) return false;
  text.remove_prefix(prefix.size());
  return true;
}

// "\"a\"", "\"a\", \"b\"": arguments as the diagnostics quote them.
std::string quoted_list(const std::vector<std::string>& args) {
  std::string out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (i > 0) out += ", ";
    out += '"' + args[i] + '"';
  }
  return out;
}

// The subcommand the user chose, or nullptr.
const CLI::App* chosen_subcommand(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands()) return sub;
  return nullptr;
}

std::string help_hint(const CLI::App& app) {
  const CLI::App* sub = chosen_subcommand(app);
  return sub != nullptr ? "pnmem " + sub->get_name() + " --help" : std::string("pnmem --help");
}

// ArgumentMismatch: "NAME: At Most N required but received M", "NAME: N required TYPE missing",
// "NAME: At least N required but received M".
std::string mismatch_words(std::string_view what, const CLI::App& app) {
  const std::size_t colon = what.find(": ");
  if (colon == std::string_view::npos) return std::string(what);
  const std::string name(what.substr(0, colon));
  std::string_view rest = what.substr(colon + 2);
  if (strip_prefix(rest, "At Most ")) {
    const std::size_t sp = rest.find(' ');
    const std::string_view most = rest.substr(0, sp);
    std::string_view received = rest;
    if (const std::size_t r = rest.rfind(' '); r != std::string_view::npos) received = rest.substr(r + 1);
    if (most == "1") return name + ": given " + std::string(received) + " times; give it once";
    return name + ": at most " + std::string(most) + " values, got " + std::string(received);
  }
  if (strip_prefix(rest, "At least ")) {
    const std::size_t sp = rest.find(' ');
    return name + ": needs at least " + std::string(rest.substr(0, sp)) + " values (see " + help_hint(app) + ")";
  }
  // "1 required LEVEL missing": the flag came last, or another flag followed it.
  const std::size_t req = rest.find(" required ");
  const std::size_t missing = rest.rfind(" missing");
  if (req != std::string_view::npos && missing != std::string_view::npos && missing > req) {
    const std::string_view type = rest.substr(req + 10, missing - (req + 10));
    return name + ": needs a value (" + std::string(type) + ")";
  }
  return std::string(what);
}

}  // namespace

std::string parse_error_words(const CLI::ParseError& e, const CLI::App& app) {
  const std::string_view what = e.what();
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    const std::vector<std::string> extras = app.remaining(true);
    if (extras.empty()) return std::string(what);
    if (chosen_subcommand(app) == nullptr && extras.front().rfind("-", 0) != 0) {
      std::string names;
      const std::vector<const CLI::App*> subs = app.get_subcommands([](const CLI::App*) { return true; });
      for (std::size_t i = 0; i < subs.size(); ++i) {
        if (i > 0) names += i + 1 == subs.size() ? " or " : ", ";
        names += subs[i]->get_name();
      }
      return "\"" + extras.front() + "\": not a subcommand (use " + names + "; see pnmem --help)";
    }
    return std::string(extras.size() > 1 ? "unexpected arguments " : "unexpected argument ") + quoted_list(extras) +
           " (see " + help_hint(app) + ")";
  }
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr) return mismatch_words(what, app);
  if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr) {
    // "file is required": a positional, named in lower case by CLI11; options read fine as they are.
    std::string_view name = what;
    const std::string_view tail = " is required";
    if (name.size() > tail.size() && name.substr(name.size() - tail.size()) == tail) {
      name.remove_suffix(tail.size());
      if (!name.empty() && name.front() != '-' && name.find(' ') == std::string_view::npos) {
        std::string upper(name);
        for (char& c : upper) c = c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
        return "missing " + upper + " (see " + help_hint(app) + ")";
      }
    }
  }
  return std::string(what);
}

std::string lone_flag_problem(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) != "--version") continue;
    for (int j = 1; j < argc; ++j) {
      if (j != i) return describe_bad_value("--version", argv[j], "give --version alone");
    }
  }
  return {};
}

}  // namespace pnmem_cli
