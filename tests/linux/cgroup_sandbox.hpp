// cgroup_sandbox.hpp - throwaway memory cgroups for the real-kernel test programs
// (kernel_psi_trigger_test, kernel_watcher_test). Test code only, header-only.
//
//   own_cgroup_dir(hierarchy)   this process's cgroup directory (real_cgroup.hpp's own_cgroup)
//   v2_memory_parent            where this process may make v2 cgroups with the memory
//                               controller: its own cgroup's parent (siblings), or the root
//   moved_into                  this process moved into a cgroup, and back on every way out
//   write_file                  cgroupfs writes (one write() per value, errno kept);
//                               read_file (file_text.hpp) reads
//   remove_cgroup               rmdir, retried while the kernel still says EBUSY
//   remove_stale_cgroups        what a SIGKILLed earlier run left behind, by prefix
//   cgroup_sandbox              owns one uniquely named child cgroup and the child
//                               processes put in it: on every way out (return,
//                               exception, SIGINT/SIGTERM) the children are killed
//                               and reaped and the cgroup removed
//   prepare_child               first call in a forked child: dies with the parent
//
// Signals: while a sandbox exists, SIGINT and SIGTERM set stop_requested() and run
// the hook given to set_signal_hook() (it must be async-signal-safe, e.g. an
// eventfd write that wakes a wait); the program notices, returns, and the
// destructor cleans up. A second signal means the program did not get there: the
// handler itself kills and reaps the children, removes the cgroup (all
// async-signal-safe calls) and dies of the signal. Handlers are installed without
// SA_RESTART, so a blocking read()/poll() returns EINTR.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "file_text.hpp"
#include "pnmem/provenance.hpp"
#include "real_cgroup.hpp"

namespace pnmem::test {

namespace fs = std::filesystem;

inline std::string errno_text() { return std::strerror(errno); }

// One write() of the whole text, as cgroupfs wants it; errno on failure.
inline bool write_file(const fs::path& p, const std::string& text) {
  const int fd = ::open(p.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t n = ::write(fd, text.data(), text.size());
  const int err = errno;
  ::close(fd);
  errno = err;
  return n == static_cast<ssize_t>(text.size());
}

inline std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  return out;
}

// Whether `word` is one of the blank-separated words of `text` (cgroup.controllers,
// cgroup.subtree_control).
inline bool has_word(const std::string& text, std::string_view word) {
  for (const auto& line : split(text, '\n')) {
    for (const auto& w : split(line, ' ')) {
      if (w == word) return true;
    }
  }
  return false;
}

enum class cgroup_version { v1, v2 };

constexpr const char* to_string(cgroup_version v) noexcept { return v == cgroup_version::v1 ? "v1" : "v2"; }

// The file that limits a cgroup's memory.
constexpr const char* memory_limit_file(cgroup_version v) noexcept {
  return v == cgroup_version::v1 ? "memory.limit_in_bytes" : "memory.max";
}

inline std::optional<fs::path> own_cgroup_dir(pnmem::cgroup_mode hierarchy) {
  const auto where = own_cgroup(hierarchy);
  return where ? std::optional<fs::path>(where->dir) : std::nullopt;
}

// The same, naming the hierarchy by its mount's fstype and super option, as
// examples/survival does: ("cgroup2", "") is v2, ("cgroup", "memory") v1.
inline std::optional<fs::path> own_cgroup_dir(std::string_view fstype, std::string_view option) {
  if (fstype == "cgroup2" && option.empty()) return own_cgroup_dir(pnmem::cgroup_mode::v2);
  if (fstype == "cgroup" && option == "memory") return own_cgroup_dir(pnmem::cgroup_mode::v1);
  return std::nullopt;
}

// Moves process `pid` (all its threads) into the cgroup at `dir`; errno on failure.
inline bool move_into_cgroup(const fs::path& dir, pid_t pid) {
  return write_file(dir / "cgroup.procs", std::to_string(pid));
}

// Where this process, at `where` in the v2 hierarchy, may make cgroups that have the memory
// controller. v2 lets no process sit in a cgroup that enables controllers for its children (the
// root cgroup alone is exempt), so unless this process is in the root they are made next to its
// own cgroup, in its parent (scripts/vm-test runs a command in /vm-test/command for this), which
// must enable memory for its children. nullopt, with `why`, when it does not.
inline std::optional<fs::path> v2_memory_parent(const cgroup_location& where, std::string* why = nullptr) {
  const fs::path parent = where.dir == where.mount_point ? where.dir : where.dir.parent_path();
  const auto subtree = read_file(parent / "cgroup.subtree_control");
  if (subtree && has_word(*subtree, "memory")) return parent;
  if (why != nullptr) *why = "cgroup2 " + parent.string() + " does not delegate the memory controller";
  return std::nullopt;
}

// This process moved into the cgroup at `dir` (ok() says whether it went, errno when not), and
// back into `home` on every way out. Its memory charged so far stays where it was (v1 moves
// charges only when asked, v2 never).
class moved_into {
 public:
  moved_into(fs::path home, const fs::path& dir) : home_(std::move(home)) {
    moved_ = move_into_cgroup(dir, ::getpid());
  }
  ~moved_into() {
    if (moved_) move_into_cgroup(home_, ::getpid());
  }
  moved_into(const moved_into&) = delete;
  moved_into& operator=(const moved_into&) = delete;
  bool ok() const noexcept { return moved_; }

