#!/usr/bin/env python3
"""libpnmem_c builds without nlohmann-json, and says so when asked to read JSON (issue 28).

  c_lib_without_json.py SOURCE_ROOT MESON NINJA CC WORK_DIR B_SANITIZE

Configures the source tree with -Djson=disabled (the tool, tests and benchmarks off: they need it) and an
include directory first on the path whose nlohmann/json.hpp is an #error: a source that still included it
would fail to compile, so the build proves that nothing in libpnmem_c or what it links needs nlohmann-json,
wherever the system has it installed. Builds libpnmem_c alone, then a C program against it that checks:
pnmem_model_cost_from_json and pnmem_model_cost_from_hf_config(_file) return -1 with a line that names the
missing dependency and what reads a model instead; the GGUF reader is still there (a missing file is its
own error); pnmem_admit answers as in any build. Exit 0 when all hold, 1 otherwise; 77 in a sanitized
build (B_SANITIZE not "none"): a build option is checked once, by the unsanitized leg, not again per leg.
"""
import os
import shutil
import subprocess
import sys

PROGRAM = r"""
#include <stdio.h>
#include <string.h>
#include <pnmem/pnmem_c.h>
static int failures;
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "CHECK(%s) failed\n", #c); ++failures; } } while (0)
int main(void) {
  pnmem_model m;
  char err[512];
  CHECK(pnmem_model_init(&m) == 0);
  CHECK(pnmem_model_cost_from_json("{}", 2, &m, err, sizeof err) == -1);
  printf("from_json: %s\n", err);
  CHECK(strstr(err, "built without nlohmann-json") != NULL && strstr(err, "GGUF") != NULL);
  CHECK(pnmem_model_cost_from_hf_config("{}", 2, NULL, &m, err, sizeof err) == -1);
  printf("from_hf_config: %s\n", err);
  CHECK(strncmp(err, "config.json: this pnmem was built without nlohmann-json", 55) == 0);
  CHECK(pnmem_model_cost_from_hf_config_file("/m/config.json", NULL, &m, err, sizeof err) == -1);
  printf("from_hf_config_file: %s\n", err);
  CHECK(strncmp(err, "/m/config.json: this pnmem was built without nlohmann-json", 58) == 0);
  CHECK(pnmem_model_cost_from_gguf_file("/nonexistent/model.gguf", NULL, &m, err, sizeof err) == -1);
  printf("from_gguf_file: %s\n", err);
  CHECK(strstr(err, "nlohmann") == NULL);  /* the GGUF reader is built: its own error */
  CHECK(pnmem_model_init_reference(&m) == 0);
  pnmem_admit_answer a;
  CHECK(pnmem_admit(&m, 1500, &a) == 0);
  CHECK(a.status == PNMEM_FAIL_OPEN);  /* no watcher: nothing checked, as in any build */
  return failures != 0;
}
"""


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        print(f"FAIL: {' '.join(cmd)} (exit {p.returncode}):\n{p.stdout[-3000:]}{p.stderr[-3000:]}")
        sys.exit(1)
    return p


def main() -> int:
    if len(sys.argv) != 7:
        print(__doc__)
        return 2
    source, meson, ninja, cc, work, sanitize = sys.argv[1:]
    if sanitize != "none":
        print(f"SKIP: a sanitized build (b_sanitize={sanitize}); the unsanitized build checks -Djson=disabled")
        return 77
    shutil.rmtree(work, ignore_errors=True)
    poison = os.path.join(work, "poison", "nlohmann")
    os.makedirs(poison)
    with open(os.path.join(poison, "json.hpp"), "w") as f:
        f.write('#error "nlohmann-json included in a -Djson=disabled build"\n')
    build = os.path.join(work, "build")
    run([meson, "setup", build, source, "-Djson=disabled", "-Dtools=disabled", "-Dtests=disabled",
         "-Dbenchmarks=disabled", "-Dcuda=disabled", "-Dbuildtype=plain",
         "-Dcpp_args=-I" + os.path.dirname(poison)])
    run([meson, "compile", "-C", build, "pnmem_c"])  # the shared library's target, and what it links
    print("libpnmem_c built with -Djson=disabled and nlohmann/json.hpp poisoned")
    prog = os.path.join(work, "nojson.c")
    with open(prog, "w") as f:
        f.write(PROGRAM)
    exe = os.path.join(work, "nojson")
    lib_dir = os.path.join(build, "integration")
    run([cc, "-std=c11", "-Wall", "-Werror", "-I", os.path.join(source, "include"), prog, "-L", lib_dir,
         "-lpnmem_c", "-Wl,-rpath," + lib_dir, "-o", exe])
    p = subprocess.run([exe], capture_output=True, text=True)
    print(p.stdout, end="")
    print(p.stderr, end="")
    shutil.rmtree(work, ignore_errors=True)
    if p.returncode != 0:
        print("FAIL: the program's checks")
        return 1
    print("OK: libpnmem_c needs no nlohmann-json, and refuses JSON saying why")
    return 0


if __name__ == "__main__":
    sys.exit(main())
