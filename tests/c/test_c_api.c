/* The C ABI from a C11 program: start the watcher, read, feed a die, admit
 * (with the ladder's clamp logged through the sink), plan, stop, fail open.
 *
 * The level checks must not depend on the live box. Before the watcher starts
 * (the C ABI reads its policy from the environment once, at first use), the host
 * reserve is set to 1 byte and the PSI full stall that is CRITICAL to 100 %:
 * the host's byte bands can then only read OK (avail > 1 byte), and PSI at most
 * TIGHT. A die fed at TIGHT then puts the box at exactly TIGHT, and a roomy die
 * at exactly the PSI level, which is OK on a quiet box. Where the box's PSI is
 * not quiet, the run says which check it could not make (a NOTE line). */
#define _POSIX_C_SOURCE 200809L /* setenv in strict C11 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_check.h"
#include "pnmem/pnmem_c.h"

static char last_line[256];
static int lines = 0;
static void sink(void* user, const char* line) {
  CHECK(user == (void*)&lines);
  ++lines;
  snprintf(last_line, sizeof last_line, "%s", line);
}

/* A model from pnmem_model_init_reference (the seed's costs) with the request fields the checks use. */
static pnmem_model request(pnmem_kv_format kv, int gpu_resident, int max_window, int max_slots) {
  pnmem_model m;
  CHECK(pnmem_model_init_reference(&m) == 0);
  m.kv = kv;
  m.gpu_resident = gpu_resident;
  m.max_window = max_window;
  m.max_slots = max_slots;
  return m;
}

static int psi_quiet(const pnmem_state* s) {
  return s->host_psi_some_avg10 == 0.0 && s->host_psi_full_avg10 == 0.0 && s->host_psi_some_rate == 0.0 &&
         s->host_psi_full_rate == 0.0;
}

static int psi_full_at_100(const pnmem_state* s) {
  return s->host_psi_full_avg10 >= 100.0 || s->host_psi_full_rate >= 100.0;
}

