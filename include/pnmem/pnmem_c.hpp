// pnmem/pnmem_c.hpp - the C ABI (pnmem/pnmem_c.h) for a C++17 engine: the glue every C++ caller of the
// C ABI writes once, written here once. Header-only; link libpnmem_c as for the C header.
//
//   pnmem::c::reservation r = pnmem::c::make_room(entry_bytes, [&](std::uint64_t want) { return cache.drop_oldest(want); }, a);
//   if (a.status == PNMEM_ADMITTED) { cache.insert(...); r.settle(); }      // else r cancels itself
//   std::string why = pnmem::c::explain(a);                                 // any length
//   std::int64_t s = pnmem::c::retry_after(a).seconds();                    // the Retry-After header's value
//   std::string body = pnmem::c::metrics_text();                            // the /metrics lines, whole
//   pnmem::c::subscription sub = pnmem::c::subscribe([](const pnmem_level_change& c) { ... });
//   pnmem::c::shed_hook shed{[&](std::uint64_t want) { return cache.drop_oldest(want); }};
//
// reservation: a pnmem_reservation that cancels itself when dropped unsettled (a lost allocation gives
// its bytes back at once), moves, and settles or cancels once. subscription and shed_hook end with their
// scope (pnmem_unsubscribe; pnmem_set_shed_hook(NULL)), each returning once a call running on another
// thread has returned, so what the callable uses may go right after. The process has one shed hook: a
// second shed_hook replaces the first, and the first's end then removes nothing of the second's.
// Callables that throw: what a make_room callable throws is rethrown from make_room (nothing reserved);
// a subscriber's or a shed hook's exception is logged by pnmem (the sink) and the watcher carries on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "pnmem/pnmem_c.h"

namespace pnmem {
namespace c {

// pnmem_explain's line, whatever its length.
inline std::string explain(const pnmem_admit_answer& a) {
  char line[256];
  const int n = pnmem_explain(&a, line, sizeof line);
  if (n < 0) return std::string();
  if (static_cast<std::size_t>(n) < sizeof line) return std::string(line, static_cast<std::size_t>(n));
  std::string longer(static_cast<std::size_t>(n) + 1, '\0');
  pnmem_explain(&a, &longer[0], longer.size());
  longer.resize(static_cast<std::size_t>(n));
  return longer;
}

// pnmem_metrics_text, whole: sized first, again while a newer snapshot renders longer. Empty on failure.
inline std::string metrics_text(unsigned what = PNMEM_METRICS_ALL) {
  int n = pnmem_metrics_text(nullptr, 0, what);
  std::string out;
  while (n >= 0) {
    out.assign(static_cast<std::size_t>(n) + 1, '\0');
    const int m = pnmem_metrics_text(&out[0], out.size(), what);
    if (m < 0) return std::string();
    if (static_cast<std::size_t>(m) < out.size()) {
      out.resize(static_cast<std::size_t>(m));
      return out;
    }
    n = m;
  }
  return std::string();
}

// pnmem_retry_after_ms: the wait and what it rests on; seconds() rounds up, as Retry-After wants.
struct retry_hint {
  std::int64_t ms = 0;
  const char* basis = "";
  std::int64_t seconds() const noexcept { return ms <= 0 ? 0 : (ms + 999) / 1000; }
  // Only a guess from how long the pressure has held (pnmem_retry_basis_is_guess).
  bool guess() const noexcept { return pnmem_retry_basis_is_guess(basis) == 1; }
};
inline retry_hint retry_after(const pnmem_admit_answer& a) {
  retry_hint h;
  const char* basis = nullptr;
  h.ms = pnmem_retry_after_ms(&a, &basis);
  if (basis != nullptr) h.basis = basis;
  return h;
}

// A C reservation handle that cancels itself when dropped unsettled.
class reservation {
 public:
  reservation() noexcept = default;
  explicit reservation(pnmem_reservation handle) noexcept : handle_(handle) {}
  reservation(const reservation&) = delete;
  reservation& operator=(const reservation&) = delete;
  reservation(reservation&& o) noexcept : handle_(std::exchange(o.handle_, 0)) {}
  reservation& operator=(reservation&& o) noexcept {
    if (this != &o) {
      cancel();
      handle_ = std::exchange(o.handle_, 0);
    }
    return *this;
  }
  ~reservation() { cancel(); }

  void settle() noexcept {
    if (handle_ != 0) pnmem_reservation_settle(std::exchange(handle_, 0));
  }
  void cancel() noexcept {
    if (handle_ != 0) pnmem_reservation_cancel(std::exchange(handle_, 0));
  }
  pnmem_reservation handle() const noexcept { return handle_; }
  explicit operator bool() const noexcept { return handle_ != 0; }

