// The seqlock's memory ordering, checked on a model of the C++ memory model.
//
// Why this test exists: the torn-read tests in test_seqlock.cpp run on x86,
// which is TSO: loads are never reordered with loads nor stores with stores,
// and a release or acquire fence compiles to no instruction. Remove either of
// the seqlock's fences and every hardware test still passes there (the copy
// would tear on ARM or POWER). Under ThreadSanitizer the fences are not
// compiled at all. So the fences are checked here, and only here.
//
// How: the Relacy race detector (Debian package relacy-dev, header-only) runs
// the test's threads as fibers of one OS thread. At every atomic access and
// fence it chooses which thread goes next, and a relaxed load may return any
// store the C++ memory model allows it to see, not just the latest one: what
// it may see follows happens-before, built from release/acquire operations and
// from fences the way the standard says ([atomics.fences]). The code under
// test is pnmem::seqlock itself (include/pnmem/seqlock.hpp), instantiated with
// relacy_model below in place of detail::seqlock_std_model: Relacy's atomics,
// fence and yield instead of std::atomic, std::atomic_thread_fence and the
// pause hint. Every order and fence comes from seqlock.hpp; removing a fence
// there, or relaxing it, is removing it here.
//
// The check: one writer stores payloads of one repeated byte (1, then 2,
// then 3); two readers, one calling try_read() and one read() (which spins),
// twice each, accept only copies of one repeated byte, never older than a copy
// they accepted before. It runs twice: Relacy's context-bound search (every
// execution with at most 2 preemptions, every value each relaxed load may
// return: about 530,000 executions, 2-3 s), then 20,000 executions of its
// random scheduler (any number of preemptions; seeded by the execution's
// number, so every run explores the same ones). Both are deterministic.
// Without either fence, or relaxed, or without the odd or the second seq check,
// each finds a torn copy within its first thousand executions.
//
// The partial read (read_ranges, which read_live is for mem_state) runs the
// same way on a payload whose head word says how many slots are live: one
// writer alternating 2 and 1 live slots (garbage in the dead one), one reader
// (try_read_ranges, read_ranges, then read_ranges_into over the last copy) that
// accepts only whole copies of one store with its dead slots zero (~67,000
// executions context-bound, then 20,000 random). It fails without either fence, with the ranges taken from a
// head read outside the validated attempt, or if a retry keeps what a failed
// attempt copied.
//
// Exit status: 0 all checks pass; 1 a check failed (Relacy prints the failing
// execution, every access with the order it used and the value it saw); 77
// skipped (no relacy-dev, or an ASan or TSan build: see below).
#include "pnmem/seqlock.hpp"

#include <cstdio>

// Relacy runs its threads as fibers (swapcontext) and replaces the global
// operator new with its own (which frees with free()): ThreadSanitizer and
// AddressSanitizer cannot follow either (ASan reports alloc-dealloc-mismatch
// and false stack errors), and a TSan build compiles no fences to check. The
// normal builds run this test; the sanitizer builds skip it.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define PNMEM_RELACY_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define PNMEM_RELACY_SANITIZED 1
#endif
#endif
#ifndef PNMEM_RELACY_SANITIZED
#define PNMEM_RELACY_SANITIZED 0
#endif

#if __has_include(<relacy/relacy.hpp>) && !PNMEM_RELACY_SANITIZED
#define PNMEM_HAVE_RELACY 1
#else
#define PNMEM_HAVE_RELACY 0
#endif

#if PNMEM_HAVE_RELACY

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <sstream>

// Last: relacy.hpp defines macros (new, delete, malloc, assert,
// memory_order_relaxed, ...) that must not reach the standard headers.
#include <relacy/relacy.hpp>

// This file spells std::memory_order_* itself, and Relacy's allocation macros
// (its leak tracking) have nothing to track here.
#undef memory_order_relaxed
#undef memory_order_consume
#undef memory_order_acquire
#undef memory_order_release
#undef memory_order_acq_rel
#undef memory_order_seq_cst
#undef new
#undef delete
#undef malloc
#undef calloc
#undef realloc
#undef free

namespace {

constexpr rl::memory_order to_rl(std::memory_order order) noexcept {
  switch (order) {
    case std::memory_order_relaxed: return rl::mo_relaxed;
    case std::memory_order_consume: return rl::mo_consume;
    case std::memory_order_acquire: return rl::mo_acquire;
    case std::memory_order_release: return rl::mo_release;
    case std::memory_order_acq_rel: return rl::mo_acq_rel;
    case std::memory_order_seq_cst: return rl::mo_seq_cst;
  }
  return rl::mo_seq_cst;
}

// Where in seqlock.hpp an access happened, for Relacy's execution history.
rl::debug_info site(const char* function, const char* file, int line) noexcept {
  return rl::debug_info(function, file, static_cast<unsigned>(line));
}

// detail::seqlock_std_model's interface on Relacy's primitives.
struct relacy_model {
  template <class U>
  class atomic {
   public:
    atomic() = default;
    explicit atomic(U value) : a_(value) {}

