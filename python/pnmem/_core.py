"""pnmem's Python API over the C ABI (pnmem_c.h), with ctypes. See the package docstring."""
from __future__ import annotations

import atexit
import ctypes
import dataclasses
import enum
import functools
import logging
import math
import operator
import os
import threading
import time
import traceback
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Tuple, TypeVar, Union, overload

from . import _ffi
from ._enums import CgroupMode, Engine, GateStatus, KvFormat, LayerKind, Level, PsiMode, Reason, Source, Status, ZeroCost

_lib = _ffi.lib
_log = logging.getLogger("pnmem")

INT32_MIN, INT32_MAX = -(2 ** 31), 2 ** 31 - 1
INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1
UINT32_MAX = 2 ** 32 - 1
UINT64_MAX = 2 ** 64 - 1


# --- Errors ----------------------------------------------------------------------------------

class Error(Exception):
    """A pnmem call failed. `function` is the C function; the message carries the C ABI's own words
    where it gives any (the line it logged, or pnmem_model_cost_from_json's message)."""

    def __init__(self, message: str, function: str = "") -> None:
        super().__init__(message)
        self.function = function


class ArgumentError(Error, ValueError):
    """An argument out of range, refused before it reached C."""


class ArgumentTypeError(Error, TypeError):
    """An argument of the wrong type, refused before it reached C."""


class GateRefused(Error):
    """A gate's slot was not acquired (Gate used as a context manager); `status` says why."""

    def __init__(self, status: GateStatus, function: str = "pnmem_gate_acquire") -> None:
        super().__init__(f"{function}: {status}" + (" (overloaded, retry)" if status == GateStatus.OVERLOADED else ""),
                         function)
        self.status = status


def _int(function: str, name: str, value: Any, lo: int, hi: int) -> int:
    # Any integer: int, or what says it is one (__index__: numpy.int64, a token count from torch.tensor's
    # .item() is an int already); never a bool (numpy.bool_ too) nor a float.
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        raise ArgumentTypeError(f"{function}: {name} must be an int, not {type(value).__name__}", function)
    try:
        v = operator.index(value)
    except TypeError:
        raise ArgumentTypeError(f"{function}: {name} must be an int, not {type(value).__name__}", function) from None
    if v < lo or v > hi:
        raise ArgumentError(f"{function}: {name} is {v}: outside [{lo}, {hi}]", function)
    return int(v)


def _u64(function: str, name: str, value: Any) -> int:
    return _int(function, name, value, 0, UINT64_MAX)


_E = TypeVar("_E", bound=enum.Enum)


def _enum(function: str, name: str, value: Any, kind: type[_E]) -> _E:
    if isinstance(value, kind):
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentTypeError(f"{function}: {name} must be a {kind.__name__}, not {type(value).__name__}", function)
    try:
        return kind(value)
    except ValueError:
        raise ArgumentError(f"{function}: {name} is {value}: not a {kind.__name__} "
                            f"({', '.join(f'{m.name}={m.value}' for m in kind)})", function) from None


def _seconds_to_ms(function: str, name: str, seconds: Any) -> int:
    """A duration in seconds as C milliseconds: None -> the longest; 0 or less -> 0; else at least 1 ms."""
    if seconds is None:
        return INT64_MAX
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise ArgumentTypeError(f"{function}: {name} must be a number of seconds or None, "
                                f"not {type(seconds).__name__}", function)
    if math.isnan(seconds):
        raise ArgumentError(f"{function}: {name} is NaN", function)
    if seconds <= 0:
        return 0
    if seconds >= INT64_MAX / 1000:
        return INT64_MAX
    return max(1, math.ceil(seconds * 1000))


# --- The log sink: every line pnmem logs, and the last one per thread for the exceptions ------

_tls = threading.local()
_user_sink: Optional[Callable[[str], Any]] = None
_sink_default = True


def _sink(_user: Any, line: Optional[bytes]) -> None:
    try:
        text = line.decode("utf-8", "replace") if line else ""
        _tls.last_line = text
        if _sink_default:
            _log.warning("%s", text)
        elif _user_sink is not None:
            _user_sink(text)
    except BaseException:  # nothing may unwind into C
        try:
            traceback.print_exc()
        except BaseException:
            pass


_c_sink = _ffi.LOG_FN(_sink)  # kept alive for the process: the C side holds its address


class _Unset(enum.Enum):
    """set_log_sink's "no argument" (None means: drop the lines)."""
    UNSET = 0


@overload
def set_log_sink() -> None: ...
@overload
def set_log_sink(fn: Optional[Callable[[str], Any]], /) -> None: ...


def set_log_sink(fn: Union[Callable[[str], Any], None, _Unset] = _Unset.UNSET, /) -> None:
    """Where pnmem's log lines go: fn(line) on the thread that logged (any thread, several at once);
    None drops them; called with no argument, back to the default (logging.getLogger("pnmem").warning).
    An exception from fn is printed and dropped. Lines that explain a failed call also travel in its Error."""
    global _user_sink, _sink_default
    if fn is _Unset.UNSET:
        _user_sink, _sink_default = None, True
    elif fn is None or callable(fn):
        _user_sink, _sink_default = fn, False
    else:
        raise ArgumentTypeError(f"set_log_sink: fn must be callable or None, not {type(fn).__name__}",
                                "pnmem_set_log_sink")


def _begin() -> None:
    _tls.last_line = ""


def _fail(function: str, what: str) -> Error:
    line = getattr(_tls, "last_line", "")
    return Error(f"{function}: {what}" + (f": {line}" if line else ""), function)


# --- Snapshots -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Die:
    """One GPU die as the snapshot has it (fed with set_die)."""
    index: int
    free_bytes: int
    budget_bytes: int
    used_bytes: int
    retiring_bytes: int


@dataclass(frozen=True)
class Provenance:
    """Where a snapshot's host numbers came from (pnmem_snapshot's provenance fields)."""
    sources_read: Source
    sources_failed: Source
    cgroup_mode: CgroupMode
    psi_mode: PsiMode
    meminfo_total_bytes: int
    meminfo_avail_bytes: int
    cgroup_limit_bytes: int
    cgroup_working_set_bytes: int
    limit_cgroup: str


@dataclass(frozen=True)
class State:
    """One snapshot's numbers (pnmem_state). `provenance` is None here only in a LevelChange's state
    (the C change carries the numbers only); Watcher.state() and read() return a Snapshot, the State
    whose provenance is always there."""
    level: Level
    raw_level: Level
    seq: int
    sample_time_ns: int
    host_total_bytes: int
    host_avail_bytes: int
    host_psi_some_avg10: float
    host_psi_full_avg10: float
    host_psi_some_rate: float
    host_psi_full_rate: float
    cgroup_current_bytes: int
    cgroup_high_bytes: int
    cgroup_max_bytes: int
    dies: tuple[Die, ...]
    provenance: Optional[Provenance]


@dataclass(frozen=True)
class LevelSources:
    """Which source put the level where it is (pnmem_snapshot's per-source levels), each as its own bands
    read it now (no hysteresis). The ladder's evict rung follows ``memory`` (plan_now), not ``psi``."""
    host: Level    # the host byte bands
    psi: Level     # PSI: box-wide where the kernel has no per-cgroup PSI (cgroup v1)
    die: Level     # the worst fed die
    os: Level      # the OS's own verdict (macOS; OK elsewhere)
    memory: Level  # the worst of host, die and os: memory actually short


@dataclass(frozen=True)
class Snapshot(State):
    """A State with its provenance (pnmem_snapshot): what Watcher.state() and read() return. Its
    `provenance` is never None (a typed caller reads s.provenance.sources_read without a check);
    `sources` says which source put the level where it is."""
    provenance: Provenance
    sources: LevelSources


def _level_of(v: int) -> Level:
    return Level(v)


def _state_numbers(s: _ffi.pnmem_state) -> dict[str, Any]:
    """State's fields but the provenance, from a pnmem_state."""
    n = min(max(s.n_dies, 0), _ffi.MAX_DIES)
    dies = tuple(Die(i, s.per_die_free[i], s.per_die_budget[i], s.per_die_used[i], s.per_die_retiring[i])
                 for i in range(n))
    return dict(level=_level_of(s.level), raw_level=_level_of(s.raw_level), seq=s.seq,
                sample_time_ns=s.sample_time_ns, host_total_bytes=s.host_total_bytes,
                host_avail_bytes=s.host_avail_bytes, host_psi_some_avg10=s.host_psi_some_avg10,
                host_psi_full_avg10=s.host_psi_full_avg10, host_psi_some_rate=s.host_psi_some_rate,
                host_psi_full_rate=s.host_psi_full_rate, cgroup_current_bytes=s.cgroup_current_bytes,
                cgroup_high_bytes=s.cgroup_high_bytes, cgroup_max_bytes=s.cgroup_max_bytes, dies=dies)


def read() -> Snapshot:
    """The latest snapshot with its provenance (pnmem_read_snapshot); all zero before a watcher exists."""
    snap = _ffi.pnmem_snapshot()
    if _lib.pnmem_snapshot_init_sized(ctypes.byref(snap), ctypes.sizeof(snap)) != 0:
        raise _fail("pnmem_snapshot_init_sized", "refused this package's struct")
    _begin()
    if _lib.pnmem_read_snapshot(ctypes.byref(snap)) != 0:
        raise _fail("pnmem_read_snapshot", "failed")
    p = Provenance(sources_read=Source(snap.sources_read), sources_failed=Source(snap.sources_failed),
                   cgroup_mode=CgroupMode(snap.cgroup_mode), psi_mode=PsiMode(snap.psi_mode),
                   meminfo_total_bytes=snap.meminfo_total_bytes, meminfo_avail_bytes=snap.meminfo_avail_bytes,
                   cgroup_limit_bytes=snap.cgroup_limit_bytes,
                   cgroup_working_set_bytes=snap.cgroup_working_set_bytes,
                   limit_cgroup=snap.limit_cgroup.decode("utf-8", "replace"))
    sources = LevelSources(host=Level(snap.host_level), psi=Level(snap.psi_level), die=Level(snap.die_level),
                           os=Level(snap.os_level), memory=Level(snap.memory_level))
    return Snapshot(provenance=p, sources=sources, **_state_numbers(snap.state))


def level_name(level: Any) -> str:
    """pnmem_level_name: "ok", "watch", "tight", "critical"; "invalid" for any other int."""
    v = _int("pnmem_level_name", "level", level, INT32_MIN, INT32_MAX)
    name: bytes = _lib.pnmem_level_name(v)  # a static string, never NULL
    return name.decode()


def set_die(die: int, free_bytes: int, budget_bytes: int, used_bytes: int = 0, retiring_bytes: int = 0) -> None:
    """pnmem_set_die: one die's numbers (after cudaMemGetInfo); creates the watcher if none exists.
    A level change it causes is delivered to subscribers on this thread, before it returns."""
    f = "pnmem_set_die"
    d = _int(f, "die", die, 0, _ffi.MAX_DIES - 1)
    args = [_u64(f, n, v) for n, v in (("free_bytes", free_bytes), ("budget_bytes", budget_bytes),
                                       ("used_bytes", used_bytes), ("retiring_bytes", retiring_bytes))]
    _begin()
    if _lib.pnmem_set_die(d, *args) != 0:
        raise _fail(f, f"die {d} refused")


def poll_now() -> None:
    """pnmem_watcher_poll_now: sample now on this thread (nothing before the watcher exists)."""
    _lib.pnmem_watcher_poll_now()


def running() -> bool:
    """pnmem_watcher_running: whether the process's watcher thread runs."""
    return bool(_lib.pnmem_watcher_running())


# --- Level changes ---------------------------------------------------------------------------

@dataclass(frozen=True)
class LevelChange:
    """A change of the published level (pnmem_level_change); `state` is that snapshot's numbers (a State
    whose provenance is None: the C change carries none)."""
    from_level: Level
    to_level: Level
    seq: int
    sample_time_ns: int
    state: State


_subs_lock = threading.Lock()
_subs: dict[int, "Subscription"] = {}
_retired_thunks: list[Any] = []  # unsubscribed from inside their own call: kept, the C call still runs them


