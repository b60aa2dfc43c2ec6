"""Watcher(ledger=...): two Python processes on one box ledger count each other's promises.

The tests' own process runs with PN_LEDGER=off (conftest.py), and its watcher is started once, so each
side here is a child python with the library's defaults (run_default_policy_child: PN_LEDGER=off in its
environment, which the Watcher's ledger option must override) over one fake box both read: 8 GiB, 4 GiB
available, so 2.8 GiB above the host reserve (max(1 GiB, 15 % of 8 GiB) = 1.2 GiB)."""
import contextlib
import os
import subprocess
import sys
import time
import types

import pnmem
import pytest
from conftest import default_policy_env

GIB = 1 << 30

# A child's start: the shared box (ROOT) and ledger (LEDGER) are filled in with repr().
PROLOGUE = """
import os, sys, time
import pnmem
ROOT, LEDGER, DIR = {root!r}, {ledger!r}, {dir!r}
"""

HOLDER = PROLOGUE + """
with pnmem.Watcher(root=ROOT, ledger=LEDGER):
    r = pnmem.admit_bytes(2 << 30)           # 2 GiB promised: counted by every process of the ledger
    print(r.answer.status.name, flush=True)
    open(os.path.join(DIR, "held"), "w").close()
    deadline = time.monotonic() + 60
    while not os.path.exists(os.path.join(DIR, "release")) and time.monotonic() < deadline:
        time.sleep(0.02)
    r.cancel()
"""

ASKER = PROLOGUE + """
with pnmem.Watcher(root=ROOT, ledger=LEDGER):
    a = pnmem.check_bytes(3 << 29)            # 1.5 GiB
    print(a.status.name)
    print(a.explain())
    for line in pnmem.metrics_text("counters").splitlines():
        if line.startswith("pnmem_ledger_processes") or line.startswith("pnmem_ledger_pending_bytes"):
            print(line)
"""


def figure(lines, name):
    for line in lines:
        if line.startswith(name):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in {lines}")


@pytest.fixture()
def box(tmp_path):
    root = tmp_path / "box"
    (root / "proc").mkdir(parents=True)
    (root / "proc" / "meminfo").write_text("MemTotal: 8388608 kB\nMemFree: 4194304 kB\nMemAvailable: 4194304 kB\n")
    return {"root": str(root), "ledger": str(tmp_path / "ledger"), "dir": str(tmp_path)}


def ask(box):
    p = subprocess.run([sys.executable, "-c", ASKER.format(**box)], capture_output=True, text=True, timeout=60,
                       env=default_policy_env())  # PN_LEDGER=off: the Watcher's ledger option must win
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


@contextlib.contextmanager
def holding(box):
    """A child holding 2 GiB on box's ledger while the block runs; released after it. Yields what it
    printed and its exit status (out, err, returncode), filled in once it has exited."""
    done = types.SimpleNamespace(out="", err="", returncode=None)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER.format(**box)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=default_policy_env())
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(os.path.join(box["dir"], "held")):
            assert holder.poll() is None, holder.communicate()
            assert time.monotonic() < deadline, "the holder did not reserve within 30 s"
            time.sleep(0.02)
        yield done
    finally:
        open(os.path.join(box["dir"], "release"), "w").close()
        done.out, done.err = holder.communicate(timeout=60)
        done.returncode = holder.returncode


def test_two_processes_count_each_others_promises(box):
    # Alone on the ledger, 1.5 GiB fits the 2.8 GiB above the reserve.
    alone = ask(box)
    assert alone[0] == "ADMITTED", alone
    assert figure(alone, "pnmem_ledger_processes") == 1
    with holding(box) as holder:
        # With the other process's 2 GiB promised, 1.5 GiB no longer fits: 2.8 GiB - 2 GiB = 819.2 MiB would.
        beside = ask(box)
        assert beside[0] == "CAPPED", beside
        assert "1.50 GiB (1610612736 B) does not fit, 819.20 MiB (858993460 B) would" in beside[1], beside
        assert figure(beside, "pnmem_ledger_processes") == 2
        assert figure(beside, "pnmem_ledger_pending_bytes") >= 2 * GIB
    assert holder.returncode == 0, holder.err
    assert holder.out.split() == ["ADMITTED"]
    # Cancelled and gone: the 1.5 GiB fits again, and the holder is off the ledger.
    after = ask(box)
    assert after[0] == "ADMITTED", after
    assert figure(after, "pnmem_ledger_processes") == 1
    assert figure(after, "pnmem_ledger_pending_bytes") == 0


def test_ledger_off_counts_alone(box):
    # The same ask beside a holder on another ledger ("off": none) is admitted: what capped it above is the
    # shared ledger, not the box.
    with holding(box):
        lines = ask(dict(box, ledger="off"))
        assert lines[0] == "ADMITTED", lines
        assert not any(line.startswith("pnmem_ledger_") for line in lines)  # joined none: no ledger gauges


@pytest.mark.parametrize("bad", ["", "a\0b"])
def test_a_ledger_value_that_cannot_be_one_is_refused(bad):
    with pytest.raises(pnmem.ArgumentError, match="ledger must be off, auto, a name or an absolute path"):
        pnmem.Watcher(ledger=bad)


def test_a_ledger_of_another_type_is_refused():
    with pytest.raises(pnmem.ArgumentTypeError, match="ledger must be a str, not int"):
        pnmem.Watcher(ledger=3)  # type: ignore[arg-type]
