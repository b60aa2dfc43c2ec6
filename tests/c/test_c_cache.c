/* tests/c/test_c_cache.c - a prompt cache that keeps its newest entries, and is shed while the engine's
 * loop is blocked (issue 41).
 *
 * The box is a tree this test writes (pnmem_watcher_options.root): 8 GiB, the host reserve 15 % of it
 * (1288490188 B), WATCH's floor 1.25 times that. The test is the kernel too: every entry the cache
 * allocates takes its bytes off the tree's MemAvailable, every entry it drops gives them back, so the
 * watcher's own samples (every 50 ms, on its poll thread) agree with what the ledger was told.
 *
 *   1. An LRU cache of 16 MiB entries with room for 2.5 of them above WATCH's floor. Each insert is one
 *      pnmem_make_room call with the cache's drop-oldest function: 12 inserts, none refused, the cache
 *      ends holding the newest two, and the host never below WATCH. (Before issue 41 the docs' way,
 *      pnmem_reserve_bytes and skip the entry when refused, froze the cache with its oldest entries.)
 *   2. A cache that cannot free the shortfall frees nothing: the insert is refused, the cache intact.
 *   3. The shed hook: a co-tenant takes what the cache holds while the engine's loop is blocked (this
 *      thread sleeps). The hook drops one entry a call, so it must be called on samples after the one
 *      that changed the level.
 *      The hook runs on the watcher's poll thread, drops the oldest entries holding what pnmem asks,
 *      and the host is back at WATCH within a few poll intervals; pnmem_shed_bytes says 0 then.
 *   4. One hook per process: set twice, the second replaces the first; NULL removes it. The metrics
 *      count the calls that freed something and their bytes.
 *   5. The fleet gauges from C: a gate's queue and slots plus the engine's own (pnmem_set_fleet_load).
 *   6. Requests that cost nothing (pnmem_model_init_preallocated) while a co-tenant holds the box at its
 *      reserve: refused now, held by pnmem_admit_wait and by a gate (not shed), then served when it leaves;
 *      the engine's own rule (admit, reject) over the default; the held counters. */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "c_check.h"
#include "c_tree.h"
#include "pnmem/pnmem_c.h"

#define MIB ((uint64_t)1 << 20)
#define GIB ((uint64_t)1 << 30)

static const uint64_t total = 8 * GIB;
static const uint64_t reserve = 1288490188; /* 15 % of 8 GiB */
static pthread_mutex_t box_mu = PTHREAD_MUTEX_INITIALIZER; /* the tree and the cache: the hook's thread too */
static uint64_t avail;                                     /* the tree's MemAvailable */

/* `avail` is kept a multiple of 1024 (the kernel prints kB; tree_write replaces the file whole). */
static void write_meminfo_locked(void) { tree_meminfo(total, avail); }
static uint64_t kb_up(uint64_t b) { return (b + 1023) / 1024 * 1024; }

/* The cache: entry ids in insertion order, oldest first. */
#define ENTRY_BYTES (16 * MIB)
#define MAX_ENTRIES 64
static int cache_ids[MAX_ENTRIES];
static int cache_n;
static int cannot_free; /* 1: the cache refuses to drop anything (part 2) */

/* Drops the oldest entries holding at least `want` bytes (all it has, if it has less), gives them back
 * to the "kernel" and returns what it freed. */
static uint64_t drop_oldest(uint64_t want, void* user) {
  (void)user;
  pthread_mutex_lock(&box_mu);
  uint64_t freed = 0;
  int dropped = 0;
  if (!cannot_free) { /* as much as it holds, oldest first */
    while (freed < want && dropped < cache_n) {
      freed += ENTRY_BYTES;
      ++dropped;
    }
    memmove(cache_ids, cache_ids + dropped, (size_t)(cache_n - dropped) * sizeof cache_ids[0]);
    cache_n -= dropped;
    avail += freed; /* the kernel has them back */
    write_meminfo_locked();
  }
  pthread_mutex_unlock(&box_mu);
  return freed;
}