def _in_callback() -> bool:
    return getattr(_tls, "callback_depth", 0) > 0


class Subscription:
    """A level-change subscription: unsubscribe() (or use it as a context manager, or call it)."""

    def __init__(self, callback: Callable[[LevelChange], Any]) -> None:
        self.callback = callback
        self.errors = 0  # exceptions the callback raised (each printed through logging)
        self.id = 0
        self._thunk = _ffi.LEVEL_FN(self._trampoline)

    def _trampoline(self, _user: Any, change: Any) -> None:
        _tls.callback_depth = getattr(_tls, "callback_depth", 0) + 1
        try:
            c = change.contents
            state = State(provenance=None, **_state_numbers(c.state.contents))  # pnmem_c.h: never NULL
            ev = LevelChange(from_level=_level_of(getattr(c, "from")), to_level=_level_of(c.to), seq=c.seq,
                             sample_time_ns=c.sample_time_ns, state=state)
            self.callback(ev)
        except BaseException:  # never into C: printed, and the watcher carries on
            self.errors += 1
            try:
                _log.exception("pnmem: level callback %r raised", self.callback)
            except BaseException:
                try:
                    traceback.print_exc()
                except BaseException:
                    pass
        finally:
            _tls.callback_depth -= 1

    @property
    def active(self) -> bool:
        return self.id != 0

    def unsubscribe(self) -> None:
        """pnmem_unsubscribe: after it returns the callback is not running (unless called from the
        callback itself) and is not called again. Idempotent."""
        with _subs_lock:
            sid, self.id = self.id, 0
            _subs.pop(sid, None)
        if sid == 0:
            return
        _lib.pnmem_unsubscribe(sid)  # the GIL is released: a callback in flight on another thread finishes
        if _in_callback():
            _retired_thunks.append(self._thunk)

    __call__ = unsubscribe

    def __enter__(self) -> "Subscription":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.unsubscribe()


def subscribe(callback: Callable[[LevelChange], Any]) -> Subscription:
    """Calls callback(LevelChange) for every change of the published level from now on, on the thread
    that published it (the watcher's poll thread, or the caller of set_die / poll_now / Watcher.start),
    one change at a time. An exception it raises is logged and the others still run. It must not start
    or stop the watcher."""
    if not callable(callback):
        raise ArgumentTypeError(f"pnmem_subscribe: callback must be callable, not {type(callback).__name__}",
                                "pnmem_subscribe")
    sub = Subscription(callback)
    with _subs_lock:
        _begin()
        sid = _lib.pnmem_subscribe(sub._thunk, None)
        if sid == 0:
            raise _fail("pnmem_subscribe", "failed")
        sub.id = sid
        _subs[sid] = sub
    return sub


# --- The watcher -----------------------------------------------------------------------------

_lifecycle = threading.Lock()
_starts = 0  # Python Watchers started and not stopped: the C watcher stops with the last
_started: "weakref.WeakSet[Watcher]" = weakref.WeakSet()  # those Watchers


# os.fork() (vLLM, SGLang workers): the C watcher's poll thread stays in the parent, so in the child
# it is not running (admissions fail open) until a Watcher is started there; the Python side follows:
# no Watcher counts as started in the child. The lifecycle lock is held across the fork so the child
# never inherits it held by a thread that did not come along.
def _before_fork() -> None:
    _lifecycle.acquire()


def _after_fork_in_parent() -> None:
    _lifecycle.release()


def _after_fork_in_child() -> None:
    global _starts
    for w in list(_started):
        w._started = False
    _started.clear()
    _starts = 0
    _lifecycle.release()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)


class Watcher:
    """The process's watcher (one per process, in C): start()/stop() or a context manager.

    Options (milliseconds; None: the PN_* variable's value or the seed's default) apply only to the
    first start in the process: a later Watcher with other options raises Error. Several Watchers may
    be started; the C watcher stops when the last of them stops. Subscriptions made through a Watcher
    end when it stops. `root`: the directory the Linux sampler reads /proc and /sys under (None: "/";
    "/host" where a container has the node's mounted there). `ledger`: the box ledger the process's
    reservations are counted in with every other pnmem process that joins it (None: PN_LEDGER's, by default
    the processes sharing /dev/shm and this memory cgroup limit; "off"; a name; an absolute path)."""

    def __init__(self, *, poll_interval_ms: Optional[int] = None, pressure_poll_interval_ms: Optional[int] = None,
                 step_down_dwell_ms: Optional[int] = None, root: Optional[str] = None,
                 ledger: Optional[str] = None) -> None:
        f = "pnmem_watcher_start_with"
        self._options: dict[str, int | bytes] = {}
        for name, v in (("poll_interval_ms", poll_interval_ms),
                        ("pressure_poll_interval_ms", pressure_poll_interval_ms),
                        ("step_down_dwell_ms", step_down_dwell_ms)):
            if v is not None:
                self._options[name] = _int(f, name, v, 0 if name == "step_down_dwell_ms" else 1, UINT32_MAX)
        if root is not None:
            if not isinstance(root, (str, os.PathLike)):
                raise ArgumentTypeError(f"{f}: root must be a path, not {type(root).__name__}", f)
            raw = os.fsencode(root)
            if not raw or b"\0" in raw or len(raw) > 4095:
                raise ArgumentError(f"{f}: root must be a non-empty path of at most 4095 bytes without NUL, "
                                    f"not {root!r}", f)
            self._options["root"] = raw  # kept alive here while C reads it
        if ledger is not None:
            if not isinstance(ledger, (str, os.PathLike)):
                raise ArgumentTypeError(f"{f}: ledger must be a str, not {type(ledger).__name__}", f)
            raw = os.fsencode(ledger)
            if not raw or b"\0" in raw or len(raw) > 4095:
                raise ArgumentError(f"{f}: ledger must be off, auto, a name or an absolute path (at most 4095 "
                                    f"bytes without NUL), not {ledger!r}", f)
            self._options["ledger"] = raw
        self._started = False
        self._subscriptions: list[Subscription] = []

    def start(self) -> "Watcher":
        """pnmem_watcher_start(_with): creates the process's watcher with this Watcher's options (the first
        start only) and starts its poll thread, after one sample; returns self. Idempotent per Watcher.
        Raises Error if it did not start (other options than the watcher was created with, or the thread
        could not be made). Not from a level callback."""
        global _starts
        if _in_callback():
            raise Error("pnmem_watcher_start: not from a level callback (it would deadlock)", "pnmem_watcher_start")
        with _lifecycle:
            if self._started:
                return self
            _begin()
            if self._options:
                o = _ffi.pnmem_watcher_options()
                if _lib.pnmem_watcher_options_init_sized(ctypes.byref(o), ctypes.sizeof(o)) != 0:
                    raise _fail("pnmem_watcher_options_init_sized", "refused this package's struct")
                for k, v in self._options.items():
                    setattr(o, k, v)
                _begin()
                if _lib.pnmem_watcher_start_with(ctypes.byref(o)) != 0:
                    raise _fail("pnmem_watcher_start_with", "the watcher did not start")
            elif _lib.pnmem_watcher_start() != 0:
                raise _fail("pnmem_watcher_start", "the watcher did not start")
            self._started = True
            _starts += 1
            _started.add(self)
        return self

    def stop(self) -> None:
        """Ends this Watcher's subscriptions, and stops the C watcher's poll thread when this was the last
        started Watcher (pnmem_watcher_stop: the last snapshot stays readable). Idempotent."""
        global _starts
        if _in_callback():
            raise Error("pnmem_watcher_stop: not from a level callback (it would deadlock)", "pnmem_watcher_stop")
        for s in self._subscriptions:
            s.unsubscribe()
        self._subscriptions.clear()
        with _lifecycle:
            if not self._started:
                return
            self._started = False
            _started.discard(self)
            _starts -= 1
            if _starts == 0:
                _lib.pnmem_watcher_stop()  # joins the poll thread (the GIL is released meanwhile)

    @property
    def started(self) -> bool:
        return self._started

    @property
    def running(self) -> bool:
        return running()

    def state(self) -> Snapshot:
        """The latest snapshot and its provenance (read())."""
        return read()

    def subscribe(self, callback: Callable[[LevelChange], Any]) -> Subscription:
        """subscribe(callback), ended by this watcher's stop() if not before."""
        s = subscribe(callback)
        self._subscriptions = [x for x in self._subscriptions if x.active] + [s]
        return s

    def poll_now(self) -> None:
        """pnmem_watcher_poll_now: a sample now, on this thread (level changes delivered here too)."""
        poll_now()

    def __enter__(self) -> "Watcher":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


# --- Models ----------------------------------------------------------------------------------

def _c_model(init: str) -> _ffi.pnmem_model:
    """A struct as pnmem_model_init (the request defaults, the cost unset: Model's defaults) or
    pnmem_model_init_reference (the seed's model: Model.reference) fills it."""
    m = _ffi.pnmem_model()
    if getattr(_lib, init)(ctypes.byref(m), ctypes.sizeof(m)) != 0:
        raise Error(f"{init}: refused this package's struct (a libpnmem_c of another version?)", init)
    return m


_SEED = _c_model("pnmem_model_init_reference_sized")
_UNSET = _c_model("pnmem_model_init_sized")
_KV_UNSET = -1  # PNMEM_KV_UNSET: Model.normal_kv None
_COST_FIELDS = ("full_kv_bytes_per_token", "windows", "kv_block_tokens", "kv_bytes_per_encoder_item",
                "state_bytes_per_seq", "normal_kv", "compact_kv", "anchors", "activation_fixed_bytes",
                "activation_per_token_bytes", "activation_per_token_sq_bytes")


def _cost_from_c(m: _ffi.pnmem_model) -> dict[str, Any]:
    n = min(m.n_anchors, _ffi.MAX_ACTIVATION_ANCHORS)
    windows = []
    if m.sliding_window != 0:
        windows.append((m.sliding_window, tuple(m.sliding_kv_bytes_per_token)))
    for i in range(min(m.n_more_windows, _ffi.MAX_KV_WINDOWS - 1)):
        windows.append((m.more_windows[i].window, tuple(m.more_windows[i].bytes_per_token)))
    return dict(full_kv_bytes_per_token=tuple(m.full_kv_bytes_per_token), windows=tuple(windows),
                kv_block_tokens=m.kv_block_tokens, kv_bytes_per_encoder_item=tuple(m.kv_bytes_per_encoder_item),
                state_bytes_per_seq=m.state_bytes_per_seq,
                normal_kv=None if m.normal_kv == _KV_UNSET else KvFormat(m.normal_kv), compact_kv=KvFormat(m.compact_kv),
                anchors=tuple((m.anchors[i].tokens, m.anchors[i].peak_bytes) for i in range(n)),
                activation_fixed_bytes=m.activation_fixed_bytes,
                activation_per_token_bytes=m.activation_per_token_bytes,
                activation_per_token_sq_bytes=m.activation_per_token_sq_bytes)


def _request_from_c(m: _ffi.pnmem_model) -> dict[str, Any]:
    """The request fields of a C model: kv None where C has PNMEM_KV_UNSET (the model's own format)."""
    return dict(kv=None if m.kv == _KV_UNSET else KvFormat(m.kv), gpu_resident=bool(m.gpu_resident),
                max_window=m.max_window, die=m.die, max_slots=m.max_slots, zero_cost=ZeroCost(m.zero_cost))


def _unset(name: str) -> Any:
    """A Model field's default: pnmem_model_init's (the C library's, so one set of defaults serves C and
    Python): its request fields, and its cost, which it leaves unset."""
    value: object = {**_cost_from_c(_UNSET), **_request_from_c(_UNSET)}[name]  # immutable: shared by every Model
    return field(default_factory=lambda: value)


def _c_engine_rule() -> _ffi.pnmem_engine_rule:
    e = _ffi.pnmem_engine_rule()
    if _lib.pnmem_engine_rule_init_sized(ctypes.byref(e), ctypes.sizeof(e)) != 0:
        raise Error("pnmem_engine_rule_init_sized: refused this package's struct (a libpnmem_c of another "
                    "version?)", "pnmem_engine_rule_init_sized")
    return e