    U load(std::memory_order order, const char* function = __builtin_FUNCTION(), const char* file = __builtin_FILE(),
           int line = __builtin_LINE()) const {
      return a_.load(to_rl(order), site(function, file, line));
    }
    void store(U value, std::memory_order order, const char* function = __builtin_FUNCTION(),
               const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
      a_.store(value, to_rl(order), site(function, file, line));
    }

   private:
    rl::atomic<U> a_;
  };

  template <std::memory_order Order>
  static void thread_fence(const char* function = __builtin_FUNCTION(), const char* file = __builtin_FILE(),
                           int line = __builtin_LINE()) {
    // A relaxed fence does nothing ([atomics.fences]); Relacy would reject it
    // as a usage error, which would hide what the check is for.
    if constexpr (Order != std::memory_order_relaxed) rl::atomic_thread_fence(to_rl(Order), site(function, file, line));
  }

  // A spinning reader tells the scheduler to run someone else (the writer).
  static void spin_pause() { rl::yield(1, RL_INFO); }
};

// 20 bytes: three words, the last one partly padding (seqlock's tail path).
using payload = std::array<unsigned char, 20>;
using lock_type = pnmem::seqlock<payload, relacy_model>;
static_assert(lock_type::word_count == 3);

constexpr unsigned char kStores = 3;
// Every execution with at most kPreemptions preemptions, each relaxed load
// returning each value it may (~530,000 executions, 2-3 s), then kRandomRuns
// executions with any number of preemptions, chosen at random (~0.1 s).
constexpr unsigned kPreemptions = 2;
constexpr rl::iteration_t kRandomRuns = 20'000;

payload filled(unsigned char byte) {
  payload p;
  p.fill(byte);
  return p;
}

bool one_byte_repeated(const payload& p) {
  for (unsigned char b : p) {
    if (b != p[0]) return false;
  }
  return true;
}

// Thread 0 writes; thread 1 reads with try_read(), thread 2 with read().
struct torn : rl::test_suite<torn, 3> {
  lock_type lock{filled(0)};

  void thread(unsigned index) {
    if (index == 0) {
      for (unsigned char k = 1; k <= kStores; ++k) lock.store(filled(k));
      return;
    }
    unsigned char last = 0;
    for (int attempt = 0; attempt < 2; ++attempt) {
      payload copy = filled(0xee);
      if (index == 1) {
        if (!lock.try_read(copy)) continue;
      } else {
        copy = lock.read();
      }
      RL_ASSERT(one_byte_repeated(copy));  // a torn copy was accepted
      RL_ASSERT(copy[0] <= kStores);
      RL_ASSERT(copy[0] >= last);  // went back in time
      last = copy[0];
    }
  }
};

// The partial read (read_ranges, what read_live is for mem_state) on the same
// model. The payload is a head word, (stamp << 8) | count, and two arrays of
// two slots of which the first `count` are live. The writer's stores alternate
// 1 and 2 live slots and leave garbage in a dead one; readers must accept only
// whole copies of one store: the count the head says, its stamp in every live
// slot, zero in every dead one (a retry after an attempt that copied the
// garbage must not keep it), never older than a copy they accepted before.
struct counted_payload {
  std::uint64_t head = 0;
  std::array<std::uint64_t, 2> a{};
  std::array<std::uint64_t, 2> b{};
};

struct counted_layout {
  static constexpr std::size_t head_words = 1;
  static std::array<pnmem::seqlock_word_range, 2> ranges(const counted_payload& p) noexcept {
    const std::size_t count = (p.head & 0xffU) < 2 ? (p.head & 0xffU) : 2;
    return {{{1, count}, {3, count}}};
  }
};

// The same ranges as a shaped layout (seqlock_shaped_layout): the reader copies them through the
// unrolled, compile-time ranges of its shape instead of the loops, inside the same attempt.
struct counted_shaped_layout {
  static constexpr std::size_t head_words = 1;
  static constexpr std::size_t shapes = 3;
  static constexpr std::size_t shape(const counted_payload& p) noexcept {
    return (p.head & 0xffU) < 2 ? (p.head & 0xffU) : 2;
  }
  static constexpr std::array<pnmem::seqlock_word_range, 2> ranges_of_shape(std::size_t count) noexcept {
    return {{{1, count}, {3, count}}};
  }
  static constexpr std::array<pnmem::seqlock_word_range, 2> ranges(const counted_payload& p) noexcept {
    return ranges_of_shape(shape(p));
  }
};
static_assert(pnmem::seqlock_shaped_layout<counted_shaped_layout, counted_payload>);
static_assert(!pnmem::seqlock_shaped_layout<counted_layout, counted_payload>);

using counted_lock = pnmem::seqlock<counted_payload, relacy_model>;
static_assert(counted_lock::word_count == 5);

// Stores 1..3 after the initial 0: 2 live slots, 1 (garbage in the dead one), 2, 1.
constexpr std::uint64_t kRangeStores = 3;
constexpr std::uint64_t kLiveBase = 0x100;
constexpr std::uint64_t kGarbage = 0xdead;

// Store k (0 = the initial value): 2 live slots when k is even, 1 when odd.
counted_payload counted_store(std::uint64_t k) {
  const std::uint64_t count = k % 2 == 0 ? 2 : 1;
  counted_payload p;
  p.head = (k << 8) | count;
  for (std::size_t i = 0; i < 2; ++i) {
    p.a[i] = i < count ? kLiveBase + k : kGarbage;
    p.b[i] = i < count ? kLiveBase + k : kGarbage;
  }
  return p;
}

// A live copy of one store: count and stamp agree, dead slots zero.
bool whole_live_copy(const counted_payload& p) {
  const std::uint64_t k = p.head >> 8;
  const std::uint64_t count = p.head & 0xffU;
  if (k > kRangeStores || count != (k % 2 == 0 ? 2U : 1U)) return false;
  for (std::size_t i = 0; i < 2; ++i) {
    const std::uint64_t want = i < count ? kLiveBase + k : 0;
    if (p.a[i] != want || p.b[i] != want) return false;
  }
  return true;
}

// Thread 0 writes; thread 1 reads: try_read_ranges(), read_ranges(), then
// read_ranges_into() over that last copy, clearing the slots past a smaller
// count as pnmem::read_live(lock, live) does for dies, then refresh_ranges_into()
// twice over it (pnmem::refresh_live: the second copies nothing unless a store
// came between). (One reader: a second would multiply the executions to explore
// by about 10 without a new interleaving of the protocol; all share the one attempt.)
template <class Layout>
struct torn_ranges : rl::test_suite<torn_ranges<Layout>, 2> {
  counted_lock lock{counted_store(0)};