/* Inserts entry `id`: room made, allocated (the tree's MemAvailable drops), settled. 1 when inserted. */
static int insert(int id) {
  pnmem_admit_answer a;
  pnmem_reservation r;
  CHECK(pnmem_make_room(ENTRY_BYTES, 0, drop_oldest, NULL, &a, &r) == 0);
  if (a.status != PNMEM_ADMITTED) {
    char line[512];
    pnmem_explain(&a, line, sizeof line);
    printf("cache: entry %d not inserted: %s\n", id, line);
    return 0;
  }
  CHECK(r != 0);
  pthread_mutex_lock(&box_mu);
  cache_ids[cache_n++] = id;
  avail -= ENTRY_BYTES; /* allocated */
  write_meminfo_locked();
  pthread_mutex_unlock(&box_mu);
  pnmem_reservation_settle(r);
  return 1;
}

static pnmem_level host_level(void) {
  pnmem_room room;
  CHECK(pnmem_room_init(&room) == 0);
  CHECK(pnmem_host_room(&room) == 0);
  return room.level;
}

/* The shed hook: the thread it ran on, the bytes asked and freed. */
static pthread_t main_thread;
static volatile int hook_calls, hook_on_other_thread;
static uint64_t hook_asked, hook_freed;
static uint64_t shed_hook(uint64_t want, void* user) {
  CHECK(user == &hook_calls);
  /* One entry a call: the host stays below WATCH after the first, with no level change, and pnmem must
   * call again on the next sample ("while it does"), not only when the level moves. */
  const uint64_t freed = drop_oldest(want < ENTRY_BYTES ? want : ENTRY_BYTES, NULL);
  pthread_mutex_lock(&box_mu);
  ++hook_calls;
  if (!pthread_equal(pthread_self(), main_thread)) hook_on_other_thread = 1;
  hook_asked += want;
  hook_freed += freed;
  pthread_mutex_unlock(&box_mu);
  return freed;
}
static int other_hook_calls;
static uint64_t other_hook(uint64_t want, void* user) {
  (void)want;
  (void)user;
  ++other_hook_calls;
  return 0;
}

static void sleep_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static uint64_t metric(const char* text, const char* name) {
  const char* p = strstr(text, name); /* "\nname ": the sample, not its # HELP line */
  return p == NULL ? UINT64_MAX : strtoull(p + strlen(name), NULL, 10);
}

/* The co-tenant that holds the box at its reserve, leaving after `leave_after_ms`. */
static long leave_after_ms;
static void* co_tenant_leaves(void* unused) {
  (void)unused;
  sleep_ms(leave_after_ms);
  pthread_mutex_lock(&box_mu);
  avail = total / 2;
  write_meminfo_locked();
  pthread_mutex_unlock(&box_mu);
  return NULL;
}

static void set_avail(uint64_t b) {
  pthread_mutex_lock(&box_mu);
  avail = kb_up(b);
  write_meminfo_locked();
  pthread_mutex_unlock(&box_mu);
  sleep_ms(150); /* three samples */
}

static long ms_since(const struct timespec* t0) {
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (long)(t1.tv_sec - t0->tv_sec) * 1000 + (long)(t1.tv_nsec - t0->tv_nsec) / 1000000;
}