_RULE = _c_engine_rule()  # pnmem_engine_rule_init's defaults: EngineRule's, so C and Python share them


@dataclass(frozen=True)
class EngineRule:
    """pnmem_engine_rule: what the serving engine keeps of a model's windowed layers and recurrent
    state (the C header and model_shape.hpp explain each rule). The defaults are each engine's own, as
    pnmem_engine_rule_init gives them (16, 8192, 512, 1, 1, off, off, off)."""
    engine: Engine = Engine(_RULE.engine)
    block_tokens: int = _RULE.block_tokens              # vllm: --block-size
    max_batched_tokens: int = _RULE.max_batched_tokens  # vllm: --max-num-batched-tokens
    ubatch_tokens: int = _RULE.ubatch_tokens            # llama.cpp: -ub
    seqs: int = _RULE.seqs                              # llama.cpp: sequences sharing one unified cache
    state_copies: int = _RULE.state_copies              # vllm: recurrent states per layer and sequence (2 with prefix caching)
    ssm_state_fp32: bool = bool(_RULE.ssm_state_fp32)   # vllm: --mamba-ssm-cache-dtype float32
    mtp: bool = bool(_RULE.mtp)                         # vllm, exact: the model's MTP layers keep KV (a drafter)
    hybrid_manager_off: bool = bool(_RULE.hybrid_manager_off)  # vllm: --disable-hybrid-kv-cache-manager

    def _to_c(self, function: str) -> _ffi.pnmem_engine_rule:
        f = function
        e = _c_engine_rule()
        e.engine = _enum(f, "engine.engine", self.engine, Engine)
        for name in ("block_tokens", "max_batched_tokens", "ubatch_tokens", "seqs", "state_copies"):
            setattr(e, name, _int(f, f"engine.{name}", getattr(self, name), 0, 2 ** 32 - 1))
        for name in ("ssm_state_fp32", "mtp", "hybrid_manager_off"):
            if not isinstance(getattr(self, name), (bool, int)):
                raise ArgumentTypeError(f"{f}: engine.{name} must be a bool", f)
            setattr(e, name, 1 if getattr(self, name) else 0)
        return e


def _engine_rule(function: str, engine: Any) -> EngineRule:
    """An EngineRule from what a caller gave: None (exact), an Engine, a name ("vllm", "llama.cpp"), a rule."""
    if engine is None:
        return EngineRule()
    if isinstance(engine, EngineRule):
        return engine
    if isinstance(engine, Engine):
        return EngineRule(engine=engine)
    if isinstance(engine, str):
        names = {str(e): e for e in Engine}
        if engine not in names:
            raise ArgumentError(f"{function}: engine \"{engine}\" is not one of {', '.join(sorted(names))}", function)
        return EngineRule(engine=names[engine])
    raise ArgumentTypeError(f"{function}: engine must be an EngineRule, an Engine or its name, not "
                            f"{type(engine).__name__}", function)


_REQUEST_FIELDS = {"kv", "gpu_resident", "max_window", "die", "max_slots", "zero_cost"}


@dataclass(frozen=True)
class LayerGroup:
    """pnmem_layer_group: `layers` layers that hold memory alike, for Model.from_shape. FULL, SLIDING
    (span: the window), CHUNKED (span: the chunk) and CROSS (span: encoder tokens per item) layers hold
    K rows of kv_heads x key_dim values and V rows of value_dim (0: key_dim), or one row (k_only: MLA's
    latent, key_dim = kv_lora_rank + qk_rope_head_dim, kv_heads 1), and side_bytes per token and layer of
    caches beside the KV in their own format, whatever the KV's (DeepSeek Sparse Attention's indexer keys:
    132); RECURRENT layers hold no KV but conv_state_values + ssm_state_values per layer and sequence."""
    kind: LayerKind
    layers: int
    kv_heads: int = 0
    key_dim: int = 0
    value_dim: int = 0
    k_only: bool = False
    span: int = 0
    conv_state_values: int = 0
    ssm_state_values: int = 0
    side_bytes: int = 0  # last: the fields before it keep their positions


@dataclass
class Model:
    """A request's model (pnmem_model): the request fields, then its cost. The cost has no default: a
    Model() whose cost was never given (normal_kv None, as pnmem_model_init leaves it) is refused by every
    call, so nothing is priced as a model it is not. Model.from_hf_config reads a Hugging Face config.json,
    Model.from_gguf a GGUF file's metadata, Model.from_json a description, Model.from_shape layer groups;
    Model.preallocated is an engine that allocated its KV at load, Model.reference the seed's model.

    windows: ((window, bytes per token per KvFormat), ...) for the layers that keep at most `window`
    tokens (sliding, chunked), windows increasing; kv_block_tokens: KV is charged in whole blocks of
    this many tokens (0: per token); kv_bytes_per_encoder_item: cross-attention KV per image."""
    kv: Optional[KvFormat] = _unset("kv")  # None: the model's own format (normal_kv), as in C and the tool
    gpu_resident: bool = _unset("gpu_resident")
    max_window: int = _unset("max_window")
    die: int = _unset("die")
    max_slots: int = _unset("max_slots")
    # A request that needs no host bytes, host memory inside the reserve: ZeroCost.HOLD (admit_wait waits for it),
    # ADMIT or REJECT; POLICY (the default): PN_ZERO_COST's, hold unless set.
    zero_cost: ZeroCost = _unset("zero_cost")
    full_kv_bytes_per_token: tuple[int, ...] = _unset("full_kv_bytes_per_token")
    windows: tuple[tuple[int, tuple[int, ...]], ...] = _unset("windows")
    kv_block_tokens: int = _unset("kv_block_tokens")
    kv_bytes_per_encoder_item: tuple[int, ...] = _unset("kv_bytes_per_encoder_item")
    state_bytes_per_seq: int = _unset("state_bytes_per_seq")
    normal_kv: Optional[KvFormat] = _unset("normal_kv")  # None: the cost was never set
    compact_kv: KvFormat = _unset("compact_kv")
    anchors: tuple[tuple[int, int], ...] = _unset("anchors")  # (tokens, peak_bytes); empty: the coefficients
    activation_fixed_bytes: int = _unset("activation_fixed_bytes")
    activation_per_token_bytes: int = _unset("activation_per_token_bytes")
    activation_per_token_sq_bytes: int = _unset("activation_per_token_sq_bytes")

    @classmethod
    def _from_c_reader(cls, f: str, request: dict[str, Any], read: Any) -> "Model":
        bad = set(request) - _REQUEST_FIELDS
        if bad:
            raise ArgumentTypeError(f"{f}: not a request field: {', '.join(sorted(bad))}", f)
        base = cls(**request)
        c = base._to_c(f, cost_unset_ok=True)  # the reader sets the cost
        err = ctypes.create_string_buffer(512)
        _begin()
        if read(c, err) != 0:
            msg = err.value.decode("utf-8", "replace") or "refused"
            raise Error(f"{f}: {msg}", f)
        return dataclasses.replace(base, **_cost_from_c(c))

    @classmethod
    def reference(cls, **fields: Any) -> "Model":
        """The seed's model (pnmem_model_init_reference): what the seed's numbers and pnmem's own tests use,
        never a stand-in for an engine's own model. Any field as a keyword replaces the seed's (kv=...,
        max_window=..., anchors=...)."""
        f = "pnmem_model_init_reference_sized"
        bad = set(fields) - {x.name for x in dataclasses.fields(cls)}
        if bad:
            raise ArgumentTypeError(f"{f}: not a Model field: {', '.join(sorted(bad))}", f)
        return cls(**{**_cost_from_c(_SEED), **fields})

    @classmethod
    def preallocated(cls, **request: Any) -> "Model":
        """An engine whose KV cache and compute buffers are allocated at load (the llama.cpp server, vLLM,
        SGLang): every cost 0 (pnmem_model_init_preallocated), so requests are admitted on pressure alone and
        growth goes through admit_bytes. Request fields as keywords (kv=..., max_window=...)."""
        f = "pnmem_model_init_preallocated_sized"
        bad = set(request) - _REQUEST_FIELDS
        if bad:
            raise ArgumentTypeError(f"{f}: not a request field: {', '.join(sorted(bad))}", f)
        c = _ffi.pnmem_model()
        if _lib.pnmem_model_init_preallocated_sized(ctypes.byref(c), ctypes.sizeof(c)) != 0:
            raise Error(f"{f}: refused this package's struct (a libpnmem_c of another version?)", f)
        return dataclasses.replace(cls(**request), **_cost_from_c(c))

    @classmethod
    def from_shape(cls, groups: Any, *, query_heads: Any = 0, hidden_size: Any = 0,
                   fixed_activation_bytes: Any = None, normal_kv: Any = None, compact_kv: Any = None,
                   state_format: Any = None, ssm_state_format: Any = None, engine: Any = None,
                   **request: Any) -> "Model":
        """The cost from the model's layer groups (pnmem_model_cost_from_shape), for an engine that knows
        its model's shape (vLLM's model config) and has no config.json at hand: each a LayerGroup (full,
        sliding, chunked, cross-attention or recurrent layers), under `engine`'s rule (as from_hf_config).
        query_heads and hidden_size feed the activation estimate; the formats default as
        pnmem_model_shape_init's (f16 KV and state, q4_0 compact). Request fields as keywords."""
        f = "pnmem_model_cost_from_shape"
        if not isinstance(groups, (list, tuple)):
            raise ArgumentTypeError(f"{f}: groups must be a list of pnmem.LayerGroup, not {type(groups).__name__}", f)
        if len(groups) > _ffi.MAX_LAYER_GROUPS:
            raise ArgumentError(f"{f}: {len(groups)} groups: at most {_ffi.MAX_LAYER_GROUPS}", f)
        shape = _ffi.pnmem_model_shape()
        if _lib.pnmem_model_shape_init_sized(ctypes.byref(shape), ctypes.sizeof(shape)) != 0:
            raise Error(f"{f}: pnmem_model_shape_init_sized refused this package's struct", f)
        shape.n_groups = len(groups)
        for i, g in enumerate(groups):
            if not isinstance(g, LayerGroup):
                raise ArgumentTypeError(f"{f}: groups[{i}] must be a pnmem.LayerGroup, not {type(g).__name__}", f)
            c = shape.groups[i]
            c.kind = int(_enum(f, f"groups[{i}].kind", g.kind, LayerKind))
            for name in ("layers", "kv_heads", "key_dim", "value_dim", "span"):
                setattr(c, name, _int(f, f"groups[{i}].{name}", getattr(g, name), 0, UINT32_MAX))
            c.k_only = 1 if g.k_only else 0
            shape.side_bytes[i] = _int(f, f"groups[{i}].side_bytes", g.side_bytes, 0, UINT32_MAX)
            c.conv_state_values = _u64(f, f"groups[{i}].conv_state_values", g.conv_state_values)
            c.ssm_state_values = _u64(f, f"groups[{i}].ssm_state_values", g.ssm_state_values)
        shape.query_heads = _int(f, "query_heads", query_heads, 0, UINT32_MAX)
        shape.hidden_size = _int(f, "hidden_size", hidden_size, 0, UINT32_MAX)
        if fixed_activation_bytes is not None:
            shape.fixed_activation_bytes = _u64(f, "fixed_activation_bytes", fixed_activation_bytes)
        for name, v in (("normal_kv", normal_kv), ("compact_kv", compact_kv), ("state_format", state_format),
                        ("ssm_state_format", ssm_state_format)):
            if v is not None:
                setattr(shape, name, int(_enum(f, name, v, KvFormat)))
        rule = _engine_rule(f, engine)._to_c(f)
        return cls._from_c_reader(f, request, lambda c, err: _lib.pnmem_model_cost_from_shape(
            ctypes.byref(shape), ctypes.byref(rule), ctypes.byref(c), err, len(err)))

    @classmethod
    def from_json(cls, text: Any, **request: Any) -> "Model":
        """The cost from a pnmem model description (JSON, what `pnmem model` prints), with the request
        fields given as keywords (kv=..., max_window=...; the rest default). Error carries the C message."""
        f = "pnmem_model_cost_from_json"
        data = _text_bytes(f, "text", text)
        return cls._from_c_reader(f, request, lambda c, err: _lib.pnmem_model_cost_from_json(
            data, len(data), ctypes.byref(c), err, len(err)))

    @classmethod
    def from_hf_config(cls, path: Any, engine: Any = None, **request: Any) -> "Model":
        """The cost from a Hugging Face config.json: the file at `path`, or the config.json in `path` when it
        is a model's directory (a downloaded snapshot, as vLLM's model path is), under `engine`'s rule (None
        or "exact": the model's own need; "vllm", "llama.cpp", an Engine or an EngineRule with that engine's
        settings). Request fields as keywords. Error names the file read and the key the config got wrong."""
        return cls._from_c_file("pnmem_model_cost_from_hf_config_file", path, engine, request)

    @classmethod
    def from_gguf(cls, path: Any, engine: Any = None, **request: Any) -> "Model":
        """The cost from a GGUF file's metadata (never its tensors), under `engine`'s rule (as from_hf_config)."""
        return cls._from_c_file("pnmem_model_cost_from_gguf_file", path, engine, request)

    @classmethod
    def _from_c_file(cls, f: str, path: Any, engine: Any, request: dict[str, Any]) -> "Model":
        """A C reader `f` of the model file at `path` (f(path, rule, model, err, err_len)), under `engine`'s rule."""
        if not isinstance(path, (str, os.PathLike)):
            raise ArgumentTypeError(f"{f}: path must be a str or os.PathLike, not {type(path).__name__}", f)
        encoded = os.fsencode(path)
        rule = _engine_rule(f, engine)._to_c(f)
        read = getattr(_lib, f)
        return cls._from_c_reader(f, request, lambda c, err: read(encoded, ctypes.byref(rule), ctypes.byref(c), err, len(err)))

    @property
    def request_kv(self) -> KvFormat:
        """The format requests on this model are priced in: kv when given, else the model's own (normal_kv)."""
        if self.kv is not None:
            return self.kv
        if self.normal_kv is None:
            raise ArgumentError("Model.request_kv: the model's cost was never set (Model() has none), so it has no "
                                "format of its own: give kv, or a cost (Model.from_hf_config, ...)", "Model.request_kv")
        return self.normal_kv

    @property
    def kv_bytes_per_token(self) -> int:
        """Bytes one token adds in the request's format while shorter than every window."""
        i = int(self.request_kv)
        return self.full_kv_bytes_per_token[i] + sum(w[1][i] for w in self.windows)

    def _to_c(self, function: str, cost_unset_ok: bool = False) -> _ffi.pnmem_model:
        f = function
        if self.normal_kv is None and not cost_unset_ok:
            raise ArgumentError(f"{f}: the model's cost was never set (Model() has none): Model.from_hf_config(path), "
                                "Model.from_gguf(path), Model.from_json(text), Model.from_shape(groups), "
                                "Model.preallocated() (KV allocated at load), Model.reference() (the seed's model), "
                                "or give the cost fields with normal_kv", f)
        m = _c_model("pnmem_model_init_sized")
        m.kv = _KV_UNSET if self.kv is None else _enum(f, "model.kv", self.kv, KvFormat)
        if not isinstance(self.gpu_resident, (bool, int)):
            raise ArgumentTypeError(f"{f}: model.gpu_resident must be a bool", f)
        m.gpu_resident = 1 if self.gpu_resident else 0
        m.max_window = _int(f, "model.max_window", self.max_window, INT32_MIN, INT32_MAX)
        m.die = _int(f, "model.die", self.die, -1, _ffi.MAX_DIES - 1)
        m.max_slots = _int(f, "model.max_slots", self.max_slots, INT32_MIN, INT32_MAX)
        m.zero_cost = _enum(f, "model.zero_cost", self.zero_cost, ZeroCost)

        def formats(name: str, values: Any, arr: Any) -> None:
            if not isinstance(values, (tuple, list)) or len(values) != _ffi.KV_FORMATS:
                raise ArgumentError(f"{f}: model.{name} must be {_ffi.KV_FORMATS} ints (one per KvFormat)", f)
            for i, v in enumerate(values):
                arr[i] = _u64(f, f"model.{name}[{i}]", v)

        formats("full_kv_bytes_per_token", self.full_kv_bytes_per_token, m.full_kv_bytes_per_token)
        formats("kv_bytes_per_encoder_item", self.kv_bytes_per_encoder_item, m.kv_bytes_per_encoder_item)
        windows = self.windows
        if not isinstance(windows, (tuple, list)) or len(windows) > _ffi.MAX_KV_WINDOWS:
            raise ArgumentError(f"{f}: model.windows must be at most {_ffi.MAX_KV_WINDOWS} (window, bytes per "
                                "token per KvFormat) pairs", f)
        m.sliding_window = 0
        for i in range(_ffi.KV_FORMATS):
            m.sliding_kv_bytes_per_token[i] = 0
        for i, w in enumerate(windows):
            if not isinstance(w, (tuple, list)) or len(w) != 2:
                raise ArgumentError(f"{f}: model.windows[{i}] must be a (window, bytes per token) pair", f)
            window = _u64(f, f"model.windows[{i}][0]", w[0])
            if i == 0:
                m.sliding_window = window
                formats(f"windows[{i}][1]", w[1], m.sliding_kv_bytes_per_token)
            else:
                m.more_windows[i - 1].window = window
                formats(f"windows[{i}][1]", w[1], m.more_windows[i - 1].bytes_per_token)
        m.n_more_windows = max(0, len(windows) - 1)
        m.kv_block_tokens = _int(f, "model.kv_block_tokens", self.kv_block_tokens, 0, 2 ** 32 - 1)
        for name in ("state_bytes_per_seq", "activation_fixed_bytes", "activation_per_token_bytes",
                     "activation_per_token_sq_bytes"):
            setattr(m, name, _u64(f, f"model.{name}", getattr(self, name)))
        m.normal_kv = _KV_UNSET if self.normal_kv is None else _enum(f, "model.normal_kv", self.normal_kv, KvFormat)
        m.compact_kv = _enum(f, "model.compact_kv", self.compact_kv, KvFormat)
        anchors = self.anchors
        if not isinstance(anchors, (tuple, list)) or len(anchors) > _ffi.MAX_ACTIVATION_ANCHORS:
            raise ArgumentError(f"{f}: model.anchors must be at most {_ffi.MAX_ACTIVATION_ANCHORS} "
                                "(tokens, peak_bytes) pairs", f)
        for i in range(_ffi.MAX_ACTIVATION_ANCHORS):
            m.anchors[i].tokens = m.anchors[i].peak_bytes = 0
        for i, a in enumerate(anchors):
            if not isinstance(a, (tuple, list)) or len(a) != 2:
                raise ArgumentError(f"{f}: model.anchors[{i}] must be a (tokens, peak_bytes) pair", f)
            m.anchors[i].tokens = _u64(f, f"model.anchors[{i}].tokens", a[0])
            m.anchors[i].peak_bytes = _u64(f, f"model.anchors[{i}].peak_bytes", a[1])
        m.n_anchors = len(anchors)
        return m


