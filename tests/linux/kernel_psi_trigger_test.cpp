// psi_trigger against real kernel events (suites linux-kernel and linux-v2). Three scenarios:
//
//   kernel_psi_trigger_test pressure
//     v1 (the memory controller on cgroup v1): real pressure, made the reliable
//     way: a child of this process's cgroup v1 memory cgroup limited to 300 MiB,
//     a child process in it that holds 250 MiB of touched anonymous memory and
//     writes and re-reads a 600 MiB file. Reclaim inside the cgroup stalls it; an
//     unprivileged `some 50000 2000000` trigger on /proc/pressure/memory must fire.
//     v2 (the memory controller on cgroup2, delegated to this process's parent
//     cgroup): a sibling cgroup with memory.high 64 MiB, a child process in it
//     that maps 80 MiB populated in one call. Without swap nothing is reclaimable:
//     the kernel throttles the child (memory.high's penalty sleep, a memory stall
//     in PSI). A `some 50000 500000` trigger (the 500 ms window the kernel allows
//     with CAP_SYS_RESOURCE), armed as asked on /proc/pressure/memory AND on the
//     sibling's memory.pressure, must fire.
//
//   kernel_psi_trigger_test watcher
//     v1: the same pressure, watched by pnmem::watcher<linux_sampler> with a poll
//     interval of an hour: only a PSI trigger event can make it publish a second
//     snapshot, so a new snapshot within the deadline proves an event wakes the
//     watcher without waiting for the next poll.
//     v2: this process (the watcher, as an engine in its container) moves into
//     the throttled cgroup, so its sampler arms that cgroup's memory.pressure
//     itself; the host-wide trigger file is replaced by /proc/pressure/io (the
//     sampler reads a tree of symlinks to the real /proc and /sys/fs/cgroup), so
//     ONLY the per-cgroup trigger can wake it. Run three times: the 500 ms window,
//     the 2 s window, and the 500 ms window without CAP_SYS_RESOURCE (a container's
//     root usually lacks it), which the kernel refuses and psi_trigger widens to
//     2 s on both files (the 2 s fallback).
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
#include <linux/capability.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <utility>
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
// 50 MiB under the limit: with 270 (30 MiB of margin) the ASan build's child, whose own runtime charges
// the cgroup too, was OOM-killed in about every other run (2026-12-02); at 250 it never was in 8 runs, and
// the 600 MiB file still thrashes through the rest.
constexpr std::size_t anon_bytes = 250 * MiB;
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

