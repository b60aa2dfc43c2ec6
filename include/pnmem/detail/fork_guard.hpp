// pnmem/detail/fork_guard.hpp - what fork() does to pnmem's threads and locks, and how the child recovers.
//
// vLLM and SGLang fork worker processes. fork() copies the memory of every thread but starts only the
// calling one in the child: a watcher's poll thread is gone there, though its std::thread object still
// says joinable, and any lock another thread held at that instant stays held forever. So pnmem takes
// part in the fork through pthread_atfork:
//
//   before the fork (the forking thread)  every participant takes its locks, in the order it always
//                                         takes them: the fork never splits a sample, a publish, a
//                                         reservation or a delivery in the middle;
//   after, in the parent                  it releases them: nothing else changed;
//   after, in the child                   it releases them and forgets the threads that did not come
//                                         along (a watcher is then not running: admissions fail open,
//                                         visibly, until start() starts a new poll thread there).
//
// Participants register when constructed (with a rank: the order their locks are taken in) and leave
// when destroyed. A participant's hooks run with the registry's mutex held, so none is destroyed
// during a fork. Do not fork from inside pnmem's callbacks
// (a level subscriber, a die source, a log sink): the fork would wait for locks its own thread holds.
// posix_spawn and vfork (Python's subprocess) run no fork handlers and need none: the child execs.
//
// Where there is no pthread_atfork (not POSIX) nothing registers, and generation() stays 0.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <iterator>
#include <mutex>
#include <vector>

#if defined(__has_include)
#if __has_include(<pthread.h>)
#include <pthread.h>
#define PNMEM_HAS_ATFORK 1
#endif
#endif
#ifndef PNMEM_HAS_ATFORK
#define PNMEM_HAS_ATFORK 0
#endif

namespace pnmem::detail {

// What a participant does around a fork, each called with the participant's own pointer. Plain
// function pointers (no virtual functions: engines build with -Wnon-virtual-dtor -Werror).
struct fork_hooks {
  void (*prepare)(void* self) noexcept;  // take every lock a fork must not split
  void (*parent)(void* self) noexcept;   // release them
  void (*child)(void* self) noexcept;    // release them; only the forking thread exists now
};

class fork_registry {
 public:
  // The process's registry (one per copy of this header's code: each shared library that uses it has
  // its own, with its own handlers). Never destroyed: participants may leave it during exit.
  static fork_registry& get() {
    static fork_registry* const r = new fork_registry();
    return *r;
  }

  // Lock ranks: participants lock in rank order (then in registration order), and unlock in reverse.
  // A lower rank's locks are taken before a higher one's everywhere else too.
  static constexpr int rank_watcher = 0;  // a watcher's locks (its level callbacks may call the rest)
  static constexpr int rank_c_state = 1;  // the C ABI's handles and subscriptions
  static constexpr int rank_ledger = 2;   // a host ledger's book (a leaf)

  void add(void* self, int rank, fork_hooks hooks) {
    std::lock_guard<std::mutex> lk(mu_);
    auto at = list_.end();
    while (at != list_.begin() && std::prev(at)->rank > rank) --at;
    list_.insert(at, entry{rank, self, hooks});
  }
  void remove(void* self) {
    std::lock_guard<std::mutex> lk(mu_);
    list_.erase(std::remove_if(list_.begin(), list_.end(), [self](const entry& e) { return e.self == self; }),
                list_.end());
  }

  // How many forks this process descends from since the registry was made (0 in the original process).
  std::uint64_t generation() const noexcept { return generation_.load(std::memory_order_acquire); }

 private:
  fork_registry() {
#if PNMEM_HAS_ATFORK
    ::pthread_atfork(&prepare, &parent, &child);
#endif
  }

  struct entry {
    int rank;
    void* self;
    fork_hooks hooks;
  };

  static void prepare() noexcept {
    fork_registry& r = get();
    r.mu_.lock();
    for (const entry& e : r.list_) e.hooks.prepare(e.self);
  }
  static void parent() noexcept {
    fork_registry& r = get();
    for (auto it = r.list_.rbegin(); it != r.list_.rend(); ++it) it->hooks.parent(it->self);
    r.mu_.unlock();
  }
  static void child() noexcept {
    fork_registry& r = get();
    r.generation_.fetch_add(1, std::memory_order_acq_rel);
    for (auto it = r.list_.rbegin(); it != r.list_.rend(); ++it) it->hooks.child(it->self);
    r.mu_.unlock();
  }

  std::mutex mu_;
  std::vector<entry> list_;
  std::atomic<std::uint64_t> generation_{0};
};

}  // namespace pnmem::detail
