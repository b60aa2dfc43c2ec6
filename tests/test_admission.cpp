// admit_request in the seed's decision order; model-load and load-spike gates; sweeps.
#include "pnmem/admission.hpp"

#include <doctest/doctest.h>

#include <climits>
#include <vector>

#include "test_support.hpp"

using namespace pnmem;
using pnmem::test::add_die;
using pnmem::test::host_state;

namespace {
constexpr std::uint64_t total = 8 * GiB;
const std::uint64_t reserve = box_reserve_bytes(total);

// A box whose host budget above the reserve is exactly `budget` bytes.
mem_state with_budget(std::uint64_t budget) { return host_state(total, reserve + budget); }

int rank(verdict v) { return v == verdict::admit ? 2 : (v == verdict::cap ? 1 : 0); }

// Every field of a result, each on its own line of the report, and the caller's line.
void check_result(const admit_result& got, const admit_result& want, int line) {
  INFO("expected result written at line ", line);
  CHECK(to_string(got.verdict) == to_string(want.verdict));
  CHECK(got.fit_tokens == want.fit_tokens);
  CHECK(to_string(got.reason) == to_string(want.reason));
  CHECK(got.die == want.die);
  CHECK(got.need_bytes == want.need_bytes);
  CHECK(got.limit_bytes == want.limit_bytes);
}
#define CHECK_RESULT(got, ...) check_result((got), admit_result{__VA_ARGS__}, __LINE__)

constexpr std::uint64_t u64_max = UINT64_MAX;

// The reference for the CAP solve: a plain binary search over the exact cost,
// knowing nothing of anchors or segments. cost(lo) fits, cost(hi) does not.
int reference_fit(int n_max, kv_format kv, std::uint64_t limit) {
  int lo = 0;
  int hi = n_max;
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    (host_cost_bytes(mid, kv) <= limit ? lo : hi) = mid;
  }
  return lo;
}

std::uint64_t cost(int n, kv_format kv = kv_format::q4) { return host_cost_bytes(n, kv); }
}  // namespace

TEST_CASE("a request that names no KV format is priced in the model's own (its normal_kv), one that names one in that") {
  const mem_state box = with_budget(8 * GiB);
  // The seed's model keeps fp32 KV: 1000 tokens x 40960 B, plus its activation peak at 1000 tokens (between
  // the 0 and 1024 anchors, 256 MiB + 1000 x 128 MiB / 1024).
  constexpr std::uint64_t seed_fp32_1000 = 1000ull * 40960 + 256 * MiB + 1000ull * 128 * MiB / 1024;
  CHECK(admit_request({.n_prompt = 1000}, box).need_bytes == seed_fp32_1000);
  CHECK(admit_request({.n_prompt = 1000, .kv = kv_format::fp32}, box).need_bytes == seed_fp32_1000);
  CHECK(admit_request({.n_prompt = 1000, .kv = kv_format::q4}, box).need_bytes ==
        1000ull * 5898 + 256 * MiB + 1000ull * 128 * MiB / 1024);
  // A bf16 model (Llama-3-8B's KV: 32 layers x 8 KV heads x 128 dims, K and V, 2 bytes each), no activation:
  // its requests are bf16 unless they say otherwise, never the seed's Q4.
  model_cost llama;
  llama.full_kv_bytes_per_token[static_cast<std::size_t>(kv_format::bf16)] = 131072;
  llama.full_kv_bytes_per_token[static_cast<std::size_t>(kv_format::q4_0)] = 36864;
  llama.normal_kv = kv_format::bf16;
  llama.compact_kv = kv_format::q4_0;
  CHECK(request_kv_format(std::nullopt, llama) == kv_format::bf16);
  CHECK(request_kv_format(kv_format::q4_0, llama) == kv_format::q4_0);
  CHECK(admit_request(llama, {.n_prompt = 8192}, box).need_bytes == 8192ull * 131072);
  CHECK(admit_request(llama, {.n_prompt = 8192, .kv = kv_format::q4_0}, box).need_bytes == 8192ull * 36864);
}

TEST_CASE("1. the PSI-full stall guard comes first") {
  const mem_state stalled = host_state(64 * GiB, 60 * GiB, 0.0, 15.0);
  for (bool gpu : {false, true}) {
    CAPTURE(gpu);
    CHECK_RESULT(admit_request({.n_prompt = 10, .kv = kv_format::q4, .gpu_resident = gpu}, stalled), verdict::reject, 0,
                 admit_reason::psi_stall, no_die, 0, 0);
    // A named die did not decide it: the whole box did.
    CHECK_RESULT(admit_request({.n_prompt = 10, .kv = kv_format::q4, .gpu_resident = gpu, .die = 0}, add_die(stalled, 1, 16 * GiB)),
                 verdict::reject, 0, admit_reason::psi_stall, no_die, 0, 0);
  }
  // Just below the threshold the stall guard lets it through (the blip is TIGHT, not a reject).
  CHECK(admit_request({.n_prompt = 10, .kv = kv_format::q4, .gpu_resident = true}, host_state(64 * GiB, 60 * GiB, 0.0, 14.99)).verdict ==
        verdict::admit);
  CHECK(admit_request({.n_prompt = 10, .kv = kv_format::q4}, host_state(64 * GiB, 60 * GiB, 0.0, 14.99)).verdict == verdict::admit);
  // Before the reserve check too: a stalled box inside its reserve says psi_stall.
  CHECK_RESULT(admit_request({.n_prompt = 10, .kv = kv_format::q4}, host_state(total, 0, 0.0, 30.0)), verdict::reject, 0,
               admit_reason::psi_stall, no_die, 0, 0);
  CHECK_RESULT(admit_request({.n_prompt = 10, .kv = kv_format::q4, .gpu_resident = true}, host_state(total, 0, 0.0, 30.0)),
               verdict::reject, 0, admit_reason::psi_stall, no_die, 0, 0);
  policy p;
  p.psi_full_reject_bp = 500;
  CHECK(admit_request({.n_prompt = 10, .kv = kv_format::q4, .gpu_resident = true}, host_state(64 * GiB, 60 * GiB, 0.0, 5.0), p).reason ==
        admit_reason::psi_stall);
}

