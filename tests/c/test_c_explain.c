/* tests/c/test_c_explain.c - every kind of answer explained, checked against the page that shows them.
 *
 *   test_c_explain DOCS_PAGE
 *
 * pnmem_explain words an answer by what was asked (a request's tokens, host bytes, bytes on a die, a
 * model load, one die's slice of one, a load's host spike, a cache insert, a host load; include/pnmem/engine/explain.hpp). This test
 * makes every answer those calls give on a box it writes (pnmem_watcher_options.root: 16 GiB, its
 * MemAvailable and PSI set per scene; die 0 has 64 GiB free of 80, die 1 2 GiB of 4, and die 2, fed
 * later, 10 MiB of 16), prints each as "<what was asked>: <pnmem_explain's line>", and compares the lines with
 * the block under DOCS_PAGE's "<!-- test_c_explain -->" marker: the page shows what pnmem says, to the
 * byte. A line that differs is printed with what the page has.
 *
 * The numbers follow from the tree, the default policy (the PN_* variables are cleared first) and the
 * reference model: host reserve max(1 GiB, 15 % of 16 GiB) = 2576980377 B; die reserve 1 GiB; load
 * scratch 1.5 GiB; load spike 2.4 GiB. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
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
#define MAX_LINES 64

extern char** environ;

static char lines[MAX_LINES][512];
static int n_lines;

/* A scene: MemAvailable and PSI full avg10 (percent), then one sample. */
static void scene(uint64_t avail, double psi_full_avg10) {
  char text[512];
  snprintf(text, sizeof text, "MemTotal:       %" PRIu64 " kB\nMemFree:        %" PRIu64 " kB\nMemAvailable:   %" PRIu64
           " kB\n", 16 * GIB / 1024, avail / 1024, avail / 1024);
  tree_write("proc/meminfo", text);
  snprintf(text, sizeof text, "some avg10=%.2f avg60=0.00 avg300=0.00 total=0\nfull avg10=%.2f avg60=0.00 avg300=0.00 total=0\n",
           psi_full_avg10, psi_full_avg10);
  tree_write("proc/pressure/memory", text);
  pnmem_watcher_poll_now();
}

static void say(const char* what, const pnmem_admit_answer* a) {
  char line[400];
  const int len = pnmem_explain(a, line, sizeof line);
  CHECK(len > 0 && (size_t)len < sizeof line);
  CHECK(n_lines < MAX_LINES);
  if (n_lines >= MAX_LINES) return;
  snprintf(lines[n_lines], sizeof lines[n_lines], "%s: %s", what, line);
  printf("%s\n", lines[n_lines]);
  ++n_lines;
}

static void request(const char* what, const pnmem_model* m, int n_tokens) {
  pnmem_admit_answer a;
  CHECK(pnmem_admit(m, n_tokens, &a) == 0);
  say(what, &a);
}

static void load(const char* what, int slice, uint64_t weights, uint64_t kv, int die) {
  pnmem_model_load l;
  CHECK(pnmem_model_load_init(&l) == 0);
  l.weights_bytes = weights;
  l.kv_bytes = kv;
  l.die = die;
  pnmem_admit_answer a;
  CHECK((slice ? pnmem_admit_model_load_die(&l, &a) : pnmem_admit_model_load(&l, &a)) == 0);
  say(what, &a);
}

static void host_bytes(const char* what, uint64_t bytes) {
  pnmem_admit_answer a;
  CHECK(pnmem_check_bytes(bytes, -1, &a) == 0);
  say(what, &a);
}

static void die_bytes(const char* what, uint64_t bytes, int die) {
  pnmem_admit_answer a;
  CHECK(pnmem_check_bytes(bytes, die, &a) == 0);
  say(what, &a);
}

