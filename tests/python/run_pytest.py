#!/usr/bin/env python3
"""Runs the pnmem Python package's tests: run_pytest.py TESTS_DIR [pytest args...].

Exits 77 (SKIP) with one line when pytest cannot be imported (apt-get install python3-pytest).
meson sets PNMEM_LIBRARY (the built libpnmem_c), PNMEM_LAYOUT_DUMP and PYTHONPATH (python/)."""
import os
import sys

try:
    import pytest
except ImportError as e:
    print(f"SKIP: pytest is not importable by {sys.executable} ({e}): apt-get install python3-pytest")
    sys.exit(77)

tests = sys.argv[1]
# No cache directory in the source tree, no bytecode beside the package's sources.
sys.dont_write_bytecode = True
os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
sys.exit(pytest.main(["-p", "no:cacheprovider", "-q", tests] + sys.argv[2:]))