TEST_CASE("2. GPU-resident fast path: host cost 0, reserve line, window cap") {
  const request_spec rq{.n_prompt = 100000, .kv = kv_format::fp32, .gpu_resident = true};
  SUBCASE("inside the reserve (equality included) rejects") {
    // "limit" on a host_reserve reject is the available memory, already inside the reserve.
    CHECK_RESULT(admit_request(rq, host_state(total, reserve)), verdict::reject, 0, admit_reason::host_reserve,
                 no_die, 0, reserve);
    CHECK_RESULT(admit_request(rq, host_state(total, 7)), verdict::reject, 0, admit_reason::host_reserve, no_die, 0,
                 7);
  }
  SUBCASE("one byte above the reserve admits any length: the host pays nothing per token") {
    CHECK_RESULT(admit_request(rq, host_state(total, reserve + 1)), verdict::admit, 100000, admit_reason::fits,
                 no_die, 0, 0);
    // A die named with no room at all does not bound the GPU path's host cost either.
    request_spec on_die = rq;
    on_die.die = 0;
    CHECK_RESULT(admit_request(on_die, add_die(host_state(total, reserve + 1), 1, 16 * GiB)), verdict::admit,
                 100000, admit_reason::fits, no_die, 0, 0);
  }
  SUBCASE("n_prompt > max_window caps to the window") {
    request_spec w = rq;
    w.max_window = 16384;
    const admit_result r = admit_request(w, host_state(total, 4 * GiB));
    CHECK_RESULT(r, verdict::cap, 16384, admit_reason::window, no_die, 0, 0);
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

TEST_CASE("a request that needs no host bytes, inside the reserve: the zero-cost rule (hold, admit, reject)") {
  const request_spec gpu{.n_prompt = 4096, .kv = kv_format::fp32, .gpu_resident = true};
  const request_spec host{.n_prompt = 4096, .kv = kv_format::fp32};  // priced by the model given
  const mem_state at_reserve = host_state(total, reserve);
  policy hold;  // the default
  REQUIRE(hold.zero_cost == zero_cost_rule::hold);
  policy admit = hold;
  admit.zero_cost = zero_cost_rule::admit;
  policy reject = hold;
  reject.zero_cost = zero_cost_rule::reject;

  SUBCASE("hold and reject: refused now (the seed's answer, to the field); only hold is held") {
    for (const policy& p : {hold, reject}) {
      CHECK_RESULT(admit_request(gpu, at_reserve, p), verdict::reject, 0, admit_reason::host_reserve, no_die, 0, reserve);
      CHECK_RESULT(admit_request(preallocated_model_cost, host, at_reserve, p), verdict::reject, 0,
                   admit_reason::host_reserve, no_die, 0, reserve);
    }
    CHECK(held_at_reserve(admit_request(gpu, at_reserve, hold), hold));
    CHECK(held_at_reserve(admit_request(preallocated_model_cost, host, at_reserve, hold), hold));
    CHECK_FALSE(held_at_reserve(admit_request(gpu, at_reserve, reject), reject));
  }
  SUBCASE("admit: admitted whole, 0 B needed and 0 B above the reserve; the window still caps") {
    CHECK_RESULT(admit_request(gpu, at_reserve, admit), verdict::admit, 4096, admit_reason::fits, no_die, 0, 0);
    CHECK_RESULT(admit_request(preallocated_model_cost, host, at_reserve, admit), verdict::admit, 4096,
                 admit_reason::fits, no_die, 0, 0);
    request_spec w = host;
    w.max_window = 1024;
    CHECK_RESULT(admit_request(preallocated_model_cost, w, at_reserve, admit), verdict::cap, 1024, admit_reason::window,
                 no_die, 0, 0);
    w.gpu_resident = true;
    CHECK_RESULT(admit_request(w, at_reserve, admit), verdict::cap, 1024, admit_reason::window, no_die, 0, 0);
  }
  SUBCASE("a request that costs anything is refused whatever the rule, and never held") {
    for (const policy& p : {hold, admit, reject}) {
      const admit_result r = admit_request(host, at_reserve, p);  // the seed's model: KV, state, activation
      CHECK_RESULT(r, verdict::reject, 0, admit_reason::host_reserve, no_die, host_cost_bytes(4096, kv_format::fp32),
                   reserve);
      CHECK_FALSE(held_at_reserve(r, p));
      // A preallocated model with an image to encode (cross-attention KV per item) costs that.
      model_cost items = preallocated_model_cost;
      items.kv_bytes_per_encoder_item[static_cast<std::size_t>(kv_format::fp32)] = MiB;
      request_spec with_image = host;
      with_image.encoder_items = 1;
      CHECK(admit_request(items, with_image, at_reserve, p).verdict == verdict::reject);
    }
  }
  SUBCASE("a whole-box stall refuses it whatever the rule: psi_stall, not held") {
    const mem_state stalled = host_state(total, reserve, 0.0, 30.0);
    for (const policy& p : {hold, admit, reject}) {
      const admit_result r = admit_request(gpu, stalled, p);
      CHECK(r.reason == admit_reason::psi_stall);
      CHECK_FALSE(held_at_reserve(r, p));
    }
  }
  SUBCASE("above the reserve the rule changes nothing") {
    for (const policy& p : {hold, admit, reject}) {
      CHECK(admit_request(gpu, host_state(total, reserve + 1), p) == admit_request(gpu, host_state(total, reserve + 1)));
    }
  }
}

TEST_CASE("3. host path: admit when the whole prompt fits") {
  const std::uint64_t need = host_cost_bytes(1000, kv_format::q4);
  CHECK_RESULT(admit_request({.n_prompt = 1000, .kv = kv_format::q4}, with_budget(need)), verdict::admit, 1000, admit_reason::fits, no_die,
               need, need);
  // One byte short: a cap, to the largest window that fits.
  CHECK_RESULT(admit_request({.n_prompt = 1000, .kv = kv_format::q4}, with_budget(need - 1)), verdict::cap, 999, admit_reason::host_budget,
               no_die, need, need - 1);
  // The same boundary on a die that binds: its index is named on the cap, never on the admit.
  const mem_state roomy_host = with_budget(8 * GiB);
  CHECK_RESULT(admit_request({.n_prompt = 1000, .kv = kv_format::q4, .die = 1}, add_die(add_die(roomy_host, 1, 16 * GiB), need, 16 * GiB)),
               verdict::admit, 1000, admit_reason::fits, no_die, need, need);
  CHECK_RESULT(
      admit_request({.n_prompt = 1000, .kv = kv_format::q4, .die = 1}, add_die(add_die(roomy_host, 1, 16 * GiB), need - 1, 16 * GiB)),
      verdict::cap, 999, admit_reason::die_vram, 1, need, need - 1);
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
  // Inside the reserve: need is the cost of what was asked (the window, if smaller), limit the avail.
  CHECK_RESULT(admit_request({.n_prompt = 1, .kv = kv_format::q4}, host_state(total, reserve)), verdict::reject, 0,
               admit_reason::host_reserve, no_die, cost(1), reserve);
  CHECK_RESULT(admit_request({.n_prompt = 20000, .kv = kv_format::fp32, .die = 0, .max_window = 1000},
                             add_die(host_state(total, reserve - 5), 1, 16 * GiB)),
               verdict::reject, 0, admit_reason::host_reserve, no_die, cost(1000, kv_format::fp32), reserve - 5);
  // Fixed buffers alone (peak(0) = 256 MiB) do not fit: reject, not a cap to 0.
  CHECK(cost(0) == 256 * MiB);
  CHECK_RESULT(admit_request({.n_prompt = 1000, .kv = kv_format::q4}, with_budget(256 * MiB - 1)), verdict::reject, 0,
               admit_reason::host_budget, no_die, cost(1000), 256 * MiB - 1);
  // Exactly the fixed buffers: a 0-token prefix fits, which is still a reject.
  CHECK_RESULT(admit_request({.n_prompt = 1000, .kv = kv_format::q4}, with_budget(256 * MiB)), verdict::reject, 0,
               admit_reason::host_budget, no_die, cost(1000), 256 * MiB);
  // An empty prompt that fits is admitted.
  CHECK_RESULT(admit_request({.n_prompt = 0, .kv = kv_format::q4}, with_budget(256 * MiB)), verdict::admit, 0, admit_reason::fits, no_die,
               256 * MiB, 256 * MiB);
}

// The two rejects of the host path after the reserve line: the fixed buffers do not fit
// (cost(0) > limit), or they do but not one token more (the largest prefix is 0 tokens).
// Each names the budget that bound it, and the die only when the die bound it.
TEST_CASE("3. host path: the budget-bound rejects name the binding budget and die") {
  const std::uint64_t roomy = 8 * GiB;
  for (const auto kv : {kv_format::q4, kv_format::fp32}) {
    CAPTURE(to_string(kv));
    const request_spec rq{.n_prompt = 3000, .kv = kv, .die = 1};
    const std::uint64_t need = cost(3000, kv);
    // Limits just below the fixed buffers, exactly them, and one byte short of a 1-token prefix.
    const std::uint64_t none_fits = cost(0, kv) - 1;
    const std::uint64_t zero_fits[] = {cost(0, kv), cost(0, kv) + 1, cost(1, kv) - 1};
    SUBCASE("host budget binds; the named die has room and is not named") {
      const auto box = [&](std::uint64_t budget) {
        return add_die(add_die(with_budget(budget), 1, 16 * GiB), roomy, 16 * GiB);
      };
      CHECK_RESULT(admit_request(rq, box(none_fits)), verdict::reject, 0, admit_reason::host_budget, no_die, need,
                   none_fits);
      for (const std::uint64_t limit : zero_fits) {
        CAPTURE(limit);
        CHECK(reference_fit(3000, kv, limit) == 0);
        CHECK_RESULT(admit_request(rq, box(limit)), verdict::reject, 0, admit_reason::host_budget, no_die, need, limit);
      }
    }
    SUBCASE("die 1's free VRAM binds and is named") {
      const auto box = [&](std::uint64_t die_free) {
        return add_die(add_die(with_budget(roomy), roomy, 16 * GiB), die_free, 16 * GiB);
      };
      CHECK_RESULT(admit_request(rq, box(none_fits)), verdict::reject, 0, admit_reason::die_vram, 1, need, none_fits);
      for (const std::uint64_t limit : zero_fits) {
        CAPTURE(limit);
        CHECK_RESULT(admit_request(rq, box(limit)), verdict::reject, 0, admit_reason::die_vram, 1, need, limit);
      }
    }
    SUBCASE("host not sampled: the die alone binds") {
      const mem_state box = add_die(add_die(host_state(0, 0), roomy, 16 * GiB), cost(0, kv), 16 * GiB);
      CHECK_RESULT(admit_request(rq, box), verdict::reject, 0, admit_reason::die_vram, 1, need, cost(0, kv));
    }
  }
}

TEST_CASE("3. host path: the die's free VRAM bounds it too, and is named when it binds") {
  const std::uint64_t need = host_cost_bytes(2000, kv_format::q4);
  SUBCASE("die smaller than the host budget binds") {
    const mem_state s = add_die(add_die(with_budget(8 * GiB), 8 * GiB, 16 * GiB), need - 1, 16 * GiB);
    CHECK_RESULT(admit_request({.n_prompt = 2000, .kv = kv_format::q4, .die = 1}, s), verdict::cap, 1999, admit_reason::die_vram, 1, need,
                 need - 1);
  }
  SUBCASE("host smaller than the die binds") {
    const mem_state s = add_die(with_budget(need - 1), 8 * GiB, 16 * GiB);
    CHECK_RESULT(admit_request({.n_prompt = 2000, .kv = kv_format::q4, .die = 0}, s), verdict::cap, 1999, admit_reason::host_budget, no_die,
                 need, need - 1);
  }
  SUBCASE("equal budgets: the host is named (the die binds only when strictly smaller)") {
    const mem_state s = add_die(with_budget(need - 1), need - 1, 16 * GiB);
    CHECK_RESULT(admit_request({.n_prompt = 2000, .kv = kv_format::q4, .die = 0}, s), verdict::cap, 1999, admit_reason::host_budget, no_die,
                 need, need - 1);
  }
  SUBCASE("a die too small for anything rejects with its index") {
    const mem_state s = add_die(with_budget(8 * GiB), 1 * MiB, 16 * GiB);
    CHECK_RESULT(admit_request({.n_prompt = 2000, .kv = kv_format::q4, .die = 0}, s), verdict::reject, 0, admit_reason::die_vram, 0, need,
                 1 * MiB);
  }
  SUBCASE("a die with budget 0 is not measured and does not bound") {
    const mem_state s = add_die(with_budget(8 * GiB), 0, 0);
    CHECK_RESULT(admit_request({.n_prompt = 2000, .kv = kv_format::q4, .die = 0}, s), verdict::admit, 2000, admit_reason::fits, no_die, need,
                 8 * GiB);
  }
  SUBCASE("no die named: only the host bounds") {
    const mem_state s = add_die(with_budget(8 * GiB), 1, 16 * GiB);
    CHECK_RESULT(admit_request({.n_prompt = 2000, .kv = kv_format::q4}, s), verdict::admit, 2000, admit_reason::fits, no_die, need, 8 * GiB);
  }
}

TEST_CASE("3. host path: the window applies before the memory check") {
  SUBCASE("window fits: CAP for the window") {
    const admit_result r = admit_request({.n_prompt = 20000, .kv = kv_format::q4, .max_window = 1000}, with_budget(8 * GiB));
    CHECK_RESULT(r, verdict::cap, 1000, admit_reason::window, no_die, cost(1000), 8 * GiB);
    // Exactly at the window's cost, and with a die named that has room: still the window, no die.
    CHECK_RESULT(admit_request({.n_prompt = 20000, .kv = kv_format::q4, .die = 0, .max_window = 1000},
                               add_die(with_budget(8 * GiB), cost(1000), 16 * GiB)),
                 verdict::cap, 1000, admit_reason::window, no_die, cost(1000), cost(1000));
  }
  SUBCASE("window does not fit either: CAP below the window, memory named") {
    const std::uint64_t budget = cost(500);
    const admit_result r = admit_request({.n_prompt = 20000, .kv = kv_format::q4, .max_window = 1000}, with_budget(budget));
    CHECK_RESULT(r, verdict::cap, 500, admit_reason::host_budget, no_die, cost(1000), budget);
    CHECK_RESULT(admit_request({.n_prompt = 20000, .kv = kv_format::q4, .die = 0, .max_window = 1000},
                               add_die(with_budget(8 * GiB), budget, 16 * GiB)),
                 verdict::cap, 500, admit_reason::die_vram, 0, cost(1000), budget);
  }
}

TEST_CASE("bad requests are named, not guessed") {
  const mem_state s = add_die(host_state(total, 4 * GiB), 8 * GiB, 16 * GiB);
  CHECK_RESULT(admit_request({.n_prompt = -1, .kv = kv_format::q4}, s), verdict::reject, 0, admit_reason::bad_request, no_die, 0, 0);
  CHECK_RESULT(admit_request({.n_prompt = -1, .kv = kv_format::q4, .gpu_resident = true}, s), verdict::reject, 0, admit_reason::bad_request,
               no_die, 0, 0);
  // The die asked for is named, so the caller sees which one was wrong.
  CHECK_RESULT(admit_request({.n_prompt = 10, .kv = kv_format::q4, .die = 1}, s), verdict::reject, 0, admit_reason::bad_request, 1, 0, 0);
  CHECK_RESULT(admit_request({.n_prompt = 10, .kv = kv_format::q4, .die = -7}, s), verdict::reject, 0, admit_reason::bad_request, -7, 0, 0);
  // Bad input is bad before any pressure is looked at.
  CHECK(admit_request({.n_prompt = -1, .kv = kv_format::q4}, host_state(total, 0, 0.0, 50.0)).reason == admit_reason::bad_request);
}

TEST_CASE("a host that was not sampled does not reject (fail open)") {
  const mem_state unknown = host_state(0, 0);
  // No host bound at all: the limit is "everything".
  CHECK_RESULT(admit_request({.n_prompt = 4096, .kv = kv_format::fp32}, unknown), verdict::admit, 4096,
               admit_reason::fits, no_die, cost(4096, kv_format::fp32), u64_max);
  CHECK_RESULT(admit_request({.n_prompt = 4096, .kv = kv_format::q4, .gpu_resident = true}, unknown), verdict::admit, 4096,
               admit_reason::fits, no_die, 0, 0);
  // ...but a named die still bounds it.
  CHECK_RESULT(admit_request({.n_prompt = 4096, .kv = kv_format::q4, .die = 0}, add_die(unknown, 1 * MiB, 16 * GiB)), verdict::reject, 0,
               admit_reason::die_vram, 0, cost(4096), 1 * MiB);
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
    CHECK_RESULT(admit_model_load({w, kv}, s, 1), verdict::admit, 0, admit_reason::fits, 1, need, need);
    CHECK_RESULT(admit_model_load({w, kv}, s, 0), verdict::reject, 0, admit_reason::die_vram, 0, need, need - 1);
  }
  SUBCASE("no die named picks the roomiest") {
    CHECK(roomiest_die(s) == 1);
    CHECK_RESULT(admit_model_load({w, kv}, s), verdict::admit, 0, admit_reason::fits, 1, need, need);
    // The roomiest is chosen even when it is too small, and named on the reject.
    const mem_state both_small = add_die(add_die(host_state(total, 4 * GiB), free_exact - 2, 80 * GiB),
                                         free_exact - 1, 80 * GiB);
    CHECK_RESULT(admit_model_load({w, kv}, both_small), verdict::reject, 0, admit_reason::die_vram, 1, need,
                 need - 1);
  }
  SUBCASE("die reserve is policy") {
    policy p;
    p.die_reserve_bytes = 0;
    CHECK_RESULT(admit_model_load({w, kv}, s, 0, p), verdict::admit, 0, admit_reason::fits, 0, need, free_exact - 1);
  }
  SUBCASE("no dies, bad die, overflowing sizes") {
    // Nothing to load onto: no die is named, and there is no limit to name.
    CHECK_RESULT(admit_model_load({w, kv}, host_state(total, 4 * GiB)), verdict::reject, 0, admit_reason::bad_request,
                 no_die, need, 0);
    CHECK_RESULT(admit_model_load({w, kv}, s, 5), verdict::reject, 0, admit_reason::bad_request, 5, need, 0);
    CHECK_RESULT(admit_model_load({w, kv}, s, -2), verdict::reject, 0, admit_reason::bad_request, -2, need, 0);
    CHECK_RESULT(admit_model_load({UINT64_MAX, UINT64_MAX}, s, 1), verdict::reject, 0, admit_reason::die_vram, 1,
                 u64_max, need);
  }
  SUBCASE("free below the die reserve is no room at all") {
    const mem_state small = add_die(host_state(total, 4 * GiB), 512 * MiB, 80 * GiB);
    CHECK_RESULT(admit_model_load({0, 0}, small, 0), verdict::reject, 0, admit_reason::die_vram, 0, 3 * GiB / 2, 0);
  }
}

TEST_CASE("admit_model_load_die: slice + 1.5 GiB scratch within the die's free VRAM less its reserve") {
  const std::uint64_t need = 6 * GiB + 1 * GiB + 3 * GiB / 2;
  const std::uint64_t die_reserve = 1 * GiB;  // PN_DIE_RESERVE_BYTES' default, as a whole load keeps it
  const mem_state s = add_die(add_die(host_state(total, 4 * GiB), need + die_reserve, 80 * GiB), need + die_reserve - 1, 80 * GiB);
  CHECK_RESULT(admit_model_load_die(6 * GiB, 1 * GiB, s, 0), verdict::admit, 0, admit_reason::fits, 0, need, need);
  CHECK_RESULT(admit_model_load_die(6 * GiB, 1 * GiB, s, 1), verdict::reject, 0, admit_reason::die_vram, 1, need,
               need - 1);
  CHECK_RESULT(admit_model_load_die(6 * GiB, 1 * GiB, s, 2), verdict::reject, 0, admit_reason::bad_request, 2, need, 0);
  CHECK_RESULT(admit_model_load_die(6 * GiB, 1 * GiB, s, no_die), verdict::reject, 0, admit_reason::bad_request,
               no_die, need, 0);
  CHECK_RESULT(admit_model_load_die(UINT64_MAX, 1, s, 0), verdict::reject, 0, admit_reason::die_vram, 0, u64_max,
               need);
  CHECK(default_policy.die_scratch_bytes == 1610612736);
  // The policy's die reserve, whatever it is: the slice and the whole load keep the same one (issue 39 item 9).
  policy p;
  p.die_reserve_bytes = 3 * GiB;
  CHECK_RESULT(admit_model_load_die(6 * GiB, 1 * GiB, s, 0, p), verdict::reject, 0, admit_reason::die_vram, 0, need,
               need - 2 * GiB);
  CHECK(admit_model_load({6 * GiB, 1 * GiB}, s, 0, p).limit_bytes == admit_model_load_die(6 * GiB, 1 * GiB, s, 0, p).limit_bytes);
  p.die_reserve_bytes = 0;
  CHECK(admit_model_load_die(6 * GiB, 1 * GiB, s, 1, p).verdict == verdict::admit);
}

TEST_CASE("admit_load_spike: 2.4 GiB must fit above the host reserve") {
  CHECK(default_policy.load_spike_bytes == 2576980377);  // 2.4 GiB, floored
  const std::uint64_t spike = default_policy.load_spike_bytes;
  CHECK_RESULT(admit_load_spike(with_budget(spike)), verdict::admit, 0, admit_reason::fits, no_die, spike, spike);
  CHECK_RESULT(admit_load_spike(with_budget(spike - 1)), verdict::reject, 0, admit_reason::host_budget, no_die, spike,
               spike - 1);
  // At the reserve line (equality included) and one byte above it.
  CHECK_RESULT(admit_load_spike(host_state(total, reserve)), verdict::reject, 0, admit_reason::host_reserve, no_die,
               spike, reserve);
  CHECK_RESULT(admit_load_spike(host_state(total, reserve + 1)), verdict::reject, 0, admit_reason::host_budget, no_die,
               spike, 1);
  policy p;
  p.load_spike_bytes = 1 * GiB;
  CHECK_RESULT(admit_load_spike(with_budget(1 * GiB), p), verdict::admit, 0, admit_reason::fits, no_die, 1 * GiB,
               1 * GiB);
  // Host unknown: fail open, with no limit to name.
  CHECK_RESULT(admit_load_spike(host_state(0, 0)), verdict::admit, 0, admit_reason::fits, no_die, spike, u64_max);
  // Dies play no part in the host burst.
  CHECK_RESULT(admit_load_spike(add_die(with_budget(spike), 0, 16 * GiB)), verdict::admit, 0, admit_reason::fits,
               no_die, spike, spike);
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
  CHECK(to_string(admit_reason::prefill_window) == "prefill_window");
}

TEST_CASE("the stall guard rejects a stall that held over the window, never one interval's blip") {
  mem_state s = host_state(64 * GiB, 60 * GiB);
  s.host_psi_full_rate = 100.0;  // one interval fully stalled: not a reason to refuse work
  CHECK(admit_request({.n_prompt = 10, .kv = kv_format::q4, .gpu_resident = true}, s).verdict == verdict::admit);
  CHECK(admit_request({.n_prompt = 10, .kv = kv_format::q4}, s).verdict == verdict::admit);
  s.host_psi_full_sustained = 15.0;  // held at 15 % over the window, before avg10 catches up
  CHECK(admit_request({.n_prompt = 10, .kv = kv_format::q4, .gpu_resident = true}, s).reason == admit_reason::psi_stall);
  CHECK(admit_request({.n_prompt = 10, .kv = kv_format::q4}, s).reason == admit_reason::psi_stall);
  s.host_psi_full_sustained = 14.99;
  CHECK(admit_request({.n_prompt = 10, .kv = kv_format::q4, .gpu_resident = true}, s).verdict == verdict::admit);
}

TEST_CASE("the segment solve finds the same largest window as a plain binary search") {
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
    CHECK(pnmem::detail::largest_fitting_prompt(n_max, kv, limit) == reference_fit(n_max, kv, limit));
  }
  // Exactly at anchors and one byte either side of their costs.
  for (const auto& a : activation_anchors) {
    for (const auto kv : {kv_format::q4, kv_format::fp32}) {
      const int t = static_cast<int>(a.tokens);
      if (t == 0) continue;
      const std::uint64_t c = host_cost_bytes(t, kv);
      for (const std::uint64_t limit : {c - 1, c, c + 1}) {
        CHECK(pnmem::detail::largest_fitting_prompt(2 * t + 5, kv, limit) == reference_fit(2 * t + 5, kv, limit));
      }
    }
  }
}

