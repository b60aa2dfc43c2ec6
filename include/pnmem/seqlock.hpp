// pnmem/seqlock.hpp - publishes one trivially copyable value from a writer to many readers.
//
// The watcher publishes each new mem_state through this; admission, the ladder,
// the scheduler gate and metrics read it on their hot paths. Readers never block
// and never write shared memory, so any number of them cost the writer nothing
// but cache-line transfers; a reader that overlaps a store retries.
//
// Why not memcpy under a sequence counter (rigtorp-style): a plain copy racing
// with the writer is a data race, i.e. undefined behaviour, and a compiler
// barrier does not order the copy on weakly ordered CPUs. The payload is
// therefore an array of std::atomic<std::uint64_t> words, copied with relaxed
// atomics and ordered by fences (a plain copy that races with the writer is
// undefined behaviour; the same protocol as absl/flags/internal/sequence_lock.h):
//
//   writer: seq = s+1 (relaxed); release fence; words (relaxed); seq = s+2 (release)
//   reader: s0 = seq (acquire), odd -> retry; words (relaxed) into a local buffer;
//           acquire fence; s1 = seq (relaxed); s0 == s1 -> the copy is consistent.
//
// If a reader's relaxed load saw a word written after the writer's release
// fence, its acquire fence makes the odd store visible to its second seq load,
// so s1 != s0 and the copy is thrown away.
//
// Who checks the fences: not the torn-read tests on x86. x86 is TSO: the CPU
// never reorders loads with loads or stores with stores, and both fences
// compile to no instruction, so a missing or relaxed fence passes every
// hardware test there (it would tear on ARM or POWER). Under ThreadSanitizer
// the fences are not compiled at all (see PNMEM_SEQLOCK_TSAN below). The
// fence path is checked by tests/test_seqlock_relacy.cpp (Meson test
// seqlock_relacy): it instantiates this very class on the Relacy race
// detector's model of the C++ memory model (the second template parameter,
// below: Relacy's atomics, fence and yield in place of std::atomic,
// std::atomic_thread_fence and cpu_relax), whose relaxed loads may return any
// value the standard allows, and fails if either fence is removed or relaxed.
// It checks read_ranges too (a payload whose head says how many slots are
// live), and fails if the ranges come from a head outside the validated
// attempt, or a retry keeps words a failed attempt copied.
//
// Cost: a read is one 8-byte atomic load and one store per word plus two seq
// loads; no atomic read-modify-write, no shared write. A plain memcpy moves 16-64
// bytes per instruction and relaxed atomic loads cannot be widened, so reading a
// large T costs about 3x copying it (benchmarks/bench_seqlock.cpp: 928-byte
// mem_state, ~48 ns vs ~15 ns, within 10 % of a non-atomic word-by-word copy).
// read_ranges pays that per word it copies, plus zeroing the rest of T
// (BENCHMARKS.md, "Issue 14: the live read").
//
// Reading part of T (read_ranges): when only some words of T matter and a field
// of T says which (mem_state: the first n_dies of each die array), a layout
// names them and a reader copies only those, under the same protocol, in one
// attempt: the layout's head words first, then the ranges the layout computes
// from that head, then the acquire fence and the second seq load. The head the
// ranges come from is validated with them: if a store overlapped, the head may
// be torn and the ranges wrong, and the attempt is thrown away like any torn
// copy. Every range is clamped to the payload, so a torn head can cost a retry
// but never a copy out of bounds. Words outside the head and the ranges read
// as zero, whatever the writer stored there (pnmem/live_state.hpp is the
// layout for mem_state). read_ranges_into does the same over a T the caller
// keeps, leaving the other words as they were: zero-filling a large T by value
// can cost more than the copy (g++ fills 936 bytes with `rep stosq`).
//
// Usage:
//   pnmem::seqlock<pnmem::mem_state> snapshot{initial};
//   snapshot.store(next);                    // one writer at a time
//   pnmem::mem_state now = snapshot.read();  // any thread, any number
//   pnmem::mem_state live = snapshot.read_ranges(pnmem::mem_state_live_layout{});  // the live part only
#pragma once

