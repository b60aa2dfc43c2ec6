"""The process's watcher from Python: start/stop, state() with its provenance, subscriptions that
receive level changes (and survive callbacks that raise), and what a fresh process sees."""
import dataclasses
import pathlib
import subprocess
import sys
import threading
import time

import pnmem
import pytest
from conftest import GIB, child_env


def test_state_and_provenance(watcher):
    s = watcher.state()
    assert isinstance(s, pnmem.State) and isinstance(s.level, pnmem.Level)
    assert type(s) is pnmem.Snapshot and type(pnmem.read()) is pnmem.Snapshot  # provenance typed non-Optional
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.level = pnmem.Level.OK
    assert s.seq >= 1 and s.host_total_bytes > 0 and s.host_avail_bytes <= s.host_total_bytes
    p = s.provenance
    assert isinstance(p, pnmem.Provenance)
    assert pnmem.Source.MEMINFO in p.sources_read  # Linux: /proc/meminfo
    assert not (p.sources_read & p.sources_failed)
    assert p.meminfo_total_bytes > 0 and p.meminfo_avail_bytes <= p.meminfo_total_bytes
    assert isinstance(p.cgroup_mode, pnmem.CgroupMode) and isinstance(p.psi_mode, pnmem.PsiMode)
    assert isinstance(p.limit_cgroup, str) and len(p.limit_cgroup) < pnmem.CGROUP_PATH_MAX
    assert str(s.level) in ("ok", "watch", "tight", "critical")
    assert pnmem.read().seq >= s.seq
    assert watcher.running and pnmem.running() and watcher.started


def test_state_dies(roomy_die):
    pnmem.set_die(1, 3 * GIB, 8 * GIB, 5 * GIB, 1 * GIB)
    try:
        dies = pnmem.read().dies
        assert len(dies) == 2
        assert dies[1] == pnmem.Die(1, 3 * GIB, 8 * GIB, 5 * GIB, 1 * GIB)
    finally:
        pnmem.set_die(1, 8 * GIB, 8 * GIB, 0, 0)


def test_subscription_receives_the_first_level_change(roomy_die):
    before = pnmem.read().level
    assert before != pnmem.Level.CRITICAL  # a roomy die, a roomy host, PSI not read (conftest)
    got = []
    with pnmem.subscribe(lambda c: got.append((threading.get_ident(), c))) as sub:
        assert sub.active
        pnmem.set_die(0, 0, 16 * GIB, 16 * GIB, 0)  # no VRAM left: CRITICAL, delivered on this thread
        assert got, "no level change delivered"
        tid, change = got[0]
        assert tid == threading.get_ident()
        assert change.from_level == before and change.to_level == pnmem.Level.CRITICAL
        assert isinstance(change, pnmem.LevelChange) and change.seq >= 1
        assert change.state.level == pnmem.Level.CRITICAL and change.state.dies[0].free_bytes == 0
        assert change.state.provenance is None and type(change.state) is pnmem.State  # not a Snapshot
        pnmem.set_die(0, 16 * GIB, 16 * GIB, 0, 0)
        assert got[-1][1].to_level != pnmem.Level.CRITICAL
    assert not sub.active
    n = len(got)
    pnmem.set_die(0, 0, 16 * GIB, 16 * GIB, 0)
    pnmem.set_die(0, 16 * GIB, 16 * GIB, 0, 0)
    assert len(got) == n, "a change reached a callback after unsubscribe"


def test_a_raising_callback_is_logged_and_the_others_still_run(roomy_die, caplog):
    seen = []

    def bad(change):
        raise RuntimeError("callback broke")
    s1 = pnmem.subscribe(bad)
    s2 = pnmem.subscribe(seen.append)
    try:
        pnmem.set_die(0, 0, 16 * GIB, 16 * GIB, 0)
        pnmem.set_die(0, 16 * GIB, 16 * GIB, 0, 0)
    finally:
        s1.unsubscribe()
        s2()
    assert s1.errors == 2 and len(seen) == 2
    assert "callback broke" in caplog.text
    assert pnmem.read().seq > 0  # the process carries on


def test_unsubscribe_from_inside_the_callback(roomy_die):
    calls = []

    def once(change):
        calls.append(change)
        holder[0].unsubscribe()
    holder = [None]
    holder[0] = pnmem.subscribe(once)
    pnmem.set_die(0, 0, 16 * GIB, 16 * GIB, 0)
    pnmem.set_die(0, 16 * GIB, 16 * GIB, 0, 0)
    assert len(calls) == 1 and not holder[0].active