def _text_bytes(function: str, name: str, text: Any) -> bytes:
    if isinstance(text, str):
        return text.encode("utf-8")
    if isinstance(text, (bytes, bytearray)):
        return bytes(text)
    raise ArgumentTypeError(f"{function}: {name} must be str or bytes, not {type(text).__name__}", function)


def _model_c(function: str, model: Model) -> _ffi.pnmem_model:
    if not isinstance(model, Model):
        raise ArgumentTypeError(f"{function}: model must be a pnmem.Model (Model.from_hf_config(path), ...; "
                                f"Model.reference() for the seed's), not {type(model).__name__}", function)
    return model._to_c(function)


# --- Answers ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Answer:
    """An admission's answer (pnmem_admit_answer)."""
    status: Status
    fit_tokens: int
    reason: Reason  # a str too (the C string), should a newer library give one this package does not know
    level: Level
    die: int
    window: int
    need_bytes: int
    limit_bytes: int
    pending_bytes: int
    _c: Any = field(default=None, repr=False, compare=False)

    @property
    def admitted(self) -> bool:
        """The request may start (fit_tokens of it): ADMITTED, CAPPED or FAIL_OPEN."""
        return self.status != Status.DENIED

    def explain(self) -> str:
        """pnmem_explain: this answer in one line, e.g. "capped (host_budget): 4962 tokens fit: the prompt needs ..."."""
        return explain(self)

    def retry_after(self) -> "RetryHint":
        """pnmem_retry_after_ms for this answer: when asking again may get more (see retry_after)."""
        return retry_after(self)


def _answer(a: _ffi.pnmem_admit_answer) -> Answer:
    keep = _ffi.pnmem_admit_answer.from_buffer_copy(a)  # the reason's pointer kept: pnmem_explain knows it
    raw = (a.reason or b"").decode("utf-8", "replace")
    try:
        reason: Any = Reason(raw)
    except ValueError:
        reason = raw
    return Answer(status=Status(a.status), fit_tokens=a.fit_tokens, reason=reason, level=Level(a.level), die=a.die,
                  window=a.window, need_bytes=a.need_bytes, limit_bytes=a.limit_bytes, pending_bytes=a.pending_bytes,
                  _c=keep)


def explain(answer: Answer) -> str:
    """pnmem_explain: one line in the words of what was asked, e.g. "capped (host_budget): 4962 tokens fit: the
    prompt needs 7.06 GiB (...), the host has 2.80 GiB (...) above its reserve, level ok"."""
    f = "pnmem_explain"
    if not isinstance(answer, Answer) or answer._c is None:
        raise ArgumentTypeError(f"{f}: answer must be a pnmem.Answer, not {type(answer).__name__}", f)
    _begin()
    n = _lib.pnmem_explain(ctypes.byref(answer._c), None, 0)
    if n < 0:
        raise _fail(f, "failed")
    buf = ctypes.create_string_buffer(n + 1)
    if _lib.pnmem_explain(ctypes.byref(answer._c), buf, len(buf)) < 0:
        raise _fail(f, "failed")
    return buf.value.decode("utf-8", "replace")


@dataclass(frozen=True)
class RetryHint:
    """When asking again may get more (pnmem_retry_after_ms): after_ms >= 0, and what the estimate rests on:
    "psi_decay", "host_recovery", "pending_expiry", "die_retiring", "level_dwell", "no_recovery" and
    "memory_falling" (nothing pnmem sees is coming back: a guess from how long the pressure has held),
    "none" (after_ms 0: waiting does not improve the answer) or "never_fits" (after_ms 0: more than the box
    or die could ever give). A hint, not a promise: the retry is a new decision."""
    after_ms: int
    basis: str

    @property
    def guess(self) -> bool:
        """Only a guess (pnmem_retry_basis_is_guess): it rests on how long the pressure has held."""
        return bool(_lib.pnmem_retry_basis_is_guess(self.basis.encode("ascii", "replace")))

    @property
    def seconds(self) -> int:
        """after_ms rounded up to whole seconds, as pnmem_retry_after_seconds rounds: an HTTP Retry-After
        header's value (a 500 ms hint is 1 s, never 0)."""
        return int(_lib.pnmem_retry_after_seconds(max(-(2 ** 63), min(int(self.after_ms), 2 ** 63 - 1))))


def retry_after(answer: Answer) -> RetryHint:
    """pnmem_retry_after_ms: a suggested wait before asking again, for an answer denied or capped for
    memory (a 503's Retry-After), from what pnmem sees now: the stall's decay, memory coming back, the
    reservations' expiry, the level's dwell. From the next sample to 60 s; 0 ("none") for an answer a
    wait does not improve (admitted, fail open, capped to its own window, a bad request)."""
    f = "pnmem_retry_after_ms"
    if not isinstance(answer, Answer) or answer._c is None:
        raise ArgumentTypeError(f"{f}: answer must be a pnmem.Answer, not {type(answer).__name__}", f)
    basis = ctypes.c_char_p()
    _begin()
    ms = _lib.pnmem_retry_after_ms(ctypes.byref(answer._c), ctypes.byref(basis))
    if ms < 0:
        raise _fail(f, "failed")
    return RetryHint(after_ms=int(ms), basis=(basis.value or b"none").decode("ascii", "replace"))