#include "pnmem/detail/cxx.hpp"  // PNMEM_HAS_*: which of the standard headers below this C++ has

#include <algorithm>
#include <array>
#include <atomic>
#if PNMEM_HAS_BIT_CAST
#include <bit>
#endif
#if PNMEM_HAS_CONCEPTS
#include <concepts>
#endif
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

#include "pnmem/detail/equality.hpp"

// ThreadSanitizer does not model standalone fences: it would report the fence
// protocol above as a race. Under TSan every word is stored with release and
// loaded with acquire instead, which TSan understands and which is also correct
// (just slower on weakly ordered CPUs). gcc defines __SANITIZE_THREAD__, clang
// answers __has_feature(thread_sanitizer).
#if defined(__SANITIZE_THREAD__)
#define PNMEM_SEQLOCK_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define PNMEM_SEQLOCK_TSAN 1
#endif
#endif
#ifndef PNMEM_SEQLOCK_TSAN
#define PNMEM_SEQLOCK_TSAN 0
#endif

namespace pnmem {

namespace detail {

// Tells the CPU a thread is spinning: on x86 `pause` stops the spin from
// flooding the pipeline with speculative loads and yields the core to a
// hyper-thread sibling (possibly the writer we are waiting for).
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || (defined(__arm__) && defined(__ARM_ARCH) && __ARM_ARCH >= 7)
  __asm__ __volatile__("yield");
#endif
}

inline constexpr bool seqlock_tsan = PNMEM_SEQLOCK_TSAN != 0;

// Orders for the payload words and the fences that replace them outside TSan.
inline constexpr std::memory_order seqlock_word_store =
    seqlock_tsan ? std::memory_order_release : std::memory_order_relaxed;
inline constexpr std::memory_order seqlock_word_load =
    seqlock_tsan ? std::memory_order_acquire : std::memory_order_relaxed;

// What the seqlock is built on: the atomic type of its words and seq, the
// fence, and the spin hint. seqlock<T> always uses this one; the seam exists so
// the Relacy test can run the same seqlock code on a model of the C++ memory
// model (it costs nothing: everything inlines to what std::atomic would do).
// The fence order is a template argument so it is a constant even at -O0.
struct seqlock_std_model {
  template <class U>
  using atomic = std::atomic<U>;
  template <std::memory_order Order>
  static void thread_fence() noexcept {
    std::atomic_thread_fence(Order);
  }
  static void spin_pause() noexcept { cpu_relax(); }
};

template <class Model>
inline void seqlock_release_fence() noexcept {
#if !PNMEM_SEQLOCK_TSAN
  Model::template thread_fence<std::memory_order_release>();
#endif
}
template <class Model>
inline void seqlock_acquire_fence() noexcept {
#if !PNMEM_SEQLOCK_TSAN
  Model::template thread_fence<std::memory_order_acquire>();
#endif
}

// Declared, never defined here: the seqlock test defines it to drive the two
// halves of a store separately and show deterministically what readers see
// while a write is in progress.
template <class T>
struct seqlock_test_access;

}  // namespace detail

// Words [first, first + count) of a seqlock's payload (word i holds bytes
// [8i, 8i + 8) of T).
struct seqlock_word_range {
  std::size_t first = 0;
  std::size_t count = 0;
  PNMEM_DEFAULTED_EQUALITY(seqlock_word_range)
};

