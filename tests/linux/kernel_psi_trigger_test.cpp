// psi_trigger against real kernel events (suite linux-kernel). Two scenarios:
//
//   kernel_psi_trigger_test pressure
//     DESIGN.md's recipe for real pressure: a child of this process's cgroup v1
//     memory cgroup limited to 300 MiB, a child process in it that holds
//     270 MiB of touched anonymous memory and writes and re-reads a 600 MiB
//     file. Reclaim inside the cgroup stalls it; an unprivileged
//     `some 50000 2000000` trigger on /proc/pressure/memory must fire.
//
//   kernel_psi_trigger_test cgroup-removed
//     A trigger on a cgroup v2 memory.pressure file, then rmdir of that cgroup:
//     the kernel reports POLLERR, wait_for() must return an event and the
//     trigger fall back to polling.
//
// Exit 0 pass, 1 fail, 77 skip (Meson's SKIP) with one line saying why: not
// root, no PSI, no writable cgroup hierarchy with what the scenario needs.
// Everything created is removed on every path out, signals included.
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "pnmem/linux/psi_trigger.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

constexpr int exit_pass = 0;
constexpr int exit_fail = 1;
constexpr int exit_skip = 77;

constexpr std::size_t MiB = 1024 * 1024;
constexpr std::size_t cgroup_limit_bytes = 300 * MiB;
constexpr std::size_t anon_bytes = 270 * MiB;
constexpr std::size_t file_bytes = 600 * MiB;
constexpr auto fire_deadline = 30s;

const char* const stale_prefix = "pnmem-psi-test-";

int skip(const std::string& why) {
  std::printf("SKIP: %s\n", why.c_str());
  return exit_skip;
}

int fail(const std::string& why) {
  std::printf("FAIL: %s\n", why.c_str());
  return exit_fail;
}

std::string errno_text() { return std::strerror(errno); }

