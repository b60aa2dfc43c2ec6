// pnmem/live_state.hpp - the live part of a snapshot, and reading only that.
//
// A mem_state carries max_dies (16) slots in each of its five die arrays and a
// 304-byte provenance, but a box has 1-8 dies and no decision reads where the
// numbers came from. Copying all of its 900-odd bytes through the seqlock costs
// three times a plain copy (seqlock.hpp, "Cost"); an admission then decides in a
// few ns.
// The live part is what every decision reads:
//
//   every field outside the die arrays and the provenance (host numbers, PSI,
//   cgroup, n_dies, the levels, seq, the clocks), and dies [0, die_count(s)) of
//   each of the five die arrays.
//
// A live snapshot is that part, and zero everywhere else: the die slots at and
// past n_dies, and the whole provenance (sources_read == 0: "nothing read" is
// not what happened; read() the full snapshot to report sources). So two live
// snapshots compare equal exactly when their live parts do, whatever the writer
// left in the dead slots. A field added to mem_state outside those six members
// is live without a change here; a new die array is copied whole until it is
// given its own range below.
//
//   pnmem::mem_state s = pnmem::read_live(seqlock);   // = live_part(seqlock.read()), cheaper
//   pnmem::mem_state s = watcher.read_live();         // the same through the watcher
//   pnmem::read_live(seqlock, s);                     // refresh a live snapshot `s` in place:
//   watcher.read_live(s);                             //   copies only the live words
//
// In place is the fast one: a by-value read first zero-fills the whole result,
// which costs more than copying the live words (BENCHMARKS.md, "Issue
// 14: the live read"). pnmem::admit (engine/admit.hpp) keeps one live snapshot
// per thread and refreshes it this way.
//
// Race-freedom: seqlock::read_ranges copies the head (the words before the first
// die array: n_dies is there), takes n_dies from that copy, copies the live die
// words, and validates the sequence once for all of them, so the n_dies used is
// the snapshot's own; a torn one is clamped (die_count) and the attempt retried.
#pragma once

#include "pnmem/detail/cxx.hpp"  // PNMEM_HAS_*: which of the standard headers below this C++ has

#include <array>
#include <atomic>
#if PNMEM_HAS_BIT_CAST
#include <bit>
#endif
#include <chrono>
#if PNMEM_HAS_CONCEPTS
#include <concepts>
#endif
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>
#if !PNMEM_HAS_CONCEPTS
#include <type_traits>
#endif

#include "pnmem/mem_state.hpp"
#include "pnmem/seqlock.hpp"

namespace pnmem {

// Which seqlock words of a mem_state are live (a seqlock_layout: seqlock.hpp).
struct mem_state_live_layout {
 private:
  static constexpr std::size_t word = sizeof(std::uint64_t);
  static constexpr std::size_t die_array_bytes = sizeof(mem_state::per_die_free_bytes);
  static constexpr std::size_t free_at = offsetof(mem_state, per_die_free_bytes);
  static constexpr std::size_t budget_at = offsetof(mem_state, per_die_budget_bytes);
  static constexpr std::size_t used_at = offsetof(mem_state, per_die_used_bytes);
  static constexpr std::size_t retiring_at = offsetof(mem_state, per_die_retiring_bytes);
  static constexpr std::size_t read_at = offsetof(mem_state, per_die_read_ns);
  static constexpr std::size_t provenance_at = offsetof(mem_state, provenance);
  static constexpr std::size_t provenance_end = provenance_at + sizeof(sample_provenance);
  static constexpr std::size_t total_words = (sizeof(mem_state) + word - 1) / word;

  // The ranges below are the gaps between the dead parts, in this order.
  static_assert(free_at < budget_at && budget_at < used_at && used_at < retiring_at && retiring_at < read_at &&
                    read_at < provenance_at,
                "mem_state_live_layout: the die arrays and the provenance moved; rewrite ranges()");
  static_assert(offsetof(mem_state, n_dies) + sizeof(int) <= free_at, "n_dies must be in the head");
  static_assert(free_at % word == 0 && budget_at % word == 0 && used_at % word == 0 && retiring_at % word == 0 &&
                    provenance_at % word == 0 && provenance_end % word == 0,
                "the dead parts must be whole seqlock words");
  static_assert(sizeof(mem_state) % word == 0, "live_part copies whole words");
  static_assert(sizeof(mem_state::per_die_budget_bytes) == die_array_bytes &&
                sizeof(mem_state::per_die_used_bytes) == die_array_bytes &&
                sizeof(mem_state::per_die_retiring_bytes) == die_array_bytes &&
                sizeof(mem_state::per_die_read_ns) == die_array_bytes &&
                die_array_bytes == max_dies * word);

  static constexpr seqlock_word_range between(std::size_t from_byte, std::size_t to_byte) noexcept {
    return {from_byte / word, (to_byte - from_byte) / word};
  }

 public:
  // Everything before the first die array: the host fields and n_dies.
  static constexpr std::size_t head_words = free_at / word;