// Which words of T a partial read copies (seqlock::read_ranges):
//   L::head_words     the first words of T, always copied, and copied first;
//   l.ranges(head)    the other words to copy, as a fixed-size array of
//                     seqlock_word_range, computed from a T whose head words hold
//                     this attempt's copy: a function of the head fields alone
//                     (the seqlock calls it again to find what a discarded
//                     attempt copied). The head may be torn, so ranges() must
//                     accept any head bits; the seqlock clamps what it returns
//                     to the payload, and discards the attempt.
// A layout is called between the two seq loads: it must be cheap, and must not
// touch the seqlock.
#if PNMEM_HAS_CONCEPTS
template <class L, class T>
concept seqlock_layout = requires(const L& layout, const T& head) {
  { L::head_words } -> std::convertible_to<std::size_t>;
  { layout.ranges(head).size() } -> std::convertible_to<std::size_t>;
  { *layout.ranges(head).begin() } -> std::same_as<seqlock_word_range&>;
  std::tuple_size<decltype(layout.ranges(head))>::value;
};
#else
// C++17 (detail/cxx.hpp): the same requirements as a constexpr bool.
namespace detail {
template <class L, class T>
using layout_ranges_t = decltype(std::declval<const L&>().ranges(std::declval<const T&>()));
template <class L, class T, class = void>
struct is_seqlock_layout : std::false_type {};
template <class L, class T>
struct is_seqlock_layout<L, T,
                         std::void_t<decltype((L::head_words)), decltype(std::declval<layout_ranges_t<L, T>>().size()),
                                     decltype(*std::declval<layout_ranges_t<L, T>>().begin()),
                                     decltype(std::tuple_size<layout_ranges_t<L, T>>::value)>>
    : std::bool_constant<std::is_convertible_v<decltype((L::head_words)), std::size_t> &&
                         std::is_convertible_v<decltype(std::declval<layout_ranges_t<L, T>>().size()), std::size_t> &&
                         std::is_same_v<decltype(*std::declval<layout_ranges_t<L, T>>().begin()), seqlock_word_range&>> {};
}  // namespace detail
template <class L, class T>
inline constexpr bool seqlock_layout = detail::is_seqlock_layout<L, T>::value;
#endif

// A layout may also say that its ranges depend on the head only through a small
// number, its shape (mem_state: the die count), and give the ranges of each shape
// as a constant:
//   L::shapes                  how many shapes have constant ranges: [0, shapes);
//   L::shape(head)             the head's shape, any size_t for any head bits;
//   L::ranges_of_shape(k)      constexpr: what ranges(head) returns when shape(head) == k.
// A reader then copies a head of shape k < shapes with ranges fixed at compile
// time: no loop, no bounds arithmetic, one load and one store per word (a 2-die
// live read was 147 instructions through the loops, BENCHMARKS.md). Other
// shapes take the loops. tests/test_seqlock.cpp checks both agree.
#if PNMEM_HAS_CONCEPTS
template <class L, class T>
concept seqlock_shaped_layout = seqlock_layout<L, T> && requires(const T& head) {
  { L::shapes } -> std::convertible_to<std::size_t>;
  { L::shape(head) } -> std::convertible_to<std::size_t>;
  { L::ranges_of_shape(std::size_t{0}) } -> std::same_as<decltype(std::declval<const L&>().ranges(head))>;
};
#else
namespace detail {
template <class L, class T, class = void>
struct is_seqlock_shaped_layout : std::false_type {};
template <class L, class T>
struct is_seqlock_shaped_layout<L, T,
                                std::void_t<decltype((L::shapes)), decltype(L::shape(std::declval<const T&>())),
                                            decltype(L::ranges_of_shape(std::size_t{0})), layout_ranges_t<L, T>>>
    : std::bool_constant<seqlock_layout<L, T> && std::is_convertible_v<decltype((L::shapes)), std::size_t> &&
                         std::is_convertible_v<decltype(L::shape(std::declval<const T&>())), std::size_t> &&
                         std::is_same_v<decltype(L::ranges_of_shape(std::size_t{0})), layout_ranges_t<L, T>>> {};
}  // namespace detail
template <class L, class T>
inline constexpr bool seqlock_shaped_layout = detail::is_seqlock_shaped_layout<L, T>::value;
#endif

// The version of "no copy yet" for seqlock::refresh_ranges_into: odd, and a reader's
// copy is only ever validated at an even seq.
inline constexpr std::uint64_t seqlock_no_version = 1;

