#!/usr/bin/env python3
"""What a configuration would install, without building it: `meson setup` of the source tree with the
options given, then `meson introspect --installed`. Checks that nothing under the given words is
installed (-Dcuda=disabled installs no CUDA component) and that the rest still is.

  installed_files.py SOURCE_ROOT MESON WORK_DIR --absent WORD... --present WORD... -- MESON_OPTION...

Exit 0 when every --absent word is in no installed path and every --present word is in one; 1 otherwise,
naming the paths; 77 when meson setup itself fails for a reason outside this check (printed).
"""
import json
import os
import shutil
import subprocess
import sys


def main() -> int:
    args = sys.argv[1:]
    if "--" not in args or len(args) < 4:
        print(__doc__)
        return 2
    cut = args.index("--")
    head, options = args[:cut], args[cut + 1:]
    source, meson, work = head[0], head[1], head[2]
    absent, present, bucket = [], [], None
    for a in head[3:]:
        if a in ("--absent", "--present"):
            bucket = absent if a == "--absent" else present
        elif bucket is not None:
            bucket.append(a)
    shutil.rmtree(work, ignore_errors=True)
    setup = subprocess.run([meson, "setup", work, source, *options], capture_output=True, text=True)
    if setup.returncode != 0:
        print(f"FAIL: meson setup {' '.join(options)}:\n{setup.stdout[-2000:]}{setup.stderr[-2000:]}")
        return 1
    out = subprocess.run([meson, "introspect", work, "--installed"], capture_output=True, text=True, check=True)
    installed = sorted(json.loads(out.stdout).values())
    shutil.rmtree(work, ignore_errors=True)
    failed = False
    for word in absent:
        hits = [p for p in installed if word in os.path.relpath(p, "/")]
        if hits:
            failed = True
            print(f"FAIL: {' '.join(options)} installs {len(hits)} path(s) with '{word}': " + ", ".join(hits[:5]))
    for word in present:
        if not any(word in p for p in installed):
            failed = True
            print(f"FAIL: {' '.join(options)} installs nothing with '{word}'")
    print(f"{len(installed)} paths installed with {' '.join(options)}" + ("" if failed else ": as expected"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
