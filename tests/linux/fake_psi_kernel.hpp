// tests/linux/fake_psi_kernel.hpp - a fake kernel behind the OS-call seam
// (os_calls.hpp) for psi_trigger's tests. Test code only, header-only.
//
//   fake_scope f;                          // installs a fresh fake until scope exit
//   f.k.open_errno[host_file] = EPERM;     // script it, then
//   psi_trigger t(fake_config());          // arm against it and look at f.k
//
// Pressure files under /fake are the fake's: opens, writes (checked against a
// write rule, like the kernel's psi_trigger_create), fstatfs, close and
// scripted ppoll revents. Every other path and descriptor (the eventfd, real
// files) goes to the real calls, so interrupts and timeouts stay real.
#pragma once

#include <fcntl.h>
#include <linux/magic.h>

#include <cerrno>
#include <cstdio>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "os_calls.hpp"
#include "pnmem/linux/psi_trigger.hpp"

namespace pnmem::test {

inline const std::string host_file = "/fake/proc/pressure/memory";
inline const std::string cgroup_file = "/fake/sys/fs/cgroup/job/memory.pressure";

struct fake_kernel {
  std::map<std::string, int> open_errno;  // path -> errno from open()
  std::map<std::string, long> fs_type;     // path -> f_type; default procfs / cgroup2 by name
  // Return 0 to accept a trigger text, or the errno to refuse it with.
  int (*write_rule)(const std::string& text) = nullptr;
  // The cgroup file refuses every trigger with this errno (ENOSPC, as no kernel
  // would: "any other refusal").
  bool cgroup_writes_fail = false;
  int cgroup_write_errno = ENOSPC;
  struct poll_step {
    int err = 0;                           // ppoll() fails with this
    std::map<std::string, short> revents;  // otherwise: path -> revents of its trigger fds
  };
  std::deque<poll_step> poll_script;  // then the real ppoll() on the real fds

  static constexpr int first_fd = 1000;  // far above real descriptors
  int next_fd = first_fd;
  std::map<int, std::string> open_fds;
  std::vector<std::string> opened;    // paths, in order
  std::vector<std::string> writes;    // texts, without the NUL
  std::vector<bool> writes_had_nul;
  std::vector<::timespec> poll_timeouts;
  std::vector<::nfds_t> poll_nfds;    // descriptors polled, per ppoll() call
  int closes = 0;