  // From a head that may be torn: die_count clamps n_dies to [0, max_dies].
  static constexpr std::array<seqlock_word_range, 7> ranges(const mem_state& head) noexcept {
    return ranges_of_shape(shape(head));
  }

  // The ranges depend on the head only through its die count (seqlock_shaped_layout): the
  // seqlock copies 0-8 dies with ranges fixed at compile time, more through its loops.
  static constexpr std::size_t shapes = 9;
  static constexpr std::size_t shape(const mem_state& head) noexcept {
    return static_cast<std::size_t>(die_count(head));
  }
  static constexpr std::array<seqlock_word_range, 7> ranges_of_shape(std::size_t dies) noexcept {
    const std::size_t live = (dies < max_dies ? dies : max_dies) * word;
    return {{
        between(free_at, free_at + live),                            // free, dies [0, n)
        between(free_at + die_array_bytes, budget_at + live),        // (any fields between) budget, dies [0, n)
        between(budget_at + die_array_bytes, used_at + live),        // used
        between(used_at + die_array_bytes, retiring_at + live),      // level, seq, clocks, rates, retiring
        between(retiring_at + die_array_bytes, read_at + live),      // (any fields between) die read times
        between(read_at + die_array_bytes, provenance_at),           // host_read_ns and the rest up to provenance
        {provenance_end / word, total_words - provenance_end / word},  // anything after provenance
    }};
  }
};

static_assert(seqlock_shaped_layout<mem_state_live_layout, mem_state>);

// The live part of `s`, by plain copies: the bytes of `s` in the layout's words,
// zero elsewhere. What read_live returns when `s` is the snapshot published.
inline mem_state live_part(const mem_state& s) noexcept {
  using layout = mem_state_live_layout;
  constexpr std::size_t word = sizeof(std::uint64_t);
#if PNMEM_HAS_BIT_CAST
  mem_state out = std::bit_cast<mem_state>(std::array<unsigned char, sizeof(mem_state)>{});
#else
  mem_state out = __builtin_bit_cast(mem_state, (std::array<unsigned char, sizeof(mem_state)>{}));
#endif
  const auto* from = reinterpret_cast<const unsigned char*>(&s);
  auto* to = reinterpret_cast<unsigned char*>(&out);
  std::memcpy(to, from, layout::head_words * word);
  for (const seqlock_word_range r : layout::ranges(s)) {
    std::memcpy(to + r.first * word, from + r.first * word, r.count * word);
  }
  return out;
}

// The live part of the snapshot `lock` holds: consistent, never blocks the
// writer, spins like read() while a store overlaps.
template <class Model>
mem_state read_live(const seqlock<mem_state, Model>& lock) noexcept {
  return lock.read_ranges(mem_state_live_layout{});
}

namespace detail {
// Zeroes dies [from, to) of each die array: the slots a smaller n_dies left dead (rare: out of line).
[[gnu::noinline, gnu::cold]] inline void clear_dies(mem_state& live, int from, int to) noexcept {
  for (int d = from; d < to; ++d) {
    const auto i = static_cast<std::size_t>(d);
    live.per_die_free_bytes[i] = 0;
    live.per_die_budget_bytes[i] = 0;
    live.per_die_used_bytes[i] = 0;
    live.per_die_retiring_bytes[i] = 0;
    live.per_die_read_ns[i] = 0;
  }
}
}  // namespace detail

// read_live(lock, live) below, unless `live` already holds the store `version`
// names (seqlock::refresh_ranges_into): then nothing is copied. `version` starts
// as seqlock_no_version and is kept with `live`. True when it copied.
template <class Model>
[[gnu::always_inline]] inline bool refresh_live(const seqlock<mem_state, Model>& lock, mem_state& live,
                                                std::uint64_t& version) noexcept {
  const int had = live.n_dies;  // raw: die_count is monotonic, so fewer dies means a smaller raw count
  if (!lock.refresh_ranges_into(live, mem_state_live_layout{}, version)) return false;
#if PNMEM_HAS_LIKELY_ATTRIBUTES
  if (live.n_dies < had) [[unlikely]] detail::clear_dies(live, die_count(live), die_count(had));
#else
  if (__builtin_expect(live.n_dies < had, 0)) detail::clear_dies(live, die_count(live), die_count(had));
#endif
  return true;
}

// Refreshes `live` in place to the live part of the snapshot `lock` holds,
// copying only the live words. `live` must be a live snapshot already (from
// read_live, or a value-initialized mem_state{}): zero outside its own live
// part. Then only the dies it had past the new n_dies need clearing. (Padding
// bytes outside the live words keep whatever `live` had there: compare fields,
// or start from zero bytes, not mem_state{}, before comparing bytes.)
template <class Model>
void read_live(const seqlock<mem_state, Model>& lock, mem_state& live) noexcept {
  std::uint64_t none = seqlock_no_version;  // names no copy: always copies
  refresh_live(lock, live, none);
}

// Which publication of which source a kept live snapshot is (with_live_snapshot's, or an
// engine's own): the source's address and instance id (two sources at the same address one
// after the other have different ids: watcher.hpp), and the seqlock version of the copy.
struct live_version {
  const void* source = nullptr;
  std::uint64_t instance = 0;
  std::uint64_t seq = seqlock_no_version;
};

namespace detail {
// A source's instance id for live_version: never the same twice for one address. Strictly
// increasing within a program image, and at least the steady clock's ns at the call, so ids
// from two copies of this function (two shared objects, each with its own counter) still
// differ for two sources that shared an address one after the other (the later one was
// constructed after the earlier was destroyed: a later clock reading).
inline std::uint64_t next_instance_id() noexcept {
  static std::atomic<std::uint64_t> last{0};
  const auto now = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  std::uint64_t prev = last.load(std::memory_order_relaxed);
  std::uint64_t next = 0;
  do {
    next = prev + 1 > now ? prev + 1 : now;
  } while (!last.compare_exchange_weak(prev, next, std::memory_order_relaxed));
  return next;
}
}  // namespace detail

// One attempt: false, leaving `out` untouched, if a store overlapped.
template <class Model>
bool try_read_live(const seqlock<mem_state, Model>& lock, mem_state& out) noexcept {
  return lock.try_read_ranges(out, mem_state_live_layout{});
}

#if !PNMEM_HAS_CONCEPTS
// C++17 (no requires-expressions: detail/cxx.hpp): what the functions below ask of a source.
namespace detail {
template <class Source, class = void>
struct reads_live_value : std::false_type {};  // { source.read_live() } -> std::same_as<mem_state>
template <class Source>
struct reads_live_value<Source, std::void_t<decltype(std::declval<const Source&>().read_live())>>
    : std::is_same<decltype(std::declval<const Source&>().read_live()), mem_state> {};
template <class Source, class = void>
struct refreshes_live : std::false_type {};  // source.refresh_live(s, v)
template <class Source>
struct refreshes_live<Source, std::void_t<decltype(std::declval<const Source&>().refresh_live(
                                  std::declval<mem_state&>(), std::declval<live_version&>()))>> : std::true_type {};
template <class Source, class = void>
struct reads_live_into : std::false_type {};  // source.read_live(s)
template <class Source>
struct reads_live_into<Source, std::void_t<decltype(std::declval<const Source&>().read_live(std::declval<mem_state&>()))>>
    : std::true_type {};
}  // namespace detail
#endif

// The snapshot a decision should read from a watcher-like source: its live part
// when the source offers read_live() (pnmem::watcher does), else read().
template <class Source>
mem_state read_for_decision(const Source& source) {
#if PNMEM_HAS_CONCEPTS
  if constexpr (requires {
                  { source.read_live() } -> std::same_as<mem_state>;
                }) {
#else
  if constexpr (detail::reads_live_value<Source>::value) {
#endif
    return source.read_live();
  } else {
    return source.read();
  }
}

namespace detail {
struct live_slot {
  mem_state live{};
  live_version version{};
  bool busy = false;
};
// This thread's live snapshot for with_live_snapshot: one per thread, whatever
// the source (any live snapshot can be refreshed from any seqlock).
inline live_slot& this_thread_live_slot() noexcept {
  thread_local live_slot slot;  // constant-initialized, trivially destructible: no guard, no TLS destructor
  return slot;
}
}  // namespace detail

// f(s) on the newest live snapshot `s` of a watcher-like source, returning what
// f returns. A source that refreshes in place (refresh_live(mem_state&, live_version&)
// or read_live(mem_state&): pnmem::watcher has both) refreshes one live snapshot kept
// per thread, so only the live words are written, and none when the source has not
// published since this thread's last call (refresh_live); others are read with
// read_for_decision. `s` is valid during f only.
// A nested call on the same thread (f calling back in: a log sink that admits)
// gets a snapshot of its own, never changing the one the outer f holds.
template <class Source, class F>
decltype(auto) with_live_snapshot(const Source& source, F&& f) {
#if PNMEM_HAS_CONCEPTS
  if constexpr (requires(mem_state& s, live_version& v) { source.refresh_live(s, v); } ||
                requires(mem_state& s) { source.read_live(s); }) {
#else
  if constexpr (detail::refreshes_live<Source>::value || detail::reads_live_into<Source>::value) {
#endif
    detail::live_slot& t = detail::this_thread_live_slot();
    if (!t.busy) {
      struct release {
        bool& busy;
        ~release() { busy = false; }
      };
      t.busy = true;
      const release guard{t.busy};  // f may throw (a log sink)
#if PNMEM_HAS_CONCEPTS
      if constexpr (requires(mem_state& s, live_version& v) { source.refresh_live(s, v); }) {
#else
      if constexpr (detail::refreshes_live<Source>::value) {
#endif
        source.refresh_live(t.live, t.version);  // copies nothing when the source has not published since
      } else {
        source.read_live(t.live);
      }
      return std::forward<F>(f)(std::as_const(t.live));
    }
  }
  return std::forward<F>(f)(read_for_decision(source));
}

}  // namespace pnmem