namespace {

// For a limit of cost(n) + delta (delta in -1, 0, +1) the largest fitting prompt is
// known without searching: cost() rises by at least k >= 2 bytes per token (k > 1
// is checked where this is used), so cost(n) - 1 leaves n - 1 tokens and cost(n)
// or cost(n) + 1 leaves n.
int fit_at(int n, int delta) { return delta < 0 ? n - 1 : n; }

// n values across one segment [a, b] of the activation table: both ends and their
// neighbours, the middle, and a spread of points between.
std::vector<int> segment_points(int a, int b, pnmem::test::rng& g) {
  std::vector<int> out;
  for (int d = 0; d <= 3; ++d) {
    out.push_back(a + d);
    out.push_back(b - d);
  }
  out.push_back(a + (b - a) / 2);
  for (int i = 0; i < 120; ++i) out.push_back(a + static_cast<int>(g.below(static_cast<std::uint64_t>(b - a) + 1)));
  return out;
}

// admit_request on a box whose binding budget is exactly `limit`, asked for n_prompt
// tokens, against what the fit says: ADMIT when the whole prompt fits, a CAP to the
// fit when some prefix does, a REJECT when only the 0-token prefix does.
void check_admit_at(int n_prompt, kv_format kv, std::uint64_t limit, int fit, bool die_binds) {
  CAPTURE(n_prompt);
  CAPTURE(die_binds);
  const std::uint64_t reserve8 = box_reserve_bytes(8 * GiB);
  mem_state s;
  request_spec rq{.n_prompt = n_prompt, .kv = kv, .die = 2};
  admit_reason binding = admit_reason::host_budget;
  int die = no_die;
  if (die_binds) {
    // Host not sampled (no host bound): die 2's free VRAM is the whole budget.
    s = add_die(add_die(add_die(host_state(0, 0), 64 * GiB, 80 * GiB), 64 * GiB, 80 * GiB), limit, u64_max);
    binding = admit_reason::die_vram;
    die = 2;
  } else {
    if (limit > u64_max - reserve8) return;  // not expressible as avail - reserve on an 8 GiB box
    s = add_die(add_die(add_die(host_state(8 * GiB, reserve8 + limit), 1, 80 * GiB), 1, 80 * GiB), u64_max, u64_max);
  }
  const std::uint64_t need = host_cost_bytes(n_prompt, kv);
  const admit_result r = admit_request(rq, s);
  if (n_prompt <= fit) {
    CHECK_RESULT(r, verdict::admit, n_prompt, admit_reason::fits, no_die, need, limit);
  } else if (fit >= 1) {
    CHECK_RESULT(r, verdict::cap, fit, binding, die, need, limit);
  } else {
    CHECK_RESULT(r, verdict::reject, 0, binding, die, need, limit);
  }
}

}  // namespace

