// admit_request in the seed's decision order; model-load and load-spike gates; sweeps.
#include "pnmem/admission.hpp"

#include <doctest/doctest.h>

#include <climits>

#include "test_support.hpp"

using namespace pnmem;
using pnmem::test::add_die;
using pnmem::test::host_state;

namespace {
constexpr std::uint64_t total = 8 * GiB;
const std::uint64_t reserve = host_reserve_bytes(total);

// A box whose host budget above the reserve is exactly `budget` bytes.
mem_state with_budget(std::uint64_t budget) { return host_state(total, reserve + budget); }

int rank(verdict v) { return v == verdict::admit ? 2 : (v == verdict::cap ? 1 : 0); }
}  // namespace

TEST_CASE("1. the PSI-full stall guard comes first") {
  const mem_state stalled = host_state(64 * GiB, 60 * GiB, 0.0, 15.0);
  for (bool gpu : {false, true}) {
    const admit_result r = admit_request({.n_prompt = 10, .gpu_resident = gpu}, stalled);
    CHECK(r.verdict == verdict::reject);
    CHECK(r.reason == admit_reason::psi_stall);
    CHECK(r.fit_tokens == 0);
    CHECK(r.die == no_die);
  }
  // Just below the threshold the stall guard lets it through (the blip is TIGHT, not a reject).
  CHECK(admit_request({.n_prompt = 10, .gpu_resident = true}, host_state(64 * GiB, 60 * GiB, 0.0, 14.99)).verdict ==
        verdict::admit);
  // Before the reserve check too: a stalled box inside its reserve says psi_stall.
  CHECK(admit_request({.n_prompt = 10}, host_state(total, 0, 0.0, 30.0)).reason == admit_reason::psi_stall);
  policy p;
  p.psi_full_reject_bp = 500;
  CHECK(admit_request({.n_prompt = 10, .gpu_resident = true}, host_state(64 * GiB, 60 * GiB, 0.0, 5.0), p).reason ==
        admit_reason::psi_stall);
}

TEST_CASE("2. GPU-resident fast path: host cost 0, reserve line, window cap") {
  const request_spec rq{.n_prompt = 100000, .kv = kv_format::fp32, .gpu_resident = true};
  SUBCASE("inside the reserve (equality included) rejects") {
    const admit_result r = admit_request(rq, host_state(total, reserve));
    CHECK(r.verdict == verdict::reject);
    CHECK(r.reason == admit_reason::host_reserve);
    CHECK(r.limit_bytes == reserve);
  }
  SUBCASE("one byte above the reserve admits any length: the host pays nothing per token") {
    const admit_result r = admit_request(rq, host_state(total, reserve + 1));
    CHECK(r.verdict == verdict::admit);
    CHECK(r.fit_tokens == 100000);
    CHECK(r.reason == admit_reason::fits);
  }
  SUBCASE("n_prompt > max_window caps to the window") {
    request_spec w = rq;
    w.max_window = 16384;
    const admit_result r = admit_request(w, host_state(total, 4 * GiB));
    CHECK(r.verdict == verdict::cap);
    CHECK(r.fit_tokens == 16384);
    CHECK(r.reason == admit_reason::window);
    w.n_prompt = 16384;
    CHECK(admit_request(w, host_state(total, 4 * GiB)).verdict == verdict::admit);
    w.n_prompt = 16385;
    CHECK(admit_request(w, host_state(total, 4 * GiB)).verdict == verdict::cap);
  }
  SUBCASE("max_window <= 0 means no window") {
    request_spec w = rq;
    w.max_window = 0;
    CHECK(admit_request(w, host_state(total, 4 * GiB)).verdict == verdict::admit);
    w.max_window = -1;
    CHECK(admit_request(w, host_state(total, 4 * GiB)).verdict == verdict::admit);
  }
}

TEST_CASE("3. host path: admit when the whole prompt fits") {
  const std::uint64_t need = host_cost_bytes(1000, kv_format::q4);
  const admit_result exact = admit_request({.n_prompt = 1000}, with_budget(need));
  CHECK(exact.verdict == verdict::admit);
  CHECK(exact.fit_tokens == 1000);
  CHECK(exact.reason == admit_reason::fits);
  CHECK(exact.need_bytes == need);
  CHECK(exact.limit_bytes == need);
  // One byte short: a cap, to the largest window that fits.
  const admit_result short1 = admit_request({.n_prompt = 1000}, with_budget(need - 1));
  CHECK(short1.verdict == verdict::cap);
  CHECK(short1.fit_tokens == 999);
  CHECK(short1.reason == admit_reason::host_budget);
}

