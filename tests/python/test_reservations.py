"""Reservations: pnmem.admit_bytes (pnmem_reserve_bytes) and pnmem.admit_reserved, settled,
cancelled, expired (ttl), as context managers; bad arguments."""
import time

import pnmem
import pytest
from conftest import FAKE_MEMINFO_TREE

MIB = 1 << 20


def pending_now() -> int:
    return pnmem.pending_bytes()


def test_settled_reservation(roomy_die):
    base = pending_now()
    r = pnmem.admit_bytes(8 * MIB, ttl=60)
    assert r.granted and r.handle != 0 and r.answer.status == pnmem.Status.ADMITTED
    assert r.answer.need_bytes == 8 * MIB and r.answer.pending_bytes == base
    assert pending_now() >= base + 8 * MIB
    r.settle()
    assert r.done
    r.settle()
    r.cancel()  # once only: later calls do nothing
    pnmem.poll_now()  # a sample that began after the settle has the memory in its numbers
    assert pending_now() <= base


def test_expired_reservation(roomy_die):
    base = pending_now()
    r = pnmem.admit_bytes(16 * MIB, ttl=0.05)
    assert r.granted and pending_now() >= base + 16 * MIB
    time.sleep(0.2)
    assert pending_now() <= base  # expired: it stopped counting
    r.settle()  # its handle is forgotten: ignored
    assert r.done


def test_cancelled_and_context_managers(roomy_die):
    base = pending_now()
    with pnmem.admit_bytes(4 * MIB) as r:
        assert r.granted and pending_now() >= base + 4 * MIB
    assert r.done  # settled
    with pytest.raises(KeyError):
        with pnmem.admit_bytes(4 * MIB) as r2:
            assert pending_now() >= base + 4 * MIB
            raise KeyError("allocation failed")
    assert r2.done and pending_now() <= base + 4 * MIB  # cancelled: its bytes came back at once
    r3 = pnmem.admit_bytes(4 * MIB)
    r3.cancel()
    assert r3.done


def test_bytes_beyond_the_budget_are_capped(roomy_die):
    b = pnmem.budget()
    r = pnmem.admit_bytes(b.total_bytes * 4)
    assert not r.granted and r.handle == 0 and r.done
    assert r.answer.status in (pnmem.Status.CAPPED, pnmem.Status.DENIED)
    assert r.answer.reason in (pnmem.Reason.HOST_BUDGET, pnmem.Reason.HOST_RESERVE)
    r.settle()  # nothing held: nothing happens
    assert pnmem.admit_bytes(0).answer.status == pnmem.Status.ADMITTED


def test_admit_reserved(roomy_die):
    base = pending_now()
    with pnmem.admit_reserved(512, pnmem.Model.reference()) as r:
        assert r.granted and r.answer.fit_tokens == 512 and r.handle != 0
        assert pending_now() > base
    r2 = pnmem.admit_reserved(512, pnmem.Model.reference(gpu_resident=True))
    assert r2.granted and r2.handle == 0  # a GPU-resident request costs the host nothing
    r2.cancel()


@pytest.mark.parametrize("args", [(-1,), (2 ** 64,), (None,), ("1",), (1.0,), (1, 0), (1, -1), (1, "5"),
                                  (1, float("nan"))])
def test_admit_bytes_bad_arguments(args):
    with pytest.raises(pnmem.Error):
        pnmem.admit_bytes(*args)


@pytest.mark.parametrize("args", [(-1, pnmem.Model.reference()), (None, pnmem.Model.reference()),
                                  (2 ** 31, pnmem.Model.reference()), (1, "m"), (1, None), (1, pnmem.Model()),
                                  (1, pnmem.Model.reference(die=99))])
def test_admit_reserved_bad_arguments(args):
    with pytest.raises(pnmem.Error):
        pnmem.admit_reserved(*args)


GIB = 1 << 30


