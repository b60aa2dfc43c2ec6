// The live part of a snapshot (pnmem/live_state.hpp): everything a decision reads.
//
// The seqlock side (read_ranges, read_live under a writer, torn heads) is in
// test_seqlock.cpp and test_seqlock_relacy.cpp. Here: the watcher's read_live,
// that the engine's one-call admission (engine/admit.hpp) and the host ledger
// read through it, and that every decision on a live part is the decision on
// the whole snapshot, whatever the dead die slots and the provenance hold.
#include "pnmem/live_state.hpp"

#include <doctest/doctest.h>

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>

#include "pnmem/admission.hpp"
#include "pnmem/engine/admit.hpp"
#include "pnmem/engine/host_ledger.hpp"
#include "pnmem/ladder.hpp"
#include "pnmem/level.hpp"
#include "pnmem/units.hpp"
#include "pnmem/watcher.hpp"
#include "splitmix64.hpp"
#include "test_support.hpp"
#include "watcher_fakes.hpp"

using namespace pnmem;

namespace {

bool same_bytes(const mem_state& a, const mem_state& b) { return std::memcmp(&a, &b, sizeof(mem_state)) == 0; }

// A watcher-like source whose two reads disagree, counting which one was called:
// read() says CRITICAL (a box at its reserve), read_live() says OK.
struct two_faced {
  mem_state full = with_derived_level(test::host_state(64 * GiB, 1 * GiB));
  mem_state live = with_derived_level(test::host_state(64 * GiB, 60 * GiB));
  mutable int full_reads = 0;
  mutable int live_reads = 0;
  bool running() const { return true; }
  mem_state read() const {
    ++full_reads;
    return full;
  }
  mem_state read_live() const {
    ++live_reads;
    return live;
  }
};

// read() only (the C ABI's and older fakes' shape).
struct read_only {
  mem_state state = with_derived_level(test::host_state(64 * GiB, 60 * GiB));
  mutable int reads = 0;
  bool running() const { return true; }
  mem_state read() const {
    ++reads;
    return state;
  }
};

// The watcher's shape for the fast path: read_live(mem_state&) refreshes in place.
// Counts which read was used: with_live_snapshot falls back to read() (this source
// has no by-value read_live) only for a nested call.
struct in_place {
  const seqlock<mem_state>* lock;
  mutable int in_place_reads = 0;
  mutable int full_reads = 0;
  bool running() const { return true; }
  mem_state read() const {
    ++full_reads;
    return lock->read();
  }
  void read_live(mem_state& live) const {
    ++in_place_reads;
    pnmem::read_live(*lock, live);
  }
};

mem_state dies_state(std::uint64_t seq, int n_dies) {
  mem_state s = test::host_state(64 * GiB, 40 * GiB);
  for (int d = 0; d < n_dies; ++d) s = test::add_die(s, 30 * GiB, 80 * GiB);
  s.seq = seq;
  s.provenance.mark_read(host_source::meminfo);
  return with_derived_level(s);
}

// A snapshot from anywhere on the map, with garbage in every dead die slot and
// a provenance: 0..8 dies (sometimes a corrupt count), each die measured or
// skipped, PSI stalls in any of the signals.
mem_state random_state(test::splitmix64& r) {
  constexpr std::uint64_t totals_gib[] = {1, 8, 16, 64, 256};
  mem_state s;
  s.host_total_bytes = r.below(16) == 0 ? 0 : totals_gib[r.below(5)] * GiB;
  s.host_avail_bytes = s.host_total_bytes / 1000 * r.below(1001);
  s.host_psi_some_avg10 = r.below(4) == 0 ? r.pct(3000) : 0.0;
  s.host_psi_full_avg10 = r.below(8) == 0 ? r.pct(2500) : 0.0;
  s.host_psi_some_rate = r.below(4) == 0 ? r.pct(3000) : 0.0;
  s.host_psi_full_rate = r.below(8) == 0 ? r.pct(2500) : 0.0;
  s.cgroup_current_bytes = r.below(4 * GiB);
  const std::uint64_t corrupt = r.below(32);
  s.n_dies = corrupt == 0 ? -3 : corrupt == 1 ? max_dies + 5 : r.between_int(0, 8);
  for (std::size_t d = 0; d < static_cast<std::size_t>(max_dies); ++d) {
    const std::uint64_t budget = r.below(8) == 0 ? 0 : r.between(8, 140) * GiB;
    s.per_die_budget_bytes[d] = budget;
    s.per_die_free_bytes[d] = budget / 1000 * r.below(1001);
    s.per_die_used_bytes[d] = budget - s.per_die_free_bytes[d];
    s.per_die_retiring_bytes[d] = r.below(4) == 0 ? r.below(2 * GiB) : 0;
  }
  s.seq = r.next();
  s.sample_time_ns = static_cast<std::int64_t>(r.below(1'000'000'000));
  s.host_read_ns = s.sample_time_ns - 1000;
  s.provenance.sources_read = static_cast<std::uint32_t>(r.below(256));
  s.provenance.sources_failed = static_cast<std::uint32_t>(r.below(256));
  s.provenance.meminfo_total_bytes = r.next();
  s.provenance.limit_cgroup.fill('c');
  s.provenance.limit_cgroup.back() = '\0';
  s.level = derive_level(s);
  s.raw_level = s.level;
  return s;
}

void check_same_answer(const admit_answer& a, const admit_answer& b) {
  CHECK(a.request.n_prompt == b.request.n_prompt);
  CHECK(a.request.kv == b.request.kv);
  CHECK(a.request.gpu_resident == b.request.gpu_resident);
  CHECK(a.request.die == b.request.die);
  CHECK(a.request.max_window == b.request.max_window);
  CHECK(a.request.prefill_window == b.request.prefill_window);
  CHECK(a.status == b.status);
  CHECK(a.fit_tokens == b.fit_tokens);
  CHECK(a.reason == b.reason);
  CHECK(a.level == b.level);
  CHECK(a.die == b.die);
  CHECK(a.window == b.window);
  CHECK(a.window_clamped == b.window_clamped);
  CHECK(a.detail == b.detail);
}

}  // namespace

TEST_CASE("the watcher's read_live() is read()'s live part: same numbers, no provenance") {
  auto host = test::roomy_host();
  watcher<fake_sampler, fake_clock> w{fake_sampler{host}};
  w.poll_now();
  REQUIRE(w.set_die(0, 30 * GiB, 70 * GiB, 40 * GiB) == set_die_status::ok);
  REQUIRE(w.set_die(1, 10 * GiB, 70 * GiB, 60 * GiB, 1 * GiB) == set_die_status::ok);

  const mem_state full = w.read();
  const mem_state live = w.read_live();
  CHECK(same_bytes(live, live_part(full)));
  CHECK(live.n_dies == 2);
  CHECK(live.seq == full.seq);
  CHECK(live.level == full.level);
  CHECK(live.host_total_bytes == full.host_total_bytes);
  CHECK(live.host_avail_bytes == full.host_avail_bytes);
  CHECK(live.host_read_ns == full.host_read_ns);
  CHECK(live.per_die_free_bytes[1] == 10 * GiB);
  CHECK(live.per_die_retiring_bytes[1] == 1 * GiB);
  CHECK(full.provenance.read(host_source::meminfo));
  CHECK_FALSE(live.provenance.read(host_source::meminfo));  // not in the live part
}

TEST_CASE("admit() reads the live snapshot when the watcher offers it, read() otherwise") {
  const model_desc gpu{.kv = kv_format::q4, .gpu_resident = true, .max_window = 16384};

  const two_faced w;
  const admit_answer a = admit(w, gpu, 4096);
  CHECK(w.live_reads == 1);
  CHECK(w.full_reads == 0);
  CHECK(a.status == admit_status::admitted);  // read()'s CRITICAL box would have rejected it
  CHECK(a.level == mem_level::ok);
  CHECK(admit_snapshot(w.full, gpu, 4096, {}).status == admit_status::denied);

  const read_only r;
  CHECK(admit(r, gpu, 4096).status == admit_status::admitted);
  CHECK(r.reads == 1);
  CHECK(read_for_decision(r).seq == r.state.seq);
}

TEST_CASE("the host ledger decides on the live snapshot too") {
  const model_desc host_path{.kv = kv_format::q4, .max_window = 0};
  host_ledger ledger;
  const two_faced w;
  const host_ledger::admission a = ledger.admit(w, host_path, 1024);
  CHECK(a.answer.status == admit_status::admitted);
  const host_ledger::admission b = ledger.reserve_bytes(w, 1 * MiB);
  CHECK(b.answer.status == admit_status::admitted);
  CHECK(ledger.pending_bytes(w) > 0);
  CHECK(w.live_reads == 3);
  CHECK(w.full_reads == 0);
}

TEST_CASE("every decision on the live part is the decision on the whole snapshot") {
  // What makes the live read correct for admission: no decision reads a die
  // past n_dies or the provenance. 4000 random snapshots with garbage there, and
  // requests on the GPU and host paths, for the tightest die, a named one, and
  // dies out of range.
  test::splitmix64 r{0x6c6976652d6e6f77ULL};  // "live-now"
  for (int i = 0; i < 4000; ++i) {
    const mem_state s = random_state(r);
    const mem_state live = live_part(s);
    CAPTURE(i);
    CAPTURE(s.n_dies);
    REQUIRE(live.provenance.sources_read == 0);

    model_desc m;
    m.kv = r.below(2) == 0 ? kv_format::q4 : kv_format::fp32;
    m.gpu_resident = r.below(2) == 0;
    m.max_window = r.below(2) == 0 ? 0 : r.between_int(512, 32768);
    m.max_slots = r.between_int(1, 16);
    m.die = r.below(3) == 0 ? no_die : r.between_int(-1, max_dies + 1);
    const int n_tokens = r.between_int(0, 65536);

    const admit_answer a = admit_snapshot(live, m, n_tokens, {});
    check_same_answer(a, admit_snapshot(s, m, n_tokens, {}));
    // The answer is admit_request's on the request it says it judged, and that request is the one
    // the engine asked with rung 3's window: every field, assembled by hand from the parts.
    const ladder_plan plan = ladder_plan_for(s.level, ladder_config{m.max_slots, m.max_window, m.kv == m.cost.compact_kv});
    const bool clamped = plan.prefill_window > 0 && plan.prefill_window < m.max_window;
    CHECK(a.window_clamped == clamped);
    CHECK(a.window == (clamped ? plan.prefill_window : m.max_window));
    CHECK(a.die == (m.die != no_die ? m.die : tightest_die(s)));
    CHECK(a.level == s.level);
    CHECK(a.request.n_prompt == n_tokens);
    CHECK(a.request.kv == m.kv);
    CHECK(a.request.gpu_resident == m.gpu_resident);
    CHECK(a.request.die == a.die);
    CHECK(a.request.max_window == m.max_window);
    CHECK(a.request.prefill_window == (clamped ? plan.prefill_window : 0));
    CHECK(a.detail == admit_request(m.cost, a.request, s));
    CHECK(a.fit_tokens == a.detail.fit_tokens);
    // Admitted with the host not read (host_total_bytes 0, nothing bounding it): fail open, not_sampled.
    const bool unsampled = s.host_total_bytes == 0 && a.detail.verdict == verdict::admit &&
                           a.detail.reason == admit_reason::fits;
    CHECK(a.reason == (unsampled ? admit_reason::not_sampled : a.detail.reason));
    CHECK(a.status == (unsampled                          ? admit_status::fail_open
                       : a.detail.verdict == verdict::admit ? admit_status::admitted
                       : a.detail.verdict == verdict::cap   ? admit_status::capped
                                                            : admit_status::denied));
    CHECK(derive_level(live) == derive_level(s));
    CHECK(tightest_die(live) == tightest_die(s));
    CHECK(roomiest_die(live) == roomiest_die(s));
    const std::uint64_t bytes = r.below(64 * GiB);
    CHECK(admit_host_bytes(bytes, live) == admit_host_bytes(bytes, s));
    const model_load_spec load{r.below(80 * GiB), r.below(16 * GiB)};
    const int die = r.between_int(-1, 9);
    CHECK(admit_model_load(load, live, die) == admit_model_load(load, s, die));
    CHECK(admit_load_spike(live) == admit_load_spike(s));
  }
}

TEST_CASE("with_live_snapshot refreshes one live snapshot per thread in place") {
  seqlock<mem_state> lock(dies_state(1, 4));
  const in_place src{&lock};
  const mem_state* first = nullptr;
  const std::uint64_t seq1 = with_live_snapshot(src, [&](const mem_state& s) {
    first = &s;
    CHECK(same_bytes(s, live_part(lock.read())));
    return s.seq;
  });
  CHECK(seq1 == 1);

  lock.store(dies_state(2, 1));  // fewer dies: the kept snapshot's dies 1..3 must go
  with_live_snapshot(src, [&](const mem_state& s) {
    CHECK(&s == first);  // the same per-thread snapshot
    CHECK(s.seq == 2);
    CHECK(s.n_dies == 1);
    CHECK(s.per_die_budget_bytes[1] == 0);
    CHECK(s.per_die_free_bytes[3] == 0);
    CHECK(same_bytes(s, live_part(lock.read())));
    return 0;
  });
  CHECK(src.in_place_reads == 2);
  CHECK(src.full_reads == 0);
}

TEST_CASE("a nested with_live_snapshot gets a snapshot of its own; a throwing f releases the slot") {
  seqlock<mem_state> lock(dies_state(1, 2));
  const in_place src{&lock};
  with_live_snapshot(src, [&](const mem_state& outer) {
    lock.store(dies_state(2, 3));
    const std::uint64_t inner_seq = with_live_snapshot(src, [&](const mem_state& inner) {
      CHECK(&inner != &outer);
      return inner.seq;
    });
    CHECK(inner_seq == 2);
    CHECK(outer.seq == 1);  // untouched by the nested call
    CHECK(outer.n_dies == 2);
    return 0;
  });
  CHECK(src.in_place_reads == 1);
  CHECK(src.full_reads == 1);  // the nested call read on its own

  CHECK_THROWS(with_live_snapshot(src, [](const mem_state&) -> int { throw 1; }));
  CHECK(with_live_snapshot(src, [](const mem_state& s) { return s.seq; }) == 2);
  CHECK(src.in_place_reads == 3);  // the slot was released by the throw
  CHECK(src.full_reads == 1);
}

TEST_CASE("admit() on a watcher decides on the live snapshot, as it would on the whole one") {
  auto host = test::roomy_host();
  watcher<fake_sampler, fake_clock> w{fake_sampler{host}};
  REQUIRE(w.start());
  REQUIRE(w.set_die(0, 2 * GiB, 70 * GiB, 60 * GiB) == set_die_status::ok);  // a die nearly full
  REQUIRE(w.set_die(1, 30 * GiB, 70 * GiB, 40 * GiB) == set_die_status::ok);
  const model_desc host_path{.kv = kv_format::fp32, .max_window = 0};       // the tightest die: 0
  const model_desc gpu{.kv = kv_format::q4, .gpu_resident = true, .max_window = 8192};
  for (const int n : {1, 512, 8192, 65536}) {
    CAPTURE(n);
    check_same_answer(admit(w, host_path, n), admit_snapshot(w.read(), host_path, n, {}));
    check_same_answer(admit(w, gpu, n), admit_snapshot(w.read(), gpu, n, {}));
  }
  CHECK(admit(w, host_path, 65536).die == 0);
  w.stop();
}

TEST_CASE("watcher::refresh_live copies only when the watcher published since, and never from another watcher") {
  auto host = test::roomy_host();
  watcher<fake_sampler, fake_clock> a{fake_sampler{host}};
  watcher<fake_sampler, fake_clock> b{fake_sampler{host}};
  REQUIRE(a.start());
  REQUIRE(b.start());
  REQUIRE(a.set_die(0, 10 * GiB, 70 * GiB, 0) == set_die_status::ok);
  REQUIRE(b.set_die(0, 50 * GiB, 70 * GiB, 0) == set_die_status::ok);
  REQUIRE(a.read().seq == b.read().seq);  // the same count of publications: only the instance tells them apart

  // Zero bytes, not mem_state{}: the last check compares bytes, and value-initialization need not zero
  // padding (clang leaves it).
  mem_state live = std::bit_cast<mem_state>(std::array<unsigned char, sizeof(mem_state)>{});
  live_version v{};
  CHECK(a.refresh_live(live, v));
  CHECK(live.per_die_free_bytes[0] == 10 * GiB);
  CHECK_FALSE(a.refresh_live(live, v));  // nothing published since
  CHECK(b.refresh_live(live, v));        // another watcher: copied
  CHECK(live.per_die_free_bytes[0] == 50 * GiB);
  CHECK(a.refresh_live(live, v));
  CHECK(live.per_die_free_bytes[0] == 10 * GiB);
  REQUIRE(a.set_die(0, 20 * GiB, 70 * GiB, 0) == set_die_status::ok);  // a publication
  CHECK(a.refresh_live(live, v));
  CHECK(live.per_die_free_bytes[0] == 20 * GiB);
  CHECK(same_bytes(live, a.read_live()));
  a.stop();
  b.stop();
}

TEST_CASE("a watcher built where another was destroyed is not taken for it: admit() decides on the new one") {
  using w_type = watcher<fake_sampler, fake_clock>;
  alignas(w_type) unsigned char storage[sizeof(w_type)];
  const model_desc host_path{.kv = kv_format::fp32, .max_window = 0};

  auto roomy = test::roomy_host();
  auto* first = new (storage) w_type{fake_sampler{roomy}};
  REQUIRE(first->start());
  REQUIRE(first->set_die(0, 60 * GiB, 70 * GiB, 0) == set_die_status::ok);
  const admit_answer before = admit(*first, host_path, 8192);
  CHECK(before.status == admit_status::admitted);
  const std::uint64_t seq = first->read().seq;
  first->~w_type();

  auto tight = std::make_shared<fake_host>();
  tight->next.total_bytes = 64 * GiB;
  tight->next.avail_bytes = 2 * GiB;  // inside the reserve: every host-path request is refused
  auto* second = new (storage) w_type{fake_sampler{tight}};
  REQUIRE(static_cast<void*>(second) == static_cast<void*>(first));
  REQUIRE(second->start());
  REQUIRE(second->set_die(0, 60 * GiB, 70 * GiB, 0) == set_die_status::ok);
  REQUIRE(second->read().seq == seq);  // same address, same count of publications
  const admit_answer after = admit(*second, host_path, 8192);
  check_same_answer(after, admit_snapshot(second->read(), host_path, 8192, {}));
  CHECK(after.status == admit_status::denied);
  CHECK(after.reason == admit_reason::host_reserve);
  second->~w_type();
}

TEST_CASE("admit() on an unchanged watcher copies nothing: the kept snapshot is what it decides on") {
  auto host = test::roomy_host();
  watcher<fake_sampler, fake_clock> w{fake_sampler{host}};
  REQUIRE(w.start());
  const model_desc gpu{.kv = kv_format::q4, .gpu_resident = true, .max_window = 8192};
  CHECK(admit(w, gpu, 512).status == admit_status::admitted);
  // This thread's kept snapshot, made to say "inside the reserve" behind the watcher's back: a
  // copy would undo it. Only a test may do this; it shows admit() read no words.
  with_live_snapshot(w, [](const mem_state& s) {
    const_cast<mem_state&>(s).host_avail_bytes = 1;
    return 0;
  });
  CHECK(admit(w, gpu, 512).reason == admit_reason::host_reserve);
  REQUIRE(w.set_die(0, 30 * GiB, 70 * GiB, 0) == set_die_status::ok);  // a publication: copied again
  CHECK(admit(w, gpu, 512).status == admit_status::admitted);
  w.stop();
}
