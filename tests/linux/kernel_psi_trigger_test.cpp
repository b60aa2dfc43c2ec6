// psi_trigger against real kernel events (suite linux-kernel). Two scenarios:
//
//   kernel_psi_trigger_test pressure
//     Real pressure, made the reliable way: a child of this process's cgroup v1
//     memory cgroup limited to 300 MiB, a child process in it that holds
//     270 MiB of touched anonymous memory and writes and re-reads a 600 MiB
//     file. Reclaim inside the cgroup stalls it; an unprivileged
//     `some 50000 2000000` trigger on /proc/pressure/memory must fire.
//
//   kernel_psi_trigger_test watcher
//     The same pressure, watched by pnmem::watcher<linux_sampler> with a poll
//     interval of an hour: only a PSI trigger event can make it publish a second
//     snapshot, so a new snapshot within the deadline proves an event wakes the
//     watcher without waiting for the next poll.
//
//   kernel_psi_trigger_test cgroup-removed
//     A trigger on a cgroup v2 memory.pressure file, then rmdir of that cgroup:
//     the kernel reports POLLERR, wait_for() must return an event and the
//     trigger fall back to polling; the next 200 ms wait must sleep its whole
//     timeout (no busy loop on a dead descriptor).
//
// Exit 0 pass, 1 fail, 77 skip (Meson's SKIP) with one line saying why: not
// root, no PSI, no writable cgroup hierarchy with what the scenario needs.
// Everything created is removed on every path out, signals included
// (cgroup_sandbox.hpp).
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cgroup_sandbox.hpp"
#include "kernel_test_exit.hpp"
#include "pnmem/linux/linux_sampler.hpp"
#include "pnmem/linux/psi_trigger.hpp"
#include "pnmem/watcher.hpp"

namespace fs = std::filesystem;
using namespace pnmem::test;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

constexpr std::size_t MiB = 1024 * 1024;
constexpr std::size_t cgroup_limit_bytes = 300 * MiB;
constexpr std::size_t anon_bytes = 270 * MiB;
constexpr std::size_t file_bytes = 600 * MiB;
constexpr auto fire_deadline = 30s;

const char* const stale_prefix = "pnmem-psi-test-";

// ---- the process under pressure -------------------------------------------------