static void cache_insert(const char* what, uint64_t bytes) {
  pnmem_admit_answer a;
  pnmem_reservation r;
  CHECK(pnmem_make_room(bytes, 0, NULL, NULL, &a, &r) == 0); /* no cache to free from: the answer alone */
  say(what, &a);
  pnmem_reservation_cancel(r);
}

static void host_load(const char* what, int wanted) {
  pnmem_admit_answer a;
  CHECK(pnmem_admit_host_load(GIB, 256 * 1024, wanted, 1024, 0, &a, NULL) == 0); /* 1 GiB + 256 KiB a token */
  say(what, &a);
}

static void spike(const char* what) {
  pnmem_admit_answer a;
  CHECK(pnmem_admit_load_spike(&a) == 0);
  say(what, &a);
}

/* The page's block: the lines after the marker's ``` up to the closing ```. */
static int compare_with_page(const char* page) {
  FILE* f = fopen(page, "r");
  if (f == NULL) {
    fprintf(stderr, "test_c_explain: cannot read %s: %s\n", page, strerror(errno));
    return 0;
  }
  char buf[1024];
  int state = 0; /* 0 before the marker, 1 before the fence, 2 in the block, 3 after */
  int k = 0, same = 1, line_no = 0;
  while (state < 3 && fgets(buf, sizeof buf, f) != NULL) {
    ++line_no;
    buf[strcspn(buf, "\n")] = '\0';
    if (state == 0 && strcmp(buf, "<!-- test_c_explain -->") == 0) state = 1;
    else if (state == 1 && strncmp(buf, "```", 3) == 0) state = 2;
    else if (state == 2 && strcmp(buf, "```") == 0) state = 3;
    else if (state == 2) {
      if (k >= n_lines || strcmp(buf, lines[k]) != 0) {
        fprintf(stderr, "%s:%d: the page says\n  %s\npnmem says\n  %s\n", page, line_no, buf, k < n_lines ? lines[k] : "(nothing more)");
        same = 0;
      }
      ++k;
    }
  }
  fclose(f);
  if (state != 3) {
    fprintf(stderr, "%s: no ``` block after a \"<!-- test_c_explain -->\" line\n", page);
    return 0;
  }
  for (; k < n_lines; ++k) {
    fprintf(stderr, "%s: the block ends before pnmem's line\n  %s\n", page, lines[k]);
    same = 0;
  }
  return same;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_c_explain DOCS_PAGE\n");
    return 2;
  }
  for (;;) { /* the default policy: no PN_* variable of the caller's */
    char** e = environ;
    while (*e != NULL && strncmp(*e, "PN_", 3) != 0) ++e;
    if (*e == NULL) break;
    char name[128];
    const size_t n = strcspn(*e, "=");
    snprintf(name, sizeof name, "%.*s", (int)n, *e);
    unsetenv(name);
  }
  if (tree_make("explain") != 0) return 1;

  pnmem_model m; /* the reference model (~0.4 MiB of KV per token at f16), its window 16384 */
  CHECK(pnmem_model_init_reference(&m) == 0);
  m.kv = PNMEM_KV_F16;
  m.max_window = 16384;
  pnmem_model gpu = m; /* the same model resident on the dies: no host bytes per token */
  gpu.gpu_resident = true;

  /* No watcher yet: nothing is known. */
  request("request, no watcher", &m, 1500);
  host_bytes("host bytes, no watcher", 64 * MIB);

  pnmem_watcher_options o;
  CHECK(pnmem_watcher_options_init(&o) == 0);
  o.poll_interval_ms = 3600000; /* samples only when the test says */
  o.pressure_poll_interval_ms = 3600000;
  o.root = tree_root;
  scene(12 * GIB, 0.0);
  CHECK(pnmem_watcher_start_with(&o) == 0);
  CHECK(pnmem_set_die(0, 64 * GIB, 80 * GIB, 16 * GIB, 0) == 0);
  CHECK(pnmem_set_die(1, 2 * GIB, 4 * GIB, 2 * GIB, 0) == 0);

  /* Calm: 12 GiB available, 9.6 GiB above the reserve. */
  pnmem_state s;
  CHECK(pnmem_read(&s) == 0);
  CHECK(s.level == PNMEM_LEVEL_OK && s.host_avail_bytes == 12 * GIB);
  m.die = 0; /* the host binds: die 0 has more room */
  request("request, fits", &m, 1500);
  request("request, GPU-resident", &gpu, 1500);
  m.max_window = 4096;
  request("request, longer than the window", &m, 5000);
  m.max_window = 0;
  request("request, more than the host has", &m, 100000);
  m.die = 1;
  request("request, more than die 1 has", &m, 100000);
  m.die = 3;
  request("request, die 3 not fed", &m, 1500);
  m.die = 0;
  m.max_window = 16384;
  {
    pnmem_admit_answer a;
    pnmem_reservation r;
    CHECK(pnmem_reserve_bytes(64 * MIB, 0, &a, &r) == 0);
    say("host bytes, fits", &a);
    pnmem_reservation r2;
    CHECK(pnmem_reserve_bytes(64 * MIB, 0, &a, &r2) == 0);
    say("host bytes, after a reservation", &a);
    pnmem_reservation_cancel(r);
    pnmem_reservation_cancel(r2);
  }
  host_bytes("host bytes, more than the host has", 100 * GIB);
  die_bytes("die bytes, fits", GIB, 0);
  die_bytes("die bytes, more than die 1 has", 3 * GIB / 2, 1);
  die_bytes("die bytes, die 3 not fed", GIB, 3);
  load("model load, fits", 0, 40 * GIB, 8 * GIB, -1);
  load("model load, more than die 1 has", 0, 40 * GIB, 8 * GIB, 1);
  load("model load, die 3 not fed", 0, 40 * GIB, 8 * GIB, 3);
  load("load slice, fits", 1, 20 * GIB, 4 * GIB, 0);
  load("load slice, more than die 1 has", 1, 20 * GIB, 4 * GIB, 1);
  load("load slice, no die named", 1, 20 * GIB, 4 * GIB, -1);
  spike("load spike, fits");
  cache_insert("cache insert, fits", 64 * MIB);
  host_load("host load, fits", 8192);
  host_load("host load, a smaller context", 65536);

  /* Tight: 2.5 GiB available, 102.4 MiB above the reserve. */
  scene(5 * GIB / 2, 0.0);
  CHECK(pnmem_read(&s) == 0);
  CHECK(s.level == PNMEM_LEVEL_TIGHT);
  request("request, tight, GPU-resident", &gpu, 12000);
  request("request, tight", &m, 1500);
  CHECK(pnmem_set_die(2, 10 * MIB, 16 * MIB, 6 * MIB, 0) == 0);
  m.die = 2;
  request("request, tight, die 2 nearly full", &m, 1500);
  m.die = 0;
  spike("load spike, tight");
  cache_insert("cache insert, tight, nothing freed", 64 * MIB);
  host_load("host load, tight", 8192);

  /* Critical: 1 GiB available, inside the reserve. */
  scene(GIB, 0.0);
  CHECK(pnmem_read(&s) == 0);
  CHECK(s.level == PNMEM_LEVEL_CRITICAL);
  request("request, critical", &m, 1500);
  host_bytes("host bytes, critical", 64 * MIB);
  spike("load spike, critical");
  cache_insert("cache insert, critical, nothing freed", 64 * MIB);
  host_load("host load, critical", 8192);

  /* Stalled: bytes to spare, but the box has been stalled on memory 60 % of the last 10 s. */
  scene(12 * GIB, 60.0);
  request("request, stalled", &m, 1500);

  pnmem_watcher_stop();
  tree_remove();

  CHECK(compare_with_page(argv[1]));
  if (failures != 0) return 1;
  printf("c explain: %d lines, as %s shows them\n", n_lines, argv[1]);
  return 0;
}