def test_die_reservations(roomy_die):
    """Model loads and die bytes reserved on a die: each counts against the next until cancelled (or
    settled and seen by a sample of the die)."""
    p = pnmem.policy()
    scratch, reserve = p.die_scratch_bytes, p.die_reserve_bytes
    room = 16 * GIB - reserve  # die 0: 16 GiB free
    first = pnmem.reserve_model_load(8 * GIB, 0, die=0)
    assert first.granted and first.handle != 0 and first.answer.status == pnmem.Status.ADMITTED
    assert first.answer.need_bytes == 8 * GIB + scratch and first.answer.die == 0
    # A second one does not get the same VRAM: the first is counted.
    second = pnmem.check_bytes(room - 8 * GIB - scratch + 1, die=0)
    assert second.status == pnmem.Status.DENIED and second.pending_bytes == 8 * GIB + scratch
    assert pnmem.admit_model_load(room - 8 * GIB - 2 * scratch + 1, 0, die=0).status == pnmem.Status.DENIED
    buf = pnmem.reserve_die_bytes(0, GIB, ttl=60)
    assert buf.granted and buf.answer.pending_bytes == 8 * GIB + scratch
    with pnmem.reserve_model_load_die(GIB, 0, 0) as slice_:
        assert slice_.granted
        assert pnmem.check_bytes(1, die=0).pending_bytes == 10 * GIB + 2 * scratch
    # The context manager settled the slice: counted until a sample of the die reads it.
    first.cancel()
    buf.cancel()
    pnmem.set_die(0, 16 * GIB, 16 * GIB, 0, 0)  # the die read again, after the settle
    assert pnmem.check_bytes(room, die=0).status == pnmem.Status.ADMITTED
    assert pnmem.check_bytes(1, die=0).pending_bytes == 0


def test_die_uuid():
    pnmem.set_die_uuid(0, "GPU-0a0a0a0a-1111-2222-3333-444444444444")
    pnmem.set_die_uuid(1, "0b0b0b0b-5555-6666-7777-888888888888")  # as torch prints it
    for bad in ["", "GPU-", "not a uuid", "GPU-0a0a0a0a-1111-2222-3333-44444444444"]:
        with pytest.raises(pnmem.Error, match="pnmem_set_die_uuid"):
            pnmem.set_die_uuid(0, bad)
    with pytest.raises(pnmem.ArgumentError):
        pnmem.set_die_uuid(pnmem.MAX_DIES, "GPU-0a0a0a0a-1111-2222-3333-444444444444")
    with pytest.raises(pnmem.ArgumentTypeError):
        pnmem.set_die_uuid(0, None)


@pytest.mark.parametrize("args", [(-1, 1), (pnmem.MAX_DIES, 1), (0, -1), (0, 2 ** 64), (None, 1), (0, "1"),
                                  (0, 1, 0), (0, 1, -1)])
def test_reserve_die_bytes_bad_arguments(args):
    with pytest.raises(pnmem.Error):
        pnmem.reserve_die_bytes(*args)


# --- make_room and the shed hook (issue 41) ---------------------------------------------------------

def test_make_room_fits_without_asking(roomy_die):
    asked = []
    r = pnmem.make_room(1 * MIB, lambda want: asked.append(want) or 0)
    assert r.granted and r.answer.status == pnmem.Status.ADMITTED and r.handle != 0
    assert asked == []  # it fit above WATCH's floor: the cache was not asked
    assert "fits in the" in r.answer.explain() and "above WATCH's floor" in r.answer.explain()
    r.cancel()


def test_make_room_asks_the_cache_for_the_shortfall(roomy_die):
    asked = []

    def drop_oldest(want: int) -> int:
        asked.append(want)
        return want  # the cache freed exactly what was asked

    # A reservation is pending in the room, and taken off its available bytes (issue 42 item 4).
    base = pnmem.room().pending_bytes
    held = pnmem.admit_bytes(8 * MIB)
    assert held.granted
    assert pnmem.room().pending_bytes == base + 8 * MIB
    held.cancel()
    assert pnmem.room().pending_bytes == base
    room = pnmem.room()
    over = room.take_bytes(pnmem.Level.WATCH) + 64 * MIB  # 64 MiB more than fits at WATCH
    r = pnmem.make_room(over, drop_oldest)
    assert len(asked) == 1 and asked[0] > 0
    assert abs(asked[0] - 64 * MIB) < 256 * MIB  # the live box moves between the two reads
    assert r.granted and r.answer.status == pnmem.Status.ADMITTED
    r.cancel()
    # A cache that frees nothing: refused, nothing reserved.
    r2 = pnmem.make_room(over + 1024 * MIB, lambda want: 0)
    assert not r2.granted and r2.handle == 0
    assert r2.answer.status == pnmem.Status.CAPPED and r2.answer.reason == pnmem.Reason.HOST_BUDGET
    assert "does not fit with the host at WATCH or better" in r2.answer.explain()