[[noreturn]] void child_main(pid_t parent, int go_fd, const fs::path& data_dir) {
  // Never outlive the test, even if it is SIGKILLed.
  prepare_child(parent);
  char go = 0;
  if (::read(go_fd, &go, 1) != 1) ::_exit(2);  // the parent died or failed to move us
  auto* anon = static_cast<unsigned char*>(
      ::mmap(nullptr, anon_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (anon == MAP_FAILED) ::_exit(3);
  for (std::size_t i = 0; i < anon_bytes; i += 4096) anon[i] = static_cast<unsigned char>(i >> 12);
  // Unlinked at once: the file disappears with the child, whatever kills it.
  const fs::path file = data_dir / ("pnmem-psi-test-" + std::to_string(::getpid()) + ".dat");
  const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) ::_exit(4);
  ::unlink(file.c_str());
  std::vector<char> buf(MiB, 'x');
  for (unsigned round = 0;; ++round) {
    if (::lseek(fd, 0, SEEK_SET) != 0) ::_exit(5);
    for (std::size_t done = 0; done < file_bytes; done += MiB) {
      buf[0] = static_cast<char>(round);
      if (::write(fd, buf.data(), MiB) != static_cast<ssize_t>(MiB)) ::_exit(6);
    }
    if (::lseek(fd, 0, SEEK_SET) != 0) ::_exit(5);
    for (std::size_t done = 0; done < file_bytes; done += MiB) {
      if (::read(fd, buf.data(), MiB) != static_cast<ssize_t>(MiB)) ::_exit(7);
    }
    // Keep the anonymous memory in use, so it is a working set and not just charged.
    for (std::size_t i = 0; i < anon_bytes; i += 4096) anon[i] = static_cast<unsigned char>(anon[i] + 1);
  }
}

// Where the 600 MiB file goes: on tmpfs it would be unreclaimable memory
// (no swap here), not page cache, and the cgroup would OOM instead of stalling.
std::optional<fs::path> disk_backed_dir() {
  for (const char* dir : {"/tmp", "/var/tmp", "."}) {
    struct statfs st {};
    if (::statfs(dir, &st) == 0 && st.f_type != TMPFS_MAGIC && ::access(dir, W_OK) == 0) return fs::path(dir);
  }
  return std::nullopt;
}

std::atomic<pnmem::psi_trigger*> g_trigger{nullptr};

// SIGTERM (meson's timeout) or SIGINT (the sandbox's first signal): stop
// waiting and clean up. interrupt() writes an eventfd, which is async-signal-safe.
void interrupt_trigger() noexcept {
  if (auto* t = g_trigger.load()) t->interrupt();
}

// The signal hook may use the trigger only while it exists.
struct signal_scope {
  explicit signal_scope(pnmem::psi_trigger& t) {
    g_trigger.store(&t);
    cgroup_sandbox::set_signal_hook(interrupt_trigger);
  }
  ~signal_scope() {
    cgroup_sandbox::set_signal_hook(nullptr);
    g_trigger.store(nullptr);
  }
  signal_scope(const signal_scope&) = delete;
  signal_scope& operator=(const signal_scope&) = delete;
};

std::string psi_totals() {
  const auto text = read_file("/proc/pressure/memory");
  if (!text) return "?";
  std::string out;
  for (const auto& line : split(*text, '\n')) {
    if (line.empty()) continue;
    if (!out.empty()) out += ", ";
    const auto total = line.find("total=");
    out += line.substr(0, 4) + " " + (total == std::string::npos ? "?" : line.substr(total + 6)) + " us";
  }
  return out;
}

int run_pressure(bool via_watcher) {
  if (::geteuid() != 0) return skip("not root: cannot create a memory cgroup");
  if (::access("/proc/pressure/memory", R_OK) != 0) return skip("no /proc/pressure/memory (PSI off)");
  const auto parent = own_cgroup_dir(pnmem::cgroup_mode::v1);
  if (!parent) return skip("no cgroup v1 memory controller mounted");
  const auto data_dir = disk_backed_dir();
  if (!data_dir) return skip("no disk-backed writable directory for the 600 MiB file");

  remove_stale_cgroups(*parent, stale_prefix);
  cgroup_sandbox sandbox;  // owns the cgroup and the child: both are gone when it is
  if (!sandbox.create(*parent, stale_prefix)) {
    return skip("cannot create " + sandbox.dir().string() + ": " + errno_text());
  }
  const fs::path& cg = sandbox.dir();
  if (!sandbox.set_memory_limit(cgroup_version::v1, cgroup_limit_bytes)) {
    return fail("cannot set " + (cg / "memory.limit_in_bytes").string() + ": " + errno_text());
  }

  // The trigger both scenarios arm: 50 ms of "some" stall in an unprivileged 2 s window.
  const pnmem::psi_trigger_spec spec{pnmem::psi_stall::some, 50ms, 2s};
  pnmem::psi_trigger_config config;
  config.triggers = {spec};
  pnmem::psi_trigger trigger(config);
  if (trigger.mode() != pnmem::psi_mode::trigger) return skip("no PSI trigger: " + trigger.reason());
  const signal_scope signals(trigger);
  // Drain an event the box may already have pending, so the one we see is ours.
  while (trigger.wait_for(0ns) == pnmem::wake::event) {
  }

  // The watcher scenario: a poll interval of an hour, so any second snapshot
  // within the deadline was woken by an event. Built now, started after the fork.
  pnmem::linux_sampler_options sampler_options;
  sampler_options.psi_triggers = {spec};
  pnmem::watcher_options watch_options;
  watch_options.poll_interval = std::chrono::hours(1);
  watch_options.pressure_poll_interval = std::chrono::hours(1);
  pnmem::watcher<pnmem::linux_sampler> watcher{pnmem::linux_sampler{sampler_options}, watch_options};

  int go[2];
  if (::pipe2(go, O_CLOEXEC) != 0) return fail("pipe: " + errno_text());
  const pid_t self = ::getpid();
  const pid_t child = ::fork();  // before any thread exists
  if (child < 0) return fail("fork: " + errno_text());
  if (child == 0) {
    ::close(go[1]);
    child_main(self, go[0], *data_dir);
  }
  sandbox.adopt(child);
  ::close(go[0]);
  // Into the cgroup before it allocates anything.
  if (!sandbox.add_pid(child)) {
    return fail("cannot move the child into " + cg.string() + ": " + errno_text());
  }
  if (via_watcher) {
    if (!watcher.start()) return fail("cannot start the watcher");
    if (watcher.read().provenance.psi != pnmem::psi_mode::trigger) {
      return fail("the watcher's sampler has no armed trigger: " + watcher.sampler().trigger().reason());
    }
  }
  const std::uint64_t first_seq = watcher.read().seq;
  const std::string before = psi_totals();
  const auto start = steady::now();
  if (::write(go[1], "g", 1) != 1) return fail("cannot start the child: " + errno_text());
  ::close(go[1]);
  std::printf("cgroup %s (limit 300 MiB), child %d: 270 MiB anonymous, 600 MiB file in %s; trigger %s%s\n",
              cg.c_str(), static_cast<int>(child), data_dir->c_str(),
              pnmem::psi_trigger_text(trigger.armed().at(0).armed).c_str(),
              via_watcher ? "; watched by a watcher polling once an hour" : "");

  while (true) {
    const auto elapsed = steady::now() - start;
    if (elapsed >= fire_deadline) {
      return fail("no trigger event within 30 s; PSI totals before: " + before + "; now: " + psi_totals());
    }
    const double seconds = std::chrono::duration<double>(elapsed).count();
    if (via_watcher) {
      const pnmem::mem_state s = watcher.read();
      if (s.seq > first_seq) {
        watcher.stop();
        std::printf("PASS: an event woke the watcher %.2f s after the child started (snapshot %llu, psi %s, "
                    "some avg10 %.2f %% rate %.2f %%); PSI totals before: %s; now: %s\n",
                    seconds, static_cast<unsigned long long>(s.seq),
                    std::string(pnmem::to_string(s.provenance.psi)).c_str(), s.host_psi_some_avg10,
                    s.host_psi_some_rate, before.c_str(), psi_totals().c_str());
        return exit_pass;
      }
      if (cgroup_sandbox::stop_requested()) return fail("interrupted by a signal");
      std::this_thread::sleep_for(20ms);
    } else {
      // Short turns, so a child that died (OOM-killed) is noticed.
      const auto w = trigger.wait_for(std::min<steady::duration>(1s, fire_deadline - elapsed));
      if (w == pnmem::wake::interrupted || cgroup_sandbox::stop_requested()) return fail("interrupted by a signal");
      if (w == pnmem::wake::event) {
        if (trigger.mode() != pnmem::psi_mode::trigger) return fail("the trigger failed: " + trigger.reason());
        std::printf("PASS: trigger fired %.2f s after the child started; PSI totals before: %s; at the event: %s\n",
                    std::chrono::duration<double>(steady::now() - start).count(), before.c_str(),
                    psi_totals().c_str());
        return exit_pass;
      }
    }
    int status = 0;
    if (::waitpid(child, &status, WNOHANG) == child) {
      sandbox.disown(child);
      return fail("the child ended early (" +
                  (WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                       : "exit " + std::to_string(WEXITSTATUS(status))) +
                  ") after " + std::to_string(seconds) + " s");
    }
  }
}

// ---- a trigger whose cgroup goes away ---------------------------------------------

int run_cgroup_removed() {
  if (::geteuid() != 0) return skip("not root: cannot create a cgroup");
  if (::access("/proc/pressure/memory", R_OK) != 0) return skip("no /proc/pressure/memory (PSI off)");
  const auto parent = own_cgroup_dir(pnmem::cgroup_mode::v2);
  if (!parent) return skip("no cgroup2 mounted");
  remove_stale_cgroups(*parent, stale_prefix);
  cgroup_sandbox sandbox;
  if (!sandbox.create(*parent, stale_prefix)) {
    return skip("cannot create " + sandbox.dir().string() + ": " + errno_text());
  }
  const fs::path& cg = sandbox.dir();
  const fs::path pressure = cg / "memory.pressure";
  if (::access(pressure.c_str(), W_OK) != 0) return skip(pressure.string() + " is not writable: " + errno_text());

  pnmem::psi_trigger_config config;
  config.cgroup_pressure = pressure;
  config.triggers = {{pnmem::psi_stall::some, 300ms, 2s}};
  pnmem::psi_trigger trigger(config);
  if (trigger.mode() != pnmem::psi_mode::trigger) return skip("no PSI trigger: " + trigger.reason());
  if (trigger.armed().size() != 2) return fail("expected triggers on both files; reason: " + trigger.reason());
  const signal_scope signals(trigger);

  if (::rmdir(cg.c_str()) != 0) return fail("rmdir " + cg.string() + ": " + errno_text());
  const auto start = steady::now();
  // The host trigger may fire first on a busy box: wait until the mode changes.
  while (steady::now() - start < 10s) {
    const auto w = trigger.wait_for(10s - (steady::now() - start));
    if (cgroup_sandbox::stop_requested()) return fail("interrupted by a signal");
    if (w != pnmem::wake::event) break;
    if (trigger.mode() == pnmem::psi_mode::poll) {
      const double seconds = std::chrono::duration<double>(steady::now() - start).count();
      // No busy loop afterwards: a wait sleeps its whole timeout (nothing is left to poll but the interrupt fd).
      const auto wait_start = steady::now();
      const auto after = trigger.wait_for(200ms);
      const auto waited = steady::now() - wait_start;
      if (cgroup_sandbox::stop_requested()) return fail("interrupted by a signal");
      if (after != pnmem::wake::timeout || waited < 200ms) {
        const char* what =
            after == pnmem::wake::event ? "event" : (after == pnmem::wake::timeout ? "timeout" : "interrupted");
        return fail("after the fallback a 200 ms wait returned " + std::string(what) + " after " +
                    std::to_string(std::chrono::duration<double>(waited).count()) + " s");
      }
      if (!trigger.armed().empty()) return fail("triggers still listed as armed after the fallback");
      std::printf("PASS: removing the cgroup woke the wait after %.3f s and fell back to polling (%s); the next "
                  "200 ms wait slept %.3f s\n",
                  seconds, trigger.reason().c_str(), std::chrono::duration<double>(waited).count());
      return exit_pass;
    }
  }
  return fail("no fallback after the cgroup was removed; mode " + std::string(to_string(trigger.mode())));
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  if (scenario == "pressure") return run_pressure(false);
  if (scenario == "watcher") return run_pressure(true);
  if (scenario == "cgroup-removed") return run_cgroup_removed();
  std::fprintf(stderr, "usage: %s pressure|watcher|cgroup-removed\n", argv[0]);
  return 2;
}
