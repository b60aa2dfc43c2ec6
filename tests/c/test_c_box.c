/* tests/c/test_c_box.c - the box ledger through the C ABI: two processes that start their watchers with
 * one pnmem_watcher_options.ledger count each other's reservations (pnmem_pending_bytes,
 * pnmem_reserve_bytes, pnmem_host_budget); the other one killed with SIGKILL, its bytes stop counting at
 * the next sample; "off" counts alone; a ledger that is no pnmem ledger is refused with one line and the
 * process counts alone. Both processes' samplers read a tree this test writes (16 GiB, 12 GiB available),
 * the ledger is a file in that tree's directory. */
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
  pnmem_watcher_stop();

  char file[420];
  snprintf(file, sizeof file, "%s/box.ledger", tree_root);
  unlink(file);
  tree_remove();
  return failures != 0;
}
