// pnmem/cuda/gpu_turn.hpp - one GPU turn per model: who may touch its buffers now.
//
// Buffers that move: one turn covers bind/resize *and* a whole
// step (begin ... poll until complete), so a resize never overlaps a step (the
// seed's hazards 1 and 2, where bind ran under the prefill turn while the
// decode step held no lock at all).
//
// Not a std::mutex: a step begins on one thread and may be polled to completion
// on another (the engine's driver thread), and a mutex must be unlocked by the
// thread that locked it. So the turn is a flag guarded by a mutex, and a
// `turn_hold` (move-only) is the proof of holding it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <utility>

#include "pnmem/detail/mutex.hpp"
#include "pnmem/detail/thread_annotations.hpp"

namespace pnmem::cuda {

class gpu_turn {
 public:
  using clock = std::chrono::steady_clock;

  gpu_turn() = default;
  gpu_turn(const gpu_turn&) = delete;
  gpu_turn& operator=(const gpu_turn&) = delete;

  // Never waits: false when someone holds the turn.
  bool try_acquire() noexcept PNMEM_EXCLUDES(mu_) {
    pnmem::detail::lock_guard lock(mu_);
    if (held_) return false;
    held_ = true;
    return true;
  }

  // Waits until the turn is free or `deadline` passes (false then).
  bool acquire_until(clock::time_point deadline) PNMEM_EXCLUDES(mu_) {
    pnmem::detail::unique_lock lock(mu_);
    // The loop a predicate wait would run, written out so the analysis sees held_ read under mu_.
    while (held_) {
      if (cv_.wait_until(lock.native(), deadline) == std::cv_status::timeout && held_) return false;
    }
    held_ = true;
    return true;
  }

  void release() noexcept PNMEM_EXCLUDES(mu_) {
    {
      pnmem::detail::lock_guard lock(mu_);
      held_ = false;
    }
    cv_.notify_one();
  }

  bool held() const noexcept PNMEM_EXCLUDES(mu_) {
    pnmem::detail::lock_guard lock(mu_);
    return held_;
  }

 private:
  mutable pnmem::detail::mutex mu_;
  std::condition_variable cv_;
  bool held_ PNMEM_GUARDED_BY(mu_) = false;
};

// Holding the turn; releases it when destroyed. Movable between threads.
class turn_hold {
 public:
  turn_hold() noexcept = default;
  // Adopts a turn the caller has just acquired.
  explicit turn_hold(gpu_turn& t) noexcept : turn_(&t) {}
  turn_hold(turn_hold&& o) noexcept : turn_(std::exchange(o.turn_, nullptr)) {}
  turn_hold& operator=(turn_hold&& o) noexcept {
    if (this != &o) {
      reset();
      turn_ = std::exchange(o.turn_, nullptr);
    }
    return *this;
  }
  turn_hold(const turn_hold&) = delete;
  turn_hold& operator=(const turn_hold&) = delete;
  ~turn_hold() { reset(); }

  explicit operator bool() const noexcept { return turn_ != nullptr; }
  void reset() noexcept {
    if (turn_ != nullptr) std::exchange(turn_, nullptr)->release();
  }

 private:
  gpu_turn* turn_ = nullptr;
};

}  // namespace pnmem::cuda
