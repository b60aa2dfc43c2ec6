/* Every entry point of the C ABI (pnmem/pnmem_c.h) called with NULL pointers and
 * out-of-range values, before and after the watcher starts: each returns its
 * documented error value (or does nothing), writes nothing it should not, and the
 * process survives. Valid calls are test_c_api.c's.
 *
 * A struct refused field by field (pnmem_model, pnmem_watcher_options) also logs
 * a line naming the field: the sink below keeps the last one.
 *
 * check_exports.py fails when libpnmem_c.so exports a function this file never
 * calls: a new entry point needs its abuse case here. */
#define _POSIX_C_SOURCE 200809L /* setenv in strict C11 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
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

/* The first version's pnmem_model: up to the fields version 2 added. */
#define PNMEM_MODEL_V1_SIZE offsetof(pnmem_model, n_more_windows)
/* pnmem_watcher_options as the first header had it: the intervals, no root. */
#define PNMEM_WATCHER_OPTIONS_V1_SIZE offsetof(pnmem_watcher_options, root)

static char last_line[512];
static void sink(void* user, const char* line) {
  (void)user;
  snprintf(last_line, sizeof last_line, "%s", line);
}

/* The line logged last contains `field` (and is cleared for the next check). */
static int logged(const char* field) {
  const int found = strstr(last_line, field) != NULL;
  if (!found) fprintf(stderr, "  expected a line naming %s, got \"%s\"\n", field, last_line);
  last_line[0] = '\0';
  return found;
}

/* A valid model: pnmem_model_init's, a GPU-resident Q4 request with 8 slots. */
static pnmem_model valid_model(void) {
  pnmem_model m;
  CHECK(pnmem_model_init_reference(&m) == 0);
  m.gpu_resident = 1;
  m.max_slots = 8;
  return m;
}

/* pnmem_admit and pnmem_admit_reserved refuse `model`: -1, nothing written, nothing
 * reserved, and a line naming `field`. */
static void refused(const pnmem_model* model, const char* field) {
  const pnmem_admit_answer pattern = untouched_answer();
  pnmem_admit_answer a = pattern;
  pnmem_reservation r = 77;
  CHECK(pnmem_admit(model, 1, &a) == -1);
  CHECK(same_answer(&a, &pattern));
  CHECK(logged(field));
  CHECK(pnmem_admit_reserved(model, 1, &a, &r) == -1);
  CHECK(r == 0);
  CHECK(same_answer(&a, &pattern));
  CHECK(logged(field));
}

/* pnmem_admit_model_load and pnmem_admit_model_load_die refuse `load`: -1, nothing written,
 * and a line naming `field`. */
static void refused_load(const pnmem_model_load* load, const char* field) {
  const pnmem_admit_answer pattern = untouched_answer();
  pnmem_admit_answer a = pattern;
  CHECK(pnmem_admit_model_load(load, &a) == -1);
  CHECK(same_answer(&a, &pattern));
  CHECK(logged(field));
  CHECK(pnmem_admit_model_load_die(load, &a) == -1);
  CHECK(same_answer(&a, &pattern));
  CHECK(logged(field));
  pnmem_reservation r = 77;
  CHECK(pnmem_admit_model_load_reserved(load, &a, &r) == -1);
  CHECK(same_answer(&a, &pattern));
  CHECK(r == 0);
  CHECK(logged(field));
  r = 77;
  CHECK(pnmem_admit_model_load_die_reserved(load, &a, &r) == -1);
  CHECK(same_answer(&a, &pattern));
  CHECK(r == 0);
  CHECK(logged(field));
}

/* The model-load checks and rung 4a's KV allocation with bad arguments. `running`: the watcher
 * runs (no die is ever fed here). */
