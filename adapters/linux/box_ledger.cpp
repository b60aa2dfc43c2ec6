// box_ledger.cpp - the box book in a shared file: making, checking, joining, locking, freeing the dead.
#include "pnmem/linux/box_ledger.hpp"

#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "pnmem/clock_ns.hpp"
#include "pnmem/detail/printable.hpp"

namespace pnmem::linux_os {

namespace {

static_assert(sizeof(pthread_mutex_t) <= box_lock_bytes, "the segment's lock bytes hold a pthread mutex");
static_assert(alignof(pthread_mutex_t) <= 64);

// The byte a holder's liveness lock covers: past the segment's data (a lock is not its bytes).
off_t liveness_byte(std::uint32_t holder) noexcept { return static_cast<off_t>(sizeof(box_segment) + 1 + holder); }

pthread_mutex_t* mutex_of(box_segment* s) noexcept { return reinterpret_cast<pthread_mutex_t*>(s->lock); }

std::string errno_text(int err) { return std::strerror(err); }

// The adapter's side of one link.
struct box_os {
  int fd = -1;
  box_segment* seg = nullptr;  // null once detached (a fork's child)
  std::string path;
  std::chrono::milliseconds lock_timeout{1000};
  std::function<void(std::string_view)> log;
  box_options options;  // what it was joined with, for a fork's child to join again
};

void say(const std::function<void(std::string_view)>& log, const std::string& line) {
  if (log) {
    log(line);
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

// Whether someone holds holder i's liveness byte (another open file description: a live process).
// An error reads as alive: a holder is freed only when the kernel says its lock is gone.
bool holder_alive(int fd, std::uint32_t i) noexcept {
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = liveness_byte(i);
  fl.l_len = 1;
  if (::fcntl(fd, F_OFD_GETLK, &fl) != 0) return true;
  return fl.l_type != F_UNLCK;
}

// Frees every live holder but `self` whose process is gone (the lock held). How many.
int reap_dead(int fd, box_segment* s, std::uint32_t self) noexcept {
  int freed = 0;
  for (std::uint32_t i = 0; i < box_max_holders; ++i) {
    if (i == self || s->holders[i].state != box_holder_state::live) continue;
    if (!holder_alive(fd, i)) {
      box_free_holder(*s, i);
      ++freed;
    }
  }
  return freed;
}

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// The segment's lock, within `timeout`. A dead owner's state is counted again. False: not had.
enum class lock_result { held, recovered, timed_out, broken };
lock_result lock_segment(int fd, box_segment* s, std::uint32_t self, std::chrono::milliseconds timeout) noexcept {
  // A free lock is taken without reading the clock (the deadline is for a lock someone holds).
  // A lock held by another process for its few hundred nanoseconds is waited for spinning a little
  // first: sleeping in the kernel and being woken costs microseconds.
  int r = ::pthread_mutex_trylock(mutex_of(s));
  // (A robust mutex spins none of itself. 64 tries 16 pauses apart: box_contended/2 and /8 were 575-587
  // and 2288-2405 ns, against 769-1277 and 4408-4870 with no spin and 687-1523 and 2726-3219 with
  // glibc's adaptive 100 tries a pause apart; BENCHMARKS.md.)
  for (int spin = 0; r == EBUSY && spin < 64; ++spin) {
    for (int k = 0; k < 16; ++k) cpu_relax();
    r = ::pthread_mutex_trylock(mutex_of(s));
  }
  if (r == EBUSY) {
    timespec until{};
    ::clock_gettime(CLOCK_MONOTONIC, &until);
    const long long ns = until.tv_nsec + static_cast<long long>(timeout.count() % 1000) * 1'000'000;
    until.tv_sec += static_cast<time_t>(timeout.count() / 1000 + ns / 1'000'000'000);
    until.tv_nsec = static_cast<long>(ns % 1'000'000'000);
    r = ::pthread_mutex_clocklock(mutex_of(s), CLOCK_MONOTONIC, &until);
  }
  if (r == 0) return lock_result::held;
  if (r == EOWNERDEAD) {
    reap_dead(fd, s, self);
    box_recount(*s);
    ::pthread_mutex_consistent(mutex_of(s));
    return lock_result::recovered;
  }
  return r == ETIMEDOUT ? lock_result::timed_out : lock_result::broken;
}

bool link_lock(box_link& l) noexcept {
  auto* os = static_cast<box_os*>(l.os);
  const lock_result r = lock_segment(os->fd, os->seg, l.holder, os->lock_timeout);
  if (r == lock_result::recovered && l.log != nullptr) {
    l.log(l, ("pnmem: box ledger " + os->path + ": a process died holding its lock; the dead were freed and "
              "the totals counted again").c_str());
  }
  return r == lock_result::held || r == lock_result::recovered;
}

void link_unlock(box_link& l) noexcept { ::pthread_mutex_unlock(mutex_of(static_cast<box_os*>(l.os)->seg)); }

void link_reap(box_link& l) noexcept {
  auto* os = static_cast<box_os*>(l.os);
  reap_dead(os->fd, os->seg, l.holder);
}

void link_log(box_link& l, const char* line) noexcept {
  try {
    say(static_cast<box_os*>(l.os)->log, line);
  } catch (...) {  // a sink that throws loses its line, nothing else
  }
}

void link_detach(box_link& l) noexcept {
  auto* os = static_cast<box_os*>(l.os);
  if (os->seg == nullptr) return;
  ::munmap(os->seg, sizeof(box_segment));
  ::close(os->fd);  // the parent's open file description (and its liveness lock) stays the parent's
  os->seg = nullptr;
  os->fd = -1;
  l.seg = nullptr;
}

std::shared_ptr<box_link> link_rejoin(box_link& l) {
  const box_join j = join_box(static_cast<box_os*>(l.os)->options);
  if (j.link == nullptr && !j.problem.empty()) say(static_cast<box_os*>(l.os)->log, j.problem);
  return j.link;
}

std::string comm_of_self() {
  char buf[32] = {};
  const int fd = ::open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  std::string s(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s;
}

std::uint64_t fnv64(std::string_view s) noexcept {
  std::uint64_t h = 1469598103934665603ull;
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

bool name_ok(std::string_view n) noexcept {
  if (n.empty() || n.size() > 64 || n.front() == '.') return false;
  for (const char c : n) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                    c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

// The group PN_LEDGER_GROUP names: its gid, or a problem.
bool group_id(const std::string& name, gid_t& gid, std::string& problem) {
  std::vector<char> buf(16384);
  group g{};
  group* found = nullptr;
  const int r = ::getgrnam_r(name.c_str(), &g, buf.data(), buf.size(), &found);
  if (r != 0 || found == nullptr) {
    problem = "PN_LEDGER_GROUP=\"" + detail::printable(name) + "\": no such group";
    return false;
  }
  gid = found->gr_gid;
  return true;
}

// What is wrong with the file at fd for this process (owner, mode, kind, size), or "".
std::string file_problem(int fd, bool with_group, gid_t gid, bool check_size = true) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return "fstat: " + errno_text(errno);
  if (!S_ISREG(st.st_mode)) return "it is not a regular file";
  const unsigned mode = st.st_mode & 0777u;
  char octal[8];
  std::snprintf(octal, sizeof octal, "%04o", mode);
  if ((mode & 0007u) != 0) return std::string("other users may open it (mode ") + octal + ")";
  if (with_group) {
    if (st.st_gid != gid) return "its group is gid " + std::to_string(st.st_gid) + ", not PN_LEDGER_GROUP's " + std::to_string(gid);
  } else {
    if (st.st_uid != ::geteuid()) {
      return "it belongs to uid " + std::to_string(st.st_uid) + ", not this process's " + std::to_string(::geteuid()) +
             " (PN_LEDGER_GROUP shares a ledger between users)";
    }
    if ((mode & 0070u) != 0) return std::string("its group may open it (mode ") + octal + ") and no PN_LEDGER_GROUP is set";
  }
  if (check_size && static_cast<std::uint64_t>(st.st_size) != sizeof(box_segment)) {
    return "its size is " + std::to_string(st.st_size) + " bytes, not " + std::to_string(sizeof(box_segment)) +
           " (another pnmem version, or not a pnmem ledger)";
  }
  return {};
}

// The identity fields, read without the lock (written once, before the file is linked in place).
std::string identity_problem(const box_segment* s) {
  if (std::memcmp(s->magic, box_magic, sizeof box_magic) != 0) return "it is not a pnmem ledger (no magic)";
  if (s->version != box_version) return "its version is " + std::to_string(s->version) + ", not " + std::to_string(box_version) + " (another pnmem version)";
  if (s->layout != box_layout() || s->size != sizeof(box_segment)) return "its layout is another build's (another pnmem version)";
  return {};
}

// Makes the scope's file: a fresh segment in a temporary file beside it, linked into place only once
// it is whole, so no process ever opens a half-made one. EEXIST: another process made it first.
// With `replace`, it is renamed over the file at `path` (a stale ledger: replace_stale) instead.
int create_file(const std::string& path, const std::string& scope, bool with_group, gid_t gid, std::string& problem,
                bool replace = false) {
  const std::size_t slash = path.rfind('/');
  std::string tmpl = (slash == std::string::npos ? std::string(".") : path.substr(0, slash)) + "/.pnmem-ledger-XXXXXX";
  const int fd = ::mkostemp(tmpl.data(), O_CLOEXEC);  // 0600
  if (fd < 0) {
    problem = "cannot make it: " + errno_text(errno);
    return -1;
  }
  auto fail = [&](const std::string& what) {
    problem = what + ": " + errno_text(errno);
    ::unlink(tmpl.c_str());
    ::close(fd);
    return -1;
  };
  if (with_group && (::fchown(fd, static_cast<uid_t>(-1), gid) != 0 || ::fchmod(fd, 0660) != 0)) {
    return fail("cannot give it to PN_LEDGER_GROUP");
  }
  if (::ftruncate(fd, static_cast<off_t>(sizeof(box_segment))) != 0) return fail("cannot size it");
  void* map = ::mmap(nullptr, sizeof(box_segment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return fail("cannot map it");
  auto* s = static_cast<box_segment*>(map);
  box_init(*s, scope.c_str(), static_cast<std::uint32_t>(::geteuid()), static_cast<std::uint32_t>(with_group ? gid : ::getegid()),
           steady_now_ns());
  pthread_mutexattr_t a;
  ::pthread_mutexattr_init(&a);
  ::pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  ::pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
  const int init = ::pthread_mutex_init(new (s->lock) pthread_mutex_t, &a);
  ::pthread_mutexattr_destroy(&a);
  ::munmap(map, sizeof(box_segment));
  if (init != 0) {
    errno = init;
    return fail("cannot make its lock");
  }
  if (replace) {
    if (::rename(tmpl.c_str(), path.c_str()) != 0) return fail("cannot put it in place");
    return fd;
  }
  if (::link(tmpl.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmpl.c_str());
    ::close(fd);
    if (err == EEXIST) return -2;
    problem = "cannot put it in place: " + errno_text(err);
    return -1;
  }
  ::unlink(tmpl.c_str());
  return fd;
}

// Whether the file at fd is a pnmem ledger (its magic) of another version or build: another size,
// version or layout. Such a file is left by processes of a pnmem this one is not (an upgrade).
bool other_version(int fd) noexcept {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return false;
  // Only the identity fields are read, where every version has them.
  unsigned char head[offsetof(box_segment, owner_uid)];
  if (static_cast<std::uint64_t>(st.st_size) < sizeof head || ::pread(fd, head, sizeof head, 0) != static_cast<ssize_t>(sizeof head) ||
      std::memcmp(head + offsetof(box_segment, magic), box_magic, sizeof box_magic) != 0) {
    return false;
  }
  std::uint32_t version = 0;
  std::uint32_t layout = 0;
  std::uint64_t size = 0;
  std::memcpy(&version, head + offsetof(box_segment, version), sizeof version);
  std::memcpy(&layout, head + offsetof(box_segment, layout), sizeof layout);
  std::memcpy(&size, head + offsetof(box_segment, size), sizeof size);
  return static_cast<std::uint64_t>(st.st_size) != sizeof(box_segment) || version != box_version ||
         layout != box_layout() || size != sizeof(box_segment);
}

// A stale ledger at `path` (fd: open on it): of another pnmem version, and no process holds it. Every
// version's holders hold a lock on a byte of the file for as long as they are joined, so no lock on any
// byte means none is: its figures are promises of the dead. It is replaced by a fresh one (renamed over
// it) under a lock on the whole file, which a process of either version joining it meanwhile cannot
// take its liveness byte under, and which tells a second process replacing it to wait for the first.
enum class stale_result { replaced, held, failed };
stale_result replace_stale(const std::string& path, int fd, const std::string& scope, bool with_group, gid_t gid,
                           std::string& problem) {
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = 0;
  fl.l_len = 0;  // the whole file, however long
  if (::fcntl(fd, F_OFD_SETLK, &fl) != 0) return stale_result::held;
  struct stat open_st {};
  struct stat path_st {};
  if (::fstat(fd, &open_st) != 0 || ::lstat(path.c_str(), &path_st) != 0 || open_st.st_dev != path_st.st_dev ||
      open_st.st_ino != path_st.st_ino) {
    return stale_result::held;  // replaced meanwhile by another process: open the path again
  }
  const int fresh = create_file(path, scope, with_group, gid, problem, /*replace=*/true);
  if (fresh < 0) return stale_result::failed;
  ::close(fresh);
  return stale_result::replaced;
}

struct opened {
  int fd = -1;
  box_segment* seg = nullptr;
  std::string problem;
  bool missing = false;
  bool stale_replaced = false;  // a stale ledger was there and is replaced: open it again
  bool stale_held = false;      // one of another version that a process holds (or is replacing)
};

// Opens (or, when `create`, makes) the scope's file and maps it, its owner, mode, size and identity checked.
// When `create`, a stale ledger there (replace_stale) is replaced first.
opened open_one(const std::string& path, const std::string& scope, bool with_group, gid_t gid, bool create) {
  opened out;
  for (int attempt = 0; attempt < 2 && out.fd < 0; ++attempt) {
    out.fd = ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (out.fd >= 0) break;
    if (errno == ELOOP) {
      out.problem = "it is a symbolic link";
      return out;
    }
    if (errno != ENOENT) {
      out.problem = "cannot open it: " + errno_text(errno);
      return out;
    }
    if (!create) {
      out.missing = true;
      out.problem = "no such file (no process has joined this scope)";
      return out;
    }
    const int fd = create_file(path, scope, with_group, gid, out.problem);
    if (fd == -1) return out;
    if (fd >= 0) out.fd = fd;  // -2: made meanwhile by another process: open that one
  }
  if (out.fd < 0) {
    out.problem = "cannot open it";
    return out;
  }
  out.problem = file_problem(out.fd, with_group, gid);
  if (out.problem.empty()) {
    void* map = ::mmap(nullptr, sizeof(box_segment), PROT_READ | PROT_WRITE, MAP_SHARED, out.fd, 0);
    if (map == MAP_FAILED) {
      out.problem = "cannot map it: " + errno_text(errno);
    } else {
      out.seg = static_cast<box_segment*>(map);
      out.problem = identity_problem(out.seg);
    }
  }
  if (!out.problem.empty()) {
    if (out.seg != nullptr) ::munmap(out.seg, sizeof(box_segment));
    // A ledger of another pnmem version whose holders are all gone (an upgrade's leftover) is replaced;
    // one a live process holds stays, refused (the two versions cannot count in one book).
    if (create && file_problem(out.fd, with_group, gid, /*check_size=*/false).empty() && other_version(out.fd)) {
      std::string why;
      switch (replace_stale(path, out.fd, scope, with_group, gid, why)) {
        case stale_result::replaced:
          out.stale_replaced = true;
          break;
        case stale_result::held:
          out.problem += "; a live process of that version holds it";
          out.stale_held = true;
          break;
        case stale_result::failed:
          out.problem += "; it could not be replaced: " + why;
          break;
      }
    }
    ::close(out.fd);
    out.fd = -1;
    out.seg = nullptr;
  }
  return out;
}

opened open_segment(const std::string& path, const std::string& scope, const box_options& o, bool create) {
  const bool with_group = !o.group.empty();
  gid_t gid = 0;
  opened out;
  if (with_group && !group_id(o.group, gid, out.problem)) return out;
  // A stale ledger replaced (by this process or, while it held it, by another) is opened again; a few
  // milliseconds for one another process is replacing.
  for (int attempt = 0;; ++attempt) {
    out = open_one(path, scope, with_group, gid, create);
    if (out.stale_replaced && attempt < 4) continue;
    if (out.stale_held && attempt < 4) {
      ::usleep(2000);
      continue;
    }
    return out;
  }
}

std::string refused(const std::string& path, const std::string& why) {
  return "pnmem: box ledger " + detail::printable(path) + " refused: " + why + "; this process counts only its own promises";
}

}  // namespace

box_options box_options_from_env(box_options base) {
  if (const char* v = std::getenv("PN_LEDGER")) base.ledger = v;
  if (const char* v = std::getenv("PN_LEDGER_GROUP")) base.group = v;
  return base;
}

box_path box_path_for(const box_options& o) {
  box_path out;
  const std::string& v = o.ledger;
  if (v == "off") {
    out.off = true;
    return out;
  }
  const std::string prefix = o.dir + "/pnmem-ledger-";
  if (v.empty() || v == "auto") {
    const std::string who = o.group.empty() ? std::to_string(::geteuid()) : "g" + o.group;
    char key[24];
    std::snprintf(key, sizeof key, "cg%012llx", static_cast<unsigned long long>(fnv64(o.limit_cgroup) & 0xffffffffffffull));
    out.path = prefix + who + "-" + (o.limit_cgroup.empty() ? std::string("box") : std::string(key));
    return out;
  }
  if (v.front() == '/') {
    if (v.back() == '/') {
      out.problem = "PN_LEDGER=\"" + detail::printable(v) + "\": a directory, not a file";
    } else {
      out.path = v;
    }
    return out;
  }
  if (!name_ok(v)) {
    out.problem = "PN_LEDGER=\"" + detail::printable(v) +
                  "\": not a scope (use off, auto, a name of up to 64 letters, digits, '-', '_' and '.', or an absolute path)";
    return out;
  }
  out.path = prefix + v;
  return out;
}

box_join join_box(const box_options& o) {
  box_join out;
  const box_path p = box_path_for(o);
  if (p.off) {
    out.off = true;
    return out;
  }
  if (!p.problem.empty()) {
    out.problem = "pnmem: " + p.problem + "; this process counts only its own promises";
    return out;
  }
  out.path = p.path;
  const std::string scope = o.ledger.empty() || o.ledger == "auto" ? p.path.substr(p.path.rfind('/') + 1) : o.ledger;
  opened f = open_segment(p.path, scope, o, /*create=*/true);
  if (f.seg == nullptr) {
    out.problem = refused(p.path, f.problem);
    return out;
  }
  auto close_all = [&] {
    ::munmap(f.seg, sizeof(box_segment));
    ::close(f.fd);
  };
  const lock_result lr = lock_segment(f.fd, f.seg, box_no_holder, o.lock_timeout);
  if (lr == lock_result::timed_out || lr == lock_result::broken) {
    close_all();
    out.problem = refused(p.path, lr == lock_result::timed_out ? "its lock could not be had within " +
                                                                     std::to_string(o.lock_timeout.count()) + " ms"
                                                               : "its lock is not a lock");
    return out;
  }
  std::string problem = box_segment_problem(f.seg, sizeof(box_segment), o.box_total_bytes);
  std::uint32_t holder = box_no_holder;
  if (problem.empty()) {
    reap_dead(f.fd, f.seg, box_no_holder);
    for (std::uint32_t i = 0; i < box_max_holders && holder == box_no_holder; ++i) {
      if (f.seg->holders[i].state != box_holder_state::free) continue;
      struct flock fl {};
      fl.l_type = F_WRLCK;
      fl.l_whence = SEEK_SET;
      fl.l_start = liveness_byte(i);
      fl.l_len = 1;
      if (::fcntl(f.fd, F_OFD_SETLK, &fl) != 0) continue;  // held by someone: not ours to take
      holder = i;
    }
    if (holder == box_no_holder) {
      problem = "all " + std::to_string(box_max_holders) + " holders are taken";
    } else {
      const std::string comm = comm_of_self();
      box_holder& h = f.seg->holders[holder];
      const std::uint32_t generation = h.generation;
      h = box_holder{};
      h.state = box_holder_state::live;
      h.generation = generation;
      h.pid = static_cast<std::int32_t>(::getpid());
      h.joined_ns = steady_now_ns();
      std::strncpy(h.comm, comm.c_str(), sizeof h.comm - 1);
      ++f.seg->holders_live;
    }
  }
  ::pthread_mutex_unlock(mutex_of(f.seg));
  if (!problem.empty()) {
    close_all();
    out.problem = refused(p.path, problem);
    return out;
  }
  auto* os = new box_os{f.fd, f.seg, p.path, o.lock_timeout, o.log, o};
  auto* link = new box_link{};
  link->seg = f.seg;
  link->holder = holder;
  link->lock = &link_lock;
  link->unlock = &link_unlock;
  link->reap = &link_reap;
  link->log = &link_log;
  link->detach = &link_detach;
  link->rejoin = &link_rejoin;
  link->os = os;
  std::strncpy(link->scope, scope.c_str(), sizeof link->scope - 1);
  out.link = std::shared_ptr<box_link>(link, [](box_link* l) {
    auto* d = static_cast<box_os*>(l->os);
    if (d->seg != nullptr) {
      // Leave the book: the slot is freed now (its reservations end with the ledger), not at the next reap.
      const lock_result r = lock_segment(d->fd, d->seg, l->holder, d->lock_timeout);
      if (r == lock_result::held || r == lock_result::recovered) {
        box_free_holder(*d->seg, l->holder);
        ::pthread_mutex_unlock(mutex_of(d->seg));
      }
      ::munmap(d->seg, sizeof(box_segment));
      ::close(d->fd);  // drops the liveness lock
    }
    delete d;
    delete l;
  });
  return out;
}

box_read read_box(const box_options& o) {
  box_read out;
  const box_path p = box_path_for(o);
  if (p.off) {
    out.problem = "PN_LEDGER=off: no box ledger";
    return out;
  }
  if (!p.problem.empty()) {
    out.problem = p.problem;
    return out;
  }
  const std::string scope = o.ledger.empty() || o.ledger == "auto" ? p.path.substr(p.path.rfind('/') + 1) : o.ledger;
  opened f = open_segment(p.path, scope, o, /*create=*/false);
  if (f.seg == nullptr) {
    out.missing = f.missing;
    out.problem = detail::printable(p.path) + ": " + f.problem;
    return out;
  }
  const lock_result lr = lock_segment(f.fd, f.seg, box_no_holder, o.lock_timeout);
  if (lr == lock_result::timed_out || lr == lock_result::broken) {
    ::munmap(f.seg, sizeof(box_segment));
    ::close(f.fd);
    out.problem = detail::printable(p.path) + ": " +
                  (lr == lock_result::timed_out ? "its lock could not be had within " + std::to_string(o.lock_timeout.count()) + " ms"
                                                : std::string("its lock is not a lock"));
    return out;
  }
  std::string problem = box_segment_problem(f.seg, sizeof(box_segment), o.box_total_bytes);
  box_view v;
  if (problem.empty()) {
    reap_dead(f.fd, f.seg, box_no_holder);
    const box_segment& s = *f.seg;
    v.path = p.path;
    v.scope = s.scope;
    v.now_ns = steady_now_ns();
    v.last_sample_ns = s.last_sample_ns;
    v.unsettled_bytes = s.unsettled_total;
    v.owner_uid = s.owner_uid;
    std::vector<box_holder_view> per(box_max_holders);
    // What the box's newest sample has not seen, per holder: the ring's entries from that sample on.
    for (const box_ring* r : {&s.settled, &s.credits}) {
      const std::uint64_t oldest = r->seq > box_ring_capacity ? r->seq - box_ring_capacity : 0;
      for (std::uint64_t k = oldest; k < r->seq; ++k) {
        const box_ring_entry& e = r->entries[k % box_ring_capacity];
        if (e.ns < s.last_sample_ns || e.holder >= box_max_holders) continue;
        if (r == &s.settled) {
          per[e.holder].settled_unseen_bytes += e.bytes;
          v.settled_unseen_bytes += e.bytes;
        } else {
          per[e.holder].credited_unseen_bytes += e.bytes;
          v.credited_unseen_bytes += e.bytes;
        }
      }
    }
    for (std::uint32_t i = 0; i < box_max_holders; ++i) {
      if (s.holders[i].state != box_holder_state::live) continue;
      per[i].index = i;
      per[i].holder = s.holders[i];
      v.holders.push_back(per[i]);
    }
    for (std::uint32_t d = 0; d < s.dies_used && d < box_max_dies; ++d) {
      const box_die& die = s.dies[d];
      const box_die_figures fig = box_die_seen_pending(s, d);
      box_die_view dv;
      dv.uuid = box_die_id(die);
      dv.reserved_bytes = die.unsettled_total;
      dv.reservations = die.reservations;
      dv.settled_unseen_bytes = fig.pending - (fig.pending < die.unsettled_total ? fig.pending : die.unsettled_total);
      dv.retiring_bytes = die.retiring_total;
      for (std::uint32_t h = 0; h < box_max_holders; ++h) {
        if (s.holders[h].state != box_holder_state::live) continue;
        if (s.holder_die_bytes[h][d] == 0 && s.holder_die_retiring[h][d] == 0) continue;
        dv.holders.push_back({s.holders[h].pid, s.holder_die_bytes[h][d], s.holder_die_count[h][d],
                              s.holder_die_retiring[h][d]});
      }
      v.dies.push_back(std::move(dv));
    }
  }
  ::pthread_mutex_unlock(mutex_of(f.seg));
  ::munmap(f.seg, sizeof(box_segment));
  ::close(f.fd);
  if (!problem.empty()) {
    out.problem = detail::printable(p.path) + ": refused: " + problem;
    return out;
  }
  out.view = std::move(v);
  return out;
}

}  // namespace pnmem::linux_os
