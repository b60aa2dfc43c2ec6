// The engine wrapper (pnmem/engine/admit.hpp): the seed's pn_admit order.
#include "pnmem/engine/admit.hpp"
#include "pnmem/engine/admit_after_eviction.hpp"
#include "pnmem/engine/explain.hpp"
#include "pnmem/engine/host_ledger.hpp"
#include "pnmem/level.hpp"
#include "pnmem/model_shape.hpp"

#include <doctest/doctest.h>

#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

using namespace pnmem;
using pnmem::test::add_die;
using pnmem::test::host_state;

namespace {

// Anything with running() and read() is a watcher to admit().
struct fake_watcher {
  bool is_running = true;
  mem_state state;
  bool running() const { return is_running; }
  mem_state read() const { return state; }
};

fake_watcher at(mem_state s) {
  fake_watcher w;
  w.state = with_derived_level(s);
  return w;
}

}  // namespace

TEST_CASE("1. no watcher running: fail open, the whole prompt, counted") {
  fake_watcher w = at(host_state(8 * GiB, 1 * GiB));  // CRITICAL, but nobody is watching
  w.is_running = false;
  engine_counters c;
  const admit_answer a = admit(w, {.max_window = 4096}, 9000, {.counters = &c});
  CHECK(a.status == admit_status::fail_open);
  CHECK(a.reason == admit_reason::not_watching);  // and why
  CHECK(a.fit_tokens == 9000);
  CHECK(c.fail_open.load() == 1);
  CHECK(to_string(admit_status::fail_open) == "fail_open");
}

TEST_CASE("a watcher that could not read the host: admissions fail open as not_sampled, not \"admitted\"") {
  mem_state s;  // host_total_bytes 0: meminfo missing or garbled
  s.seq = 3;
  const fake_watcher w = at(s);
  engine_counters c;
  const admit_answer a = admit(w, {.max_window = 4096}, 3000, {.counters = &c});
  CHECK(a.status == admit_status::fail_open);
  CHECK(a.reason == admit_reason::not_sampled);
  CHECK(a.fit_tokens == 3000);
  CHECK(c.fail_open.load() == 1);
  CHECK(c.admitted[static_cast<std::size_t>(admit_reason::fits)].load() == 0);
  // GPU-resident too: the host reserve is all it would have checked.
  CHECK(admit(w, {.gpu_resident = true}, 10).reason == admit_reason::not_sampled);
  // A die that bounds it still decides: that answer is real.
  const mem_state d = add_die(s, 1 * GiB, 16 * GiB);
  const admit_answer bound = admit(at(d), {.die = 0}, 100000);
  CHECK(bound.status != admit_status::fail_open);
  CHECK(bound.reason == admit_reason::die_vram);
  // The ledger's byte answers say the same.
  host_ledger ledger;
  const auto r = ledger.check_bytes(w, 1 * GiB, default_policy);
  CHECK(r.answer.status == admit_status::fail_open);
  CHECK(r.answer.reason == admit_reason::not_sampled);
  fake_watcher off = w;
  off.is_running = false;
  CHECK(ledger.check_bytes(off, 1, default_policy).answer.reason == admit_reason::not_watching);
  // Where the words come from: the snapshot's provenance.
  CHECK(host_unsampled_reason(s) == "meminfo not found");
  s.provenance.mark_failed(host_source::meminfo);
  CHECK(host_unsampled_reason(s) == "meminfo unreadable");
  s.seq = 0;
  CHECK(host_unsampled_reason(s) == "never sampled");
  CHECK(host_unsampled_reason(host_state(8 * GiB, 4 * GiB)).empty());
  CHECK(to_string(admit_reason::not_watching) == "not_watching");
  CHECK(to_string(admit_reason::not_sampled) == "not_sampled");
}

