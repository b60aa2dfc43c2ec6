// tools/pnmem/sample_command.cpp
#include "sample_command.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <ctime>
#include <iostream>
#include <mutex>
#include <string>

#include <CLI/CLI.hpp>

#include "arg_parsers.hpp"
#include "box_sample.hpp"
#include "pnmem/level.hpp"
#include "pnmem/linux/linux_sampler.hpp"
#include "pnmem/watcher.hpp"
#include "state_output.hpp"
#include "usage_error.hpp"

namespace pnmem_cli {

namespace {

std::string clock_time() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::localtime_r(&now, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%H:%M:%S", &tm);
  return buf;
}

}  // namespace

// --- sample --------------------------------------------------------------------

void sample_command::add_to(CLI::App& parent) {
  app_ = parent.add_subcommand("sample", "One snapshot of this box's host memory, PSI and cgroup, with provenance");
  add_root_option(*app_, root_);
}


command_output sample_command::run(const pnmem::policy& env_policy) const {
  const pnmem::mem_state s = sample_box(root_, env_policy);
  return command_output{state_json(s, env_policy), state_text(s, env_policy)};
}

// --- watch ---------------------------------------------------------------------

void watch_command::add_to(CLI::App& parent) {
  app_ = parent.add_subcommand("watch", "Run the watcher: level changes and a live line (JSON lines with --json)");
  add_root_option(*app_, root_);
  app_->add_option("--interval", interval_, "Poll interval at OK, ms (default 250)")->type_name("MS");
  app_->add_option("--pressure-interval", pressure_interval_, "Poll interval at WATCH or worse, ms (default 100)")
      ->type_name("MS");
  app_->add_option("--dwell", dwell_, "Step a level down only after it stayed lower this long, ms (default 0)")
      ->type_name("MS");
  app_->add_option("--count", count_, "Stop after N sample lines (default 0: until SIGINT/SIGTERM)")->type_name("N");
}


command_output watch_command::run(const pnmem::policy&) const { return {}; }

int watch_command::stream(const pnmem::policy& env_policy, bool json) const {
  pnmem::watcher_options o;
  o.poll_interval = std::chrono::milliseconds(parse_int_arg("--interval", interval_, 1));
  o.pressure_poll_interval = std::chrono::milliseconds(parse_int_arg("--pressure-interval", pressure_interval_, 1));
  o.step_down_dwell = std::chrono::milliseconds(parse_int_arg("--dwell", dwell_, 0));
  o.policy = env_policy;
  const int count = parse_int_arg("--count", count_, 0);
  platform_sampler sampler = make_sampler(root_, true);

  // SIGINT/SIGTERM are taken synchronously by the main thread (sigtimedwait), so
  // block them before the watcher's thread starts: it inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  const bool live = !json && ::isatty(STDOUT_FILENO) == 1;
  std::mutex out_mu;
  pnmem::watcher<platform_sampler> w{std::move(sampler), o};
  w.subscribe([&](const pnmem::level_change& c) {
    std::lock_guard<std::mutex> lk(out_mu);
    if (json) {
      nlohmann::ordered_json j;
      j["event"] = "level_change";
      j["from"] = std::string(pnmem::to_string(c.from));
      j["to"] = std::string(pnmem::to_string(c.to));
      j["state"] = state_json(c.state, o.policy);
      std::cout << j.dump() << '\n' << std::flush;
    } else {
      std::cout << (live ? "\r\033[K" : "") << clock_time() << " level " << pnmem::to_string(c.from) << " -> "
                << pnmem::to_string(c.to) << ": " << state_line(c.state) << '\n'
                << std::flush;
    }
  });
  if (!w.start()) {
    std::cerr << "pnmem: error: could not start the watcher thread\n";
    return 1;
  }

  int printed = 0;
  std::uint64_t last_seq = 0;
  const auto interval = o.poll_interval;
  for (;;) {
    const pnmem::mem_state s = w.read();
    if (s.seq != last_seq) {
      last_seq = s.seq;
      std::lock_guard<std::mutex> lk(out_mu);
      if (json) {
        nlohmann::ordered_json j;
        j["event"] = "sample";
        j["state"] = state_json(s, o.policy);
        std::cout << j.dump() << '\n';
      } else if (live) {
        std::cout << "\r\033[K" << state_line(s);
      } else {
        std::cout << clock_time() << ' ' << state_line(s) << '\n';
      }
      std::cout << std::flush;
      if (count > 0 && ++printed >= count) break;
    }
    const auto secs = std::chrono::duration_cast<std::chrono::seconds>(interval);
    timespec ts{static_cast<std::time_t>(secs.count()),
                static_cast<long>(std::chrono::duration_cast<std::chrono::nanoseconds>(interval - secs).count())};
    const int sig = ::sigtimedwait(&stop_signals, nullptr, &ts);
    if (sig == SIGINT || sig == SIGTERM) break;
    if (sig < 0 && errno != EAGAIN && errno != EINTR) break;
  }
  w.stop();
  if (live) std::cout << '\n';
  std::cout << std::flush;
  return std::cout ? 0 : 1;
}

}  // namespace pnmem_cli
