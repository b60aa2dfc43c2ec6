/* The C ABI from a C11 program: start the watcher, read, feed a die, admit
 * (with the ladder's clamp logged through the sink), plan, stop, fail open. */
#include <stdio.h>
#include <string.h>

#include "pnmem/pnmem.h"

static int failures = 0;
#define CHECK(cond)                                                  \
  do {                                                               \
    if (!(cond)) {                                                   \
      fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                    \
    }                                                                \
  } while (0)

static char last_line[256];
static int lines = 0;
static void sink(void* user, const char* line) {
  CHECK(user == (void*)&lines);
  ++lines;
  snprintf(last_line, sizeof last_line, "%s", line);
}

int main(void) {
  CHECK(pnmem_read(NULL) == -1);
  CHECK(pnmem_admit(NULL, 1, NULL) == -1);
  CHECK(strcmp(pnmem_level_name(PNMEM_LEVEL_TIGHT), "tight") == 0);

  /* Before start: fail open. */
  pnmem_model model = {.kv_q4 = 1, .gpu_resident = 1, .max_window = 16384, .die = -1, .max_slots = 8};
  pnmem_admit_answer a;
  CHECK(pnmem_admit(&model, 20000, &a) == 0);
  CHECK(a.status == PNMEM_FAIL_OPEN);
  CHECK(a.fit_tokens == 20000);

  CHECK(pnmem_watcher_start() == 0);
  CHECK(pnmem_watcher_start() == 0); /* idempotent */
  CHECK(pnmem_watcher_running());

  pnmem_state s;
  CHECK(pnmem_read(&s) == 0);
  CHECK(s.host_total_bytes > 0);
  CHECK(s.host_avail_bytes <= s.host_total_bytes);
  CHECK(s.seq >= 1);

  /* A die nearly full puts the box at TIGHT (free < budget/16). */
  const uint64_t gib = 1024ULL * 1024 * 1024;
  CHECK(pnmem_set_die(16, 1, 1, 0, 0) == -1);
  CHECK(pnmem_set_die(-1, 1, 1, 0, 0) == -1);
  CHECK(pnmem_set_die(0, gib / 2, 16 * gib, 15 * gib, gib) == 0);
  CHECK(pnmem_read(&s) == 0);
  CHECK(s.n_dies == 1);
  CHECK(s.per_die_retiring[0] == gib);
  CHECK(s.level >= PNMEM_LEVEL_TIGHT);

  /* Admission at TIGHT: rung 3 halves the window and says so through the sink. */
  pnmem_set_log_sink(sink, &lines);
  CHECK(pnmem_admit(&model, 20000, &a) == 0);
  if (s.level == PNMEM_LEVEL_TIGHT) {
    CHECK(lines == 1);
    CHECK(strcmp(last_line, "[ladder] TIGHT -> prefill window clamped 16384 -> 8192 (rung 3)") == 0);
    CHECK(a.window == 8192);
  }
  CHECK(a.status == PNMEM_CAPPED || a.status == PNMEM_DENIED);
  CHECK(a.reason != NULL);
  CHECK(a.level == s.level);

  pnmem_ladder_plan p = pnmem_plan_ladder(PNMEM_LEVEL_TIGHT, 8, 16384, false);
  CHECK(p.max_slots == 4);
  CHECK(p.prefill_window == 8192);
  CHECK(p.force_kv_q4);
  CHECK(p.kv_evict);
  CHECK(p.degraded);
  CHECK(p.note != NULL && strstr(p.note, "tight") != NULL);

  /* The gate: two slots; a denial's CRITICAL fails acquirers fast; clearing needs the watcher. */
  pnmem_gate* gate = pnmem_gate_create(2, 4);
  CHECK(gate != NULL);
  CHECK(pnmem_gate_acquire(NULL, 0) == PNMEM_GATE_ERROR);
  CHECK(pnmem_gate_acquire(gate, 0) == PNMEM_GATE_ACQUIRED);
  CHECK(pnmem_gate_acquire(gate, 0) == PNMEM_GATE_ACQUIRED);
  CHECK(pnmem_gate_acquire(gate, 10) == PNMEM_GATE_TIMED_OUT); /* both slots taken */
  pnmem_gate_release(gate);
  CHECK(pnmem_gate_acquire(gate, 0) == PNMEM_GATE_ACQUIRED);
  pnmem_gate_release(gate);
  pnmem_gate_release(gate);
  pnmem_gate_notify_pressure(gate, PNMEM_LEVEL_CRITICAL);
  CHECK(pnmem_gate_acquire(gate, 1000) == PNMEM_GATE_OVERLOADED);
  /* The watcher reports the box back at OK: the gate clears by subscription. */
  CHECK(pnmem_set_die(0, 16 * gib, 16 * gib, 0, 0) == 0);
  pnmem_read(&s);
  if (s.level < PNMEM_LEVEL_TIGHT) CHECK(pnmem_gate_acquire(gate, 1000) == PNMEM_GATE_ACQUIRED);
  pnmem_gate_destroy(gate);
  pnmem_gate_destroy(NULL);

  /* Reserved admissions: the second request sees the first one's bytes as pending
   * until a sample that began after its settle. A host-path (CPU fp32) model. */
  pnmem_model cpu = {.kv_q4 = 0, .gpu_resident = 0, .max_window = 0, .die = -1, .max_slots = 8};
  pnmem_reservation r1 = 0;
  pnmem_reservation r2 = 0;
  CHECK(pnmem_admit_reserved(&cpu, 512, &a, NULL) == -1);
  CHECK(pnmem_admit_reserved(&cpu, 512, &a, &r1) == 0);
  CHECK(a.status == PNMEM_ADMITTED); /* ~324 MiB on a box with GiBs free */
  CHECK(r1 != 0);
  CHECK(a.pending_bytes == 0);
  CHECK(pnmem_pending_bytes() == a.need_bytes);
  pnmem_admit_answer b;
  CHECK(pnmem_admit_reserved(&cpu, 512, &b, &r2) == 0);
  CHECK(b.pending_bytes == a.need_bytes);
  CHECK(r2 != 0 && r2 != r1);
  pnmem_reservation_cancel(r2); /* shed before prefill: back at once */
  CHECK(pnmem_pending_bytes() == a.need_bytes);
  pnmem_reservation_settle(r1); /* allocated: counted until the next sample */
  CHECK(pnmem_pending_bytes() == a.need_bytes);
  pnmem_watcher_poll_now();
  CHECK(pnmem_pending_bytes() == 0);
  pnmem_reservation_settle(r1); /* settled already: ignored */
  pnmem_reservation_cancel(0);
  CHECK(pnmem_pending_bytes() == 0);
  pnmem_model gpu = model;
  CHECK(pnmem_admit_reserved(&gpu, 100, &a, &r1) == 0);
  CHECK(r1 == 0); /* GPU-resident: the host is not charged */

  pnmem_set_log_sink(NULL, NULL);
  pnmem_watcher_poll_now();
  pnmem_watcher_stop();
  CHECK(!pnmem_watcher_running());
  CHECK(pnmem_admit(&model, 100, &a) == 0);
  CHECK(a.status == PNMEM_FAIL_OPEN);

  if (failures == 0) printf("c api: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