 private:
  pnmem_reservation handle_ = 0;
};

// pnmem_reserve_bytes into `out`; ttl_ms <= 0: never expires.
inline reservation reserve_bytes(std::uint64_t bytes, pnmem_admit_answer& out, std::int64_t ttl_ms = 0) {
  pnmem_reservation r = 0;
  if (pnmem_reserve_bytes(bytes, ttl_ms, &out, &r) != 0) out.status = PNMEM_FAIL_OPEN;
  return reservation(r);
}

// pnmem_make_room with a callable for the cache's drop-oldest function: std::uint64_t(std::uint64_t
// bytes_wanted), the bytes it freed. A call that fails (-1) leaves out.status PNMEM_FAIL_OPEN.
template <class DropOldest>
reservation make_room(std::uint64_t bytes, DropOldest&& drop_oldest, pnmem_admit_answer& out, std::int64_t ttl_ms = 0) {
  struct call {
    DropOldest* fn;
    std::exception_ptr thrown;
    static std::uint64_t trampoline(std::uint64_t want, void* user) noexcept {
      auto& self = *static_cast<call*>(user);
      try {
        return static_cast<std::uint64_t>((*self.fn)(want));
      } catch (...) {
        self.thrown = std::current_exception();  // rethrown after pnmem_make_room: nothing freed here
        return 0;
      }
    }
  } c{&drop_oldest, nullptr};
  pnmem_reservation r = 0;
  if (pnmem_make_room(bytes, ttl_ms, &call::trampoline, &c, &out, &r) != 0) out.status = PNMEM_FAIL_OPEN;
  reservation held(r);
  if (c.thrown) std::rethrow_exception(c.thrown);  // `held` cancels itself on the way out
  return held;
}

// A level subscription that ends with its scope.
class subscription {
 public:
  subscription() noexcept = default;
  subscription(const subscription&) = delete;
  subscription& operator=(const subscription&) = delete;
  subscription(subscription&& o) noexcept : id_(std::exchange(o.id_, 0)), fn_(std::move(o.fn_)) {}
  subscription& operator=(subscription&& o) noexcept {
    if (this != &o) {
      end();
      id_ = std::exchange(o.id_, 0);
      fn_ = std::move(o.fn_);
    }
    return *this;
  }
  ~subscription() { end(); }

  void end() noexcept {
    if (id_ != 0) pnmem_unsubscribe(std::exchange(id_, 0));  // returns once a running call has returned
    fn_.reset();
  }
  explicit operator bool() const noexcept { return id_ != 0; }

 private:
  template <class F>
  friend subscription subscribe(F&& fn);
  using function = std::function<void(const pnmem_level_change&)>;
  static void trampoline(void* user, const pnmem_level_change* change) {
    (*static_cast<function*>(user))(*change);  // what it throws, pnmem logs
  }
  pnmem_subscription id_ = 0;
  std::unique_ptr<function> fn_;  // where pnmem's user pointer points: it does not move with the object
};

// pnmem_subscribe with a callable: void(const pnmem_level_change&).
template <class F>
subscription subscribe(F&& fn) {
  subscription s;
  s.fn_ = std::make_unique<subscription::function>(std::forward<F>(fn));
  s.id_ = pnmem_subscribe(&subscription::trampoline, s.fn_.get());
  if (s.id_ == 0) s.fn_.reset();
  return s;
}

// The process's shed hook (pnmem_set_shed_hook) for as long as this object lives: a callable
// std::uint64_t(std::uint64_t bytes_wanted), called on pnmem's poll thread while the host is below WATCH.
class shed_hook {
 public:
  using function = std::function<std::uint64_t(std::uint64_t)>;
  shed_hook() noexcept = default;
  explicit shed_hook(function fn) : fn_(std::make_unique<function>(std::move(fn))) {
    std::lock_guard<std::mutex> lk(mu());
    if (pnmem_set_shed_hook(&trampoline, fn_.get()) == 0) {
      newest() = fn_.get();
    } else {
      fn_.reset();
    }
  }
  shed_hook(const shed_hook&) = delete;
  shed_hook& operator=(const shed_hook&) = delete;
  shed_hook(shed_hook&& o) noexcept : fn_(std::move(o.fn_)) {}
  shed_hook& operator=(shed_hook&& o) noexcept {
    if (this != &o) {
      end();
      fn_ = std::move(o.fn_);
    }
    return *this;
  }
  ~shed_hook() { end(); }

  // Removes the hook if it is still this one (a newer shed_hook may have replaced it); returns once a
  // call running on another thread has returned.
  void end() noexcept {
    if (fn_ == nullptr) return;
    {
      std::lock_guard<std::mutex> lk(mu());
      if (newest() == fn_.get()) {
        pnmem_set_shed_hook(nullptr, nullptr);
        newest() = nullptr;
      }
    }
    fn_.reset();
  }
  explicit operator bool() const noexcept { return fn_ != nullptr; }

 private:
  // Which shed_hook's function pnmem calls now (the newest set), under mu().
  static std::mutex& mu() noexcept {
    static std::mutex m;
    return m;
  }
  static const function*& newest() noexcept {
    static const function* f = nullptr;
    return f;
  }
  static std::uint64_t trampoline(std::uint64_t want, void* user) {
    return (*static_cast<function*>(user))(want);  // what it throws, pnmem logs; nothing is credited
  }
  std::unique_ptr<function> fn_;
};

}  // namespace c
}  // namespace pnmem
