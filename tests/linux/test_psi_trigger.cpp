// psi_trigger against a fake kernel (through the psi_syscalls seam) and, where
// it has PSI, the real one.
#include "pnmem/linux/psi_trigger.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "pnmem/watcher.hpp"

using namespace pnmem;
using namespace std::chrono_literals;

// ---- pure helpers ---------------------------------------------------------------

static_assert(clamp_to_kernel_limits({psi_stall::some, 150ms, 1s}) == psi_trigger_spec{psi_stall::some, 150ms, 1s});
static_assert(clamp_to_kernel_limits({psi_stall::some, 0us, 100ms}) == psi_trigger_spec{psi_stall::some, 1us, 500ms});
static_assert(clamp_to_kernel_limits({psi_stall::full, 30s, 30s}) == psi_trigger_spec{psi_stall::full, 10s, 10s});
static_assert(clamp_to_kernel_limits({psi_stall::some, 3s, 2s}) == psi_trigger_spec{psi_stall::some, 2s, 2s});

// Next multiple of 2 s, same stall/window ratio.
static_assert(widen_to_unprivileged_window({psi_stall::some, 150ms, 1s}) ==
              psi_trigger_spec{psi_stall::some, 300ms, 2s});
static_assert(widen_to_unprivileged_window({psi_stall::full, 50ms, 500ms}) ==
              psi_trigger_spec{psi_stall::full, 200ms, 2s});
static_assert(widen_to_unprivileged_window({psi_stall::some, 300ms, 3s}) ==
              psi_trigger_spec{psi_stall::some, 400ms, 4s});
static_assert(widen_to_unprivileged_window({psi_stall::some, 9s, 9s}) == psi_trigger_spec{psi_stall::some, 10s, 10s});
static_assert(widen_to_unprivileged_window({psi_stall::some, 1us, 10s}) == psi_trigger_spec{psi_stall::some, 1us, 10s});
static_assert(widen_to_unprivileged_window({psi_stall::some, 1us, 1s}) == psi_trigger_spec{psi_stall::some, 2us, 2s});

TEST_CASE("trigger text is what the kernel parses") {
  CHECK(psi_trigger_text({}) == "some 150000 1000000");
  CHECK(psi_trigger_text({psi_stall::full, 50ms, 2s}) == "full 50000 2000000");
}

// ---- a fake kernel behind the seam ------------------------------------------------

namespace {

// What the fake does; the seam takes plain function pointers, so one global.
struct fake_kernel {
  std::map<std::string, int> open_errno;  // path -> errno from open()
  std::map<std::string, long> fs_type;     // path -> f_type; default procfs / cgroup2 by name
  // Return 0 to accept a trigger text, or the errno to refuse it with.
  int (*write_rule)(const std::string& text) = nullptr;
  struct poll_step {
    int err = 0;                           // ppoll() fails with this
    std::map<std::string, short> revents;  // otherwise: path -> revents of its trigger fds
  };
  std::deque<poll_step> poll_script;  // then the real ppoll() on the real fds

