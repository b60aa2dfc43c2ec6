/* tests/c/c_tree.h - a scratch box for the C tests: a directory under $TMPDIR (else /tmp) holding
 * proc/ and proc/pressure/, for pnmem_watcher_options.root. tree_write writes one of its files (the
 * test stops, naming the path, when it cannot); tree_remove removes what was written and the tree.
 * Test code only; one translation unit per program. */
#ifndef PNMEM_TESTS_C_TREE_H
#define PNMEM_TESTS_C_TREE_H

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TREE_MAX_FILES 16

static char tree_root[256];
static const char* tree_program = "c test";
static char tree_files[TREE_MAX_FILES][320];
static int tree_n_files;

/* Makes the tree, named after the program; 0, or 1 after saying why. */
static int tree_make(const char* program) {
  tree_program = program;
  const char* tmp = getenv("TMPDIR");
  snprintf(tree_root, sizeof tree_root, "%s/pnmem-%s-XXXXXX", tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp", program);
  if (mkdtemp(tree_root) == NULL) {
    fprintf(stderr, "%s: mkdtemp %s: %s\n", program, tree_root, strerror(errno));
    return 1;
  }
  char dir[320];
  snprintf(dir, sizeof dir, "%s/proc", tree_root);
  if (mkdir(dir, 0755) != 0) {
    fprintf(stderr, "%s: mkdir %s: %s\n", program, dir, strerror(errno));
    return 1;
  }
  snprintf(dir, sizeof dir, "%s/proc/pressure", tree_root);
  if (mkdir(dir, 0755) != 0) {
    fprintf(stderr, "%s: mkdir %s: %s\n", program, dir, strerror(errno));
    return 1;
  }
  return 0;
}

/* Writes `text` to the tree's file `rel` (e.g. "proc/meminfo"), replacing it whole: written beside it and
 * renamed into place, so a watcher's poll thread reading it meanwhile never sees half a file. */
static void tree_write(const char* rel, const char* text) {
  char path[320];
  char next[330];
  snprintf(path, sizeof path, "%s/%s", tree_root, rel);
  snprintf(next, sizeof next, "%s.next", path);
  FILE* f = fopen(next, "w");
  if (f == NULL) {
    fprintf(stderr, "%s: cannot write %s: %s\n", tree_program, next, strerror(errno));
    exit(1);
  }
  fputs(text, f);
  fclose(f);
  if (rename(next, path) != 0) {
    fprintf(stderr, "%s: cannot rename %s to %s: %s\n", tree_program, next, path, strerror(errno));
    exit(1);
  }
  for (int i = 0; i < tree_n_files; ++i) {
    if (strcmp(tree_files[i], path) == 0) return;
  }
  if (tree_n_files == TREE_MAX_FILES) {
    fprintf(stderr, "%s: more than %d files in the tree: raise TREE_MAX_FILES (tests/c/c_tree.h)\n", tree_program, TREE_MAX_FILES);
    exit(1);
  }
  snprintf(tree_files[tree_n_files++], sizeof tree_files[0], "%s", path);
}

/* proc/meminfo for a box of `total` bytes with `avail` available (MemFree the same), in whole kB as the
 * kernel prints them (the bytes below a kB are dropped). */
static inline void tree_meminfo(uint64_t total, uint64_t avail) {
  char text[256];
  snprintf(text, sizeof text, "MemTotal:       %" PRIu64 " kB\nMemFree:        %" PRIu64 " kB\nMemAvailable:   %" PRIu64 " kB\n",
           total / 1024, avail / 1024, avail / 1024);
  tree_write("proc/meminfo", text);
}

/* Removes the files written and the tree. */
static void tree_remove(void) {
  for (int i = 0; i < tree_n_files; ++i) unlink(tree_files[i]);
  tree_n_files = 0;
  char dir[320];
  snprintf(dir, sizeof dir, "%s/proc/pressure", tree_root);
  rmdir(dir);
  snprintf(dir, sizeof dir, "%s/proc", tree_root);
  rmdir(dir);
  rmdir(tree_root);
}

#endif