  void thread(unsigned index) {
    if (index == 0) {
      for (std::uint64_t k = 1; k <= kRangeStores; ++k) lock.store(counted_store(k));
      return;
    }
    std::uint64_t last = 0;
    counted_payload kept = counted_store(0);  // 2 live slots, none dead: a live copy
    std::uint64_t version = pnmem::seqlock_no_version;
    for (int attempt = 0; attempt < 5; ++attempt) {
      counted_payload copy = counted_store(7);  // not a store the writer makes: must be overwritten
      if (attempt == 0) {
        if (!lock.try_read_ranges(copy, Layout{})) continue;
      } else if (attempt == 1) {
        copy = lock.read_ranges(Layout{});
        kept = copy;
      } else {
        const std::uint64_t had = kept.head & 0xffU;
        if (attempt == 2) {
          lock.read_ranges_into(kept, Layout{});
        } else {
          lock.refresh_ranges_into(kept, Layout{}, version);
        }
        for (std::uint64_t i = kept.head & 0xffU; i < had; ++i) kept.a[i] = kept.b[i] = 0;
        copy = kept;
      }
      RL_ASSERT(whole_live_copy(copy));  // torn, or a dead slot not zero
      RL_ASSERT((copy.head >> 8) >= last);  // went back in time
      last = copy.head >> 8;
    }
  }
};

// Runs `Test` under one scheduler; Relacy prints the failing execution, if any.
template <class Test>
bool check(const char* what, rl::scheduler_type_e scheduler) {
  rl::test_params params;
  params.search_type = scheduler;
  params.context_bound = kPreemptions;     // the context-bound search only
  params.iteration_count = kRandomRuns;    // the random scheduler only
  std::ostringstream progress;             // the tree search's "99% (n/m)" lines
  params.progress_stream = &progress;
  std::printf("seqlock_relacy: %s, %s\n", what, rl::format(scheduler));
  std::fflush(stdout);
  return rl::simulate<Test>(params);
}

}  // namespace

int main() {
  bool ok = check<torn>("1 writer, 2 readers", rl::fair_context_bound_scheduler_type);
  ok = check<torn>("1 writer, 2 readers", rl::random_scheduler_type) && ok;
  ok = check<torn_ranges<counted_layout>>("read_ranges: 1 writer, 1 reader", rl::fair_context_bound_scheduler_type) && ok;
  ok = check<torn_ranges<counted_layout>>("read_ranges: 1 writer, 1 reader", rl::random_scheduler_type) && ok;
  ok = check<torn_ranges<counted_shaped_layout>>("read_ranges, shaped layout: 1 writer, 1 reader",
                                                 rl::fair_context_bound_scheduler_type) &&
       ok;
  ok = check<torn_ranges<counted_shaped_layout>>("read_ranges, shaped layout: 1 writer, 1 reader",
                                                 rl::random_scheduler_type) &&
       ok;
  std::puts(ok ? "seqlock_relacy: all checks passed"
                : "seqlock_relacy: FAILED (Relacy's report and the failing execution are above)");
  return ok ? 0 : 1;
}

#else  // !PNMEM_HAVE_RELACY

int main() {
#if PNMEM_RELACY_SANITIZED
  std::puts("SKIP seqlock_relacy: Relacy's fibers and operator new do not run under ASan or TSan"
            " (normal builds run it)");
#else
  std::puts("SKIP seqlock_relacy: relacy/relacy.hpp not found (apt-get install relacy-dev; scripts/setup does)");
#endif
  return 77;
}

#endif
