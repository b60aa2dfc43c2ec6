// pnmem/cuda/gpu_turn.hpp - one GPU turn per model: who may touch its buffers now.
//
// Buffers that move: one turn covers bind/resize *and* a whole
// step (begin ... poll until complete), so a resize never overlaps a step (the
// seed's hazards 1 and 2, where bind ran under the prefill turn while the
// decode step held no lock at all).
//
// Not a std::mutex: a step begins on one thread and may be polled to completion
// on another (the engine's driver thread), and a mutex must be unlocked by the
// thread that locked it. So the turn is state guarded by a mutex, and a
// `turn_hold` (move-only) is the proof of holding it.
//
// First come, first served, as the seed's ticket system: each acquirer that has to
// wait takes the next ticket (next_ticket_), and the turn goes to the tickets in
// the order they were taken (now_serving_). A bind that asks while decode steps run
// back to back is served after the steps already queued, at most one per step
// thread: a step that lets go and asks again queues behind the bind. (A flag and a
// condition variable, as before, let the thread that had just released win the
// turn again before any waiter woke: a bind could time out while later steps won.)
//   - A released turn is handed to the next ticket at once, whether or not its
//     thread has woken yet: try_acquire answers false while anyone is queued, so it
//     never overtakes a waiter.
//   - A waiter whose deadline passes gives its ticket up (abandoned_): the ticket
//     is skipped when its turn comes, so the tickets behind it are served as if it
//     had never asked. A waiter whose ticket is served at its deadline keeps the turn.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "pnmem/detail/mutex.hpp"
#include "pnmem/detail/thread_annotations.hpp"

namespace pnmem::cuda {

class gpu_turn {
 public:
  using clock = std::chrono::steady_clock;

  gpu_turn() = default;
  gpu_turn(const gpu_turn&) = delete;
  gpu_turn& operator=(const gpu_turn&) = delete;

  // Never waits: false when someone holds the turn or is queued for it.
  bool try_acquire() noexcept PNMEM_EXCLUDES(mu_) {
    pnmem::detail::lock_guard lock(mu_);
    if (now_serving_ != next_ticket_) return false;
    ++next_ticket_;
    return true;
  }

  // Waits until every acquirer queued before this one has had (or given up) the
  // turn and the turn is this one's; false when `deadline` passes first (then this
  // acquirer leaves the queue). A deadline already past waits for nothing: true
  // only if the turn is free and nobody is queued.
  bool acquire_until(clock::time_point deadline) PNMEM_EXCLUDES(mu_) {
    pnmem::detail::unique_lock lock(mu_);
    if (now_serving_ == next_ticket_) {  // free, nobody queued
      ++next_ticket_;
      return true;
    }
    if (clock::now() >= deadline) return false;
    // Room to give the ticket up without allocating then: at most every ticket
    // outstanding (this one included) is ever abandoned at once.
    abandoned_.reserve(static_cast<std::size_t>(next_ticket_ - now_serving_) + 1);
    const std::uint64_t ticket = next_ticket_++;
    try {
      // The loop a predicate wait would run, written out so the analysis sees the
      // tickets read under mu_.
      while (now_serving_ != ticket) {
        if (cv_.wait_until(lock.native(), deadline) == std::cv_status::timeout && now_serving_ != ticket) {
          abandon(ticket);
          return false;
        }
      }
    } catch (...) {
      // A wait that threw (it does not on Linux): leave the queue, or pass the turn on.
      if (now_serving_ == ticket) {
        serve_next();
        cv_.notify_all();
      } else {
        abandon(ticket);
      }
      throw;
    }
    return true;
  }

  // Hands the turn to the next ticket still waiting (or frees it). Any thread may
  // release a turn another thread acquired; releasing a turn nobody holds does nothing.
  void release() noexcept PNMEM_EXCLUDES(mu_) {
    {
      pnmem::detail::lock_guard lock(mu_);
      if (now_serving_ == next_ticket_) return;
      serve_next();
    }
    cv_.notify_all();  // only the thread whose ticket is served now proceeds
  }

  // Held, or handed to a waiter that has not woken yet.
  bool held() const noexcept PNMEM_EXCLUDES(mu_) {
    pnmem::detail::lock_guard lock(mu_);
    return now_serving_ != next_ticket_;
  }

  // Acquirers queued behind the holder (those that gave up are not counted).
  std::size_t waiting() const noexcept PNMEM_EXCLUDES(mu_) {
    pnmem::detail::lock_guard lock(mu_);
    if (now_serving_ == next_ticket_) return 0;
    return static_cast<std::size_t>(next_ticket_ - now_serving_ - 1) - abandoned_.size();
  }

 private:
  // The ticket after the one served now that has not been given up.
  void serve_next() noexcept PNMEM_REQUIRES(mu_) {
    ++now_serving_;
    for (;;) {
      const auto it = std::find(abandoned_.begin(), abandoned_.end(), now_serving_);
      if (it == abandoned_.end()) return;
      *it = abandoned_.back();
      abandoned_.pop_back();
      ++now_serving_;
    }
  }

  // Capacity was reserved when the ticket was taken: push_back does not allocate.
  void abandon(std::uint64_t ticket) noexcept PNMEM_REQUIRES(mu_) { abandoned_.push_back(ticket); }

  mutable pnmem::detail::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t next_ticket_ PNMEM_GUARDED_BY(mu_) = 0;  // the ticket the next waiter takes
  std::uint64_t now_serving_ PNMEM_GUARDED_BY(mu_) = 0;  // whose turn it is; == next_ticket_: free
  std::vector<std::uint64_t> abandoned_ PNMEM_GUARDED_BY(mu_);  // tickets given up, not yet reached
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
