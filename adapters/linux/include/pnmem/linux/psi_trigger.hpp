// pnmem/linux/psi_trigger.hpp - wake up on memory pressure instead of waiting for the next poll.
//
// A psi_trigger arms kernel PSI triggers (Documentation/accounting/psi.rst) on
// <root>/proc/pressure/memory and, optionally, on a cgroup v2 memory.pressure
// file, and waits for them with poll(POLLPRI). It is the waiting half of the
// event_sampler concept (host_sample.hpp): a Linux sampler forwards wait_for()
// and interrupt() to it and reports mode() in its provenance.
//
//   pnmem::psi_trigger t;                       // some 100 ms / 1 s on /proc/pressure/memory
//   while (running) {
//     if (t.wait_for(250ms) == pnmem::wake::interrupted) break;
//     publish(sampler.sample());                // after an event too: sample fresh, at once
//   }
//
// An event says "stall crossed the threshold inside the window" and nothing
// else: the caller must take a fresh sample right away and decide from that,
// never act on numbers read before the wake-up (kubernetes#51745: a wake-up
// that read stale stats let a node OOM seconds later).
//
// What the kernel allows, and what this class does about it (measured on
// 6.18 without CAP_SYS_RESOURCE; the limits are the kernel's psi_trigger_create):
//   - window 500 ms .. 10 s, 0 < stall <= window: specs are clamped to that;
//   - without CAP_SYS_RESOURCE the window must be a multiple of 2 s, otherwise
//     write() fails with EINVAL. On EINVAL or EPERM for such a window the
//     trigger is re-armed once with the next multiple of 2 s and the stall
//     scaled to keep the same stall/window ratio; widened() then says so;
//   - the trigger text must be written with its trailing NUL: the kernel
//     overwrites the buffer's last byte with one, so "some 300000 2000000"
//     without it arms a 200 ms window (and is refused as too short).
// Any other refusal, or POLLERR/POLLHUP/POLLNVAL later (the file went away: the
// cgroup was removed), drops every trigger: mode() becomes psi_mode::poll and
// reason() says why. All or nothing, so "trigger" in a snapshot's provenance
// always means every requested trigger is live. A host without
// /proc/pressure/memory gives psi_mode::none. In every mode wait_for() still
// waits (timeout or interrupt), so a watcher can always wait through it.
//
// Only files on procfs or cgroupfs are written to: a pressure file in a
// fixture tree (root pointing at a test directory) is a plain file that a
// trigger text would overwrite. Such a file gives psi_mode::poll.
//
// A cgroup file that cannot be opened for writing (absent, read-only cgroupfs
// in a container) is skipped, not a failure: the host-wide `some` counts every
// task's stall, so it still sees the cgroup's stalls; reason() notes the skip.
//
// Default (default_psi_trigger): one `some` trigger, 100 ms stall in a 1 s
// window (10 %; 200 ms in 2 s once widened). No `full` trigger by default: full
// stall time is part of some stall time, so a full trigger at the same ratio can
// only fire after the some trigger has already woken the watcher, doubling
// wake-ups for nothing. Add one only with a lower ratio than the some trigger's.
//
// Threads: wait_for() from one thread at a time; interrupt(), mode(),
// widened(), reason() and armed() from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pnmem/detail/equality.hpp"
#include "pnmem/host_sample.hpp"
#include "pnmem/provenance.hpp"

