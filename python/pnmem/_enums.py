"""The C ABI's enumerations and constants, with the C values (tests/python/test_enums.py parses
include/pnmem/pnmem_c.h and checks every name and value both ways)."""
from __future__ import annotations

import enum


class _CEnum(enum.IntEnum):
    """An IntEnum whose str() is its lower-case name ("ok", "denied"), as the C ABI and the CLI print it."""

    def __str__(self) -> str:
        return self.name.lower()

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


class Level(_CEnum):
    """pnmem_level: the pressure level, worst of host memory, PSI and every die."""
    OK = 0
    WATCH = 1
    TIGHT = 2
    CRITICAL = 3


class Status(_CEnum):
    """pnmem_admit_status: an admission's verdict."""
    ADMITTED = 0
    CAPPED = 1
    DENIED = 2
    FAIL_OPEN = 3


class KvFormat(_CEnum):
    """pnmem_kv_format: a KV cache's format (PNMEM_KV_*)."""
    Q4 = 0
    FP32 = 1
    F16 = 2
    BF16 = 3
    FP8 = 4
    Q8_0 = 5
    Q4_0 = 6


class Engine(_CEnum):
    """pnmem_engine: whose rule turns a model's layer groups into costs (PNMEM_ENGINE_*)."""
    EXACT = 0
    VLLM = 1
    LLAMA_CPP = 2

    def __str__(self) -> str:
        return "llama.cpp" if self is Engine.LLAMA_CPP else self.name.lower()


class LayerKind(_CEnum):
    """pnmem_layer_kind: how a group of layers holds memory (PNMEM_LAYERS_*)."""
    FULL = 0
    SLIDING = 1
    CHUNKED = 2
    CROSS = 3
    RECURRENT = 4


class ZeroCost(_CEnum):
    """pnmem_zero_cost: what a request that needs no host bytes gets while host memory is inside the reserve
    (Model.zero_cost; POLICY: the process's rule, PN_ZERO_COST, hold unless set)."""
    POLICY = 0
    HOLD = 1
    ADMIT = 2
    REJECT = 3


class GateStatus(_CEnum):
    """pnmem_gate_status: what an acquire got."""
    ACQUIRED = 0
    OVERLOADED = 1
    TIMED_OUT = 2
    QUEUE_FULL = 3
    ERROR = 4


class CgroupMode(_CEnum):
    """pnmem_cgroup_mode: how the cgroup was reached."""
    NONE = 0
    V1 = 1
    V2 = 2


class PsiMode(_CEnum):
    """pnmem_psi_mode: how PSI was read."""
    NONE = 0
    POLL = 1
    TRIGGER = 2


class Source(enum.IntFlag):
    """PNMEM_SOURCE_*: the sources a sample read (bits, as pnmem::host_source)."""
    MEMINFO = 1 << 0
    PSI = 1 << 1
    CGROUP_USAGE = 1 << 2
    CGROUP_LIMIT = 1 << 3
    CGROUP_STAT = 1 << 4
    CGROUP_PRESSURE = 1 << 5
    MACOS_VM = 1 << 6
    MACOS_PRESSURE = 1 << 7


class Reason(str, enum.Enum):
    """pnmem_admit_answer.reason: why an answer is what it is (the C strings)."""
    FITS = "fits"
    WINDOW = "window"
    PSI_STALL = "psi_stall"
    HOST_RESERVE = "host_reserve"
    HOST_BUDGET = "host_budget"
    DIE_VRAM = "die_vram"
    BAD_REQUEST = "bad_request"
    PREFILL_WINDOW = "prefill_window"
    NOT_WATCHING = "not_watching"  # FAIL_OPEN: no watcher running (never started, stopped, a fork's child)
    NOT_SAMPLED = "not_sampled"    # FAIL_OPEN: the host's memory could not be read

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


MAX_DIES = 16
KV_FORMATS = 7
MAX_ACTIVATION_ANCHORS = 8
MAX_KV_WINDOWS = 4
MAX_LAYER_GROUPS = 8
SOURCES = 8
CGROUP_PATH_MAX = 256