// One writer at a time, any number of readers. store() does not serialise
// writers: callers that may write from several threads must hold a mutex around
// store() (the watcher does: its poll thread and set_die callers share one).
// Readers never take that mutex.
//
// Model: leave it alone (detail::seqlock_std_model). Only the Relacy test
// passes another (see "Who checks the fences" above).
template <class T, class Model = detail::seqlock_std_model>
class seqlock {
  static_assert(std::is_trivially_copyable_v<T>, "seqlock copies T bytewise: T must be trivially copyable");
  // A lock-based atomic would let a reader block the writer, the one thing a
  // seqlock must never do.
  static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "seqlock needs lock-free 64-bit atomics");

 public:
  // Seqlock words holding T, the last one padded with zero bytes.
  static constexpr std::size_t word_count = (sizeof(T) + sizeof(std::uint64_t) - 1) / sizeof(std::uint64_t);

  explicit seqlock(const T& initial) noexcept { write_words(to_words(initial)); }
#if PNMEM_HAS_CONCEPTS
  seqlock() noexcept
    requires std::is_default_constructible_v<T>
      : seqlock(T{}) {}
#else
  template <class U = T, std::enable_if_t<std::is_default_constructible_v<U>, int> = 0>
  seqlock() noexcept : seqlock(T{}) {}
#endif

  // Readers hold references to it; copying or moving would tear them apart.
  seqlock(const seqlock&) = delete;
  seqlock& operator=(const seqlock&) = delete;

  // Publishes `value`. Wait-free for the writer; readers that overlap retry.
  // Callers serialise writers (see the class comment).
  void store(const T& value) noexcept {
    const words buf = to_words(value);
    const std::uint64_t s = begin_write();
    write_words(buf);
    end_write(s);
  }

  // A consistent copy of the last completed store. Spins (with a pause hint)
  // while a store is in progress or overlapped the copy; never blocks the writer.
  T read() const noexcept {
    // The words land directly in the returned object (NRVO): a failed attempt
    // is simply overwritten by the next, and no staging copy is paid.
    T out = zeroed();
    while (!try_copy(as_bytes(out))) Model::spin_pause();
    return out;
  }

  // One attempt: false, leaving `out` untouched, if a store was in progress or
  // overlapped the copy. Stages the copy so a failure never hands back a torn
  // value to a caller that ignores the result.
  bool try_read(T& out) const noexcept {
    std::array<unsigned char, sizeof(T)> staged;
    if (!try_copy(staged.data())) return false;
    std::memcpy(as_bytes(out), staged.data(), sizeof(T));
    return true;
  }

  // A consistent copy of the head words and the ranges `layout` names from
  // that same head, every other word of T zero (see "Reading part of T"
  // above). Spins as read() does.
  template <class Layout>
#if PNMEM_HAS_CONCEPTS
    requires seqlock_layout<Layout, T>
#endif
  T read_ranges(const Layout& layout) const noexcept {
    T out = zeroed();
    read_ranges_into(out, layout);
    return out;
  }

  // read_ranges over an existing T: the head and the ranges it names are a
  // consistent copy; every other word of `out` keeps its value, or is zero (an
  // attempt that was thrown away clears the ranges its head named). For a caller that keeps one
  // T and knows which of its words the new copy leaves stale (live_state.hpp:
  // the dies past a smaller n_dies), it saves zero-filling the whole of T.
  template <class Layout>
#if PNMEM_HAS_CONCEPTS
    requires seqlock_layout<Layout, T>
#endif
  void read_ranges_into(T& out, const Layout& layout) const noexcept {
    std::uint64_t none = seqlock_no_version;  // names no copy: always copies
    refresh_ranges_into(out, layout, none);
  }

  // read_ranges_into unless `out` already holds the store `version` names: the version is
  // the seq a copy was validated at (this function keeps it), seqlock_no_version for none.
  // When seq still equals it, no store has begun since that copy, so `out` is the payload
  // now (the acquire load is the read's linearization point) and nothing is copied. A
  // reader that calls again and again between stores (admission, per request, while the
  // watcher publishes every 0.1-1 s) pays one load. True when it copied.
  template <class Layout>
#if PNMEM_HAS_CONCEPTS
    requires seqlock_layout<Layout, T>
