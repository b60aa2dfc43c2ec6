// os_calls.hpp - the one seam every OS call of the Linux adapter goes through.
//
// Private to the Linux adapter (not installed). In the spirit of {fmt}'s
// FMT_SYSTEM and test/posix-mock.h: the adapter never names ::open, ::pread,
// ::ppoll ... itself but calls linux_os::sys().open(...), so a test can make any
// of them fail (or serve scripted bytes) with errnos the kernel rarely produces
// on demand, without a second seam per file.
//
//   linux_os::calls c = linux_os::real_calls();
//   c.fstatfs = [](int, struct ::statfs*) { errno = EIO; return -1; };
//   const linux_os::calls_override scope(c);   // until the end of the scope
//
// Each call reports errors through errno, like the real one. What is not here
// is not a syscall worth failing: steady_clock reads (vDSO) and sleeps.
#pragma once

#include <poll.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/vfs.h>
#include <time.h>

#include <cstddef>

namespace pnmem::linux_os {

struct calls {
  int (*open)(const char* path, int flags);  // never O_CREAT: no mode argument
  ssize_t (*pread)(int fd, void* buf, std::size_t count, off_t offset);
  ssize_t (*read)(int fd, void* buf, std::size_t count);
  ssize_t (*write)(int fd, const void* buf, std::size_t count);
  int (*close)(int fd);
  int (*fstat)(int fd, struct ::stat* st);
  int (*fstatfs)(int fd, struct ::statfs* st);
  int (*ppoll)(::pollfd* fds, ::nfds_t count, const ::timespec* timeout);  // no signal mask
  int (*eventfd)(unsigned int initial, int flags);
};

// The real calls.
const calls& real_calls() noexcept;

// The table in force: real_calls() unless a calls_override is alive.
// Lock-free (one atomic load), so async-signal-safe: psi_trigger::interrupt()
// writes its eventfd through it.
const calls& sys() noexcept;

// real_calls() with one entry replaced, for a calls_override:
//   const calls_override scope(real_calls_but(&calls::pread, scripted_pread));
template <class Fn>
calls real_calls_but(Fn calls::*entry, Fn replacement) noexcept {
  calls c = real_calls();
  c.*entry = replacement;
  return c;
}

// Test-only: installs `replacement` (copied) until destroyed, then puts back the
// table that was in force. Scopes nest; destroy them in reverse order. Install
// before the threads that make calls start, remove after they stopped.
class calls_override {
 public:
  explicit calls_override(const calls& replacement) noexcept;
  ~calls_override();
  calls_override(const calls_override&) = delete;
  calls_override& operator=(const calls_override&) = delete;

 private:
  calls table_;
  const calls* previous_;
};

}  // namespace pnmem::linux_os