TEST_CASE("CAP boundary: limits at cost(n) - 1, cost(n), cost(n) + 1 in every segment of the table") {
  pnmem::test::rng g{2024};
  for (const auto kv : {kv_format::q4, kv_format::fp32}) {
    CAPTURE(to_string(kv));
    REQUIRE(kv_bytes_per_token(kv) > 1);
    for (std::size_t i = 1; i < activation_anchors.size(); ++i) {
      const int a = static_cast<int>(activation_anchors[i - 1].tokens);
      const int b = static_cast<int>(activation_anchors[i].tokens);
      CAPTURE(b);
      for (const int n : segment_points(a, b, g)) {
        CAPTURE(n);
        for (const int delta : {-1, 0, 1}) {
          if (n == 0 && delta < 0) continue;  // below cost(0): nothing fits, no solve
          CAPTURE(delta);
          const std::uint64_t limit = cost(n, kv) + static_cast<std::uint64_t>(delta + 1) - 1;
          const int fit = fit_at(n, delta);
          CHECK(reference_fit(b + 1000, kv, limit) == fit);  // the two references agree
          // n_max right above the fit (the anchor walk stops at n_max), past the segment, and unbounded.
          for (const int n_max : {fit + 1, fit + 2, b + 1, 2 * b + 7, INT_MAX}) {
            CAPTURE(n_max);
            CHECK(pnmem::detail::largest_fitting_prompt(n_max, kv, limit) == fit);
          }
          for (const int n_prompt : {fit, fit + 1, n + 1, b + 1, 300000}) {
            check_admit_at(n_prompt, kv, limit, fit, false);
            check_admit_at(n_prompt, kv, limit, fit, true);
          }
        }
      }
    }
  }
}

