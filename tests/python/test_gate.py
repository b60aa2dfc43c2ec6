"""pnmem.Gate from several threads: acquired, timed out, released to a waiter, refused when the box
is CRITICAL; context managers; bad arguments."""
import threading
import time

import pnmem
import pytest
from conftest import GIB


@pytest.fixture()
def gate(roomy_die):
    g = pnmem.Gate(1, 4)
    yield g
    g.close()


def test_acquire_timeout_release_across_threads(gate):
    assert gate.acquire(timeout=0) == pnmem.GateStatus.ACQUIRED
    results = {}

    def try_short():
        results["short"] = gate.acquire(timeout=0.05)
    t = threading.Thread(target=try_short)
    t0 = time.monotonic()
    t.start()
    t.join(10)
    assert results["short"] == pnmem.GateStatus.TIMED_OUT and time.monotonic() - t0 >= 0.04

    got = threading.Event()

    def wait_long():
        results["long"] = gate.acquire(timeout=30)
        got.set()
    t = threading.Thread(target=wait_long)
    t.start()
    time.sleep(0.1)
    assert not got.is_set()  # waiting, with the GIL released (this thread runs)
    gate.release()
    assert got.wait(10) and results["long"] == pnmem.GateStatus.ACQUIRED
    t.join()
    gate.release()


def test_many_threads_share_the_slots(roomy_die):
    g = pnmem.Gate(3, 16)
    inside, peak, lock = [0], [0], threading.Lock()

    def work():
        with g.slot(timeout=30):
            with lock:
                inside[0] += 1
                peak[0] = max(peak[0], inside[0])
            time.sleep(0.01)
            with lock:
                inside[0] -= 1
    threads = [threading.Thread(target=work) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert peak[0] <= 3 and inside[0] == 0
    g.close()


def test_context_managers(gate):
    with gate as st:
        assert st == pnmem.GateStatus.ACQUIRED
        with pytest.raises(pnmem.GateRefused) as e:
            with gate.slot(timeout=0.01):
                pass
        assert e.value.status == pnmem.GateStatus.TIMED_OUT
    assert gate.acquire(timeout=0) == pnmem.GateStatus.ACQUIRED
    gate.release()


def test_queue_full(roomy_die):
    g = pnmem.Gate(1, 0)
    assert g.acquire(0) == pnmem.GateStatus.ACQUIRED
    assert g.acquire(5) == pnmem.GateStatus.QUEUE_FULL  # would wait, and no waiter is allowed
    g.release()
    g.close()


def test_overloaded_when_critical(gate):
    assert gate.acquire(0) == pnmem.GateStatus.ACQUIRED
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("st", gate.acquire(timeout=30)))
    t.start()
    time.sleep(0.05)
    pnmem.set_die(0, 0, 16 * GIB, 16 * GIB, 0)  # the watcher reads CRITICAL
    try:
        gate.notify_pressure(pnmem.Level.CRITICAL)  # a denial at CRITICAL: waiters fail ("overloaded, retry")
        t.join(10)
        assert result.get("st") == pnmem.GateStatus.OVERLOADED
        assert gate.acquire(timeout=5) == pnmem.GateStatus.OVERLOADED  # new acquirers too, at once
    finally:
        pnmem.set_die(0, 16 * GIB, 16 * GIB, 0, 0)
        gate.release()
    with pytest.raises(pnmem.GateRefused, match="overloaded"):
        raise pnmem.GateRefused(pnmem.GateStatus.OVERLOADED)


def test_set_capacity_and_notifications(gate):
    gate.set_capacity(2)
    assert gate.acquire(0) == pnmem.GateStatus.ACQUIRED
    assert gate.acquire(0) == pnmem.GateStatus.ACQUIRED
    gate.release()
    gate.release()
    gate.set_capacity(-5)  # 1 slot
    gate.notify_pressure(pnmem.Level.OK)
    gate.notify_pressure(0)
    a = pnmem.admit(10, pnmem.Model.reference())
    gate.notify_denied(a, 10)  # not DENIED: ignored
    assert gate.acquire(0) == pnmem.GateStatus.ACQUIRED
    gate.release()


def test_gate_for_model_and_tokens(roomy_die):
    m = pnmem.Model.reference(gpu_resident=True, max_slots=2)
    g = pnmem.Gate.for_model(m, 2)
    assert g.model is m
    with g.slot(timeout=1, tokens=100):
        assert g.acquire(timeout=0, tokens=5) == pnmem.GateStatus.ACQUIRED
        g.release()
    g.close()
    assert pnmem.Gate.create_for(m).acquire(0) == pnmem.GateStatus.ACQUIRED  # closed by the collector


@pytest.mark.parametrize("call", [
    lambda g: g.acquire(timeout="1"), lambda g: g.acquire(timeout=float("nan")), lambda g: g.acquire(tokens=-1),
    lambda g: g.acquire(tokens=2 ** 31), lambda g: g.acquire(tokens=1.0), lambda g: g.set_capacity(None),
    lambda g: g.set_capacity(2 ** 31), lambda g: g.notify_pressure(7), lambda g: g.notify_pressure(None),
    lambda g: g.notify_denied(None, 1), lambda g: g.notify_denied(pnmem.admit(1, pnmem.Model.reference()), -1),
    lambda g: g.slot(timeout=[]).__enter__(),
])
def test_gate_bad_arguments(gate, call):
    with pytest.raises(pnmem.Error):
        call(gate)
    assert gate.acquire(0) == pnmem.GateStatus.ACQUIRED  # still works
    gate.release()


@pytest.mark.parametrize("args", [(None,), ("2",), (2 ** 31,), (1, None), (1, 2 ** 31), (1.5,)])
def test_gate_create_bad_arguments(args):
    with pytest.raises(pnmem.Error):
        pnmem.Gate(*args)


def test_gate_create_for_bad_arguments():
    for bad in (None, "m", 1):
        with pytest.raises(pnmem.ArgumentTypeError):
            pnmem.Gate.for_model(bad)
    with pytest.raises(pnmem.Error, match="must increase"):  # refused by C: its line in the message
        pnmem.Gate.for_model(pnmem.Model.reference(anchors=((5, 1), (1, 1))))
    with pytest.raises(pnmem.ArgumentError):
        pnmem.Gate.for_model(pnmem.Model.reference(), max_waiters=2 ** 40)


def test_closed_gate(roomy_die):
    g = pnmem.Gate(1, 1)
    g.close()
    g.close()
    assert g.closed
    for call in (lambda: g.acquire(0), g.release, lambda: g.set_capacity(1), lambda: g.notify_pressure(0)):
        with pytest.raises(pnmem.Error, match="closed"):
            call()


def test_close_while_waiting_is_refused(gate):
    assert gate.acquire(0) == pnmem.GateStatus.ACQUIRED
    t = threading.Thread(target=lambda: gate.acquire(timeout=0.5))
    t.start()
    time.sleep(0.1)
    with pytest.raises(pnmem.Error, match="waiting"):
        gate.close()
    t.join()
    gate.release()