def _tokens(function: str, n_tokens: Any) -> int:
    return _int(function, "n_tokens", n_tokens, 0, INT32_MAX)


def _request_c(function: str, n_tokens: Any, encoder_items: Any) -> _ffi.pnmem_request:
    q = _ffi.pnmem_request()
    if _lib.pnmem_request_init_sized(ctypes.byref(q), ctypes.sizeof(q)) != 0:
        raise Error(f"{function}: pnmem_request_init_sized refused this package's struct", function)
    q.n_tokens = _tokens(function, n_tokens)
    q.encoder_items = _int(function, "encoder_items", encoder_items, 0, INT32_MAX)
    return q


def admit(n_tokens: int, model: Model, encoder_items: int = 0) -> Answer:
    """pnmem_admit: may a request of n_tokens prompt tokens of `model` start now?
    encoder_items: images the request carries (their cross-attention KV, for models that have it)."""
    f = "pnmem_admit" if encoder_items == 0 else "pnmem_admit_request"
    n = _tokens(f, n_tokens)
    m = _model_c(f, model)
    out = _ffi.pnmem_admit_answer()
    if encoder_items == 0:
        _begin()
        if _lib.pnmem_admit(ctypes.byref(m), n, ctypes.byref(out)) != 0:
            raise _fail(f, "model refused")
        return _answer(out)
    q = _request_c(f, n, encoder_items)
    _begin()
    if _lib.pnmem_admit_request(ctypes.byref(m), ctypes.byref(q), ctypes.byref(out), None) != 0:
        raise _fail(f, "model refused")
    return _answer(out)


def admit_wait(n_tokens: int, model: Model, timeout: Optional[float]) -> Answer:
    """pnmem_admit_wait: admit(), except that a request needing no host bytes refused at the reserve under the
    zero-cost rule hold (Model.zero_cost, PN_ZERO_COST) waits up to `timeout` seconds (None: no limit) for the
    first sample that lets it start; past it, the refusal as it then stands. Blocks the calling thread (the GIL
    is released)."""
    f = "pnmem_admit_wait"
    n = _tokens(f, n_tokens)
    m = _model_c(f, model)
    ms = _seconds_to_ms(f, "timeout", timeout)
    out = _ffi.pnmem_admit_answer()
    _begin()
    if _lib.pnmem_admit_wait(ctypes.byref(m), n, ms, ctypes.byref(out)) != 0:
        raise _fail(f, "model refused")
    return _answer(out)


class Reservation:
    """Memory admitted and promised until settled (allocated) or cancelled (pnmem_reservation).

    As a context manager: settled when the block ends normally, cancelled when it raises. Check
    `granted` inside. settle() and cancel() act once; later calls, and calls on a reservation that
    holds nothing (handle 0), do nothing."""

    def __init__(self, answer: Answer, handle: int, granted: bool) -> None:
        self.answer = answer
        self.handle = handle
        self.granted = granted
        self._done = handle == 0
        self._lock = threading.Lock()

    def _finish(self, fn: Callable[[int], None]) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
        fn(self.handle)

    def settle(self) -> None:
        """pnmem_reservation_settle: the memory is allocated; the next sample sees it."""
        self._finish(_lib.pnmem_reservation_settle)

    def cancel(self) -> None:
        """pnmem_reservation_cancel: the allocation will not happen; the bytes come back now."""
        self._finish(_lib.pnmem_reservation_cancel)

    @property
    def done(self) -> bool:
        return self._done

    def __enter__(self) -> "Reservation":
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is None:
            self.settle()
        else:
            self.cancel()

    def __repr__(self) -> str:
        return f"Reservation(handle={self.handle}, granted={self.granted}, done={self._done}, answer={self.answer!r})"


def admit_reserved(n_tokens: int, model: Model, encoder_items: int = 0) -> Reservation:
    """pnmem_admit_reserved: admit() that also promises the request's host bytes until settled or
    cancelled (so requests admitted between two samples do not all spend the same memory)."""
    f = "pnmem_admit_reserved" if encoder_items == 0 else "pnmem_admit_request"
    n = _tokens(f, n_tokens)
    m = _model_c(f, model)
    out = _ffi.pnmem_admit_answer()
    r = ctypes.c_uint64(0)
    q = _request_c(f, n, encoder_items)
    _begin()
    if _lib.pnmem_admit_request(ctypes.byref(m), ctypes.byref(q), ctypes.byref(out), ctypes.byref(r)) != 0:
        raise _fail(f, "model refused")
    a = _answer(out)
    return Reservation(a, r.value, a.status != Status.DENIED)


def admit_bytes(n_bytes: int, ttl: Optional[float] = None) -> Reservation:
    """pnmem_reserve_bytes: host bytes about to be allocated besides a request's own (a prompt-cache
    entry, swapped KV). granted when ADMITTED (reserved) or FAIL_OPEN (no watcher: nothing known);
    CAPPED: answer.limit_bytes fit now; DENIED: inside the host reserve. ttl (seconds, None: never):
    a reservation neither settled nor cancelled by then stops counting."""
    f = "pnmem_reserve_bytes"
    b = _u64(f, "n_bytes", n_bytes)
    ttl_ms = 0 if ttl is None else _seconds_to_ms(f, "ttl", ttl)
    if ttl is not None and ttl_ms == 0:
        raise ArgumentError(f"{f}: ttl is {ttl}: must be above 0 seconds (None: never expires)", f)
    out = _ffi.pnmem_admit_answer()
    r = ctypes.c_uint64(0)
    _begin()
    if _lib.pnmem_reserve_bytes(b, ttl_ms, ctypes.byref(out), ctypes.byref(r)) != 0:
        raise _fail(f, "failed")
    a = _answer(out)
    return Reservation(a, r.value, a.status in (Status.ADMITTED, Status.FAIL_OPEN))


def _ttl_ms(f: str, ttl: Optional[float]) -> int:
    ttl_ms = 0 if ttl is None else _seconds_to_ms(f, "ttl", ttl)
    if ttl is not None and ttl_ms == 0:
        raise ArgumentError(f"{f}: ttl is {ttl}: must be above 0 seconds (None: never expires)", f)
    return ttl_ms


def reserve_die_bytes(die: int, n_bytes: int, ttl: Optional[float] = None) -> Reservation:
    """pnmem_reserve_die_bytes: bytes about to be allocated on a die (a KV pool, a buffer). granted when
    ADMITTED (reserved on that die, counted until settled and a sample of the die has them, or cancelled)
    or FAIL_OPEN (no watcher); DENIED: answer.limit_bytes fit (the die's free VRAM less the die reserve and
    what is promised there: answer.pending_bytes). ttl as admit_bytes."""
    f = "pnmem_reserve_die_bytes"
    d = _int(f, "die", die, 0, _ffi.MAX_DIES - 1)
    b = _u64(f, "n_bytes", n_bytes)
    ttl_ms = _ttl_ms(f, ttl)
    out = _ffi.pnmem_admit_answer()
    r = ctypes.c_uint64(0)
    _begin()
    if _lib.pnmem_reserve_die_bytes(d, b, ttl_ms, ctypes.byref(out), ctypes.byref(r)) != 0:
        raise _fail(f, "failed")
    a = _answer(out)
    return Reservation(a, r.value, a.status in (Status.ADMITTED, Status.FAIL_OPEN))


def set_die_uuid(die: int, uuid: str) -> None:
    """pnmem_set_die_uuid: names this process's die `die` by its GPU's UUID ("GPU-..." as nvidia-smi -L
    prints it; torch.cuda.get_device_properties(die).uuid gives it without the prefix). Its reservations
    are then counted in the box ledger with every process's on the same GPU, whatever index each gives it."""
    f = "pnmem_set_die_uuid"
    d = _int(f, "die", die, 0, _ffi.MAX_DIES - 1)
    if not isinstance(uuid, str):
        raise ArgumentTypeError(f"{f}: uuid is {type(uuid).__name__}: must be str", f)
    _begin()
    if _lib.pnmem_set_die_uuid(d, uuid.encode("utf-8", "replace")) != 0:
        raise _fail(f, f"die {d}: uuid {uuid!r} refused")


def check_bytes(n_bytes: int, die: int = -1) -> Answer:
    """pnmem_check_bytes: may n_bytes be allocated now? What admit_bytes (die -1, the host: pending
    reservations counted) or a model load on `die` (free VRAM less the die reserve) would answer, with
    nothing reserved: for a refusal the engine reports with pnmem's reason."""
    f = "pnmem_check_bytes"
    b = _u64(f, "n_bytes", n_bytes)
    d = _int(f, "die", die, -1, _ffi.MAX_DIES - 1)
    out = _ffi.pnmem_admit_answer()
    _begin()
    if _lib.pnmem_check_bytes(b, d, ctypes.byref(out)) != 0:
        raise _fail(f, "failed")
    return _answer(out)


_METRICS_WHAT = {"box": 1, "counters": 2, "all": 3}


def metrics_text(what: str = "all") -> str:
    """pnmem_metrics_text: pnmem's Prometheus text exposition (format 0.0.4). "box": the snapshot's
    families, as `pnmem metrics` prints them; "counters": what this library's calls counted, with the
    gauges of the engine's load (set_fleet_load, the gates) and of the box ledger this process joined;
    "all": both."""
    f = "pnmem_metrics_text"
    if not isinstance(what, str) or what not in _METRICS_WHAT:
        raise ArgumentError(f"{f}: what must be one of box, counters, all, not {what!r}", f)
    bits = _METRICS_WHAT[what]
    size = 65536
    while True:
        buf = ctypes.create_string_buffer(size)
        _begin()
        n = _lib.pnmem_metrics_text(buf, size, bits)
        if n < 0:
            raise _fail(f, "failed")
        if n < size:
            return buf.raw[:n].decode("utf-8", "replace")
        size = n + 4096


def pending_bytes() -> int:
    """pnmem_pending_bytes: bytes reserved and not yet seen by a sample, expired ones left out."""
    return int(_lib.pnmem_pending_bytes())


# --- Model loads -----------------------------------------------------------------------------

def _load_c(f: str, weights_bytes: Any, kv_bytes: Any, die: Any) -> _ffi.pnmem_model_load:
    load = _ffi.pnmem_model_load()
    if _lib.pnmem_model_load_init_sized(ctypes.byref(load), ctypes.sizeof(load)) != 0:
        raise Error("pnmem_model_load_init_sized: refused this package's struct", "pnmem_model_load_init_sized")
    load.weights_bytes = _u64(f, "weights_bytes", weights_bytes)
    load.kv_bytes = _u64(f, "kv_bytes", kv_bytes)
    load.die = _int(f, "die", die, -1, _ffi.MAX_DIES - 1)
    return load


def _load_check(f: str, fn: Any, load: _ffi.pnmem_model_load) -> Answer:
    out = _ffi.pnmem_admit_answer()
    _begin()
    if fn(ctypes.byref(load), ctypes.byref(out)) != 0:
        raise _fail(f, "load refused")
    return _answer(out)


def admit_model_load(weights_bytes: int, kv_bytes: int = 0, die: int = -1) -> Answer:
    """pnmem_admit_model_load: a whole model (weights + KV at max context + the die scratch) onto one die
    (-1: the measured die with the most free VRAM)."""
    f = "pnmem_admit_model_load"
    return _load_check(f, _lib.pnmem_admit_model_load, _load_c(f, weights_bytes, kv_bytes, die))


def admit_model_load_die(weights_bytes: int, kv_bytes: int, die: int) -> Answer:
    """pnmem_admit_model_load_die: one die's slice of a model split over several dies."""
    f = "pnmem_admit_model_load_die"
    return _load_check(f, _lib.pnmem_admit_model_load_die, _load_c(f, weights_bytes, kv_bytes, die))