  // The next scripted ppoll() sees what a removed cgroup's memory.pressure
  // reports: error and priority together.
  void remove_cgroup_at_next_poll() {
    poll_script.push_back({0, {{cgroup_file, static_cast<short>(POLLERR | POLLPRI)}}});
  }
};

// An unprivileged 6.x kernel: EINVAL unless 500 ms <= window <= 10 s,
// window a multiple of 2 s and 0 < stall <= window.
inline int unprivileged_kernel(const std::string& text) {
  char kind[8] = {};
  unsigned long long stall = 0;
  unsigned long long window = 0;
  if (std::sscanf(text.c_str(), "%7s %llu %llu", kind, &stall, &window) != 3) return EINVAL;
  if (window < 500000 || window > 10000000 || window % 2000000 != 0) return EINVAL;
  if (stall == 0 || stall > window) return EINVAL;
  return 0;
}
inline int refuse_all_einval(const std::string&) { return EINVAL; }
inline int refuse_sub_2s_eperm(const std::string& text) { return unprivileged_kernel(text) == 0 ? 0 : EPERM; }
inline int refuse_all_ebusy(const std::string&) { return EBUSY; }

namespace fake_psi {

// The seam takes plain function pointers: the fake in force is one global.
inline fake_kernel* fake = nullptr;

inline const pnmem::linux_os::calls& real() { return pnmem::linux_os::real_calls(); }
inline bool is_fake_path(std::string_view path) { return path.rfind("/fake/", 0) == 0 || path.rfind("/nope/", 0) == 0; }
inline bool is_fake_fd(int fd) { return fd >= fake_kernel::first_fd; }

inline int open(const char* path, int flags) {
  if (!is_fake_path(path)) return real().open(path, flags);
  CHECK((flags & O_RDWR) != 0);
  CHECK((flags & O_NONBLOCK) != 0);
  CHECK((flags & O_CLOEXEC) != 0);
  const auto it = fake->open_errno.find(path);
  if (it != fake->open_errno.end()) {
    errno = it->second;
    return -1;
  }
  fake->opened.emplace_back(path);
  const int fd = fake->next_fd++;
  fake->open_fds[fd] = path;
  return fd;
}

inline ssize_t write(int fd, const void* buf, std::size_t n) {
  if (!is_fake_fd(fd)) return real().write(fd, buf, n);  // the eventfd: interrupt()
  REQUIRE(fake->open_fds.count(fd) == 1);
  const auto* p = static_cast<const char*>(buf);
  const bool nul = n > 0 && p[n - 1] == '\0';
  fake->writes_had_nul.push_back(nul);
  // The real kernel overwrites the last byte with a NUL.
  const std::string text(p, n > 0 ? n - 1 : 0);
  fake->writes.push_back(text);
  int err = fake->write_rule != nullptr ? fake->write_rule(text) : 0;
  if (err == 0 && fake->cgroup_writes_fail && fake->open_fds[fd] == cgroup_file) err = fake->cgroup_write_errno;
  if (err != 0) {
    errno = err;
    return -1;
  }
  return static_cast<ssize_t>(n);
}

// The real ppoll() on the real descriptors (the eventfd); poll() skips negative fds.
inline int real_ppoll_masking_fakes(::pollfd* fds, ::nfds_t n, const ::timespec* timeout) {
  std::vector<int> saved(n);
  for (::nfds_t i = 0; i < n; ++i) {
    saved[i] = fds[i].fd;
    if (is_fake_fd(fds[i].fd)) fds[i].fd = -1;
  }
  const int r = real().ppoll(fds, n, timeout);
  for (::nfds_t i = 0; i < n; ++i) fds[i].fd = saved[i];
  return r;
}

inline int ppoll(::pollfd* fds, ::nfds_t n, const ::timespec* timeout) {
  fake->poll_timeouts.push_back(*timeout);
  fake->poll_nfds.push_back(n);
  if (fake->poll_script.empty()) return real_ppoll_masking_fakes(fds, n, timeout);
  const auto step = fake->poll_script.front();
  fake->poll_script.pop_front();
  if (step.err != 0) {
    errno = step.err;
    return -1;
  }
  // Scripted revents on the fake fds, the real state of the real ones (a pending interrupt).
  const ::timespec now{};
  if (real_ppoll_masking_fakes(fds, n, &now) < 0) return -1;
  int ready = 0;
  for (::nfds_t i = 0; i < n; ++i) {
    const auto it = fake->open_fds.find(fds[i].fd);
    if (it != fake->open_fds.end()) {
      const auto r = step.revents.find(it->second);
      if (r != step.revents.end()) fds[i].revents = r->second;
    }
    if (fds[i].revents != 0) ++ready;
  }
  return ready;
}

inline int close(int fd) {
  if (!is_fake_fd(fd)) return real().close(fd);
  CHECK(fake->open_fds.erase(fd) == 1);
  ++fake->closes;
  return 0;
}

inline int fstatfs(int fd, struct ::statfs* st) {
  if (!is_fake_fd(fd)) return real().fstatfs(fd, st);
  REQUIRE(fake->open_fds.count(fd) == 1);
  const std::string& path = fake->open_fds[fd];
  const auto it = fake->fs_type.find(path);
  *st = {};
  st->f_type = it != fake->fs_type.end() ? it->second : (path == cgroup_file ? CGROUP2_SUPER_MAGIC : PROC_SUPER_MAGIC);
  return 0;
}

inline pnmem::linux_os::calls table() {
  pnmem::linux_os::calls c = real();
  c.open = fake_psi::open;
  c.write = fake_psi::write;
  c.ppoll = fake_psi::ppoll;
  c.close = fake_psi::close;
  c.fstatfs = fake_psi::fstatfs;
  return c;
}

}  // namespace fake_psi

// Installs a fresh fake for one test: every psi_trigger made and used inside
// the scope talks to it.
struct fake_scope {
  fake_kernel k;
  pnmem::linux_os::calls_override seam{fake_psi::table()};
  explicit fake_scope(int (*rule)(const std::string&) = unprivileged_kernel) {
    k.write_rule = rule;
    fake_psi::fake = &k;
  }
  ~fake_scope() { fake_psi::fake = nullptr; }
  fake_scope(const fake_scope&) = delete;
  fake_scope& operator=(const fake_scope&) = delete;
};

inline pnmem::psi_trigger_config fake_config(std::vector<pnmem::psi_trigger_spec> specs = {
                                                 pnmem::default_psi_trigger}) {
  pnmem::psi_trigger_config c;
  c.root = "/fake";
  c.triggers = std::move(specs);
  return c;
}

// The same, with the cgroup's pressure file as well.
inline pnmem::psi_trigger_config fake_config_with_cgroup(std::vector<pnmem::psi_trigger_spec> specs = {
                                                             pnmem::default_psi_trigger}) {
  pnmem::psi_trigger_config c = fake_config(std::move(specs));
  c.cgroup_pressure = cgroup_file;
  return c;
}

}  // namespace pnmem::test
