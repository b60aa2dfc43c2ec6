// pnmem/engine/host_ledger.hpp - memory admitted is not free until a sample has seen it.
//
// admit() answers from the newest snapshot, and the watcher samples every 100-250 ms
// (or on a PSI event). Requests admitted between two samples all see the same
// MemAvailable: eight decode slots admitting a burst at once would each be told the
// whole budget is theirs, and together allocate eight times it (kubernetes#51745:
// a decision on stale stats, then the OOM killer). The ledger closes that gap.
//
//   pnmem::host_ledger ledger;                          // one per engine (per host budget)
//   auto r = ledger.admit(watcher, model, n_prompt, options);
//   if (r.answer.status == pnmem::admit_status::denied) ...;  // r.pending_bytes says what was promised
//   allocate_and_touch(r.answer.fit_tokens);            // the request's prefill memory
//   r.held.settle();                             // allocated: the next sample will see it
//   watcher.poll_now();                                 // optional: make that sample now
//
// The decision and the reservation happen under one lock, so concurrent admitters
// are ordered: each sees the bytes promised to those before it. A reservation
// counts against the host budget from admission until a sample that began after
// settle() (mem_state::host_read_ns) has the memory in its numbers; then it is
// forgotten. A reservation dropped without settle() (the request was shed, the
// allocation failed) is cancelled: its bytes come back at once. Dropping a settled
// one changes nothing: the memory is real and the next sample sees it, or its
// release.
//
// Only the host path reserves (the model's host_cost_bytes of the tokens that may start:
// KV, state and the activation peak); a GPU-resident request costs the host nothing and reserves 0.
//
// Bytes the engine allocates besides a request (a prompt-cache entry, swapped KV, a staging
// buffer) go through reserve_bytes: admit_host_bytes on the same budget, reserved on ADMIT.
//
//   auto r = ledger.reserve_bytes(watcher, entry_bytes, {.ttl = std::chrono::seconds(30)});
//   if (r.answer.status == pnmem::admit_status::admitted) { cache.insert(...); r.held.settle(); }
//
// A reservation may be given a time to live: one that travels (taken on an HTTP thread, spent
// later on the engine's loop) and is never settled or cancelled is dropped once it expires, so
// its bytes cannot leak. The clock is std::chrono::steady_clock, the watcher's default; give the
// ledger the watcher's clock (a function returning its nanoseconds) if it has another one.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "pnmem/clock_ns.hpp"
#include "pnmem/config.hpp"
#include "pnmem/cost_model.hpp"
#include "pnmem/detail/cxx.hpp"
#include "pnmem/detail/mutex.hpp"
#include "pnmem/detail/saturating.hpp"
#include "pnmem/detail/thread_annotations.hpp"
#include "pnmem/admission.hpp"
#include "pnmem/engine/admit.hpp"
#include "pnmem/live_state.hpp"
#include "pnmem/mem_state.hpp"

namespace pnmem {

class host_ledger {
 public:
  // The bytes one admitted request was promised. Move-only; must not outlive its ledger.
  class reservation {
   public:
    reservation() = default;
    reservation(reservation&& o) noexcept
        : ledger_(std::exchange(o.ledger_, nullptr)), id_(o.id_), bytes_(o.bytes_), settled_(o.settled_) {}
    reservation& operator=(reservation&& o) noexcept {
      if (this != &o) {
        release();
        ledger_ = std::exchange(o.ledger_, nullptr);
        id_ = o.id_;
        bytes_ = o.bytes_;
        settled_ = o.settled_;
      }
      return *this;
    }
    reservation(const reservation&) = delete;
    reservation& operator=(const reservation&) = delete;
    ~reservation() { release(); }

    // True while it holds bytes in a ledger (not yet settled or cancelled).
    explicit operator bool() const noexcept { return ledger_ != nullptr; }
    std::uint64_t bytes() const noexcept { return bytes_; }
    bool settled() const noexcept { return settled_; }

    // The memory is allocated (and touched): samples that begin from now on see it.
    void settle() {
      if (ledger_ != nullptr) settle_at(ledger_->now_());
    }
    void settle_at(std::int64_t now) {
      if (ledger_ == nullptr || settled_) return;
      ledger_->settle(id_, now);
      settled_ = true;
      ledger_ = nullptr;  // the ledger forgets it once a sample has seen it
    }