namespace pnmem {

enum class psi_stall : std::uint8_t { some, full };

constexpr std::string_view to_string(psi_stall s) noexcept { return s == psi_stall::full ? "full" : "some"; }

// The default trigger, written once (psi_trigger_config and
// linux_sampler_options both start from it): 100 ms of `some` stall in a 1 s
// window, the seed's some >= 10 % TIGHT line. See "Default" above.
inline constexpr std::chrono::microseconds psi_default_stall{100'000};
inline constexpr std::chrono::microseconds psi_default_window{1'000'000};

// One trigger: wake when `kind` stall time inside a moving `window` reaches `stall`.
// A value-initialised spec is the default trigger.
struct psi_trigger_spec {
  psi_stall kind = psi_stall::some;
  std::chrono::microseconds stall = psi_default_stall;
  std::chrono::microseconds window = psi_default_window;

  PNMEM_DEFAULTED_EQUALITY(psi_trigger_spec)
};

inline constexpr psi_trigger_spec default_psi_trigger{};

// The kernel's limits (kernel/sched/psi.c).
inline constexpr std::chrono::microseconds psi_window_min{500'000};
inline constexpr std::chrono::microseconds psi_window_max{10'000'000};
// Without CAP_SYS_RESOURCE the window must be a multiple of this.
inline constexpr std::chrono::microseconds psi_unprivileged_window_step{2'000'000};

// Window into [psi_window_min, psi_window_max], stall into [1 us, window].
constexpr psi_trigger_spec clamp_to_kernel_limits(psi_trigger_spec s) noexcept {
  if (s.window < psi_window_min) s.window = psi_window_min;
  if (s.window > psi_window_max) s.window = psi_window_max;
  if (s.stall < std::chrono::microseconds{1}) s.stall = std::chrono::microseconds{1};
  if (s.stall > s.window) s.stall = s.window;
  return s;
}

// The smallest window an unprivileged writer may use that is at least as wide
// as s's (a multiple of 2 s, at most 10 s), with the stall scaled to keep the
// stall/window ratio (rounded to the nearest microsecond). Expects a clamped spec.
constexpr psi_trigger_spec widen_to_unprivileged_window(psi_trigger_spec s) noexcept {
  const auto step = psi_unprivileged_window_step.count();
  auto window = (s.window.count() + step - 1) / step * step;
  if (window < step) window = step;
  if (window > psi_window_max.count()) window = psi_window_max.count();
  const auto old_window = s.window.count() > 0 ? s.window.count() : 1;
  // stall <= window <= 10 s and window <= 10 s: the product stays below 2^47.
  auto stall = (s.stall.count() * window + old_window / 2) / old_window;
  if (stall < 1) stall = 1;
  if (stall > window) stall = window;
  return {s.kind, std::chrono::microseconds{stall}, std::chrono::microseconds{window}};
}

// "some 100000 1000000": what is written (with its NUL) to a pressure file.
std::string psi_trigger_text(const psi_trigger_spec& s);

struct psi_trigger_config {
  std::filesystem::path root = "/";  // /proc/pressure/memory is read under it
  // A cgroup v2 memory.pressure file, as the caller found it (already under
  // root); empty for none. Every spec is armed on it as well.
  std::filesystem::path cgroup_pressure;
  std::vector<psi_trigger_spec> triggers{default_psi_trigger};
};

// What one armed trigger ended up as.
struct psi_armed_trigger {
  std::filesystem::path file;
  psi_trigger_spec requested;
  psi_trigger_spec armed;  // after clamping and widening
  bool widened = false;    // the kernel refused the requested window; 2 s steps instead
};

class psi_trigger {
 public:
  // Arms the triggers; never fails for the kernel's sake (see mode()). Throws
  // std::system_error only when no eventfd can be made (out of descriptors):
  // without one the watcher could not be stopped.
  explicit psi_trigger(psi_trigger_config config = {});
  ~psi_trigger();
  psi_trigger(psi_trigger&&) noexcept;
  psi_trigger& operator=(psi_trigger&&) noexcept;
  psi_trigger(const psi_trigger&) = delete;
  psi_trigger& operator=(const psi_trigger&) = delete;

  // Waits up to `timeout` (negative: 0). wake::event when a trigger fired, or
  // when a trigger's file failed and this fell back to polling (sample now to
  // see the new mode); wake::interrupted after interrupt(); wake::timeout
  // otherwise. An event seen together with an interrupt is returned first and
  // the interrupt stays pending for the next wait, so neither is lost.
  // Signals do not shorten the wait. A moved-from object returns interrupted.
  wake wait_for(std::chrono::nanoseconds timeout);

  // Makes the current wait, or the next one if none is in progress, return
  // wake::interrupted. Interrupts before a wait coalesce into one.
  // Async-signal-safe.
  void interrupt() noexcept;

  // Arms the same triggers on a cgroup's memory.pressure (v2) found after
  // construction, replacing those on a previous cgroup file. Call it from the
  // thread that waits (it changes the descriptors wait_for polls). Only while
  // mode() is trigger; a file that cannot be armed is skipped (false, and
  // reason() says why), or, if the kernel refuses the trigger, polling takes over.
  bool arm_cgroup_pressure(const std::filesystem::path& file);

  psi_mode mode() const noexcept;  // trigger, poll (refused or failed), none (no PSI)
  bool widened() const noexcept;   // some trigger runs on a wider window than asked
  std::string reason() const;      // why not (all) as asked; empty when all is as asked
  std::vector<psi_armed_trigger> armed() const;  // empty unless mode() == trigger

 private:
  struct state;
  std::unique_ptr<state> state_;
};

}  // namespace pnmem