std::optional<std::string> read_file(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// One write() of the whole text, as cgroupfs wants it; errno on failure.
bool write_file(const fs::path& p, const std::string& text) {
  const int fd = ::open(p.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t n = ::write(fd, text.data(), text.size());
  const int err = errno;
  ::close(fd);
  errno = err;
  return n == static_cast<ssize_t>(text.size());
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  return out;
}

// The directory of this process's cgroup in the hierarchy mounted with
// fstype `fstype` whose super options include `option` ("" for cgroup2):
// mountinfo gives the mount point and the mount's root inside the hierarchy,
// /proc/self/cgroup the process's path inside it.
std::optional<fs::path> own_cgroup_dir(const std::string& fstype, const std::string& option) {
  const auto mountinfo = read_file("/proc/self/mountinfo");
  const auto cgroups = read_file("/proc/self/cgroup");
  if (!mountinfo || !cgroups) return std::nullopt;
  std::string mount_point;
  std::string mount_root;
  for (const auto& line : split(*mountinfo, '\n')) {
    // id parent dev root mount-point options [optional...] - fstype source super-options
    const auto fields = split(line, ' ');
    std::size_t dash = 0;
    while (dash < fields.size() && fields[dash] != "-") ++dash;
    if (dash < 5 || dash + 3 >= fields.size() || fields[dash + 1] != fstype) continue;
    const auto super = split(fields[dash + 3], ',');
    if (!option.empty() && std::find(super.begin(), super.end(), option) == super.end()) continue;
    mount_root = fields[3];
    mount_point = fields[4];
    break;
  }
  if (mount_point.empty()) return std::nullopt;
  for (const auto& line : split(*cgroups, '\n')) {
    // hierarchy-id:controllers:path; cgroup2 is "0::path"
    const auto first = line.find(':');
    const auto second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const auto controllers = split(line.substr(first + 1, second - first - 1), ',');
    const bool match = option.empty() ? line.compare(0, 3, "0::") == 0
                                      : std::find(controllers.begin(), controllers.end(), option) !=
                                            controllers.end();
    if (!match) continue;
    std::string path = line.substr(second + 1);
    // Inside a container the mount's root may be a prefix of the path.
    if (mount_root != "/" && path.compare(0, mount_root.size(), mount_root) == 0) path.erase(0, mount_root.size());
    return fs::path(mount_point) / fs::path(path).relative_path();
  }
  return std::nullopt;
}

// Removes a cgroup directory; its tasks must be gone. The kernel may need a
// moment after the last task exits (v1 reparents the charges).
bool remove_cgroup(const fs::path& dir) {
  for (int i = 0; i < 200; ++i) {
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return true;
    if (errno != EBUSY) return false;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

// Cgroups left by an earlier run that was killed (SIGKILL skips cleanup):
// their tasks can only be that run's children.
void remove_stale_cgroups(const fs::path& parent) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    if (!entry.is_directory(ec) || entry.path().filename().string().rfind(stale_prefix, 0) != 0) continue;
    if (const auto procs = read_file(entry.path() / "cgroup.procs")) {
      for (const auto& pid : split(*procs, '\n')) {
        if (!pid.empty()) ::kill(static_cast<pid_t>(std::stol(pid)), SIGKILL);
      }
    }
    remove_cgroup(entry.path());
  }
}

// ---- the process under pressure -------------------------------------------------

[[noreturn]] void child_main(int go_fd, const fs::path& data_dir) {
  // Never outlive the test, even if it is SIGKILLed.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
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
std::atomic<bool> g_stop{false};

// SIGTERM (meson's timeout) or SIGINT: stop waiting and clean up.
// interrupt() writes an eventfd, which is async-signal-safe.
extern "C" void on_signal(int) {
  g_stop.store(true);
  if (auto* t = g_trigger.load()) t->interrupt();
}

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

// Owns the cgroup and the child: both are gone when this is.
struct pressure_rig {
  fs::path cgroup;
  pid_t child = -1;
  pressure_rig() = default;
  pressure_rig(const pressure_rig&) = delete;
  pressure_rig& operator=(const pressure_rig&) = delete;
  ~pressure_rig() {
    if (child > 0) {
      ::kill(child, SIGKILL);
      ::waitpid(child, nullptr, 0);
    }
    if (!cgroup.empty() && !remove_cgroup(cgroup)) {
      std::printf("warning: could not remove %s: %s\n", cgroup.c_str(), errno_text().c_str());
    }
  }
};

int run_pressure() {
  if (::geteuid() != 0) return skip("not root: cannot create a memory cgroup");
  if (::access("/proc/pressure/memory", R_OK) != 0) return skip("no /proc/pressure/memory (PSI off)");
  const auto parent = own_cgroup_dir("cgroup", "memory");
  if (!parent) return skip("no cgroup v1 memory controller mounted");
  const auto data_dir = disk_backed_dir();
  if (!data_dir) return skip("no disk-backed writable directory for the 600 MiB file");

  remove_stale_cgroups(*parent);
  pressure_rig rig;
  const fs::path cg = *parent / (stale_prefix + std::to_string(::getpid()));
  if (::mkdir(cg.c_str(), 0755) != 0) return skip("cannot create " + cg.string() + ": " + errno_text());
  rig.cgroup = cg;
  if (!write_file(cg / "memory.limit_in_bytes", std::to_string(cgroup_limit_bytes))) {
    return fail("cannot set " + (cg / "memory.limit_in_bytes").string() + ": " + errno_text());
  }

  pnmem::psi_trigger_config config;
  config.triggers = {{pnmem::psi_stall::some, 50ms, 2s}};
  pnmem::psi_trigger trigger(config);
  if (trigger.mode() != pnmem::psi_mode::trigger) return skip("no PSI trigger: " + trigger.reason());
  // The handler may use the trigger only while it exists.
  struct signal_scope {
    explicit signal_scope(pnmem::psi_trigger& t) {
      g_trigger.store(&t);
      ::signal(SIGTERM, on_signal);
      ::signal(SIGINT, on_signal);
    }
    ~signal_scope() { g_trigger.store(nullptr); }
    signal_scope(const signal_scope&) = delete;
    signal_scope& operator=(const signal_scope&) = delete;
  } signals(trigger);

  // Drain an event the box may already have pending, so the one we see is ours.
  while (trigger.wait_for(0ns) == pnmem::wake::event) {
  }

  int go[2];
  if (::pipe2(go, O_CLOEXEC) != 0) return fail("pipe: " + errno_text());
  rig.child = ::fork();
  if (rig.child < 0) return fail("fork: " + errno_text());
  if (rig.child == 0) {
    ::close(go[1]);
    child_main(go[0], *data_dir);
  }
  ::close(go[0]);
  // Into the cgroup before it allocates anything.
  if (!write_file(cg / "cgroup.procs", std::to_string(rig.child))) {
    return fail("cannot move the child into " + cg.string() + ": " + errno_text());
  }
  const std::string before = psi_totals();
  const auto start = steady::now();
  if (::write(go[1], "g", 1) != 1) return fail("cannot start the child: " + errno_text());
  ::close(go[1]);
  std::printf("cgroup %s (limit 300 MiB), child %d: 270 MiB anonymous, 600 MiB file in %s; trigger %s\n",
              cg.c_str(), static_cast<int>(rig.child), data_dir->c_str(),
              pnmem::psi_trigger_text(trigger.armed().at(0).armed).c_str());

  while (true) {
    const auto elapsed = steady::now() - start;
    if (elapsed >= fire_deadline) {
      return fail("no trigger event within 30 s; PSI totals before: " + before + "; now: " + psi_totals());
    }
    // Short turns, so a child that died (OOM-killed) is noticed.
    const auto w = trigger.wait_for(std::min<steady::duration>(1s, fire_deadline - elapsed));
    const double seconds = std::chrono::duration<double>(steady::now() - start).count();
    if (w == pnmem::wake::interrupted || g_stop.load()) return fail("interrupted by a signal");
    if (w == pnmem::wake::event) {
      if (trigger.mode() != pnmem::psi_mode::trigger) return fail("the trigger failed: " + trigger.reason());
      std::printf("PASS: trigger fired %.2f s after the child started; PSI totals before: %s; at the event: %s\n",
                  seconds, before.c_str(), psi_totals().c_str());
      return exit_pass;
    }
    int status = 0;
    if (::waitpid(rig.child, &status, WNOHANG) == rig.child) {
      rig.child = -1;
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
  const auto parent = own_cgroup_dir("cgroup2", "");
  if (!parent) return skip("no cgroup2 mounted");
  remove_stale_cgroups(*parent);
  const fs::path cg = *parent / (stale_prefix + std::to_string(::getpid()));
  if (::mkdir(cg.c_str(), 0755) != 0) return skip("cannot create " + cg.string() + ": " + errno_text());
  struct remover {
    fs::path dir;
    ~remover() { ::rmdir(dir.c_str()); }
  } cleanup{cg};
  const fs::path pressure = cg / "memory.pressure";
  if (::access(pressure.c_str(), W_OK) != 0) return skip(pressure.string() + " is not writable: " + errno_text());

  pnmem::psi_trigger_config config;
  config.cgroup_pressure = pressure;
  config.triggers = {{pnmem::psi_stall::some, 300ms, 2s}};
  pnmem::psi_trigger trigger(config);
  if (trigger.mode() != pnmem::psi_mode::trigger) return skip("no PSI trigger: " + trigger.reason());
  if (trigger.armed().size() != 2) return fail("expected triggers on both files; reason: " + trigger.reason());

  if (::rmdir(cg.c_str()) != 0) return fail("rmdir " + cg.string() + ": " + errno_text());
  const auto start = steady::now();
  // The host trigger may fire first on a busy box: wait until the mode changes.
  while (steady::now() - start < 10s) {
    if (trigger.wait_for(10s - (steady::now() - start)) != pnmem::wake::event) break;
    if (trigger.mode() == pnmem::psi_mode::poll) {
      const double seconds = std::chrono::duration<double>(steady::now() - start).count();
      std::printf("PASS: removing the cgroup woke the wait after %.3f s and fell back to polling: %s\n", seconds,
                  trigger.reason().c_str());
      return exit_pass;
    }
  }
  return fail("no fallback after the cgroup was removed; mode " + std::string(to_string(trigger.mode())));
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  if (scenario == "pressure") return run_pressure();
  if (scenario == "cgroup-removed") return run_cgroup_removed();
  std::fprintf(stderr, "usage: %s pressure|cgroup-removed\n", argv[0]);
  return 2;
}
