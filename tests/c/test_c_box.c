/* tests/c/test_c_box.c - the box ledger through the C ABI: two processes that start their watchers with
 * one pnmem_watcher_options.ledger count each other's reservations (pnmem_pending_bytes,
 * pnmem_reserve_bytes, pnmem_host_budget); the other one killed with SIGKILL, its bytes stop counting at
 * the next sample; "off" counts alone; a ledger that is no pnmem ledger is refused with one line and the
 * process counts alone. Both processes' samplers read a tree this test writes (16 GiB, 12 GiB available),
 * the ledger is a file in that tree's directory. Dies: the two number the same two GPUs the other way
 * round (pnmem_set_die_uuid); a model load reserved by one on its die 0 is on the other's die 1
 * (pnmem_admit_model_load, pnmem_check_bytes, pnmem_reserve_die_bytes count it), and goes with the
 * process killed holding it. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pnmem/pnmem_c.h>

#include "c_check.h"
#include "c_tree.h"

#define GIB (1ULL << 30)
#define GPU_X "GPU-0a0a0a0a-1111-2222-3333-444444444444"
#define GPU_Y "GPU-0b0b0b0b-5555-6666-7777-888888888888"

/* Two dies of 40 GiB, 40 GiB free each, named `d0` and `d1`. */
static int feed_dies(const char* d0, const char* d1) {
  if (pnmem_set_die(0, 40 * GIB, 40 * GIB, 0, 0) != 0 || pnmem_set_die(1, 40 * GIB, 40 * GIB, 0, 0) != 0) return -1;
  return pnmem_set_die_uuid(0, d0) == 0 && pnmem_set_die_uuid(1, d1) == 0 ? 0 : -1;
}

static char last_line[1024];
static void keep_line(void* user, const char* line) {
  (void)user;
  snprintf(last_line, sizeof last_line, "%s", line);
}

static void sleep_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static int start(const char* ledger) {
  pnmem_watcher_options o;
  pnmem_watcher_options_init(&o);
  o.root = tree_root;
  o.ledger = ledger;
  return pnmem_watcher_start_with(&o);
}