// "some N us, full M us": the total= stall counters of a pressure file.
std::string pressure_totals(const fs::path& file) {
  const auto text = read_file(file);
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

std::string psi_totals() { return pressure_totals("/proc/pressure/memory"); }

int run_pressure_v1(const fs::path& v1_parent, bool via_watcher) {
  const std::optional<fs::path> parent = v1_parent;
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
  std::printf("cgroup %s (limit 300 MiB), child %d: 250 MiB anonymous, 600 MiB file in %s; trigger %s%s\n",
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

// ---- v2: memory.high throttling ---------------------------------------------------------

// Past memory.high with no swap, anonymous memory cannot be reclaimed: the kernel makes the
// task that charged it sleep (up to 2 s a time), and PSI counts the sleep as a memory stall.
// A small overage, charged in one call: 16 MiB over stalled ~4 s in a 6.1 guest, while a task
// that kept allocating 32 MiB and more past it did not finish within minutes.
constexpr std::size_t v2_high_bytes = 64 * MiB;
constexpr std::size_t v2_charge_bytes = v2_high_bytes + 16 * MiB;
constexpr std::size_t v2_max_bytes = 256 * MiB;  // a safety net, never reached
constexpr auto quiet_spell = 2500ms;             // longer than a 2 s window

[[noreturn]] void throttled_child_main(pid_t parent, int go_fd) {
  prepare_child(parent);
  char go = 0;
  if (::read(go_fd, &go, 1) != 1) ::_exit(2);  // the parent died or failed to move us
  // MAP_POPULATE: every page charged inside this one call; the throttling follows.
  if (::mmap(nullptr, v2_charge_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0) ==
      MAP_FAILED) {
    ::_exit(3);
  }
  for (;;) ::pause();  // holds it, over memory.high, until killed
}

// A sibling cgroup with memory.high, memory.max and a child process in it that charges
// v2_charge_bytes once `go` is written to. Everything goes with the sandbox.
struct throttled_cgroup {
  int go_fd = -1;
  pid_t child = -1;
  std::string error;  // why setting up failed (a skip when `skip_it`)
  bool skip_it = false;

  bool make(cgroup_sandbox& sandbox, const fs::path& parent) {
    remove_stale_cgroups(parent, stale_prefix);
    if (!sandbox.create(parent, stale_prefix)) {
      error = "cannot create " + sandbox.dir().string() + ": " + errno_text();
      skip_it = true;
      return false;
    }
    const fs::path& cg = sandbox.dir();
    if (::access((cg / "memory.high").c_str(), W_OK) != 0) {
      error = "no memory controller in " + cg.string();
      skip_it = true;
      return false;
    }
    if (!write_file(cg / "memory.max", std::to_string(v2_max_bytes)) ||
        !write_file(cg / "memory.high", std::to_string(v2_high_bytes))) {
      error = "cannot set memory.max/memory.high in " + cg.string() + ": " + errno_text();
      return false;
    }
    int go[2];
    if (::pipe2(go, O_CLOEXEC) != 0) {
      error = "pipe: " + errno_text();
      return false;
    }
    const pid_t self = ::getpid();
    child = ::fork();
    if (child < 0) {
      error = "fork: " + errno_text();
      return false;
    }
    if (child == 0) {
      ::close(go[1]);
      throttled_child_main(self, go[0]);
    }
    sandbox.adopt(child);
    ::close(go[0]);
    go_fd = go[1];
    if (!sandbox.add_pid(child)) {
      error = "cannot move the child into " + cg.string() + ": " + errno_text();
      return false;
    }
    return true;
  }

  bool start() {
    const bool ok = ::write(go_fd, "g", 1) == 1;
    ::close(go_fd);
    go_fd = -1;
    return ok;
  }

  // "" while the child lives; how it ended otherwise (reaped: no longer the sandbox's).
  std::string ended(cgroup_sandbox& sandbox) {
    int status = 0;
    if (::waitpid(child, &status, WNOHANG) != child) return {};
    sandbox.disown(child);
    return WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status)) : "exit " + std::to_string(WEXITSTATUS(status));
  }

  ~throttled_cgroup() {
    if (go_fd >= 0) ::close(go_fd);
  }
};

std::string events_line(const fs::path& cg) {
  const auto text = read_file(cg / "memory.events");
  if (!text) return "?";
  std::string out;
  for (const auto& line : split(*text, '\n')) {
    if (line.rfind("high ", 0) == 0 || line.rfind("max ", 0) == 0 || line.rfind("oom_kill ", 0) == 0) {
      out += (out.empty() ? "" : ", ") + line;
    }
  }
  return out;
}

// Each trigger armed as `expected` (widened or not, as `widened` says), on the files expected.
std::optional<std::string> armed_problem(const std::vector<pnmem::psi_armed_trigger>& armed,
                                         const std::vector<fs::path>& files, const pnmem::psi_trigger_spec& expected,
                                         bool widened = false) {
  for (const auto& f : files) {
    const auto it = std::find_if(armed.begin(), armed.end(), [&](const auto& a) { return a.file == f; });
    if (it == armed.end()) return "no trigger armed on " + f.string();
    if (it->widened != widened || !(it->armed == expected)) {
      return "the trigger on " + f.string() + " is '" + pnmem::psi_trigger_text(it->armed) + "'" +
             (it->widened ? " (widened)" : "") + ", expected '" + pnmem::psi_trigger_text(expected) + "'" +
             (widened ? " (widened)" : "");
    }
  }
  return std::nullopt;
}

// This thread without CAP_SYS_RESOURCE in its effective set (a container's root usually lacks it:
// Docker's default set does), and with it again on destruction. Threads started meanwhile inherit
// the reduced set. ok() false (errno) when capset failed.
class without_sys_resource {
 public:
  without_sys_resource() {
    if (::syscall(SYS_capget, &header_, saved_) != 0) return;
    __user_cap_data_struct reduced[2] = {saved_[0], saved_[1]};
    reduced[CAP_TO_INDEX(CAP_SYS_RESOURCE)].effective &= ~CAP_TO_MASK(CAP_SYS_RESOURCE);
    ok_ = ::syscall(SYS_capset, &header_, reduced) == 0;
  }
  ~without_sys_resource() {
    if (ok_) ::syscall(SYS_capset, &header_, saved_);
  }
  without_sys_resource(const without_sys_resource&) = delete;
  without_sys_resource& operator=(const without_sys_resource&) = delete;
  bool ok() const noexcept { return ok_; }

 private:
  __user_cap_header_struct header_{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct saved_[2]{};
  bool ok_ = false;
};

int run_pressure_v2(const fs::path& parent) {
  cgroup_sandbox sandbox;
  throttled_cgroup t;
  if (!t.make(sandbox, parent)) return t.skip_it ? skip(t.error) : fail(t.error);
  const fs::path& cg = sandbox.dir();

  const pnmem::psi_trigger_spec spec{pnmem::psi_stall::some, 50ms, 500ms};
  pnmem::psi_trigger_config config;
  config.cgroup_pressure = cg / "memory.pressure";
  config.triggers = {spec};
  pnmem::psi_trigger trigger(config);
  if (trigger.mode() != pnmem::psi_mode::trigger) return fail("no PSI trigger as root: " + trigger.reason());
  if (const auto problem = armed_problem(trigger.armed(), {"/proc/pressure/memory", config.cgroup_pressure}, spec)) {
    return fail(*problem + " (reason: " + trigger.reason() + ")");
  }
  const signal_scope signals(trigger);
  while (trigger.wait_for(0ns) == pnmem::wake::event) {
  }
  const std::string before = pressure_totals(cg / "memory.pressure");
  const auto start = steady::now();
  if (!t.start()) return fail("cannot start the child: " + errno_text());
  std::printf("cgroup %s (memory.high %zu MiB, max %zu MiB), child %d charges %zu MiB at once; trigger '%s' on "
              "/proc/pressure/memory and %s\n",
              cg.c_str(), v2_high_bytes / MiB, v2_max_bytes / MiB, static_cast<int>(t.child), v2_charge_bytes / MiB,
              pnmem::psi_trigger_text(spec).c_str(), config.cgroup_pressure.c_str());
  while (true) {
    const auto elapsed = steady::now() - start;
    if (elapsed >= fire_deadline) {
      return fail("no trigger event within 30 s; the cgroup's memory.pressure before: " + before + "; now: " +
                  pressure_totals(cg / "memory.pressure") + "; memory.events: " + events_line(cg));
    }
    const auto w = trigger.wait_for(std::min<steady::duration>(1s, fire_deadline - elapsed));
    if (w == pnmem::wake::interrupted || cgroup_sandbox::stop_requested()) return fail("interrupted by a signal");
    if (w == pnmem::wake::event) {
      if (trigger.mode() != pnmem::psi_mode::trigger) return fail("the trigger failed: " + trigger.reason());
      std::printf("PASS: trigger fired %.2f s after the child started; the cgroup's memory.pressure before: %s; at "
                  "the event: %s; memory.events: %s\n",
                  std::chrono::duration<double>(steady::now() - start).count(), before.c_str(),
                  pressure_totals(cg / "memory.pressure").c_str(), events_line(cg).c_str());
      return exit_pass;
    }
    if (const std::string how = t.ended(sandbox); !how.empty()) return fail("the child ended early (" + how + ")");
  }
}

// A directory laid out like / whose files are symlinks to the real ones, except
// proc/pressure/memory, which points at /proc/pressure/io: a sampler rooted there
// arms its "host-wide" trigger on a file memory stalls do not touch. Removed with it.
class decoy_root {
 public:
  bool make(const fs::path& cgroup_mount, std::string& error) {
    std::string tmpl = (fs::temp_directory_path() / "pnmem-psi-root-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      error = "mkdtemp: " + errno_text();
      return false;
    }
    dir_ = tmpl;
    std::error_code ec;
    fs::create_directories(dir_ / "proc/pressure", ec);
    if (!ec) fs::create_symlink("/proc/self", dir_ / "proc/self", ec);
    if (!ec) fs::create_symlink("/proc/meminfo", dir_ / "proc/meminfo", ec);
    if (!ec) fs::create_symlink("/proc/pressure/io", dir_ / "proc/pressure/memory", ec);
    const fs::path mount_here = dir_ / cgroup_mount.relative_path();
    if (!ec) fs::create_directories(mount_here.parent_path(), ec);
    if (!ec) fs::create_symlink(cgroup_mount, mount_here, ec);
    if (ec) error = "building " + dir_.string() + ": " + ec.message();
    return !ec;
  }
  const fs::path& dir() const noexcept { return dir_; }
  ~decoy_root() {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);  // the symlinks, not what they point to
  }

 private:
  fs::path dir_;
};

// One run of the v2 watcher scenario with a trigger of `window`.
// One run of the v2 watcher scenario with a trigger of `window`, with or without CAP_SYS_RESOURCE.
// Without it the kernel takes only windows that are multiples of 2 s (Linux 6.5, and the stable
// kernels it was backported to: Debian's 6.1.y has it): psi_trigger widens the 500 ms window to 2 s
// on both files (the 2 s fallback). An older kernel refuses the writer outright (EPERM): then the
// sampler must have fallen back to polling, and say so.
int run_watcher_v2_once(const cgroup_location& self, const fs::path& parent, std::chrono::microseconds window,
                        bool privileged) {
  const std::string label = std::string(window >= 1s ? "2 s" : "500 ms") + (privileged ? "" : " without CAP_SYS_RESOURCE");
  cgroup_sandbox sandbox;
  throttled_cgroup t;
  if (!t.make(sandbox, parent)) return t.skip_it ? skip(t.error) : fail(t.error);
  const fs::path& cg = sandbox.dir();
  decoy_root root;
  std::string error;
  if (!root.make(self.mount_point, error)) return fail(error);

  // This process joins the cgroup (its charges so far stay behind), and leaves it before the
  // sandbox removes it: declared after the sandbox, destroyed before it.
  const moved_into moved(self.dir, cg);
  if (!moved.ok()) return fail("cannot move this process into " + cg.string() + ": " + errno_text());

  // Before the sampler and the watcher's thread exist: both arm triggers.
  std::optional<without_sys_resource> unprivileged;
  if (!privileged) {
    unprivileged.emplace();
    if (!unprivileged->ok()) return fail("capset (dropping CAP_SYS_RESOURCE): " + errno_text());
  }
  const pnmem::psi_trigger_spec spec{pnmem::psi_stall::some, 50ms, window};
  const pnmem::psi_trigger_spec expected = privileged ? spec : pnmem::widen_to_unprivileged_window(spec);
  pnmem::linux_sampler_options sampler_options;
  sampler_options.root = root.dir().string();
  sampler_options.psi_triggers = {spec};
  pnmem::watcher_options watch_options;
  watch_options.poll_interval = std::chrono::hours(1);
  watch_options.pressure_poll_interval = std::chrono::hours(1);
  pnmem::watcher<pnmem::linux_sampler> watcher{pnmem::linux_sampler{sampler_options}, watch_options};
  if (!watcher.start()) return fail("cannot start the watcher");
  const pnmem::mem_state first = watcher.read();
  if (!privileged && first.provenance.psi == pnmem::psi_mode::poll) {
    // A kernel without unprivileged triggers: the documented fallback is polling, with the reason.
    const std::string reason = watcher.sampler().trigger().reason();
    if (reason.find(std::strerror(EPERM)) == std::string::npos) return fail("polling without EPERM: " + reason);
    std::printf("PASS (window %s): this kernel refuses PSI triggers without CAP_SYS_RESOURCE; the sampler fell back "
                "to polling: %s\n", label.c_str(), reason.c_str());
    return exit_pass;
  }
  if (first.provenance.psi != pnmem::psi_mode::trigger) {
    return fail("the watcher's sampler has no armed trigger: " + watcher.sampler().trigger().reason());
  }
  if (first.provenance.cgroup != pnmem::cgroup_mode::v2 || first.provenance.limit_cgroup_path() != self.cgroup_path(cg)) {
    return fail("the watcher does not see itself in " + self.cgroup_path(cg) + " (cgroup " +
                std::string(pnmem::to_string(first.provenance.cgroup)) + ", limit at '" +
                std::string(first.provenance.limit_cgroup_path()) + "')");
  }
  // The sampler arms the cgroup's file from its waiting thread, after the first sample.
  const fs::path decoy_file = root.dir() / "proc/pressure/memory";
  const fs::path cgroup_file = root.dir() / self.mount_point.relative_path() / cg.lexically_relative(self.mount_point) / "memory.pressure";
  std::optional<std::string> problem;
  for (const auto until = steady::now() + 5s; steady::now() < until; std::this_thread::sleep_for(10ms)) {
    problem = armed_problem(watcher.sampler().trigger().armed(), {decoy_file, cgroup_file}, expected, !privileged);
    if (!problem) break;
  }
  if (problem) return fail(*problem + " (reason: " + watcher.sampler().trigger().reason() + ")");
  // A quiet spell first: a wake-up now, with nothing stalling, is not the one this run is about.
  std::this_thread::sleep_for(quiet_spell);
  const std::uint64_t quiet_seq = watcher.read().seq;
  if (quiet_seq != first.seq) {
    std::printf("note: %llu wake-up(s) in a %.1f s quiet spell before the child started (mode %s, reason '%s')\n",
                static_cast<unsigned long long>(quiet_seq - first.seq),
                std::chrono::duration<double>(quiet_spell).count(),
                std::string(pnmem::to_string(watcher.sampler().trigger().mode())).c_str(),
                watcher.sampler().trigger().reason().c_str());
  }
  const std::uint64_t first_seq = quiet_seq;
  const std::string io_before = pressure_totals("/proc/pressure/io");
  const std::string before = pressure_totals(cg / "memory.pressure");
  const auto start = steady::now();
  if (!t.start()) return fail("cannot start the child: " + errno_text());
  std::printf("window %s: this process and child %d in %s (memory.high %zu MiB), the child charges %zu MiB at once; "
              "the watcher polls once an hour, its triggers '%s'%s on %s and on /proc/pressure/io (the decoy)\n",
              label.c_str(), static_cast<int>(t.child), cg.c_str(), v2_high_bytes / MiB, v2_charge_bytes / MiB,
              pnmem::psi_trigger_text(expected).c_str(), privileged ? "" : " (widened from 500 ms)",
              (cg / "memory.pressure").c_str());
  std::fflush(stdout);
  while (true) {
    const auto elapsed = steady::now() - start;
    if (elapsed >= fire_deadline) {
      return fail("no snapshot within 30 s: the per-cgroup trigger did not wake the watcher; memory.pressure before: " +
                  before + "; now: " + pressure_totals(cg / "memory.pressure") + "; memory.events: " + events_line(cg));
    }
    const pnmem::mem_state s = watcher.read();
    if (s.seq > first_seq) {
      const double seconds = std::chrono::duration<double>(steady::now() - start).count();
      if (watcher.sampler().trigger().mode() != pnmem::psi_mode::trigger) {
        return fail("the watcher woke because its triggers failed: " + watcher.sampler().trigger().reason());
      }
      watcher.stop();
      std::printf("PASS (window %s): the cgroup's memory.pressure trigger woke the watcher %.2f s after the child "
                  "started (snapshot %llu, limit %llu MiB at %s); memory.pressure before: %s; now: %s; memory.events: "
                  "%s; /proc/pressure/io before: %s; now: %s\n",
                  label.c_str(), seconds, static_cast<unsigned long long>(s.seq),
                  static_cast<unsigned long long>(s.provenance.cgroup_limit_bytes / MiB),
                  std::string(s.provenance.limit_cgroup_path()).c_str(), before.c_str(),
                  pressure_totals(cg / "memory.pressure").c_str(), events_line(cg).c_str(), io_before.c_str(),
                  pressure_totals("/proc/pressure/io").c_str());
      return exit_pass;
    }
    if (cgroup_sandbox::stop_requested()) return fail("interrupted by a signal");
    if (const std::string how = t.ended(sandbox); !how.empty()) return fail("the child ended early (" + how + ")");
    std::this_thread::sleep_for(20ms);
  }
}

int run_watcher_v2(const cgroup_location& self, const fs::path& parent) {
  const std::pair<std::chrono::microseconds, bool> runs[] = {{500ms, true}, {2s, true}, {500ms, false}};
  for (const auto& [window, privileged] : runs) {
    if (const int r = run_watcher_v2_once(self, parent, window, privileged); r != exit_pass) return r;
  }
  return exit_pass;
}

int run_pressure(bool via_watcher) {
  if (::geteuid() != 0) return skip("not root: cannot create a memory cgroup");
  if (::access("/proc/pressure/memory", R_OK) != 0) return skip("no /proc/pressure/memory (PSI off)");
  // The memory controller is on one hierarchy only: v1 when it is mounted there.
  if (const auto v1 = own_cgroup_dir(pnmem::cgroup_mode::v1)) return run_pressure_v1(*v1, via_watcher);
  std::string why = "no cgroup v1 memory controller and no cgroup2 mounted";
  if (const auto v2 = own_cgroup(pnmem::cgroup_mode::v2)) {
    if (const auto parent = v2_memory_parent(*v2, &why)) {
      return via_watcher ? run_watcher_v2(*v2, *parent) : run_pressure_v2(*parent);
    }
  }
  return skip(why);
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