def test_make_room_callback_errors(roomy_die):
    over = pnmem.room().take_bytes(pnmem.Level.WATCH) + 64 * MIB

    def broken(want: int) -> int:
        raise KeyError("cache lock lost")

    before = pnmem.pending_bytes()
    with pytest.raises(KeyError):
        pnmem.make_room(over, broken)
    assert pnmem.pending_bytes() <= before  # nothing left reserved
    with pytest.raises(pnmem.ArgumentTypeError, match="the callback returned str"):
        pnmem.make_room(over, lambda want: "lots")  # type: ignore[arg-type,return-value]
    with pytest.raises(pnmem.ArgumentError, match="cannot be negative"):
        pnmem.make_room(over, lambda want: -1)
    with pytest.raises(pnmem.ArgumentTypeError, match="must be callable"):
        pnmem.make_room(1, 5)  # type: ignore[arg-type]
    with pytest.raises(pnmem.ArgumentError):
        pnmem.make_room(-1, lambda want: 0)


def test_shed_bytes_and_hook(roomy_die):
    # A roomy box: nothing to shed, and the hook is not called.
    assert pnmem.shed_bytes() == 0
    calls = []
    pnmem.set_shed_hook(lambda want: calls.append(want) or 0)
    pnmem.poll_now()
    assert calls == []
    # Promises that push the host under WATCH: the hook is called on the next sample with what to free.
    room = pnmem.room()
    # all there is above the reserve (the tests' policy may have a reserve of 1 B, and no TIGHT band)
    gap = room.take_bytes(pnmem.Level.TIGHT) + 1
    held = pnmem.admit_bytes(gap)
    if not held.granted:
        pytest.skip(f"this box cannot promise {gap} B above its reserve now: {held.answer.explain()}")
    try:
        assert pnmem.shed_bytes() > 0, (pnmem.room(), held.answer.explain())  # CRITICAL now
        # Called after the next sample, on the thread that delivers it: this one, or the watcher's own
        # when its poll thread is delivering at that moment (a sample of its own landed beside ours).
        deadline = time.monotonic() + 5
        while not calls and time.monotonic() < deadline:
            pnmem.poll_now()
            time.sleep(0.01)
        assert calls and calls[-1] > 0
    finally:
        held.cancel()
        pnmem.set_shed_hook(None)
    n = len(calls)
    pnmem.poll_now()
    assert len(calls) == n  # removed: not called again
    with pytest.raises(pnmem.ArgumentTypeError):
        pnmem.set_shed_hook(3)  # type: ignore[arg-type]


def test_fleet_load_in_metrics(roomy_die):
    pnmem.set_fleet_load(queued_requests=2, running_requests=3, slot_capacity=8, kv_used_bytes=1 << 30,
                         kv_capacity_bytes=4 << 30)
    text = pnmem.metrics_text()
    assert "\npnmem_queued_requests 2\n" in text
    assert "\npnmem_running_requests 3\n" in text
    assert "\npnmem_kv_cache_usage_ratio 0.25\n" in text
    gate = pnmem.Gate(max_slots=4)
    try:
        with gate:  # one slot held
            assert "\npnmem_running_requests 4\n" in pnmem.metrics_text()  # the gate's slot added
    finally:
        gate.close()
    assert "\npnmem_running_requests 3\n" in pnmem.metrics_text()  # the gate is gone
    pnmem.set_fleet_load()
    assert "\npnmem_running_requests 0\n" in pnmem.metrics_text()
    with pytest.raises(pnmem.ArgumentError):
        pnmem.set_fleet_load(queued_requests=-1)