static void bad_load_arguments(int running) {
  const pnmem_admit_answer pattern = untouched_answer();
  pnmem_admit_answer a = pattern;

  /* pnmem_model_load_init: NULL, or a size below the first version's (nothing written). */
  CHECK(pnmem_model_load_init(NULL) == -1);
  CHECK(pnmem_model_load_init_sized(NULL, sizeof(pnmem_model_load)) == -1);
  pnmem_model_load l;
  memset(&l, 0x33, sizeof l);
  const pnmem_model_load garbage = l;
  CHECK(pnmem_model_load_init_sized(&l, 0) == -1);
  CHECK(pnmem_model_load_init_sized(&l, sizeof l - 1) == -1);
  CHECK(pnmem_model_load_init_sized(&l, SIZE_MAX) == -1);
  CHECK(memcmp(&l, &garbage, sizeof l) == 0);

  /* NULL pointers: -1, nothing written. */
  CHECK(pnmem_model_load_init(&l) == 0);
  CHECK(pnmem_admit_model_load(NULL, &a) == -1);
  CHECK(pnmem_admit_model_load(&l, NULL) == -1);
  CHECK(pnmem_admit_model_load(NULL, NULL) == -1);
  CHECK(pnmem_admit_model_load_die(NULL, &a) == -1);
  CHECK(pnmem_admit_model_load_die(&l, NULL) == -1);
  CHECK(pnmem_admit_model_load_die(NULL, NULL) == -1);
  CHECK(pnmem_admit_load_spike(NULL) == -1);
  pnmem_reservation held = 77;
  CHECK(pnmem_admit_model_load_reserved(NULL, &a, &held) == -1);
  CHECK(held == 0);
  CHECK(pnmem_admit_model_load_reserved(&l, NULL, &held) == -1);
  CHECK(pnmem_admit_model_load_reserved(&l, &a, NULL) == -1);
  held = 77;
  CHECK(pnmem_admit_model_load_die_reserved(NULL, &a, &held) == -1);
  CHECK(held == 0);
  CHECK(pnmem_admit_model_load_die_reserved(&l, NULL, &held) == -1);
  CHECK(pnmem_admit_model_load_die_reserved(&l, &a, NULL) == -1);
  /* pnmem_reserve_die_bytes: NULL pointers, dies out of range (logged, nothing reserved). */
  held = 77;
  CHECK(pnmem_reserve_die_bytes(0, 1, 0, NULL, &held) == -1);
  CHECK(held == 0);
  CHECK(pnmem_reserve_die_bytes(0, 1, 0, &a, NULL) == -1);
  const int bad_dies[] = {-1, PNMEM_MAX_DIES, INT_MIN, INT_MAX};
  for (size_t i = 0; i < N_OF(bad_dies); ++i) {
    held = 77;
    CHECK(pnmem_reserve_die_bytes(bad_dies[i], 1, 0, &a, &held) == -1);
    CHECK(held == 0);
    CHECK(logged("outside [0, 16)"));
    CHECK(pnmem_set_die_uuid(bad_dies[i], "GPU-11111111-2222-3333-4444-555555555555") == -1);
    CHECK(logged("outside [0, 16)"));
  }
  CHECK(same_answer(&a, &pattern));
  /* pnmem_set_die_uuid: NULL, and text that is no GPU UUID (each logged, quoted). */
  CHECK(pnmem_set_die_uuid(0, NULL) == -1);
  const char* bad_uuids[] = {"", "GPU-", "GPU-1111111-2222-3333-4444-555555555555", "not a uuid",
                             "00000000-0000-0000-0000-000000000000", "GPU-11111111-2222-3333-4444-55555555555\n"};
  for (size_t i = 0; i < N_OF(bad_uuids); ++i) {
    CHECK(pnmem_set_die_uuid(0, bad_uuids[i]) == -1);
    CHECK(logged("not a GPU's UUID"));
  }
  /* A die not fed: the die reservation is "bad_request" (running) or fails open; nothing is held. */
  held = 77;
  CHECK(pnmem_reserve_die_bytes(3, 1, 0, &a, &held) == 0);
  CHECK(held == 0);
  CHECK(a.status == (running ? PNMEM_DENIED : PNMEM_FAIL_OPEN));
  CHECK(a.die == 3);
  CHECK(a.need_bytes == 1);
  a = pattern;

  /* Loads refused field by field. */
  l.struct_size = 0;
  refused_load(&l, "load->struct_size is 0: initialise it with pnmem_model_load_init");
  l.struct_size = 8;
  refused_load(&l, "load->struct_size is 8, smaller than the first version's");
  for (size_t i = 0; i < N_OF(bad_model_dies); ++i) {
    CHECK(pnmem_model_load_init(&l) == 0);
    l.die = bad_model_dies[i];
    refused_load(&l, "load->die is");
  }

  /* A newer caller's larger struct: initialised whole (its tail zeroed) and accepted. */
  struct {
    pnmem_model_load l;
    unsigned char newer_fields[24];
  } big;
  memset(&big, 0x77, sizeof big);
  CHECK(pnmem_model_load_init_sized(&big.l, sizeof big) == 0);
  CHECK(big.l.struct_size == sizeof big && big.l.die == -1 && big.l.weights_bytes == 0);
  CHECK(big.newer_fields[0] == 0 && big.newer_fields[23] == 0);
  a = pattern;
  CHECK(pnmem_admit_model_load(&big.l, &a) == 0);
  CHECK(!same_answer(&a, &pattern));

  /* Values the checks define: answered, not errors. No die is fed, so there is nothing to
   * load onto (bad_request), whatever the bytes; without a watcher everything fails open. */
  const uint64_t sizes[] = {0, 1, UINT64_MAX};
  const int dies[] = {-1, 0, PNMEM_MAX_DIES - 1};
  for (size_t i = 0; i < N_OF(sizes); ++i) {
    for (size_t d = 0; d < N_OF(dies); ++d) {
      CHECK(pnmem_model_load_init(&l) == 0);
      l.weights_bytes = sizes[i];
      l.kv_bytes = sizes[N_OF(sizes) - 1 - i];
      l.die = dies[d];
      CHECK(pnmem_admit_model_load(&l, &a) == 0);
      CHECK(a.status == (running ? PNMEM_DENIED : PNMEM_FAIL_OPEN));
      CHECK(a.reason != NULL && strcmp(a.reason, running ? "bad_request" : "not_watching") == 0);
      CHECK(a.die == dies[d]);
      CHECK(pnmem_admit_model_load_die(&l, &a) == 0);
      CHECK(a.status == (running ? PNMEM_DENIED : PNMEM_FAIL_OPEN));
      CHECK(a.die == dies[d]);
    }
  }
  CHECK(pnmem_admit_load_spike(&a) == 0);
  CHECK(running ? (a.status == PNMEM_ADMITTED || a.status == PNMEM_DENIED) : a.status == PNMEM_FAIL_OPEN);

  /* pnmem_kv_allocation_for: NULL pointers and refused models write nothing. */
  pnmem_model m = valid_model();
  pnmem_ladder_plan plan = pnmem_plan_ladder(PNMEM_LEVEL_OK, 8, 0, false);
  pnmem_kv_allocation kv;
  memset(&kv, 0xA5, sizeof kv);
  const pnmem_kv_allocation kv_pattern = kv;
  CHECK(pnmem_kv_allocation_for(NULL, &m, 1, &kv) == -1);
  CHECK(pnmem_kv_allocation_for(&plan, NULL, 1, &kv) == -1);
  CHECK(pnmem_kv_allocation_for(&plan, &m, 1, NULL) == -1);
  CHECK(pnmem_kv_allocation_for(NULL, NULL, 0, NULL) == -1);
  m.struct_size = 0;
  CHECK(pnmem_kv_allocation_for(&plan, &m, 1, &kv) == -1);
  CHECK(logged("pnmem: pnmem_kv_allocation_for: model->struct_size is 0"));
  m = valid_model();
  m.compact_kv = (pnmem_kv_format)PNMEM_KV_FORMATS;
  CHECK(pnmem_kv_allocation_for(&plan, &m, 1, &kv) == -1);
  CHECK(logged("model->compact_kv is 7"));
  CHECK(memcmp(&kv, &kv_pattern, sizeof kv) == 0);
  /* A plan's flag holding any byte but 0 reads as set (a C struct may hold anything there);
   * a length past what 64 bits hold saturates. */
  m = valid_model();
  memset(&plan, 0x5A, sizeof plan);
  CHECK(pnmem_kv_allocation_for(&plan, &m, 1000, &kv) == 0);
  CHECK(kv.format == PNMEM_KV_Q4 && kv.bytes == 5898000);
  memset(&plan, 0, sizeof plan);
  CHECK(pnmem_kv_allocation_for(&plan, &m, UINT64_MAX, &kv) == 0);
  CHECK(kv.format == PNMEM_KV_FP32 && kv.bytes == UINT64_MAX);
}

/* A valid description (the Llama-3-8B shape's f16 KV: 131072 B/token). */
static const char good_json[] =
    "{\"format\": \"pnmem-model\", \"version\": 1, \"kv_bytes_per_token\": 131072, "
    "\"activation\": {\"fixed_bytes\": \"256MiB\"}}";

/* pnmem_model_cost_from_json refuses `json`: -1, the model untouched, a message in err. */
static void bad_json(const char* json, size_t len, const char* message_part) {
  pnmem_model m = valid_model();
  const pnmem_model before = m;
  char err[256];
  memset(err, 'x', sizeof err);
  CHECK(pnmem_model_cost_from_json(json, len, &m, err, sizeof err) == -1);
  CHECK(memcmp(&m, &before, sizeof m) == 0);
  CHECK(memchr(err, '\0', sizeof err) != NULL);
  CHECK(err[0] != '\0');
  if (strstr(err, message_part) == NULL) {
    fprintf(stderr, "  json %.40s...: expected a message with \"%s\", got \"%s\"\n", json, message_part, err);
    CHECK(strstr(err, message_part) != NULL);
  }
}

/* Every new entry point of the model, options, policy, budget, reservation, subscription
 * and explanation calls, with bad arguments. `running`: the watcher runs. */
/* A cache that says it freed everything there is. */
static int abuse_frees;
static uint64_t abuse_free_all(uint64_t want, void* user) {
  (void)want;
  (void)user;
  ++abuse_frees;
  return UINT64_MAX;
}

