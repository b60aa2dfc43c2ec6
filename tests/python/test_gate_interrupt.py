"""Gate.acquire and signals: Ctrl-C (SIGINT) interrupts a blocking acquire on the main thread within
a fraction of a second and leaves the gate as it was (no slot leaked, no waiter left queued); a
main-thread wait is sliced but still lasts its whole timeout; another thread's wait stays one C wait.

The SIGINT tests run a child python: it fills a gate of one slot and at most one waiter, blocks in
acquire() with no timeout, and, once the KeyboardInterrupt comes out, probes the gate and prints what
it saw as JSON before letting the exception end it."""
import json
import re
import signal
import subprocess
import sys
import threading
import time

import pnmem
import pytest
from conftest import child_env

CHILD = r"""
import json, os, signal, sys, threading, time
import pnmem

GIB = 1 << 30
pnmem.Watcher().start()
pnmem.set_die(0, 16 * GIB, 16 * GIB, 0, 0)   # roomy: the level is OK, the gate's one slot is all that holds
g = pnmem.Gate(1, 1)                          # one slot, at most one waiter
assert g.acquire(timeout=0) == pnmem.GateStatus.ACQUIRED
releaser = None
if sys.argv[1] == "grant-with-signal":
    # SIGINT and, at once, the slot's release: the waiting C call returns ACQUIRED with the signal pending.
    def signal_then_release():
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGINT)
        g.release()
    releaser = threading.Thread(target=signal_then_release)
    releaser.start()
print("waiting", flush=True)
try:
    g.acquire()                               # no timeout: blocks until the gate opens (or a signal)
    print(json.dumps({"returned": True}), flush=True)
except KeyboardInterrupt:
    caught = time.monotonic()
    if releaser is None:
        # Nobody is queued: a second waiter is let in (TIMED_OUT), not refused (QUEUE_FULL, max_waiters 1).
        queue = str(g.acquire(timeout=0.05))
        g.release()
    else:
        queue = "not probed"
        releaser.join()
    # Every slot is free again: the interrupted acquire holds none (a leaked grant would give TIMED_OUT).
    free = str(g.acquire(timeout=0))
    g.release()
    g.close()                                 # refused while the gate counts a thread inside acquire
    print(json.dumps({"caught": caught, "queue": queue, "free": free}), flush=True)
    raise
"""


def run_interrupted(mode: str) -> dict:
    p = subprocess.Popen([sys.executable, "-c", CHILD, mode], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=child_env())
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "waiting", p.communicate(timeout=30)
        time.sleep(0.3)                       # inside the C wait by now
        sent = time.monotonic()
        if mode == "signal":
            p.send_signal(signal.SIGINT)
        try:
            out, err = p.communicate(timeout=2 + (0.5 if mode == "grant-with-signal" else 0))
        except subprocess.TimeoutExpired:
            pytest.fail("acquire() ignored SIGINT for 2 s: Ctrl-C waits for the gate to open")
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == -signal.SIGINT and "KeyboardInterrupt" in err, (p.returncode, out, err)
    report = json.loads(out.strip().splitlines()[-1])
    report["sent"] = sent
    return report


def test_sigint_interrupts_a_blocking_acquire_and_leaves_the_gate_as_it_was():
    r = run_interrupted("signal")
    # time.monotonic is CLOCK_MONOTONIC, the same clock in both processes.
    assert r["caught"] - r["sent"] < 1.0, f"KeyboardInterrupt {r['caught'] - r['sent']:.2f} s after SIGINT"
    assert r["queue"] == "timed_out", r  # queue_full: the interrupted waiter is still queued
    assert r["free"] == "acquired", r    # timed_out: a slot leaked


def test_sigint_with_the_grant_releases_the_slot_nobody_will_see():
    r = run_interrupted("grant-with-signal")
    assert r["free"] == "acquired", r    # the slot granted as the signal came was released, not leaked


def gate_waits() -> int:
    m = re.search(r"^pnmem_gate_waits_total (\d+)$", pnmem.metrics_text("counters"), re.M)
    assert m
    return int(m.group(1))


@pytest.fixture()
def gate(roomy_die):
    g = pnmem.Gate(1, 4)
    assert g.acquire(timeout=0) == pnmem.GateStatus.ACQUIRED
    yield g
    g.release()
    g.close()


def test_main_thread_wait_lasts_its_whole_timeout_and_gets_a_slot_released_meanwhile(gate):
    assert threading.current_thread() is threading.main_thread()  # pytest runs tests on the main thread
    t0 = time.monotonic()
    assert gate.acquire(timeout=0.35) == pnmem.GateStatus.TIMED_OUT
    assert time.monotonic() - t0 >= 0.34                            # not one slice's 0.1 s
    timer = threading.Timer(0.3, gate.release)
    timer.start()
    t0 = time.monotonic()
    assert gate.acquire() == pnmem.GateStatus.ACQUIRED              # no timeout: sliced, and granted
    assert time.monotonic() - t0 >= 0.25
    timer.join()


def test_another_threads_wait_is_one_c_wait(gate):
    before = gate_waits()
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("st", gate.acquire(timeout=30)))
    t.start()
    time.sleep(0.35)                           # longer than a slice: a sliced wait would have counted more
    gate.release()
    t.join(10)
    assert result.get("st") == pnmem.GateStatus.ACQUIRED
    assert gate_waits() - before == 1          # it kept its place in the queue all along
