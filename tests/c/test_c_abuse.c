/* Every entry point of the C ABI (pnmem/pnmem_c.h) called with NULL pointers and
 * out-of-range values, before and after the watcher starts: each returns its
 * documented error value (or does nothing), writes nothing it should not, and the
 * process survives. Valid calls are test_c_api.c's.
 *
 * check_exports.py fails when libpnmem_c.so exports a function this file never
 * calls: a new entry point needs its abuse case here. */
#define _POSIX_C_SOURCE 200809L /* setenv in strict C11 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_check.h"
#include "pnmem/pnmem_c.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* C lets any int through a pnmem_level: the values just past each end, and the extremes. */
static const int bad_levels[] = {-1, PNMEM_LEVEL_CRITICAL + 1, INT_MAX, INT_MIN};
/* Die ids no call accepts (pnmem_set_die also refuses -1, which pnmem_model.die takes as "tightest"). */
static const int bad_model_dies[] = {-2, INT_MIN, PNMEM_MAX_DIES, INT_MAX};
static const int bad_set_dies[] = {-1, -2, INT_MIN, PNMEM_MAX_DIES, INT_MAX};

/* A pattern no call writes: an answer left as it was compares equal to it. */
static pnmem_admit_answer untouched_answer(void) {
  pnmem_admit_answer a;
  memset(&a, 0xA5, sizeof a);
  return a;
}

static int same_answer(const pnmem_admit_answer* x, const pnmem_admit_answer* y) {
  return memcmp(x, y, sizeof *x) == 0;
}

/* Every call here with a bad argument fails the same way whether or not the watcher runs. */
static void bad_arguments(const char* when) {
  printf("bad arguments, %s\n", when);
  pnmem_model model = {.kv_q4 = 1, .gpu_resident = 1, .max_window = 0, .die = -1, .max_slots = 8};
  const pnmem_admit_answer pattern = untouched_answer();
  pnmem_admit_answer a = pattern;
  pnmem_reservation r = 77;

  /* NULL pointers. */
  CHECK(pnmem_read(NULL) == -1);
  CHECK(pnmem_admit(NULL, 1, NULL) == -1);
  CHECK(pnmem_admit(NULL, 1, &a) == -1);
  CHECK(pnmem_admit(&model, 1, NULL) == -1);
  CHECK(same_answer(&a, &pattern));
  CHECK(pnmem_admit_reserved(NULL, 1, &a, &r) == -1);
  CHECK(r == 0);
  r = 77;
  CHECK(pnmem_admit_reserved(&model, 1, NULL, &r) == -1);
  CHECK(r == 0);
  CHECK(pnmem_admit_reserved(&model, 1, &a, NULL) == -1);
  CHECK(pnmem_admit_reserved(NULL, 1, NULL, NULL) == -1);
  CHECK(same_answer(&a, &pattern));
  CHECK(pnmem_gate_acquire(NULL, 0) == PNMEM_GATE_ERROR);
  CHECK(pnmem_gate_acquire(NULL, -1) == PNMEM_GATE_ERROR);
  CHECK(pnmem_gate_acquire(NULL, INT64_MAX) == PNMEM_GATE_ERROR);
  CHECK(pnmem_gate_acquire(NULL, INT64_MIN) == PNMEM_GATE_ERROR);
  pnmem_gate_release(NULL);
  pnmem_gate_notify_pressure(NULL, PNMEM_LEVEL_CRITICAL);
  pnmem_gate_notify_pressure(NULL, (pnmem_level)INT_MAX);
  pnmem_gate_set_capacity(NULL, 4);
  pnmem_gate_set_capacity(NULL, INT_MIN);
  pnmem_gate_destroy(NULL);
  pnmem_set_log_sink(NULL, NULL);
  pnmem_set_log_sink(NULL, &model); /* a user pointer with no sink: silent */

  /* Die ids out of range: an error, and nothing written. */
  for (size_t i = 0; i < N_OF(bad_model_dies); ++i) {
    model.die = bad_model_dies[i];
    a = pattern;
    CHECK(pnmem_admit(&model, 1, &a) == -1);
    CHECK(same_answer(&a, &pattern));
    r = 77;
    CHECK(pnmem_admit_reserved(&model, 1, &a, &r) == -1);
    CHECK(r == 0);
    CHECK(same_answer(&a, &pattern));
  }
  model.die = -1;
  for (size_t i = 0; i < N_OF(bad_set_dies); ++i) {
    CHECK(pnmem_set_die(bad_set_dies[i], 1, 1, 0, 0) == -1);
  }

  /* Levels out of range. */
  for (size_t i = 0; i < N_OF(bad_levels); ++i) {
    const pnmem_level l = (pnmem_level)bad_levels[i];
    CHECK(pnmem_level_name(l) != NULL && strcmp(pnmem_level_name(l), "invalid") == 0);
    const pnmem_ladder_plan p = pnmem_plan_ladder(l, 8, 16384, false);
    CHECK(p.level == PNMEM_LEVEL_OK);
    CHECK(p.max_slots == 8);
    CHECK(p.prefill_window == 16384);
    CHECK(!p.force_kv_q4);
    CHECK(!p.kv_evict);
    CHECK(!p.degraded);
    CHECK(p.note != NULL && strcmp(p.note, "error: operator config") == 0);
  }

  /* Ints the ladder defines for every value: answered, not errors. */
  pnmem_ladder_plan p = pnmem_plan_ladder(PNMEM_LEVEL_CRITICAL, INT_MIN, INT_MIN, true);
  CHECK(p.level == PNMEM_LEVEL_CRITICAL);
  CHECK(p.max_slots == 1);
  CHECK(p.prefill_window == 0);
  CHECK(p.note != NULL && strstr(p.note, "critical") != NULL);

  /* Reservations nobody holds: ignored. */
  pnmem_reservation_settle(0);
  pnmem_reservation_settle(UINT64_MAX);
  pnmem_reservation_cancel(0);
  pnmem_reservation_cancel(UINT64_MAX);
  CHECK(pnmem_pending_bytes() == 0);

  /* A gate from out-of-range sizes: 1 slot, no waiter. A watcher at CRITICAL would
   * fail every acquirer (test_c_api.c's environment keeps a quiet box at OK). */
  pnmem_state s;
  CHECK(pnmem_read(&s) == 0);
  const int box_critical = s.level == PNMEM_LEVEL_CRITICAL;
  if (box_critical) printf("NOTE: the box reads CRITICAL: the gate's slots are not checked\n");
  pnmem_gate* gate = pnmem_gate_create(INT_MIN, INT_MIN);
  CHECK(gate != NULL);
  if (gate != NULL && !box_critical) {
    CHECK(pnmem_gate_acquire(gate, INT64_MIN) == PNMEM_GATE_ACQUIRED); /* negative: no wait */
    CHECK(pnmem_gate_acquire(gate, INT64_MAX) == PNMEM_GATE_QUEUE_FULL); /* would wait: no waiter allowed */
    pnmem_gate_release(gate);
    pnmem_gate_release(gate); /* one more than acquired: nothing to return */
    for (size_t i = 0; i < N_OF(bad_levels); ++i) {
      pnmem_gate_notify_pressure(gate, (pnmem_level)bad_levels[i]); /* ignored, not CRITICAL */
    }
    pnmem_gate_set_capacity(gate, INT_MIN); /* 1 slot */
    pnmem_gate_set_capacity(gate, 0);
    CHECK(pnmem_gate_acquire(gate, INT64_MAX) == PNMEM_GATE_ACQUIRED); /* a slot is free: no wait */
    pnmem_gate_release(gate);
  }
  pnmem_gate_destroy(gate);
}