TEST_CASE("CAP boundary past the last anchor (N^2 growth) and up to limits near 2^64") {
  for (const auto kv : {kv_format::q4, kv_format::fp32}) {
    CAPTURE(to_string(kv));
    // The first prompt whose cost saturates at 2^64-1.
    int lo = static_cast<int>(activation_anchors.back().tokens);
    int hi = INT_MAX;
    REQUIRE(cost(hi, kv) == u64_max);
    while (hi - lo > 1) {
      const int mid = lo + (hi - lo) / 2;
      (cost(mid, kv) < u64_max ? lo : hi) = mid;
    }
    const int saturated = hi;
    CAPTURE(saturated);

    std::vector<int> points;
    const int last = static_cast<int>(activation_anchors.back().tokens);
    for (int d = 1; d <= 3; ++d) points.push_back(last + d);
    for (std::int64_t n = 2 * last; n < saturated; n = n * 3 / 2) points.push_back(static_cast<int>(n));
    for (int d = 1; d <= 3; ++d) points.push_back(saturated - d);
    pnmem::test::rng g{77};
    for (int i = 0; i < 100; ++i) {
      points.push_back(last + 1 + static_cast<int>(g.below(static_cast<std::uint64_t>(saturated - last - 1))));
    }
    for (const int n : points) {
      CAPTURE(n);
      for (const int delta : {-1, 0, 1}) {
        CAPTURE(delta);
        const std::uint64_t limit = cost(n, kv) + static_cast<std::uint64_t>(delta + 1) - 1;
        const int fit = fit_at(n, delta);
        REQUIRE(limit < u64_max);  // cost(n + 1) > limit: the precondition holds
        CHECK(reference_fit(INT_MAX, kv, limit) == fit);
        for (const int n_max : {fit + 1, INT_MAX}) {
          CAPTURE(n_max);
          CHECK(pnmem::detail::largest_fitting_prompt(n_max, kv, limit) == fit);
        }
        for (const int n_prompt : {fit, fit + 1, INT_MAX}) {
          check_admit_at(n_prompt, kv, limit, fit, false);
          check_admit_at(n_prompt, kv, limit, fit, true);
        }
      }
    }
    // A limit of 2^64-2: everything short of the saturated cost fits.
    CHECK(pnmem::detail::largest_fitting_prompt(INT_MAX, kv, u64_max - 1) == saturated - 1);
    check_admit_at(INT_MAX, kv, u64_max - 1, saturated - 1, true);
  }
}

