#!/usr/bin/env python3
"""Type-checks the pnmem Python package: check_mypy.py PYTHON_DIR (the directory holding pnmem/).

Runs `python3 -m mypy --strict -p pnmem` (this interpreter's mypy) with MYPYPATH=PYTHON_DIR, from a
scratch directory and with a scratch cache, so that nothing is written beside the sources and no
configuration file is picked up. Exits 0 when mypy reports nothing, 1 (printing mypy's lines) when it
reports anything, and 77 (SKIP) with one line when this interpreter cannot import mypy
(apt-get install mypy). prometheus_client (python3-prometheus-client) must be importable too: the
package names its types for the type checker."""
import os
import shlex
import subprocess
import sys
import tempfile


def main() -> int:
    if len(sys.argv) != 2 or not os.path.isdir(os.path.join(sys.argv[1], "pnmem")):
        print("usage: check_mypy.py PYTHON_DIR (the directory holding pnmem/)", file=sys.stderr)
        return 2
    python_dir = os.path.abspath(sys.argv[1])
    if subprocess.run([sys.executable, "-c", "import mypy"], capture_output=True).returncode != 0:
        print(f"SKIP: mypy not installed: {sys.executable} cannot import mypy (apt-get install mypy)")
        return 77
    with tempfile.TemporaryDirectory(prefix="pnmem_mypy.") as scratch:
        cmd = [sys.executable, "-m", "mypy", "--strict", "--config-file", "",
               "--cache-dir", os.path.join(scratch, "cache"), "-p", "pnmem"]
        p = subprocess.run(cmd, cwd=scratch, capture_output=True, text=True, timeout=600,
                           env=dict(os.environ, MYPYPATH=python_dir))
    out = (p.stdout + p.stderr).strip()
    print(f"MYPYPATH={shlex.quote(python_dir)} {shlex.join(cmd)}")
    print(out)
    if p.returncode == 0:
        return 0
    if subprocess.run([sys.executable, "-c", "import prometheus_client"], capture_output=True).returncode != 0:
        print("note: prometheus_client is not importable either (apt-get install python3-prometheus-client)")
    return 1


if __name__ == "__main__":
    sys.exit(main())
