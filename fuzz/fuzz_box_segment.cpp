// fuzz_box_segment: the box ledger's shared segment (engine/box_book.hpp) as another process may leave it:
// a good segment, then edited by the input, checked, then used.
//
// Input: a run of edits, each 3 bytes of offset (into the segment, modulo its size), 1 byte of length
// (1 to 16) and that many bytes written there; then what is left drives operations. A segment is first
// made as box_init makes it, with two holders and some promises, so the edits reach the figures behind
// the magic, and a whole input of bytes (the first edit at offset 0) reaches the identity checks too.
//
// Properties:
//   - box_segment_problem answers any bytes (any size, any alignment, a null pointer) with no crash, in
//     one line (no newline) that is empty exactly when the segment is taken;
//   - a segment it takes holds what the check promises: the live holders counted, the unsettled total
//     their exact sum (never one clamped at 2^64-1, which no removal could take apart again), every
//     holder's count and bytes zero together, each ring's total following its newest entry;
//   - the operations a ledger does on a taken segment (add, remove, settle, credit, what a reader has not
//     seen, free a holder, take one, count again) keep it taken, whatever the arguments (a holder out of
//     range, bytes near 2^64, a cursor from another segment), and a reader's unseen bytes never exceed
//     what the rings hold;
//   - box_recount (what a process does after another died holding the lock) never leaves a segment it
//     takes inconsistent;
//   - the dies likewise: taking one by UUID, adding, removing, settling and retiring on it (any die index,
//     any holder) keep the segment taken, each die's totals its live holders' sums, and what a reader
//     is told is pending on a die never below its unsettled total.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "fuzz_support.hpp"
#include "pnmem/engine/box_book.hpp"

using namespace pnmem;
using namespace pnmem_fuzz;

namespace {

// Reads little-endian integers from the input, 0 past its end.
struct reader {
  const std::uint8_t* data;
  std::size_t size;
  std::size_t at = 0;
  bool done() const { return at >= size; }
  std::uint64_t take(std::size_t n) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(at < size ? data[at++] : 0) << (8 * i);
    return v;
  }
};

void check_taken(const box_segment& s) {
  std::uint32_t live = 0;
  std::uint64_t sum = 0;
  for (const box_holder& h : s.holders) {
    FUZZ_CHECK(h.state == box_holder_state::free || h.state == box_holder_state::live);
    if (h.state != box_holder_state::live) {
      FUZZ_CHECK(h.unsettled_bytes == 0 && h.reservations == 0);
      continue;
    }
    ++live;
    FUZZ_CHECK((h.unsettled_bytes == 0) == (h.reservations == 0));
    FUZZ_CHECK(!detail::add_overflows(sum, h.unsettled_bytes, sum));  // the totals are exact sums
  }
  FUZZ_CHECK(live == s.holders_live);
  FUZZ_CHECK(sum == s.unsettled_total);
  FUZZ_CHECK(s.dies_used <= box_max_dies);
  for (std::uint32_t d = 0; d < box_max_dies; ++d) {
    std::uint64_t bytes = 0;
    std::uint64_t retiring = 0;
    for (std::uint32_t h = 0; h < box_max_holders; ++h) {
      if (s.holders[h].state != box_holder_state::live) {
        FUZZ_CHECK(s.holder_die_bytes[h][d] == 0 && s.holder_die_retiring[h][d] == 0 && s.holder_die_count[h][d] == 0);
        continue;
      }
      FUZZ_CHECK(!detail::add_overflows(bytes, s.holder_die_bytes[h][d], bytes));
      FUZZ_CHECK(!detail::add_overflows(retiring, s.holder_die_retiring[h][d], retiring));
    }
    FUZZ_CHECK(bytes == s.dies[d].unsettled_total && retiring == s.dies[d].retiring_total);
  }
  for (const box_ring* r : {&s.settled, &s.credits}) {
    if (r->seq == 0) continue;
    const box_ring_entry& e = r->entries[(r->seq - 1) % box_ring_capacity];
    FUZZ_CHECK(e.cum_before + e.bytes == r->cum);
  }
}

