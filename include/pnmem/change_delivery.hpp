// pnmem/change_delivery.hpp - level changes, delivered to subscribers one at a time, in order.
//
// The watcher's publishers queue() each change while they still hold the
// watcher's write mutex (so the queue is in publication order), then call
// deliver() with no lock held. deliver() drains the queue on one thread at a
// time: a change published from inside a subscriber (a callback that calls
// set_die or poll_now) only queues, and the delivering thread picks it up, so a
// subscriber never runs inside another and never sees changes out of order.
//
// Subscribers run with no lock held (they may read, publish, subscribe or
// unsubscribe). After unsubscribe() returns the subscriber is not called
// again, except for a call already running on another thread. A subscriber
// that throws loses the rest of that change's delivery to the caller of
// deliver(); the next publisher delivers what is still queued.
//
// A subscriber asks for level changes only (the default) or for every published snapshot
// (delivery::every_sample: each sample and set_die, in order, `from == to` when the level held):
// what a rule that must be re-checked on fresh numbers needs (the back-pressure gate's release).
// Publishers queue a snapshot that did not change the level only while such a subscriber exists.
//
// Locking: one mutex, a leaf (nothing else is taken while it is held).
#pragma once

#include "pnmem/detail/cxx.hpp"  // PNMEM_HAS_*: which of the standard headers below this C++ has

#if !PNMEM_HAS_ERASE_IF
#include <algorithm>
#endif
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "pnmem/detail/mutex.hpp"
#include "pnmem/detail/thread_annotations.hpp"
#include "pnmem/mem_level.hpp"
#include "pnmem/mem_state.hpp"

namespace pnmem {

// A published level change, delivered to subscribers in publication order.
struct level_change {
  mem_level from;
  mem_level to;
  mem_state state;  // the snapshot that carried the change
};

enum class delivery : std::uint8_t {
  level_changes,  // only snapshots whose level differs from the one before
  every_sample,   // every published snapshot
};

class change_delivery {
 public:
  using subscriber = std::function<void(const level_change&)>;
  using subscription_id = std::uint64_t;

  subscription_id subscribe(subscriber fn, delivery d = delivery::level_changes) PNMEM_EXCLUDES(mu_) {
    auto shared = std::make_shared<subscriber>(std::move(fn));
    detail::lock_guard lk(mu_);
    const subscription_id id = ++last_id_;
    subs_.push_back({id, std::move(shared), d});
    if (d == delivery::every_sample) every_sample_subs_.fetch_add(1, std::memory_order_relaxed);
    return id;
  }

  void unsubscribe(subscription_id id) PNMEM_EXCLUDES(mu_) {
    detail::lock_guard lk(mu_);
    const auto unsubscribed = [&](const subscription& s) {
      if (s.id != id) return false;
      if (s.mode == delivery::every_sample) every_sample_subs_.fetch_sub(1, std::memory_order_relaxed);
      return true;
    };
#if PNMEM_HAS_ERASE_IF
    std::erase_if(subs_, unsubscribed);
#else
    subs_.erase(std::remove_if(subs_.begin(), subs_.end(), unsubscribed), subs_.end());
#endif
  }

  // Whether a snapshot that did not change the level must be queued: someone wants every sample.
  // Read without the lock by publishers; a subscriber added concurrently sees the next snapshot.
  bool wants_every_sample() const noexcept { return every_sample_subs_.load(std::memory_order_relaxed) > 0; }

  // Queues a change. Called by a publisher in publication order.
  void queue(level_change c) PNMEM_EXCLUDES(mu_) {
    detail::lock_guard lk(mu_);
    queue_.push_back(std::move(c));
  }

  // Calls the subscribers for every queued change, unless another thread is
  // already delivering (it will deliver these too).
  void deliver() PNMEM_EXCLUDES(mu_) {
    for (;;) {
      level_change c;
      std::vector<std::shared_ptr<subscriber>> targets;
      {
        detail::lock_guard lk(mu_);
        if (delivering_ || queue_.empty()) return;
        // Copied first: if the copy throws, nothing has changed.
        const bool changed = queue_.front().from != queue_.front().to;
        targets.reserve(subs_.size());
        for (const subscription& s : subs_) {
          if (changed || s.mode == delivery::every_sample) targets.push_back(s.fn);
        }
        delivering_ = true;
        c = std::move(queue_.front());
        queue_.pop_front();
      }
      // Whatever a subscriber does (even throw), the next publisher can deliver.
      struct release {
        change_delivery* d;
        ~release() {
          detail::lock_guard lk(d->mu_);
          d->delivering_ = false;
        }
      } guard{this};
      for (const auto& fn : targets) (*fn)(c);
    }
  }

  // fork() (detail/fork_guard.hpp, through the watcher): held across the fork, so the queue and the
  // subscriber list are never copied mid-change; in the child, a delivery that was running on another
  // thread is over (that thread is gone), so the next publisher delivers what is queued.
  void lock_for_fork() PNMEM_NO_THREAD_SAFETY_ANALYSIS { mu_.lock(); }
  void unlock_after_fork(bool in_child) PNMEM_NO_THREAD_SAFETY_ANALYSIS {
    if (in_child) delivering_ = false;
    mu_.unlock();
  }

 private:
  struct subscription {
    subscription_id id;
    std::shared_ptr<subscriber> fn;  // shared: a delivery in progress keeps it alive past unsubscribe
    delivery mode;
  };

  detail::mutex mu_;
  std::deque<level_change> queue_ PNMEM_GUARDED_BY(mu_);
  bool delivering_ PNMEM_GUARDED_BY(mu_) = false;
  std::vector<subscription> subs_ PNMEM_GUARDED_BY(mu_);
  subscription_id last_id_ PNMEM_GUARDED_BY(mu_) = 0;
  std::atomic<int> every_sample_subs_{0};  // changed under mu_
};

// Undoes a subscription when it goes out of scope (or on disconnect()). Move-only.
// Made from the call that unsubscribes, so it serves any source of changes:
//
//   pnmem::scoped_subscription sub{[&w, id = w.subscribe(fn)] { w.unsubscribe(id); }};
//
// It must not outlive what it unsubscribes from.
class scoped_subscription {
 public:
  scoped_subscription() noexcept = default;
  explicit scoped_subscription(std::function<void()> unsubscribe) noexcept : unsubscribe_(std::move(unsubscribe)) {}
  scoped_subscription(const scoped_subscription&) = delete;
  scoped_subscription& operator=(const scoped_subscription&) = delete;
  scoped_subscription(scoped_subscription&& o) noexcept : unsubscribe_(std::exchange(o.unsubscribe_, nullptr)) {}
  scoped_subscription& operator=(scoped_subscription&& o) noexcept {
    if (this != &o) {
      disconnect();
      unsubscribe_ = std::exchange(o.unsubscribe_, nullptr);
    }
    return *this;
  }
  ~scoped_subscription() { disconnect(); }

  void disconnect() {
    if (unsubscribe_) std::exchange(unsubscribe_, nullptr)();
  }
  bool connected() const noexcept { return static_cast<bool>(unsubscribe_); }

 private:
  std::function<void()> unsubscribe_;
};

}  // namespace pnmem