TEST_CASE("3. host path: a CAP's fit_tokens is tight to one token") {
  pnmem::test::rng g{7};
  int caps = 0;
  for (int i = 0; i < 3000; ++i) {
    const auto kv = g.below(2) == 0 ? kv_format::q4 : kv_format::fp32;
    const int n = static_cast<int>(g.below(300000)) + 1;
    const std::uint64_t budget = g.below(host_cost_bytes(n, kv) + 1);
    const admit_result r = admit_request({.n_prompt = n, .kv = kv}, with_budget(budget));
    CAPTURE(n);
    CAPTURE(budget);
    if (r.verdict == verdict::cap) {
      ++caps;
      CHECK(r.fit_tokens >= 1);
      CHECK(r.fit_tokens < n);
      CHECK(host_cost_bytes(r.fit_tokens, kv) <= budget);
      CHECK(host_cost_bytes(r.fit_tokens + 1, kv) > budget);
      CHECK(r.reason == admit_reason::host_budget);
    } else if (r.verdict == verdict::reject) {
      CHECK(host_cost_bytes(1, kv) > budget);
      CHECK(r.reason == admit_reason::host_budget);
    } else {
      CHECK(host_cost_bytes(n, kv) <= budget);
    }
  }
  CHECK(caps > 1000);  // the sweep really exercised the binary search
}

TEST_CASE("3. host path: the seed's mini, 8 GiB, fp32 KV on the CPU path") {
  const mem_state s = host_state(total, 4 * GiB);  // budget = 4 GiB - 1.2 GiB
  const admit_result r = admit_request({.n_prompt = 8192, .kv = kv_format::fp32}, s);
  CHECK(r.verdict == verdict::cap);
  CHECK(r.reason == admit_reason::host_budget);
  CHECK(r.fit_tokens == 4962);  // O(N^2) scores make 8k tokens too much for 2.8 GiB
  CHECK(host_cost_bytes(4962, kv_format::fp32) <= 4 * GiB - reserve);
  CHECK(host_cost_bytes(4963, kv_format::fp32) > 4 * GiB - reserve);
}

TEST_CASE("3. host path: reserve, nothing fits, zero-length prompts") {
  CHECK(admit_request({.n_prompt = 1}, host_state(total, reserve)).reason == admit_reason::host_reserve);
  CHECK(admit_request({.n_prompt = 1}, host_state(total, reserve)).verdict == verdict::reject);
  // Fixed buffers alone (peak(0) = 256 MiB) do not fit: reject, not a cap to 0.
  const admit_result none = admit_request({.n_prompt = 1000}, with_budget(256 * MiB - 1));
  CHECK(none.verdict == verdict::reject);
  CHECK(none.reason == admit_reason::host_budget);
  CHECK(none.fit_tokens == 0);
  // Exactly the fixed buffers: a 0-token prefix fits, which is still a reject.
  CHECK(admit_request({.n_prompt = 1000}, with_budget(256 * MiB)).verdict == verdict::reject);
  // An empty prompt that fits is admitted.
  CHECK(admit_request({.n_prompt = 0}, with_budget(256 * MiB)).verdict == verdict::admit);
}

TEST_CASE("3. host path: the die's free VRAM bounds it too, and is named when it binds") {
  const std::uint64_t need = host_cost_bytes(2000, kv_format::q4);
  SUBCASE("die smaller than the host budget binds") {
    const mem_state s = add_die(add_die(with_budget(8 * GiB), 8 * GiB, 16 * GiB), need - 1, 16 * GiB);
    const admit_result r = admit_request({.n_prompt = 2000, .die = 1}, s);
    CHECK(r.verdict == verdict::cap);
    CHECK(r.reason == admit_reason::die_vram);
    CHECK(r.die == 1);
    CHECK(r.limit_bytes == need - 1);
    CHECK(r.fit_tokens == 1999);
  }
  SUBCASE("host smaller than the die binds") {
    const mem_state s = add_die(with_budget(need - 1), 8 * GiB, 16 * GiB);
    const admit_result r = admit_request({.n_prompt = 2000, .die = 0}, s);
    CHECK(r.reason == admit_reason::host_budget);
    CHECK(r.die == no_die);
  }
  SUBCASE("a die too small for anything rejects with its index") {
    const mem_state s = add_die(with_budget(8 * GiB), 1 * MiB, 16 * GiB);
    const admit_result r = admit_request({.n_prompt = 2000, .die = 0}, s);
    CHECK(r.verdict == verdict::reject);
    CHECK(r.reason == admit_reason::die_vram);
    CHECK(r.die == 0);
  }
  SUBCASE("a die with budget 0 is not measured and does not bound") {
    const mem_state s = add_die(with_budget(8 * GiB), 0, 0);
    CHECK(admit_request({.n_prompt = 2000, .die = 0}, s).verdict == verdict::admit);
  }
  SUBCASE("no die named: only the host bounds") {
    const mem_state s = add_die(with_budget(8 * GiB), 1, 16 * GiB);
    CHECK(admit_request({.n_prompt = 2000}, s).verdict == verdict::admit);
  }
}

