// psi_trigger against a fake kernel (fake_psi_kernel.hpp, through the OS-call
// seam) and, where it has PSI, the real one.
#include "pnmem/linux/psi_trigger.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "fake_psi_kernel.hpp"
#include "file_text.hpp"
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
  CHECK(psi_trigger_text({}) == "some 100000 1000000");
  CHECK(psi_trigger_text({psi_stall::full, 50ms, 2s}) == "full 50000 2000000");
}

// ---- against the fake kernel (fake_psi_kernel.hpp) ---------------------------------

namespace {

using namespace pnmem::test;

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

long long ns_of(const ::timespec& t) { return static_cast<long long>(t.tv_sec) * 1000000000LL + t.tv_nsec; }

}  // namespace

TEST_CASE("a window the kernel accepts is armed as asked, with its NUL, one fd per trigger") {
  fake_scope f;
  {
    psi_trigger t(fake_config({{psi_stall::some, 300ms, 2s}, {psi_stall::full, 100ms, 4s}}));
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
  psi_trigger t(fake_config());
  CHECK(t.mode() == psi_mode::trigger);
  CHECK(t.widened());
  CHECK(f.k.writes == std::vector<std::string>{"some 100000 1000000", "some 200000 2000000"});
  CHECK(f.k.opened.size() == 1);  // the refused write left the fd free for the wider trigger
  const auto a = t.armed();
  REQUIRE(a.size() == 1);
  CHECK(a[0].widened);
  CHECK(a[0].requested == psi_trigger_spec{});
  CHECK(a[0].armed == psi_trigger_spec{psi_stall::some, 200ms, 2s});
  CHECK(contains(t.reason(), "widened from 1 s to 2 s"));
}

TEST_CASE("EPERM for a sub-2 s window is treated like EINVAL") {
  fake_scope f(refuse_sub_2s_eperm);
  psi_trigger t(fake_config({{psi_stall::full, 50ms, 500ms}}));
  CHECK(t.mode() == psi_mode::trigger);
  CHECK(t.widened());
  CHECK(f.k.writes.back() == "full 200000 2000000");
}

TEST_CASE("specs are clamped to the kernel's limits before arming") {
  fake_scope f;
  psi_trigger t(fake_config({{psi_stall::some, 20s, 20s}}));
  CHECK(t.mode() == psi_mode::trigger);
  CHECK_FALSE(t.widened());
  CHECK(f.k.writes == std::vector<std::string>{"some 10000000 10000000"});
}

TEST_CASE("refusal of both the window and its widening falls back to polling, saying why") {
  fake_scope f(refuse_all_einval);
  psi_trigger t(fake_config());
  CHECK(t.mode() == psi_mode::poll);
  CHECK_FALSE(t.widened());
  CHECK(t.armed().empty());
  CHECK(contains(t.reason(), "'some 100000 1000000'"));
  CHECK(contains(t.reason(), "'some 200000 2000000'"));
  CHECK(contains(t.reason(), "Invalid argument"));
  CHECK(f.k.open_fds.empty());
  CHECK(t.wait_for(0ns) == wake::timeout);  // it still waits
}

TEST_CASE("any other refusal falls back at once, without widening") {
  SUBCASE("an error other than EINVAL/EPERM") {
    fake_scope f(refuse_all_ebusy);
    psi_trigger t(fake_config());
    CHECK(t.mode() == psi_mode::poll);
    CHECK(f.k.writes.size() == 1);
    CHECK(contains(t.reason(), std::strerror(EBUSY)));
  }
  SUBCASE("EINVAL for a window that is already a multiple of 2 s") {
    fake_scope f(refuse_all_einval);
    psi_trigger t(fake_config({{psi_stall::some, 300ms, 2s}}));
    CHECK(t.mode() == psi_mode::poll);
    CHECK(f.k.writes.size() == 1);
  }
}

TEST_CASE("a refused second trigger drops the first one as well") {
  fake_scope f([](const std::string& text) { return text.rfind("full", 0) == 0 ? EBUSY : 0; });
  psi_trigger t(fake_config({{psi_stall::some, 300ms, 2s}, {psi_stall::full, 100ms, 2s}}));
  CHECK(t.mode() == psi_mode::poll);
  CHECK(f.k.opened.size() == 2);
  CHECK(f.k.open_fds.empty());
  CHECK(t.armed().empty());
}

TEST_CASE("no pressure file: mode none; an unopenable one: poll") {
  SUBCASE("missing") {
    fake_scope f;
    f.k.open_errno[host_file] = ENOENT;
    psi_trigger t(fake_config());
    CHECK(t.mode() == psi_mode::none);
    CHECK(contains(t.reason(), "does not exist"));
    CHECK(t.wait_for(0ns) == wake::timeout);
  }
  SUBCASE("not writable (older kernels without CAP_SYS_RESOURCE)") {
    fake_scope f;
    f.k.open_errno[host_file] = EPERM;
    psi_trigger t(fake_config());
    CHECK(t.mode() == psi_mode::poll);
    CHECK(contains(t.reason(), std::strerror(EPERM)));
  }
  SUBCASE("no triggers configured") {
    fake_scope f;
    psi_trigger t(fake_config({}));
    CHECK(t.mode() == psi_mode::poll);
    CHECK(f.k.opened.empty());
  }
}

TEST_CASE("a pressure file that is not on procfs/cgroup2 (a fixture tree) is never written") {
  SUBCASE("host file") {
    fake_scope f;
    f.k.fs_type[host_file] = EXT4_SUPER_MAGIC;
    psi_trigger t(fake_config());
    CHECK(t.mode() == psi_mode::poll);
    CHECK(f.k.writes.empty());
    CHECK(f.k.open_fds.empty());
    CHECK(contains(t.reason(), "not a kernel pressure file"));
  }
  SUBCASE("cgroup file: skipped") {
    fake_scope f;
    f.k.fs_type[cgroup_file] = TMPFS_MAGIC;
    psi_trigger t(fake_config_with_cgroup());
    CHECK(t.mode() == psi_mode::trigger);
    CHECK(t.armed().size() == 1);
    CHECK(f.k.open_fds.size() == 1);
  }
}

TEST_CASE("the cgroup file is armed too; an unopenable one is skipped; a refusal there drops all") {
  SUBCASE("armed") {
    fake_scope f;
    psi_trigger t(fake_config_with_cgroup());
    CHECK(t.mode() == psi_mode::trigger);
    CHECK(f.k.opened == std::vector<std::string>{host_file, cgroup_file});
    CHECK(t.armed().size() == 2);
  }
  SUBCASE("read-only cgroupfs") {
    fake_scope f;
    f.k.open_errno[cgroup_file] = EROFS;
    psi_trigger t(fake_config_with_cgroup());
    CHECK(t.mode() == psi_mode::trigger);
    CHECK(t.armed().size() == 1);
    CHECK(contains(t.reason(), "not armed"));
  }
  SUBCASE("refused") {
    fake_scope f;
    f.k.cgroup_writes_fail = true;
    psi_trigger t(fake_config_with_cgroup());
    CHECK(t.mode() == psi_mode::poll);
    CHECK(f.k.open_fds.empty());
    CHECK(contains(t.reason(), cgroup_file));
  }
}

TEST_CASE("a cgroup file found later is armed from the waiting thread, replacing an earlier one") {
  fake_scope f;
  psi_trigger t(fake_config());
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
  psi_trigger t(fake_config());
  REQUIRE(t.mode() == psi_mode::poll);
  CHECK_FALSE(t.arm_cgroup_pressure(cgroup_file));
  CHECK(f.k.open_fds.empty());
}

TEST_CASE("POLLPRI is an event; the triggers stay armed") {
  fake_scope f;
  f.k.poll_script.push_back({0, {{host_file, POLLPRI}}});
  psi_trigger t(fake_config());
  CHECK(t.wait_for(1h) == wake::event);
  CHECK(t.mode() == psi_mode::trigger);
  CHECK(f.k.open_fds.size() == 1);
}

TEST_CASE("POLLERR (the cgroup went away) falls back to polling and reports an event") {
  fake_scope f;
  f.k.remove_cgroup_at_next_poll();
  psi_trigger t(fake_config_with_cgroup());
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
  psi_trigger t(fake_config());
  CHECK(t.wait_for(1h) == wake::event);
  CHECK(t.mode() == psi_mode::poll);
  CHECK(contains(t.reason(), "POLLNVAL"));
}

TEST_CASE("EINTR is retried with the time that is left") {
  fake_scope f;
  f.k.poll_script.push_back({EINTR, {}});
  f.k.poll_script.push_back({EINTR, {}});
  f.k.poll_script.push_back({0, {}});  // then a timeout
  psi_trigger t(fake_config());
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
  psi_trigger t(fake_config());
  CHECK(t.wait_for(1h) == wake::event);
  CHECK(t.mode() == psi_mode::poll);
  CHECK(contains(t.reason(), "poll() on the triggers failed"));
  CHECK(t.wait_for(1ms) == wake::timeout);
  t.interrupt();
  CHECK(t.wait_for(1h) == wake::interrupted);
}

TEST_CASE("timeouts: zero and negative return at once, a far one does not overflow") {
  fake_scope f;
  psi_trigger t(fake_config());
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
  psi_trigger t(fake_config());
  t.interrupt();
  t.interrupt();  // coalesce
  CHECK(t.wait_for(1h) == wake::interrupted);
  CHECK(t.wait_for(0ns) == wake::timeout);
}

TEST_CASE("an event and an interrupt together: the event first, the interrupt next") {
  fake_scope f;
  psi_trigger t(fake_config());
  t.interrupt();
  f.k.poll_script.push_back({0, {{host_file, POLLPRI}}});
  CHECK(t.wait_for(1h) == wake::event);
  CHECK(t.wait_for(1h) == wake::interrupted);
}

TEST_CASE("moving keeps the triggers; a moved-from object only says stop") {
  fake_scope f;
  psi_trigger a(fake_config());
  psi_trigger b(std::move(a));
  CHECK(b.mode() == psi_mode::trigger);
  CHECK(f.k.open_fds.size() == 1);
  CHECK(a.wait_for(1h) == wake::interrupted);  // NOLINT(bugprone-use-after-move): documented
  a.interrupt();
  psi_trigger c(fake_config());
  c = std::move(b);  // c's own trigger is closed, b's kept
  CHECK(f.k.open_fds.size() == 1);
  CHECK(c.mode() == psi_mode::trigger);
}

// ---- fault h: a trigger whose file goes away (docs/fault-injection.md) ------------

TEST_CASE("fault h: after a trigger's file went away, each wait sleeps its whole timeout on the interrupt fd alone") {
  fake_scope f;
  f.k.remove_cgroup_at_next_poll();
  psi_trigger t(fake_config_with_cgroup());
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
  f.k.cgroup_writes_fail = true;
  f.k.cgroup_write_errno = ENODEV;
  psi_trigger t(fake_config_with_cgroup({{psi_stall::some, 300ms, 2s}}));
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
  f.k.remove_cgroup_at_next_poll();
  psi_trigger t(fake_config_with_cgroup());
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
    CHECK(a[0].armed == psi_trigger_spec{psi_stall::some, 200ms, 2s});
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
    after = pnmem::test::read_file(root / "proc/pressure/memory").value_or(std::string());
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