def _load_reserve(f: str, fn: Any, load: _ffi.pnmem_model_load) -> Reservation:
    out = _ffi.pnmem_admit_answer()
    r = ctypes.c_uint64(0)
    _begin()
    if fn(ctypes.byref(load), ctypes.byref(out), ctypes.byref(r)) != 0:
        raise _fail(f, "load refused")
    a = _answer(out)
    return Reservation(a, r.value, a.status in (Status.ADMITTED, Status.FAIL_OPEN))


def reserve_model_load(weights_bytes: int, kv_bytes: int = 0, die: int = -1) -> Reservation:
    """pnmem_admit_model_load_reserved: admit_model_load, and when ADMITTED the need reserved on the die
    it chose (answer.die) until settled (the weights are on it) or cancelled. Two loads at once, in this
    process or another of the box ledger on the same GPU, are never both given the same VRAM."""
    f = "pnmem_admit_model_load_reserved"
    return _load_reserve(f, _lib.pnmem_admit_model_load_reserved, _load_c(f, weights_bytes, kv_bytes, die))


def reserve_model_load_die(weights_bytes: int, kv_bytes: int, die: int) -> Reservation:
    """pnmem_admit_model_load_die_reserved: admit_model_load_die, and the slice reserved on that die."""
    f = "pnmem_admit_model_load_die_reserved"
    return _load_reserve(f, _lib.pnmem_admit_model_load_die_reserved, _load_c(f, weights_bytes, kv_bytes, die))


def admit_load_spike() -> Answer:
    """pnmem_admit_load_spike: the host staging burst of a weight upload, before it starts."""
    f = "pnmem_admit_load_spike"
    out = _ffi.pnmem_admit_answer()
    _begin()
    if _lib.pnmem_admit_load_spike(ctypes.byref(out)) != 0:
        raise _fail(f, "failed")
    return _answer(out)


# --- The ladder ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Plan:
    """The degradation ladder's plan for a level (pnmem_ladder_plan)."""
    level: Level
    max_slots: int
    force_kv_q4: bool
    kv_evict: bool
    prefill_window: int
    degraded: bool
    note: str
    _c: Any = field(default=None, repr=False, compare=False)


def _config_args(f: str, max_slots: int, prefill_window: int, kv_q4: bool) -> tuple[int, int, bool]:
    """An operator config's arguments (plan, plan_now), checked and as C takes them."""
    s = _int(f, "max_slots", max_slots, INT32_MIN, INT32_MAX)
    w = _int(f, "prefill_window", prefill_window, INT32_MIN, INT32_MAX)
    if not isinstance(kv_q4, (bool, int)):
        raise ArgumentTypeError(f"{f}: kv_q4 must be a bool", f)
    return s, w, bool(kv_q4)


def _plan_of(f: str, p: _ffi.pnmem_ladder_plan) -> Plan:
    """A C plan as a Plan; its "error:" note (a failure inside pnmem) raised."""
    note = (p.note or b"").decode("utf-8", "replace")
    if note.startswith("error:"):
        raise _fail(f, note)
    return Plan(level=Level(p.level), max_slots=p.max_slots, force_kv_q4=bool(p.force_kv_q4),
                kv_evict=bool(p.kv_evict), prefill_window=p.prefill_window, degraded=bool(p.degraded), note=note,
                _c=p)


def plan(level: Any, max_slots: int = 1, prefill_window: int = 0, kv_q4: bool = False) -> Plan:
    """pnmem_plan_ladder: decode slots, prefill window, forced 4-bit KV and eviction for a level and the
    operator's config (max_slots below 1 is 1; prefill_window 0: no clamp)."""
    f = "pnmem_plan_ladder"
    lv = _enum(f, "level", level, Level)
    s, w, q4 = _config_args(f, max_slots, prefill_window, kv_q4)
    _begin()
    return _plan_of(f, _lib.pnmem_plan_ladder(int(lv), s, w, q4))


def plan_now(max_slots: int = 1, prefill_window: int = 0, kv_q4: bool = False) -> Plan:
    """pnmem_plan_ladder_now: the plan for the latest snapshot. As plan() at its level, except that the
    evict rung (kv_evict) follows the memory levels (host bytes, dies), not PSI: a box-wide stall halves
    slots and the window but does not ask the engine to drop KV, unless PN_EVICT_ON_PSI=1."""
    f = "pnmem_plan_ladder_now"
    s, w, q4 = _config_args(f, max_slots, prefill_window, kv_q4)
    _begin()
    return _plan_of(f, _lib.pnmem_plan_ladder_now(s, w, q4))


@dataclass(frozen=True)
class KvAllocation:
    """The format and bytes of a KV cache allocated now (pnmem_kv_allocation)."""
    format: KvFormat
    bytes: int


def kv_allocation(plan: Plan, tokens: int, model: Model) -> KvAllocation:
    """pnmem_kv_allocation_for: the format a cache allocated now must be in (rung 4a) and its KV bytes
    for `tokens` tokens of one sequence."""
    f = "pnmem_kv_allocation_for"
    if not isinstance(plan, Plan) or plan._c is None:
        raise ArgumentTypeError(f"{f}: plan must be a pnmem.Plan, not {type(plan).__name__}", f)
    t = _u64(f, "tokens", tokens)
    m = _model_c(f, model)
    out = _ffi.pnmem_kv_allocation()
    _begin()
    if _lib.pnmem_kv_allocation_for(ctypes.byref(plan._c), ctypes.byref(m), t, ctypes.byref(out)) != 0:
        raise _fail(f, "model refused")
    return KvAllocation(KvFormat(out.format), out.bytes)


# --- Policy and budget -----------------------------------------------------------------------

@dataclass(frozen=True)
class Policy:
    """The policy in force (pnmem_policy; percentages in basis points, 1500 = 15.00 %)."""
    host_reserve_min_bytes: int
    host_reserve_bp: int
    psi_full_reject_bp: int
    psi_some_tight_bp: int
    psi_full_window_ms: int
    die_tight_divisor: int
    die_watch_divisor: int
    die_reserve_bytes: int
    die_scratch_bytes: int
    load_spike_bytes: int
    ladder_disabled: bool
    host_total_bytes: int
    host_reserve_bytes: int


def policy() -> Policy:
    """pnmem_policy_get: the policy the PN_* environment set, and the reserve for the latest snapshot."""
    out = _ffi.pnmem_policy()
    _begin()
    if _lib.pnmem_policy_get(ctypes.byref(out)) != 0:
        raise _fail("pnmem_policy_get", "failed")
    return Policy(**{name: (bool(getattr(out, name)) if name == "ladder_disabled" else getattr(out, name))
                     for name, _ in _ffi.pnmem_policy._fields_})


@dataclass(frozen=True)
class Budget:
    """The host's budget now, as admission sees it (pnmem_budget)."""
    total_bytes: int
    avail_bytes: int
    reserve_bytes: int
    headroom_bytes: int
    pending_bytes: int
    unpromised_bytes: int
    level: Level
    seq: int


def budget() -> Budget:
    """pnmem_host_budget."""
    out = _ffi.pnmem_budget()
    _begin()
    if _lib.pnmem_host_budget(ctypes.byref(out)) != 0:
        raise _fail("pnmem_host_budget", "failed")
    return Budget(total_bytes=out.total_bytes, avail_bytes=out.avail_bytes, reserve_bytes=out.reserve_bytes,
                  headroom_bytes=out.headroom_bytes, pending_bytes=out.pending_bytes,
                  unpromised_bytes=out.unpromised_bytes, level=Level(out.level), seq=out.seq)


@dataclass(frozen=True)
class Room:
    """pnmem_host_room: what to free, or what may be taken, for the host byte bands to sit at a level.

    Measured on what every answer uses: MemAvailable less the pending bytes plus the credited ones.
    ``free_bytes(level)`` is what to free to bring the bands back to ``level`` (0 when there already),
    ``take_bytes(level)`` what may be taken with them staying at ``level`` or better (0 when not there).
    Host bytes only: a PSI stall or a die holds the level up on its own. ``sampled`` False (no watcher
    running, or no host numbers): every figure is 0.
    """
    sampled: bool
    level: Level
    avail_bytes: int
    reserve_bytes: int
    pending_bytes: int
    credited_bytes: int
    take: Tuple[int, int, int, int]
    give_back: Tuple[int, int, int, int]
    seq: int

    def take_bytes(self, level: Level) -> int:
        """Bytes that may be taken with the host bands still at ``level`` or better."""
        return self.take[int(level)]

    def free_bytes(self, level: Level) -> int:
        """Bytes to free to bring the host bands back to ``level`` (0 when there already)."""
        return self.give_back[int(level)]


def room() -> Room:
    """pnmem_host_room: the room now. Shedding a cache, one call per decision::

        r = pnmem.room()
        freed = cache.evict_at_least(r.free_bytes(pnmem.Level.WATCH))
        pnmem.credit_freed(freed)           # the next answer is at WATCH, no sample needed
    """
    out = _ffi.pnmem_room()
    _begin()
    if _lib.pnmem_room_init_sized(ctypes.byref(out), ctypes.sizeof(out)) != 0 or \
            _lib.pnmem_host_room(ctypes.byref(out)) != 0:
        raise _fail("pnmem_host_room", "failed")
    return Room(sampled=bool(out.sampled), level=Level(out.level), avail_bytes=out.avail_bytes,
                reserve_bytes=out.reserve_bytes, pending_bytes=out.pending_bytes, credited_bytes=out.credited_bytes,
                take=(out.take_bytes[0], out.take_bytes[1], out.take_bytes[2], out.take_bytes[3]),
                give_back=(out.free_bytes[0], out.free_bytes[1], out.free_bytes[2], out.free_bytes[3]),
                seq=out.seq)


def credit_freed(nbytes: int) -> None:
    """pnmem_credit_freed: bytes just freed (returned to the kernel) count as available in every answer
    until a sample that began after this call sees them. Accepts any integer type (``__index__``)."""
    n = _u64("credit_freed", "nbytes", nbytes)
    _begin()
    if _lib.pnmem_credit_freed(n) != 0:
        raise _fail("pnmem_credit_freed", "failed")


# --- Making room, and shedding ---------------------------------------------------------------

def _freed_of(f: str, fn: Callable[[int], int], want: int) -> int:
    """fn(want) as the bytes a C free callback returns: an integer in [0, 2^64-1]."""
    n = fn(want)
    try:
        v = operator.index(n)
    except TypeError:
        raise ArgumentTypeError(f"{f}: the callback returned {type(n).__name__}: must be an int (bytes freed)", f) from None
    if v < 0:
        raise ArgumentError(f"{f}: the callback returned {v}: bytes freed cannot be negative", f)
    return min(v, (1 << 64) - 1)


def make_room(n_bytes: int, free_older: Callable[[int], int], ttl: Optional[float] = None) -> Reservation:
    """pnmem_make_room: a cache that keeps its newest entries is about to grow by n_bytes. If the insert
    fits with the host bands at WATCH or better it is reserved at once; else free_older(shortfall) is
    called (on this thread) to drop the oldest entries holding at least shortfall bytes, and returns the
    bytes it freed (0: it dropped nothing); they are credited (do not credit them again) and the insert
    asked again. granted when ADMITTED (reserved: insert, then settle()) or FAIL_OPEN. What free_older
    raises is raised here, after the C call, with nothing reserved. ttl as admit_bytes."""
    f = "pnmem_make_room"
    b = _u64(f, "n_bytes", n_bytes)
    if not callable(free_older):
        raise ArgumentTypeError(f"{f}: free_older is {type(free_older).__name__}: must be callable", f)
    ttl_ms = _ttl_ms(f, ttl)
    raised: list[BaseException] = []

    def call(want: int, _user: Any) -> int:
        try:
            return _freed_of(f, free_older, int(want))
        except BaseException as e:  # never into C: raised after the call
            raised.append(e)
            return 0

    thunk = _ffi.FREE_FN(call)
    out = _ffi.pnmem_admit_answer()
    r = ctypes.c_uint64(0)
    _begin()
    if _lib.pnmem_make_room(b, ttl_ms, thunk, None, ctypes.byref(out), ctypes.byref(r)) != 0:
        raise _fail(f, "failed")
    a = _answer(out)
    res = Reservation(a, r.value, a.status in (Status.ADMITTED, Status.FAIL_OPEN))
    if raised:
        res.cancel()
        raise raised[0]
    return res