    // Nothing was allocated: give the bytes back now.
    void cancel() { release(); }

   private:
    friend class host_ledger;
    reservation(host_ledger* l, std::uint64_t id, std::uint64_t bytes) noexcept : ledger_(l), id_(id), bytes_(bytes) {}
    void release() {
      if (ledger_ != nullptr) std::exchange(ledger_, nullptr)->cancel(id_);
    }
    host_ledger* ledger_ = nullptr;
    std::uint64_t id_ = 0;
    std::uint64_t bytes_ = 0;
    bool settled_ = false;
  };

  // admit()'s (or reserve_bytes()'s) answer on the budget left after what is already promised.
  struct admission {
    admit_answer answer;              // as pnmem::admit (or admit_host_bytes), on host_avail - pending_bytes
    std::uint64_t pending_bytes = 0;  // promised to earlier admissions, not yet in the sample
    reservation held;                 // admit: host_cost_bytes(fit_tokens) when admitted or capped on the
                                      // host path; reserve_bytes: the bytes, when admitted
  };

  struct reserve_options {
    pnmem::policy policy = env_policy();  // default: the PN_* variables' (config.hpp), read once
    std::chrono::nanoseconds ttl{0};  // an unsettled reservation is dropped this long after; 0 = never
  };

  using clock_fn = std::int64_t (*)();

  explicit host_ledger(clock_fn now = &steady_now_ns) noexcept : now_(now) {}
  host_ledger(const host_ledger&) = delete;
  host_ledger& operator=(const host_ledger&) = delete;

  // pnmem::admit against the watcher's newest snapshot with the pending bytes taken
  // off MemAvailable, and the need reserved when the request may start.
  // With encoder items (images): their cross-attention KV is reserved with the tokens'.
  template <class Watcher>
  admission admit(const Watcher& w, const model_desc& m, int n_tokens, int encoder_items, const admit_options& o = {})
      PNMEM_EXCLUDES(mu_) {
    admission out;
    detail::lock_guard lk(mu_);
    if (!w.running()) {
      out.answer = pnmem::admit(w, m, n_tokens, encoder_items, o);  // fail open, as admit does
      return out;
    }
    const mem_state s = budget_locked(read_for_decision(w), out.pending_bytes);
    out.answer = admit_snapshot(s, m, n_tokens, encoder_items, o);
    const bool starts = out.answer.status == admit_status::admitted || out.answer.status == admit_status::capped;
    const std::uint64_t need =
        m.gpu_resident ? 0 : host_cost_bytes(m.cost, out.answer.fit_tokens, m.kv, encoder_items);
    if (starts && need > 0) out.held = hold_locked(need, never);
    return out;
  }
  template <class Watcher>
  admission admit(const Watcher& w, const model_desc& m, int n_tokens, const admit_options& o = {}) PNMEM_EXCLUDES(mu_) {
    return admit(w, m, n_tokens, 0, o);
  }

  // admit_host_bytes (admission.hpp) against the watcher's newest snapshot with the pending bytes
  // taken off MemAvailable; the bytes are reserved when admitted. A CAP reserves nothing: its
  // detail.limit_bytes says how many bytes would fit now. With no watcher running: fail_open,
  // nothing reserved (as admit).
  template <class Watcher>
  admission reserve_bytes(const Watcher& w, std::uint64_t bytes) PNMEM_EXCLUDES(mu_) {
    // (An overload, not a default argument: clang cannot use reserve_options' member initializers
    // inside the class that nests it.)
    return reserve_bytes(w, bytes, reserve_options{});
  }
  template <class Watcher>
  admission reserve_bytes(const Watcher& w, std::uint64_t bytes, const reserve_options& o) PNMEM_EXCLUDES(mu_) {
    admission out;
    detail::lock_guard lk(mu_);
    if (!w.running()) {
      out.answer.status = admit_status::fail_open;
      out.answer.detail = admit_host_bytes(bytes, mem_state{}, o.policy);
      return out;
    }
    const mem_state s = budget_locked(read_for_decision(w), out.pending_bytes);
    const admit_result r = admit_host_bytes(bytes, s, o.policy);
    out.answer.level = s.level;
    out.answer.reason = r.reason;
    out.answer.detail = r;
    out.answer.status = r.verdict == verdict::admit ? admit_status::admitted
                        : r.verdict == verdict::cap ? admit_status::capped
                                                    : admit_status::denied;
    if (r.verdict == verdict::admit && bytes > 0) {
      const std::int64_t now = now_();
      const std::int64_t ttl = o.ttl.count();
      const std::int64_t expires = ttl <= 0 ? never : now > never - ttl ? never : now + ttl;
      out.held = hold_locked(bytes, expires);
    }
    return out;
  }

