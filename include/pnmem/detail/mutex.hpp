// pnmem/detail/mutex.hpp - std::mutex as a capability clang's thread-safety analysis can see.
//
//   detail::mutex mu_;
//   int n_ PNMEM_GUARDED_BY(mu_);
//   { detail::lock_guard lk(mu_); ++n_; }                   // checked: n_ only under mu_
//   { detail::unique_lock lk(mu_); cv_.wait(lk.native()); }  // a condition variable's wait
//
// The same object code as std::mutex / std::lock_guard / std::unique_lock; only
// the annotations (thread_annotations.hpp) are added.
#pragma once

#include <mutex>

#include "pnmem/detail/thread_annotations.hpp"

namespace pnmem::detail {

class PNMEM_CAPABILITY("mutex") mutex {
 public:
  mutex() = default;
  mutex(const mutex&) = delete;
  mutex& operator=(const mutex&) = delete;

  void lock() PNMEM_ACQUIRE() { mu_.lock(); }
  void unlock() PNMEM_RELEASE() { mu_.unlock(); }

  // For std::condition_variable, which waits on a std::unique_lock<std::mutex>.
  std::mutex& native() noexcept { return mu_; }

 private:
  std::mutex mu_;
};

// Holds `mu` for its scope.
class PNMEM_SCOPED_CAPABILITY lock_guard {
 public:
  explicit lock_guard(mutex& mu) PNMEM_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~lock_guard() PNMEM_RELEASE() { mu_.unlock(); }
  lock_guard(const lock_guard&) = delete;
  lock_guard& operator=(const lock_guard&) = delete;

 private:
  mutex& mu_;
};

// Holds `mu` for its scope, as a std::unique_lock a condition variable can wait on.
// While a wait has it released the analysis still counts it as held: the wait
// re-takes it before it returns, which is all the code after the wait sees.
class PNMEM_SCOPED_CAPABILITY unique_lock {
 public:
  explicit unique_lock(mutex& mu) PNMEM_ACQUIRE(mu) : lk_(mu.native()) {}
  ~unique_lock() PNMEM_RELEASE() {}
  unique_lock(const unique_lock&) = delete;
  unique_lock& operator=(const unique_lock&) = delete;

  std::unique_lock<std::mutex>& native() noexcept { return lk_; }

 private:
  std::unique_lock<std::mutex> lk_;
};

}  // namespace pnmem::detail
