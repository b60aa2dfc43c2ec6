// The C ABI when its C++ side throws: a log sink written in C++ that throws
// (std::runtime_error, std::bad_alloc, std::system_error, an int, and on every
// call) from inside pnmem_plan_ladder, pnmem_admit and pnmem_admit_reserved (and, on
// the line naming a refused argument, the model-load checks and pnmem_kv_allocation_for). Each
// call returns its documented error value, writes no answer, reserves nothing,
// logs "pnmem: <function>: <what>" when the sink takes a second line, and the
// process goes on; the next call without a throw works as before. Then a level
// subscription callback written in C++ that throws: logged as
// "pnmem: pnmem_subscribe: <what>", the other subscriber still called, on whichever
// thread delivered the change (the poll thread included), and the process goes on.
//
// The same environment as test_c_api.c (host reserve 1 byte, PSI full reject at
// 100 %), so a die fed at TIGHT puts the box at TIGHT and admission logs the
// ladder's clamp line through the sink: that is where the sink throws.
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>

#include "c_check.h"
#include "pnmem/pnmem_c.h"

namespace {

enum class throws { nothing, runtime_error, bad_alloc, system_error, an_int, always };

struct sink_state {
  throws next = throws::nothing;  // what the next call throws; reset to nothing after one throw
  int calls = 0;
  std::string last;  // the last line taken without throwing
};

sink_state sink_data;

void throw_now(throws what) {
  switch (what) {
    case throws::nothing: return;
    case throws::runtime_error: throw std::runtime_error("the sink failed");
    case throws::bad_alloc: throw std::bad_alloc();
    case throws::system_error: throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again), "sink");
    case throws::an_int: throw 42;
    case throws::always: throw std::runtime_error("the sink fails every time");
  }
}

pnmem_admit_answer untouched_answer() {
  pnmem_admit_answer a;
  std::memset(&a, 0xA5, sizeof a);
  return a;
}

bool same_answer(const pnmem_admit_answer& x, const pnmem_admit_answer& y) {
  return std::memcmp(&x, &y, sizeof x) == 0;
}

pnmem_model make_model(pnmem_kv_format kv, int gpu_resident) {
  pnmem_model m;
  CHECK(pnmem_model_init_reference(&m) == 0);
  m.kv = kv;
  m.gpu_resident = gpu_resident;
  m.max_window = 16384;
  m.max_slots = 8;
  return m;
}

std::atomic<int> throwing_calls{0};
std::atomic<int> counting_calls{0};

}  // namespace

// Level subscribers with C language linkage, as pnmem_level_fn asks; C++, so one can throw.
extern "C" void throwing_subscriber(void*, const pnmem_level_change*) {
  throwing_calls.fetch_add(1);
  throw std::runtime_error("the callback failed");
}
extern "C" void counting_subscriber(void*, const pnmem_level_change*) { counting_calls.fetch_add(1); }

// The sink has C language linkage, as pnmem_log_fn asks; it is C++, so it can throw.
extern "C" void throwing_sink(void* user, const char* line) {
  auto* st = static_cast<sink_state*>(user);
  ++st->calls;
  const throws what = st->next;
  if (what != throws::always) st->next = throws::nothing;
  throw_now(what);
  st->last = line;
}