 private:
  fs::path home_;
  bool moved_ = false;
};

namespace detail {

inline void sleep_10ms() noexcept {
  struct timespec ts {0, 10'000'000};
  ::nanosleep(&ts, nullptr);  // async-signal-safe
}

// rmdir with retries while EBUSY; async-signal-safe. True when it is gone.
inline bool rmdir_retrying(const char* dir) noexcept {
  for (int i = 0; i < 200; ++i) {
    if (::rmdir(dir) == 0 || errno == ENOENT) return true;
    if (errno != EBUSY) return false;
    sleep_10ms();
  }
  return false;
}

}  // namespace detail

// Removes a cgroup directory; its tasks must be gone. The kernel may need a
// moment after the last task exits (v1 reparents the charges). errno on failure.
inline bool remove_cgroup(const fs::path& dir) { return detail::rmdir_retrying(dir.c_str()); }

// Cgroups left by an earlier run that was killed (SIGKILL skips cleanup): their
// names start with `prefix`, and their tasks can only be that run's children.
inline void remove_stale_cgroups(const fs::path& parent, std::string_view prefix) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    if (!entry.is_directory(ec) || entry.path().filename().string().rfind(prefix, 0) != 0) continue;
    if (const auto procs = read_file(entry.path() / "cgroup.procs")) {
      for (const auto& pid : split(*procs, '\n')) {
        if (!pid.empty()) ::kill(static_cast<pid_t>(std::stol(pid)), SIGKILL);
      }
    }
    remove_cgroup(entry.path());
  }
}

// First call in a forked child of a sandbox's owner: the child dies with its
// parent (even a SIGKILLed one) and takes SIGINT/SIGTERM the default way.
inline void prepare_child(pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(125);  // the parent died before prctl
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
}

using signal_hook = void (*)() noexcept;

namespace detail {

inline constexpr std::size_t max_children = 8;

// What the signal handler may touch: lock-free atomics and a fixed buffer.
struct sandbox_signal_state {
  std::atomic<bool> stop{false};
  std::atomic<int> count{0};
  std::atomic<signal_hook> hook{nullptr};
  std::atomic<pid_t> children[max_children]{};
  std::atomic<bool> dir_set{false};
  char dir[PATH_MAX]{};
};

inline sandbox_signal_state g_sandbox;

extern "C" inline void pnmem_test_sandbox_on_signal(int sig) {
  const int saved_errno = errno;
  g_sandbox.stop.store(true);
  if (g_sandbox.count.fetch_add(1) == 0) {
    if (const signal_hook hook = g_sandbox.hook.load()) hook();
    errno = saved_errno;
    return;
  }
  // Second signal: clean up here and die of it.
  for (auto& c : g_sandbox.children) {
    const pid_t pid = c.load();
    if (pid > 0) ::kill(pid, SIGKILL);
  }
  for (auto& c : g_sandbox.children) {
    const pid_t pid = c.exchange(0);
    if (pid > 0) ::waitpid(pid, nullptr, 0);
  }
  if (g_sandbox.dir_set.exchange(false)) rmdir_retrying(g_sandbox.dir);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
  ::_exit(128 + sig);
}

}  // namespace detail