  int next_fd = 1000;                 // far above real descriptors
  std::map<int, std::string> open_fds;
  std::vector<std::string> opened;    // paths, in order
  std::vector<std::string> writes;    // texts, without the NUL
  std::vector<bool> writes_had_nul;
  std::vector<::timespec> poll_timeouts;
  std::vector<::nfds_t> poll_nfds;    // descriptors polled, per ppoll() call
  int closes = 0;
};

fake_kernel* fake = nullptr;

// An unprivileged 6.x kernel: EINVAL unless 500 ms <= window <= 10 s,
// window a multiple of 2 s and 0 < stall <= window.
int unprivileged_kernel(const std::string& text) {
  char kind[8] = {};
  unsigned long long stall = 0;
  unsigned long long window = 0;
  if (std::sscanf(text.c_str(), "%7s %llu %llu", kind, &stall, &window) != 3) return EINVAL;
  if (window < 500000 || window > 10000000 || window % 2000000 != 0) return EINVAL;
  if (stall == 0 || stall > window) return EINVAL;
  return 0;
}
int refuse_all_einval(const std::string&) { return EINVAL; }
int refuse_sub_2s_eperm(const std::string& text) { return unprivileged_kernel(text) == 0 ? 0 : EPERM; }
int refuse_all_ebusy(const std::string&) { return EBUSY; }

// The cgroup file refuses every trigger (ENOSPC, as no kernel would: "any other refusal").
bool cgroup_writes_fail = false;
int cgroup_write_errno = ENOSPC;
const std::string host_file = "/fake/proc/pressure/memory";
const std::string cgroup_file = "/fake/sys/fs/cgroup/job/memory.pressure";

int fake_open(const char* path, int flags) {
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

ssize_t fake_write(int fd, const void* buf, std::size_t n) {
  REQUIRE(fake->open_fds.count(fd) == 1);
  const auto* p = static_cast<const char*>(buf);
  const bool nul = n > 0 && p[n - 1] == '\0';
  fake->writes_had_nul.push_back(nul);
  // The real kernel overwrites the last byte with a NUL.
  const std::string text(p, n > 0 ? n - 1 : 0);
  fake->writes.push_back(text);
  int err = fake->write_rule != nullptr ? fake->write_rule(text) : 0;
  if (err == 0 && cgroup_writes_fail && fake->open_fds[fd] == cgroup_file) err = cgroup_write_errno;
  if (err != 0) {
    errno = err;
    return -1;
  }
  return static_cast<ssize_t>(n);
}

// The real ppoll() on the real descriptors (the eventfd); poll() skips negative fds.
int real_ppoll_masking_fakes(::pollfd* fds, ::nfds_t n, const ::timespec* timeout) {
  std::vector<int> saved(n);
  for (::nfds_t i = 0; i < n; ++i) {
    saved[i] = fds[i].fd;
    if (fake->open_fds.count(fds[i].fd) != 0) fds[i].fd = -1;
  }
  const int r = ::ppoll(fds, n, timeout, nullptr);
  for (::nfds_t i = 0; i < n; ++i) fds[i].fd = saved[i];
  return r;
}

int fake_ppoll(::pollfd* fds, ::nfds_t n, const ::timespec* timeout) {
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

int fake_close(int fd) {
  CHECK(fake->open_fds.erase(fd) == 1);
  ++fake->closes;
  return 0;
}

int fake_fstatfs(int fd, struct ::statfs* st) {
  REQUIRE(fake->open_fds.count(fd) == 1);
  const std::string& path = fake->open_fds[fd];
  const auto it = fake->fs_type.find(path);
  *st = {};
  st->f_type = it != fake->fs_type.end() ? it->second : (path == cgroup_file ? CGROUP2_SUPER_MAGIC : PROC_SUPER_MAGIC);
  return 0;
}

constexpr psi_syscalls fake_calls{fake_open, fake_write, fake_ppoll, fake_close, fake_fstatfs};

// Installs a fresh fake for one test.
struct fake_scope {
  fake_kernel k;
  explicit fake_scope(int (*rule)(const std::string&) = unprivileged_kernel) {
    k.write_rule = rule;
    fake = &k;
    cgroup_writes_fail = false;
    cgroup_write_errno = ENOSPC;
  }
  ~fake_scope() { fake = nullptr; }
  fake_scope(const fake_scope&) = delete;
  fake_scope& operator=(const fake_scope&) = delete;
};

psi_trigger_config fake_config(std::vector<psi_trigger_spec> specs = {psi_trigger_spec{}}) {
  psi_trigger_config c;
  c.root = "/fake";
  c.triggers = std::move(specs);
  return c;
}

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

long long ns_of(const ::timespec& t) { return static_cast<long long>(t.tv_sec) * 1000000000LL + t.tv_nsec; }

}  // namespace

TEST_CASE("a window the kernel accepts is armed as asked, with its NUL, one fd per trigger") {
  fake_scope f;
  {
    psi_trigger t(fake_config({{psi_stall::some, 300ms, 2s}, {psi_stall::full, 100ms, 4s}}), fake_calls);
    CHECK(t.mode() == psi_mode::trigger);
    CHECK_FALSE(t.widened());
    CHECK(t.reason().empty());
    CHECK(f.k.opened == std::vector<std::string>{host_file, host_file});
    CHECK(f.k.writes == std::vector<std::string>{"some 300000 2000000", "full 100000 4000000"});
    CHECK(f.k.writes_had_nul == std::vector<bool>{true, true});
    const auto a = t.armed();
    REQUIRE(a.size() == 2);
    CHECK(a[1].armed == psi_trigger_spec{psi_stall::full, 100ms, 4s});
    CHECK(a[1].file == host_file);
  }
  CHECK(f.k.open_fds.empty());  // the destructor closed every trigger fd
}

TEST_CASE("a refused sub-2 s window is re-armed on 2 s with the same ratio") {
  fake_scope f;
  psi_trigger t(fake_config(), fake_calls);
  CHECK(t.mode() == psi_mode::trigger);
  CHECK(t.widened());
  CHECK(f.k.writes == std::vector<std::string>{"some 150000 1000000", "some 300000 2000000"});
  CHECK(f.k.opened.size() == 1);  // the refused write left the fd free for the wider trigger
  const auto a = t.armed();
  REQUIRE(a.size() == 1);
  CHECK(a[0].widened);
  CHECK(a[0].requested == psi_trigger_spec{});
  CHECK(a[0].armed == psi_trigger_spec{psi_stall::some, 300ms, 2s});
  CHECK(contains(t.reason(), "widened from 1 s to 2 s"));
}

TEST_CASE("EPERM for a sub-2 s window is treated like EINVAL") {
  fake_scope f(refuse_sub_2s_eperm);
  psi_trigger t(fake_config({{psi_stall::full, 50ms, 500ms}}), fake_calls);
  CHECK(t.mode() == psi_mode::trigger);
  CHECK(t.widened());
  CHECK(f.k.writes.back() == "full 200000 2000000");
}

TEST_CASE("specs are clamped to the kernel's limits before arming") {
  fake_scope f;
  psi_trigger t(fake_config({{psi_stall::some, 20s, 20s}}), fake_calls);
  CHECK(t.mode() == psi_mode::trigger);
  CHECK_FALSE(t.widened());
  CHECK(f.k.writes == std::vector<std::string>{"some 10000000 10000000"});
}

TEST_CASE("refusal of both the window and its widening falls back to polling, saying why") {
  fake_scope f(refuse_all_einval);
  psi_trigger t(fake_config(), fake_calls);
  CHECK(t.mode() == psi_mode::poll);
  CHECK_FALSE(t.widened());
  CHECK(t.armed().empty());
  CHECK(contains(t.reason(), "'some 150000 1000000'"));
  CHECK(contains(t.reason(), "'some 300000 2000000'"));
  CHECK(contains(t.reason(), "Invalid argument"));
  CHECK(f.k.open_fds.empty());
  CHECK(t.wait_for(0ns) == wake::timeout);  // it still waits
}

TEST_CASE("any other refusal falls back at once, without widening") {
  SUBCASE("an error other than EINVAL/EPERM") {
    fake_scope f(refuse_all_ebusy);
    psi_trigger t(fake_config(), fake_calls);
    CHECK(t.mode() == psi_mode::poll);
    CHECK(f.k.writes.size() == 1);
    CHECK(contains(t.reason(), std::strerror(EBUSY)));
  }
  SUBCASE("EINVAL for a window that is already a multiple of 2 s") {
    fake_scope f(refuse_all_einval);
    psi_trigger t(fake_config({{psi_stall::some, 300ms, 2s}}), fake_calls);
    CHECK(t.mode() == psi_mode::poll);
    CHECK(f.k.writes.size() == 1);
  }
}

TEST_CASE("a refused second trigger drops the first one as well") {
  fake_scope f([](const std::string& text) { return text.rfind("full", 0) == 0 ? EBUSY : 0; });
  psi_trigger t(fake_config({{psi_stall::some, 300ms, 2s}, {psi_stall::full, 100ms, 2s}}), fake_calls);
  CHECK(t.mode() == psi_mode::poll);
  CHECK(f.k.opened.size() == 2);
  CHECK(f.k.open_fds.empty());
  CHECK(t.armed().empty());
}

TEST_CASE("no pressure file: mode none; an unopenable one: poll") {
  SUBCASE("missing") {
    fake_scope f;
    f.k.open_errno[host_file] = ENOENT;
    psi_trigger t(fake_config(), fake_calls);
    CHECK(t.mode() == psi_mode::none);
    CHECK(contains(t.reason(), "does not exist"));
    CHECK(t.wait_for(0ns) == wake::timeout);
  }
  SUBCASE("not writable (older kernels without CAP_SYS_RESOURCE)") {
    fake_scope f;
    f.k.open_errno[host_file] = EPERM;
    psi_trigger t(fake_config(), fake_calls);
    CHECK(t.mode() == psi_mode::poll);
    CHECK(contains(t.reason(), std::strerror(EPERM)));
  }
  SUBCASE("no triggers configured") {
    fake_scope f;
    psi_trigger t(fake_config({}), fake_calls);
    CHECK(t.mode() == psi_mode::poll);
    CHECK(f.k.opened.empty());
  }
}

TEST_CASE("a pressure file that is not on procfs/cgroup2 (a fixture tree) is never written") {
  SUBCASE("host file") {
    fake_scope f;
    f.k.fs_type[host_file] = EXT4_SUPER_MAGIC;
    psi_trigger t(fake_config(), fake_calls);
    CHECK(t.mode() == psi_mode::poll);
    CHECK(f.k.writes.empty());
    CHECK(f.k.open_fds.empty());
    CHECK(contains(t.reason(), "not a kernel pressure file"));
  }
  SUBCASE("cgroup file: skipped") {
    fake_scope f;
    f.k.fs_type[cgroup_file] = TMPFS_MAGIC;
    auto c = fake_config();
    c.cgroup_pressure = cgroup_file;
    psi_trigger t(c, fake_calls);
    CHECK(t.mode() == psi_mode::trigger);
    CHECK(t.armed().size() == 1);
    CHECK(f.k.open_fds.size() == 1);
  }
}

TEST_CASE("the cgroup file is armed too; an unopenable one is skipped; a refusal there drops all") {
  SUBCASE("armed") {
    fake_scope f;
    auto c = fake_config();
    c.cgroup_pressure = cgroup_file;
    psi_trigger t(c, fake_calls);
    CHECK(t.mode() == psi_mode::trigger);
    CHECK(f.k.opened == std::vector<std::string>{host_file, cgroup_file});
    CHECK(t.armed().size() == 2);
  }
  SUBCASE("read-only cgroupfs") {
    fake_scope f;
    f.k.open_errno[cgroup_file] = EROFS;
    auto c = fake_config();
    c.cgroup_pressure = cgroup_file;
    psi_trigger t(c, fake_calls);
    CHECK(t.mode() == psi_mode::trigger);
    CHECK(t.armed().size() == 1);
    CHECK(contains(t.reason(), "not armed"));
  }
  SUBCASE("refused") {
    fake_scope f;
    cgroup_writes_fail = true;
    auto c = fake_config();
    c.cgroup_pressure = cgroup_file;
    psi_trigger t(c, fake_calls);
    CHECK(t.mode() == psi_mode::poll);
    CHECK(f.k.open_fds.empty());
    CHECK(contains(t.reason(), cgroup_file));
  }
}

TEST_CASE("a cgroup file found later is armed from the waiting thread, replacing an earlier one") {
  fake_scope f;
  psi_trigger t(fake_config(), fake_calls);
  REQUIRE(t.mode() == psi_mode::trigger);
  CHECK(t.armed().size() == 1);
  CHECK(t.arm_cgroup_pressure(cgroup_file));
  CHECK(t.armed().size() == 2);
  CHECK(f.k.open_fds.size() == 2);
  // The process moved to another cgroup: its file replaces the old one's.
  const std::string other = std::string(cgroup_file) + ".other";
  f.k.fs_type[other] = f.k.fs_type.count(cgroup_file) ? f.k.fs_type[cgroup_file] : CGROUP2_SUPER_MAGIC;
  CHECK(t.arm_cgroup_pressure(other));
  CHECK(t.armed().size() == 2);
  CHECK(f.k.open_fds.size() == 2);
  CHECK(t.armed().back().file == other);
  CHECK(t.mode() == psi_mode::trigger);
  // An unopenable file is skipped; the host trigger stays.
  f.k.open_errno["/nope/memory.pressure"] = EACCES;
  CHECK_FALSE(t.arm_cgroup_pressure("/nope/memory.pressure"));
  CHECK(t.armed().size() == 1);
  CHECK(t.mode() == psi_mode::trigger);
}

TEST_CASE("arm_cgroup_pressure does nothing once polling took over") {
  fake_scope f;
  f.k.open_errno[host_file] = EACCES;
  psi_trigger t(fake_config(), fake_calls);
  REQUIRE(t.mode() == psi_mode::poll);
  CHECK_FALSE(t.arm_cgroup_pressure(cgroup_file));
  CHECK(f.k.open_fds.empty());
}

TEST_CASE("POLLPRI is an event; the triggers stay armed") {
  fake_scope f;
  f.k.poll_script.push_back({0, {{host_file, POLLPRI}}});
  psi_trigger t(fake_config(), fake_calls);
  CHECK(t.wait_for(1h) == wake::event);
  CHECK(t.mode() == psi_mode::trigger);
  CHECK(f.k.open_fds.size() == 1);
}

TEST_CASE("POLLERR (the cgroup went away) falls back to polling and reports an event") {
  fake_scope f;
  auto c = fake_config();
  c.cgroup_pressure = cgroup_file;
  // What a removed cgroup's file reports: error and priority together.
  f.k.poll_script.push_back({0, {{cgroup_file, static_cast<short>(POLLERR | POLLPRI)}}});
  psi_trigger t(c, fake_calls);
  REQUIRE(t.mode() == psi_mode::trigger);
  CHECK(t.wait_for(1h) == wake::event);
  CHECK(t.mode() == psi_mode::poll);
  CHECK_FALSE(t.widened());
  CHECK(t.armed().empty());
  CHECK(f.k.open_fds.empty());  // both triggers closed
  CHECK(contains(t.reason(), cgroup_file));
  CHECK(contains(t.reason(), "POLLERR"));
  CHECK(t.wait_for(0ns) == wake::timeout);  // and it still waits
}

TEST_CASE("POLLNVAL falls back too") {
  fake_scope f;
  f.k.poll_script.push_back({0, {{host_file, POLLNVAL}}});
  psi_trigger t(fake_config(), fake_calls);
  CHECK(t.wait_for(1h) == wake::event);
  CHECK(t.mode() == psi_mode::poll);
  CHECK(contains(t.reason(), "POLLNVAL"));
}

TEST_CASE("EINTR is retried with the time that is left") {
  fake_scope f;
  f.k.poll_script.push_back({EINTR, {}});
  f.k.poll_script.push_back({EINTR, {}});
  f.k.poll_script.push_back({0, {}});  // then a timeout
  psi_trigger t(fake_config(), fake_calls);
  CHECK(t.wait_for(5s) == wake::timeout);
  REQUIRE(f.k.poll_timeouts.size() == 3);
  CHECK(ns_of(f.k.poll_timeouts[0]) <= 5'000'000'000LL);
  CHECK(ns_of(f.k.poll_timeouts[0]) > 4'000'000'000LL);
  CHECK(ns_of(f.k.poll_timeouts[1]) <= ns_of(f.k.poll_timeouts[0]));
  CHECK(ns_of(f.k.poll_timeouts[2]) <= ns_of(f.k.poll_timeouts[1]));
  CHECK(t.mode() == psi_mode::trigger);
}

TEST_CASE("a failing poll() drops the triggers; without triggers the wait still honours interrupts") {
  fake_scope f;
  for (int i = 0; i < 1000; ++i) f.k.poll_script.push_back({ENOMEM, {}});
  psi_trigger t(fake_config(), fake_calls);
  CHECK(t.wait_for(1h) == wake::event);
  CHECK(t.mode() == psi_mode::poll);
  CHECK(contains(t.reason(), "poll() on the triggers failed"));
  CHECK(t.wait_for(1ms) == wake::timeout);
  t.interrupt();
  CHECK(t.wait_for(1h) == wake::interrupted);
}

TEST_CASE("timeouts: zero and negative return at once, a far one does not overflow") {
  fake_scope f;
  psi_trigger t(fake_config(), fake_calls);
  CHECK(t.wait_for(0ns) == wake::timeout);
  CHECK(t.wait_for(-5s) == wake::timeout);
  f.k.poll_script.push_back({0, {{host_file, POLLPRI}}});
  CHECK(t.wait_for(std::chrono::nanoseconds::max()) == wake::event);
  const auto& last = f.k.poll_timeouts.back();
  CHECK(last.tv_sec == 24 * 3600);  // one day per ppoll at most
  CHECK(last.tv_nsec == 0);
}

TEST_CASE("an interrupt before the wait makes it return at once, and is consumed") {
  fake_scope f;
  psi_trigger t(fake_config(), fake_calls);
  t.interrupt();
  t.interrupt();  // coalesce
  CHECK(t.wait_for(1h) == wake::interrupted);
  CHECK(t.wait_for(0ns) == wake::timeout);
}

TEST_CASE("an event and an interrupt together: the event first, the interrupt next") {
  fake_scope f;
  psi_trigger t(fake_config(), fake_calls);
  t.interrupt();
  f.k.poll_script.push_back({0, {{host_file, POLLPRI}}});
  CHECK(t.wait_for(1h) == wake::event);
  CHECK(t.wait_for(1h) == wake::interrupted);
}

TEST_CASE("moving keeps the triggers; a moved-from object only says stop") {
  fake_scope f;
  psi_trigger a(fake_config(), fake_calls);
  psi_trigger b(std::move(a));
  CHECK(b.mode() == psi_mode::trigger);
  CHECK(f.k.open_fds.size() == 1);
  CHECK(a.wait_for(1h) == wake::interrupted);  // NOLINT(bugprone-use-after-move): documented
  a.interrupt();
  psi_trigger c(fake_config(), fake_calls);
  c = std::move(b);  // c's own trigger is closed, b's kept
  CHECK(f.k.open_fds.size() == 1);
  CHECK(c.mode() == psi_mode::trigger);
}

// ---- fault h: a trigger whose file goes away (docs/fault-injection.md) ------------

TEST_CASE("fault h: after a trigger's file went away, each wait sleeps its whole timeout on the interrupt fd alone") {
  fake_scope f;
  auto c = fake_config();
  c.cgroup_pressure = cgroup_file;
  f.k.poll_script.push_back({0, {{cgroup_file, static_cast<short>(POLLERR | POLLPRI)}}});
  psi_trigger t(c, fake_calls);
  REQUIRE(t.mode() == psi_mode::trigger);
  REQUIRE(f.k.poll_nfds.empty());
  CHECK(t.wait_for(1h) == wake::event);  // sample now: the mode changed
  REQUIRE(t.mode() == psi_mode::poll);
  CHECK(f.k.poll_nfds == std::vector<::nfds_t>{3});  // the eventfd and both triggers
  const std::size_t before = f.k.poll_nfds.size();
  for (int i = 0; i < 3; ++i) {
    const auto start = std::chrono::steady_clock::now();
    CHECK(t.wait_for(20ms) == wake::timeout);
    CHECK(std::chrono::steady_clock::now() - start >= 20ms);  // slept, did not spin
  }
  // One ppoll() per wait, on the eventfd only, for the whole timeout: no busy loop.
  REQUIRE(f.k.poll_nfds.size() == before + 3);
  for (std::size_t i = before; i < f.k.poll_nfds.size(); ++i) {
    CHECK(f.k.poll_nfds[i] == 1);
    CHECK(ns_of(f.k.poll_timeouts[i]) > 0);
    CHECK(ns_of(f.k.poll_timeouts[i]) <= 20'000'000);
  }
  // Still stoppable, never re-armed, and it says why.
  t.interrupt();
  CHECK(t.wait_for(1h) == wake::interrupted);
  CHECK_FALSE(t.arm_cgroup_pressure(cgroup_file));
  CHECK(t.mode() == psi_mode::poll);
  CHECK(f.k.open_fds.empty());
  CHECK(contains(t.reason(), cgroup_file));
  CHECK(contains(t.reason(), "POLLERR"));
}

TEST_CASE("fault h: a cgroup removed between open and write (ENODEV): polling, saying why") {
  fake_scope f;
  cgroup_writes_fail = true;
  cgroup_write_errno = ENODEV;
  auto c = fake_config({{psi_stall::some, 300ms, 2s}});
  c.cgroup_pressure = cgroup_file;
  psi_trigger t(c, fake_calls);
  CHECK(t.mode() == psi_mode::poll);
  CHECK(t.armed().empty());
  CHECK(f.k.open_fds.empty());  // the host trigger is dropped too: all or nothing
  CHECK(contains(t.reason(), cgroup_file));
  CHECK(contains(t.reason(), std::strerror(ENODEV)));
  CHECK(t.wait_for(0ns) == wake::timeout);
}

namespace {
// A sampler built on a psi_trigger, as linux_sampler is: provenance.psi is the
// trigger's mode at the time of the sample.
struct trigger_sampler {
  psi_trigger* trigger;
  std::atomic<int>* samples;
  host_sample sample() {
    host_sample h;
    h.total_bytes = 64ULL << 30;
    h.avail_bytes = 60ULL << 30;
    h.provenance.mark_read(host_source::meminfo);
    h.provenance.mark_read(host_source::psi);
    h.provenance.psi = trigger->mode();
    samples->fetch_add(1);
    return h;
  }
  wake wait_for(std::chrono::nanoseconds d) { return trigger->wait_for(d); }
  void interrupt() noexcept { trigger->interrupt(); }
};
static_assert(event_sampler<trigger_sampler>);
}  // namespace

TEST_CASE("fault h: the watcher whose trigger file goes away samples at once, then polls at its interval") {
  fake_scope f;
  auto c = fake_config();
  c.cgroup_pressure = cgroup_file;
  f.k.poll_script.push_back({0, {{cgroup_file, static_cast<short>(POLLERR | POLLPRI)}}});
  psi_trigger t(c, fake_calls);
  REQUIRE(t.mode() == psi_mode::trigger);
  std::atomic<int> samples{0};
  watcher_options o;
  o.poll_interval = 20ms;
  o.pressure_poll_interval = 20ms;
  watcher<trigger_sampler> w{trigger_sampler{&t, &samples}, o};
  REQUIRE(w.start());  // the first sample, with the triggers armed
  // The watcher's first wait sees POLLERR: an event, so a fresh sample says "poll"
  // (possibly before this thread gets to look at the first one).
  const auto start = std::chrono::steady_clock::now();
  while (w.read().provenance.psi != psi_mode::poll) {
    REQUIRE(std::chrono::steady_clock::now() - start < 30s);
    std::this_thread::sleep_for(1ms);
  }
  const int at_fallback = samples.load();
  const auto fallback = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(200ms);
  w.stop();
  const auto elapsed = std::chrono::steady_clock::now() - fallback;
  const int after = samples.load() - at_fallback;
  // A busy loop would sample thousands of times; polling samples once per 20 ms
  // at most (ppoll never returns before its timeout).
  const auto most = static_cast<int>(elapsed / 20ms) + 2;
  MESSAGE(after << " samples in " << std::chrono::duration<double>(elapsed).count() << " s after the fallback");
  CHECK(after <= most);
  CHECK(w.read().provenance.psi == psi_mode::poll);
  CHECK(w.read().level == mem_level::ok);
  CHECK(contains(w.sampler().trigger->reason(), "POLLERR"));
  CHECK(f.k.open_fds.empty());
  // Every wait after the fallback polled the eventfd alone.
  for (std::size_t i = 1; i < f.k.poll_nfds.size(); ++i) CHECK(f.k.poll_nfds[i] == 1);
}

// ---- real descriptors -------------------------------------------------------------

namespace {
// Blocks in wait_for(1 h) on another thread and interrupts it from this one.
// Whether the interrupt lands before or during the wait, the answer is the
// same, so this needs no sleep to be correct.
void check_interrupt_wakes_a_blocked_wait(psi_trigger& t) {
  wake result = wake::timeout;
  std::thread waiter([&] { result = t.wait_for(1h); });
  t.interrupt();
  waiter.join();
  CHECK(result == wake::interrupted);
}
}  // namespace

TEST_CASE("interrupt() from another thread wakes a blocked wait") {
  SUBCASE("no PSI at all") {
    psi_trigger_config c;
    c.root = "/nonexistent-pnmem-root";
    psi_trigger t(c);
    CHECK(t.mode() == psi_mode::none);
    check_interrupt_wakes_a_blocked_wait(t);
  }
  SUBCASE("the real kernel's triggers, where it has them") {
    psi_trigger t;
    check_interrupt_wakes_a_blocked_wait(t);
  }
}

TEST_CASE("the real kernel: a trigger on /proc/pressure/memory is armed, widened if it must be") {
  if (::access("/proc/pressure/memory", F_OK) != 0) {
    MESSAGE("no /proc/pressure/memory on this kernel: nothing to arm");
    psi_trigger t;
    CHECK(t.mode() == psi_mode::none);
    return;
  }
  psi_trigger t;
  INFO("reason: " << t.reason());
  CHECK(t.mode() == psi_mode::trigger);
  const auto a = t.armed();
  REQUIRE(a.size() == 1);
  CHECK(a[0].file == "/proc/pressure/memory");
  if (t.widened()) {
    MESSAGE("the kernel refused a 1 s window; armed " << psi_trigger_text(a[0].armed));
    CHECK(a[0].armed == psi_trigger_spec{psi_stall::some, 300ms, 2s});
  } else {
    MESSAGE("the kernel accepted a 1 s window (CAP_SYS_RESOURCE?)");
    CHECK(a[0].armed == psi_trigger_spec{});
  }
  // Pressure may be real on a busy box: an event is as good an answer as a timeout here.
  const wake w = t.wait_for(10ms);
  CHECK((w == wake::timeout || w == wake::event));
  CHECK(t.mode() == psi_mode::trigger);
}

TEST_CASE("a real fixture tree's pressure file is left as it was") {
  char dir_template[] = "/tmp/pnmem-psi-fixture-XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);
  const std::filesystem::path root = dir_template;
  std::filesystem::create_directories(root / "proc/pressure");
  const std::string text =
      "some avg10=1.00 avg60=0.50 avg300=0.10 total=12345\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
  {
    std::ofstream out(root / "proc/pressure/memory");
    out << text;
  }
  std::string after;
  psi_mode mode = psi_mode::none;
  {
    psi_trigger_config c;
    c.root = root;
    psi_trigger t(c);
    mode = t.mode();
    std::ifstream in(root / "proc/pressure/memory");
    std::ostringstream content;
    content << in.rdbuf();
    after = content.str();
  }
  std::filesystem::remove_all(root);
  CHECK(mode == psi_mode::poll);
  CHECK(after == text);
}

TEST_CASE("the real kernel refuses a trigger written without its NUL") {
  // Needs a kernel with PSI and a pressure file this process may open for writing.
  // Without them nothing is asserted, and the run says so (never a silent pass).
  if (::access("/proc/pressure/memory", F_OK) != 0) {
    MESSAGE("NOT CHECKED: no /proc/pressure/memory on this kernel (no PSI): the kernel's refusal of a "
            "trigger without its NUL was not tested");
    return;
  }
  const int fd = ::open("/proc/pressure/memory", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int open_errno = errno;
    MESSAGE("NOT CHECKED: /proc/pressure/memory cannot be opened for writing here ("
            << std::strerror(open_errno) << "): the kernel's refusal of a trigger without its NUL was not tested");
    return;
  }
  // The kernel overwrites the last byte with a NUL: "some 300000 200000", a 200 ms window.
  const char text[] = "some 300000 2000000";
  const ssize_t r = ::write(fd, text, sizeof text - 1);
  const int err = errno;
  ::close(fd);
  CHECK(r < 0);
  CHECK(err == EINVAL);
}