#endif
  [[gnu::always_inline]] bool refresh_ranges_into(T& out, const Layout& layout, std::uint64_t& version) const noexcept {
    if (holds(version)) return false;
    std::uint64_t seen = 0;
    // The first attempt inline, the retries out of line: with the loop here g++ hoisted the
    // words' addresses out of it and spilled them, a load each on every read.
#if PNMEM_HAS_LIKELY_ATTRIBUTES
    if (!try_copy_ranges(out, layout, &seen)) [[unlikely]] {
#else
    if (__builtin_expect(!try_copy_ranges(out, layout, &seen), 0)) {
#endif
      retry_copy_ranges(out, layout, seen);
    }
    version = seen;
    return true;
  }

  // True when the payload is still the store a copy validated at `version` was taken from
  // (refresh_ranges_into's test).
  // An odd version names no copy and never matches: seq is odd while a store is in progress
  // (the first store's seq is 1, seqlock_no_version), and that is not a payload anyone holds.
  bool holds(std::uint64_t version) const noexcept {
    return (version & 1U) == 0 && seq_.load(std::memory_order_acquire) == version;
  }

  // One attempt of read_ranges(): false, leaving `out` untouched, if a store
  // was in progress or overlapped the copy.
  template <class Layout>
#if PNMEM_HAS_CONCEPTS
    requires seqlock_layout<Layout, T>
#endif
  bool try_read_ranges(T& out, const Layout& layout) const noexcept {
    T staged = zeroed();
    if (!try_copy_ranges(staged, layout)) return false;
    out = staged;
    return true;
  }

  // Number of completed stores. Acquire: a read() after sequence() returned n
  // sees store n or a later one.
  std::uint64_t sequence() const noexcept { return seq_.load(std::memory_order_acquire) / 2; }

 private:
  friend struct detail::seqlock_test_access<T>;

  using words = std::array<std::uint64_t, word_count>;

  static words to_words(const T& value) noexcept {
    words buf{};  // zero padding: the same T always publishes the same words
    std::memcpy(buf.data(), &value, sizeof(T));
    return buf;
  }

  // A T to fill in place; works whether or not T is default-constructible.
#if PNMEM_HAS_BIT_CAST
  static T zeroed() noexcept { return std::bit_cast<T>(std::array<unsigned char, sizeof(T)>{}); }
#else
  static T zeroed() noexcept { return __builtin_bit_cast(T, (std::array<unsigned char, sizeof(T)>{})); }
#endif

  static unsigned char* as_bytes(T& value) noexcept { return reinterpret_cast<unsigned char*>(&value); }

  // Bytes of T the last word holds; the rest of that word is padding.
  static constexpr std::size_t tail_bytes = sizeof(T) - (word_count - 1) * sizeof(std::uint64_t);

  // Writer half 1: seq goes odd, so readers starting now back off and readers
  // already copying fail their second check.
  std::uint64_t begin_write() noexcept {
    const std::uint64_t s = seq_.load(std::memory_order_relaxed);  // only the writer changes seq
    seq_.store(s + 1, std::memory_order_relaxed);
    // Orders the odd seq before every word store below (see the header comment).
    detail::seqlock_release_fence<Model>();
    return s;
  }

  void write_words(const words& buf) noexcept {
    for (std::size_t i = 0; i < word_count; ++i) words_[i].store(buf[i], detail::seqlock_word_store);
  }

  // Writer half 2: seq goes even again; release publishes the words to any
  // reader whose first (acquire) load sees it.
  void end_write(std::uint64_t s) noexcept { seq_.store(s + 2, std::memory_order_release); }

  // The reader's protocol, the one place it is written: `copy` loads words
  // (load_word, load_words, load_fixed only) between the two seq loads. True if no store was in
  // progress or overlapped the copy; false if one was, and then `copy` either
  // did not run or copied garbage.
  // `seen`, when given, receives the seq a successful copy was validated at.
  template <class Copy>
  [[gnu::always_inline]] bool attempt(Copy&& copy, std::uint64_t* seen = nullptr) const noexcept {
    const std::uint64_t s0 = seq_.load(std::memory_order_acquire);
    if ((s0 & 1U) != 0) return false;
    copy();
    // Orders the word loads before the second seq load (see the header comment).
    detail::seqlock_acquire_fence<Model>();
    if (seen != nullptr) *seen = s0;
    return seq_.load(std::memory_order_relaxed) == s0;
  }

  // Payload words [first, end) into the same bytes of dst (a T's bytes); the
  // last word brings only the bytes of T it holds. Callers keep end <= word_count.
  void load_words(unsigned char* dst, std::size_t first, std::size_t end) const noexcept {
    if constexpr (tail_bytes == sizeof(std::uint64_t)) {
      for (std::size_t i = first; i < end; ++i) load_word(dst, i);
    } else {
      const std::size_t whole_end = end < word_count ? end : word_count - 1;
      for (std::size_t i = first; i < whole_end; ++i) load_word(dst, i);
      if (end == word_count && first < word_count) {
        const std::uint64_t last = words_[word_count - 1].load(detail::seqlock_word_load);
        std::memcpy(dst + (word_count - 1) * sizeof(std::uint64_t), &last, tail_bytes);
      }
    }
  }

  void load_word(unsigned char* dst, std::size_t i) const noexcept {
    const std::uint64_t w = words_[i].load(detail::seqlock_word_load);
    std::memcpy(dst + i * sizeof(std::uint64_t), &w, sizeof(std::uint64_t));
  }

  // Copies the payload into dst[0, sizeof(T)). On false dst holds garbage.
  bool try_copy(unsigned char* dst) const noexcept {
    return attempt([&] { load_words(dst, 0, word_count); });
  }

  // A layout's range, inside the payload whatever a torn head made of it.
  static constexpr seqlock_word_range clamp(seqlock_word_range r) noexcept {
    const std::size_t first = std::min(r.first, word_count);
    return {first, std::min(r.count, word_count - first)};
  }

  // read_ranges' attempt: the head, then the ranges the layout computes from
  // that copy of the head, into `out`; other words of `out` are left as they
  // are. On false the words in the ranges of the head `out` is left with are
  // zero (those the attempt copied, or, if it stopped at an odd seq, those of
  // the head `out` held): a retry never leaves a discarded attempt's words
  // behind. ranges() is a function of the head, so recomputing it finds them.
  template <class Layout>
  [[gnu::always_inline]] bool try_copy_ranges(T& out, const Layout& layout, std::uint64_t* seen = nullptr) const noexcept {
#if !PNMEM_HAS_CONCEPTS
    static_assert(seqlock_layout<Layout, T>, "read_ranges: Layout is not a seqlock_layout of T");
#endif
    constexpr std::size_t head = std::min<std::size_t>(Layout::head_words, word_count);
    unsigned char* dst = as_bytes(out);
    const bool ok = attempt([&]() __attribute__((always_inline)) {
      load_fixed<0, head>(dst);
      if constexpr (seqlock_shaped_layout<Layout, T>) {
        if (load_shaped<Layout>(dst, Layout::shape(out), std::make_index_sequence<Layout::shapes>{})) return;
      }
      for_each_range(layout.ranges(out), [&](seqlock_word_range r) { load_words(dst, r.first, r.first + r.count); });
    }, seen);
    if (!ok) {
      for_each_range(layout.ranges(out), [&](seqlock_word_range r) {
        const std::size_t begin = std::min(r.first * sizeof(std::uint64_t), sizeof(T));
        const std::size_t end = std::min((r.first + r.count) * sizeof(std::uint64_t), sizeof(T));
        std::memset(dst + begin, 0, end - begin);
      });
    }
    return ok;
  }

  // read_ranges_into's retries after a first attempt a store overlapped: spins until one
  // succeeds, and gives the seq it was validated at.
  template <class Layout>
  [[gnu::noinline]] void retry_copy_ranges(T& out, const Layout& layout, std::uint64_t& seen) const noexcept {
    do {
      Model::spin_pause();
    } while (!try_copy_ranges(out, layout, &seen));
  }

  // A shaped layout's ranges for shape K, clamped to the payload: constants.
  template <class Layout, std::size_t K>
  struct shaped_ranges {
    static constexpr auto value = [] {
      auto r = Layout::ranges_of_shape(K);
      for (auto& range : r) range = clamp(range);
      return r;
    }();
  };

  // Words [First, First + Count), each load and store its own instruction pair (a layout's head,
  // a shaped range): g++ keeps a loop of atomic loads a loop, whose overhead was a quarter of a
  // 2-die live read.
  template <std::size_t First, std::size_t Count>
  void load_fixed(unsigned char* dst) const noexcept {
    if constexpr (Count > 32 || (First + Count == word_count && tail_bytes != sizeof(std::uint64_t))) {
      load_words(dst, First, First + Count);
    } else {
#if PNMEM_HAS_TEMPLATE_LAMBDAS
      [&]<std::size_t... I>(std::index_sequence<I...>) { (load_word(dst, First + I), ...); }(
          std::make_index_sequence<Count>{});
#else
      load_word_each<First>(dst, std::make_index_sequence<Count>{});
#endif
    }
  }

  // The ranges of shape k < Layout::shapes, unrolled; false (nothing copied) for any other k.
  template <class Layout, std::size_t... K>
  [[gnu::always_inline]] bool load_shaped(unsigned char* dst, std::size_t k, std::index_sequence<K...>) const noexcept {
#if PNMEM_HAS_TEMPLATE_LAMBDAS
    const auto copy = [&]<std::size_t S>(std::integral_constant<std::size_t, S>) {
      constexpr auto& r = shaped_ranges<Layout, S>::value;
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        (load_fixed<r[I].first, r[I].count>(dst), ...);
      }(std::make_index_sequence<std::tuple_size_v<std::remove_cvref_t<decltype(r)>>>{});
      return true;
    };
    return ((k == K && copy(std::integral_constant<std::size_t, K>{})) || ...);
#else
    return ((k == K && load_shape<Layout, K>(dst, std::make_index_sequence<shaped_ranges<Layout, K>::value.size()>{})) ||
            ...);
#endif
  }

