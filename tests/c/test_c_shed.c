/* tests/c/test_c_shed.c - an engine sheds its prompt cache with one call per decision (issue 28).
 *
 * The box is a tree this test writes (pnmem_watcher_options.root): 8 GiB, MemAvailable 1.25 GiB, which
 * is TIGHT (the reserve is 15 % of 8 GiB, 1288490188 B; WATCH needs 1.25 x that). Hour-long poll
 * intervals: the watcher samples once, at start, and then only when the test says so. The engine:
 *   1. pnmem_host_room: TIGHT, free_bytes[WATCH] = X (one call, no loop of drop/sample/ask);
 *   2. drops cache entries holding exactly X bytes (the last one trimmed to fit);
 *   3. pnmem_credit_freed(X): the next answer is WATCH, on the same snapshot (no sample forced);
 *   4. the kernel's numbers catch up (the tree's MemAvailable rises by X) and a sample reads them:
 *      the credit is gone and the level is still WATCH, now from the sample itself.
 * Before issue 28 there was no figure to free and no credit: the engine dropped an entry, forced a
 * sample, asked again, in a loop. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "c_check.h"
#include "c_tree.h"
#include "pnmem/pnmem_c.h"

#define MIB ((uint64_t)1 << 20)
#define GIB ((uint64_t)1 << 30)

/* The kernel counts whole pages, and prints kB: the freed bytes rounded up. */
static void write_meminfo(uint64_t total, uint64_t avail) { tree_meminfo(total, (avail + 1023) / 1024 * 1024); }

/* A prompt cache: entries of real memory. */
#define ENTRIES 64
static void* entry[ENTRIES];
static uint64_t entry_bytes[ENTRIES];
static int n_entries;

/* Drops entries, oldest first, until exactly `want` bytes are freed (the last one is trimmed): what
 * an engine does with the figure pnmem names. Returns the bytes freed. */
static uint64_t cache_evict(uint64_t want) {
  uint64_t freed = 0;
  for (int i = 0; i < n_entries && freed < want; ++i) {
    if (entry[i] == NULL) continue;
    const uint64_t left = want - freed;
    if (entry_bytes[i] <= left) {
      free(entry[i]);
      entry[i] = NULL;
      freed += entry_bytes[i];
      entry_bytes[i] = 0;
    } else { /* keep the entry's head: a partial entry, as a paged KV cache drops blocks */
      void* smaller = realloc(entry[i], (size_t)(entry_bytes[i] - left));
      if (smaller != NULL) entry[i] = smaller;
      entry_bytes[i] -= left;
      freed += left;
    }
  }
  return freed;
}

/* The shed hook: frees what pnmem asks for (the kernel's numbers do not move until the test says so). */
static int hook_calls;
static uint64_t hook_wanted;
static uint64_t shed_hook(uint64_t want, void* user) {
  ++hook_calls;
  *(uint64_t*)user = want;
  return cache_evict(want);
}