static void bad_new_arguments(int running) {
  const pnmem_admit_answer pattern = untouched_answer();
  pnmem_admit_answer a = pattern;
  pnmem_reservation r = 77;

  /* pnmem_model_init / pnmem_watcher_options_init: NULL, or a size below the first version's. */
  CHECK(pnmem_model_init(NULL) == -1);
  CHECK(pnmem_model_init_reference(NULL) == -1);
  CHECK(pnmem_model_init_reference_sized(NULL, sizeof(pnmem_model)) == -1);
  CHECK(pnmem_model_init_sized(NULL, sizeof(pnmem_model)) == -1);
  pnmem_model m;
  memset(&m, 0x33, sizeof m);
  const pnmem_model garbage = m;
  CHECK(pnmem_model_init_sized(&m, 0) == -1);
  CHECK(pnmem_model_init_sized(&m, PNMEM_MODEL_V1_SIZE - 1) == -1);
  CHECK(pnmem_model_init_sized(&m, SIZE_MAX) == -1); /* more than a uint32_t struct_size says */
  CHECK(pnmem_model_init_preallocated_sized(NULL, sizeof(pnmem_model)) == -1);
  CHECK(pnmem_model_init_preallocated_sized(&m, PNMEM_MODEL_V1_SIZE - 1) == -1);
  CHECK(pnmem_model_init_preallocated_sized(&m, SIZE_MAX) == -1);
  CHECK(pnmem_check_bytes(1, -1, NULL) == -1);
  CHECK(pnmem_check_bytes(1, INT_MIN, NULL) == -1);
  CHECK(pnmem_metrics_text(NULL, 1, PNMEM_METRICS_BOX) == -1);
  CHECK(pnmem_retry_after_ms(NULL, NULL) == -1);
  /* Any whole-seconds value is answered: no pointer, nothing to refuse; never negative. */
  CHECK(pnmem_retry_after_seconds(INT64_MIN) == 0);
  CHECK(pnmem_retry_after_seconds(-1) == 0);
  CHECK(pnmem_retry_after_seconds(INT64_MAX) == INT64_MAX / 1000 + 1);
  /* Which bases are guesses: the two that rest on the pressure's age; NULL and a stranger's name are not. */
  CHECK(pnmem_retry_basis_is_guess("no_recovery") == 1);
  CHECK(pnmem_retry_basis_is_guess("memory_falling") == 1);
  CHECK(pnmem_retry_basis_is_guess("host_recovery") == 0);
  CHECK(pnmem_retry_basis_is_guess("pending_expiry") == 0);
  CHECK(pnmem_retry_basis_is_guess("none") == 0);
  CHECK(pnmem_retry_basis_is_guess(NULL) == 0);
  CHECK(pnmem_retry_basis_is_guess("no_recovery ") == 0);
  /* pnmem_admit_wait with NULLs and a refused model: -1, as pnmem_admit. */
  {
    pnmem_admit_answer wa;
    pnmem_model wm;
    CHECK(pnmem_model_init_preallocated(&wm) == 0);
    CHECK(pnmem_admit_wait(NULL, 1, 0, &wa) == -1);
    CHECK(pnmem_admit_wait(&wm, 1, 0, NULL) == -1);
    wm.zero_cost = (pnmem_zero_cost)-1;
    CHECK(pnmem_admit_wait(&wm, 1, 0, &wa) == -1);
    wm.zero_cost = PNMEM_ZERO_COST_HOLD;
    CHECK(pnmem_admit_wait(&wm, 1, INT64_MIN, &wa) == 0);
    /* A negative count is answered as pnmem_admit answers it: bad_request with a watcher, fail open without. */
    pnmem_admit_answer plain;
    CHECK(pnmem_admit(&wm, -1, &plain) == 0);
    CHECK(pnmem_admit_wait(&wm, -1, 0, &wa) == 0 && wa.status == plain.status && wa.reason == plain.reason);
  }
  CHECK(pnmem_metrics_text(NULL, 0, ~0u) == -1);
  CHECK(memcmp(&m, &garbage, sizeof m) == 0);
  CHECK(pnmem_watcher_options_init(NULL) == -1);
  CHECK(pnmem_watcher_options_init_sized(NULL, sizeof(pnmem_watcher_options)) == -1);
  pnmem_watcher_options o;
  memset(&o, 0x33, sizeof o);
  CHECK(pnmem_watcher_options_init_sized(&o, 0) == -1);
  CHECK(pnmem_watcher_options_init_sized(&o, PNMEM_WATCHER_OPTIONS_V1_SIZE - 1) == -1);
  CHECK(o.struct_size == 0x33333333u);
  CHECK(pnmem_watcher_options_init_sized(&o, PNMEM_WATCHER_OPTIONS_V1_SIZE) == 0); /* a first-version caller */
  CHECK(o.struct_size == PNMEM_WATCHER_OPTIONS_V1_SIZE);
  CHECK(pnmem_watcher_options_init(&o) == 0 && o.root == NULL);

  /* pnmem_snapshot_init / pnmem_read_snapshot: NULL, a struct_size 0 or below the first version's
   * (too big for a uint32_t in the init): -1, nothing written, and a line naming the field. */
  CHECK(pnmem_snapshot_init(NULL) == -1);
  CHECK(pnmem_snapshot_init_sized(NULL, sizeof(pnmem_snapshot)) == -1);
  pnmem_snapshot snap;
  memset(&snap, 0x33, sizeof snap);
  const pnmem_snapshot snap_garbage = snap;
  CHECK(pnmem_snapshot_init_sized(&snap, 0) == -1);
  CHECK(pnmem_snapshot_init_sized(&snap, offsetof(pnmem_snapshot, host_level) - 1) == -1); /* below the first version */
  CHECK(pnmem_snapshot_init_sized(&snap, sizeof(uint32_t)) == -1);
  CHECK(pnmem_snapshot_init_sized(&snap, SIZE_MAX) == -1);
  CHECK(memcmp(&snap, &snap_garbage, sizeof snap) == 0);
  CHECK(pnmem_read_snapshot(NULL) == -1);
  snap.struct_size = 0;
  CHECK(pnmem_read_snapshot(&snap) == -1);
  CHECK(logged("pnmem: pnmem_read_snapshot: out->struct_size is 0: initialise it with pnmem_snapshot_init"));
  snap.struct_size = (uint32_t)sizeof(pnmem_state); /* an older, smaller struct than any version */
  CHECK(pnmem_read_snapshot(&snap) == -1);
  CHECK(logged("smaller than the first version's"));
  snap.struct_size = 0x33333333u;
  CHECK(memcmp(&snap, &snap_garbage, sizeof snap) == 0);
  CHECK(pnmem_snapshot_init(&snap) == 0);
  CHECK(pnmem_read_snapshot(&snap) == 0);
  CHECK(snap.struct_size == sizeof snap);
  CHECK(running ? snap.state.seq >= 1 : snap.state.seq == 0);

  /* pnmem_room_init / pnmem_host_room: the same rules. */
  CHECK(pnmem_room_init(NULL) == -1);
  pnmem_room room;
  memset(&room, 0x44, sizeof room);
  const pnmem_room room_garbage = room;
  CHECK(pnmem_room_init_sized(&room, 0) == -1);
  CHECK(pnmem_room_init_sized(&room, sizeof room - 1) == -1);
  CHECK(pnmem_room_init_sized(&room, SIZE_MAX) == -1);
  CHECK(memcmp(&room, &room_garbage, sizeof room) == 0);
  CHECK(pnmem_host_room(NULL) == -1);
  room.struct_size = 0;
  CHECK(pnmem_host_room(&room) == -1);
  CHECK(logged("pnmem: pnmem_host_room: out->struct_size is 0: initialise it with pnmem_room_init"));
  room.struct_size = 0x44444444u;
  CHECK(memcmp(&room, &room_garbage, sizeof room) == 0);
  CHECK(pnmem_room_init(&room) == 0);
  CHECK(pnmem_host_room(&room) == 0);
  CHECK(room.struct_size == sizeof room);
  CHECK(room.sampled == (running ? 1 : 0));
  /* A credit of nothing, or of more than any box holds: accepted, and MemAvailable never passes the total. */
  CHECK(pnmem_credit_freed(0) == 0);
  if (running) {
    CHECK(pnmem_credit_freed(UINT64_MAX) == 0);
    CHECK(pnmem_credit_freed(UINT64_MAX) == 0);
    pnmem_budget budget;
    CHECK(pnmem_host_budget(&budget) == 0);
    CHECK(pnmem_host_room(&room) == 0);
    CHECK(budget.total_bytes == 0 || room.avail_bytes == budget.total_bytes);
    CHECK(room.credited_bytes == UINT64_MAX);
    pnmem_watcher_poll_now(); /* a sample after the credits: they are gone */
    CHECK(pnmem_host_room(&room) == 0);
    CHECK(room.credited_bytes == 0);
  }

  /* pnmem_make_room: NULL out or reservation (nothing asked of the cache), a NULL cache (the answer
   * alone), a cache that claims to have freed everything there is. pnmem_shed_bytes: NULL.
   * pnmem_set_shed_hook: NULL removes, twice is fine. */
  {
    pnmem_reservation held = 5;
    CHECK(pnmem_make_room(1, 0, abuse_free_all, NULL, NULL, &held) == -1);
    CHECK(held == 0);
    CHECK(pnmem_make_room(1, 0, abuse_free_all, NULL, &a, NULL) == -1);
    CHECK(abuse_frees == 0);
    CHECK(pnmem_make_room(UINT64_MAX, -5, NULL, NULL, &a, &held) == 0);
    CHECK(held == 0);
    CHECK(a.status == (running ? PNMEM_CAPPED : PNMEM_FAIL_OPEN));
    CHECK(pnmem_make_room(UINT64_MAX, 0, abuse_free_all, NULL, &a, &held) == 0); /* "freed" 2^64-1 B */
    CHECK(held == 0); /* more than any box holds, whatever was "freed" */
    pnmem_reservation_cancel(held);
    uint64_t shed = 7;
    CHECK(pnmem_shed_bytes(NULL) == -1);
    CHECK(pnmem_shed_bytes(&shed) == 0);
    CHECK(pnmem_set_shed_hook(NULL, NULL) == 0);
    CHECK(pnmem_set_shed_hook(abuse_free_all, NULL) == 0);
    CHECK(pnmem_set_shed_hook(abuse_free_all, NULL) == 0);
    CHECK(pnmem_set_shed_hook(NULL, NULL) == 0);
    if (running) pnmem_watcher_poll_now(); /* the credits are gone */
    /* pnmem_admit_host_load: NULL out, negative or inverted contexts (logged), the largest numbers. */
    CHECK(pnmem_admit_host_load(1, 1, 10, 1, 0, NULL, &held) == -1);
    CHECK(pnmem_admit_host_load(1, 1, -1, 0, 0, &a, NULL) == -1);
    CHECK(logged("pnmem_admit_host_load"));
    CHECK(pnmem_admit_host_load(1, 1, 10, 11, 0, &a, &held) == -1);
    CHECK(held == 0);
    CHECK(pnmem_admit_host_load(UINT64_MAX, UINT64_MAX, INT_MAX, 0, -1, &a, &held) == 0);
    CHECK(held == 0 && (a.status == PNMEM_DENIED || a.status == PNMEM_FAIL_OPEN));
    /* pnmem_set_fleet_load: any numbers are taken (a ratio past 1 reads 1). */
    CHECK(pnmem_set_fleet_load(UINT64_MAX, UINT64_MAX, 0, UINT64_MAX, 1) == 0);
    CHECK(pnmem_set_fleet_load(0, 0, 0, 0, 0) == 0);
  }

  /* A newer caller's larger struct: initialised whole (its tail zeroed) and accepted. */
  struct {
    pnmem_model m;
    unsigned char newer_fields[40];
  } big;
  memset(&big, 0x77, sizeof big);
  CHECK(pnmem_model_init_reference_sized(&big.m, sizeof big) == 0);
  CHECK(big.m.struct_size == sizeof big);
  CHECK(big.m.die == -1 && big.m.full_kv_bytes_per_token[PNMEM_KV_FP32] == 40960);
  CHECK(big.newer_fields[0] == 0 && big.newer_fields[39] == 0);
  a = pattern;
  CHECK(pnmem_admit(&big.m, 1, &a) == 0);
  CHECK(!same_answer(&a, &pattern));

  /* pnmem_watcher_start_with: NULL, struct_size 0 or too small, an interval of 0. None of
   * these creates or starts a watcher (main checks it before the start). */
  CHECK(pnmem_watcher_start_with(NULL) == -1);
  CHECK(pnmem_watcher_options_init(&o) == 0);
  o.struct_size = 0;
  CHECK(pnmem_watcher_start_with(&o) == -1);
  CHECK(logged("options->struct_size is 0: initialise it with pnmem_watcher_options_init"));
  o.struct_size = 8;
  CHECK(pnmem_watcher_start_with(&o) == -1);
  CHECK(logged("options->struct_size is 8, smaller than the first version's"));
  CHECK(pnmem_watcher_options_init(&o) == 0);
  o.poll_interval_ms = 0;
  CHECK(pnmem_watcher_start_with(&o) == -1);
  CHECK(logged("options->poll_interval_ms is 0"));
  CHECK(pnmem_watcher_options_init(&o) == 0);
  o.pressure_poll_interval_ms = 0;
  CHECK(pnmem_watcher_start_with(&o) == -1);
  CHECK(logged("options->pressure_poll_interval_ms is 0"));
  CHECK(pnmem_watcher_options_init(&o) == 0);
  o.root = "";
  CHECK(pnmem_watcher_start_with(&o) == -1);
  CHECK(logged("options->root is empty"));
  {
    static char long_root[5000];
    memset(long_root, 'a', sizeof long_root - 1);
    o.root = long_root;
    CHECK(pnmem_watcher_start_with(&o) == -1);
    CHECK(logged("options->root is longer than 4095 bytes"));
  }

  /* Models refused field by field. */
  m = valid_model();
  m.struct_size = 0;
  refused(&m, "model->struct_size is 0: initialise it with pnmem_model_init");
  m.struct_size = (uint32_t)PNMEM_MODEL_V1_SIZE - 1;
  refused(&m, "model->struct_size is");
  m = valid_model();
  m.n_more_windows = PNMEM_MAX_KV_WINDOWS;
  refused(&m, "model->n_more_windows is 4");
  m = valid_model();
  m.sliding_window = 4096;
  m.n_more_windows = 1;
  m.more_windows[0].window = 4096; /* not above sliding_window */
  refused(&m, "model->more_windows[0].window is 4096: not above sliding_window");
  m.more_windows[0].window = 0;
  refused(&m, "model->more_windows[0].window is 0");
  /* A caller compiled against version 1 (its struct ends before n_more_windows): accepted, and the
   * fields it does not have read as none. */
  m = valid_model();
  m.struct_size = (uint32_t)PNMEM_MODEL_V1_SIZE;
  m.n_more_windows = 77; /* past the caller's struct: not read */
  a = pattern;
  CHECK(pnmem_admit(&m, 1, &a) == 0);
  /* A caller compiled against version 2 (its struct ends before zero_cost): the policy's rule. */
  m = valid_model();
  m.struct_size = (uint32_t)offsetof(pnmem_model, zero_cost);
  m.zero_cost = (pnmem_zero_cost)77; /* past the caller's struct: not read */
  a = pattern;
  CHECK(pnmem_admit(&m, 1, &a) == 0);
  m = valid_model();
  m.zero_cost = (pnmem_zero_cost)4;
  refused(&m, "model->zero_cost is 4: not a pnmem_zero_cost");
  m = valid_model();
  m.kv = (pnmem_kv_format)PNMEM_KV_FORMATS;
  refused(&m, "model->kv is 7: not a pnmem_kv_format");
  m.kv = (pnmem_kv_format)-2;
  refused(&m, "model->kv is -2");
  m.kv = PNMEM_KV_UNSET; /* the model's own format (normal_kv): valid */
  a = pattern;
  CHECK(pnmem_admit(&m, 1, &a) == 0);
  m = valid_model();
  m.normal_kv = (pnmem_kv_format)INT_MAX;
  refused(&m, "model->normal_kv");
  m = valid_model();
  m.compact_kv = (pnmem_kv_format)INT_MIN;
  refused(&m, "model->compact_kv");
  m = valid_model();
  m.n_anchors = PNMEM_MAX_ACTIVATION_ANCHORS + 1;
  refused(&m, "model->n_anchors is 9");
  m.n_anchors = UINT32_MAX;
  refused(&m, "model->n_anchors");
  m = valid_model();
  m.anchors[2].tokens = m.anchors[1].tokens; /* not increasing */
  refused(&m, "model->anchors[2].tokens");
  m = valid_model();
  m.anchors[3].peak_bytes = m.anchors[2].peak_bytes - 1; /* decreasing */
  refused(&m, "model->anchors[3].peak_bytes");
  m = valid_model();
  m.activation_per_token_bytes = 1; /* a table and coefficients */
  refused(&m, "model->activation_fixed_bytes");
  for (size_t i = 0; i < N_OF(bad_model_dies); ++i) {
    m = valid_model();
    m.die = bad_model_dies[i];
    refused(&m, "model->die");
  }
  /* Anchors past n_anchors are not read: garbage there is accepted. */
  m = valid_model();
  m.n_anchors = 2;
  m.anchors[5].tokens = 1;
  a = pattern;
  CHECK(pnmem_admit(&m, 1, &a) == 0);

  /* pnmem_model_cost_from_json: NULL pointers, a bad struct_size, bad descriptions. */
  char err[64];
  m = valid_model();
  pnmem_model before = m;
  CHECK(pnmem_model_cost_from_json(NULL, 10, &m, err, sizeof err) == -1);
  CHECK(strcmp(err, "json is NULL") == 0);
  CHECK(pnmem_model_cost_from_json(good_json, strlen(good_json), NULL, err, sizeof err) == -1);
  CHECK(strcmp(err, "model is NULL") == 0);
  CHECK(pnmem_model_cost_from_json(NULL, 0, NULL, NULL, 0) == -1);
  CHECK(pnmem_model_cost_from_json(NULL, 0, NULL, NULL, 100) == -1); /* err NULL: no message, no crash */
  m.struct_size = 0;
  before = m;
  CHECK(pnmem_model_cost_from_json(good_json, strlen(good_json), &m, err, sizeof err) == -1);
  CHECK(strstr(err, "model->struct_size is 0") == err);
  CHECK(memcmp(&m, &before, sizeof m) == 0);
  bad_json(good_json, 0, "not JSON");
  bad_json(good_json, strlen(good_json) - 1, "not JSON"); /* cut before its last brace */
  bad_json("", 0, "not JSON");
  bad_json("{", 1, "not JSON");
  bad_json("[]", 2, "expected an object");
  {
    static const char other[] = "{\"format\": \"other\"}";
    bad_json(other, strlen(other), "format");
    static const char version_3[] = "{\"format\": \"pnmem-model\", \"version\": 3}";
    bad_json(version_3, strlen(version_3), "version");
  }
  {
    static const char no_activation[] = "{\"format\": \"pnmem-model\", \"version\": 1, \"kv_bytes_per_token\": 1}";
    bad_json(no_activation, strlen(no_activation), "activation");
    static const char unknown_format[] =
        "{\"format\": \"pnmem-model\", \"version\": 1, \"kv_bytes_per_token\": 1, \"normal_kv\": \"q3\", "
        "\"activation\": {\"fixed_bytes\": 0}}";
    bad_json(unknown_format, strlen(unknown_format), "normal_kv");
    static const char nine_anchors[] =
        "{\"format\": \"pnmem-model\", \"version\": 1, \"kv_bytes_per_token\": 1, \"activation\": {\"anchors\": "
        "[[0,1],[1,1],[2,1],[3,1],[4,1],[5,1],[6,1],[7,1],[8,1]]}}";
    bad_json(nine_anchors, strlen(nine_anchors), "activation.anchors");
    static const char decreasing[] =
        "{\"format\": \"pnmem-model\", \"version\": 1, \"kv_bytes_per_token\": 1, \"activation\": {\"anchors\": "
        "[[0,1],[4096,9],[1024,10]]}}";
    bad_json(decreasing, strlen(decreasing), "tokens must increase");
    static const char negative[] = "{\"format\": \"pnmem-model\", \"version\": 1, \"kv_bytes_per_token\": -1}";
    bad_json(negative, strlen(negative), "negative");
  }
  /* err's length: truncated and NUL-terminated; 0 leaves it alone. */
  m = valid_model();
  before = m;
  memset(err, 'x', sizeof err);
  CHECK(pnmem_model_cost_from_json("{", 1, &m, err, 0) == -1);
  CHECK(err[0] == 'x');
  CHECK(pnmem_model_cost_from_json("{", 1, &m, err, 1) == -1);
  CHECK(err[0] == '\0' && err[1] == 'x');
  CHECK(pnmem_model_cost_from_json("{", 1, &m, err, 8) == -1);
  CHECK(strlen(err) == 7 && err[8] == 'x');
  CHECK(memcmp(&m, &before, sizeof m) == 0);

  /* The readers of config.json, GGUF and layer groups, the rule and shape inits, requests. */
  {
    static const char cfg[] = "{\"model_type\": \"llama\", \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
                              "\"hidden_size\": 256}";
    pnmem_engine_rule e;
    CHECK(pnmem_engine_rule_init(NULL) == -1);
    CHECK(pnmem_engine_rule_init_sized(&e, offsetof(pnmem_engine_rule, mtp) - 1) == -1);
    CHECK(pnmem_engine_rule_init(&e) == 0);
    m = valid_model();
    before = m;
    CHECK(pnmem_model_cost_from_hf_config(NULL, 3, NULL, &m, err, sizeof err) == -1);
    CHECK(strcmp(err, "json is NULL") == 0);
    CHECK(pnmem_model_cost_from_hf_config(cfg, strlen(cfg), NULL, NULL, err, sizeof err) == -1);
    CHECK(strcmp(err, "model is NULL") == 0);
    e.engine = (pnmem_engine)3;
    CHECK(pnmem_model_cost_from_hf_config(cfg, strlen(cfg), &e, &m, err, sizeof err) == -1);
    CHECK(strstr(err, "engine->engine is 3") == err);
    CHECK(pnmem_engine_rule_init(&e) == 0);
    e.seqs = 0;
    CHECK(pnmem_model_cost_from_hf_config(cfg, strlen(cfg), &e, &m, err, sizeof err) == -1);
    CHECK(strstr(err, "seqs is 0") != NULL);
    e.struct_size = 3;
    CHECK(pnmem_model_cost_from_hf_config(cfg, strlen(cfg), &e, &m, err, sizeof err) == -1);
    CHECK(strstr(err, "engine->struct_size is 3") == err);
    /* mtp: a model without MTP layers is refused naming the key; a caller built before mtp (its struct
     * ends before it) reads as mtp off. */
    CHECK(pnmem_engine_rule_init(&e) == 0);
    e.mtp = 1;
    CHECK(pnmem_model_cost_from_hf_config(cfg, strlen(cfg), &e, &m, err, sizeof err) == -1);
    CHECK(strstr(err, "num_nextn_predict_layers: the rule asks for MTP layers (mtp)") != NULL);
    e.engine = PNMEM_ENGINE_LLAMA_CPP;
    CHECK(pnmem_model_cost_from_hf_config(cfg, strlen(cfg), &e, &m, err, sizeof err) == -1);
    CHECK(strstr(err, "mtp is for the vllm and exact rules") != NULL);
    CHECK(memcmp(&m, &before, sizeof m) == 0);
    /* hybrid_manager_off: the vllm rule's alone; mtp with a shape (the readers add MTP layers, a shape
     * holds what it holds). */
    CHECK(pnmem_engine_rule_init(&e) == 0);
    e.hybrid_manager_off = 1;
    CHECK(pnmem_model_cost_from_hf_config(cfg, strlen(cfg), &e, &m, err, sizeof err) == -1);
    CHECK(strstr(err, "hybrid_manager_off is for the vllm rule") != NULL);
    e.engine = PNMEM_ENGINE_VLLM;
    CHECK(pnmem_model_cost_from_hf_config(cfg, strlen(cfg), &e, &m, err, sizeof err) == 0);
    m = before;
    {
      pnmem_model_shape one;
      CHECK(pnmem_model_shape_init(&one) == 0);
      one.n_groups = 1;
      one.groups[0].kind = PNMEM_LAYERS_FULL;
      one.groups[0].layers = 2;
      one.groups[0].kv_heads = 2;
      one.groups[0].key_dim = 64;
      CHECK(pnmem_engine_rule_init(&e) == 0);
      e.mtp = 1;
      CHECK(pnmem_model_cost_from_shape(&one, &e, &m, err, sizeof err) == -1);
      CHECK(strstr(err, "engine->mtp: the MTP layers are read from a config.json") != NULL);
      CHECK(memcmp(&m, &before, sizeof m) == 0);
    }
    CHECK(pnmem_engine_rule_init_sized(&e, offsetof(pnmem_engine_rule, mtp)) == 0);
    CHECK(pnmem_model_cost_from_hf_config(cfg, strlen(cfg), &e, &m, err, sizeof err) == 0);
    m = before;
    CHECK(pnmem_model_cost_from_hf_config(cfg, strlen(cfg) - 1, NULL, &m, err, sizeof err) == -1);
    CHECK(strstr(err, "not JSON") != NULL);
    CHECK(pnmem_model_cost_from_hf_config("{\"x\": NaN}", 10, NULL, &m, err, sizeof err) == -1);
    CHECK(strstr(err, "num_hidden_layers: missing") != NULL);
    CHECK(memcmp(&m, &before, sizeof m) == 0);
    CHECK(pnmem_model_cost_from_hf_config_file(NULL, NULL, &m, err, sizeof err) == -1);
    CHECK(strcmp(err, "path is NULL") == 0);
    CHECK(pnmem_model_cost_from_hf_config_file("/nonexistent/model", NULL, &m, err, sizeof err) == -1);
    CHECK(strstr(err, "/nonexistent/model: No such file or directory") == err);
    CHECK(pnmem_model_cost_from_hf_config_file("/", NULL, &m, err, sizeof err) == -1); /* a directory: its config.json */
    CHECK(strstr(err, "/config.json: No such file or directory") == err);
    CHECK(pnmem_model_cost_from_gguf_file(NULL, NULL, &m, err, sizeof err) == -1);
    CHECK(strcmp(err, "path is NULL") == 0);
    CHECK(pnmem_model_cost_from_gguf_file("/nonexistent/model.gguf", NULL, &m, err, sizeof err) == -1);
    CHECK(strstr(err, "/nonexistent/model.gguf") == err);
    CHECK(memcmp(&m, &before, sizeof m) == 0);
    pnmem_model_shape sh;
    CHECK(pnmem_model_shape_init(NULL) == -1);
    CHECK(pnmem_model_shape_init_sized(&sh, 8) == -1);
    CHECK(pnmem_model_shape_init(&sh) == 0);
    CHECK(pnmem_model_cost_from_shape(NULL, NULL, &m, err, sizeof err) == -1);
    CHECK(strcmp(err, "shape is NULL") == 0);
    sh.n_groups = PNMEM_MAX_LAYER_GROUPS + 1;
    CHECK(pnmem_model_cost_from_shape(&sh, NULL, &m, err, sizeof err) == -1);
    CHECK(strstr(err, "shape->n_groups is 9") == err);
    sh.n_groups = 1;
    sh.groups[0].kind = (pnmem_layer_kind)5;
    CHECK(pnmem_model_cost_from_shape(&sh, NULL, &m, err, sizeof err) == -1);
    CHECK(strstr(err, "shape->groups[0].kind is 5") == err);
    sh.groups[0].kind = PNMEM_LAYERS_SLIDING;  /* no span */
    CHECK(pnmem_model_cost_from_shape(&sh, NULL, &m, err, sizeof err) == -1);
    CHECK(strstr(err, "span of 0") != NULL);
    sh.groups[0].kind = PNMEM_LAYERS_FULL;
    sh.state_format = (pnmem_kv_format)-3;
    CHECK(pnmem_model_cost_from_shape(&sh, NULL, &m, err, sizeof err) == -1);
    CHECK(strstr(err, "shape->state_format is -3") == err);
    CHECK(memcmp(&m, &before, sizeof m) == 0);
    CHECK(pnmem_model_shape_from_hf_config(NULL, 0, &sh, err, sizeof err) == -1);
    CHECK(pnmem_model_shape_from_hf_config(cfg, strlen(cfg), NULL, err, sizeof err) == -1);
    CHECK(strcmp(err, "shape is NULL") == 0);
    CHECK(pnmem_model_shape_from_hf_config("{}", 2, &sh, err, sizeof err) == -1);
    CHECK(strstr(err, "num_hidden_layers: missing") != NULL);

    /* Caches beside the KV (version 2's side_bytes): DeepSeek Sparse Attention's indexer keys, 132 B a token
     * and layer in every format, read from a config and given by hand. */
    {
      static const char dsa[] = "{\"model_type\": \"deepseek_v32\", \"num_hidden_layers\": 2, \"hidden_size\": 512,"
                                " \"num_attention_heads\": 4, \"kv_lora_rank\": 512, \"qk_rope_head_dim\": 64,"
                                " \"index_topk\": 2048, \"index_head_dim\": 128, \"torch_dtype\": \"bfloat16\"}";
      pnmem_model_shape full;
      CHECK(pnmem_model_shape_init(&full) == 0);
      CHECK(pnmem_model_shape_from_hf_config(dsa, strlen(dsa), &full, err, sizeof err) == 0);
      CHECK(full.n_groups == 1 && full.groups[0].k_only && full.groups[0].key_dim == 576);
      CHECK(full.side_bytes[0] == 132);
      pnmem_model dm;
      CHECK(pnmem_model_init(&dm) == 0);
      CHECK(pnmem_model_cost_from_shape(&full, NULL, &dm, err, sizeof err) == 0);
      CHECK(dm.full_kv_bytes_per_token[PNMEM_KV_BF16] == 2 * (1152 + 132));
      CHECK(dm.full_kv_bytes_per_token[PNMEM_KV_Q4_0] == 2 * (18 * 18 + 132)); /* the indexer's bytes stay */
      /* A version-1 struct (no side_bytes) is refused a shape that needs them, and left as it was. */
      pnmem_model_shape v1;
      memset(&v1, 0x5a, sizeof v1);
      CHECK(pnmem_model_shape_init_sized(&v1, offsetof(pnmem_model_shape, side_bytes)) == 0);
      CHECK(pnmem_model_shape_from_hf_config(dsa, strlen(dsa), &v1, err, sizeof err) == -1);
      CHECK(strstr(err, "version-1 pnmem_model_shape") != NULL);
      CHECK(v1.n_groups == 0);
      CHECK(v1.side_bytes[0] == 0x5a5a5a5au); /* past its struct_size: never written */
      /* ... and read as having none: the bytes past its struct_size are not the library's to read. */
      v1.n_groups = 1;
      v1.groups[0] = full.groups[0];
      CHECK(pnmem_model_cost_from_shape(&v1, NULL, &dm, err, sizeof err) == 0);
      CHECK(dm.full_kv_bytes_per_token[PNMEM_KV_BF16] == 2 * 1152);
      /* A config without side caches still fits a version-1 struct. */
      CHECK(pnmem_model_shape_init_sized(&v1, offsetof(pnmem_model_shape, side_bytes)) == 0);
      CHECK(pnmem_model_shape_from_hf_config(cfg, strlen(cfg), &v1, err, sizeof err) == 0);
      CHECK(v1.n_groups >= 1 && v1.side_bytes[0] == 0x5a5a5a5au);
      /* A recurrent group cannot have per-token side caches. */
      full.groups[0].kind = PNMEM_LAYERS_RECURRENT;
      CHECK(pnmem_model_cost_from_shape(&full, NULL, &dm, err, sizeof err) == -1);
      CHECK(strstr(err, "recurrent group with side caches") != NULL);
    }
    pnmem_request q;
    CHECK(pnmem_request_init(NULL) == -1);
    CHECK(pnmem_request_init_sized(&q, 4) == -1);
    CHECK(pnmem_request_init(&q) == 0);
    a = pattern;
    CHECK(pnmem_admit_request(NULL, &q, &a, NULL) == -1);
    m = valid_model();
    CHECK(pnmem_admit_request(&m, NULL, &a, NULL) == -1);
    CHECK(pnmem_admit_request(&m, &q, NULL, NULL) == -1);
    q.struct_size = 0;
    r = 77;
    CHECK(pnmem_admit_request(&m, &q, &a, &r) == -1);
    CHECK(r == 0);
    CHECK(same_answer(&a, &pattern));
    CHECK(logged("request->struct_size is 0"));
    CHECK(pnmem_request_init(&q) == 0);
    q.encoder_items = -1; /* answered, not refused */
    CHECK(pnmem_admit_request(&m, &q, &a, NULL) == 0);

    /* Rung 4b: the selection, the scores, the plan and the admission after eviction. */
    float scores[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    float scratch[8];
    int keep[8];
    CHECK(pnmem_select_keep(scores, 8, 4, 1, 1, NULL, scratch) == -1);
    CHECK(pnmem_select_keep(scores, 8, 4, 1, 1, keep, NULL) == -1);
    CHECK(logged("scratch is NULL"));
    CHECK(pnmem_select_keep(NULL, 8, 4, 1, 1, keep, NULL) == 4); /* no scores: no scratch needed */
    CHECK(pnmem_select_keep(scores, -1, 4, 1, 1, keep, scratch) == 0);
    CHECK(pnmem_select_keep(scores, 8, INT_MIN, INT_MIN, INT_MAX, keep, scratch) == 0);
    CHECK(pnmem_select_keep(scores, 8, INT_MAX, INT_MIN, INT_MAX, keep, scratch) == 8);
    CHECK(pnmem_observation_scores(NULL, 1, 8, 3, scores, scratch) == -1);
    CHECK(pnmem_observation_scores(scores, 1, 8, 3, NULL, scratch) == -1);
    CHECK(pnmem_observation_scores(scores, 1, 8, 3, scores + 0, NULL) == -1);
    CHECK(pnmem_observation_scores(scores, -1, 8, 3, scratch, scratch) == -1);
    CHECK(logged("must not be negative"));
    CHECK(pnmem_key_norm_scores(NULL, 8, 1, scores) == -1);
    CHECK(pnmem_key_norm_scores(scores, 8, 1, NULL) == -1);
    CHECK(pnmem_key_norm_scores(scores, 8, -1, scratch) == -1);
    const pnmem_eviction_limits lim = pnmem_eviction_limits_default();
    CHECK(lim.min_keep_tokens == 36 && lim.min_keep_permille == 100);
    const int slots[2] = {1000, 2000};
    pnmem_eviction ev;
    pnmem_keep_answer each[2];
    m = valid_model();
    CHECK(pnmem_plan_eviction(NULL, slots, 2, 1, NULL, each, &ev) == -1);
    CHECK(pnmem_plan_eviction(&m, slots, 2, 1, NULL, each, NULL) == -1);
    CHECK(pnmem_plan_eviction(&m, NULL, 2, 1, NULL, each, &ev) == -1);
    CHECK(logged("slot_tokens is NULL with n_slots 2"));
    CHECK(pnmem_plan_eviction(&m, slots, -1, 1, NULL, each, &ev) == -1);
    CHECK(logged("n_slots is negative (-1)"));
    CHECK(pnmem_plan_eviction(&m, NULL, 0, 1, NULL, NULL, &ev) == 0); /* no slots: nothing to give */
    CHECK(ev.enough == 0 && ev.freed_bytes == 0);
    const pnmem_eviction_limits odd = {INT_MIN, INT_MAX}; /* clamped: no token floor, all of a slot */
    CHECK(pnmem_plan_eviction(&m, slots, 2, UINT64_MAX, &odd, each, &ev) == 0);
    CHECK(ev.freed_bytes == 0 && each[1].keep_tokens == 2000);
    m.struct_size = 0;
    CHECK(pnmem_plan_eviction(&m, slots, 2, 1, NULL, each, &ev) == -1);
    CHECK(logged("model->struct_size is 0"));
    m = valid_model();
    CHECK(pnmem_request_init(&q) == 0);
    a = pattern;
    CHECK(pnmem_admit_after_eviction(NULL, &q, slots, 2, NULL, &a, &ev, each) == -1);
    CHECK(pnmem_admit_after_eviction(&m, NULL, slots, 2, NULL, &a, &ev, each) == -1);
    CHECK(pnmem_admit_after_eviction(&m, &q, slots, 2, NULL, NULL, &ev, each) == -1);
    CHECK(pnmem_admit_after_eviction(&m, &q, slots, 2, NULL, &a, NULL, each) == -1);
    CHECK(pnmem_admit_after_eviction(&m, &q, NULL, 2, NULL, &a, &ev, each) == -1);
    CHECK(pnmem_admit_after_eviction(&m, &q, slots, -5, NULL, &a, &ev, each) == -1);
    CHECK(same_answer(&a, &pattern));
    q.struct_size = 0;
    CHECK(pnmem_admit_after_eviction(&m, &q, slots, 2, NULL, &a, &ev, each) == -1);
    CHECK(logged("request->struct_size is 0"));
    CHECK(pnmem_request_init(&q) == 0);
    q.n_tokens = 10;
    CHECK(pnmem_admit_after_eviction(&m, &q, slots, 2, NULL, &a, &ev, NULL) == 0);
    CHECK(pnmem_admit_after_eviction(&m, &q, slots, 2, NULL, &a, &ev, each) == 0);
    CHECK(each[0].tokens == 1000 && each[1].tokens == 2000);
  }

  /* pnmem_reserve_bytes: NULL pointers; any bytes and ttl are answered. */
  r = 77;
  CHECK(pnmem_reserve_bytes(1, 0, NULL, &r) == -1);
  CHECK(r == 0);
  a = pattern;
  CHECK(pnmem_reserve_bytes(1, 0, &a, NULL) == -1);
  CHECK(same_answer(&a, &pattern));
  CHECK(pnmem_reserve_bytes(1, 0, NULL, NULL) == -1);
  const int64_t ttls[] = {INT64_MIN, -1, 0, 1, INT64_MAX};
  for (size_t i = 0; i < N_OF(ttls); ++i) {
    r = 77;
    CHECK(pnmem_reserve_bytes(UINT64_MAX, ttls[i], &a, &r) == 0);
    CHECK(r == 0);
    CHECK(a.status == (running ? PNMEM_CAPPED : PNMEM_FAIL_OPEN));
    CHECK(a.need_bytes == UINT64_MAX);
    r = 77;
    CHECK(pnmem_reserve_bytes(0, ttls[i], &a, &r) == 0); /* nothing to reserve */
    CHECK(r == 0);
    CHECK(a.status == (running ? PNMEM_ADMITTED : PNMEM_FAIL_OPEN));
    CHECK(pnmem_reserve_bytes(4096, ttls[i], &a, &r) == 0);
    CHECK(running ? (a.status == PNMEM_ADMITTED && r != 0) : (a.status == PNMEM_FAIL_OPEN && r == 0));
    pnmem_reservation_cancel(r);
  }
  CHECK(pnmem_pending_bytes() == 0);

  /* The policy and the budget: NULL. */
  CHECK(pnmem_policy_get(NULL) == -1);
  CHECK(pnmem_host_budget(NULL) == -1);
  pnmem_budget b;
  CHECK(pnmem_host_budget(&b) == 0);
  CHECK(running ? b.total_bytes > 0 : (b.total_bytes == 0 && b.headroom_bytes == 0 && b.seq == 0));

  /* Subscriptions: a NULL callback subscribes nothing; 0 and unknown ids are ignored. */
  CHECK(pnmem_subscribe(NULL, NULL) == 0);
  CHECK(pnmem_subscribe(NULL, &a) == 0);
  pnmem_unsubscribe(0);
  pnmem_unsubscribe(UINT64_MAX);

  /* pnmem_explain: NULL answer or buffer; an answer that pnmem never wrote (a garbage
   * status, level and reason pointer: the pointer is not followed). */
  char line[512];
  CHECK(pnmem_explain(NULL, line, sizeof line) == -1);
  CHECK(pnmem_explain(NULL, NULL, 0) == -1);
  a = pattern;
  CHECK(pnmem_explain(&a, NULL, 10) == -1);
  const int need = pnmem_explain(&a, NULL, 0);
  CHECK(need > 0);
  CHECK(pnmem_explain(&a, line, sizeof line) == need);
  CHECK(strncmp(line, "invalid (?): need ", 18) == 0);
  CHECK(strstr(line, "level invalid") != NULL);
  a.reason = NULL;
  a.status = (pnmem_admit_status)INT_MIN;
  a.level = (pnmem_level)-1;
  CHECK(pnmem_explain(&a, line, sizeof line) > 0);
  CHECK(strncmp(line, "invalid (none): ", 16) == 0);
}

/* Every call here with a bad argument fails the same way whether or not the watcher runs. */
static void bad_arguments(const char* when) {
  printf("bad arguments, %s\n", when);
  pnmem_model model = valid_model();
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
  CHECK(pnmem_gate_create_for(NULL, 4) == NULL);
  CHECK(pnmem_gate_acquire_tokens(NULL, 1, 0) == PNMEM_GATE_ERROR);
  CHECK(pnmem_gate_acquire_tokens(NULL, INT_MIN, INT64_MIN) == PNMEM_GATE_ERROR);
  pnmem_gate_notify_denied(NULL, NULL, 1);
  pnmem_gate_destroy(NULL);
  pnmem_set_log_sink(NULL, NULL);
  pnmem_set_log_sink(NULL, &model); /* a user pointer with no sink: silent */
  pnmem_set_log_sink(sink, NULL);

  /* Die ids out of range: an error, and nothing written. */
  for (size_t i = 0; i < N_OF(bad_model_dies); ++i) {
    model.die = bad_model_dies[i];
    a = pattern;
    last_line[0] = '\0';
    CHECK(pnmem_admit(&model, 1, &a) == -1);
    CHECK(logged("pnmem: pnmem_admit: model->die is"));
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
  /* The live snapshot's plan takes the same ints: answered at the snapshot's level. */
  pnmem_state now;
  CHECK(pnmem_read(&now) == 0);
  p = pnmem_plan_ladder_now(INT_MIN, INT_MIN, true);
  CHECK(p.level == now.level);
  CHECK(p.max_slots == 1);
  CHECK(p.prefill_window == 0);
  CHECK(p.note != NULL && strncmp(p.note, "error", 5) != 0);

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
  pnmem_set_log_sink(sink, NULL);

  bad_arguments("before the watcher exists");
  bad_new_arguments(0);
  bad_load_arguments(0);
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
    bad_new_arguments(1);
    bad_load_arguments(1);
    CHECK(pnmem_read(&s) == 0);
    CHECK(s.n_dies == 0); /* no bad die id reached the watcher */

    /* In range but not fed, or a negative prompt: an answer (DENIED, bad_request), not an error. */
    pnmem_model model = valid_model();
    model.die = PNMEM_MAX_DIES - 1;
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