int main(void) {
  /* Before the first pnmem call: the policy is read from the environment once. */
  CHECK(setenv("PN_HOST_RESERVE_BYTES", "1", 1) == 0);
  CHECK(setenv("PN_PSI_FULL_REJECT", "100", 1) == 0);

  CHECK(pnmem_read(NULL) == -1);
  CHECK(pnmem_admit(NULL, 1, NULL) == -1);
  CHECK(strcmp(pnmem_level_name(PNMEM_LEVEL_TIGHT), "tight") == 0);
  /* Before the watcher exists: a snapshot of zeros, provenance included. */
  pnmem_snapshot before;
  memset(&before, 0x5A, sizeof before);
  CHECK(pnmem_snapshot_init(&before) == 0);
  CHECK(pnmem_read_snapshot(&before) == 0);
  CHECK(before.struct_size == sizeof before && before.state.seq == 0 && before.state.host_total_bytes == 0);
  CHECK(before.sources_read == 0 && before.sources_failed == 0 && before.meminfo_total_bytes == 0);
  CHECK(before.cgroup_mode == PNMEM_CGROUP_NONE && before.psi_mode == PNMEM_PSI_NONE && before.limit_cgroup[0] == '\0');

  /* Before start: fail open. */
  pnmem_model model = request(PNMEM_KV_Q4, 1, 16384, 8);
  pnmem_admit_answer a;
  CHECK(pnmem_admit(&model, 20000, &a) == 0);
  CHECK(a.status == PNMEM_FAIL_OPEN);
  CHECK(a.fit_tokens == 20000);
  CHECK(a.reason != NULL && strcmp(a.reason, "not_watching") == 0); /* says why nothing was checked */
  {
    char why[256];
    CHECK(pnmem_explain(&a, why, sizeof why) > 0 && strncmp(why, "fail_open (not_watching): ", 26) == 0);
  }
  /* Model loads fail open too: nothing is known before the watcher runs. */
  pnmem_model_load load;
  memset(&load, 0x5A, sizeof load);
  CHECK(pnmem_model_load_init(&load) == 0);
  CHECK(load.struct_size == sizeof load && load.weights_bytes == 0 && load.kv_bytes == 0 && load.die == -1);
  load.weights_bytes = 1ULL << 30;
  load.kv_bytes = 1ULL << 30;
  CHECK(pnmem_admit_model_load(&load, &a) == 0);
  CHECK(a.status == PNMEM_FAIL_OPEN && a.die == -1 && strcmp(a.reason, "not_watching") == 0);
  CHECK(pnmem_admit_load_spike(&a) == 0);
  CHECK(a.status == PNMEM_FAIL_OPEN && strcmp(a.reason, "not_watching") == 0);

  /* The environment above is valid: starting logs no "pnmem: PN_...: keeping ..." line. */
  pnmem_set_log_sink(sink, &lines);
  CHECK(pnmem_watcher_start() == 0);
  CHECK(lines == 0);
  if (lines != 0) fprintf(stderr, "unexpected log line: %s\n", last_line);
  CHECK(pnmem_watcher_start() == 0); /* idempotent */
  CHECK(pnmem_watcher_running());

  pnmem_state s;
  CHECK(pnmem_read(&s) == 0);
  CHECK(s.host_total_bytes > 0);
  CHECK(s.host_avail_bytes <= s.host_total_bytes);
  CHECK(s.seq >= 1);

  /* The same snapshot with its provenance: on Linux /proc/meminfo was read, and the copy
   * of pnmem_state inside is pnmem_read's (no die fed yet: the numbers move only with samples). */
  pnmem_snapshot snap;
  memset(&snap, 0x5A, sizeof snap);
  CHECK(pnmem_snapshot_init(&snap) == 0);
  CHECK(snap.struct_size == sizeof snap && snap.sources_read == 0 && snap.limit_cgroup[0] == '\0');
  CHECK(pnmem_read_snapshot(&snap) == 0);
  CHECK(snap.struct_size == sizeof snap);
  CHECK(snap.state.host_total_bytes > 0 && snap.state.seq >= 1 && snap.state.n_dies == 0);
  CHECK(snap.state.level >= PNMEM_LEVEL_OK && snap.state.level <= PNMEM_LEVEL_CRITICAL);
  CHECK((snap.sources_read & PNMEM_SOURCE_MEMINFO) != 0);
  CHECK((snap.sources_read & snap.sources_failed) == 0);
  CHECK((snap.sources_read >> PNMEM_SOURCES) == 0 && (snap.sources_failed >> PNMEM_SOURCES) == 0);
  CHECK(snap.meminfo_total_bytes > 0 && snap.meminfo_avail_bytes <= snap.meminfo_total_bytes);
  CHECK(snap.cgroup_mode >= PNMEM_CGROUP_NONE && snap.cgroup_mode <= PNMEM_CGROUP_V2);
  CHECK(snap.psi_mode >= PNMEM_PSI_NONE && snap.psi_mode <= PNMEM_PSI_TRIGGER);
  CHECK(memchr(snap.limit_cgroup, '\0', sizeof snap.limit_cgroup) != NULL);
  CHECK((snap.cgroup_limit_bytes == 0) == (snap.limit_cgroup[0] == '\0') || snap.cgroup_mode == PNMEM_CGROUP_V1);
  /* A newer caller's larger struct: this library's fields written, the tail left, struct_size kept. */
  struct {
    pnmem_snapshot s;
    unsigned char newer_fields[24];
  } big;
  memset(&big, 0x77, sizeof big);
  CHECK(pnmem_snapshot_init_sized(&big.s, sizeof big) == 0);
  CHECK(big.s.struct_size == sizeof big && big.newer_fields[0] == 0 && big.newer_fields[23] == 0);
  memset(big.newer_fields, 0x77, sizeof big.newer_fields);
  CHECK(pnmem_read_snapshot(&big.s) == 0);
  CHECK(big.s.struct_size == sizeof big && big.s.state.host_total_bytes > 0);
  CHECK((big.s.sources_read & PNMEM_SOURCE_MEMINFO) != 0);
  CHECK(big.newer_fields[0] == 0x77 && big.newer_fields[23] == 0x77);

  /* A die nearly full puts the box at TIGHT (free < budget/16). */
  const uint64_t gib = 1024ULL * 1024 * 1024;
  CHECK(pnmem_set_die(16, 1, 1, 0, 0) == -1);
  CHECK(pnmem_set_die(-1, 1, 1, 0, 0) == -1);
  CHECK(pnmem_set_die(0, gib / 2, 16 * gib, 15 * gib, gib) == 0);
  CHECK(pnmem_read(&s) == 0);
  CHECK(s.n_dies == 1);
  CHECK(s.per_die_retiring[0] == gib);
  /* Model loads onto that die (0.5 GiB free): 1 GiB of weights + 1 GiB of KV + the 1.5 GiB die
   * scratch need 3.5 GiB; the die's free VRAM less the 1 GiB die reserve is 0. Die -1 picks the
   * roomiest measured die: die 0, the only one. */
  CHECK(pnmem_admit_model_load(&load, &a) == 0);
  CHECK(a.status == PNMEM_DENIED);
  CHECK(a.reason != NULL && strcmp(a.reason, "die_vram") == 0);
  CHECK(a.die == 0 && a.need_bytes == 7 * gib / 2 && a.limit_bytes == 0 && a.fit_tokens == 0);
  /* A slice needs its die named; the scratch alone (1.5 GiB) does not fit in 0.5 GiB, less the 1 GiB die
   * reserve a slice keeps as a whole load does: nothing. */
  pnmem_model_load slice;
  CHECK(pnmem_model_load_init(&slice) == 0);
  CHECK(pnmem_admit_model_load_die(&slice, &a) == 0);
  CHECK(a.status == PNMEM_DENIED && strcmp(a.reason, "bad_request") == 0);
  slice.die = 0;
  CHECK(pnmem_admit_model_load_die(&slice, &a) == 0);
  CHECK(a.status == PNMEM_DENIED && strcmp(a.reason, "die_vram") == 0);
  CHECK(a.die == 0 && a.need_bytes == 3 * gib / 2 && a.limit_bytes == 0);
  slice.die = 3; /* in range, never fed */
  CHECK(pnmem_admit_model_load_die(&slice, &a) == 0);
  CHECK(a.status == PNMEM_DENIED && strcmp(a.reason, "bad_request") == 0 && a.die == 3);
  /* The die decides: the host reads OK (1-byte reserve) and PSI at most TIGHT. Only a
   * full stall of 100 % (CRITICAL at PN_PSI_FULL_REJECT=100) could make it worse. */
  if (psi_full_at_100(&s)) {
    printf("NOTE: not checked: the box's PSI full stall reads %.2f %% (rate %.2f %%): CRITICAL whatever the die "
           "says; the exact TIGHT level, its clamp and its log line are not checked\n",
           s.host_psi_full_avg10, s.host_psi_full_rate);
    CHECK(s.level == PNMEM_LEVEL_CRITICAL);
  } else {
    CHECK(s.level == PNMEM_LEVEL_TIGHT);
    CHECK(s.raw_level == PNMEM_LEVEL_TIGHT);

    /* Admission at TIGHT: rung 3 halves the window and says so through the sink,
     * once. A GPU-resident request outside the host reserve is capped to that window. */
    CHECK(pnmem_admit(&model, 20000, &a) == 0);
    CHECK(a.level == PNMEM_LEVEL_TIGHT);
    CHECK(lines == 1);
    CHECK(strcmp(last_line, "[ladder] TIGHT -> prefill window clamped 16384 -> 8192 (rung 3)") == 0);
    CHECK(a.window == 8192);
    CHECK(a.status == PNMEM_CAPPED);
    CHECK(a.fit_tokens == 8192);
    CHECK(a.reason != NULL && strcmp(a.reason, "window") == 0);

    /* A gate for a host-path model on die 0 (issue 14): rung 2 at creation (8 slots at TIGHT: 4), and
     * a hold's release re-checks the denied request on every sample, at TIGHT still. */
    pnmem_model gm = request(PNMEM_KV_Q4, 0, 16384, 8);
    gm.die = 0;
    pnmem_admit_answer fits;
    CHECK(pnmem_admit(&gm, 100, &fits) == 0);
    CHECK(fits.status == PNMEM_ADMITTED && fits.level == PNMEM_LEVEL_TIGHT); /* the premise: 100 tokens fit */
    CHECK(pnmem_gate_create_for(NULL, 4) == NULL);
    pnmem_gate* g = pnmem_gate_create_for(&gm, 4);
    CHECK(g != NULL);
    CHECK(pnmem_gate_acquire_tokens(NULL, 1, 0) == PNMEM_GATE_ERROR);
    CHECK(pnmem_gate_acquire_tokens(g, -1, 0) == PNMEM_GATE_ERROR);
    int taken = 0;
    while (taken < 9 && pnmem_gate_acquire_tokens(g, 100, 0) == PNMEM_GATE_ACQUIRED) ++taken;
    CHECK(taken == 4);
    for (int i = 0; i < taken; ++i) pnmem_gate_release(g);
    /* Pushed without a request: a fresh sample at TIGHT keeps the hold (the level rule). */
    pnmem_gate_notify_pressure(g, PNMEM_LEVEL_TIGHT);
    CHECK(pnmem_set_die(0, gib / 2, 16 * gib, 15 * gib, gib) == 0);
    CHECK(pnmem_gate_acquire_tokens(g, 100, 0) == PNMEM_GATE_TIMED_OUT);
    /* Only a denial counts: an admitted answer is ignored, as are NULLs. */
    pnmem_gate_notify_denied(g, &fits, 100);
    pnmem_gate_notify_denied(NULL, &fits, 100);
    pnmem_gate_notify_denied(g, NULL, 100);
    /* Pushed by a denial of 100 tokens on die 0: the next sample (at TIGHT) finds they fit now. */
    pnmem_admit_answer denied = fits;
    denied.status = PNMEM_DENIED;
    denied.reason = "die_vram";
    pnmem_gate_notify_denied(g, &denied, 100);
    CHECK(pnmem_set_die(0, gib / 2, 16 * gib, 15 * gib, gib) == 0);
    CHECK(pnmem_read(&s) == 0);
    CHECK(s.level == PNMEM_LEVEL_TIGHT);
    CHECK(pnmem_gate_acquire_tokens(g, 100, 0) == PNMEM_GATE_ACQUIRED);
    pnmem_gate_release(g);
    pnmem_gate_destroy(g);
  }

  pnmem_ladder_plan p = pnmem_plan_ladder(PNMEM_LEVEL_TIGHT, 8, 16384, false);
  CHECK(p.max_slots == 4);
  CHECK(p.prefill_window == 8192);
  CHECK(p.force_kv_q4);
  CHECK(p.kv_evict);
  CHECK(p.degraded);
  CHECK(p.note != NULL && strstr(p.note, "tight") != NULL);

  /* The gate: two slots, or the ladder's rung 2 for the watcher's level at creation (applied at
   * once: at TIGHT or worse, 1); a denial's CRITICAL fails acquirers fast; clearing needs the watcher. */
  pnmem_gate* gate = pnmem_gate_create(2, 4);
  CHECK(gate != NULL);
  CHECK(pnmem_gate_acquire(NULL, 0) == PNMEM_GATE_ERROR);
  /* The box's level may move (host PSI) while this runs: 1 or 2 slots, never more, never none. */
  int slots = 0;
  while (slots < 3 && pnmem_gate_acquire(gate, 10) == PNMEM_GATE_ACQUIRED) ++slots;
  CHECK(slots == 1 || slots == 2); /* then every slot is taken: the next acquire timed out */
  pnmem_gate_release(gate);
  CHECK(pnmem_gate_acquire(gate, 0) == PNMEM_GATE_ACQUIRED);
  for (int i = 0; i < slots; ++i) pnmem_gate_release(gate);
  pnmem_gate_notify_pressure(gate, PNMEM_LEVEL_CRITICAL);
  CHECK(pnmem_gate_acquire(gate, 1000) == PNMEM_GATE_OVERLOADED);
  /* The watcher reports the box back at OK: the gate clears by subscription. */
  CHECK(pnmem_set_die(0, 16 * gib, 16 * gib, 0, 0) == 0);
  CHECK(pnmem_read(&s) == 0);
  if (psi_quiet(&s)) {
    /* Nothing but the die could raise the level, and the die is roomy: exactly OK. */
    CHECK(s.level == PNMEM_LEVEL_OK);
    CHECK(s.raw_level == PNMEM_LEVEL_OK);
    CHECK(pnmem_gate_acquire(gate, 1000) == PNMEM_GATE_ACQUIRED);
    pnmem_gate_release(gate);
    /* The roomy die takes the model: 3.5 GiB within 16 GiB free less the 1 GiB reserve. */
    CHECK(pnmem_admit_model_load(&load, &a) == 0);
    CHECK(a.status == PNMEM_ADMITTED && a.level == PNMEM_LEVEL_OK);
    char line[256];
    CHECK(pnmem_explain(&a, line, sizeof line) > 0);
    CHECK(strcmp(line, "admitted (fits): the load (weights, KV at the longest context, scratch) needs 3.50 GiB "
                       "(3758096384 B), die 0 has 15.00 GiB (16106127360 B) free above its reserve, level ok") == 0);
  } else if (s.level < PNMEM_LEVEL_TIGHT) {
    printf("NOTE: not checked: the box's PSI is not quiet (some %.2f %%, full %.2f %%): level %s, not OK; "
           "the gate clearing below TIGHT is checked, the exact OK level is not\n",
           s.host_psi_some_avg10, s.host_psi_full_avg10, pnmem_level_name(s.level));
    CHECK(pnmem_gate_acquire(gate, 1000) == PNMEM_GATE_ACQUIRED);
    pnmem_gate_release(gate);
  } else {
    printf("NOTE: not checked: the box's PSI reads a stall (some %.2f %%, full %.2f %%): level %s with a roomy "
           "die; neither the exact OK level nor the gate clearing is checked\n",
           s.host_psi_some_avg10, s.host_psi_full_avg10, pnmem_level_name(s.level));
  }
  pnmem_gate_destroy(gate);
  pnmem_gate_destroy(NULL);

  /* The load spike (2.4 GiB, PN_LOAD_SPIKE_BYTES' default) against host memory above the 1-byte
   * reserve: admitted on a box with GiBs available, the whole burst or nothing. */
  CHECK(pnmem_admit_load_spike(&a) == 0);
  CHECK(a.need_bytes == 12 * gib / 5 && a.die == -1 && a.fit_tokens == 0);
  CHECK(pnmem_read(&s) == 0);
  if (s.host_avail_bytes > 4 * gib) {
    CHECK(a.status == PNMEM_ADMITTED && strcmp(a.reason, "fits") == 0);
  } else if (s.host_avail_bytes < 2 * gib) {
    CHECK(a.status == PNMEM_DENIED && strcmp(a.reason, "host_budget") == 0);
  } else {
    printf("NOTE: not checked: %llu MiB available, near the 2.4 GiB burst: the spike's verdict\n",
           (unsigned long long)(s.host_avail_bytes >> 20));
  }

  /* Rung 4a at KV init: the seed's model allocates fp32 (40960 B/token) at OK, its Q4 (5898 B)
   * from WATCH up; a model whose normal format is f16 and compact q4_0 gets those (the seed's
   * shape: 20480 and 5760 B/token: 2 rows x 10 layers x 16 blocks of 18 B). */
  pnmem_model seed;
  CHECK(pnmem_model_init_reference(&seed) == 0);
  const pnmem_ladder_plan at_ok = pnmem_plan_ladder(PNMEM_LEVEL_OK, 8, 16384, false);
  const pnmem_ladder_plan at_watch = pnmem_plan_ladder(PNMEM_LEVEL_WATCH, 8, 16384, false);
  pnmem_kv_allocation kv;
  CHECK(pnmem_kv_allocation_for(&at_ok, &seed, 1000, &kv) == 0);
  CHECK(kv.format == PNMEM_KV_FP32 && kv.bytes == 40960000);
  CHECK(pnmem_kv_allocation_for(&at_watch, &seed, 1000, &kv) == 0);
  CHECK(kv.format == PNMEM_KV_Q4 && kv.bytes == 5898000);
  seed.normal_kv = PNMEM_KV_F16;
  seed.compact_kv = PNMEM_KV_Q4_0;
  CHECK(pnmem_kv_allocation_for(&at_ok, &seed, 1000, &kv) == 0);
  CHECK(kv.format == PNMEM_KV_F16 && kv.bytes == 20480000);
  CHECK(pnmem_kv_allocation_for(&at_watch, &seed, 1000, &kv) == 0);
  CHECK(kv.format == PNMEM_KV_Q4_0 && kv.bytes == 5760000);

  /* Reserved admissions: the second request sees the first one's bytes as pending
   * until a sample that began after its settle. A host-path (CPU fp32) model. */
  pnmem_model cpu = request(PNMEM_KV_FP32, 0, 0, 8);
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

  /* pnmem_model_init: struct_size as compiled here, the request defaults, the seed's model
   * (cost_model.hpp: 5898 B/token in Q4, 40960 in fp32, the six-anchor table). */
  pnmem_model d;
  memset(&d, 0x5A, sizeof d);
  CHECK(pnmem_model_init_reference(&d) == 0);
  CHECK(d.struct_size == sizeof(pnmem_model));
  CHECK(d.kv == PNMEM_KV_UNSET && d.gpu_resident == 0 && d.max_window == 0 && d.die == -1 && d.max_slots == 1);
  CHECK(d.full_kv_bytes_per_token[PNMEM_KV_Q4] == 5898);
  CHECK(d.full_kv_bytes_per_token[PNMEM_KV_FP32] == 40960);
  CHECK(d.full_kv_bytes_per_token[PNMEM_KV_F16] == 20480);
  CHECK(d.full_kv_bytes_per_token[PNMEM_KV_Q8_0] == 10 * 2 * 16 * 34); /* 512 values per row: 16 blocks */
  CHECK(d.sliding_kv_bytes_per_token[PNMEM_KV_FP32] == 0 && d.sliding_window == 0 && d.state_bytes_per_seq == 0);
  CHECK(d.normal_kv == PNMEM_KV_FP32 && d.compact_kv == PNMEM_KV_Q4);
  CHECK(d.n_anchors == 6);
  CHECK(d.anchors[0].tokens == 0 && d.anchors[0].peak_bytes == 256ULL << 20);
  CHECK(d.anchors[1].tokens == 1024 && d.anchors[1].peak_bytes == 384ULL << 20);
  CHECK(d.anchors[5].tokens == 262144 && d.anchors[5].peak_bytes == 16449ULL * gib / 4);
  CHECK(d.anchors[6].tokens == 0 && d.anchors[7].peak_bytes == 0);
  CHECK(d.activation_fixed_bytes == 0 && d.activation_per_token_bytes == 0 && d.activation_per_token_sq_bytes == 0);

  /* pnmem_model_init leaves the cost unset, and nothing prices a request with it: an engine that
   * forgot its cost gets -1 and a line saying so, not the seed's ~600 MiB per 1500 tokens. */
  {
    pnmem_model u;
    memset(&u, 0x5A, sizeof u);
    CHECK(pnmem_model_init(&u) == 0);
    CHECK(u.struct_size == sizeof u && u.kv == PNMEM_KV_UNSET && u.die == -1 && u.max_slots == 1);
    CHECK(u.normal_kv == PNMEM_KV_UNSET);
    CHECK(u.full_kv_bytes_per_token[PNMEM_KV_Q4] == 0 && u.n_anchors == 0 && u.activation_fixed_bytes == 0);
    pnmem_admit_answer ua;
    memset(&ua, 0x5A, sizeof ua);
    const pnmem_admit_answer ua_before = ua;
    const int before = lines;
    CHECK(pnmem_admit(&u, 1500, &ua) == -1);
    CHECK(memcmp(&ua, &ua_before, sizeof ua) == 0); /* not written */
    CHECK(lines == before + 1);
    CHECK(strstr(last_line, "pnmem_admit: model->normal_kv is PNMEM_KV_UNSET: the model's cost was never set") != NULL);
    pnmem_kv_allocation kva;
    const pnmem_ladder_plan ok_plan = pnmem_plan_ladder(PNMEM_LEVEL_OK, 1, 0, false);
    CHECK(pnmem_kv_allocation_for(&ok_plan, &u, 1024, &kva) == -1);
    CHECK(pnmem_gate_create_for(&u, 0) == NULL);
    /* Given a cost, it is a model: from a description, or by hand with normal_kv. */
    static const char desc[] = "{\"format\": \"pnmem-model\", \"version\": 1, \"kv_bytes_per_token\": 131072,"
                               " \"activation\": {\"fixed_bytes\": \"256MiB\"}}";
    char err[256];
    CHECK(pnmem_model_cost_from_json(desc, strlen(desc), &u, err, sizeof err) == 0);
    CHECK(u.normal_kv != PNMEM_KV_UNSET);
    CHECK(pnmem_admit(&u, 1500, &ua) == 0);
    CHECK(pnmem_model_init(&u) == 0);
    u.full_kv_bytes_per_token[PNMEM_KV_Q4] = 4096;
    u.normal_kv = PNMEM_KV_Q4;
    CHECK(pnmem_admit(&u, 1500, &ua) == 0);
    CHECK(ua.need_bytes == 4096ULL * 1500); /* priced with its own cost, nothing of the seed's */
    /* kv left at PNMEM_KV_UNSET: the model's own format. A bf16 model's request is priced in bf16, not in
     * another format's bytes (Q4 was pnmem_model_init's default before 0.3: a bf16 KV priced 3.5x low). */
    CHECK(pnmem_model_init(&u) == 0);
    u.full_kv_bytes_per_token[PNMEM_KV_Q4] = 37552;
    u.full_kv_bytes_per_token[PNMEM_KV_BF16] = 131072;
    u.normal_kv = PNMEM_KV_BF16;
    CHECK(u.kv == PNMEM_KV_UNSET);
    CHECK(pnmem_admit(&u, 1500, &ua) == 0);
    CHECK(ua.need_bytes == 131072ULL * 1500);
    u.kv = PNMEM_KV_Q4; /* told: that format */
    CHECK(pnmem_admit(&u, 1500, &ua) == 0);
    CHECK(ua.need_bytes == 37552ULL * 1500);
  }

  /* pnmem_watcher_options_init: the C++ watcher's defaults. */
  pnmem_watcher_options wo;
  memset(&wo, 0x5A, sizeof wo);
  CHECK(pnmem_watcher_options_init(&wo) == 0);
  CHECK(wo.struct_size == sizeof wo);
  CHECK(wo.poll_interval_ms == 250 && wo.pressure_poll_interval_ms == 100 && wo.step_down_dwell_ms == 0);
  /* The watcher exists (pnmem_watcher_start made it with these defaults): the same options are
   * accepted, other ones refused with a line that says why. */
  CHECK(pnmem_watcher_start_with(&wo) == 0);
  wo.step_down_dwell_ms = 5000;
  CHECK(pnmem_watcher_start_with(&wo) == -1);
  CHECK(strstr(last_line, "pnmem: pnmem_watcher_start_with: the watcher exists already with other options") == last_line);

  /* A model left uninitialised (struct_size 0) is refused with the line that says what to do. */
  pnmem_model zero;
  memset(&zero, 0, sizeof zero);
  CHECK(pnmem_admit(&zero, 100, &a) == -1);
  CHECK(strcmp(last_line, "pnmem: pnmem_admit: model->struct_size is 0: initialise it with pnmem_model_init") == 0);

  /* Issue 26: an engine that preallocates, a check that reserves nothing, the metrics text. */
  pnmem_model pre;
  CHECK(pnmem_model_init_preallocated(&pre) == 0);
  CHECK(pre.struct_size == sizeof pre && pre.state_bytes_per_seq == 0 && pre.n_anchors == 0);
  CHECK(pre.full_kv_bytes_per_token[PNMEM_KV_BF16] == 0 && pre.activation_fixed_bytes == 0);
  CHECK(pnmem_admit(&pre, 100000, &a) == 0);
  CHECK(a.status == PNMEM_ADMITTED && a.need_bytes == 0 && a.fit_tokens == 100000);
  CHECK(pnmem_model_init_preallocated_sized(&pre, 4) == -1);

  const uint64_t pending_before = pnmem_pending_bytes();
  CHECK(pnmem_check_bytes(1, -1, &a) == 0);
  CHECK(a.status == PNMEM_ADMITTED && strcmp(a.reason, "fits") == 0 && a.need_bytes == 1);
  CHECK(pnmem_check_bytes(UINT64_MAX, -1, &a) == 0);
  CHECK(a.status == PNMEM_CAPPED && strcmp(a.reason, "host_budget") == 0 && a.limit_bytes > 0);
  CHECK(pnmem_pending_bytes() == pending_before); /* nothing was reserved */
  CHECK(pnmem_check_bytes(1, 15, &a) == 0);      /* a die never fed */
  CHECK(a.status == PNMEM_DENIED && strcmp(a.reason, "bad_request") == 0 && a.need_bytes == 1);
  CHECK(pnmem_check_bytes(1, -2, &a) == -1);
  CHECK(pnmem_check_bytes(1, PNMEM_MAX_DIES, &a) == -1);
  CHECK(pnmem_check_bytes(1, -1, NULL) == -1);

  /* Retry hints: never negative, 0 for what a wait does not improve, from the next sample (the
   * pressure poll) to 60 s for a shortfall; an expiring reservation bounds a host denial's hint. */
  const char* basis = NULL;
  CHECK(pnmem_check_bytes(1, -1, &a) == 0 && a.status == PNMEM_ADMITTED);
  CHECK(pnmem_retry_after_ms(&a, &basis) == 0 && strcmp(basis, "none") == 0);
  CHECK(pnmem_check_bytes(1, 15, &a) == 0 && a.status == PNMEM_DENIED); /* bad_request */
  CHECK(pnmem_retry_after_ms(&a, &basis) == 0 && strcmp(basis, "none") == 0);
  CHECK(pnmem_check_bytes(UINT64_MAX, -1, &a) == 0 && a.status == PNMEM_CAPPED);
  CHECK(pnmem_retry_after_ms(&a, &basis) == 0 && strcmp(basis, "never_fits") == 0); /* more than the box */
  CHECK(pnmem_check_bytes(a.limit_bytes + (64ull << 20), -1, &a) == 0); /* 64 MiB more than there is room for */
  int64_t hint = 0;
  if (a.status != PNMEM_ADMITTED) { /* the box did not free 64 MiB meanwhile */
    hint = pnmem_retry_after_ms(&a, &basis);
    CHECK(hint >= 1 && hint <= 60000);
    /* memory flat or falling on this box: a guess; rising: the recovery's estimate */
    CHECK(strcmp(basis, "no_recovery") == 0 || strcmp(basis, "memory_falling") == 0 ||
          strcmp(basis, "host_recovery") == 0);
    CHECK(pnmem_retry_basis_is_guess(basis) == (strcmp(basis, "host_recovery") != 0));
    CHECK(pnmem_retry_after_ms(&a, NULL) >= 1); /* basis is optional */
  }
  {
    const uint64_t room = a.limit_bytes; /* above the reserve, less what is pending */
    pnmem_admit_answer held;
    pnmem_reservation r = 0;
    if (room > 256ull << 20 &&
        pnmem_reserve_bytes(room - (64ull << 20), 2000, &held, &r) == 0 && held.status == PNMEM_ADMITTED) {
      CHECK(pnmem_check_bytes(128ull << 20, -1, &a) == 0);
      if (a.status != PNMEM_ADMITTED) { /* the box did not free 64 MiB meanwhile */
        hint = pnmem_retry_after_ms(&a, &basis);
        CHECK(hint >= 1 && hint <= 2000);
        CHECK(strcmp(basis, "pending_expiry") == 0 || strcmp(basis, "host_recovery") == 0);
      }
      pnmem_reservation_cancel(r);
    }
  }
  pnmem_admit_answer forged = a;
  char fits[] = "fits";
  forged.reason = fits; /* a string pnmem did not write: refused, never read */
  CHECK(pnmem_retry_after_ms(&forged, &basis) == -1);
  forged = a;
  forged.status = (pnmem_admit_status)7;
  CHECK(pnmem_retry_after_ms(&forged, &basis) == -1);
  CHECK(pnmem_retry_after_ms(NULL, &basis) == -1);

  const int text_len = pnmem_metrics_text(NULL, 0, PNMEM_METRICS_ALL);
  CHECK(text_len > 0);
  char* text = malloc((size_t)text_len + 4096);
  CHECK(text != NULL);
  if (text != NULL) {
    const int again = pnmem_metrics_text(text, (size_t)text_len + 4096, PNMEM_METRICS_ALL);
    CHECK(again > 0 && again < text_len + 4096 && (size_t)again == strlen(text));
    CHECK(strstr(text, "# HELP pnmem_level ") == text);
    CHECK(strstr(text, "# TYPE pnmem_admissions_total counter") != NULL);
    CHECK(strstr(text, "pnmem_admissions_total{verdict=\"admit\",reason=\"fits\"}") != NULL);
    CHECK(pnmem_metrics_text(text, 16, PNMEM_METRICS_BOX) > 16 && strlen(text) == 15); /* cut, NUL-terminated */
    CHECK(pnmem_metrics_text(text, (size_t)text_len + 4096, PNMEM_METRICS_COUNTERS) > 0);
    CHECK(strstr(text, "# HELP pnmem_admissions_total") == text && strstr(text, "# HELP pnmem_level ") == NULL);
    free(text);
  }
  CHECK(pnmem_metrics_text(NULL, 5, PNMEM_METRICS_BOX) == -1);
  CHECK(pnmem_metrics_text(NULL, 0, 0) == -1);
  CHECK(pnmem_metrics_text(NULL, 0, 4) == -1);

  pnmem_set_log_sink(NULL, NULL);
  pnmem_watcher_poll_now();
  pnmem_watcher_stop();
  CHECK(!pnmem_watcher_running());
  CHECK(pnmem_admit(&model, 100, &a) == 0);
  CHECK(a.status == PNMEM_FAIL_OPEN);

  if (failures == 0) printf("c api: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
