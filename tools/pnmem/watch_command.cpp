// tools/pnmem/watch_command.cpp - `pnmem watch`.
#include "watch_command.hpp"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <ctime>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include <CLI/CLI.hpp>

#include "arg_parsers.hpp"
#include "box_sample.hpp"
#include "diagnostics.hpp"
#include "pnmem/engine/metrics.hpp"
#include "pnmem/level.hpp"
#include "pnmem/watcher.hpp"
#include "policy_options.hpp"
#include "state_output.hpp"
#include "textfile_writer.hpp"
#if defined(__linux__)
#include "ledger_command.hpp"
#endif
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


// The stop signal caught, 0 until one is.
volatile std::sig_atomic_t stop_signal = 0;
void on_stop_signal(int sig) { stop_signal = sig; }

// --count 0: print until SIGINT/SIGTERM.
constexpr int until_stopped = 0;

// --textfile-interval 0: write the textfile after every sample.
constexpr int every_sample = 0;

// `--textfile`: the exposition of the latest sample, replaced whole (textfile_writer.hpp)
// after the first sample, then after the first sample at least `interval` after the
// previous write. A failed write is one warning line (another only when the failure
// changes, and one line when writing works again); sampling goes on and the file
// keeps its last complete text.
class textfile_output {
 public:
  textfile_output(textfile_writer writer, std::chrono::milliseconds interval)
      : writer_(std::move(writer)), interval_(interval) {}

  void sample(const pnmem::mem_state& s, const pnmem::policy& p) {
    const auto now = std::chrono::steady_clock::now();
    if (written_once_ && now - last_write_ < interval_) return;
    last_write_ = now;
    written_once_ = true;
    std::string text = pnmem::prometheus_text(s, nullptr, p);
#if defined(__linux__)
    text += box_ledger_metrics(s);  // as `pnmem metrics` prints it
#endif
    const std::string err = writer_.write(text);
    if (err.empty()) {
      if (!last_error_.empty()) std::cerr << "pnmem: --textfile: writing " << one_line(writer_.target()) << " again\n";
    } else if (err != last_error_) {
      std::cerr << "pnmem: warning: --textfile: " << one_line(err) << " (still sampling; " << one_line(writer_.target())
                << " keeps its last complete sample)\n";
    }
    last_error_ = err;
  }

 private:
  textfile_writer writer_;
  std::chrono::milliseconds interval_;
  std::chrono::steady_clock::time_point last_write_{};
  bool written_once_ = false;
  std::string last_error_;  // the last write's failure, empty after a success
};

class watch_command final : public streaming_command {
 public:
  watch_command()
      : streaming_command("watch",
                          "Run the watcher: level changes and a live line (JSON lines with --json); --textfile also "
                          "keeps a Prometheus file for node_exporter") {}

 private:
  void add_options(CLI::App& app) override;
  int stream(const pnmem::env_settings& env, bool json) const override;

  box_options box_;
  std::string count_ = std::to_string(until_stopped);
  std::string textfile_;
  CLI::Option* textfile_opt_ = nullptr;
  std::string textfile_interval_ = std::to_string(every_sample);
  CLI::Option* textfile_interval_opt_ = nullptr;
  policy_options policy_;
};

void watch_command::add_options(CLI::App& app) {
  box_.add_to(app);
  app.add_option("--count", count_, "Stop after N sample lines (default " + count_ + ": until SIGINT/SIGTERM)")
      ->type_name("N");
  textfile_opt_ =
      app.add_option("--textfile", textfile_,
                     "Also keep FILE (e.g. /var/lib/prometheus/node-exporter/pnmem.prom) holding the latest sample as "
                     "Prometheus text for node_exporter's textfile collector, replaced atomically (temp file, fsync, "
                     "rename). Its directory must exist; a later failed write is a warning and watch goes on")
          ->type_name("FILE");
  textfile_interval_opt_ =
      app.add_option("--textfile-interval", textfile_interval_,
                     "With --textfile: write it at most every MS ms (default " + textfile_interval_ +
                         ": after every sample)")
          ->type_name("MS");
  policy_.add_to(app, level_flags | watcher_flags);  // --interval, --pressure-interval, --dwell: as PN_*
}

