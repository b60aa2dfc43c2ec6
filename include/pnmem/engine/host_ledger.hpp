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
//
// Memory the engine frees is likewise invisible until a sample sees it. credit_freed(bytes) counts it as
// available at once, until a sample that began after the credit has it in its numbers (or shows it did
// not come back: memory freed to a malloc arena, not to the kernel, never reaches MemAvailable).
// room() says how much to free, or may be taken, for the host bands to sit at a level (host_room.hpp):
//
//   const auto room = ledger.room(watcher);
//   const std::uint64_t freed = cache.evict_at_least(room.free_bytes(pnmem::mem_level::watch));
//   ledger.credit_freed(freed);                         // the next answer is at WATCH, no sample needed
//
// Cost: an admission does not depend on how many reservations are outstanding (an engine with a
// prompt cache holds hundreds). The promised bytes are a running sum; unsettled reservations sit
// in slots reached by index (settle and cancel in O(1)); settled ones wait in a queue in settle
// order, so a sample forgets them from its front; those with a time to live are also in a heap
// on their expiry, read only when it holds any. A pnmem::watcher's live snapshot is kept by the
// ledger and refreshed in place (nothing is copied until the watcher publishes), with
// MemAvailable less the promised bytes written into it. Figures: BENCHMARKS.md.
//
// One box, many processes. A ledger made with a box_link (engine/box_book.hpp; an adapter's join,
// pnmem/linux/box_ledger.hpp, gives one) counts in the book every process of the box shares: its
// answers take off MemAvailable what every joined process has promised and not yet had sampled, and
// add what any of them credited, as a ledger does for its own. Its own reservations are still its own
// (their handles, their time to live, size(), expiry_covering()). Each operation takes the segment's
// lock inside the ledger's mutex; a lock that cannot be had makes the ledger leave the box for good
// (one log line) and count only its own promises. After fork() the child's ledger leaves the box its
// parent joined and forgets the reservations it inherited (they are its parent's to settle).
//
// Dies. A model load (weights, KV, scratch) or a buffer on a GPU is promised the same way:
// reserve_model_load, reserve_model_load_die and reserve_die_bytes answer as admit_model_load,
// admit_model_load_die and admit_die_bytes (admission.hpp) on the die's free VRAM less what is promised
// on it, and reserve on ADMIT; a die reservation counts until a sample of that die that began after its
// settle (mem_state::per_die_read_ns) has it. Every answer's snapshot has the dies' promised bytes taken
// off their free VRAM. A die named by its GPU's UUID (name_die; the CUDA adapter's die feed knows them)
// is counted in the box book with every process's reservations on the same GPU, whatever index each
// gives it, and its retiring bytes (per_die_retiring_bytes) are the box's: every holder's.
//
//   ledger.name_die(0, feed.uuid(0));
//   auto r = ledger.reserve_model_load(watcher, spec, pnmem::no_die);   // the roomiest die, less promises
//   if (r.answer.status == pnmem::admit_status::admitted) { load_onto(r.answer.die); r.held.settle(); }
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "pnmem/clock_ns.hpp"
#include "pnmem/config.hpp"
#include "pnmem/cost_model.hpp"
#include "pnmem/detail/cxx.hpp"
#include "pnmem/detail/fork_guard.hpp"
#include "pnmem/detail/mutex.hpp"
#include "pnmem/detail/saturating.hpp"
#include "pnmem/detail/thread_annotations.hpp"
#include "pnmem/admission.hpp"
#include "pnmem/die_uuid.hpp"
#include "pnmem/engine/admit.hpp"
#include "pnmem/engine/box_book.hpp"
#include "pnmem/host_room.hpp"
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
    std::uint64_t pending_bytes = 0;  // promised to earlier admissions, not yet in the sample (a die's
                                      // answer: promised on its die)
    reservation held;                 // admit: host_cost_bytes(fit_tokens) when admitted or capped on the
                                      // host path; reserve_bytes: the bytes, when admitted
  };

  struct reserve_options {
    pnmem::policy policy = process_policy();  // default: the PN_* variables' (config.hpp), read once
    std::chrono::nanoseconds ttl{0};  // an unsettled reservation is dropped this long after; 0 = never
  };

  using clock_fn = std::int64_t (*)();

  explicit host_ledger(clock_fn now = &steady_now_ns) : host_ledger(nullptr, now) {}

  // A ledger that counts in a box book every process of the box shares (box_book.hpp); null: its own.
  explicit host_ledger(std::shared_ptr<box_link> box, clock_fn now = &steady_now_ns) : now_(now), box_(std::move(box)) {
    if (box_ != nullptr && (box_->seg == nullptr || box_->lock == nullptr || box_->unlock == nullptr)) box_.reset();
    detail::fork_registry::get().add(this, detail::fork_registry::rank_ledger,
                                     {[](void* l) noexcept { static_cast<host_ledger*>(l)->lock_for_fork(); },
                                      [](void* l) noexcept { static_cast<host_ledger*>(l)->unlock_after_fork(); },
                                      [](void* l) noexcept { static_cast<host_ledger*>(l)->child_after_fork(); }});
  }
  host_ledger(const host_ledger&) = delete;
  host_ledger& operator=(const host_ledger&) = delete;
  ~host_ledger() { detail::fork_registry::get().remove(this); }

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
    const box_scope box(*this);
    out.answer = with_budget_locked(w, out.pending_bytes, [&](const mem_state& s) {
      return detail::admit_snapshot_inline(s, m, n_tokens, encoder_items, o);
    });
    const bool starts = out.answer.status == admit_status::admitted || out.answer.status == admit_status::capped;
    if (starts && !m.gpu_resident) {
      // What starts costs host_cost_bytes(fit_tokens) with the items. When the ask fitted its limit (an
      // ADMIT, or a CAP to the window) the decision priced exactly that; a CAP to the budget priced the
      // whole ask (admission.hpp's host path).
      const admit_result& d = out.answer.detail;
      const std::uint64_t need = d.need_bytes <= d.limit_bytes
                                     ? d.need_bytes
                                     : host_cost_bytes(m.cost, out.answer.fit_tokens, request_kv_format(m), encoder_items);
      if (need > 0) out.held = hold_locked(need, never);
    }
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
    const box_scope box(*this);
    bytes_answer_locked(w, bytes, o.policy, out);
    if (out.answer.status == admit_status::admitted && bytes > 0) out.held = hold_for_locked(bytes, o.ttl);  // never on fail_open
    return out;
  }

  // reserve_bytes' answer with nothing reserved: may `bytes` be allocated now, on the budget left after
  // what is already promised? For a check the engine refuses with pnmem's reason (a model load, a buffer
  // not worth a reservation). With no watcher running: fail_open.
  template <class Watcher>
  admission check_bytes(const Watcher& w, std::uint64_t bytes, const pnmem::policy& p) PNMEM_EXCLUDES(mu_) {
    admission out;
    detail::lock_guard lk(mu_);
    const box_scope box(*this);
    bytes_answer_locked(w, bytes, p, out);
    return out;
  }
  template <class Watcher>
  admission check_bytes(const Watcher& w, std::uint64_t bytes) PNMEM_EXCLUDES(mu_) {
    return check_bytes(w, bytes, process_policy());
  }

  // Makes room for a cache insert: a cache that keeps its newest entries (a prompt cache, offloaded KV)
  // is about to grow by `bytes`. When the insert fits with the host bands at WATCH or better
  // (admit_cache_insert, on the budget less what is promised), the bytes are reserved at once. When it
  // does not, `free_older(shortfall)` is called, on this thread with no lock of pnmem's held, with the
  // bytes to free first (host_room.hpp insert_shortfall_bytes): the engine drops its oldest entries
  // (its choice which), returns the bytes it gave back to the kernel (0: it dropped nothing, the cache
  // keeps what it has and the insert is refused); those are credited (credit_freed: do not credit them
  // again) and the insert is asked again, and reserved when it fits. A cache that cannot free the whole
  // shortfall should free nothing: a partial free leaves it smaller and the insert still refused.
  //
  //   auto made = ledger.make_room(watcher, entry_bytes, [&](std::uint64_t want) { return cache.drop_oldest(want); });
  //   if (made.admitted.answer.status == pnmem::admit_status::admitted) { cache.insert(...); made.admitted.held.settle(); }
  //
  // The answer's kind is cache_insert (explain: "the insert, ... fits in the ... the host has above
  // WATCH's floor"); asked_bytes is what free_older was asked for (0: not called), freed_bytes what it
  // returned. What free_older throws goes to the caller; nothing is credited or reserved then. With no
  // watcher running: fail_open, nothing freed or reserved.
  struct room_made {
    admission admitted;
    std::uint64_t asked_bytes = 0;
    std::uint64_t freed_bytes = 0;
  };
  template <class Watcher, class FreeOlder>
  room_made make_room(const Watcher& w, std::uint64_t bytes, FreeOlder&& free_older, const reserve_options& o)
      PNMEM_EXCLUDES(mu_) {
    room_made out;
    if (reserve_insert(w, bytes, o, out.admitted, &out.asked_bytes) || out.asked_bytes == 0) return out;
    const std::int64_t freeing_began = now_();  // a sample from here on may hold what it frees
    out.freed_bytes = static_cast<std::uint64_t>(free_older(out.asked_bytes));
    if (out.freed_bytes == 0) return out;  // nothing dropped: the first answer stands
    credit_freed_since(out.freed_bytes, freeing_began);
    out.admitted = admission{};
    (void)reserve_insert(w, bytes, o, out.admitted);
    return out;
  }
  template <class Watcher, class FreeOlder>
  room_made make_room(const Watcher& w, std::uint64_t bytes, FreeOlder&& free_older) PNMEM_EXCLUDES(mu_) {
    return make_room(w, bytes, std::forward<FreeOlder>(free_older), reserve_options{});
  }

  // A model load on the host (admission.hpp admit_host_load: fixed bytes plus KV per context token,
  // started with the largest context up to the one asked that fits with the host at WATCH or better),
  // on the budget less what is promised. When admitted or capped, the load's bytes at fit_tokens of
  // context are reserved until settled (loaded) or cancelled. With no watcher running: fail_open,
  // nothing reserved.
  template <class Watcher>
  admission reserve_host_load(const Watcher& w, const host_load_spec& l, const reserve_options& o) PNMEM_EXCLUDES(mu_) {
    admission out;
    detail::lock_guard lk(mu_);
    const box_scope box(*this);
    host_answer_locked(w, answer_kind::host_load, out, [&](const mem_state& s) { return admit_host_load(l, s, o.policy); });
    const auto st = out.answer.status;
    if (st == admit_status::admitted || st == admit_status::capped) {
      const std::uint64_t bytes = host_load_bytes(l, out.answer.fit_tokens);
      if (bytes > 0) out.held = hold_for_locked(bytes, o.ttl);
    }
    return out;
  }
  template <class Watcher>
  admission reserve_host_load(const Watcher& w, const host_load_spec& l) PNMEM_EXCLUDES(mu_) {
    return reserve_host_load(w, l, reserve_options{});
  }
  // reserve_host_load's answer with nothing reserved.
  template <class Watcher>
  admission check_host_load(const Watcher& w, const host_load_spec& l, const pnmem::policy& p = process_policy())
      PNMEM_EXCLUDES(mu_) {
    admission out;
    detail::lock_guard lk(mu_);
    const box_scope box(*this);
    host_answer_locked(w, answer_kind::host_load, out, [&](const mem_state& s) { return admit_host_load(l, s, p); });
    return out;
  }

  // --- Dies ---

  // admit_die_bytes on the newest snapshot with what is promised on the die taken off its free VRAM; the
  // bytes reserved on that die when admitted. With no watcher running: fail_open, nothing reserved.
  template <class Watcher>
  admission reserve_die_bytes(const Watcher& w, int die, std::uint64_t bytes) PNMEM_EXCLUDES(mu_) {
    return reserve_die_bytes(w, die, bytes, reserve_options{});
  }
  template <class Watcher>
  admission reserve_die_bytes(const Watcher& w, int die, std::uint64_t bytes, const reserve_options& o)
      PNMEM_EXCLUDES(mu_) {
    return die_reserve(w, answer_kind::die_bytes, bytes, o, [&](const mem_state& s) {
      return admit_die_bytes(bytes, s, die, o.policy);
    });
  }
  // reserve_die_bytes' answer with nothing reserved.
  template <class Watcher>
  admission check_die_bytes(const Watcher& w, int die, std::uint64_t bytes, const pnmem::policy& p = process_policy())
      PNMEM_EXCLUDES(mu_) {
    admission out;
    detail::lock_guard lk(mu_);
    const box_scope box(*this);
    die_answer_locked(w, answer_kind::die_bytes, out, [&](const mem_state& s) { return admit_die_bytes(bytes, s, die, p); });
    return out;
  }

  // admit_model_load (a whole model onto one die: weights, KV at its largest context and the die
  // scratch, within the die's free VRAM less the die reserve) with what is promised on the dies taken
  // off; no_die picks the die with the most room after those promises. Reserves the need on that die
  // when admitted.
  template <class Watcher>
  admission reserve_model_load(const Watcher& w, const model_load_spec& m, int die) PNMEM_EXCLUDES(mu_) {
    return reserve_model_load(w, m, die, reserve_options{});
  }
  template <class Watcher>
  admission reserve_model_load(const Watcher& w, const model_load_spec& m, int die, const reserve_options& o)
      PNMEM_EXCLUDES(mu_) {
    return die_reserve(w, answer_kind::model_load, 0, o, [&](const mem_state& s) {
      return admit_model_load(m, s, die, o.policy);
    });
  }
  // admit_model_load_die (one die's slice of a split model, and the die scratch) likewise.
  template <class Watcher>
  admission reserve_model_load_die(const Watcher& w, std::uint64_t weights_slice_bytes, std::uint64_t kv_slice_bytes,
                                   int die) PNMEM_EXCLUDES(mu_) {
    return reserve_model_load_die(w, weights_slice_bytes, kv_slice_bytes, die, reserve_options{});
  }
  template <class Watcher>
  admission reserve_model_load_die(const Watcher& w, std::uint64_t weights_slice_bytes, std::uint64_t kv_slice_bytes,
                                   int die, const reserve_options& o) PNMEM_EXCLUDES(mu_) {
    return die_reserve(w, answer_kind::load_slice, 0, o, [&](const mem_state& s) {
      return admit_model_load_die(weights_slice_bytes, kv_slice_bytes, s, die, o.policy);
    });
  }

  // reserve_model_load's and reserve_model_load_die's answers with nothing reserved.
  template <class Watcher>
  admission check_model_load(const Watcher& w, const model_load_spec& m, int die,
                             const pnmem::policy& p = process_policy()) PNMEM_EXCLUDES(mu_) {
    admission out;
    detail::lock_guard lk(mu_);
    const box_scope box(*this);
    die_answer_locked(w, answer_kind::model_load, out, [&](const mem_state& s) { return admit_model_load(m, s, die, p); });
    return out;
  }
  template <class Watcher>
  admission check_model_load_die(const Watcher& w, std::uint64_t weights_slice_bytes, std::uint64_t kv_slice_bytes,
                                 int die, const pnmem::policy& p = process_policy()) PNMEM_EXCLUDES(mu_) {
    admission out;
    detail::lock_guard lk(mu_);
    const box_scope box(*this);
    die_answer_locked(w, answer_kind::load_slice, out, [&](const mem_state& s) {
      return admit_model_load_die(weights_slice_bytes, kv_slice_bytes, s, die, p);
    });
    return out;
  }

  // What every answer counts on `die` beside its sampled numbers: the bytes promised on it and not yet in
  // a sample of it, and its retiring bytes (per_die_retiring_bytes); every process's when the die is
  // named and the ledger joined a box (`box` true), else this process's. Zeros for a die out of range,
  // not fed, or no watcher running.
  struct die_figures {
    std::uint64_t pending_bytes = 0;
    std::uint64_t retiring_bytes = 0;
    bool box = false;
  };
  template <class Watcher>
  die_figures figures_for_die(const Watcher& w, int die) PNMEM_EXCLUDES(mu_) {
    die_figures out;
    if (die < 0 || die >= max_dies) return out;
    const auto d = static_cast<std::size_t>(die);
    detail::lock_guard lk(mu_);
    if (!w.running()) return out;
    const box_scope box(*this);
    std::uint64_t pending = 0;
    dies_active_ = true;
    const bool fed = with_budget_locked(w, pending, [&](const mem_state& s) {
      out.retiring_bytes = s.per_die_retiring_bytes[d];
      return valid_die(s, die);
    });
    if (!fed) return die_figures{};
    out.pending_bytes = die_pending_now_[d];
    out.box = box_die_locked(die) != box_no_die;
    return out;
  }
  template <class Watcher>
  std::uint64_t die_pending_bytes(const Watcher& w, int die) PNMEM_EXCLUDES(mu_) {
    return figures_for_die(w, die).pending_bytes;
  }

  // Names this process's die `die` by its GPU's UUID (the CUDA adapter's die_feed::uuid): its
  // reservations are then counted in the box book with every process's on the same GPU, and theirs in
  // its answers. False for a die out of range or an empty UUID, and for a die that holds unsettled
  // reservations under another name.
  bool name_die(int die, const die_uuid& id) PNMEM_EXCLUDES(mu_) {
    if (die < 0 || die >= max_dies || id.empty()) return false;
    const auto d = static_cast<std::size_t>(die);
    detail::lock_guard lk(mu_);
    if (die_names_[d] == id) return true;
    for (const slot& e : slots_) {
      if (e.live && e.die == die) return false;
    }
    die_names_[d] = id;
    box_die_[d] = box_die_unresolved;
    dies_active_ = true;
    return true;
  }
  die_uuid die_name(int die) const PNMEM_EXCLUDES(mu_) {
    if (die < 0 || die >= max_dies) return {};
    detail::lock_guard lk(mu_);
    return die_names_[static_cast<std::size_t>(die)];
  }

  // Bytes promised and not yet in the watcher's newest snapshot.
  template <class Watcher>
  std::uint64_t pending_bytes(const Watcher& w) PNMEM_EXCLUDES(mu_) {
    detail::lock_guard lk(mu_);
    const box_scope box(*this);
    std::uint64_t pending = 0;
    with_budget_locked(w, pending, [](const mem_state&) { return 0; });
    return pending;
  }

  // Bytes the engine has just freed (dropped a cache entry, unmapped a buffer), counted as available
  // by every answer from now until a sample that began after this call: the engine sheds once, credits
  // what it freed, and its next admission or room() counts it without forcing a sample. Give the bytes
  // actually returned to the kernel (munmap, madvise(MADV_DONTNEED), malloc_trim); a credit never
  // raises MemAvailable above the total.
  void credit_freed(std::uint64_t bytes) PNMEM_EXCLUDES(mu_) { credit_freed_since(bytes, now_()); }

  // The same for bytes freed from `freeing_began_ns` (this ledger's clock, now_ns(), read before the engine
  // began to free them) on: they count until a sample that began after that instant, which may already
  // hold them in MemAvailable. A sample that began between the free and a later credit_freed() would
  // count them twice, once in its numbers and once as the credit, and a cache would be let to grow past
  // what the box holds (make_room and the shed hook stamp the time before they call the engine).
  void credit_freed_since(std::uint64_t bytes, std::int64_t freeing_began_ns) PNMEM_EXCLUDES(mu_) {
    if (bytes == 0) return;
    detail::lock_guard lk(mu_);
    const box_scope box(*this);
    insert_in_time_order(credits_, settled_entry{bytes, freeing_began_ns});
    credited_ += bytes;
    if (box_held_ != nullptr) box_credit(*box_held_->seg, box_held_->holder, bytes, freeing_began_ns);
  }

  // Bytes credited and not yet in the watcher's newest snapshot.
  template <class Watcher>
  std::uint64_t credited_bytes(const Watcher& w) PNMEM_EXCLUDES(mu_) {
    detail::lock_guard lk(mu_);
    const box_scope box(*this);
    std::uint64_t pending = 0;
    with_budget_locked(w, pending, [](const mem_state&) { return 0; });
    return credited_now_;
  }

  // The host's room on the budget every answer uses (MemAvailable less the pending bytes plus the
  // credited ones): the bytes to free to bring the host bands back to a level, or that may be taken
  // with them staying there (host_room.hpp). Not sampled (no watcher, or no host numbers): all zeros.
  template <class Watcher>
  host_room room(const Watcher& w, const pnmem::policy& p) PNMEM_EXCLUDES(mu_) {
    detail::lock_guard lk(mu_);
    if (!w.running()) return host_room{};
    const box_scope box(*this);
    std::uint64_t pending = 0;
    host_room out = with_budget_locked(w, pending, [&](const mem_state& s) { return room_for(s, p); });
    if (out.sampled) {
      out.pending_bytes = pending;
      out.credited_bytes = credited_now_;
    }
    return out;
  }
  template <class Watcher>
  host_room room(const Watcher& w) PNMEM_EXCLUDES(mu_) {
    return room(w, process_policy());
  }

  // The bytes to free now for the host bands to be back at WATCH: room(w, p).free_bytes(WATCH), what
  // is promised and credited counted (0 at WATCH or better, or not sampled). What a shed frees
  // (shed_hook.hpp; C pnmem_shed_bytes).
  template <class Watcher>
  std::uint64_t shed_bytes(const Watcher& w, const pnmem::policy& p) PNMEM_EXCLUDES(mu_) {
    return room(w, p).free_bytes(mem_level::watch);
  }

  // Reservations the ledger still counts (not cancelled, not yet seen by a sample), the dies' included.
  std::size_t size() const PNMEM_EXCLUDES(mu_) {
    detail::lock_guard lk(mu_);
    std::size_t n = unsettled_ + settled_.size();
    for (const auto& q : die_settled_) n += q.size();
    return n;
  }

  // The ledger's clock (steady_clock unless another was given), in nanoseconds.
  std::int64_t now_ns() const { return now_(); }

  // Joins a box book now (a ledger made before the box was known: the C ABI's, when its watcher starts):
  // its own unsettled reservations are added to its holder. False when it has one already or `box` is
  // null or incomplete.
  bool attach_box(std::shared_ptr<box_link> box) PNMEM_EXCLUDES(mu_) {
    if (box == nullptr || box->seg == nullptr || box->lock == nullptr || box->unlock == nullptr) return false;
    detail::lock_guard lk(mu_);
    if (box_ != nullptr) return false;
    box_ = std::move(box);
    settled_cursor_ = box_cursor{};
    credit_cursor_ = box_cursor{};
    forget_box_dies_locked();
    const box_scope scope(*this);
    if (box_held_ == nullptr) return false;  // its lock could not be had: left again, said why
    for (const slot& e : slots_) {
      if (!e.live) continue;
      if (e.die < 0) {
        box_add(*box_held_->seg, box_held_->holder, e.bytes, box_held_->seg->last_sample_ns);
      } else if (const std::uint32_t bd = box_die_locked(e.die); bd != box_no_die) {
        box_die_add(*box_held_->seg, box_held_->holder, bd, e.bytes);
      }
    }
    return true;
  }

  // The box-wide figures an engine's /metrics carries (engine/metrics.hpp prometheus_ledger_text): on
  // the watcher's newest snapshot, the bytes promised and credited that it has not seen, and the
  // processes joined. `box` false when the ledger counts alone (then the figures are its own).
  // Each GPU of the book (by UUID): what every process promised on it and a sample of it has not seen
  // (from the newest read of it any process's answers used), and their retiring bytes there.
  struct die_load {
    die_uuid uuid;
    std::uint64_t pending_bytes = 0;
    std::uint64_t retiring_bytes = 0;
  };
  struct figures {
    bool box = false;
    std::string scope;
    std::uint32_t processes = 1;
    std::uint64_t pending_bytes = 0;
    std::uint64_t credited_bytes = 0;
    std::vector<die_load> dies;
  };
  template <class Watcher>
  figures ledger_figures(const Watcher& w) PNMEM_EXCLUDES(mu_) {
    detail::lock_guard lk(mu_);
    figures out;
    const box_scope scope(*this);
    if (w.running()) with_budget_locked(w, out.pending_bytes, [](const mem_state&) { return 0; });
    out.credited_bytes = credited_now_;
    if (box_held_ != nullptr) {
      const box_segment& seg = *box_held_->seg;
      out.box = true;
      out.scope = box_held_->scope;
      out.processes = seg.holders_live;
      for (std::uint32_t d = 0; d < seg.dies_used && d < box_max_dies; ++d) {
        const box_die_figures f = box_die_seen_pending(seg, d);
        out.dies.push_back(die_load{box_die_id(seg.dies[d]), f.pending, f.retiring});
      }
    }
    return out;
  }

  // Whether its answers count the box book's promises (it joined one, and has not left it), and the
  // book's scope ("" when not).
  bool box_joined() const PNMEM_EXCLUDES(mu_) {
    detail::lock_guard lk(mu_);
    return box_ != nullptr && !box_forked_;
  }
  std::string box_scope_name() const PNMEM_EXCLUDES(mu_) {
    detail::lock_guard lk(mu_);
    return box_ != nullptr && !box_forked_ ? std::string(box_->scope) : std::string();
  }
  // The processes joined to its box book (0 when it counts alone).
  std::uint32_t box_processes() PNMEM_EXCLUDES(mu_) {
    detail::lock_guard lk(mu_);
    const box_scope box(*this);
    return box_held_ != nullptr ? box_held_->seg->holders_live : 0;
  }

  // When unsettled reservations with a time to live will have given back at least `bytes` by expiring
  // (the soonest expiry by which their bytes add up to it), on the ledger's clock; -1 when all of them
  // together hold less (reservations without one may be settled, and then the memory is real). A retry
  // hint's input (engine/retry_after.hpp): what a denied request waits for at most, if nothing else
  // frees memory. Sorts a copy of the live expiries: O(n log n) in the reservations with a time to
  // live, on a denial's path only.
  std::int64_t expiry_covering(std::uint64_t bytes) const PNMEM_EXCLUDES(mu_) {
    if (bytes == 0) return now_();
    std::vector<std::pair<std::int64_t, std::uint64_t>> live;  // (expires_ns, bytes)
    {
      detail::lock_guard lk(mu_);
      if (expiring_ == 0) return -1;
      live.reserve(expiring_);
      for (const expiry& e : expiries_) {
        if (slot_is(e.index, e.generation) && slots_[e.index].die < 0) live.emplace_back(e.expires_ns, slots_[e.index].bytes);
      }
    }
    std::sort(live.begin(), live.end());
    std::uint64_t freed = 0;
    for (const auto& [at, b] : live) {
      freed = detail::sat_add(freed, b);
      if (freed >= bytes) return at;
    }
    return -1;
  }

  // The clock value meaning "never expires".
  static constexpr std::int64_t never = std::numeric_limits<std::int64_t>::max();
  // When a reservation taken at `now` with time to live `ttl` expires: never for 0 or less, and never for one
  // so long that now + ttl would pass the clock's end (it must not wrap into the past and expire at once).
  // The C ABI's handles expire by the same rule.
  static constexpr std::int64_t expiry_after(std::int64_t now, std::chrono::nanoseconds ttl) noexcept {
    const std::int64_t t = ttl.count();
    return t <= 0 ? never : now > never - t ? never : now + t;
  }

 private:
  // fork() (detail/fork_guard.hpp): the book is never copied mid-change; the reservations stay as they
  // were in the child (its handles are copies of the parent's, and settle or cancel there as here).
  void lock_for_fork() noexcept PNMEM_NO_THREAD_SAFETY_ANALYSIS { mu_.lock(); }
  void unlock_after_fork() noexcept PNMEM_NO_THREAD_SAFETY_ANALYSIS { mu_.unlock(); }
  // The child of a fork: its box link is its parent's (the parent's holder, liveness lock and
  // reservations); the next operation lets go of it and joins afresh (box_scope).
  void child_after_fork() noexcept PNMEM_NO_THREAD_SAFETY_ANALYSIS {
    if (box_ != nullptr) box_forked_ = true;
    mu_.unlock();
  }

  // The box book's lock for one operation, taken inside mu_ and released at the end of the scope. A
  // lock that cannot be had makes the ledger leave the box: this operation and every later one count
  // only this process's promises (the book's adapter says why in a log line). In a fork's child, first
  // lets go of the parent's link and joins as a holder of its own.
  class box_scope {
   public:
    explicit box_scope(host_ledger& l) PNMEM_NO_THREAD_SAFETY_ANALYSIS : l_(l) {  // l.mu_ held: the caller is l
      if (l_.box_ == nullptr) return;
      if (l_.box_forked_) l_.rejoin_after_fork_locked();
      if (l_.box_ == nullptr) return;
      if (!l_.box_->lock(*l_.box_)) {
        l_.leave_box_locked("its lock could not be had within its timeout (a process stopped while holding it, "
                            "or not a lock)");
        return;
      }
      if (box_holder_of(*l_.box_->seg, l_.box_->holder) == nullptr) {  // freed by another: corrupt, or a clock gone wrong
        l_.box_->unlock(*l_.box_);
        l_.leave_box_locked("this process's holder was freed by another");
        return;
      }
      l_.box_held_ = l_.box_.get();
    }
    ~box_scope() PNMEM_NO_THREAD_SAFETY_ANALYSIS {
      if (l_.box_held_ != nullptr) {
        box_link* b = std::exchange(l_.box_held_, nullptr);
        b->unlock(*b);
      }
    }
    box_scope(const box_scope&) = delete;
    box_scope& operator=(const box_scope&) = delete;

   private:
    host_ledger& l_;
  };

  // Stops counting in the box book, saying why: its promises stay in this process's own book.
  void leave_box_locked(const char* why) PNMEM_REQUIRES(mu_) {
    if (box_ == nullptr) return;
    if (box_->log != nullptr) {
      const std::string line = std::string("pnmem: box ledger ") + box_->scope + ": " + why +
                               "; this process counts only its own promises from now on";
      box_->log(*box_, line.c_str());
    }
    box_.reset();
    forget_box_dies_locked();
  }

  // The box book's entries for the named dies are looked up again (another book, or none).
  void forget_box_dies_locked() PNMEM_REQUIRES(mu_) {
    box_die_.fill(box_die_unresolved);
    box_retiring_.fill(no_retiring);
  }

  // The box book's entry for this process's die `die` (the lock held): found or taken by its UUID on
  // first use; box_no_die when it has no name or the book has no room.
  std::uint32_t box_die_locked(int die) PNMEM_REQUIRES(mu_) {
    if (box_held_ == nullptr || die < 0 || die >= max_dies) return box_no_die;
    const auto d = static_cast<std::size_t>(die);
    if (box_die_[d] == box_die_unresolved) {
      box_die_[d] = die_names_[d].empty() ? box_no_die : box_die_index(*box_held_->seg, die_names_[d], true);
    }
    return box_die_[d];
  }

  // In a fork's child: the parent's link let go of (its descriptor, its mapping), the inherited
  // reservations forgotten (its parent settles or cancels them; the child's copies of their handles do
  // nothing), and the book joined as a new holder.
  void rejoin_after_fork_locked() PNMEM_REQUIRES(mu_) {
    box_forked_ = false;
    std::shared_ptr<box_link> old = std::move(box_);
    if (old->detach != nullptr) old->detach(*old);
    for (std::uint32_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].live) release_slot(i);
    }
    pending_ = 0;
    settled_.clear();
    credits_.clear();
    credited_ = 0;
    expiries_.clear();
    die_pending_.fill(0);
    for (auto& q : die_settled_) q.clear();
    settled_cursor_ = box_cursor{};
    credit_cursor_ = box_cursor{};
    forget_box_dies_locked();
    if (old->rejoin != nullptr) box_ = old->rejoin(*old);
  }

  static constexpr std::uint32_t no_slot = std::numeric_limits<std::uint32_t>::max();

  // An unsettled reservation, at the index its id names. The id's high half is the slot's
  // generation when it was taken: a reservation whose slot was freed (it expired) and taken again
  // no longer matches, and its settle or cancel does nothing.
  struct slot {
    std::uint64_t bytes = 0;
    std::uint32_t generation = 0;
    std::uint32_t next_free = no_slot;
    bool live = false;
    bool expiring = false;  // has an entry in expiries_
    std::int8_t die = -1;   // the die it is on; -1: the host
  };
  // A settled reservation, or a credited free: counted until a sample that began after settled_ns.
  struct settled_entry {
    std::uint64_t bytes;
    std::int64_t settled_ns;
  };
  // Into its queue in time order: one stamped earlier than the last (settle_at, or two threads' clocks
  // read just before the lock) goes to its place from the back.
  static void insert_in_time_order(std::deque<settled_entry>& q, settled_entry e) {
    auto at = q.end();
    while (at != q.begin() && std::prev(at)->settled_ns > e.settled_ns) --at;
    q.insert(at, e);
  }
  // Drops from the queue's front, and from its sum, what a sample that began at host_read_ns has seen.
  static void forget_seen(std::deque<settled_entry>& q, detail::u128& sum, std::int64_t host_read_ns) noexcept {
    while (!q.empty() && q.front().settled_ns < host_read_ns) {
      sum -= q.front().bytes;
      q.pop_front();
    }
  }
  // An unsettled reservation's time to live; stale once its slot is no longer that reservation.
  struct expiry {
    std::int64_t expires_ns;
    std::uint32_t index;
    std::uint32_t generation;
  };
  struct expires_later {
    bool operator()(const expiry& a, const expiry& b) const noexcept { return a.expires_ns > b.expires_ns; }
  };

  static std::uint64_t id_of(std::uint32_t index, std::uint32_t generation) noexcept {
    return static_cast<std::uint64_t>(generation) << 32 | index;
  }

  // Forgets what the sample that began at host_read_ns has seen and what expired, and returns the
  // bytes still promised. Snapshots reach the ledger in read order (they are read under mu_ and
  // the watcher's host_read_ns only grows), so the settled reservations a sample has seen are the
  // queue's front. The clock is read only while some reservation can expire.
  std::uint64_t pending_locked(std::int64_t host_read_ns) PNMEM_REQUIRES(mu_) {
    forget_seen(settled_, pending_, host_read_ns);
    forget_seen(credits_, credited_, host_read_ns);
    if (!expiries_.empty()) {
      const std::int64_t now = now_();
      while (!expiries_.empty() && expiries_.front().expires_ns <= now) {
        std::pop_heap(expiries_.begin(), expiries_.end(), expires_later{});
        const expiry e = expiries_.back();
        expiries_.pop_back();
        if (slot_is(e.index, e.generation)) free_slot(e.index);
      }
    }
    if (box_held_ != nullptr) {
      // The box's promises: every holder's unsettled bytes, and the settles and credits this sample has
      // not seen. Dead holders are looked for at most every reap_every_ns of sample time.
      box_segment& seg = *box_held_->seg;
      if (box_held_->reap != nullptr && host_read_ns - seg.last_reap_ns >= box_held_->reap_every_ns) {
        seg.last_reap_ns = host_read_ns;
        box_held_->reap(*box_held_);
      }
      const box_pending b = box_pending_for(seg, box_held_->holder, settled_cursor_, credit_cursor_, host_read_ns);
      credited_now_ = b.credited;
      return b.pending;
    }
    credited_now_ = detail::to_u64_sat(credited_);
    return detail::to_u64_sat(pending_);
  }

  // A reservation of `bytes` that expires `ttl` from now (0: never).
  reservation hold_for_locked(std::uint64_t bytes, std::chrono::nanoseconds ttl_ns) PNMEM_REQUIRES(mu_) {
    const std::int64_t now = now_();
    return hold_locked(bytes, expiry_after(now, ttl_ns));
  }

  // make_room's one answer: admit_cache_insert on the budget, reserved when admitted; true then (or
  // fail_open: nothing to make room for). *shortfall (when given): the bytes to free for it to fit.
  template <class Watcher>
  bool reserve_insert(const Watcher& w, std::uint64_t bytes, const reserve_options& o, admission& out,
                      std::uint64_t* shortfall = nullptr) PNMEM_EXCLUDES(mu_) {
    detail::lock_guard lk(mu_);
    const box_scope box(*this);
    host_answer_locked(w, answer_kind::cache_insert, out, [&](const mem_state& s) {
      if (shortfall != nullptr) *shortfall = insert_shortfall_bytes(bytes, room_for(s, o.policy));
      return admit_cache_insert(bytes, s, o.policy);
    });
    if (out.answer.status == admit_status::fail_open) {
      if (shortfall != nullptr) *shortfall = 0;
      return true;
    }
    if (out.answer.status != admit_status::admitted) return false;
    if (bytes > 0) out.held = hold_for_locked(bytes, o.ttl);
    return true;
  }

  // A host answer of `kind`: decide(s) on the newest snapshot less the pending bytes (plus the credited),
  // into out.answer and out.pending_bytes; fail open, nothing known, when no watcher runs (decide on an
  // empty snapshot) or the host was not read. Reserves nothing.
  template <class Watcher, class Decide>
  void host_answer_locked(const Watcher& w, answer_kind kind, admission& out, Decide&& decide) PNMEM_REQUIRES(mu_) {
    out.answer.kind = kind;
    if (!w.running()) {
      out.answer.status = admit_status::fail_open;
      out.answer.reason = admit_reason::not_watching;
      out.answer.detail = decide(mem_state{});
      out.answer.fit_tokens = out.answer.detail.fit_tokens;
      return;
    }
    mem_level level = mem_level::ok;
    bool host_read = true;
    const admit_result r = with_budget_locked(w, out.pending_bytes, [&](const mem_state& s) {
      level = s.level;
      host_read = s.host_total_bytes != 0;
      return decide(s);
    });
    out.answer.level = level;
    out.answer.reason = r.reason;
    out.answer.detail = r;
    out.answer.fit_tokens = r.fit_tokens;
    out.answer.status = r.verdict == verdict::admit ? admit_status::admitted
                        : r.verdict == verdict::cap ? admit_status::capped
                                                    : admit_status::denied;
    if (!host_read) {  // admitted with nothing to check it against: fail open, and say so
      out.answer.status = admit_status::fail_open;
      out.answer.reason = admit_reason::not_sampled;
    }
  }

  // admit_host_bytes as host_answer_locked answers it.
  template <class Watcher>
  void bytes_answer_locked(const Watcher& w, std::uint64_t bytes, const pnmem::policy& p, admission& out)
      PNMEM_REQUIRES(mu_) {
    host_answer_locked(w, answer_kind::host_bytes, out, [&](const mem_state& s) { return admit_host_bytes(bytes, s, p); });
  }

  template <class T>
  static constexpr std::array<T, max_dies> filled(T v) noexcept {
    std::array<T, max_dies> a{};
    for (T& x : a) x = v;
    return a;
  }

  // A die answer: decide(s) on the newest snapshot with the dies' promises taken off their free VRAM,
  // into out (fail open, nothing known, when no watcher runs). Reserves nothing.
  template <class Watcher, class Decide>
  void die_answer_locked(const Watcher& w, answer_kind kind, admission& out, Decide&& decide) PNMEM_REQUIRES(mu_) {
    out.answer.kind = kind;
    if (!w.running()) {
      out.answer.status = admit_status::fail_open;
      out.answer.reason = admit_reason::not_watching;
      return;
    }
    dies_active_ = true;
    mem_level level = mem_level::ok;
    std::uint64_t host_pending = 0;
    const admit_result r = with_budget_locked(w, host_pending, [&](const mem_state& s) {
      level = s.level;
      return decide(s);
    });
    out.answer = answer_from(r, kind, level);
    out.pending_bytes = r.die >= 0 && r.die < max_dies ? die_pending_now_[static_cast<std::size_t>(r.die)] : 0;
  }

  // A die answer, and on ADMIT a reservation of `bytes` (0: the decision's need) on the die it chose.
  template <class Watcher, class Decide>
  admission die_reserve(const Watcher& w, answer_kind kind, std::uint64_t bytes, const reserve_options& o,
                        Decide&& decide) PNMEM_EXCLUDES(mu_) {
    admission out;
    detail::lock_guard lk(mu_);
    const box_scope box(*this);
    die_answer_locked(w, kind, out, std::forward<Decide>(decide));
    const int on = out.answer.detail.die;
    const std::uint64_t need = bytes != 0 ? bytes : out.answer.detail.need_bytes;
    if (out.answer.status == admit_status::admitted && need > 0 && on >= 0 && on < max_dies) {
      out.held = hold_locked(need, expiry_after(now_(), o.ttl), on);
    }
    return out;
  }

  // The dies of `s` (the newest snapshot, its die numbers as sampled) with what is promised on each
  // taken off its free VRAM, and the box's retiring bytes for each named die (its own published first).
  void dies_budget_locked(mem_state& s) PNMEM_REQUIRES(mu_) {
    const int n = die_count(s);
    for (int die = 0; die < n; ++die) {
      const auto d = static_cast<std::size_t>(die);
      s.per_die_free_bytes[d] = sampled_die_free_[d];
      s.per_die_retiring_bytes[d] = sampled_die_retiring_[d];
      forget_seen(die_settled_[d], die_pending_[d], s.per_die_read_ns[d]);
      std::uint64_t pending = detail::to_u64_sat(die_pending_[d]);
      if (const std::uint32_t bd = box_die_locked(die); bd != box_no_die) {
        box_segment& seg = *box_held_->seg;
        if (box_retiring_[d] != sampled_die_retiring_[d]) {
          box_die_set_retiring(seg, box_held_->holder, bd, sampled_die_retiring_[d]);
          box_retiring_[d] = sampled_die_retiring_[d];
        }
        box_die_saw(seg, bd, s.per_die_read_ns[d]);
        const box_die_figures f = box_die_pending(seg, bd, s.per_die_read_ns[d]);
        pending = f.pending;
        s.per_die_retiring_bytes[d] = f.retiring;
      }
      die_pending_now_[d] = pending;
      s.per_die_free_bytes[d] = detail::sat_sub(s.per_die_free_bytes[d], pending);
    }
  }

  // f(s) on the watcher's newest snapshot with the pending bytes taken off MemAvailable. A source
  // that refreshes in place (pnmem::watcher) refreshes the ledger's own copy: nothing is copied
  // while the watcher has not published since the last admission. Host numbers unsampled (total
  // 0) stay unsampled: admission fails open there.
  template <class Watcher, class F>
  decltype(auto) with_budget_locked(const Watcher& w, std::uint64_t& pending, F&& f) PNMEM_REQUIRES(mu_) {
    std::optional<mem_state> copy;  // a source that does not refresh in place: a copy of its snapshot
    mem_state& s = newest_locked(w, copy);
    pending = pending_locked(s.host_read_ns);
    if (s.host_total_bytes > 0) {
      // MemAvailable + credited - pending, within [0, total].
      const detail::u128 up = static_cast<detail::u128>(s.host_avail_bytes) + credited_now_;
      const detail::u128 v = up > pending ? up - pending : 0;
      s.host_avail_bytes = v > s.host_total_bytes ? s.host_total_bytes : static_cast<std::uint64_t>(v);
    }
    if (dies_active_) dies_budget_locked(s);
    return std::forward<F>(f)(std::as_const(s));
  }

  // The watcher's newest snapshot, MemAvailable as sampled: the ledger's own live copy refreshed
  // in place, or (another kind of source) a copy read into `copy`.
  template <class Watcher>
  mem_state& newest_locked(const Watcher& w, std::optional<mem_state>& copy) PNMEM_REQUIRES(mu_) {
#if PNMEM_HAS_CONCEPTS
    if constexpr (requires(mem_state& v, live_version& version) { w.refresh_live(v, version); }) {
#else
    if constexpr (detail::refreshes_live<Watcher>::value) {
#endif
      if (w.refresh_live(budget_, budget_version_)) {
        sampled_avail_ = budget_.host_avail_bytes;
        sampled_die_free_ = budget_.per_die_free_bytes;
        sampled_die_retiring_ = budget_.per_die_retiring_bytes;
      }
      budget_.host_avail_bytes = sampled_avail_;
      return budget_;
    } else {
      mem_state& c = copy.emplace(read_for_decision(w));
      sampled_die_free_ = c.per_die_free_bytes;
      sampled_die_retiring_ = c.per_die_retiring_bytes;
      return c;
    }
  }

  bool slot_is(std::uint32_t index, std::uint32_t generation) const PNMEM_REQUIRES(mu_) {
    return index < slots_.size() && slots_[index].live && slots_[index].generation == generation;
  }

  // Gives the slot's bytes back (cancelled or expired) and the slot to the free list.
  void free_slot(std::uint32_t index) PNMEM_REQUIRES(mu_) {
    slot& e = slots_[index];
    if (e.die >= 0) {
      die_pending_[static_cast<std::size_t>(e.die)] -= e.bytes;
      if (const std::uint32_t bd = box_die_locked(e.die); bd != box_no_die) {
        box_die_remove(*box_held_->seg, box_held_->holder, bd, e.bytes);
      }
    } else {
      pending_ -= e.bytes;
      if (box_held_ != nullptr) box_remove(*box_held_->seg, box_held_->holder, e.bytes);
    }
    release_slot(index);
  }

  // The slot to the free list; its bytes are the caller's to account for.
  void release_slot(std::uint32_t index) PNMEM_REQUIRES(mu_) {
    slot& e = slots_[index];
    if (e.expiring) --expiring_;
    e.live = false;
    e.expiring = false;
    e.bytes = 0;
    e.die = -1;
    ++e.generation;
    e.next_free = free_head_;
    free_head_ = index;
    --unsettled_;
  }

  reservation hold_locked(std::uint64_t bytes, std::int64_t expires_ns, int die = -1) PNMEM_REQUIRES(mu_) {
    std::uint32_t index = free_head_;
    if (index != no_slot) {
      free_head_ = slots_[index].next_free;
    } else {
      if (slots_.size() >= no_slot) {
#if PNMEM_HAS_EXCEPTIONS
        throw std::length_error("pnmem::host_ledger: too many outstanding reservations");
#else
        std::abort();  // -fno-exceptions: 2^32 reservations outstanding is a leak, not a load
#endif
      }
      index = static_cast<std::uint32_t>(slots_.size());
      slots_.emplace_back();
    }
    slot& e = slots_[index];
    e.bytes = bytes;
    e.live = true;
    e.next_free = no_slot;
    e.die = static_cast<std::int8_t>(die);
    ++unsettled_;
    if (die >= 0) {
      die_pending_[static_cast<std::size_t>(die)] += bytes;
      if (const std::uint32_t bd = box_die_locked(die); bd != box_no_die) {
        box_die_add(*box_held_->seg, box_held_->holder, bd, bytes);
      }
    } else {
      pending_ += bytes;
      if (box_held_ != nullptr) box_add(*box_held_->seg, box_held_->holder, bytes, box_held_->seg->last_sample_ns);
    }
    if (expires_ns != never) {
      // Entries whose reservation was settled or cancelled wait in the heap until they surface;
      // when they outnumber the live ones, the heap is rebuilt without them.
      if (expiries_.size() >= 64 && expiries_.size() > 2 * expiring_) {
        std::size_t kept = 0;
        for (std::size_t i = 0; i < expiries_.size(); ++i) {
          if (slot_is(expiries_[i].index, expiries_[i].generation)) expiries_[kept++] = expiries_[i];
        }
        expiries_.resize(kept);
        std::make_heap(expiries_.begin(), expiries_.end(), expires_later{});
      }
      e.expiring = true;
      ++expiring_;
      expiries_.push_back(expiry{expires_ns, index, e.generation});
      std::push_heap(expiries_.begin(), expiries_.end(), expires_later{});
    }
    return reservation(this, id_of(index, e.generation), bytes);
  }

  void settle(std::uint64_t id, std::int64_t now) PNMEM_EXCLUDES(mu_) {
    const auto index = static_cast<std::uint32_t>(id);
    const auto generation = static_cast<std::uint32_t>(id >> 32);
    detail::lock_guard lk(mu_);
    if (!slot_is(index, generation)) return;  // expired meanwhile: no longer counted
    const box_scope box(*this);
    const std::uint64_t bytes = slots_[index].bytes;
    const int die = slots_[index].die;
    if (!slot_is(index, generation)) return;  // (a fork's child forgot it meanwhile: nothing)
    release_slot(index);  // its bytes stay in pending_ (die_pending_), now on the settled queue
    if (die >= 0) {
      insert_in_time_order(die_settled_[static_cast<std::size_t>(die)], settled_entry{bytes, now});
      if (const std::uint32_t bd = box_die_locked(die); bd != box_no_die) {
        box_die_settle(*box_held_->seg, box_held_->holder, bd, bytes, now);
      }
      return;
    }
    insert_in_time_order(settled_, settled_entry{bytes, now});
    if (box_held_ != nullptr) box_settle(*box_held_->seg, box_held_->holder, bytes, now);
  }

  void cancel(std::uint64_t id) PNMEM_EXCLUDES(mu_) {
    const auto index = static_cast<std::uint32_t>(id);
    const auto generation = static_cast<std::uint32_t>(id >> 32);
    detail::lock_guard lk(mu_);
    if (!slot_is(index, generation)) return;
    const box_scope box(*this);
    if (slot_is(index, generation)) free_slot(index);  // (a fork's child forgot it meanwhile: nothing)
  }

  clock_fn now_;
  mutable detail::mutex mu_;
  detail::u128 pending_ PNMEM_GUARDED_BY(mu_) = 0;  // every counted reservation's bytes (cannot wrap)
  std::vector<slot> slots_ PNMEM_GUARDED_BY(mu_);
  std::uint32_t free_head_ PNMEM_GUARDED_BY(mu_) = no_slot;
  std::size_t unsettled_ PNMEM_GUARDED_BY(mu_) = 0;
  std::deque<settled_entry> settled_ PNMEM_GUARDED_BY(mu_);  // in settled_ns order
  std::deque<settled_entry> credits_ PNMEM_GUARDED_BY(mu_);  // credit_freed, in time order
  detail::u128 credited_ PNMEM_GUARDED_BY(mu_) = 0;          // their bytes
  std::vector<expiry> expiries_ PNMEM_GUARDED_BY(mu_);       // a min-heap on expires_ns
  std::size_t expiring_ PNMEM_GUARDED_BY(mu_) = 0;           // live slots with an entry there
  std::uint64_t credited_now_ PNMEM_GUARDED_BY(mu_) = 0;    // the credits the last answer counted
  std::shared_ptr<box_link> box_ PNMEM_GUARDED_BY(mu_);     // the box book joined, or null
  bool box_forked_ PNMEM_GUARDED_BY(mu_) = false;           // a fork's child: box_ is its parent's
  box_link* box_held_ PNMEM_GUARDED_BY(mu_) = nullptr;      // box_, while a box_scope holds its lock
  box_cursor settled_cursor_ PNMEM_GUARDED_BY(mu_){};        // how far this process's samples saw the rings
  box_cursor credit_cursor_ PNMEM_GUARDED_BY(mu_){};
  mem_state budget_ PNMEM_GUARDED_BY(mu_){};                  // a refreshing watcher's live snapshot
  live_version budget_version_ PNMEM_GUARDED_BY(mu_){};
  std::uint64_t sampled_avail_ PNMEM_GUARDED_BY(mu_) = 0;     // budget_'s MemAvailable as sampled
  // The dies: what this process promised on each (unsettled and settled-unseen), its settles, their
  // names and the box book's entries for them, and what the last answer counted.
  static constexpr std::uint32_t box_die_unresolved = box_no_die - 1;
  static constexpr std::uint64_t no_retiring = std::numeric_limits<std::uint64_t>::max();
  bool dies_active_ PNMEM_GUARDED_BY(mu_) = false;  // a die was named or reserved on: answers adjust the dies
  std::array<detail::u128, max_dies> die_pending_ PNMEM_GUARDED_BY(mu_){};
  std::array<std::deque<settled_entry>, max_dies> die_settled_ PNMEM_GUARDED_BY(mu_);
  std::array<die_uuid, max_dies> die_names_ PNMEM_GUARDED_BY(mu_){};
  std::array<std::uint32_t, max_dies> box_die_ PNMEM_GUARDED_BY(mu_) = filled<std::uint32_t>(box_die_unresolved);
  std::array<std::uint64_t, max_dies> box_retiring_ PNMEM_GUARDED_BY(mu_) = filled<std::uint64_t>(no_retiring);
  std::array<std::uint64_t, max_dies> die_pending_now_ PNMEM_GUARDED_BY(mu_){};
  std::array<std::uint64_t, max_dies> sampled_die_free_ PNMEM_GUARDED_BY(mu_){};
  std::array<std::uint64_t, max_dies> sampled_die_retiring_ PNMEM_GUARDED_BY(mu_){};
};

}  // namespace pnmem