#if !PNMEM_HAS_TEMPLATE_LAMBDAS
  // C++17 (no template lambdas: detail/cxx.hpp): the lambdas above as member templates.
  template <std::size_t First, std::size_t... I>
  [[gnu::always_inline]] void load_word_each(unsigned char* dst, std::index_sequence<I...>) const noexcept {
    static_cast<void>(dst);  // an empty range uses no word
    (load_word(dst, First + I), ...);
  }
  template <class Layout, std::size_t S, std::size_t... I>
  [[gnu::always_inline]] bool load_shape(unsigned char* dst, std::index_sequence<I...>) const noexcept {
    using shape = shaped_ranges<Layout, S>;
    (load_fixed<shape::value[I].first, shape::value[I].count>(dst), ...);
    return true;
  }
  template <class Ranges, class F, std::size_t... I>
  [[gnu::always_inline]] static void for_each_range_at(const Ranges& ranges, F& f, std::index_sequence<I...>) noexcept {
    (f(clamp(ranges[I])), ...);
  }
#endif

  // f(r) for each of a layout's ranges, clamped to the payload (whatever a torn
  // head made of it), unrolled over the layout's fixed number of ranges so its
  // constant offsets fold into the copy loops.
  template <class Ranges, class F>
  static void for_each_range(const Ranges& ranges, F&& f) noexcept {
#if PNMEM_HAS_TEMPLATE_LAMBDAS
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (f(clamp(ranges[I])), ...);
    }(std::make_index_sequence<std::tuple_size_v<Ranges>>{});
#else
    for_each_range_at(ranges, f, std::make_index_sequence<std::tuple_size_v<Ranges>>{});
#endif
  }

  // seq_ gets a cache line of its own: readers waiting out a store spin on it,
  // and if it shared a line with payload words each spin would pull that line
  // away from the writer in the middle of its store. The payload starts on the
  // next line. The alignment also makes the whole object 64-aligned and rounds
  // sizeof up to whole lines, so nothing the owner places next to the seqlock
  // (the writers' mutex, say) shares a line with data every reader touches.
  using atomic_word = typename Model::template atomic<std::uint64_t>;
  alignas(64) atomic_word seq_{0};
  alignas(64) std::array<atomic_word, word_count> words_{};
};

}  // namespace pnmem

#undef PNMEM_SEQLOCK_TSAN  // ask pnmem::detail::seqlock_tsan instead