TEST_CASE("3. host path: the window applies before the memory check") {
  SUBCASE("window fits: CAP for the window") {
    const admit_result r = admit_request({.n_prompt = 20000, .max_window = 1000}, with_budget(8 * GiB));
    CHECK(r.verdict == verdict::cap);
    CHECK(r.reason == admit_reason::window);
    CHECK(r.fit_tokens == 1000);
    CHECK(r.need_bytes == host_cost_bytes(1000, kv_format::q4));
  }
  SUBCASE("window does not fit either: CAP below the window, memory named") {
    const std::uint64_t budget = host_cost_bytes(500, kv_format::q4);
    const admit_result r = admit_request({.n_prompt = 20000, .max_window = 1000}, with_budget(budget));
    CHECK(r.verdict == verdict::cap);
    CHECK(r.reason == admit_reason::host_budget);
    CHECK(r.fit_tokens == 500);
  }
}

TEST_CASE("bad requests are named, not guessed") {
  const mem_state s = add_die(host_state(total, 4 * GiB), 8 * GiB, 16 * GiB);
  CHECK(admit_request({.n_prompt = -1}, s).reason == admit_reason::bad_request);
  CHECK(admit_request({.n_prompt = 10, .die = 1}, s).reason == admit_reason::bad_request);
  CHECK(admit_request({.n_prompt = 10, .die = -7}, s).reason == admit_reason::bad_request);
  CHECK(admit_request({.n_prompt = 10, .die = 1}, s).verdict == verdict::reject);
  CHECK(admit_request({.n_prompt = 10, .die = 1}, s).die == 1);
}

TEST_CASE("a host that was not sampled does not reject (fail open)") {
  const mem_state unknown = host_state(0, 0);
  CHECK(admit_request({.n_prompt = 4096, .kv = kv_format::fp32}, unknown).verdict == verdict::admit);
  CHECK(admit_request({.n_prompt = 4096, .gpu_resident = true}, unknown).verdict == verdict::admit);
  // ...but a named die still bounds it.
  const admit_result r = admit_request({.n_prompt = 4096, .die = 0}, add_die(unknown, 1 * MiB, 16 * GiB));
  CHECK(r.reason == admit_reason::die_vram);
}

TEST_CASE("sweep: more free memory never gives a worse verdict") {
  pnmem::test::rng g{11};
  for (int i = 0; i < 400; ++i) {
    const auto kv = g.below(2) == 0 ? kv_format::q4 : kv_format::fp32;
    const int n = static_cast<int>(g.below(60000));
    const int window = g.below(3) == 0 ? static_cast<int>(g.below(30000)) : 0;
    const bool gpu = g.below(4) == 0;
    const std::uint64_t die_free = g.below(64 * GiB);
    const request_spec rq{.n_prompt = n, .kv = kv, .gpu_resident = gpu, .die = 0, .max_window = window};
    admit_result prev{};
    bool first = true;
    for (std::uint64_t avail = 0; avail <= total; avail += 64 * MiB) {
      const admit_result r = admit_request(rq, add_die(host_state(total, avail), die_free, 80 * GiB));
      if (!first) {
        CAPTURE(avail);
        CHECK(rank(r.verdict) >= rank(prev.verdict));
        CHECK(r.fit_tokens >= prev.fit_tokens);
      }
      prev = r;
      first = false;
    }
    // and more free VRAM on the die
    prev = admit_result{};
    first = true;
    for (std::uint64_t vram = 0; vram <= 64 * GiB; vram += 1 * GiB) {
      const admit_result r = admit_request(rq, add_die(host_state(total, 6 * GiB), vram, 80 * GiB));
      if (!first) {
        CHECK(rank(r.verdict) >= rank(prev.verdict));
        CHECK(r.fit_tokens >= prev.fit_tokens);
      }
      prev = r;
      first = false;
    }
  }
}