void check_answer(const std::string& why) { FUZZ_CHECK(why.find('\n') == std::string::npos); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Any bytes as a whole segment: no crash, one line.
  check_answer(box_segment_problem(data, size));
  check_answer(box_segment_problem(nullptr, 0));

  auto seg = std::make_unique<box_segment>();
  box_segment& s = *seg;
  box_init(s, "fuzz", 1000, 1000, 1);
  const std::uint32_t a = box_take_holder(s, 10, "a", 2);
  const std::uint32_t b = box_take_holder(s, 11, "b", 3);
  box_add(s, a, 1 << 20, 4);
  box_add(s, b, 3 << 20, 5);
  box_settle(s, b, 1 << 20, 6);
  box_credit(s, a, 1 << 19, 7);
  die_uuid gpu;
  gpu.bytes[0] = 0x42;
  const std::uint32_t d0 = box_die_index(s, gpu, true);
  FUZZ_CHECK(d0 == 0 && box_die_index(s, gpu, false) == 0);
  box_die_add(s, a, d0, 5 << 20);
  box_die_add(s, b, d0, 2 << 20);
  box_die_settle(s, b, d0, 2 << 20, 8);
  box_die_set_retiring(s, a, d0, 1 << 20);
  FUZZ_CHECK(box_segment_problem(&s, sizeof s).empty());

  reader in{data, size};
  // The edits: while the input has a whole edit header and its first byte is not 0xff.
  auto* raw = reinterpret_cast<unsigned char*>(&s);
  while (in.size - in.at >= 4 && in.data[in.at] != 0xff) {
    const std::size_t offset = static_cast<std::size_t>(in.take(3)) % sizeof(box_segment);
    const std::size_t n = 1 + static_cast<std::size_t>(in.take(1) % 16);
    for (std::size_t i = 0; i < n && offset + i < sizeof(box_segment); ++i) {
      raw[offset + i] = static_cast<unsigned char>(in.take(1));
    }
  }
  if (!in.done()) in.take(1);  // the 0xff that ends the edits

  const std::string why = box_segment_problem(&s, sizeof s);
  check_answer(why);
  // A misaligned copy reads the same.
  {
    std::unique_ptr<unsigned char[]> shifted(new unsigned char[sizeof(box_segment) + 1]);
    std::memcpy(shifted.get() + 1, &s, sizeof s);
    FUZZ_CHECK(box_segment_problem(shifted.get() + 1, sizeof s) == why);
  }
  if (!why.empty()) {
    // What a process does after a death under the lock: counted again. Taken then, it holds what it says.
    box_recount(s);
    if (!box_segment_problem(&s, sizeof s).empty()) return 0;
  }
  check_taken(s);

  // Operations, driven by the rest of the input.
  box_cursor settled_cursor{in.take(8)};  // maybe another segment's: it must not matter
  box_cursor credit_cursor{};
  std::int64_t now = 100;
  while (!in.done()) {
    const std::uint8_t op = static_cast<std::uint8_t>(in.take(1));
    const std::uint32_t h = static_cast<std::uint32_t>(in.take(1)) % (box_max_holders + 2);
    const std::uint64_t bytes = (op & 0x80) != 0 ? ~std::uint64_t{0} - in.take(2) : in.take(4);
    now += static_cast<std::int64_t>(in.take(1));
    const std::uint32_t d = static_cast<std::uint32_t>(in.take(1)) % (box_max_dies + 2);
    switch (op % 13) {
      case 0: box_add(s, h, bytes, now); break;
      case 1: box_remove(s, h, bytes); break;
      case 2: box_settle(s, h, bytes, now - static_cast<std::int64_t>(in.take(1))); break;
      case 3: box_credit(s, h, bytes, now); break;
      case 4: {
        const std::uint64_t held = s.settled.seq == 0 ? 0 : s.settled.cum - (s.settled.seq > box_ring_capacity
                                                                                   ? s.settled.entries[(s.settled.seq - box_ring_capacity) % box_ring_capacity].cum_before
                                                                                   : s.settled.entries[0].cum_before);
        const box_pending p = box_pending_for(s, h, settled_cursor, credit_cursor, now - static_cast<std::int64_t>(in.take(1)));
        FUZZ_CHECK(p.pending >= s.unsettled_total || p.pending == ~std::uint64_t{0});
        FUZZ_CHECK(detail::box_unseen(s.settled, settled_cursor, now) <= held);
        break;
      }
      case 5: box_free_holder(s, h); break;
      case 6: (void)box_take_holder(s, static_cast<std::int32_t>(bytes), "x", now); break;
      case 7: box_recount(s); break;
      case 8: {
        die_uuid id;
        for (std::uint8_t& x : id.bytes) x = static_cast<std::uint8_t>(in.take(1) & 0x3);  // few distinct ones
        const std::uint32_t found = box_die_index(s, id, (bytes & 1) != 0);
        FUZZ_CHECK(found == box_no_die || found < s.dies_used);
        FUZZ_CHECK(!id.empty() || found == box_no_die);
        break;
      }
      case 9: box_die_add(s, h, d, bytes); break;
      case 10: box_die_remove(s, h, d, bytes); break;
      case 11: box_die_settle(s, h, d, bytes, now - static_cast<std::int64_t>(in.take(1))); break;
      default: {
        box_die_set_retiring(s, h, d, bytes);
        const box_die_figures f = box_die_pending(s, d, now - static_cast<std::int64_t>(in.take(1)));
        FUZZ_CHECK(d >= s.dies_used || f.pending >= s.dies[d].unsettled_total);
        break;
      }
    }
    const std::string after = box_segment_problem(&s, sizeof s);
    if (!after.empty()) std::fprintf(stderr, "after operation %u: %s\n", static_cast<unsigned>(op % 13), after.c_str());
    FUZZ_CHECK(after.empty());
    check_taken(s);
  }
  return 0;
}