int main(void) {
  /* Before the first pnmem call, as test_c_api.c: the host's byte bands read OK and
   * PSI at most TIGHT on any box whose full stall is below 100 %. */
  CHECK(setenv("PN_HOST_RESERVE_BYTES", "1", 1) == 0);
  CHECK(setenv("PN_PSI_FULL_REJECT", "100", 1) == 0);
  CHECK(unsetenv("PN_LADDER_DISABLE") == 0);

  bad_arguments("before the watcher exists");
  /* None of the above made a watcher (a bad die id creates nothing). */
  CHECK(!pnmem_watcher_running());
  pnmem_state s;
  CHECK(pnmem_read(&s) == 0);
  CHECK(s.seq == 0 && s.n_dies == 0);
  pnmem_watcher_poll_now(); /* no watcher: nothing */
  pnmem_watcher_stop();
  CHECK(pnmem_read(&s) == 0);
  CHECK(s.seq == 0);

  if (pnmem_watcher_start() != 0) {
    printf("NOTE: the watcher did not start here: the calls with it running are not checked\n");
  } else {
    CHECK(pnmem_watcher_running());
    bad_arguments("with the watcher running");
    CHECK(pnmem_read(&s) == 0);
    CHECK(s.n_dies == 0); /* no bad die id reached the watcher */

    /* In range but not fed, or a negative prompt: an answer (DENIED, bad_request), not an error. */
    pnmem_model model = {.kv_q4 = 1, .gpu_resident = 1, .max_window = 0, .die = PNMEM_MAX_DIES - 1, .max_slots = 8};
    pnmem_admit_answer a;
    CHECK(pnmem_admit(&model, 1, &a) == 0);
    CHECK(a.status == PNMEM_DENIED);
    CHECK(a.reason != NULL && strcmp(a.reason, "bad_request") == 0);
    model.die = -1;
    CHECK(pnmem_admit(&model, -1, &a) == 0);
    CHECK(a.status == PNMEM_DENIED);
    CHECK(a.reason != NULL && strcmp(a.reason, "bad_request") == 0);
    CHECK(pnmem_admit(&model, INT_MIN, &a) == 0);
    CHECK(a.status == PNMEM_DENIED);

    pnmem_watcher_poll_now();
    pnmem_watcher_stop();
    pnmem_watcher_stop(); /* idempotent */
    CHECK(!pnmem_watcher_running());
  }

  if (failures == 0) printf("c api abuse: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
