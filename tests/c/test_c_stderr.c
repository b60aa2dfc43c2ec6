/* tests/c/test_c_stderr.c - with no log sink set, pnmem's lines go to standard error (issue 28 item 4).
 *
 * Before, a bad PN_* value read by the C library was dropped silently unless the engine had set a sink
 * first; the C++ library printed it. Now the C library's default sink is stderr: a bad PN_PSI_FULL_REJECT
 * reaches it on the first call that reads the environment, and pnmem_set_log_sink(NULL, NULL) silences
 * what follows. stderr is redirected to a file this test reads back. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "c_check.h"
#include "pnmem/pnmem_c.h"

static char captured[4096];

static void read_back(const char* path) {
  fflush(stderr);
  FILE* f = fopen(path, "r");
  size_t n = 0;
  if (f != NULL) {
    n = fread(captured, 1, sizeof captured - 1, f);
    fclose(f);
  }
  captured[n] = '\0';
}

int main(void) {
  const char* tmp = getenv("TMPDIR");
  char path[256];
  snprintf(path, sizeof path, "%s/pnmem-stderr-XXXXXX", tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
  const int fd = mkstemp(path);
  if (fd < 0) {
    perror("test_c_stderr: mkstemp");
    return 1;
  }
  close(fd);
  const int saved = dup(2);
  if (saved < 0 || freopen(path, "w", stderr) == NULL) {
    perror("test_c_stderr: redirecting stderr");
    return 1;
  }
  setenv("PN_PSI_FULL_REJECT", "abc", 1);
  pnmem_policy p;
  CHECK(pnmem_policy_get(&p) == 0); /* the first call that reads the environment */
  CHECK(p.psi_full_reject_bp == 1500); /* the default stays */
  read_back(path);
  CHECK(strstr(captured, "pnmem: PN_PSI_FULL_REJECT=\"abc\": not a number; keeping 15.00 %\n") != NULL);
  /* A refused struct goes there too, one line. */
  pnmem_snapshot snap;
  memset(&snap, 0, sizeof snap);
  CHECK(pnmem_read_snapshot(&snap) == -1);
  read_back(path);
  CHECK(strstr(captured, "pnmem: pnmem_read_snapshot: out->struct_size is 0") != NULL);
  /* Silenced on request: nothing more is written. */
  pnmem_set_log_sink(NULL, NULL);
  const size_t before = strlen(captured);
  CHECK(pnmem_read_snapshot(&snap) == -1);
  read_back(path);
  CHECK(strlen(captured) == before);

  fflush(stderr);
  dup2(saved, 2);
  unlink(path);
  if (failures != 0) {
    fprintf(stderr, "test_c_stderr: captured stderr was:\n%s", captured);
    return 1;
  }
  printf("c stderr: all checks passed\n");
  return 0;
}