TEST_CASE("garbage free bytes (2^64-1) on a die or the host never wrap into a reject") {
  // A die reporting 2^64-1 free on an unsampled host: nothing bounds the request.
  const mem_state die_max = add_die(host_state(0, 0), u64_max, u64_max);
  CHECK_RESULT(admit_request({.n_prompt = INT_MAX, .kv = kv_format::fp32, .die = 0}, die_max), verdict::admit, INT_MAX,
               admit_reason::fits, no_die, u64_max, u64_max);
  // The host reporting 2^64-1 available: the budget is that less the reserve, and a prompt
  // whose cost saturates is capped to the largest one below it.
  const std::uint64_t limit = u64_max - reserve;
  for (const auto kv : {kv_format::q4, kv_format::fp32}) {
    const int fit = reference_fit(INT_MAX, kv, limit);
    CHECK(cost(fit, kv) <= limit);
    CHECK(cost(fit + 1, kv) > limit);
    CHECK_RESULT(admit_request({.n_prompt = INT_MAX, .kv = kv, .die = 0}, add_die(host_state(total, u64_max), u64_max,
                                                                                  u64_max)),
                 verdict::cap, fit, admit_reason::host_budget, no_die, u64_max, limit);
  }
}

TEST_CASE("the segment solve is exact at every n of the table: limits cost(n) - 1, cost(n), cost(n) + 1") {
  // Exhaustive over the table, both KV formats, with n_max just above the answer (the
  // anchor walk stops at n_max) and unbounded (the walk stops at the first anchor that
  // does not fit). Mismatches are counted, and the first one reported.
  const int last = static_cast<int>(activation_anchors.back().tokens);
  for (const auto kv : {kv_format::q4, kv_format::fp32}) {
    CAPTURE(to_string(kv));
    long long checked = 0;
    long long wrong = 0;
    long long too_flat = 0;
    int first_n = -1;
    int first_delta = 0;
    int first_got = 0;
    for (int n = 0; n <= last; ++n) {
      if (n > 0 && cost(n, kv) - cost(n - 1, kv) < 2) ++too_flat;  // fit_at's premise
      for (const int delta : {-1, 0, 1}) {
        if (n == 0 && delta < 0) continue;
        const std::uint64_t limit = cost(n, kv) + static_cast<std::uint64_t>(delta + 1) - 1;
        const int fit = fit_at(n, delta);
        for (const int n_max : {fit + 1, INT_MAX}) {
          ++checked;
          const int got = pnmem::detail::largest_fitting_prompt(n_max, kv, limit);
          if (got != fit && wrong++ == 0) {
            first_n = n;
            first_delta = delta;
            first_got = got;
          }
        }
      }
    }
    INFO("checked ", checked, "; first mismatch: n ", first_n, " delta ", first_delta, " got ", first_got);
    CHECK(too_flat == 0);
    CHECK(wrong == 0);
  }
}