def test_callbacks_from_the_poll_thread_and_other_threads(roomy_die):
    threads = set()
    sub = pnmem.subscribe(lambda c: threads.add(threading.get_ident()))
    try:
        def flip():
            pnmem.set_die(0, 0, 16 * GIB, 16 * GIB, 0)
            pnmem.set_die(0, 16 * GIB, 16 * GIB, 0, 0)
        t = threading.Thread(target=flip)
        t.start()
        t.join()
        time.sleep(0.3)  # the poll thread samples meanwhile (it may publish changes of its own)
    finally:
        sub.unsubscribe()
    assert t.ident in threads


def test_watcher_cannot_stop_from_a_callback(roomy_die):
    errors = []

    def stop_it(change):
        try:
            watcher_ = pnmem.Watcher()
            watcher_.start()
        except pnmem.Error as e:
            errors.append(e)
    with pnmem.subscribe(stop_it):
        pnmem.set_die(0, 0, 16 * GIB, 16 * GIB, 0)
        pnmem.set_die(0, 16 * GIB, 16 * GIB, 0, 0)
    assert len(errors) == 2 and "level callback" in str(errors[0])


def test_watchers_share_the_process_watcher(watcher):
    with pnmem.Watcher() as w2:
        assert w2.started and pnmem.running()
        got = []
        w2.subscribe(got.append)
    assert not w2.started and pnmem.running()  # the session's watcher still holds it
    assert all(not s.active for s in w2._subscriptions) and not w2._subscriptions
    w2.stop()  # idempotent


def test_watcher_other_options_refused_with_the_c_line(watcher):
    with pytest.raises(pnmem.Error, match="exists already with other options"):
        pnmem.Watcher(step_down_dwell_ms=5000).start()
    assert pnmem.running()


@pytest.mark.parametrize("kw", [dict(poll_interval_ms=0), dict(pressure_poll_interval_ms=-1),
                                dict(step_down_dwell_ms=2 ** 32), dict(poll_interval_ms="250"),
                                dict(step_down_dwell_ms=1.5)])
def test_watcher_bad_options(kw):
    with pytest.raises(pnmem.Error):
        pnmem.Watcher(**kw)
    with pytest.raises(TypeError):
        pnmem.Watcher(250)  # keywords only


def test_subscribe_bad_arguments():
    for bad in (None, 1, "f"):
        with pytest.raises(pnmem.ArgumentTypeError):
            pnmem.subscribe(bad)


def run_child(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env=child_env(**env))