TEST_CASE("3. at TIGHT rung 3 halves the window, logs the seed's line, and admission uses it") {
  const std::uint64_t r = box_reserve_bytes(8 * GiB);
  const fake_watcher w = at(host_state(8 * GiB, r + r / 8));  // TIGHT by bytes
  REQUIRE(w.state.level == mem_level::tight);
  std::vector<std::string> log;
  engine_counters c;
  const model_desc m{.kv = kv_format::q4, .gpu_resident = true, .max_window = 16384, .max_slots = 8};
  const admit_answer a = admit(w, m, 12000, {.log = [&](std::string_view l) { log.emplace_back(l); }, .counters = &c});
  REQUIRE(log.size() == 1);
  CHECK(log[0] == "[ladder] TIGHT -> prefill window clamped 16384 -> 8192 (rung 3)");
  CHECK(a.window == 8192);
  CHECK(a.window_clamped);
  CHECK(a.status == admit_status::capped);
  CHECK(a.fit_tokens == 8192);
  // 12000 tokens are within the configured 16384: the ladder's clamp capped it, not the window.
  CHECK(a.reason == admit_reason::prefill_window);
  CHECK(a.level == mem_level::tight);
  CHECK(c.ladder_degradations[static_cast<std::size_t>(mem_level::tight)].load() == 1);
  CHECK(c.capped[static_cast<std::size_t>(admit_reason::prefill_window)].load() == 1);
  CHECK(c.capped[static_cast<std::size_t>(admit_reason::window)].load() == 0);

  // Past the configured window too: `window` (too long at any level), capped to the clamp.
  const admit_answer longer = admit(w, m, 20000);
  CHECK(longer.status == admit_status::capped);
  CHECK(longer.reason == admit_reason::window);
  CHECK(longer.fit_tokens == 8192);
}

TEST_CASE("rung 3's line is logged when the clamp engages, changes and lifts, not per admission") {
  const std::uint64_t r = box_reserve_bytes(8 * GiB);
  const fake_watcher tight = at(host_state(8 * GiB, r + r / 8));
  const fake_watcher critical = at(host_state(8 * GiB, r / 2));
  const fake_watcher ok = at(host_state(8 * GiB, 6 * GiB));
  REQUIRE(tight.state.level == mem_level::tight);
  REQUIRE(critical.state.level == mem_level::critical);
  REQUIRE(ok.state.level == mem_level::ok);
  const model_desc m{.kv = kv_format::q4, .gpu_resident = true, .max_window = 16384, .max_slots = 8};
  std::mutex mu;
  std::vector<std::string> log;
  engine_counters c;
  const admit_options o{.log = [&](std::string_view l) {
                          std::lock_guard<std::mutex> lk(mu);
                          log.emplace_back(l);
                        },
                        .counters = &c};
  for (int i = 0; i < 1000; ++i) admit(tight, m, 12000, o);
  CHECK(log == std::vector<std::string>{"[ladder] TIGHT -> prefill window clamped 16384 -> 8192 (rung 3)"});
  CHECK(c.ladder_degradations[static_cast<std::size_t>(mem_level::tight)].load() == 1000);  // counted, all
  // Eight threads at once: still one line per change.
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) admit(critical, m, 12000, o);
    });
  }
  for (std::thread& t : threads) t.join();
  REQUIRE(log.size() == 2);
  CHECK(log[1] == "[ladder] CRITICAL -> prefill window clamped 16384 -> 4096 (rung 3)");
  for (int i = 0; i < 100; ++i) admit(ok, m, 12000, o);
  REQUIRE(log.size() == 3);
  CHECK(log[2] == "[ladder] OK -> prefill window back to 16384 (rung 3 off)");
  admit(tight, m, 100, o);
  CHECK(log.size() == 4);  // engaged again
  // Without counters there is nothing to remember the line in: every clamped admission logs it.
  std::vector<std::string> plain;
  for (int i = 0; i < 3; ++i) admit(tight, m, 12000, {.log = [&](std::string_view l) { plain.emplace_back(l); }});
  CHECK(plain.size() == 3);
}

TEST_CASE("the two window reasons tell a configured cap from a pressure cap without comparing fields") {
  const model_desc m{.kv = kv_format::q4, .gpu_resident = true, .max_window = 4096, .max_slots = 4};
  const fake_watcher ok = at(host_state(64 * GiB, 60 * GiB));
  REQUIRE(ok.state.level == mem_level::ok);
  CHECK(admit(ok, m, 5000).reason == admit_reason::window);  // configured: at any level
  CHECK(admit(ok, m, 3000).status == admit_status::admitted);
  const fake_watcher tight = at(host_state(64 * GiB, 60 * GiB, 0.0, 1.0));  // PSI full > 0: TIGHT
  REQUIRE(tight.state.level == mem_level::tight);
  const admit_answer a = admit(tight, m, 3000);  // within 4096, past the clamp 2048
  CHECK(a.status == admit_status::capped);
  CHECK(a.reason == admit_reason::prefill_window);
  CHECK(a.fit_tokens == 2048);
  CHECK(a.window == 2048);
  CHECK(a.window_clamped);
  CHECK(admit(tight, m, 5000).reason == admit_reason::window);
}

