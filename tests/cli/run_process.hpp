// tests/cli/run_process.hpp - run a program, capture stdout, stderr and exit status apart.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace pnmem::test {

struct process_result {
  int exit_code = -1;    // the exit status, or -1 if it did not exit normally
  int term_signal = 0;   // the signal that ended it, 0 if it exited
  std::string out;       // everything written to stdout
  std::string err;       // everything written to stderr
};

// Runs `path` with `args` (argv[1..]) and the parent's environment minus every
// PN_* variable, plus `env`. stdin is /dev/null. Throws std::runtime_error if
// the program cannot be started.
process_result run_process(const std::string& path, const std::vector<std::string>& args,
                           const std::map<std::string, std::string>& env = {});

// `text` split at '\n'; a final newline does not start another line.
std::vector<std::string> lines_of(const std::string& text);

}  // namespace pnmem::test