// Owns one child cgroup and the processes adopted into it. One at a time per
// process (the signal state is global); not copyable or movable.
class cgroup_sandbox {
 public:
  cgroup_sandbox() {
    auto& s = detail::g_sandbox;
    s.stop.store(false);
    s.count.store(0);
    s.hook.store(nullptr);
    struct sigaction sa {};
    sa.sa_handler = detail::pnmem_test_sandbox_on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: blocking calls return EINTR
    ::sigaction(SIGINT, &sa, &old_int_);
    ::sigaction(SIGTERM, &sa, &old_term_);
  }

  ~cgroup_sandbox() {
    if (!remove()) {
      std::printf("warning: could not remove %s: %s\n", dir_.c_str(), errno_text().c_str());
    }
    detail::g_sandbox.hook.store(nullptr);
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
  }

  cgroup_sandbox(const cgroup_sandbox&) = delete;
  cgroup_sandbox& operator=(const cgroup_sandbox&) = delete;

  // Creates <parent>/<prefix><pid>[-<n>]: unique per process and per sandbox.
  // False with errno when mkdir failed; dir() is then the path tried.
  bool create(const fs::path& parent, std::string_view prefix) {
    static unsigned serial = 0;
    std::string name = std::string(prefix) + std::to_string(::getpid());
    if (serial++ > 0) name += "-" + std::to_string(serial - 1);
    dir_ = parent / name;
    if (::mkdir(dir_.c_str(), 0755) != 0) return false;
    owned_ = true;
    auto& s = detail::g_sandbox;
    const std::string& text = dir_.native();
    const std::size_t n = std::min(text.size(), sizeof s.dir - 1);
    std::memcpy(s.dir, text.data(), n);
    s.dir[n] = '\0';
    s.dir_set.store(true);
    return true;
  }

  const fs::path& dir() const noexcept { return dir_; }

  // memory.limit_in_bytes (v1) or memory.max (v2); errno on failure.
  bool set_memory_limit(cgroup_version v, std::uint64_t bytes) const {
    return write_file(dir_ / memory_limit_file(v), std::to_string(bytes));
  }

  bool add_pid(pid_t pid) const { return move_into_cgroup(dir_, pid); }

  // A child process of ours, killed and reaped by remove().
  void adopt(pid_t child) noexcept {
    for (auto& c : detail::g_sandbox.children) {
      pid_t expected = 0;
      if (c.compare_exchange_strong(expected, child)) return;
    }
    ::kill(child, SIGKILL);  // no room to track it: never leave one behind
  }

  // The caller reaped `child` itself.
  void disown(pid_t child) noexcept {
    for (auto& c : detail::g_sandbox.children) {
      pid_t expected = child;
      c.compare_exchange_strong(expected, 0);
    }
  }

  // Kills and reaps the adopted children, then removes the cgroup (gone
  // already counts). False with errno when it could not be removed.
  bool remove() {
    auto& s = detail::g_sandbox;
    for (auto& c : s.children) {
      const pid_t pid = c.load();
      if (pid > 0) ::kill(pid, SIGKILL);
    }
    for (auto& c : s.children) {
      const pid_t pid = c.exchange(0);
      if (pid > 0) {
        while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
        }
      }
    }
    if (!owned_) return true;
    s.dir_set.store(false);
    if (!remove_cgroup(dir_)) {
      s.dir_set.store(true);
      return false;
    }
    owned_ = false;
    return true;
  }

  // A SIGINT or SIGTERM arrived since the sandbox was made.
  static bool stop_requested() noexcept { return detail::g_sandbox.stop.load(); }

  // Called from the handler on the first signal (e.g. to wake a wait).
  static void set_signal_hook(signal_hook hook) noexcept { detail::g_sandbox.hook.store(hook); }

 private:
  fs::path dir_;
  bool owned_ = false;
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

}  // namespace pnmem::test