static void zero_cost_requests(void) {
  pnmem_model prealloc;
  CHECK(pnmem_model_init_preallocated(&prealloc) == 0);
  CHECK(prealloc.zero_cost == PNMEM_ZERO_COST_POLICY);
  set_avail(reserve - 1024); /* the co-tenant holds the box at its reserve (kB, rounded up: at most it): CRITICAL */
  CHECK(host_level() == PNMEM_LEVEL_CRITICAL);
  char text[65536];
  CHECK(pnmem_metrics_text(text, sizeof text, PNMEM_METRICS_COUNTERS) > 0);
  const uint64_t served0 = metric(text, "\npnmem_held_served_total ");
  const uint64_t timed_out0 = metric(text, "\npnmem_held_timed_out_total ");

  /* Asked now: refused for the reserve, needing 0 B (what the wait and the gate hold). */
  pnmem_admit_answer a;
  CHECK(pnmem_admit(&prealloc, 512, &a) == 0);
  CHECK(a.status == PNMEM_DENIED && strcmp(a.reason, "host_reserve") == 0 && a.need_bytes == 0);

  /* Held past the patience: the refusal as it stands, after the patience. */
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  CHECK(pnmem_admit_wait(&prealloc, 512, 120, &a) == 0);
  CHECK(ms_since(&t0) >= 119);
  CHECK(a.status == PNMEM_DENIED && strcmp(a.reason, "host_reserve") == 0);

  /* Held, then served: the co-tenant leaves 300 ms in, well within a 10 s patience. */
  pthread_t t;
  leave_after_ms = 300;
  CHECK(pthread_create(&t, NULL, co_tenant_leaves, NULL) == 0);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  CHECK(pnmem_admit_wait(&prealloc, 512, 10000, &a) == 0);
  const long held_ms = ms_since(&t0);
  pthread_join(t, NULL);
  CHECK(a.status == PNMEM_ADMITTED && a.fit_tokens == 512);
  CHECK(held_ms >= 290 && held_ms < 5000);
  printf("zero cost: held %ld ms at the reserve, then served (%s)\n", held_ms, a.reason);
  CHECK(pnmem_metrics_text(text, sizeof text, PNMEM_METRICS_COUNTERS) > 0);
  CHECK(metric(text, "\npnmem_held_served_total ") == served0 + 1);
  CHECK(metric(text, "\npnmem_held_timed_out_total ") == timed_out0 + 1);

  /* The engine's own rule: admit (now, 0 B), or reject (now, and a gate sheds it). */
  set_avail(reserve - 1024);
  pnmem_model own = prealloc;
  own.zero_cost = PNMEM_ZERO_COST_ADMIT;
  CHECK(pnmem_admit(&own, 512, &a) == 0);
  CHECK(a.status == PNMEM_ADMITTED && a.need_bytes == 0);
  own.zero_cost = PNMEM_ZERO_COST_REJECT;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  CHECK(pnmem_admit_wait(&own, 512, 10000, &a) == 0);
  CHECK(ms_since(&t0) < 5000); /* not held */
  CHECK(a.status == PNMEM_DENIED && strcmp(a.reason, "host_reserve") == 0);
  pnmem_gate* shed = pnmem_gate_create_for(&own, 4);
  CHECK(shed != NULL);
  pnmem_gate_notify_denied(shed, &a, 512);
  CHECK(pnmem_gate_acquire_tokens(shed, 512, 10000) == PNMEM_GATE_OVERLOADED);
  pnmem_gate_destroy(shed);
  own.zero_cost = (pnmem_zero_cost)7;
  CHECK(pnmem_admit(&own, 512, &a) == -1); /* not a rule: refused, with a line naming model->zero_cost */

  /* The gate holds it (a TIGHT push, not CRITICAL): the waiter is served once the co-tenant leaves. */
  pnmem_gate* gate = pnmem_gate_create_for(&prealloc, 4);
  CHECK(gate != NULL);
  CHECK(pnmem_admit(&prealloc, 512, &a) == 0);
  CHECK(a.status == PNMEM_DENIED);
  pnmem_gate_notify_denied(gate, &a, 512);
  leave_after_ms = 300;
  CHECK(pthread_create(&t, NULL, co_tenant_leaves, NULL) == 0);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  CHECK(pnmem_gate_acquire_tokens(gate, 512, 10000) == PNMEM_GATE_ACQUIRED);
  const long gate_ms = ms_since(&t0);
  pthread_join(t, NULL);
  CHECK(gate_ms >= 250 && gate_ms < 5000);
  printf("zero cost: the gate held the request %ld ms, then granted its slot\n", gate_ms);
  pnmem_gate_release(gate);
  pnmem_gate_destroy(gate);
}