// --- Two windows: the configured one and the ladder's prefill clamp -------------------------

TEST_CASE("a prompt past the configured window is capped `window`; within it but past the prefill clamp, `prefill_window`") {
  const mem_state roomy = host_state(64 * GiB, 60 * GiB);
  for (const bool gpu : {true, false}) {
    CAPTURE(gpu);
    request_spec rq{.n_prompt = 12000, .kv = kv_format::q4, .gpu_resident = gpu, .max_window = 16384, .prefill_window = 8192};
    admit_result r = admit_request(rq, roomy);
    CHECK(r.verdict == verdict::cap);
    CHECK(r.reason == admit_reason::prefill_window);
    CHECK(r.fit_tokens == 8192);

    rq.n_prompt = 20000;  // past both: too long at any level
    r = admit_request(rq, roomy);
    CHECK(r.verdict == verdict::cap);
    CHECK(r.reason == admit_reason::window);
    CHECK(r.fit_tokens == 8192);  // the smaller bound is what may start

    rq.n_prompt = 20000;
    rq.prefill_window = 0;  // no clamp: the configured window alone
    r = admit_request(rq, roomy);
    CHECK(r.reason == admit_reason::window);
    CHECK(r.fit_tokens == 16384);

    rq = {.n_prompt = 12000, .kv = kv_format::q4, .gpu_resident = gpu, .max_window = 0, .prefill_window = 8192};  // no configured window
    r = admit_request(rq, roomy);
    CHECK(r.reason == admit_reason::prefill_window);
    CHECK(r.fit_tokens == 8192);

    rq = {.n_prompt = 8192, .kv = kv_format::q4, .gpu_resident = gpu, .max_window = 16384, .prefill_window = 8192};  // exactly the clamp
    CHECK(admit_request(rq, roomy).verdict == verdict::admit);
  }
  // Memory still binds inside the clamped window: a host path that cannot hold it is capped by memory.
  const request_spec tight{.n_prompt = 12000, .kv = kv_format::fp32, .max_window = 16384, .prefill_window = 8192};
  const admit_result m = admit_request(tight, with_budget(host_cost_bytes(4000, kv_format::fp32)));
  CHECK(m.reason == admit_reason::host_budget);
  CHECK(m.fit_tokens == 4000);
}