TEST_CASE("explain: a prompt past the window at TIGHT starts the prefill window now, and says so (issue 39 item 8)") {
  const model_desc m{.kv = kv_format::q4, .gpu_resident = true, .max_window = 4096, .max_slots = 4};
  const fake_watcher ok = at(host_state(64 * GiB, 60 * GiB));
  const fake_watcher tight = at(host_state(64 * GiB, 60 * GiB, 0.0, 1.0));
  // At OK the window is what cut it.
  CHECK(explain(admit(ok, m, 5000)) == "capped (window): 4096 tokens, the model's window: the prompt is longer, level ok");
  // At TIGHT the reason stays `window` (the prompt is too long at any level: truncate it to the window), but
  // only the clamp's 2048 start now: the words must not call 2048 the model's window.
  const admit_answer a = admit(tight, m, 5000);
  CHECK(a.fit_tokens == 2048);
  CHECK(explain(a) == "capped (window): 2048 tokens now, the ladder's prefill window at this level: the prompt is "
                      "longer than the model's window, 4096 tokens, level tight");
  CHECK(explain(admit(tight, m, 3000)) == "capped (prefill_window): 2048 tokens now, the ladder's prefill window at this "
                                          "level: the rest of the prompt in later chunks, level tight");
  // An answer whose configured window is not known (a C answer at TIGHT) says only what is sure.
  admit_answer unknown = a;
  unknown.request.max_window = 0;
  CHECK(explain(unknown) == "capped (window): 2048 tokens start now: the prompt is longer than the model's window, level tight");
}

TEST_CASE("explain: one token is \"1 token\" (issue 42 item 15)") {
  const model_desc one{.kv = kv_format::q4, .gpu_resident = true, .max_window = 1, .max_slots = 4};
  const fake_watcher ok = at(host_state(64 * GiB, 60 * GiB));
  CHECK(explain(admit(ok, one, 5)) == "capped (window): 1 token, the model's window: the prompt is longer, level ok");
  const fake_watcher tight = at(host_state(64 * GiB, 60 * GiB, 0.0, 1.0));
  const model_desc two{.kv = kv_format::q4, .gpu_resident = true, .max_window = 2, .max_slots = 4};
  admit_answer a = admit(tight, two, 5);  // the ladder's clamp halves the window of 2 to 1
  REQUIRE(a.fit_tokens == 1);
  CHECK(explain(a) == "capped (window): 1 token now, the ladder's prefill window at this level: the prompt is longer "
                      "than the model's window, 2 tokens, level tight");
  a.request.max_window = 1;
  a.fit_tokens = 0;  // a pairing pnmem never makes: the numbers alone, "0 tokens"
  a.reason = admit_reason::bad_request;
  CHECK(explain(a).find("fit 0 tokens, die") != std::string::npos);
  a.fit_tokens = 1;
  CHECK(explain(a).find("fit 1 token, die") != std::string::npos);
  CHECK(format_count(1, "token") == "1 token");
  CHECK(format_count(0, "token") == "0 tokens");
  CHECK(format_count(2, "prompt token") == "2 prompt tokens");
}

TEST_CASE("at OK nothing is clamped or logged; a prompt inside the window is admitted") {
  const fake_watcher w = at(host_state(64 * GiB, 60 * GiB));
  std::vector<std::string> log;
  const admit_answer a = admit(w, {.gpu_resident = true, .max_window = 16384}, 12000,
                               {.log = [&](std::string_view l) { log.emplace_back(l); }});
  CHECK(log.empty());
  CHECK(a.status == admit_status::admitted);
  CHECK(a.fit_tokens == 12000);
  CHECK_FALSE(a.window_clamped);
  CHECK(a.window == 16384);
}