def shed_bytes() -> int:
    """pnmem_shed_bytes: the bytes to free now for the host bands to be back at WATCH (0 at WATCH or
    better, not sampled, or no watcher running), on the ledger's budget."""
    n = ctypes.c_uint64(0)
    _begin()
    if _lib.pnmem_shed_bytes(ctypes.byref(n)) != 0:
        raise _fail("pnmem_shed_bytes", "failed")
    return n.value


def _host_load(f: str, fixed_bytes: int, bytes_per_token: int, wanted_tokens: int, least_tokens: int,
               ttl_ms: int, reserve: bool) -> Tuple[Answer, int]:
    fb = _u64(f, "fixed_bytes", fixed_bytes)
    pt = _u64(f, "bytes_per_token", bytes_per_token)
    w = _int(f, "wanted_tokens", wanted_tokens, 0, INT32_MAX)
    least = _int(f, "least_tokens", least_tokens, 0, INT32_MAX)
    if least > w:
        raise ArgumentError(f"{f}: least_tokens is {least}: more than wanted_tokens ({w})", f)
    out = _ffi.pnmem_admit_answer()
    r = ctypes.c_uint64(0)
    _begin()
    if _lib.pnmem_admit_host_load(fb, pt, w, least, ttl_ms, ctypes.byref(out), ctypes.byref(r) if reserve else None) != 0:
        raise _fail(f, "failed")
    return _answer(out), r.value


def admit_host_load(fixed_bytes: int, bytes_per_token: int, wanted_tokens: int, least_tokens: int = 1) -> Answer:
    """pnmem_admit_host_load: may a load into host memory start (fixed bytes plus KV per context token), and
    with how much context, the host at WATCH or better after it? ADMITTED (fit_tokens = wanted), CAPPED
    (start it with answer.fit_tokens of context, at least least_tokens) or DENIED. Reserves nothing."""
    a, _ = _host_load("pnmem_admit_host_load", fixed_bytes, bytes_per_token, wanted_tokens, least_tokens, 0, False)
    return a


def reserve_host_load(fixed_bytes: int, bytes_per_token: int, wanted_tokens: int, least_tokens: int = 1,
                      ttl: Optional[float] = None) -> Reservation:
    """admit_host_load, and when ADMITTED or CAPPED the load's bytes at answer.fit_tokens of context
    reserved until settle() (loaded) or cancel(). granted then (or FAIL_OPEN). ttl as admit_bytes."""
    f = "pnmem_admit_host_load"
    a, handle = _host_load(f, fixed_bytes, bytes_per_token, wanted_tokens, least_tokens, _ttl_ms(f, ttl), True)
    return Reservation(a, handle, a.status in (Status.ADMITTED, Status.CAPPED, Status.FAIL_OPEN))


def set_fleet_load(queued_requests: int = 0, running_requests: int = 0, slot_capacity: int = 0,
                   kv_used_bytes: int = 0, kv_capacity_bytes: int = 0) -> None:
    """pnmem_set_fleet_load: the engine's numbers for the gateway's gauges (pnmem_queued_requests,
    pnmem_running_requests, pnmem_kv_cache_usage_ratio, pnmem_slot_capacity in metrics_text), to which
    every Gate alive adds its queue and slots. Each call replaces the one before (0: unknown capacity)."""
    f = "pnmem_set_fleet_load"
    args = [_u64(f, n, v) for n, v in (("queued_requests", queued_requests), ("running_requests", running_requests),
                                         ("slot_capacity", slot_capacity), ("kv_used_bytes", kv_used_bytes),
                                         ("kv_capacity_bytes", kv_capacity_bytes))]
    _begin()
    if _lib.pnmem_set_fleet_load(*args) != 0:
        raise _fail(f, "failed")


_shed_lock = threading.Lock()
_shed_thunk: Any = None


def set_shed_hook(hook: Optional[Callable[[int], int]]) -> None:
    """pnmem_set_shed_hook: hook(bytes_wanted) is called on the watcher's poll thread after every sample
    on which the host bands are at TIGHT or worse (on the ledger's budget), so a cache is shed while the
    engine's own loop is busy. It drops its oldest entries and returns the bytes it freed, which pnmem
    credits. One hook per process: a second call replaces the first, None removes it; once this returns
    the previous hook is not running on another thread. An exception it raises is logged (nothing is
    credited) and the watcher carries on."""
    global _shed_thunk
    f = "pnmem_set_shed_hook"
    if hook is not None and not callable(hook):
        raise ArgumentTypeError(f"{f}: hook is {type(hook).__name__}: must be callable or None", f)
    thunk: Any = None
    if hook is not None:
        fn: Callable[[int], int] = hook

        def call(want: int, _user: Any) -> int:
            _tls.callback_depth = getattr(_tls, "callback_depth", 0) + 1
            try:
                return _freed_of(f, fn, int(want))
            except BaseException:  # never into C: logged, nothing credited
                try:
                    _log.exception("pnmem: shed hook %r raised", hook)
                except BaseException:
                    pass
                return 0
            finally:
                _tls.callback_depth -= 1

        thunk = _ffi.FREE_FN(call)
    with _shed_lock:
        old, _shed_thunk = _shed_thunk, thunk
        _begin()
        if _lib.pnmem_set_shed_hook(thunk if thunk is not None else _ffi.FREE_FN(0), None) != 0:  # 0: NULL, no hook
            _shed_thunk = old
            raise _fail(f, "failed")
    if old is not None and _in_callback():
        _retired_thunks.append(old)  # replaced from inside a callback: the C call may still run it


# --- The gate --------------------------------------------------------------------------------

_GATE_SLICE_MS = 100  # a main-thread wait's C calls last at most this long (Gate.acquire)
_GATE_ACQUIRED = int(GateStatus.ACQUIRED)
_GATE_TIMED_OUT = int(GateStatus.TIMED_OUT)


def _run_signal_handlers() -> None:
    """Does nothing: calling it lets the interpreter run the handlers of signals that came during a
    C call (Python runs them when a function is entered), at a point the caller chose."""


class Gate:
    """The back-pressure gate in front of decode slots (pnmem_gate): Gate(max_slots, max_waiters) or
    Gate.for_model(model, max_waiters). Start the watcher first: the gate follows its samples.

        with gate:                          # waits for a slot; GateRefused (OVERLOADED...) if none
            run_request()
        st = gate.acquire(timeout=0.5)      # or by hand: GateStatus; each ACQUIRED needs one release()

    acquire waits with the GIL released (other Python threads run); on the main thread it waits in
    slices of 0.1 s, so Ctrl-C (KeyboardInterrupt) interrupts it (see acquire).
    close() (or the garbage collector) destroys it: not while a thread waits on it."""

    def __init__(self, max_slots: int = 1, max_waiters: int = 0) -> None:
        f = "pnmem_gate_create"
        s = _int(f, "max_slots", max_slots, INT32_MIN, INT32_MAX)
        w = _int(f, "max_waiters", max_waiters, INT32_MIN, INT32_MAX)
        self._init(f, lambda: _lib.pnmem_gate_create(s, w), None)

    def _init(self, f: str, create: Callable[[], Any], model: Optional[Model]) -> None:
        self._handle = None
        self._lock = threading.Lock()
        self._busy = 0
        self.model = model
        _begin()
        h = create()
        if not h:
            raise _fail(f, "no gate")
        self._handle = h

    @classmethod
    def for_model(cls, model: Model, max_waiters: int = 0) -> "Gate":
        """pnmem_gate_create_for: model.max_slots slots; a hold's release re-checks admission of this
        model's requests (acquire(tokens=n), notify_denied)."""
        f = "pnmem_gate_create_for"
        if not isinstance(model, Model):
            raise ArgumentTypeError(f"{f}: model must be a pnmem.Model, not {type(model).__name__}", f)
        m = model._to_c(f)
        w = _int(f, "max_waiters", max_waiters, INT32_MIN, INT32_MAX)
        g = cls.__new__(cls)
        g._init(f, lambda: _lib.pnmem_gate_create_for(ctypes.byref(m), w), model)
        return g

    create_for = for_model

    def _enter(self, f: str) -> Any:
        with self._lock:
            if self._handle is None:
                raise Error(f"{f}: the gate is closed", f)
            self._busy += 1
            return self._handle

    def _leave(self) -> None:
        with self._lock:
            self._busy -= 1

    def acquire(self, timeout: Optional[float] = None, tokens: Optional[int] = None) -> GateStatus:
        """Waits up to `timeout` seconds (None: indefinitely; 0: no wait) for a slot. With tokens (a
        request of that many tokens of the gate's model) a hold ends as soon as that request would be
        admitted. Returns ACQUIRED, OVERLOADED (CRITICAL: fail the request now, "retry"), TIMED_OUT or
        QUEUE_FULL.

        Interrupting it: Python runs signal handlers on the main thread only, and never during a C call,
        so on the main thread a wait longer than 0.1 s is a series of C waits of at most 0.1 s each
        (pnmem_c.h has no way to cancel a waiter): Ctrl-C's KeyboardInterrupt, or any exception a signal
        handler raises, comes out of acquire within about 0.1 s. It leaves the gate as it was: the
        timed-out C wait has left the queue, and a slot granted in the same instant is released before
        the exception propagates. The price, on the main thread only: each slice leaves the FIFO queue
        and joins it again at its tail, so acquirers that came meanwhile go first (under a queue that
        never empties it can wait far longer than its turn), the queue may be full when it comes back
        (QUEUE_FULL), and each slice counts in pnmem_gate_waits_total and pnmem_gate_timed_out_total.
        Other threads never see a signal handler run: their wait is one C call, which keeps its place."""
        f = "pnmem_gate_acquire" if tokens is None else "pnmem_gate_acquire_tokens"
        ms = _seconds_to_ms(f, "timeout", timeout)
        n = None if tokens is None else _tokens(f, tokens)
        h = self._enter(f)
        # The C status lands in `got` through map() and the slice assignment, both C code: no signal
        # handler can run between the C call's return and the store (it would lose an ACQUIRED).
        got: list[int] = []
        try:
            _begin()
            call: Callable[[int], int] = (functools.partial(_lib.pnmem_gate_acquire, h) if n is None
                                          else functools.partial(_lib.pnmem_gate_acquire_tokens, h, n))
            if ms <= _GATE_SLICE_MS or threading.current_thread() is not threading.main_thread():
                got[:] = map(call, (ms,))
            else:
                deadline = time.monotonic() + ms / 1000
                wait_ms = _GATE_SLICE_MS
                while True:
                    got[:] = map(call, (wait_ms,))
                    if got[0] != _GATE_TIMED_OUT:
                        break
                    left_ms = math.ceil((deadline - time.monotonic()) * 1000)  # a signal's handler runs here
                    if left_ms <= 0:
                        break
                    wait_ms = min(_GATE_SLICE_MS, left_ms)
            status = GateStatus(got[0])
            _run_signal_handlers()  # one that came during the last C call raises here, inside the try
        except BaseException:
            if got and got[0] == _GATE_ACQUIRED:
                _lib.pnmem_gate_release(h)  # acquired for a caller that will never see it
            raise
        finally:
            with self._lock:  # _leave(), inline: no Python call (where a second signal could raise) before it
                self._busy -= 1
        if status == GateStatus.ERROR:
            raise _fail(f, "failed")
        return status

    def release(self) -> None:
        """pnmem_gate_release: gives back one slot acquired (one more than acquired does nothing)."""
        h = self._enter("pnmem_gate_release")
        try:
            _lib.pnmem_gate_release(h)
        finally:
            self._leave()

    def set_capacity(self, max_slots: int) -> None:
        """pnmem_gate_set_capacity: the slot ceiling now (below 1: 1)."""
        f = "pnmem_gate_set_capacity"
        s = _int(f, "max_slots", max_slots, INT32_MIN, INT32_MAX)
        h = self._enter(f)
        try:
            _lib.pnmem_gate_set_capacity(h, s)
        finally:
            self._leave()

    def notify_pressure(self, level: Any) -> None:
        """pnmem_gate_notify_pressure: a denied admission pushes its level."""
        f = "pnmem_gate_notify_pressure"
        lv = _enum(f, "level", level, Level)
        h = self._enter(f)
        try:
            _lib.pnmem_gate_notify_pressure(h, int(lv))
        finally:
            self._leave()

    def notify_denied(self, answer: Answer, n_tokens: int) -> None:
        """pnmem_gate_notify_denied: a denied admission of n_tokens of the gate's model (others ignored)."""
        f = "pnmem_gate_notify_denied"
        if not isinstance(answer, Answer) or answer._c is None:
            raise ArgumentTypeError(f"{f}: answer must be a pnmem.Answer, not {type(answer).__name__}", f)
        n = _tokens(f, n_tokens)
        h = self._enter(f)
        try:
            _lib.pnmem_gate_notify_denied(h, ctypes.byref(answer._c), n)
        finally:
            self._leave()

    def slot(self, timeout: Optional[float] = None, tokens: Optional[int] = None) -> "_GateSlot":
        """A context manager holding one slot: GateRefused (with .status) if acquire did not get one."""
        return _GateSlot(self, timeout, tokens)

    def __enter__(self) -> GateStatus:
        st = self.acquire()
        if st != GateStatus.ACQUIRED:
            raise GateRefused(st)
        return st

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def close(self) -> None:
        """pnmem_gate_destroy (idempotent). Error if a thread is inside a call on this gate."""
        with self._lock:
            h = getattr(self, "_handle", None)
            if h is None:
                return
            if self._busy:
                raise Error("pnmem_gate_destroy: a thread is waiting on this gate", "pnmem_gate_destroy")
            self._handle = None
        _lib.pnmem_gate_destroy(h)

    @property
    def closed(self) -> bool:
        return self._handle is None

    def __del__(self) -> None:
        try:
            if getattr(self, "_handle", None) is not None and not self._busy:
                self.close()
        except BaseException:
            pass