TEST_CASE("sweep: a longer prompt never gives a better verdict") {
  pnmem::test::rng g{13};
  for (int i = 0; i < 300; ++i) {
    const auto kv = g.below(2) == 0 ? kv_format::q4 : kv_format::fp32;
    const mem_state s = add_die(host_state(total, g.below(total)), g.below(32 * GiB), 80 * GiB);
    const request_spec base{.kv = kv, .gpu_resident = g.below(4) == 0, .die = 0,
                            .max_window = g.below(3) == 0 ? static_cast<int>(g.below(30000)) : 0};
    admit_result prev{};
    for (int n = 0; n <= 40000; n += 250) {
      request_spec rq = base;
      rq.n_prompt = n;
      const admit_result r = admit_request(rq, s);
      if (n > 0) {
        CAPTURE(n);
        CHECK(rank(r.verdict) <= rank(prev.verdict));
        // a CAP for memory lands on the same largest window whatever was asked
        if (r.verdict == verdict::cap && prev.verdict == verdict::cap && r.reason == prev.reason) {
          CHECK(r.fit_tokens == prev.fit_tokens);
        }
      }
      prev = r;
    }
  }
}

TEST_CASE("admit_model_load: weights + KV@max ctx + 1.5 GiB within die free - die reserve") {
  const std::uint64_t w = 10 * GiB;
  const std::uint64_t kv = 2 * GiB;
  const std::uint64_t need = w + kv + 3 * GiB / 2;
  const std::uint64_t free_exact = need + 1 * GiB;  // die reserve 1 GiB
  const mem_state s = add_die(add_die(host_state(total, 4 * GiB), free_exact - 1, 80 * GiB), free_exact, 80 * GiB);
  SUBCASE("boundary on a named die") {
    const admit_result fits = admit_model_load({w, kv}, s, 1);
    CHECK(fits.verdict == verdict::admit);
    CHECK(fits.die == 1);
    CHECK(fits.need_bytes == need);
    CHECK(fits.limit_bytes == need);
    const admit_result tight = admit_model_load({w, kv}, s, 0);
    CHECK(tight.verdict == verdict::reject);
    CHECK(tight.reason == admit_reason::die_vram);
    CHECK(tight.die == 0);
  }
  SUBCASE("no die named picks the roomiest") {
    CHECK(roomiest_die(s) == 1);
    CHECK(admit_model_load({w, kv}, s).die == 1);
    CHECK(admit_model_load({w, kv}, s).verdict == verdict::admit);
  }
  SUBCASE("die reserve is policy") {
    policy p;
    p.die_reserve_bytes = 0;
    CHECK(admit_model_load({w, kv}, s, 0, p).verdict == verdict::admit);
  }
  SUBCASE("no dies, bad die, overflowing sizes") {
    CHECK(admit_model_load({w, kv}, host_state(total, 4 * GiB)).reason == admit_reason::bad_request);
    CHECK(admit_model_load({w, kv}, s, 5).reason == admit_reason::bad_request);
    const admit_result huge = admit_model_load({UINT64_MAX, UINT64_MAX}, s, 1);
    CHECK(huge.verdict == verdict::reject);
    CHECK(huge.need_bytes == UINT64_MAX);
  }
  SUBCASE("free below the die reserve is no room at all") {
    const mem_state small = add_die(host_state(total, 4 * GiB), 512 * MiB, 80 * GiB);
    const admit_result r = admit_model_load({0, 0}, small, 0);
    CHECK(r.verdict == verdict::reject);
    CHECK(r.limit_bytes == 0);
  }
}

TEST_CASE("admit_model_load_die: slice + 1.5 GiB scratch within the die's free VRAM") {
  const std::uint64_t need = 6 * GiB + 1 * GiB + 3 * GiB / 2;
  const mem_state s = add_die(add_die(host_state(total, 4 * GiB), need, 80 * GiB), need - 1, 80 * GiB);
  CHECK(admit_model_load_die(6 * GiB, 1 * GiB, s, 0).verdict == verdict::admit);
  const admit_result r = admit_model_load_die(6 * GiB, 1 * GiB, s, 1);
  CHECK(r.verdict == verdict::reject);
  CHECK(r.reason == admit_reason::die_vram);
  CHECK(r.die == 1);
  CHECK(r.need_bytes == need);
  CHECK(admit_model_load_die(6 * GiB, 1 * GiB, s, 2).reason == admit_reason::bad_request);
  CHECK(default_policy.die_scratch_bytes == 1610612736);
}