int main(void) {
  if (tree_make("cache") != 0) return 1;
  main_thread = pthread_self();
  const uint64_t watch_floor = reserve + reserve / 4;
  avail = kb_up(watch_floor) + 40 * MIB; /* room for 2.5 entries above WATCH's floor */
  pthread_mutex_lock(&box_mu);
  write_meminfo_locked();
  pthread_mutex_unlock(&box_mu);

  pnmem_watcher_options o;
  CHECK(pnmem_watcher_options_init(&o) == 0);
  o.poll_interval_ms = 50;
  o.pressure_poll_interval_ms = 50;
  o.root = tree_root;
  CHECK(pnmem_watcher_start_with(&o) == 0);

  /* 1. Twelve inserts: each makes its room from the oldest entries; none refused. */
  int inserted = 0;
  for (int id = 1; id <= 12; ++id) inserted += insert(id);
  CHECK(inserted == 12);
  pthread_mutex_lock(&box_mu);
  /* The newest two (one, if a sample that began before a settle counted an entry twice for a moment). */
  CHECK(cache_n >= 1 && cache_n <= 2);
  for (int i = 0; i < cache_n; ++i) CHECK(cache_ids[i] == 12 - (cache_n - 1) + i);
  printf("cache: 12 inserts, 0 refused, holding the newest %d (entries %d to 12)\n", cache_n, cache_ids[0]);
  pthread_mutex_unlock(&box_mu);
  CHECK(host_level() <= PNMEM_LEVEL_WATCH);

  /* 2. A cache that will not drop anything: refused, nothing reserved, nothing lost. */
  pthread_mutex_lock(&box_mu);
  cannot_free = 1;
  pthread_mutex_unlock(&box_mu);
  pnmem_admit_answer a;
  pnmem_reservation r = 99;
  pthread_mutex_lock(&box_mu);
  const int held_entries = cache_n;
  pthread_mutex_unlock(&box_mu);
  CHECK(pnmem_make_room(ENTRY_BYTES, 0, drop_oldest, NULL, &a, &r) == 0);
  CHECK(a.status == PNMEM_CAPPED && strcmp(a.reason, "host_budget") == 0);
  CHECK(r == 0);
  pthread_mutex_lock(&box_mu);
  CHECK(cache_n == held_entries);
  cannot_free = 0;
  pthread_mutex_unlock(&box_mu);

  /* 3. The shed hook; then a co-tenant takes 40 MiB while this thread is blocked. */
  uint64_t want = 1;
  CHECK(pnmem_shed_bytes(&want) == 0);
  CHECK(want == 0); /* at WATCH or better: nothing to shed */
  CHECK(pnmem_set_shed_hook(other_hook, NULL) == 0);
  CHECK(pnmem_set_shed_hook(shed_hook, (void*)&hook_calls) == 0); /* replaces it */
  /* The co-tenant takes what the cache holds and the 8 MiB left above the floor: the cache must go. */
  pthread_mutex_lock(&box_mu);
  const uint64_t held = (uint64_t)cache_n * ENTRY_BYTES;
  avail = kb_up(watch_floor) - held;
  write_meminfo_locked();
  pthread_mutex_unlock(&box_mu);
  int waited_ms = 0;
  while (waited_ms < 3000) { /* the engine's loop, busy: it calls nothing of pnmem's */
    sleep_ms(10);
    waited_ms += 10;
    pthread_mutex_lock(&box_mu);
    const int done = hook_calls > 0 && avail >= watch_floor;
    pthread_mutex_unlock(&box_mu);
    if (done) break;
  }
  pthread_mutex_lock(&box_mu);
  CHECK(hook_calls >= (held > ENTRY_BYTES ? 2 : 1));
  CHECK(hook_on_other_thread);
  CHECK(hook_freed == held);
  CHECK(cache_n == 0);
  CHECK(avail >= watch_floor);
  printf("cache: shed by the hook on the poll thread within %d ms: asked %" PRIu64 " B, freed %" PRIu64 " B in %d call(s)\n",
         waited_ms, hook_asked, hook_freed, hook_calls);
  pthread_mutex_unlock(&box_mu);
  CHECK(other_hook_calls == 0);
  CHECK(pnmem_shed_bytes(&want) == 0);
  CHECK(want == 0);
  CHECK(host_level() <= PNMEM_LEVEL_WATCH);

  /* 4. The metrics count the hook's work; NULL removes it. */
  char text[65536];
  CHECK(pnmem_metrics_text(text, sizeof text, PNMEM_METRICS_COUNTERS) > 0);
  CHECK(metric(text, "\npnmem_shed_calls_total ") >= 1);
  CHECK(metric(text, "\npnmem_shed_freed_bytes_total ") == hook_freed);
  CHECK(pnmem_set_shed_hook(NULL, NULL) == 0);
  const int calls = hook_calls;
  pthread_mutex_lock(&box_mu);
  avail = kb_up(reserve + 1); /* near TIGHT's bottom */
  write_meminfo_locked();
  pthread_mutex_unlock(&box_mu);
  sleep_ms(200);
  CHECK(host_level() == PNMEM_LEVEL_TIGHT);
  CHECK(pnmem_shed_bytes(&want) == 0);
  CHECK(want == watch_floor - kb_up(reserve + 1));
  CHECK(hook_calls == calls);
  CHECK(pnmem_shed_bytes(NULL) == -1);

  /* 5. The fleet gauges from C: a gate's slots and queue, plus the engine's own numbers. */
  pthread_mutex_lock(&box_mu);
  avail = total / 2; /* OK again: the gate's capacity is its own, not the ladder's half */
  write_meminfo_locked();
  pthread_mutex_unlock(&box_mu);
  sleep_ms(200);
  CHECK(pnmem_metrics_text(text, sizeof text, PNMEM_METRICS_COUNTERS) > 0);
  CHECK(metric(text, "\npnmem_queued_requests ") == UINT64_MAX); /* no gate, no numbers yet: no fleet families */
  pnmem_gate* gate = pnmem_gate_create(4, 8);
  CHECK(gate != NULL);
  CHECK(pnmem_gate_acquire(gate, 0) == PNMEM_GATE_ACQUIRED);
  CHECK(pnmem_set_fleet_load(3, 2, 0, 256 * MIB, 1024 * MIB) == 0);
  CHECK(pnmem_metrics_text(text, sizeof text, PNMEM_METRICS_ALL) > 0);
  CHECK(metric(text, "\npnmem_queued_requests ") == 3);
  CHECK(metric(text, "\npnmem_running_requests ") == 3); /* 2 of the engine's + 1 slot of the gate's */
  CHECK(metric(text, "\npnmem_slot_capacity ") == 4);
  CHECK(strstr(text, "\npnmem_kv_cache_usage_ratio 0.25\n") != NULL);
  pnmem_gate_release(gate);
  pnmem_gate_destroy(gate);
  CHECK(pnmem_metrics_text(text, sizeof text, PNMEM_METRICS_COUNTERS) > 0);
  CHECK(metric(text, "\npnmem_running_requests ") == 2); /* the gate is gone */
  CHECK(metric(text, "\npnmem_slot_capacity ") == 0);

  /* 6. Requests that cost nothing, at CRITICAL: held, then served (the zero-cost rule hold, the default). */
  zero_cost_requests();

  pnmem_watcher_stop();
  tree_remove();
  if (failures != 0) return 1;
  printf("c cache: all checks passed\n");
  return 0;
}