def test_host_load_with_a_fit(roomy_die):
    room = pnmem.room()
    above = room.take_bytes(pnmem.Level.WATCH)
    per_token = 1 << 20
    # Twice what fits at WATCH, asked: capped to about half, reserved at that context.
    want = int((above * 2) // per_token)
    a = pnmem.admit_host_load(0, per_token, want, least_tokens=1)
    assert a.status == pnmem.Status.CAPPED and a.reason == pnmem.Reason.HOST_BUDGET
    assert 0 < a.fit_tokens < want
    assert "start it with" in a.explain()
    r = pnmem.reserve_host_load(0, per_token, want, least_tokens=1)
    assert r.granted and r.handle != 0 and r.answer.fit_tokens > 0
    before = pnmem.pending_bytes()
    assert before >= r.answer.fit_tokens * per_token
    r.cancel()
    assert pnmem.pending_bytes() <= before - r.answer.fit_tokens * per_token
    # A small load fits whole; the least above the asked is refused before C.
    assert pnmem.admit_host_load(1 << 20, 1024, 16).status == pnmem.Status.ADMITTED
    with pytest.raises(pnmem.ArgumentError, match="least_tokens"):
        pnmem.admit_host_load(0, 1, 10, least_tokens=11)
    with pytest.raises(pnmem.ArgumentError):
        pnmem.admit_host_load(0, 1, -1)


SHED_AT_EXIT = FAKE_MEMINFO_TREE + """
import sys, time, pnmem
write(1310720)  # 8 GiB, 1.25 GiB available: TIGHT, shed each sample
w = pnmem.Watcher(root=root, poll_interval_ms=5, pressure_poll_interval_ms=5).start()
calls = []
pnmem.set_shed_hook(lambda want: calls.append(want) or 0)
deadline = time.monotonic() + 10
while len(calls) < 3 and time.monotonic() < deadline:
    time.sleep(0.01)
print(len(calls) >= 3, flush=True)
# exits with the hook set and called every 5 ms by the watcher's thread: no Python call after finalising
"""


def test_shed_hook_set_at_exit_is_removed_first():
    # A process that exits with a shed hook set, called every 5 ms by the watcher's thread (a tree at
    # TIGHT): the exit is clean because the atexit handler removes the hook before Python finalises, as
    # it does the log sink and the subscriptions. Without that line the child aborted 10 times in 10
    # ("FATAL: exception not rethrown": the poll thread unwound out of the finalised interpreter through
    # pnmem's noexcept frame).
    from conftest import run_default_policy_child

    p = run_default_policy_child(SHED_AT_EXIT)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "True", (p.stdout, p.stderr)
    assert "Fatal" not in p.stderr and "Exception ignored" not in p.stderr, p.stderr


ZERO_COST_HELD = FAKE_MEMINFO_TREE + """
import threading, time, pnmem
write(1048576)  # 1 GiB of 8 available: inside the reserve (15 %): CRITICAL
w = pnmem.Watcher(root=root, poll_interval_ms=20, pressure_poll_interval_ms=20).start()
m = pnmem.Model.preallocated()
a = pnmem.admit(512, m)
print(a.status, a.reason, a.need_bytes, str(m.zero_cost))
past = pnmem.admit_wait(512, m, 0.1)
print(past.status, past.reason)
threading.Timer(0.3, write, args=(4194304,)).start()  # the co-tenant leaves: 4 GiB available
t0 = time.monotonic()
served = pnmem.admit_wait(512, m, 10)
print(served.status, served.fit_tokens, 0.25 <= time.monotonic() - t0 < 5)
write(1048576)
time.sleep(0.1)
print(pnmem.admit(512, pnmem.Model.preallocated(zero_cost=pnmem.ZeroCost.ADMIT)).status)
t0 = time.monotonic()
print(pnmem.admit_wait(512, pnmem.Model.preallocated(zero_cost=pnmem.ZeroCost.REJECT), 10).status,
      time.monotonic() - t0 < 5)
"""


def test_zero_cost_request_held_then_served():
    # A preallocated engine's request costs the host nothing: at the reserve it is refused now (needing 0 B),
    # held by admit_wait past its patience (refused then), and served once a co-tenant leaves; the model's
    # own rule admits it now, or refuses it without waiting.
    from conftest import run_default_policy_child

    p = run_default_policy_child(ZERO_COST_HELD)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split("\n")[:5] == ["denied host_reserve 0 policy", "denied host_reserve", "admitted 512 True",
                                        "admitted", "denied True"], (p.stdout, p.stderr)
    with pytest.raises(pnmem.ArgumentError, match="zero_cost"):
        pnmem.admit(1, pnmem.Model.preallocated(zero_cost=7))
    with pytest.raises(pnmem.ArgumentTypeError, match="timeout"):
        pnmem.admit_wait(1, pnmem.Model.preallocated(), "1")  # type: ignore[arg-type]