TEST_CASE("admit_load_spike: 2.4 GiB must fit above the host reserve") {
  CHECK(default_policy.load_spike_bytes == 2576980377);  // 2.4 GiB, floored
  const std::uint64_t spike = default_policy.load_spike_bytes;
  CHECK(admit_load_spike(with_budget(spike)).verdict == verdict::admit);
  const admit_result r = admit_load_spike(with_budget(spike - 1));
  CHECK(r.verdict == verdict::reject);
  CHECK(r.reason == admit_reason::host_budget);
  CHECK(r.need_bytes == spike);
  CHECK(r.limit_bytes == spike - 1);
  CHECK(admit_load_spike(host_state(total, reserve)).reason == admit_reason::host_reserve);
  policy p;
  p.load_spike_bytes = 1 * GiB;
  CHECK(admit_load_spike(with_budget(1 * GiB), p).verdict == verdict::admit);
  CHECK(admit_load_spike(host_state(0, 0)).verdict == verdict::admit);  // host unknown: fail open
}

TEST_CASE("tightest_die is the seed's default admission die (worst free VRAM)") {
  const mem_state s = add_die(add_die(add_die(host_state(total, 4 * GiB), 8 * GiB, 16 * GiB), 0, 0), 2 * GiB, 16 * GiB);
  CHECK(tightest_die(s) == 2);  // die 1 has budget 0: not measured, skipped
  CHECK(roomiest_die(s) == 0);
  CHECK(tightest_die(host_state(total, 4 * GiB)) == no_die);
}

TEST_CASE("names of verdicts and reasons") {
  CHECK(to_string(verdict::admit) == "admit");
  CHECK(to_string(verdict::cap) == "cap");
  CHECK(to_string(verdict::reject) == "reject");
  CHECK(to_string(admit_reason::fits) == "fits");
  CHECK(to_string(admit_reason::window) == "window");
  CHECK(to_string(admit_reason::psi_stall) == "psi_stall");
  CHECK(to_string(admit_reason::host_reserve) == "host_reserve");
  CHECK(to_string(admit_reason::host_budget) == "host_budget");
  CHECK(to_string(admit_reason::die_vram) == "die_vram");
  CHECK(to_string(admit_reason::bad_request) == "bad_request");
}

TEST_CASE("the stall guard also sees a fresh stall rate before avg10 does") {
  mem_state s = host_state(64 * GiB, 60 * GiB);
  s.host_psi_full_rate = 15.0;
  CHECK(admit_request({.n_prompt = 10, .gpu_resident = true}, s).reason == admit_reason::psi_stall);
  s.host_psi_full_rate = 14.99;
  CHECK(admit_request({.n_prompt = 10, .gpu_resident = true}, s).verdict == verdict::admit);
}

TEST_CASE("the segment solve finds the same largest window as a plain binary search") {
  auto reference = [](int n_max, kv_format kv, std::uint64_t limit) {
    int lo = 0;
    int hi = n_max;
    while (hi - lo > 1) {
      const int mid = lo + (hi - lo) / 2;
      (host_cost_bytes(mid, kv) <= limit ? lo : hi) = mid;
    }
    return lo;
  };
  pnmem::test::rng g{99};
  for (int i = 0; i < 20000; ++i) {
    const auto kv = g.below(2) == 0 ? kv_format::q4 : kv_format::fp32;
    const int n_max = 2 + static_cast<int>(g.below(g.below(4) == 0 ? 2000000 : 300000));
    const std::uint64_t lo_cost = host_cost_bytes(0, kv);
    const std::uint64_t hi_cost = host_cost_bytes(n_max, kv);
    if (hi_cost <= lo_cost + 1) continue;
    const std::uint64_t limit = lo_cost + g.below(hi_cost - lo_cost);  // cost(0) fits, cost(n_max) does not
    CAPTURE(n_max);
    CAPTURE(limit);
    CHECK(pnmem::detail::largest_fitting_prompt(n_max, kv, limit) == reference(n_max, kv, limit));
  }
  // Exactly at anchors and one byte either side of their costs.
  for (const auto& a : activation_anchors) {
    for (const auto kv : {kv_format::q4, kv_format::fp32}) {
      const int t = static_cast<int>(a.tokens);
      if (t == 0) continue;
      const std::uint64_t c = host_cost_bytes(t, kv);
      for (const std::uint64_t limit : {c - 1, c, c + 1}) {
        CHECK(pnmem::detail::largest_fitting_prompt(2 * t + 5, kv, limit) == reference(2 * t + 5, kv, limit));
      }
    }
  }
}