def test_fresh_process_the_issues_one_liner():
    r = run_child("import pnmem; print(pnmem.Watcher().__enter__().state().level)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() in ("ok", "watch", "tight", "critical")


def test_fresh_process_fails_open_before_the_watcher_and_starts_with_options():
    code = """
import pnmem
assert not pnmem.running() and pnmem.read().seq == 0 and pnmem.read().provenance.sources_read == 0
a = pnmem.admit(10 ** 6, pnmem.Model.reference())
assert a.status == pnmem.Status.FAIL_OPEN and a.fit_tokens == 10 ** 6, a
assert pnmem.admit_model_load(1 << 40).status == pnmem.Status.FAIL_OPEN
assert pnmem.admit_load_spike().status == pnmem.Status.FAIL_OPEN
r = pnmem.admit_bytes(1 << 40)
assert r.granted and r.handle == 0 and r.answer.status == pnmem.Status.FAIL_OPEN
levels = []
sub = pnmem.subscribe(lambda c: levels.append(c.to_level))
with pnmem.Watcher(poll_interval_ms=50, pressure_poll_interval_ms=20, step_down_dwell_ms=0) as w:
    assert pnmem.running() and w.state().seq >= 1
    pnmem.set_die(0, 0, 1 << 34, 1 << 34, 0)
    assert levels[-1] == pnmem.Level.CRITICAL
assert not pnmem.running()
assert pnmem.admit(10, pnmem.Model.reference()).status == pnmem.Status.FAIL_OPEN
print("fresh ok")
"""
    r = run_child(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "fresh ok"


def test_a_watcher_over_another_root_reads_that_tree():
    # A fixture laid out like "/": a 3 GiB cgroup v2 limit, 1 GiB available (tests/fixtures/linux/v2_nested).
    from conftest import SOURCE_ROOT
    root = str(SOURCE_ROOT / "tests" / "fixtures" / "linux" / "v2_nested")
    code = f"""
import pnmem
with pnmem.Watcher(poll_interval_ms=3600000, pressure_poll_interval_ms=3600000, root={root!r}) as w:
    s = w.state()
    print(s.host_total_bytes, s.host_avail_bytes)
    print(pnmem.read().provenance.cgroup_working_set_bytes)
"""
    r = run_child(code)
    assert r.returncode == 0, r.stderr
    # The limiting cgroup (pod1.slice, its memory.high 3 GiB): memory.current less memory.stat's inactive_file,
    # carried through the C snapshot's provenance (issue 42 item 14).
    pod = pathlib.Path(root) / "sys" / "fs" / "cgroup" / "kubepods.slice" / "pod1.slice"
    current = int((pod / "memory.current").read_text())
    inactive = next(int(line.split()[1]) for line in (pod / "memory.stat").read_text().splitlines()
                    if line.startswith("inactive_file "))
    assert r.stdout.split() == [str(3 * GIB), str(1 * GIB), str(current - inactive)]
    assert current - inactive == 2 * GIB
    for bad, kind in (("", pnmem.ArgumentError), ("a" * 4096, pnmem.ArgumentError), (3, pnmem.ArgumentTypeError)):
        with pytest.raises(kind, match="root"):
            pnmem.Watcher(root=bad)


def test_a_forked_child_fails_open_until_it_starts_its_own_watcher():
    code = """
import os, time, pnmem
w = pnmem.Watcher(poll_interval_ms=50, pressure_poll_interval_ms=50).start()
lines = []
pnmem.set_log_sink(lines.append)
pid = os.fork()
if pid == 0:
    code = 0
    try:
        assert not pnmem.running() and not w.started, "the poll thread stayed in the parent"
        frozen = pnmem.read().seq
        assert pnmem.admit(100, pnmem.Model.reference()).status == pnmem.Status.FAIL_OPEN
        assert any("fork's child" in line for line in lines), lines
        with pnmem.Watcher() as mine:
            assert pnmem.running() and mine.state().seq > frozen
            seq = pnmem.read().seq
            time.sleep(0.3)
            assert pnmem.read().seq > seq, "the child's own poll thread samples"
            assert pnmem.admit(100, pnmem.Model.reference()).status != pnmem.Status.FAIL_OPEN
        assert not pnmem.running()
    except BaseException as e:
        print("child:", repr(e), flush=True)
        code = 1
    os._exit(code)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, status
assert pnmem.running() and w.started
seq = pnmem.read().seq
time.sleep(0.3)
assert pnmem.read().seq > seq, "the parent's watcher carries on"
w.stop()
print("fork ok")
"""
    r = run_child(code)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().endswith("fork ok"), r.stdout


def test_fail_open_says_why(tmp_path):
    # Before any watcher: not_watching. Over a tree with no meminfo: the watcher runs but the host is
    # not read, and every host answer fails open with not_sampled (not "admitted (fits)").
    code = f"""
import pnmem
a = pnmem.admit(100, pnmem.Model.reference())
assert a.status == pnmem.Status.FAIL_OPEN and a.reason == pnmem.Reason.NOT_WATCHING, a
assert a.explain().startswith("fail_open (not_watching): "), a.explain()
with pnmem.Watcher(poll_interval_ms=3600000, pressure_poll_interval_ms=3600000, root={str(tmp_path)!r}):
    a = pnmem.admit(100, pnmem.Model.reference())
    assert a.status == pnmem.Status.FAIL_OPEN and a.reason == pnmem.Reason.NOT_SAMPLED, a
    b = pnmem.check_bytes(1 << 20)
    assert b.status == pnmem.Status.FAIL_OPEN and b.reason == pnmem.Reason.NOT_SAMPLED, b
    assert pnmem.admit_load_spike().reason == pnmem.Reason.NOT_SAMPLED
print("ok")
"""
    r = run_child(code)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == "ok"


def test_exit_with_a_subscription_and_a_running_watcher_is_clean():
    code = """
import pnmem, threading
w = pnmem.Watcher(poll_interval_ms=1, pressure_poll_interval_ms=1).start()
pnmem.subscribe(lambda c: None)
pnmem.set_log_sink(lambda line: None)
print("bye")
"""
    for _ in range(3):
        r = run_child(code)
        assert r.returncode == 0 and r.stdout.strip() == "bye", r.stderr


def test_room_and_credit_freed_shed_a_cache_to_watch_without_a_sample(tmp_path):
    # An 8 GiB box at TIGHT (1.25 GiB available; WATCH needs 1.25 x the 1288490188 B reserve), a tree the
    # test writes. Hour-long intervals: the watcher samples at start and when told to.
    (tmp_path / "proc").mkdir()
    avail = (1 << 30) + (1 << 28)
    (tmp_path / "proc" / "meminfo").write_text(
        f"MemTotal: {8 << 20} kB\nMemFree: {avail >> 10} kB\nMemAvailable: {avail >> 10} kB\n")
    code = f"""
import pnmem
assert not pnmem.room().sampled                      # no watcher: nothing known, all zeros
assert pnmem.room().free_bytes(pnmem.Level.OK) == 0
with pnmem.Watcher(poll_interval_ms=60000, pressure_poll_interval_ms=60000, root={str(tmp_path)!r}):
    r = pnmem.room()
    assert r.sampled and r.level == pnmem.Level.TIGHT, r
    reserve = 1288490188
    to_watch = r.free_bytes(pnmem.Level.WATCH)
    assert to_watch == reserve + reserve // 4 - {avail}, r
    assert r.free_bytes(pnmem.Level.OK) == 2 * reserve - {avail}
    assert r.take_bytes(pnmem.Level.TIGHT) == {avail} - reserve - 1
    class Bytes:                                      # any integer type (numpy's too) is accepted
        def __index__(self) -> int:
            return to_watch
    pnmem.credit_freed(Bytes())
    after = pnmem.room()
    assert after.seq == r.seq and after.level == pnmem.Level.WATCH, after
    assert after.free_bytes(pnmem.Level.WATCH) == 0 and after.take_bytes(pnmem.Level.WATCH) == 0
    assert after.credited_bytes == to_watch and after.avail_bytes == reserve + reserve // 4
    for bad in (-1, 2 ** 64, 1.5, "1", True):
        try:
            pnmem.credit_freed(bad)
        except (pnmem.ArgumentError, pnmem.ArgumentTypeError):
            pass
        else:
            raise AssertionError(f"credit_freed({{bad!r}}) accepted")
print("room ok")
"""
    env = {k: v for k, v in child_env().items() if k != "PN_HOST_RESERVE_BYTES"}  # the seed's 15 % reserve
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "room ok"


def test_plan_now_a_psi_stall_with_bytes_to_spare_does_not_evict():
    # tests/fixtures/linux/no_cgroup: 3 of 4 GiB available (OK by bytes), PSI some avg10 12 % (TIGHT).
    from conftest import SOURCE_ROOT
    root = str(SOURCE_ROOT / "tests" / "fixtures" / "linux" / "no_cgroup")
    code = f"""
import pnmem
with pnmem.Watcher(poll_interval_ms=60000, pressure_poll_interval_ms=60000, root={root!r}):
    s = pnmem.read()
    assert s.level == pnmem.Level.TIGHT, s
    assert s.sources.psi == pnmem.Level.TIGHT and s.sources.memory == pnmem.Level.OK, s.sources
    assert s.sources.host == pnmem.Level.OK and s.sources.die == pnmem.Level.OK, s.sources
    by_level = pnmem.plan(pnmem.Level.TIGHT, 8, 16384)
    now = pnmem.plan_now(8, 16384)
    assert by_level.kv_evict and not now.kv_evict, (by_level, now)
    assert now.max_slots == 4 and now.prefill_window == 8192 and now.force_kv_q4 and now.degraded, now
    assert "no KV eviction" in now.note, now.note
print("plan ok")
"""
    env = {k: v for k, v in child_env().items() if k not in ("PN_HOST_RESERVE_BYTES", "PN_PSI_SOURCE")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "plan ok"
    env["PN_EVICT_ON_PSI"] = "1"
    r = subprocess.run([sys.executable, "-c", code.replace("not now.kv_evict", "now.kv_evict").replace(
        'assert "no KV eviction" in now.note, now.note', '')], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
