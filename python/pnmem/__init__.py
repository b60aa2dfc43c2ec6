"""pnmem: memory-pressure admission for LLM inference engines, over libpnmem_c's C ABI (ctypes).

    import pnmem
    with pnmem.Watcher() as w:                       # the process's watcher (one per process)
        print(w.state().level)                       # "ok"; .provenance says where the numbers came from
        m = pnmem.Model.from_hf_config("config.json", engine="vllm", kv=pnmem.KvFormat.BF16)
        a = pnmem.admit(8192, m)                     # Model() has no cost: it is refused, never priced
        if a.status == pnmem.Status.DENIED:
            print(a.explain())                       # "denied (host_reserve): nothing may start: ..."

The library is found through $PNMEM_LIBRARY, then pkg-config (pnmem-c, then pnmem), then a build
tree next to this source checkout, then the loader's search; `pnmem.library_path` says which.
Failures raise pnmem.Error (ArgumentError / ArgumentTypeError for arguments refused before C).
pnmem.PrometheusCollector (or register_prometheus) serves metrics_text() through prometheus_client,
which is optional: imported only when a collector is made.
"""
from ._enums import (CGROUP_PATH_MAX, KV_FORMATS, MAX_ACTIVATION_ANCHORS, MAX_DIES, MAX_KV_WINDOWS, MAX_LAYER_GROUPS,
                     SOURCES, CgroupMode, Engine, GateStatus, KvFormat, LayerKind, Level, PsiMode, Reason, Source,
                     Status, ZeroCost)
from ._ffi import LibraryNotFound, library_path
from ._core import (Answer, ArgumentError, ArgumentTypeError, Budget, Die, EngineRule, Error, Eviction, Gate,
                    GateRefused, KvAllocation, SlotEviction, admit_after_eviction, key_norm_scores,
                    observation_scores, plan_eviction, select_keep,
                    LayerGroup, LevelChange, LevelSources, Model, Plan, Policy, Provenance, Reservation, RetryHint,
                    Room, Snapshot,
                    State, Subscription, Watcher, admit, admit_wait,
                    admit_bytes, admit_host_load, admit_load_spike, admit_model_load, admit_model_load_die,
                    admit_reserved, budget,
                    check_bytes, credit_freed, explain, kv_allocation, level_name, make_room, metrics_text,
                    pending_bytes, plan,
                    plan_now, policy, poll_now, read, reserve_die_bytes, reserve_host_load, reserve_model_load,
                    reserve_model_load_die, retry_after, room, running,
                    set_die, set_die_uuid, set_fleet_load, set_log_sink, set_shed_hook, shed_bytes, subscribe)
from ._prometheus import PrometheusClientMissing, PrometheusCollector, register_prometheus

__version__ = "0.1.0"

__all__ = [
    "Answer", "ArgumentError", "ArgumentTypeError", "Budget", "CGROUP_PATH_MAX", "CgroupMode", "Die", "Engine",
    "EngineRule", "Error", "Gate", "GateRefused", "GateStatus", "KV_FORMATS", "KvAllocation", "KvFormat", "LayerKind",
    "LayerGroup", "Level", "LevelChange", "LevelSources", "LibraryNotFound", "MAX_ACTIVATION_ANCHORS", "MAX_DIES",
    "MAX_KV_WINDOWS",
    "MAX_LAYER_GROUPS", "Model", "Plan", "Policy", "Provenance", "PsiMode",
    "Reason", "Reservation", "RetryHint", "Room", "SOURCES", "Snapshot", "Source", "State", "Status", "Subscription",
    "Watcher", "ZeroCost", "admit", "admit_wait",
    "admit_bytes", "admit_host_load", "admit_load_spike", "admit_model_load", "admit_model_load_die", "admit_reserved", "budget",
    "check_bytes", "credit_freed", "explain", "kv_allocation", "level_name", "library_path", "make_room",
    "metrics_text",
    "pending_bytes",
    "plan", "plan_now", "policy", "poll_now",
    "read", "reserve_die_bytes", "reserve_host_load", "reserve_model_load", "reserve_model_load_die", "retry_after", "room", "running",
    "set_die", "set_die_uuid", "set_fleet_load", "set_log_sink", "set_shed_hook", "shed_bytes", "subscribe",
    "Eviction", "SlotEviction", "admit_after_eviction", "key_norm_scores", "observation_scores", "plan_eviction",
    "select_keep",
    "PrometheusClientMissing", "PrometheusCollector", "register_prometheus",
]