TEST_CASE("a configured window of 0 (none) is never clamped, even at CRITICAL") {
  const fake_watcher w = at(host_state(64 * GiB, 60 * GiB, 0.0, 1.0));  // PSI full > 0: TIGHT
  REQUIRE(w.state.level == mem_level::tight);
  const admit_answer a = admit(w, {.gpu_resident = true, .max_window = 0}, 100000);
  CHECK_FALSE(a.window_clamped);
  CHECK(a.status == admit_status::admitted);
}

TEST_CASE("4. denials carry the reason and the level; counters by reason") {
  engine_counters c;
  const fake_watcher stalled = at(host_state(64 * GiB, 60 * GiB, 0.0, 20.0));
  const admit_answer a = admit(stalled, {.gpu_resident = true}, 10, {.counters = &c});
  CHECK(a.status == admit_status::denied);
  CHECK(a.reason == admit_reason::psi_stall);
  CHECK(a.level == mem_level::critical);
  CHECK(c.denied[static_cast<std::size_t>(admit_reason::psi_stall)].load() == 1);

  const fake_watcher inside = at(host_state(8 * GiB, 1 * GiB));
  CHECK(admit(inside, {.gpu_resident = true}, 10).reason == admit_reason::host_reserve);
}

TEST_CASE("2. the die: the model's, else the measured die with the least free VRAM") {
  mem_state s = host_state(64 * GiB, 60 * GiB);
  s = add_die(add_die(add_die(s, 40 * GiB, 79 * GiB), 300 * MiB, 79 * GiB), 20 * GiB, 79 * GiB);
  const fake_watcher w = at(s);
  const admit_answer worst = admit(w, {.kv = kv_format::fp32}, 2000);  // host path: the die bounds it
  CHECK(worst.die == 1);
  CHECK(worst.status == admit_status::capped);  // 300 MiB holds the fixed buffers and a short prefix
  CHECK(worst.reason == admit_reason::die_vram);
  const admit_answer named = admit(w, {.kv = kv_format::fp32, .die = 0}, 2000);
  CHECK(named.die == 0);
  CHECK(named.status == admit_status::admitted);
}

TEST_CASE("the decision on a snapshot equals admit_request on the clamped window") {
  pnmem::test::rng g{5};
  for (int i = 0; i < 2000; ++i) {
    mem_state s = host_state(8 * GiB + g.below(56 * GiB), 0, 0.0, g.below(5) == 0 ? 3.0 : 0.0);
    s.host_avail_bytes = g.below(s.host_total_bytes);
    s = with_derived_level(s);
    const model_desc m{.kv = g.below(2) == 0 ? kv_format::q4 : kv_format::fp32, .gpu_resident = g.below(2) == 0,
                       .max_window = static_cast<int>(g.below(40000)), .max_slots = 8};
    const int n = static_cast<int>(g.below(60000));
    const admit_answer a = admit_snapshot(s, m, n, {});
    const int window = ladder_plan_for(s.level, {8, m.max_window, m.kv == kv_format::q4}).prefill_window;
    CHECK(a.window == window);
    const int clamp = window > 0 && window < m.max_window ? window : 0;  // rung 3's, when it cut the window
    const admit_result want = admit_request({n, m.kv, m.gpu_resident, tightest_die(s), m.max_window, clamp}, s);
    CHECK(a.detail == want);
  }
}