// --- The host reserve in a container: every check on a snapshot uses the same one ------------

TEST_CASE("in a 1 GiB container admission keeps a 256 MiB reserve, as the level does") {
  using pnmem::test::container_state;
  const mem_state s = container_state(64 * GiB, 1 * GiB, 680 * MiB);
  const std::uint64_t r = host_reserve_bytes(s);
  REQUIRE(r == 256 * MiB);
  // GPU-resident: outside the reserve, admitted (the seed's 1 GiB minimum rejected it as host_reserve).
  CHECK(admit_request({.n_prompt = 100, .kv = kv_format::q4, .gpu_resident = true}, s).verdict == verdict::admit);
  // Host path: the budget is avail - the container's reserve.
  const admit_result h = admit_request({.n_prompt = 100, .kv = kv_format::q4}, s);
  CHECK(h.verdict == verdict::admit);
  CHECK(h.limit_bytes == 680 * MiB - r);
  // Host bytes: the same budget.
  const admit_result b = admit_host_bytes(100 * MiB, s);
  CHECK(b.verdict == verdict::admit);
  CHECK(b.limit_bytes == 680 * MiB - r);
  CHECK(admit_host_bytes(500 * MiB, s).verdict == verdict::cap);
  // The load spike (2.4 GiB) does not fit a 1 GiB container whole: host_budget, not host_reserve.
  const admit_result spike = admit_load_spike(s);
  CHECK(spike.verdict == verdict::reject);
  CHECK(spike.reason == admit_reason::host_budget);
  CHECK(spike.limit_bytes == 680 * MiB - r);
  // At the reserve: every check says host_reserve, as the level says CRITICAL.
  const mem_state at = container_state(64 * GiB, 1 * GiB, r);
  CHECK(derive_level(at) == mem_level::critical);
  CHECK(admit_request({.n_prompt = 1, .kv = kv_format::q4, .gpu_resident = true}, at).reason == admit_reason::host_reserve);
  CHECK(admit_host_bytes(1, at).reason == admit_reason::host_reserve);
  CHECK(admit_load_spike(at).reason == admit_reason::host_reserve);
  // One byte above it: the level is TIGHT and admission has one byte of budget.
  const mem_state above = container_state(64 * GiB, 1 * GiB, r + 1);
  CHECK(derive_level(above) == mem_level::tight);
  CHECK(admit_host_bytes(1, above).verdict == verdict::admit);
}