class _GateSlot:
    def __init__(self, gate: Gate, timeout: Optional[float], tokens: Optional[int]) -> None:
        self.gate, self.timeout, self.tokens = gate, timeout, tokens

    def __enter__(self) -> GateStatus:
        st = self.gate.acquire(self.timeout, self.tokens)
        if st != GateStatus.ACQUIRED:
            raise GateRefused(st, "pnmem_gate_acquire" if self.tokens is None else "pnmem_gate_acquire_tokens")
        return st

    def __exit__(self, *exc: Any) -> None:
        self.gate.release()


# --- Rung 4b: KV eviction ------------------------------------------------------------------------


def _floats(function: str, name: str, values: Any) -> list[float]:
    try:
        out = [float(v) for v in values]
    except (TypeError, ValueError):
        raise ArgumentTypeError(f"{function}: {name} must be a sequence of numbers", function) from None
    if len(out) > INT32_MAX:
        raise ArgumentError(f"{function}: {name} has more than {INT32_MAX} values", function)
    return out


def _rows(function: str, name: str, rows: Any) -> tuple[list[float], int, int]:
    """A matrix given as a sequence of equal-length rows: (flat values, row count, row length)."""
    try:
        rows = [list(r) for r in rows]
    except TypeError:
        raise ArgumentTypeError(f"{function}: {name} must be a sequence of rows", function) from None
    width = len(rows[0]) if rows else 0
    if any(len(r) != width for r in rows):
        raise ArgumentError(f"{function}: {name}'s rows differ in length", function)
    return _floats(function, name, [v for r in rows for v in r]), len(rows), width


def select_keep(scores: Any, budget: int, *, n_tokens: Optional[int] = None, sinks: int = 4,
                recent: int = 32) -> list[int]:
    """pnmem_select_keep: the positions (increasing) of the tokens of one row to keep within `budget`:
    the first `sinks`, the last `recent`, and the highest-scoring of the rest (ties: the earlier
    token; NaN lowest). scores None: the most recent (StreamingLLM); then n_tokens says the row's length."""
    f = "pnmem_select_keep"
    b = _int(f, "budget", budget, INT32_MIN, INT32_MAX)
    sk = _int(f, "sinks", sinks, INT32_MIN, INT32_MAX)
    rc = _int(f, "recent", recent, INT32_MIN, INT32_MAX)
    if scores is None:
        if n_tokens is None:
            raise ArgumentError(f"{f}: without scores, n_tokens is needed", f)
        n = _int(f, "n_tokens", n_tokens, 0, INT32_MAX)
        values = None
        scratch = None
    else:
        vals = _floats(f, "scores", scores)
        n = len(vals)
        if n_tokens is not None and _int(f, "n_tokens", n_tokens, 0, INT32_MAX) != n:
            raise ArgumentError(f"{f}: n_tokens ({n_tokens}) is not len(scores) ({n})", f)
        values = (ctypes.c_float * max(n, 1))(*vals)
        scratch = (ctypes.c_float * max(n, 1))()
    keep = (ctypes.c_int * max(min(max(b, 0), n), 1))()
    _begin()
    k = _lib.pnmem_select_keep(values, n, b, sk, rc, keep, scratch)
    if k < 0:
        raise _fail(f, "refused")
    return list(keep[:k])


def observation_scores(attn: Any, kernel: int = 7) -> list[float]:
    """pnmem_observation_scores: SnapKV's scores for one row from the observation window's attention
    weights (rows x n_tokens: one row per query, of every head sharing the KV head): the column sums,
    max-pooled over `kernel` neighbours."""
    f = "pnmem_observation_scores"
    flat, rows, n = _rows(f, "attn", attn)
    kern = _int(f, "kernel", kernel, INT32_MIN, INT32_MAX)
    a = (ctypes.c_float * max(len(flat), 1))(*flat)
    out = (ctypes.c_float * max(n, 1))()
    scratch = (ctypes.c_float * max(n, 1))()
    _begin()
    if _lib.pnmem_observation_scores(a, rows, n, kern, out, scratch) != 0:
        raise _fail(f, "refused")
    return list(out[:n])


def key_norm_scores(keys: Any) -> list[float]:
    """pnmem_key_norm_scores: minus each key's squared L2 norm (keys: n_tokens rows of one KV head)."""
    f = "pnmem_key_norm_scores"
    flat, n, dim = _rows(f, "keys", keys)
    k = (ctypes.c_float * max(len(flat), 1))(*flat)
    out = (ctypes.c_float * max(n, 1))()
    _begin()
    if _lib.pnmem_key_norm_scores(k, n, dim, out) != 0:
        raise _fail(f, "refused")
    return list(out[:n])


@dataclass(frozen=True)
class SlotEviction:
    """One running slot's part of an eviction (pnmem_keep_answer)."""
    tokens: int
    keep_tokens: int
    freed_bytes: int


@dataclass(frozen=True)
class Eviction:
    """An eviction over the running slots (pnmem_eviction): for admit_after_eviction, whether the
    request is admitted in full once evict_bytes are evicted as the slots say."""
    considered: bool
    after_eviction: bool
    enough: bool
    cut_to_tokens: int
    slots_cut: int
    evict_bytes: int
    freed_bytes: int
    slots: tuple[SlotEviction, ...]


_EVICTION_DEFAULTS = _lib.pnmem_eviction_limits_default()  # C's floors: 36 tokens and 10 % (eviction_budget.hpp)
_MIN_KEEP_TOKENS: int = _EVICTION_DEFAULTS.min_keep_tokens
_MIN_KEEP_PERMILLE: int = _EVICTION_DEFAULTS.min_keep_permille


def _eviction_args(f: str, running_tokens: Any, min_keep_tokens: Any,
                   min_keep_permille: Any) -> tuple[list[int], _ffi.pnmem_eviction_limits, Any, Any]:
    try:
        slots = [_int(f, "running_tokens", t, 0, INT32_MAX) for t in running_tokens]
    except TypeError:
        raise ArgumentTypeError(f"{f}: running_tokens must be a sequence of token counts", f) from None
    limits = _ffi.pnmem_eviction_limits(_int(f, "min_keep_tokens", min_keep_tokens, INT32_MIN, INT32_MAX),
                                        _int(f, "min_keep_permille", min_keep_permille, INT32_MIN, INT32_MAX))
    arr = (ctypes.c_int * max(len(slots), 1))(*slots)
    each = (_ffi.pnmem_keep_answer * max(len(slots), 1))()
    return slots, limits, arr, each


def _eviction(e: _ffi.pnmem_eviction, each: Any, n: int) -> Eviction:
    return Eviction(considered=bool(e.considered), after_eviction=bool(e.after_eviction), enough=bool(e.enough),
                    cut_to_tokens=e.cut_to_tokens, slots_cut=e.slots_cut, evict_bytes=e.evict_bytes,
                    freed_bytes=e.freed_bytes,
                    slots=tuple(SlotEviction(each[i].tokens, each[i].keep_tokens, each[i].freed_bytes)
                                for i in range(n)))


def plan_eviction(running_tokens: Any, bytes_to_free: int, model: Model, *,
                  min_keep_tokens: int = _MIN_KEEP_TOKENS, min_keep_permille: int = _MIN_KEEP_PERMILLE) -> Eviction:
    """pnmem_plan_eviction: which running slots (the tokens each holds, in model.request_kv) give how much for
    bytes_to_free: every slot longer than one length cut to it, none below min_keep_tokens and
    min_keep_permille / 1000 of its tokens. enough says whether they give it all."""
    f = "pnmem_plan_eviction"
    slots, limits, arr, each = _eviction_args(f, running_tokens, min_keep_tokens, min_keep_permille)
    want = _u64(f, "bytes_to_free", bytes_to_free)
    m = _model_c(f, model)
    out = _ffi.pnmem_eviction()
    _begin()
    if _lib.pnmem_plan_eviction(ctypes.byref(m), arr, len(slots), want, ctypes.byref(limits), each,
                                ctypes.byref(out)) != 0:
        raise _fail(f, "model refused")
    return _eviction(out, each, len(slots))


def admit_after_eviction(n_tokens: int, running_tokens: Any, model: Model, encoder_items: int = 0,
                         *, min_keep_tokens: int = _MIN_KEEP_TOKENS,
                         min_keep_permille: int = _MIN_KEEP_PERMILLE) -> tuple[Answer, Eviction]:
    """pnmem_admit_after_eviction: pnmem.admit's answer for the request, and (at TIGHT and worse, for a
    host-path request host memory refuses or caps) whether evicting from the running slots admits it
    in full: returns (Answer, Eviction)."""
    f = "pnmem_admit_after_eviction"
    n = _tokens(f, n_tokens)
    slots, limits, arr, each = _eviction_args(f, running_tokens, min_keep_tokens, min_keep_permille)
    m = _model_c(f, model)
    q = _request_c(f, n, encoder_items)
    out = _ffi.pnmem_admit_answer()
    ev = _ffi.pnmem_eviction()
    _begin()
    if _lib.pnmem_admit_after_eviction(ctypes.byref(m), ctypes.byref(q), arr, len(slots), ctypes.byref(limits),
                                       ctypes.byref(out), ctypes.byref(ev), each) != 0:
        raise _fail(f, "model refused")
    return _answer(out), _eviction(ev, each, len(slots))


# --- Process setup ---------------------------------------------------------------------------

_lib.pnmem_set_log_sink(_c_sink, None)  # first: the PN_* errors and startup lines reach it


@atexit.register
def _at_exit() -> None:
    # No Python callback may run once the interpreter is finalising: the C watcher thread outlives it.
    with _subs_lock:
        subs = list(_subs.values())
    for s in subs:
        try:
            s.unsubscribe()
        except BaseException:
            pass
    _lib.pnmem_set_shed_hook(_ffi.FREE_FN(0), None)  # no shed hook: it would call into Python
    _lib.pnmem_set_log_sink(_ffi.LOG_FN(0), None)  # a NULL sink (the function pointer at address 0)