int watch_command::stream(const pnmem::env_settings& env, bool json) const {
  const pnmem::watcher_options o = pnmem::to_watcher_options(policy_.apply(env));
  const int count = parse_int_arg("--count", count_, 0);
  const int textfile_interval = parse_int_arg("--textfile-interval", textfile_interval_, every_sample);
  std::optional<textfile_output> textfile;
  if (textfile_opt_ != nullptr && textfile_opt_->count() > 0) {
    textfile_writer writer{textfile_};
    if (const std::string problem = writer.check(); !problem.empty()) {
      throw usage_error(describe_bad_value("--textfile", one_line(textfile_), problem));
    }
    textfile.emplace(std::move(writer), std::chrono::milliseconds(textfile_interval));
    if (!textfile_.ends_with(".prom")) {
      std::cerr << "pnmem: warning: --textfile: \"" << one_line(textfile_)
                << "\": node_exporter's textfile collector reads only *.prom files\n";
    }
  } else if (textfile_interval_opt_ != nullptr && textfile_interval_opt_->count() > 0) {
    throw usage_error(describe_bad_value("--textfile-interval", textfile_interval_, "needs --textfile"));
  }
  pnmem::platform_sampler sampler = box_.make_sampler(true);

  // SIGINT/SIGTERM stop the loop below. Blocked while the watcher's thread starts
  // (it inherits the mask, so they always reach this thread), then caught here:
  // one cuts the sleep between lines short (nanosleep is never restarted; other
  // calls are, so a write to stdout is not failed by it). POSIX only, so the
  // command builds wherever a platform sampler does.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  const bool live = !json && ::isatty(STDOUT_FILENO) == 1;
  std::mutex out_mu;
  pnmem::watcher<pnmem::platform_sampler> w{std::move(sampler), o};
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
  struct sigaction on_stop {};
  on_stop.sa_handler = on_stop_signal;
  on_stop.sa_flags = SA_RESTART;
  sigemptyset(&on_stop.sa_mask);
  ::sigaction(SIGINT, &on_stop, nullptr);
  ::sigaction(SIGTERM, &on_stop, nullptr);
  pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);

  int printed = 0;
  std::uint64_t last_seq = 0;
  const auto interval = o.poll_interval;
  // The host's memory unread: one warning when it starts (the lines say "unknown"), one line when it is
  // read again. A run that never read it exits 1, as sample does.
  bool unread = false;
  bool ever_read = false;
  for (;;) {
    const pnmem::mem_state s = w.read();
    if (s.seq != last_seq) {
      last_seq = s.seq;
      if (const std::string warning = box_.unsampled_warning(s); !warning.empty() && !unread) {
        std::cerr << "pnmem: warning: " << one_line(warning) << '\n' << std::flush;
        unread = true;
      } else if (warning.empty()) {
        if (unread) std::cerr << "pnmem: the host's memory is read again\n" << std::flush;
        unread = false;
        ever_read = true;
      }
      // A stop signal meanwhile does not cut a write short (SA_RESTART; the loop checks after).
      if (textfile) textfile->sample(s, o.policy);
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
      if (!std::cout) break;  // the reader is gone or the disk is full: main reports it, exit 1
      if (count != until_stopped && ++printed >= count) break;
    }
    const auto secs = std::chrono::duration_cast<std::chrono::seconds>(interval);
    timespec ts{static_cast<std::time_t>(secs.count()),
                static_cast<long>(std::chrono::duration_cast<std::chrono::nanoseconds>(interval - secs).count())};
    ::nanosleep(&ts, nullptr);  // cut short by a stop signal
    if (stop_signal != 0) break;
  }
  w.stop();
  if (live) std::cout << '\n';
  std::cout << std::flush;
  return std::cout && (ever_read || last_seq == 0) ? 0 : 1;
}

}  // namespace

std::unique_ptr<subcommand> make_watch_command() { return std::make_unique<watch_command>(); }

}  // namespace pnmem_cli
