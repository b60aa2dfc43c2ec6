/* metrics_text_dump ROOT WHAT: pnmem_metrics_text from a C program whose watcher reads ROOT (a fixture
 * tree laid out like "/", or "/" itself), WHAT one of box, counters, all; printed to stdout.
 * metrics_same_test.sh compares it with `pnmem metrics --root ROOT` byte for byte and lints it with
 * promtool. The watcher takes its one synchronous sample at start and no other (hour-long intervals),
 * so the text is that sample's, as `pnmem metrics` prints its one sample. Exit 0, or 1 with a line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pnmem/pnmem_c.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s ROOT box|counters|all\n", argv[0]);
    return 2;
  }
  unsigned what = 0;
  if (strcmp(argv[2], "box") == 0) what = PNMEM_METRICS_BOX;
  else if (strcmp(argv[2], "counters") == 0) what = PNMEM_METRICS_COUNTERS;
  else if (strcmp(argv[2], "all") == 0) what = PNMEM_METRICS_ALL;
  else {
    fprintf(stderr, "metrics_text_dump: WHAT must be box, counters or all, not %s\n", argv[2]);
    return 2;
  }
  pnmem_watcher_options o;
  if (pnmem_watcher_options_init(&o) != 0) return 1;
  o.poll_interval_ms = 3600000;
  o.pressure_poll_interval_ms = 3600000;
  o.root = argv[1];
  if (pnmem_watcher_start_with(&o) != 0) {
    fprintf(stderr, "metrics_text_dump: pnmem_watcher_start_with(root %s) failed\n", argv[1]);
    return 1;
  }
  pnmem_watcher_stop(); /* nothing samples again: the text is the first sample's */
  for (int tries = 0; tries < 8; ++tries) {
    const int n = pnmem_metrics_text(NULL, 0, what);
    if (n < 0) break;
    char* buf = malloc((size_t)n + 1);
    if (buf == NULL) break;
    const int got = pnmem_metrics_text(buf, (size_t)n + 1, what);
    if (got >= 0 && got <= n) { /* the age may print shorter or longer between the two calls */
      fputs(buf, stdout);
      free(buf);
      return 0;
    }
    free(buf);
  }
  fprintf(stderr, "metrics_text_dump: pnmem_metrics_text failed\n");
  return 1;
}
