// pnmem/engine/box_book.hpp - one ledger for every pnmem process that shares a box's memory.
//
// A host_ledger (engine/host_ledger.hpp) orders one process's admitters: a burst cannot spend the same
// headroom twice. A box runs several engine processes over one pool of memory (a worker per GPU, a
// runner per model, servers side by side), and each would promise the same MemAvailable again. The box
// book is the ledger's promises in memory those processes share: every process that joins it counts
// every other's reservations, settles, cancels and credited frees in its answers, with the meaning they
// have in one process (a reservation counts until a sample that began after its settle has it; the
// clock, CLOCK_MONOTONIC, is the box's).
//
// This header is the book's layout and its arithmetic, OS-free: the segment (a POD in shared memory),
// its validation, and the operations a process does on it while it holds the segment's lock. Making,
// mapping and locking the segment, and telling a dead holder from a live one, are an adapter's
// (pnmem/linux/box_ledger.hpp: a file in /dev/shm, a process-shared robust mutex, and one open-file-
// description lock per holder, which the kernel drops when the process dies, whatever its pid
// namespace). The segment is input, never trusted: box_segment_problem says what is wrong with one, and
// every figure read from it is bounded before it is used.
//
//   box_segment                 the shared memory: identity, the lock's bytes, the totals, the holders
//                               (one per joined process) and two rings (settles, credited frees)
//   box_link                    one process's place in it: the segment, its holder, the adapter's lock
//   box_cursor                  where one reader has got to in a ring: what its own samples have seen
//   box_die                     one GPU, keyed by its UUID (die_uuid.hpp): what every holder reserved on
//                               it, settled and not yet seen by a sample of it, and has retiring there
//
// Dies. A die's index is each process's own (CUDA_VISIBLE_DEVICES); its UUID is the box's. A process that
// names its dies (host_ledger::name_die) counts every holder's die reservations (a model load's weights,
// KV and scratch; a buffer) on the same GPU, and their retiring bytes (freed by their owner, still read
// by in-flight work): per holder and die, so a dead holder's go with it. Die settles are few (a load
// each): they wait in a small ring of their own, read whole.
//
// Cost: every operation is O(1) in the reservations outstanding and in the processes joined. A settle
// or a credit appends to a ring; a reader keeps a cursor and advances it past what its newest sample
// has seen, summing with the cumulative counts the entries carry (amortised O(1)). The rings hold the
// last box_ring_capacity settles (credits); one older than that is taken as seen, which every sampler
// has done unless it has not sampled for box_ring_capacity settles.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>

#include "pnmem/detail/saturating.hpp"
#include "pnmem/die_uuid.hpp"