int main(void) {
  if (tree_make("shed") != 0) return 1;

  const uint64_t total = 8 * GIB;
  const uint64_t reserve = 1288490188; /* 15 % of 8 GiB, floored */
  const uint64_t tight_avail = GIB + GIB / 4;
  write_meminfo(total, tight_avail);

  for (n_entries = 0; n_entries < 16; ++n_entries) { /* 16 x 16 MiB: more than the shed needs */
    entry_bytes[n_entries] = 16 * MIB;
    entry[n_entries] = malloc((size_t)entry_bytes[n_entries]);
    CHECK(entry[n_entries] != NULL);
    if (entry[n_entries] != NULL) memset(entry[n_entries], 1, (size_t)entry_bytes[n_entries]);
  }

  pnmem_watcher_options o;
  CHECK(pnmem_watcher_options_init(&o) == 0);
  o.poll_interval_ms = 3600000;
  o.pressure_poll_interval_ms = 3600000;
  o.root = tree_root;
  CHECK(pnmem_watcher_start_with(&o) == 0);

  /* 1. One call: where the host stands, and what to free for WATCH. */
  pnmem_room room;
  CHECK(pnmem_room_init(&room) == 0);
  CHECK(pnmem_host_room(&room) == 0);
  CHECK(room.sampled == 1);
  CHECK(room.level == PNMEM_LEVEL_TIGHT);
  CHECK(room.reserve_bytes == reserve);
  CHECK(room.avail_bytes == tight_avail);
  const uint64_t watch_floor = reserve + reserve / 4;
  const uint64_t to_free = room.free_bytes[PNMEM_LEVEL_WATCH];
  CHECK(to_free == watch_floor - tight_avail);
  CHECK(room.free_bytes[PNMEM_LEVEL_OK] == 2 * reserve - tight_avail);
  CHECK(room.free_bytes[PNMEM_LEVEL_TIGHT] == 0 && room.take_bytes[PNMEM_LEVEL_TIGHT] == tight_avail - reserve - 1);
  const uint64_t seq = room.seq;
  /* Which source says TIGHT: the host bytes (memory is short), not PSI (this tree has none). */
  pnmem_snapshot snap;
  CHECK(pnmem_snapshot_init(&snap) == 0);
  CHECK(pnmem_read_snapshot(&snap) == 0);
  CHECK(snap.state.level == PNMEM_LEVEL_TIGHT);
  CHECK(snap.host_level == PNMEM_LEVEL_TIGHT && snap.memory_level == PNMEM_LEVEL_TIGHT);
  CHECK(snap.psi_level == PNMEM_LEVEL_OK && snap.die_level == PNMEM_LEVEL_OK && snap.os_level == PNMEM_LEVEL_OK);
  CHECK(pnmem_plan_ladder_now(8, 16384, false).kv_evict); /* memory short: the evict rung is on */
  /* A caller built against the first header: its struct ends before the levels, which stay unwritten. */
  pnmem_snapshot old;
  memset(&old, 0x5a, sizeof old);
  old.struct_size = (uint32_t)offsetof(pnmem_snapshot, host_level);
  CHECK(pnmem_read_snapshot(&old) == 0);
  CHECK(old.state.seq == snap.state.seq);
  CHECK((unsigned)old.host_level == 0x5a5a5a5au && (unsigned)old.memory_level == 0x5a5a5a5au);
  CHECK(seq >= 1);
  printf("shed: level TIGHT, avail %" PRIu64 " B, free %" PRIu64 " B for WATCH\n", room.avail_bytes, to_free);

  /* 2. Free exactly that. 3. Credit it: WATCH now, on the same snapshot. */
  const uint64_t freed = cache_evict(to_free);
  CHECK(freed == to_free);
  CHECK(pnmem_credit_freed(freed) == 0);
  CHECK(pnmem_host_room(&room) == 0);
  CHECK(room.seq == seq); /* no sample was taken */
  CHECK(room.level == PNMEM_LEVEL_WATCH);
  CHECK(room.free_bytes[PNMEM_LEVEL_WATCH] == 0);
  CHECK(room.take_bytes[PNMEM_LEVEL_WATCH] == 0); /* exactly on WATCH's floor: not a byte more was freed */
  CHECK(room.credited_bytes == freed);
  CHECK(room.avail_bytes == watch_floor);
  CHECK(room.pending_bytes == 0);
  /* A reservation: pending, and taken off the available bytes (issue 42 item 4). */
  {
    pnmem_admit_answer held;
    pnmem_reservation r = 0;
    CHECK(pnmem_reserve_bytes(1 << 20, 0, &held, &r) == 0 && r != 0);
    CHECK(pnmem_host_room(&room) == 0);
    CHECK(room.pending_bytes == (uint64_t)1 << 20);
    CHECK(room.avail_bytes == watch_floor - ((uint64_t)1 << 20));
    pnmem_reservation_cancel(r);
    CHECK(pnmem_host_room(&room) == 0);
    CHECK(room.pending_bytes == 0 && room.avail_bytes == watch_floor);
  }
  /* Every answer counts the credit: a byte check sees the freed room above the reserve. */
  pnmem_admit_answer a;
  CHECK(pnmem_check_bytes(watch_floor - reserve, -1, &a) == 0);
  CHECK(a.status == PNMEM_ADMITTED);
  CHECK(pnmem_check_bytes(watch_floor - reserve + 1, -1, &a) == 0);
  CHECK(a.status == PNMEM_CAPPED);
  printf("shed: freed %" PRIu64 " B, credited: level WATCH on snapshot %" PRIu64 "\n", freed, room.seq);

  /* 4. The kernel's numbers catch up; a sample reads them and the credit is spent. */
  write_meminfo(total, tight_avail + freed);
  pnmem_watcher_poll_now();
  CHECK(pnmem_host_room(&room) == 0);
  CHECK(room.seq > seq);
  CHECK(room.credited_bytes == 0);
  CHECK(room.level == PNMEM_LEVEL_WATCH);
  CHECK(room.avail_bytes == (tight_avail + freed + 1023) / 1024 * 1024);

  /* 5. The same through the shed hook: the tree drops back to TIGHT, a sample (this thread's poll_now, the
   *    intervals being an hour) calls the hook with exactly what pnmem_shed_bytes says, and what it frees is
   *    credited: WATCH on that very snapshot, before the kernel's numbers move. */
  for (int i = 0; i < 20; ++i) { /* refill the cache: 20 x 16 MiB, more than the shed needs */
    entry_bytes[n_entries] = 16 * MIB;
    entry[n_entries] = malloc((size_t)entry_bytes[n_entries]);
    CHECK(entry[n_entries] != NULL);
    ++n_entries;
  }
  CHECK(pnmem_set_shed_hook(shed_hook, &hook_wanted) == 0);
  write_meminfo(total, tight_avail);
  pnmem_watcher_poll_now();
  CHECK(hook_calls == 1);
  CHECK(hook_wanted == to_free);
  CHECK(pnmem_host_room(&room) == 0);
  CHECK(room.level == PNMEM_LEVEL_WATCH);
  CHECK(room.credited_bytes == to_free);
  uint64_t left = 1;
  CHECK(pnmem_shed_bytes(&left) == 0);
  CHECK(left == 0);
  pnmem_watcher_poll_now(); /* the kernel has not caught up: the credit stays, no second call */
  CHECK(pnmem_set_shed_hook(NULL, NULL) == 0);
  printf("shed: the hook freed %" PRIu64 " B on the sample that saw TIGHT: level WATCH on it\n", hook_wanted);

  pnmem_watcher_stop();
  cache_evict(UINT64_MAX);
  tree_remove();
  if (failures != 0) return 1;
  printf("c shed: all checks passed\n");
  return 0;
}
