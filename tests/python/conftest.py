"""Shared setup for the pnmem Python tests.

The C ABI reads its policy from the environment once, at the first pnmem call, and its watcher is
one per process, created once: so the environment is set here, before `import pnmem`, and the
tests share one watcher (the `watcher` fixture), started once and stopped at the end of the session.

A host reserve of 1 byte keeps the host's byte bands at OK, and PSI is not read (PN_PSI_SOURCE=off):
on a loaded box (a CI machine building beside the tests) PSI some reached TIGHT, whose ladder halves a
gate's slots, and the gate tests failed by timing. So the level is the dies' alone: a die fed with 0
bytes free (CRITICAL) always changes it, and a roomy one leaves it at OK. (PSI full 100 % for CRITICAL
stays, should a test turn PSI back on.) And PN_LEDGER=off: the process counts its own promises alone.

Run from meson (suite 'python': PNMEM_LIBRARY, PNMEM_LAYOUT_DUMP and PYTHONPATH set), or by hand:
  PYTHONPATH=python /usr/bin/python3 -m pytest tests/python
(the package then finds a build*/integration/libpnmem_c.so of this checkout)."""
import os
import pathlib
import sys

import pytest

os.environ["PN_HOST_RESERVE_BYTES"] = "1"
os.environ["PN_PSI_FULL_REJECT"] = "100"
os.environ["PN_PSI_SOURCE"] = "off"
os.environ.pop("PN_LADDER_DISABLE", None)
# No box ledger, as meson's default test setup has it (tests/vm/meson.build): the tests would count the
# promises of every pnmem process of the box beside them (test_box_ledger.py names a ledger of its own).
os.environ["PN_LEDGER"] = "off"

SOURCE_ROOT = pathlib.Path(os.environ.get("PNMEM_SOURCE_ROOT", pathlib.Path(__file__).resolve().parents[2]))
if str(SOURCE_ROOT / "python") not in sys.path and not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, str(SOURCE_ROOT / "python"))

import pnmem  # noqa: E402  (after the environment above)

GIB = 1 << 30


@pytest.fixture(scope="session")
def source_root() -> pathlib.Path:
    return SOURCE_ROOT


@pytest.fixture(scope="session")
def header_text() -> str:
    return (SOURCE_ROOT / "include" / "pnmem" / "pnmem_c.h").read_text()


@pytest.fixture(scope="session")
def watcher():
    w = pnmem.Watcher()
    try:
        w.start()
    except pnmem.Error as e:
        pytest.skip(f"the watcher does not start here: {e}")
    yield w
    w.stop()


@pytest.fixture()
def roomy_die(watcher):
    """Die 0 fed roomy before and after the test: the level is OK (PSI is not read, the host is roomy)."""
    pnmem.set_die(0, 16 * GIB, 16 * GIB, 0, 0)
    yield 0
    pnmem.set_die(0, 16 * GIB, 16 * GIB, 0, 0)


def child_env(**extra: str) -> dict:
    """The environment for a child python that imports pnmem the way these tests do."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SOURCE_ROOT / "python")  # absolute: children run in other directories
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


# The start of a child's code (run_default_policy_child) that makes its own box: a tree with a
# /proc/meminfo of 8 GiB, and write(avail_kb), which replaces it whole with that much available.
FAKE_MEMINFO_TREE = """
import os, tempfile
root = tempfile.mkdtemp()
os.makedirs(os.path.join(root, "proc"))
meminfo = os.path.join(root, "proc", "meminfo")
def write(avail_kb):
    with open(meminfo + ".new", "w") as f:
        f.write(f"MemTotal: 8388608 kB\\nMemFree: {avail_kb} kB\\nMemAvailable: {avail_kb} kB\\n")
    os.rename(meminfo + ".new", meminfo)
"""


def default_policy_env() -> dict:
    """A child's environment with the library's own defaults: no PN_* of these tests (their 1 B reserve,
    PSI off), and PN_LEDGER=off (no box ledger unless the child's Watcher names one)."""
    env = {k: v for k, v in child_env().items() if not k.startswith("PN_")}
    env["PN_LEDGER"] = "off"
    return env


def run_default_policy_child(code: str):
    """`python -c code` in default_policy_env(): its own watcher, usually over a tree it writes. The
    CompletedProcess (text)."""
    import subprocess

    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env=default_policy_env())