namespace pnmem {

inline constexpr char box_magic[8] = {'p', 'n', 'm', 'e', 'm', 'B', 'o', 'X'};
inline constexpr std::uint32_t box_version = 2;
inline constexpr std::uint32_t box_max_holders = 128;      // processes joined at once
inline constexpr std::uint32_t box_ring_capacity = 4096;    // settles (credits) a ring remembers
inline constexpr std::size_t box_lock_bytes = 128;          // room for the adapter's process-shared lock
inline constexpr std::uint32_t box_no_holder = 0xffffffffu;
inline constexpr std::uint32_t box_max_dies = 64;           // GPUs a book keeps, by UUID
inline constexpr std::uint32_t box_die_ring_capacity = 512; // die settles a book remembers
inline constexpr std::uint32_t box_no_die = 0xffffffffu;

enum class box_holder_state : std::uint32_t { free = 0, live = 1 };

// One joined process. Written by that process (its own figures) and by whoever frees it once it died.
struct box_holder {
  box_holder_state state;
  std::uint32_t generation;        // bumped each time the slot is freed
  std::int32_t pid;                // in the holder's own pid namespace (for people: `pnmem ledger`)
  std::uint32_t reservations;      // its unsettled reservations
  std::uint64_t unsettled_bytes;   // their bytes
  std::uint64_t settled_bytes;     // bytes it settled, in all
  std::uint64_t credited_bytes;    // bytes it credited as freed, in all
  std::int64_t joined_ns;
  std::int64_t holding_since_ns;   // when its unsettled bytes last rose from 0; 0 while it holds none
  std::int64_t last_sample_ns;     // the newest host sample (host_read_ns) its answers used
  char comm[16];                   // its command (/proc/self/comm), NUL-terminated
};

// A settle (or a credited free): bytes, when, and the bytes the ring had taken before it.
struct box_ring_entry {
  std::int64_t ns;
  std::uint64_t bytes;
  std::uint64_t cum_before;
  std::uint32_t holder;
  std::uint32_t unused;
};

struct box_ring {
  std::uint64_t seq;  // entries appended, in all (the next one's number)
  std::uint64_t cum;  // bytes appended, in all (wraps: only differences are used)
  box_ring_entry entries[box_ring_capacity];
};

// One GPU of the box, by UUID (all zero: an entry not used yet). Entries are taken in order and never
// given back (a box has far fewer GPUs than box_max_dies).
struct box_die {
  std::uint8_t uuid[16];
  std::uint64_t unsettled_total;  // every live holder's unsettled bytes on it
  std::uint64_t retiring_total;   // every live holder's retiring bytes on it
  std::uint32_t reservations;     // every live holder's unsettled reservations on it
  std::uint32_t unused;
  std::int64_t last_read_ns;      // the newest read of it any holder's answers used (box_die_saw)
};

// The UUID a die entry is keyed by (empty for an entry not used yet).
inline die_uuid box_die_id(const box_die& die) noexcept {
  die_uuid id;
  std::memcpy(id.bytes.data(), die.uuid, sizeof die.uuid);
  return id;
}

// A die reservation settled: counted until a sample of that die that began after it.
struct box_die_entry {
  std::int64_t ns;
  std::uint64_t bytes;
  std::uint32_t holder;
  std::uint32_t die;
};

struct box_die_ring {
  std::uint64_t seq;
  box_die_entry entries[box_die_ring_capacity];
};

struct box_segment {
  // Identity: written once by the process that made the segment, checked by every one that joins.
  char magic[8];
  std::uint32_t version;
  std::uint32_t layout;            // box_layout(): the sizes and counts this build laid out
  std::uint64_t size;              // sizeof(box_segment)
  std::uint32_t owner_uid;
  std::uint32_t owner_gid;
  std::int64_t created_ns;
  char scope[96];                  // the scope's name, NUL-terminated (for people)
  // The adapter's lock (a process-shared robust mutex), opaque here.
  alignas(64) unsigned char lock[box_lock_bytes];
  // Under the lock.
  alignas(64) std::uint64_t unsettled_total;  // every live holder's unsettled bytes
  std::uint32_t holders_live;
  std::uint32_t unused;
  std::int64_t last_reap_ns;       // when dead holders were last looked for
  std::int64_t last_sample_ns;     // the newest host sample any holder's answers used
  box_holder holders[box_max_holders];
  box_ring settled;
  box_ring credits;
  // The dies, under the lock: [0, dies_used) taken, in order.
  std::uint32_t dies_used;
  std::uint32_t unused_dies;
  box_die dies[box_max_dies];
  std::uint64_t holder_die_bytes[box_max_holders][box_max_dies];     // unsettled, per holder and die
  std::uint32_t holder_die_count[box_max_holders][box_max_dies];     // their reservations
  std::uint64_t holder_die_retiring[box_max_holders][box_max_dies];  // retiring, per holder and die
  box_die_ring die_settled;
};

static_assert(std::is_trivially_copyable_v<box_segment> && std::is_standard_layout_v<box_segment>);

// The layout in one word: a process built with other sizes or counts refuses the segment.
constexpr std::uint32_t box_layout() noexcept {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the sizes and offsets that matter
  const std::uint64_t parts[] = {sizeof(box_segment), sizeof(box_holder), sizeof(box_ring_entry), box_max_holders,
                                 box_ring_capacity, box_lock_bytes, offsetof(box_segment, unsettled_total),
                                 offsetof(box_segment, holders), offsetof(box_segment, settled),
                                 offsetof(box_segment, credits), sizeof(box_die), box_max_dies,
                                 box_die_ring_capacity, offsetof(box_segment, dies),
                                 offsetof(box_segment, die_settled)};
  for (std::uint64_t p : parts) {
    for (int i = 0; i < 8; ++i) {
      h ^= (p >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  }
  return static_cast<std::uint32_t>(h ^ (h >> 32));
}

// Where one reader has got to in a ring (a process's own, never shared): the first entry its samples have
// not seen. (The bytes before it are read from the ring, never kept: a cursor cannot carry a wrong sum.)
struct box_cursor {
  std::uint64_t seq = 0;
};

// One process's place in a box book: made by an adapter (linux_os::join_box), used by a host_ledger
// under the ledger's own mutex. The lock functions are the adapter's: lock() is false when the segment's
// lock cannot be had (wedged by a process stopped while holding it, or not a lock at all): the ledger
// then stops using the book and counts in its own, with one log line saying why.
struct box_link {
  box_segment* seg = nullptr;
  std::uint32_t holder = box_no_holder;
  bool (*lock)(box_link& self) noexcept = nullptr;
  void (*unlock)(box_link& self) noexcept = nullptr;
  // Frees the holders whose process is gone (the lock held): at most every reap_every_ns of the box's
  // sample time, from the ledger's answers. Null: never.
  void (*reap)(box_link& self) noexcept = nullptr;
  std::int64_t reap_every_ns = 100'000'000;
  // Says a line to the process's log (stderr, or the C ABI's sink).
  void (*log)(box_link& self, const char* line) noexcept = nullptr;
  // In a fork's child: lets go of what the parent's join holds open (the child must not keep the
  // parent's liveness lock alive, nor free its holder), so the link's end does nothing more.
  void (*detach)(box_link& self) noexcept = nullptr;
  // Joins the same book again as a new holder (a fork's child), with the options this link was made
  // with; null when that fails (the reason logged).
  std::shared_ptr<box_link> (*rejoin)(box_link& self) = nullptr;
  void* os = nullptr;  // the adapter's
  char scope[96] = {};
};

namespace detail {

inline std::string box_text(const char* field, std::uint64_t got, std::uint64_t want) {
  return std::string(field) + " is " + std::to_string(got) + ", not " + std::to_string(want);
}

// The segment's totals are exact sums of its holders' figures, never clamped: a clamped total cannot be
// taken apart again (a holder's bytes taken off a total that stopped at 2^64-1 leave it below the
// others' sum), so what would carry a total past 2^64-1 is granted only up to it.
inline std::uint64_t box_room(std::uint64_t total, std::uint64_t bytes) noexcept {
  return bytes < u64_max - total ? bytes : u64_max - total;
}

// The dies' figures: the entries taken have a UUID and the others none; each die's totals are its live
// holders' sums, a free holder holds nothing on any die; the die ring's entries name a die taken and a
// holder, in time order.
inline std::string box_dies_problem(const box_segment& s) {
  if (s.dies_used > box_max_dies) return box_text("its count of dies", s.dies_used, box_max_dies) + " at most";
  for (std::uint32_t d = 0; d < box_max_dies; ++d) {
    const box_die& die = s.dies[d];
    const die_uuid id = box_die_id(die);
    const std::string name = "die " + std::to_string(d);
    if (d >= s.dies_used) {
      if (!id.empty() || die.unsettled_total != 0 || die.retiring_total != 0 || die.reservations != 0) {
        return name + " is past the dies used and not empty";
      }
    } else if (id.empty()) {
      return name + " has no UUID";
    }
    std::uint64_t bytes = 0;
    std::uint64_t retiring = 0;
    std::uint64_t count = 0;
    for (std::uint32_t h = 0; h < box_max_holders; ++h) {
      const std::uint64_t b = s.holder_die_bytes[h][d];
      const std::uint32_t c = s.holder_die_count[h][d];
      const std::uint64_t r = s.holder_die_retiring[h][d];
      if (s.holders[h].state != box_holder_state::live) {
        if (b != 0 || c != 0 || r != 0) return "free holder " + std::to_string(h) + " holds bytes on " + name;
        continue;
      }
      if ((b == 0) != (c == 0)) {
        return "holder " + std::to_string(h) + " has " + std::to_string(c) + " reservations of " + std::to_string(b) +
               " bytes on " + name;
      }
      if (add_overflows(bytes, b, bytes) || add_overflows(retiring, r, retiring)) {
        return "its holders' bytes on " + name + " add up past 2^64";
      }
      count += c;
    }
    if (die.unsettled_total != bytes) return box_text((name + "'s unsettled total").c_str(), die.unsettled_total, bytes);
    if (die.retiring_total != retiring) return box_text((name + "'s retiring total").c_str(), die.retiring_total, retiring);
    if (die.reservations != count) return box_text((name + "'s count of reservations").c_str(), die.reservations, count);
  }
  const box_die_ring& r = s.die_settled;
  const std::uint64_t oldest = r.seq > box_die_ring_capacity ? r.seq - box_die_ring_capacity : 0;
  for (std::uint64_t k = oldest; k < r.seq; ++k) {
    const box_die_entry& e = r.entries[k % box_die_ring_capacity];
    if (e.die >= s.dies_used) return "its die ring: an entry names die " + std::to_string(e.die);
    if (e.holder >= box_max_holders) return "its die ring: an entry names holder " + std::to_string(e.holder);
    if (k > oldest && e.ns < r.entries[(k - 1) % box_die_ring_capacity].ns) {
      return "its die ring: entry " + std::to_string(k) + " comes before the one before it";
    }
  }
  return {};
}

// The ring's figures are its own: each entry it holds follows the one before (bytes and time), and its
// total follows the newest.
inline std::string box_ring_problem(const box_ring& r, const char* name) {
  if (r.seq == 0) return {};
  const std::uint64_t oldest = r.seq > box_ring_capacity ? r.seq - box_ring_capacity : 0;
  for (std::uint64_t k = oldest; k < r.seq; ++k) {
    const box_ring_entry& e = r.entries[k % box_ring_capacity];
    if (e.holder >= box_max_holders) return std::string(name) + ": an entry names holder " + std::to_string(e.holder);
    if (k + 1 < r.seq) {
      const box_ring_entry& next = r.entries[(k + 1) % box_ring_capacity];
      if (e.cum_before + e.bytes != next.cum_before || next.ns < e.ns) {
        return std::string(name) + ": entry " + std::to_string(k + 1) + " does not follow the one before";
      }
    }
  }
  const box_ring_entry& last = r.entries[(r.seq - 1) % box_ring_capacity];
  if (last.cum_before + last.bytes != r.cum) return std::string(name) + ": its total does not follow its newest entry";
  return {};
}

}  // namespace detail

// What is wrong with `size` bytes that should be a box segment, in words for a log line; empty when
// nothing is. Read under the segment's lock (or before anyone shares it). `box_total_bytes` (the host's
// memory, 0 when unknown) bounds what may be promised: the holders' unsettled bytes cannot add up to more
// than the box has, since each was admitted against its free memory.
inline std::string box_segment_problem(const void* bytes, std::size_t size, std::uint64_t box_total_bytes = 0) {
  if (bytes == nullptr) return "no segment";
  if (size != sizeof(box_segment)) {
    return "its size is " + std::to_string(size) + " bytes, not this build's " + std::to_string(sizeof(box_segment)) +
           " (another pnmem version, or not a pnmem ledger)";
  }
  // A copy (on the heap: the segment is a few hundred KiB): the checks below read each figure once,
  // whatever the bytes' alignment.
  const std::unique_ptr<box_segment> copy = std::make_unique<box_segment>();
  std::memcpy(static_cast<void*>(copy.get()), bytes, sizeof(box_segment));
  const box_segment& s = *copy;
  if (std::memcmp(s.magic, box_magic, sizeof box_magic) != 0) return "it is not a pnmem ledger (no magic)";
  if (s.version != box_version) return detail::box_text("its version", s.version, box_version) + " (another pnmem version)";
  if (s.layout != box_layout()) return "its layout is another build's (another pnmem version or architecture)";
  if (s.size != sizeof(box_segment)) return detail::box_text("its recorded size", s.size, sizeof(box_segment));
  if (s.scope[sizeof s.scope - 1] != '\0') return "its scope's name is not terminated";
  std::uint32_t live = 0;
  std::uint64_t unsettled = 0;
  for (std::uint32_t i = 0; i < box_max_holders; ++i) {
    const box_holder& h = s.holders[i];
    const auto st = static_cast<std::uint32_t>(h.state);
    if (st > 1) return "holder " + std::to_string(i) + " has state " + std::to_string(st);
    if (h.state == box_holder_state::free) {
      if (h.unsettled_bytes != 0 || h.reservations != 0) return "free holder " + std::to_string(i) + " holds bytes";
      continue;
    }
    ++live;
    if ((h.unsettled_bytes == 0) != (h.reservations == 0)) {
      return "holder " + std::to_string(i) + " has " + std::to_string(h.reservations) + " reservations of " +
             std::to_string(h.unsettled_bytes) + " bytes";
    }
    if (h.comm[sizeof h.comm - 1] != '\0') return "holder " + std::to_string(i) + "'s command is not terminated";
    if (detail::add_overflows(unsettled, h.unsettled_bytes, unsettled)) return "its holders' unsettled bytes add up past 2^64";
  }
  if (s.holders_live != live) return detail::box_text("its count of holders", s.holders_live, live);
  if (s.unsettled_total != unsettled) {
    return detail::box_text("its unsettled total", s.unsettled_total, unsettled) + " (the holders' sum)";
  }
  if (box_total_bytes != 0 && unsettled > box_total_bytes) {
    return "its holders promise " + std::to_string(unsettled) + " bytes, more than the box's " +
           std::to_string(box_total_bytes);
  }
  if (std::string p = detail::box_ring_problem(s.settled, "its settle ring"); !p.empty()) return p;
  if (std::string p = detail::box_ring_problem(s.credits, "its credit ring"); !p.empty()) return p;
  return detail::box_dies_problem(s);
}

// --- Operations, the segment's lock held --------------------------------------------------------------

namespace detail {

inline void box_append(box_ring& r, std::uint32_t holder, std::uint64_t bytes, std::int64_t ns) noexcept {
  box_ring_entry& e = r.entries[r.seq % box_ring_capacity];
  // In time order whatever the caller's clock read: an entry never says it came before the last one.
  const std::int64_t last = r.seq == 0 ? ns : r.entries[(r.seq - 1) % box_ring_capacity].ns;
  e.ns = ns < last ? last : ns;
  e.bytes = bytes;
  e.cum_before = r.cum;
  e.holder = holder;
  e.unused = 0;
  r.cum += bytes;  // the entry first, then the totals: a writer that dies between leaves the entry unread
  ++r.seq;
}

// The bytes of `r` a reader whose newest sample began at host_read_ns has not seen: those appended at or
// after it. Advances the reader's cursor past what it has seen (samples only move forward).
inline std::uint64_t box_unseen(const box_ring& r, box_cursor& c, std::int64_t host_read_ns) noexcept {
  const std::uint64_t oldest = r.seq > box_ring_capacity ? r.seq - box_ring_capacity : 0;
  if (c.seq < oldest || c.seq > r.seq) c.seq = oldest;  // overwritten (taken as seen), or another segment's
  while (c.seq < r.seq && r.entries[c.seq % box_ring_capacity].ns < host_read_ns) ++c.seq;
  return c.seq < r.seq ? r.cum - r.entries[c.seq % box_ring_capacity].cum_before : 0;
}

}  // namespace detail

// A live holder's slot, or null (`h` out of range, or not live: freed as dead meanwhile).
inline box_holder* box_holder_of(box_segment& s, std::uint32_t h) noexcept {
  return h < box_max_holders && s.holders[h].state == box_holder_state::live ? &s.holders[h] : nullptr;
}

// Holder `h` promised `bytes` more (a reservation), at `now`.
inline void box_add(box_segment& s, std::uint32_t h, std::uint64_t bytes, std::int64_t now) noexcept {
  box_holder* me = box_holder_of(s, h);
  bytes = detail::box_room(s.unsettled_total, bytes);
  if (me == nullptr || bytes == 0) return;
  if (me->unsettled_bytes == 0) me->holding_since_ns = now;
  me->unsettled_bytes += bytes;  // no more than the total, which has room for it
  ++me->reservations;
  s.unsettled_total += bytes;
}

// Holder `h`'s reservation of `bytes` was cancelled or expired: its bytes come back now.
inline void box_remove(box_segment& s, std::uint32_t h, std::uint64_t bytes) noexcept {
  box_holder* me = box_holder_of(s, h);
  if (me == nullptr || bytes == 0) return;
  const std::uint64_t b = bytes < me->unsettled_bytes ? bytes : me->unsettled_bytes;
  me->unsettled_bytes -= b;
  if (me->reservations > 0) --me->reservations;
  if (me->unsettled_bytes == 0) me->reservations = 0;  // no bytes left: no reservation either
  if (me->reservations == 0) {  // nothing left: any rounding left over goes with it
    s.unsettled_total -= me->unsettled_bytes < s.unsettled_total ? me->unsettled_bytes : s.unsettled_total;
    me->unsettled_bytes = 0;
    me->holding_since_ns = 0;
  }
  s.unsettled_total -= b < s.unsettled_total ? b : s.unsettled_total;
}

// Holder `h`'s reservation of `bytes` was settled at `now`: counted until a sample that began after it.
inline void box_settle(box_segment& s, std::uint32_t h, std::uint64_t bytes, std::int64_t now) noexcept {
  if (box_holder_of(s, h) == nullptr || bytes == 0) return;
  box_remove(s, h, bytes);
  detail::box_append(s.settled, h, bytes, now);
  s.holders[h].settled_bytes = detail::sat_add(s.holders[h].settled_bytes, bytes);
}

// Holder `h` freed `bytes` at `now` (host_ledger::credit_freed): available at once to every holder, until
// a sample that began after it.
inline void box_credit(box_segment& s, std::uint32_t h, std::uint64_t bytes, std::int64_t now) noexcept {
  if (box_holder_of(s, h) == nullptr || bytes == 0) return;
  detail::box_append(s.credits, h, bytes, now);
  s.holders[h].credited_bytes = detail::sat_add(s.holders[h].credited_bytes, bytes);
}

// What every holder has promised that a sample which began at host_read_ns has not seen: the unsettled
// bytes and the settles since; and the credits it has not seen. Moves the reader's cursors; records the
// sample as the holder's (and the box's, if newer).
struct box_pending {
  std::uint64_t pending = 0;
  std::uint64_t credited = 0;
};
inline box_pending box_pending_for(box_segment& s, std::uint32_t h, box_cursor& settled, box_cursor& credits,
                                   std::int64_t host_read_ns) noexcept {
  box_pending out;
  out.pending = detail::sat_add(s.unsettled_total, detail::box_unseen(s.settled, settled, host_read_ns));
  out.credited = detail::box_unseen(s.credits, credits, host_read_ns);
  if (box_holder* me = box_holder_of(s, h); me != nullptr && host_read_ns > me->last_sample_ns) {
    me->last_sample_ns = host_read_ns;
  }
  if (host_read_ns > s.last_sample_ns) s.last_sample_ns = host_read_ns;
  return out;
}

// --- Dies ---

// The book's entry for the GPU `id`: found, or (create) taken; box_no_die for an empty UUID, one not
// there (create false), or a book whose box_max_dies entries are taken.
inline std::uint32_t box_die_index(box_segment& s, const die_uuid& id, bool create) noexcept {
  if (id.empty()) return box_no_die;
  const std::uint32_t used = s.dies_used < box_max_dies ? s.dies_used : box_max_dies;
  for (std::uint32_t d = 0; d < used; ++d) {
    if (std::memcmp(s.dies[d].uuid, id.bytes.data(), sizeof s.dies[d].uuid) == 0) return d;
  }
  if (!create || used >= box_max_dies) return box_no_die;
  box_die& e = s.dies[used];
  e = box_die{};
  std::memcpy(e.uuid, id.bytes.data(), sizeof e.uuid);
  s.dies_used = used + 1;
  return used;
}

// Holder `h` promised `bytes` more on die `d`.
inline void box_die_add(box_segment& s, std::uint32_t h, std::uint32_t d, std::uint64_t bytes) noexcept {
  if (box_holder_of(s, h) == nullptr || d >= s.dies_used || d >= box_max_dies) return;
  bytes = detail::box_room(s.dies[d].unsettled_total, bytes);
  if (bytes == 0) return;
  s.holder_die_bytes[h][d] += bytes;  // no more than the die's total, which has room for it
  ++s.holder_die_count[h][d];
  s.dies[d].unsettled_total += bytes;
  ++s.dies[d].reservations;
}

// Holder `h`'s reservation of `bytes` on die `d` was cancelled, expired or settled: not unsettled now.
inline void box_die_remove(box_segment& s, std::uint32_t h, std::uint32_t d, std::uint64_t bytes) noexcept {
  if (box_holder_of(s, h) == nullptr || d >= s.dies_used || d >= box_max_dies || bytes == 0) return;
  std::uint64_t& mine = s.holder_die_bytes[h][d];
  std::uint32_t& count = s.holder_die_count[h][d];
  if (count == 0) return;  // it holds none there
  std::uint64_t b = bytes < mine ? bytes : mine;
  std::uint32_t gone = 1;
  if (b == mine) gone = count;  // no bytes left: no reservation either
  if (count == gone) b = mine;  // nothing left: any rounding left over goes with it
  count -= gone;
  mine -= b;
  s.dies[d].reservations -= gone < s.dies[d].reservations ? gone : s.dies[d].reservations;
  s.dies[d].unsettled_total -= b < s.dies[d].unsettled_total ? b : s.dies[d].unsettled_total;
}

// Holder `h`'s reservation of `bytes` on die `d` was settled at `now`: counted until a sample of the die
// that began after it (box_die_pending).
inline void box_die_settle(box_segment& s, std::uint32_t h, std::uint32_t d, std::uint64_t bytes,
                           std::int64_t now) noexcept {
  if (box_holder_of(s, h) == nullptr || d >= s.dies_used || d >= box_max_dies || bytes == 0) return;
  box_die_remove(s, h, d, bytes);
  box_die_ring& r = s.die_settled;
  box_die_entry& e = r.entries[r.seq % box_die_ring_capacity];
  const std::int64_t last = r.seq == 0 ? now : r.entries[(r.seq - 1) % box_die_ring_capacity].ns;
  e.ns = now < last ? last : now;
  e.bytes = bytes;
  e.holder = h;
  e.die = d;
  ++r.seq;
}

// Holder `h` has `bytes` retiring on die `d` now (its figure, replacing the last).
inline void box_die_set_retiring(box_segment& s, std::uint32_t h, std::uint32_t d, std::uint64_t bytes) noexcept {
  if (box_holder_of(s, h) == nullptr || d >= s.dies_used || d >= box_max_dies) return;
  std::uint64_t& mine = s.holder_die_retiring[h][d];
  std::uint64_t& total = s.dies[d].retiring_total;
  total -= mine < total ? mine : total;
  mine = detail::box_room(total, bytes);
  total += mine;
}

// What every holder has promised on die `d` that a sample of the die which began at die_read_ns has not
// seen (the unsettled bytes, and the settles at or after it), and what they have retiring there.
struct box_die_figures {
  std::uint64_t pending = 0;
  std::uint64_t retiring = 0;
};
inline box_die_figures box_die_pending(const box_segment& s, std::uint32_t d, std::int64_t die_read_ns) noexcept {
  box_die_figures out;
  if (d >= s.dies_used || d >= box_max_dies) return out;
  out.pending = s.dies[d].unsettled_total;
  out.retiring = s.dies[d].retiring_total;
  const box_die_ring& r = s.die_settled;
  const std::uint64_t oldest = r.seq > box_die_ring_capacity ? r.seq - box_die_ring_capacity : 0;
  for (std::uint64_t k = r.seq; k > oldest; --k) {  // newest first: stop at the first one seen
    const box_die_entry& e = r.entries[(k - 1) % box_die_ring_capacity];
    if (e.ns < die_read_ns) break;
    if (e.die == d) out.pending = detail::sat_add(out.pending, e.bytes);
  }
  return out;
}

// A holder's answer used a sample of die `d` read at die_read_ns: the die's newest read, if newer (what
// box_die_seen_pending measures from, for people and metrics).
inline void box_die_saw(box_segment& s, std::uint32_t d, std::int64_t die_read_ns) noexcept {
  if (d < s.dies_used && d < box_max_dies && die_read_ns > s.dies[d].last_read_ns) s.dies[d].last_read_ns = die_read_ns;
}

// What box_die_pending tells a holder whose sample of die `d` is the newest any holder used: the figures
// `pnmem ledger` and the metrics show.
inline box_die_figures box_die_seen_pending(const box_segment& s, std::uint32_t d) noexcept {
  return d < s.dies_used && d < box_max_dies ? box_die_pending(s, d, s.dies[d].last_read_ns) : box_die_figures{};
}

// Frees holder `h` (its process is gone): its unsettled bytes stop counting. Its settles stay in the ring
// until a sample has seen them (the memory they were is gone by then, and the sample shows it).
inline void box_free_holder(box_segment& s, std::uint32_t h) noexcept {
  if (h >= box_max_holders || s.holders[h].state != box_holder_state::live) return;
  box_holder& d = s.holders[h];
  s.unsettled_total -= d.unsettled_bytes < s.unsettled_total ? d.unsettled_bytes : s.unsettled_total;
  for (std::uint32_t k = 0; k < box_max_dies; ++k) {  // and on the dies, retiring included
    box_die& die = s.dies[k];
    const std::uint64_t b = s.holder_die_bytes[h][k];
    const std::uint64_t r = s.holder_die_retiring[h][k];
    die.unsettled_total -= b < die.unsettled_total ? b : die.unsettled_total;
    die.retiring_total -= r < die.retiring_total ? r : die.retiring_total;
    die.reservations -= s.holder_die_count[h][k] < die.reservations ? s.holder_die_count[h][k] : die.reservations;
    s.holder_die_bytes[h][k] = 0;
    s.holder_die_count[h][k] = 0;
    s.holder_die_retiring[h][k] = 0;
  }
  const std::uint32_t generation = d.generation + 1;
  d = box_holder{};
  d.generation = generation;
  if (s.holders_live > 0) --s.holders_live;
}

// Takes a free holder slot for a process (pid, comm) joining at `now`; box_no_holder when all are taken.
inline std::uint32_t box_take_holder(box_segment& s, std::int32_t pid, const char* comm, std::int64_t now) noexcept {
  for (std::uint32_t i = 0; i < box_max_holders; ++i) {
    box_holder& h = s.holders[i];
    if (h.state != box_holder_state::free) continue;
    const std::uint32_t generation = h.generation;
    h = box_holder{};
    h.state = box_holder_state::live;
    h.generation = generation;
    h.pid = pid;
    h.joined_ns = now;
    if (comm != nullptr) {
      std::size_t n = 0;
      while (n + 1 < sizeof h.comm && comm[n] != '\0') {
        h.comm[n] = comm[n];
        ++n;
      }
    }
    ++s.holders_live;
    return i;
  }
  return box_no_holder;
}

// After a holder died holding the lock (its operation may be half done): the totals again from the
// holders and the rings, which are always written entry first.
inline void box_recount(box_segment& s) noexcept {
  std::uint64_t unsettled = 0;
  std::uint32_t live = 0;
  for (box_holder& h : s.holders) {
    if (h.state != box_holder_state::live) {
      if (h.state != box_holder_state::free) h.state = box_holder_state::free;
      h.unsettled_bytes = 0;
      h.reservations = 0;
      continue;
    }
    ++live;
    h.unsettled_bytes = detail::box_room(unsettled, h.unsettled_bytes);  // figures past 2^64 in all: garbage
    if (h.unsettled_bytes == 0) h.reservations = 0;
    if (h.unsettled_bytes != 0 && h.reservations == 0) h.reservations = 1;
    unsettled += h.unsettled_bytes;
  }
  s.unsettled_total = unsettled;
  s.holders_live = live;
  if (s.dies_used > box_max_dies) s.dies_used = box_max_dies;
  for (std::uint32_t d = 0; d < box_max_dies; ++d) {
    if (d >= s.dies_used) s.dies[d] = box_die{};  // taken half-way by a holder that died: not taken
    std::uint64_t bytes = 0;
    std::uint64_t retiring = 0;
    std::uint32_t count = 0;
    for (std::uint32_t h = 0; h < box_max_holders; ++h) {
      if (s.holders[h].state != box_holder_state::live || d >= s.dies_used) {
        s.holder_die_bytes[h][d] = 0;
        s.holder_die_count[h][d] = 0;
        s.holder_die_retiring[h][d] = 0;
        continue;
      }
      s.holder_die_bytes[h][d] = detail::box_room(bytes, s.holder_die_bytes[h][d]);
      s.holder_die_retiring[h][d] = detail::box_room(retiring, s.holder_die_retiring[h][d]);
      if (s.holder_die_bytes[h][d] == 0) s.holder_die_count[h][d] = 0;
      if (s.holder_die_bytes[h][d] != 0 && s.holder_die_count[h][d] == 0) s.holder_die_count[h][d] = 1;
      bytes += s.holder_die_bytes[h][d];
      retiring += s.holder_die_retiring[h][d];
      count += s.holder_die_count[h][d];
    }
    s.dies[d].unsettled_total = bytes;
    s.dies[d].retiring_total = retiring;
    s.dies[d].reservations = count;
  }
  for (box_ring* r : {&s.settled, &s.credits}) {
    if (r->seq == 0) continue;
    const box_ring_entry& last = r->entries[(r->seq - 1) % box_ring_capacity];
    r->cum = last.cum_before + last.bytes;
  }
}

// A fresh segment for scope `scope`, owned by uid/gid, made at `now`.
inline void box_init(box_segment& s, const char* scope, std::uint32_t uid, std::uint32_t gid, std::int64_t now) noexcept {
  std::memset(static_cast<void*>(&s), 0, sizeof s);
  std::memcpy(s.magic, box_magic, sizeof box_magic);
  s.version = box_version;
  s.layout = box_layout();
  s.size = sizeof(box_segment);
  s.owner_uid = uid;
  s.owner_gid = gid;
  s.created_ns = now;
  if (scope != nullptr) {
    std::size_t n = 0;
    while (n + 1 < sizeof s.scope && scope[n] != '\0') {
      s.scope[n] = scope[n];
      ++n;
    }
  }
}

}  // namespace pnmem