int main() {
  // Before the first pnmem call: the policy is read from the environment once. The
  // bad PN_DIE_RESERVE_BYTES leaves one "keeping the default" line for the first
  // entry point that loads the policy (pnmem_plan_ladder below) to log.
  CHECK(setenv("PN_HOST_RESERVE_BYTES", "1", 1) == 0);
  CHECK(setenv("PN_PSI_FULL_REJECT", "100", 1) == 0);
  CHECK(setenv("PN_DIE_RESERVE_BYTES", "not-a-size", 1) == 0);
  CHECK(unsetenv("PN_LADDER_DISABLE") == 0);
  pnmem_set_log_sink(throwing_sink, &sink_data);

  // The policy's log line: the sink throws, the plan is the error plan.
  sink_data.next = throws::runtime_error;
  pnmem_ladder_plan p = pnmem_plan_ladder(PNMEM_LEVEL_TIGHT, 8, 16384, false);
  CHECK(p.level == PNMEM_LEVEL_OK);
  CHECK(p.max_slots == 8 && p.prefill_window == 16384 && !p.degraded);
  CHECK(p.note != nullptr && std::strcmp(p.note, "error: operator config") == 0);
  CHECK(sink_data.calls == 2);  // the policy's line (threw), then the boundary's report
  CHECK(sink_data.last == "pnmem: pnmem_plan_ladder: the sink failed");
  // The line was handed over once: the next plan logs nothing and is the real one.
  p = pnmem_plan_ladder(PNMEM_LEVEL_TIGHT, 8, 16384, false);
  CHECK(sink_data.calls == 2);
  CHECK(p.level == PNMEM_LEVEL_TIGHT && p.max_slots == 4 && p.prefill_window == 8192);

  CHECK(pnmem_watcher_start() == 0);
  const std::uint64_t gib = 1024ULL * 1024 * 1024;
  CHECK(pnmem_set_die(0, gib / 2, 16 * gib, 15 * gib, gib) == 0);
  pnmem_state s;
  CHECK(pnmem_read(&s) == 0);
  if (s.level != PNMEM_LEVEL_TIGHT) {
    std::printf("NOTE: not checked: the box reads %s, not TIGHT (PSI full %.2f %%): admission logs no clamp "
                "line, so the sink is never called from pnmem_admit\n",
                pnmem_level_name(s.level), s.host_psi_full_avg10);
  } else {
    // GPU-resident: capped to the clamped window; CPU fp32: admitted on the host path, reserved.
    const pnmem_model gpu = make_model(PNMEM_KV_Q4, 1);
    const pnmem_model cpu = make_model(PNMEM_KV_FP32, 0);
    const pnmem_admit_answer pattern = untouched_answer();
    struct {
      throws what;
      const char* report;  // what the second sink call takes; nullptr: no report gets through
    } const cases[] = {
        {throws::runtime_error, "pnmem: %s: the sink failed"},
        {throws::bad_alloc, "pnmem: %s: out of memory"},
        {throws::system_error, "pnmem: %s: sink: Resource temporarily unavailable"},
        {throws::an_int, "pnmem: %s: unknown exception"},
        {throws::always, nullptr},
    };
    for (const auto& c : cases) {
      for (const bool reserved : {false, true}) {
        const char* entry = reserved ? "pnmem_admit_reserved" : "pnmem_admit";
        sink_data.next = c.what;
        sink_data.calls = 0;
        sink_data.last.clear();
        pnmem_admit_answer a = pattern;
        pnmem_reservation r = 77;
        const int rc = reserved ? pnmem_admit_reserved(&cpu, 512, &a, &r) : pnmem_admit(&gpu, 20000, &a);
        CHECK(rc == -1);
        CHECK(same_answer(a, pattern));
        CHECK(sink_data.calls == 2);
        if (c.report != nullptr) {
          char want[128];
          std::snprintf(want, sizeof want, c.report, entry);
          CHECK(sink_data.last == want);
          if (sink_data.last != want) std::fprintf(stderr, "  got \"%s\", want \"%s\"\n", sink_data.last.c_str(), want);
        } else {
          CHECK(sink_data.last.empty());
        }
        if (reserved) {
          CHECK(r == 0);
          CHECK(pnmem_pending_bytes() == 0);  // the held bytes went back on the throw
        }
      }
    }

    // A sink that does not throw: the same calls answer as before.
    sink_data.next = throws::nothing;
    pnmem_admit_answer a;
    CHECK(pnmem_admit(&gpu, 20000, &a) == 0);
    CHECK(a.status == PNMEM_CAPPED && a.fit_tokens == 8192);
    CHECK(sink_data.last == "[ladder] TIGHT -> prefill window clamped 16384 -> 8192 (rung 3)");
    pnmem_reservation r = 0;
    CHECK(pnmem_admit_reserved(&cpu, 512, &a, &r) == 0);
    CHECK(a.status == PNMEM_ADMITTED && r != 0);
    CHECK(pnmem_pending_bytes() == a.need_bytes);
    pnmem_reservation_cancel(r);
    CHECK(pnmem_pending_bytes() == 0);
  }

  // The model-load checks and pnmem_kv_allocation_for log a line only when they refuse an
  // argument: a sink that throws on it makes the call return -1 with nothing written, and the
  // boundary's report is the sink's second line. Without a throw the same calls answer.
  {
    pnmem_model_load bad;
    CHECK(pnmem_model_load_init(&bad) == 0);
    bad.die = -2;
    const pnmem_admit_answer pattern = untouched_answer();
    for (const bool slice : {false, true}) {
      sink_data.next = throws::runtime_error;
      sink_data.calls = 0;
      sink_data.last.clear();
      pnmem_admit_answer a = pattern;
      CHECK((slice ? pnmem_admit_model_load_die(&bad, &a) : pnmem_admit_model_load(&bad, &a)) == -1);
      CHECK(same_answer(a, pattern));
      CHECK(sink_data.calls == 2);
      CHECK(sink_data.last ==
            std::string("pnmem: ") + (slice ? "pnmem_admit_model_load_die" : "pnmem_admit_model_load") + ": the sink failed");
    }
    pnmem_model m = make_model(PNMEM_KV_FP32, 0);
    m.struct_size = 0;
    const pnmem_ladder_plan plan = pnmem_plan_ladder(PNMEM_LEVEL_WATCH, 8, 0, false);
    pnmem_kv_allocation kv;
    std::memset(&kv, 0xA5, sizeof kv);
    const pnmem_kv_allocation kv_pattern = kv;
    sink_data.next = throws::bad_alloc;
    sink_data.calls = 0;
    sink_data.last.clear();
    CHECK(pnmem_kv_allocation_for(&plan, &m, 1, &kv) == -1);
    CHECK(std::memcmp(&kv, &kv_pattern, sizeof kv) == 0);
    CHECK(sink_data.calls == 2);
    CHECK(sink_data.last == "pnmem: pnmem_kv_allocation_for: out of memory");

    sink_data.next = throws::nothing;
    sink_data.calls = 0;
    bad.die = -1;
    pnmem_admit_answer a = pattern;
    CHECK(pnmem_admit_model_load(&bad, &a) == 0);
    CHECK(!same_answer(a, pattern));
    m = make_model(PNMEM_KV_FP32, 0);
    CHECK(pnmem_kv_allocation_for(&plan, &m, 1, &kv) == 0);
    CHECK(kv.format == PNMEM_KV_Q4 && kv.bytes == 5898);
    CHECK(sink_data.calls == 0);
  }

  // A subscriber that throws: the watcher's delivering thread catches it, logs it, and
  // the next subscriber still runs. The level goes CRITICAL (a die out of VRAM) and back.
  sink_data.next = throws::nothing;
  sink_data.last.clear();
  CHECK(pnmem_set_die(0, 16 * gib, 16 * gib, 0, 0) == 0);  // roomy: the box's own level
  CHECK(pnmem_read(&s) == 0);
  if (s.level == PNMEM_LEVEL_CRITICAL) {
    std::printf("NOTE: not checked: the box reads CRITICAL by itself (PSI full %.2f %%): a die cannot change "
                "the level, so no subscriber is called\n", s.host_psi_full_avg10);
  } else {
    const pnmem_subscription thrower = pnmem_subscribe(throwing_subscriber, nullptr);
    const pnmem_subscription counter = pnmem_subscribe(counting_subscriber, nullptr);
    CHECK(thrower != 0 && counter != 0 && thrower != counter);
    CHECK(pnmem_set_die(0, 0, 16 * gib, 16 * gib, 0) == 0);  // free 0: CRITICAL
    CHECK(pnmem_set_die(0, 16 * gib, 16 * gib, 0, 0) == 0);  // roomy again: below CRITICAL
    // Both changes are delivered (by this thread, or by the poll thread if it was delivering).
    for (int i = 0; i < 500 && (counting_calls.load() < 2 || throwing_calls.load() != counting_calls.load()); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    CHECK(throwing_calls.load() >= 2);
    CHECK(counting_calls.load() == throwing_calls.load());  // each change reached the second one too
    CHECK(sink_data.last == "pnmem: pnmem_subscribe: the callback failed");
    pnmem_unsubscribe(thrower);
    pnmem_unsubscribe(counter);
    const int thrown = throwing_calls.load();
    CHECK(pnmem_set_die(0, 0, 16 * gib, 16 * gib, 0) == 0);
    CHECK(pnmem_set_die(0, 16 * gib, 16 * gib, 0, 0) == 0);
    CHECK(throwing_calls.load() == thrown);  // unsubscribed: not called again
  }

  pnmem_set_log_sink(nullptr, nullptr);
  pnmem_watcher_stop();
  CHECK(!pnmem_watcher_running());
  if (failures == 0) std::printf("c api throw: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