  // Bytes promised and not yet in the watcher's newest snapshot.
  template <class Watcher>
  std::uint64_t pending_bytes(const Watcher& w) PNMEM_EXCLUDES(mu_) {
    detail::lock_guard lk(mu_);
    return pending_locked(read_for_decision(w).host_read_ns, now_());
  }

  // Reservations the ledger still counts (not cancelled, not yet seen by a sample).
  std::size_t size() const PNMEM_EXCLUDES(mu_) {
    detail::lock_guard lk(mu_);
    return entries_.size();
  }

  // The ledger's clock (steady_clock unless another was given), in nanoseconds.
  std::int64_t now_ns() const { return now_(); }

 private:
  static constexpr std::int64_t unsettled = std::numeric_limits<std::int64_t>::max();
  static constexpr std::int64_t never = std::numeric_limits<std::int64_t>::max();

  struct entry {
    std::uint64_t id;
    std::uint64_t bytes;
    std::int64_t settled_ns;  // unsettled until the memory is allocated
    std::int64_t expires_ns;  // an unsettled entry is dropped at this time; never = no expiry
  };

  // Snapshots reach the ledger in read order (they are read under mu_ and the
  // watcher's host_read_ns only grows), so an entry a sample has seen can go;
  // so can an unsettled one past its expiry.
  std::uint64_t pending_locked(std::int64_t host_read_ns, std::int64_t now) PNMEM_REQUIRES(mu_) {
    const auto gone = [&](const entry& e) {
      return e.settled_ns != unsettled ? e.settled_ns < host_read_ns : e.expires_ns <= now;
    };
#if PNMEM_HAS_ERASE_IF
    std::erase_if(entries_, gone);
#else
    entries_.erase(std::remove_if(entries_.begin(), entries_.end(), gone), entries_.end());
#endif
    std::uint64_t sum = 0;
    for (const entry& e : entries_) sum = detail::sat_add(sum, e.bytes);
    return sum;
  }

  // The snapshot with the pending bytes taken off MemAvailable. Host numbers unsampled
  // (total 0) stay unsampled: admission fails open there.
  mem_state budget_locked(mem_state s, std::uint64_t& pending) PNMEM_REQUIRES(mu_) {
    pending = pending_locked(s.host_read_ns, now_());
    if (s.host_total_bytes > 0) s.host_avail_bytes -= std::min(s.host_avail_bytes, pending);
    return s;
  }

  reservation hold_locked(std::uint64_t bytes, std::int64_t expires_ns) PNMEM_REQUIRES(mu_) {
    const std::uint64_t id = ++next_id_;
    entries_.push_back(entry{id, bytes, unsettled, expires_ns});
    return reservation(this, id, bytes);
  }

  void settle(std::uint64_t id, std::int64_t now) PNMEM_EXCLUDES(mu_) {
    detail::lock_guard lk(mu_);
    for (entry& e : entries_) {
      if (e.id == id) e.settled_ns = now;
    }
  }

  void cancel(std::uint64_t id) PNMEM_EXCLUDES(mu_) {
    detail::lock_guard lk(mu_);
#if PNMEM_HAS_ERASE_IF
    std::erase_if(entries_, [&](const entry& e) { return e.id == id; });
#else
    entries_.erase(std::remove_if(entries_.begin(), entries_.end(), [&](const entry& e) { return e.id == id; }),
                   entries_.end());
#endif
  }

  clock_fn now_;
  mutable detail::mutex mu_;
  std::vector<entry> entries_ PNMEM_GUARDED_BY(mu_);
  std::uint64_t next_id_ PNMEM_GUARDED_BY(mu_) = 0;
};

}  // namespace pnmem