TEST_CASE("only the fixed buffers fit: denied, the binding budget and die named, counted by reason") {
  const std::uint64_t fixed = host_cost_bytes(0, kv_format::q4);  // 256 MiB: a 0-token prefix
  const std::uint64_t need = host_cost_bytes(100, kv_format::q4);
  SUBCASE("the tightest die has room for the fixed buffers only") {
    engine_counters c;
    const fake_watcher w =
        at(add_die(add_die(host_state(64 * GiB, 60 * GiB), 40 * GiB, 79 * GiB), fixed, 79 * GiB));
    const admit_answer a = admit(w, {.kv = kv_format::q4}, 100, {.counters = &c});
    CHECK(a.status == admit_status::denied);
    CHECK(a.fit_tokens == 0);
    CHECK(a.reason == admit_reason::die_vram);
    CHECK(a.die == 1);
    CHECK(a.detail.die == 1);
    CHECK(a.detail.need_bytes == need);
    CHECK(a.detail.limit_bytes == fixed);
    CHECK(c.denied[static_cast<std::size_t>(admit_reason::die_vram)].load() == 1);
    CHECK(c.denied[static_cast<std::size_t>(admit_reason::host_budget)].load() == 0);
  }
  SUBCASE("the host budget has room for the fixed buffers only; the die had room") {
    engine_counters c;
    const std::uint64_t r = box_reserve_bytes(8 * GiB);
    const fake_watcher w = at(add_die(host_state(8 * GiB, r + fixed), 40 * GiB, 79 * GiB));
    const admit_answer a = admit(w, {.kv = kv_format::q4}, 100, {.counters = &c});
    CHECK(a.status == admit_status::denied);
    CHECK(a.fit_tokens == 0);
    CHECK(a.reason == admit_reason::host_budget);
    CHECK(a.die == 0);              // the die it was checked against...
    CHECK(a.detail.die == no_die);  // ...did not decide it
    CHECK(a.detail.need_bytes == need);
    CHECK(a.detail.limit_bytes == fixed);
    CHECK(c.denied[static_cast<std::size_t>(admit_reason::host_budget)].load() == 1);
    CHECK(c.denied[static_cast<std::size_t>(admit_reason::die_vram)].load() == 0);
  }
}

TEST_CASE("admit_after_eviction: the live admission, and whether evicting from the running slots makes room") {
  model_cost kv_only = from_shape(uniform_shape(32, 8, 128, 32, 4096));  // Llama f16: 128 KiB per token
  kv_only.activation = activation_model{};
  const model_desc m{.kv = kv_format::f16, .gpu_resident = false, .max_window = 0, .max_slots = 8, .cost = kv_only};
  policy p;
  p.host_reserve_min_bytes = GiB;  // exactly 1 GiB
  p.host_reserve_bp = 0;
  const int running[] = {32768, 8192, 1000, 20000};
  keep_budget_answer keep[4];
  // PSI some 12 %: TIGHT. 64k tokens need 8 GiB; 6 GiB less the reserve is 5: capped, 3 GiB short.
  mem_state s = host_state(64 * GiB, 6 * GiB, 12.0);
  s.level = derive_level(s, p);
  REQUIRE(s.level == mem_level::tight);
  const fake_watcher tight{true, s};
  // By default the evict rung follows memory, and here only PSI is TIGHT: eviction is not considered.
  CHECK_FALSE(admit_after_eviction(tight, m, 65536, 0, running, 4, admit_options{.policy = p}, keep).eviction.considered);
  // With the seed's rule (PN_EVICT_ON_PSI), rung 4b is on at TIGHT whatever raised it.
  p.evict_on_psi = true;
  const admit_options o{.policy = p};
  const admit_eviction_answer a = admit_after_eviction(tight, m, 65536, 0, running, 4, o, keep);
  CHECK(a.answer.status == admit_status::capped);
  CHECK(a.answer.reason == admit_reason::host_budget);
  CHECK(a.eviction.decision == a.answer.detail);
  CHECK(a.eviction.considered);
  CHECK(a.eviction.after_eviction);
  CHECK(a.eviction.evict_bytes == 3 * GiB);
  CHECK(a.eviction.plan.cut_to == 14096);
  CHECK(keep[0].keep_tokens == 14096);
  CHECK(keep[3].freed_bytes == (20000ULL - 14096) * 131072);
  // Admitted as it is: nothing considered.
  CHECK_FALSE(admit_after_eviction(tight, m, 1000, 0, running, 4, o).eviction.considered);
  // At OK rung 4b is off: the cap stands, nothing considered.
  mem_state calm = host_state(64 * GiB, 6 * GiB);
  calm.level = mem_level::ok;
  const admit_eviction_answer off = admit_after_eviction(fake_watcher{true, calm}, m, 65536, 0, running, 4, o);
  CHECK(off.answer.status == admit_status::capped);
  CHECK_FALSE(off.eviction.considered);
  // No watcher: fail open, as pnmem::admit.
  const admit_eviction_answer open = admit_after_eviction(fake_watcher{false, s}, m, 65536, 0, running, 4, o);
  CHECK(open.answer.status == admit_status::fail_open);
  CHECK_FALSE(open.eviction.considered);
}
