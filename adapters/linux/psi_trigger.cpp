// PSI triggers: arming, widening to what the kernel allows, waiting, falling back.
#include "pnmem/linux/psi_trigger.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/eventfd.h>

#include <atomic>
#include <cerrno>
#include <system_error>
#include <thread>
#include <utility>

#include "os_calls.hpp"
#include "pnmem/detail/mutex.hpp"
#include "pnmem/detail/thread_annotations.hpp"

namespace pnmem {

namespace {

namespace fs = std::filesystem;
using std::chrono::nanoseconds;
using std::chrono::steady_clock;

using linux_os::sys;

// Pressure files live on procfs (/proc/pressure) and cgroup2 (memory.pressure).
bool on_pressure_fs(const struct ::statfs& st) {
  const auto type = static_cast<unsigned long>(st.f_type);
  return type == PROC_SUPER_MAGIC || type == CGROUP2_SUPER_MAGIC;
}

std::string errno_text(int err) { return std::generic_category().message(err); }

// "1 s", "2 s", "1.5 s", "500 ms": windows as people write them.
std::string window_text(std::chrono::microseconds w) {
  const auto ms = w.count() / 1000;
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  return std::to_string(ms) + " ms";
}

// Built by appending: GCC 12 at -O3 reports a false -Wrestrict on "'" + std::string.
std::string quoted(const psi_trigger_spec& s) {
  std::string out(1, '\'');
  out += psi_trigger_text(s);
  out += '\'';
  return out;
}

void append_note(std::string& to, const std::string& note) {
  if (!to.empty()) to += "; ";
  to += note;
}

// A day per ppoll() at most: a far deadline (nanoseconds::max()) is then just
// more turns of the loop, never an overflowing timespec.
constexpr nanoseconds max_single_wait = std::chrono::hours{24};

::timespec to_timespec(nanoseconds d) {
  ::timespec ts{};
  ts.tv_sec = static_cast<::time_t>(d.count() / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(d.count() % 1'000'000'000);
  return ts;
}

}  // namespace

std::string psi_trigger_text(const psi_trigger_spec& s) {
  return std::string{to_string(s.kind)} + " " + std::to_string(s.stall.count()) + " " +
         std::to_string(s.window.count());
}

struct psi_trigger::state {
  int event_fd = -1;
  // Touched only by the constructor and the waiting thread.
  std::vector<int> trigger_fds;
  std::vector<::pollfd> poll_fds;  // [0] the eventfd, then trigger_fds in order
  // Read from any thread.
  std::atomic<psi_mode> mode{psi_mode::none};
  std::atomic<bool> widened{false};
  mutable pnmem::detail::mutex mutex;
  std::string reason PNMEM_GUARDED_BY(mutex);
  std::vector<psi_armed_trigger> armed PNMEM_GUARDED_BY(mutex);
  // What arm() was asked for, kept for arm_cgroup(): the specs, the host file,
  // and how many of trigger_fds belong to it (the rest are the cgroup file's).
  std::vector<psi_trigger_spec> configured;
  fs::path host_file;
  std::size_t host_fd_count = 0;

  state() {
    // Non-blocking so that consuming it never waits and interrupt() never
    // blocks (a full counter already means "interrupt pending").
    event_fd = sys().eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (event_fd < 0) throw std::system_error(errno, std::generic_category(), "pnmem::psi_trigger: eventfd");
  }
  state(const state&) = delete;
  state& operator=(const state&) = delete;

  ~state() {
    close_triggers();
    sys().close(event_fd);
  }

  void close_triggers() {
    // Linux closes the descriptor even when close() fails (EINTR included), so
    // there is nothing to retry.
    for (int fd : trigger_fds) sys().close(fd);
    trigger_fds.clear();
  }

  void rebuild_poll_fds() {
    poll_fds.clear();
    poll_fds.push_back({event_fd, POLLIN, 0});
    for (int fd : trigger_fds) poll_fds.push_back({fd, POLLPRI, 0});
  }

  // Drops every trigger: from here on the caller polls.
  void fall_back(psi_mode to, const std::string& why) {
    close_triggers();
    rebuild_poll_fds();
    {
      pnmem::detail::lock_guard lock(mutex);
      armed.clear();
      reason = why;  // earlier notes (a widened window, a skipped file) no longer apply
    }
    widened.store(false, std::memory_order_relaxed);
    mode.store(to, std::memory_order_release);
  }

  void note(const std::string& what) {
    pnmem::detail::lock_guard lock(mutex);
    append_note(reason, what);
  }

  bool write_trigger(int fd, const psi_trigger_spec& s, int& err) {
    const std::string text = psi_trigger_text(s);
    // With the NUL: the kernel replaces the last byte written with one.
    const std::size_t n = text.size() + 1;
    const ssize_t written = sys().write(fd, text.c_str(), n);
    if (written == static_cast<ssize_t>(n)) return true;
    err = written < 0 ? errno : EIO;  // a short write would be a kernel we do not understand
    return false;
  }

  enum class arm_result { armed, skipped, failed };

  // Arms every spec on one file, one descriptor each. The host file is
  // required: failing to open it ends trigger mode. The cgroup file is
  // optional: if it cannot be opened it is skipped.
  arm_result arm_file(const fs::path& file, bool required, const std::vector<psi_trigger_spec>& specs) {
    bool armed_any = false;
    for (const auto& requested : specs) {
      const psi_trigger_spec spec = clamp_to_kernel_limits(requested);
      const int fd = sys().open(file.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
      if (fd < 0) {
        const int err = errno;
        if (!required && !armed_any) {
          note("cgroup pressure file " + file.string() + " not armed (" + errno_text(err) +
               "); the host-wide trigger still sees its stalls");
          return arm_result::skipped;
        }
        if (required && (err == ENOENT || err == ENOTDIR)) {
          fall_back(psi_mode::none, "no PSI: " + file.string() + " does not exist");
        } else {
          // Kernels without unprivileged triggers (before 6.5) refuse a writer
          // without CAP_SYS_RESOURCE here (EPERM).
          fall_back(psi_mode::poll, "cannot open " + file.string() + " for a trigger: " + errno_text(err));
        }
        return arm_result::failed;
      }
      struct ::statfs st {};
      if (sys().fstatfs(fd, &st) != 0 || !on_pressure_fs(st)) {
        sys().close(fd);
        const std::string why = file.string() + " is not a kernel pressure file (not on procfs or cgroup2)";
        if (!required && !armed_any) {
          note(why + ": not armed");
          return arm_result::skipped;
        }
        fall_back(psi_mode::poll, why + ": no triggers");
        return arm_result::failed;
      }
      trigger_fds.push_back(fd);

      int err = 0;
      psi_trigger_spec armed_spec = spec;
      bool was_widened = false;
      if (!write_trigger(fd, spec, err)) {
        const bool off_the_2s_grid = spec.window % psi_unprivileged_window_step != std::chrono::microseconds::zero();
        const bool window_may_be_the_cause = (err == EINVAL || err == EPERM) && off_the_2s_grid;
        if (!window_may_be_the_cause) {
          fall_back(psi_mode::poll, "kernel refused trigger " + quoted(spec) + " on " + file.string() + ": " +
                                        errno_text(err));
          return arm_result::failed;
        }
        // A failed write leaves the descriptor without a trigger, so it can
        // take the widened one.
        armed_spec = widen_to_unprivileged_window(spec);
        int wide_err = 0;
        if (!write_trigger(fd, armed_spec, wide_err)) {
          fall_back(psi_mode::poll, "kernel refused trigger " + quoted(spec) + " (" + errno_text(err) +
                                        ") and its widened " + quoted(armed_spec) + " (" + errno_text(wide_err) +
                                        ") on " + file.string());
          return arm_result::failed;
        }
        was_widened = true;
        widened.store(true, std::memory_order_relaxed);
        note("window widened from " + window_text(spec.window) + " to " + window_text(armed_spec.window) +
             " on " + file.string() + ": the kernel refused " + quoted(spec) + " (" + errno_text(err) +
             "; without CAP_SYS_RESOURCE windows are multiples of 2 s)");
      }
      armed_any = true;
      pnmem::detail::lock_guard lock(mutex);
      armed.push_back({file, requested, armed_spec, was_widened});
    }
    return arm_result::armed;
  }

  void arm(const psi_trigger_config& config) {
    rebuild_poll_fds();
    if (config.triggers.empty()) {
      fall_back(psi_mode::poll, "no triggers configured");
      return;
    }
    configured = config.triggers;
    host_file = config.root / "proc/pressure/memory";
    if (arm_file(host_file, true, config.triggers) == arm_result::failed) return;
    host_fd_count = trigger_fds.size();
    if (!config.cgroup_pressure.empty() &&
        arm_file(config.cgroup_pressure, false, config.triggers) == arm_result::failed) {
      return;
    }
    rebuild_poll_fds();
    mode.store(psi_mode::trigger, std::memory_order_release);
  }

  // Replaces the cgroup file's triggers (if any) with triggers on `file`.
  bool arm_cgroup(const fs::path& file) {
    if (mode.load(std::memory_order_acquire) != psi_mode::trigger) return false;
    for (std::size_t i = host_fd_count; i < trigger_fds.size(); ++i) sys().close(trigger_fds[i]);
    trigger_fds.resize(host_fd_count);
    {
      pnmem::detail::lock_guard lock(mutex);
      std::erase_if(armed, [&](const psi_armed_trigger& a) { return a.file != host_file; });
    }
    const arm_result r = arm_file(file, false, configured);
    rebuild_poll_fds();
    return r == arm_result::armed;
  }

  bool consume_interrupt() const {
    std::uint64_t count = 0;
    return sys().read(event_fd, &count, sizeof count) == static_cast<ssize_t>(sizeof count);
  }

  // Only when ppoll() itself fails without triggers to drop: short sleeps that
  // keep interrupt() working.
  wake sleep_until(steady_clock::time_point deadline) const {
    constexpr nanoseconds slice = std::chrono::milliseconds{10};
    for (;;) {
      if (consume_interrupt()) return wake::interrupted;
      const auto now = steady_clock::now();
      if (now >= deadline) return wake::timeout;
      std::this_thread::sleep_for(std::min<nanoseconds>(slice, deadline - now));
    }
  }

  wake wait_until(steady_clock::time_point deadline) {
    for (;;) {
      const auto now = steady_clock::now();
      const nanoseconds remaining = deadline > now ? deadline - now : nanoseconds::zero();
      const ::timespec ts = to_timespec(std::min(remaining, max_single_wait));
      for (auto& p : poll_fds) p.revents = 0;
      const int n = sys().ppoll(poll_fds.data(), static_cast<::nfds_t>(poll_fds.size()), &ts);
      if (n < 0) {
        const int err = errno;
        if (err == EINTR) continue;  // with what is left of the time
        if (trigger_fds.empty()) return sleep_until(deadline);
        fall_back(psi_mode::poll, "poll() on the triggers failed: " + errno_text(err));
        return wake::event;
      }
      if (n == 0) {
        if (remaining <= max_single_wait) return wake::timeout;
        continue;
      }
      bool fired = false;
      for (std::size_t i = 1; i < poll_fds.size(); ++i) {
        const short revents = poll_fds[i].revents;
        // A removed cgroup reports POLLERR together with POLLPRI: look at the error first.
        if ((revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) {
          std::string file;
          {
            pnmem::detail::lock_guard lock(mutex);
            if (i - 1 < armed.size()) file = armed[i - 1].file.string();
          }
          fall_back(psi_mode::poll, "trigger on " + file + " failed (" +
                                        ((revents & POLLNVAL) != 0 ? "POLLNVAL" : "POLLERR") +
                                        "; the file went away?)");
          return wake::event;
        }
        if ((revents & POLLPRI) != 0) fired = true;
      }
      if (fired) return wake::event;  // an interrupt, if any, stays pending for the next wait
      if ((poll_fds[0].revents & POLLIN) != 0 && consume_interrupt()) return wake::interrupted;
      // Nothing we asked for (another thread consumed the interrupt?): wait on.
    }
  }
};

psi_trigger::psi_trigger(psi_trigger_config config) : state_(std::make_unique<state>()) {
  state_->arm(config);
}

psi_trigger::~psi_trigger() = default;
psi_trigger::psi_trigger(psi_trigger&&) noexcept = default;
psi_trigger& psi_trigger::operator=(psi_trigger&&) noexcept = default;

wake psi_trigger::wait_for(nanoseconds timeout) {
  if (!state_) return wake::interrupted;
  const auto now = steady_clock::now();
  if (timeout < nanoseconds::zero()) timeout = nanoseconds::zero();
  const auto headroom = steady_clock::time_point::max() - now;
  const auto deadline = timeout >= headroom ? steady_clock::time_point::max() : now + timeout;
  return state_->wait_until(deadline);
}

bool psi_trigger::arm_cgroup_pressure(const std::filesystem::path& file) {
  return state_ && state_->arm_cgroup(file);
}

void psi_trigger::interrupt() noexcept {
  if (!state_) return;
  const std::uint64_t one = 1;
  // EAGAIN means the counter is full: an interrupt is pending already.
  [[maybe_unused]] const ssize_t ignored = sys().write(state_->event_fd, &one, sizeof one);
}

psi_mode psi_trigger::mode() const noexcept {
  return state_ ? state_->mode.load(std::memory_order_acquire) : psi_mode::none;
}

bool psi_trigger::widened() const noexcept {
  return state_ && state_->widened.load(std::memory_order_relaxed);
}

std::string psi_trigger::reason() const {
  if (!state_) return "moved from";
  pnmem::detail::lock_guard lock(state_->mutex);
  return state_->reason;
}

std::vector<psi_armed_trigger> psi_trigger::armed() const {
  if (!state_) return {};
  pnmem::detail::lock_guard lock(state_->mutex);
  return state_->armed;
}

}  // namespace pnmem