int main(void) {
  if (tree_make("c-box") != 0) return 1;
  tree_write("proc/meminfo", "MemTotal: 16777216 kB\nMemFree: 12582912 kB\nMemAvailable: 12582912 kB\n");
  tree_write("proc/pressure/memory",
             "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
  char ledger[400];
  snprintf(ledger, sizeof ledger, "%s/box.ledger", tree_root);
  /* A ledger that is no pnmem ledger: refused with one line naming it; the process counts alone. (In a
   * child forked before this process calls pnmem: its C state is its own, not a fork's copy.) */
  const pid_t refuser = fork();
  if (refuser == 0) {
    char junk[400];
    snprintf(junk, sizeof junk, "%s/junk.ledger", tree_root);
    FILE* f = fopen(junk, "w");
    if (f == NULL) _exit(5);
    fputs("not a ledger", f);
    fclose(f);
    pnmem_set_log_sink(keep_line, NULL);
    if (start(junk) != 0) _exit(6);
    if (strstr(last_line, "pnmem: box ledger ") == NULL || strstr(last_line, "junk.ledger refused: ") == NULL ||
        strstr(last_line, "this process counts only its own promises") == NULL) {
      fprintf(stderr, "c-box: the refusal said: %s\n", last_line);
      _exit(7);
    }
    pnmem_admit_answer x;
    pnmem_reservation y;
    if (pnmem_reserve_bytes(GIB, 0, &x, &y) != 0 || x.status != PNMEM_ADMITTED || pnmem_pending_bytes() != GIB) _exit(8);
    unlink(junk);
    _exit(0);
  }
  int st = 0;
  waitpid(refuser, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);

  int to_parent[2];
  if (pipe(to_parent) != 0) return 1;

  /* The other engine: joins, reserves 5 GiB (a prompt cache), says so, and holds it until killed. */
  const pid_t other = fork();
  if (other == 0) {
    close(to_parent[0]);
    if (start(ledger) != 0) _exit(2);
    pnmem_admit_answer a;
    pnmem_reservation r;
    if (pnmem_reserve_bytes(5 * GIB, 0, &a, &r) != 0 || a.status != PNMEM_ADMITTED) _exit(3);
    /* Its GPUs are (x, y): a 30 GiB model (and the die scratch, 1.5 GiB) onto x, its die 0. */
    if (feed_dies(GPU_X, GPU_Y) != 0) _exit(9);
    pnmem_model_load l;
    pnmem_model_load_init(&l);
    l.weights_bytes = 30 * GIB;
    l.die = 0;
    pnmem_reservation load;
    if (pnmem_admit_model_load_reserved(&l, &a, &load) != 0 || a.status != PNMEM_ADMITTED || load == 0) _exit(10);
    if (write(to_parent[1], "held\n", 5) != 5) _exit(4);
    for (;;) pause();
  }
  close(to_parent[1]);
  char got[8] = {0};
  CHECK(read(to_parent[0], got, 5) == 5 && strcmp(got, "held\n") == 0);

  pnmem_set_log_sink(keep_line, NULL);
  CHECK(start(ledger) == 0);
  /* 12 GiB available, the reserve 2.40 GiB: 9.60 GiB room, less the other's 5 GiB. */
  CHECK(pnmem_pending_bytes() == 5 * GIB);
  pnmem_admit_answer a;
  pnmem_reservation r;
  CHECK(pnmem_reserve_bytes(6 * GIB, 0, &a, &r) == 0);
  CHECK(a.status == PNMEM_CAPPED && a.pending_bytes == 5 * GIB);
  pnmem_budget b;
  CHECK(pnmem_host_budget(&b) == 0);
  CHECK(b.pending_bytes == 5 * GIB);
  char text[65536];
  CHECK(pnmem_metrics_text(text, sizeof text, PNMEM_METRICS_ALL) > 0);
  CHECK(strstr(text, "\npnmem_ledger_processes{") != NULL);
  CHECK(strstr(text, "} 2\n") != NULL);

  /* This process's GPUs are (y, x): x is its die 1, where the other promised 30 GiB + the scratch. The
   * policy's die reserve (1 GiB) and scratch (1.5 GiB) as the environment leaves them. */
  pnmem_policy p;
  CHECK(pnmem_policy_get(&p) == 0);
  const uint64_t promised = 30 * GIB + p.die_scratch_bytes;
  CHECK(feed_dies(GPU_Y, GPU_X) == 0);
  CHECK(pnmem_check_bytes(GIB, 1, &a) == 0);
  CHECK(a.status == PNMEM_ADMITTED && a.pending_bytes == promised);
  CHECK(a.limit_bytes == 40 * GIB - promised - p.die_reserve_bytes);
  CHECK(pnmem_check_bytes(GIB, 0, &a) == 0);
  CHECK(a.status == PNMEM_ADMITTED && a.pending_bytes == 0);
  pnmem_model_load l;
  pnmem_model_load_init(&l);
  l.weights_bytes = 20 * GIB;
  CHECK(pnmem_admit_model_load(&l, &a) == 0); /* die -1: the roomiest once the promise counts, y */
  CHECK(a.status == PNMEM_ADMITTED && a.die == 0);
  l.die = 1;
  CHECK(pnmem_admit_model_load(&l, &a) == 0);
  CHECK(a.status == PNMEM_DENIED && a.pending_bytes == promised);
  pnmem_reservation dr;
  CHECK(pnmem_reserve_die_bytes(1, 8 * GIB, 0, &a, &dr) == 0);
  CHECK(a.status == PNMEM_DENIED && dr == 0); /* 40 - 31.5 - 1 = 7.5 GiB left on x */
  CHECK(pnmem_reserve_die_bytes(1, 7 * GIB, 0, &a, &dr) == 0);
  CHECK(a.status == PNMEM_ADMITTED && dr != 0);
  pnmem_reservation_cancel(dr);

  /* SIGKILL, the OOM killer's way: at the next sample (at least 100 ms of sample time on) its holder is
   * freed and its bytes stop counting. */
  kill(other, SIGKILL);
  waitpid(other, NULL, 0);
  sleep_ms(150);
  pnmem_watcher_poll_now();
  CHECK(pnmem_pending_bytes() == 0);
  CHECK(pnmem_reserve_bytes(6 * GIB, 0, &a, &r) == 0);
  CHECK(a.status == PNMEM_ADMITTED);
  pnmem_reservation_cancel(r);
  CHECK(pnmem_check_bytes(GIB, 1, &a) == 0);
  CHECK(a.status == PNMEM_ADMITTED && a.pending_bytes == 0); /* the killed process's load went with it */
  pnmem_watcher_stop();

  char file[420];
  snprintf(file, sizeof file, "%s/box.ledger", tree_root);
  unlink(file);
  tree_remove();
  return failures != 0;
}
