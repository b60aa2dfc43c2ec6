"""The C ABI (include/pnmem/pnmem_c.h) as ctypes sees it: the library, its structs, its prototypes.

Internal to the package. Every Structure here mirrors its C struct field for field, in order,
with the C types (tests/python/test_layout.py compares each offset and size with the compiler's).
C enums are `int` (the C ABI's static_asserts check sizeof(enum) == sizeof(int)).

The library is loaded from, in order (the first that loads and has every function wins):
  1. $PNMEM_LIBRARY, the path of libpnmem_c.so or of the directory holding it; when it is set it is the
     only place tried;
  2. the installed location: `pkg-config --variable=libdir pnmem-c`, then the same for `pnmem`;
  3. a build tree next to this package's source checkout: <checkout>/build*/integration/libpnmem_c.so
     (newest first);
  4. the loader's own search: `libpnmem_c.so` (LD_LIBRARY_PATH, ld.so.cache).
If none does, LibraryNotFound (an ImportError) names every place tried and why it failed.
"""
from __future__ import annotations

import ctypes
import glob
import os
import shutil
import subprocess
from ctypes import (CFUNCTYPE, POINTER, Structure, c_bool, c_char, c_char_p, c_double, c_float, c_int, c_int32, c_int64,
                    c_size_t,
                    c_uint32, c_uint64, c_void_p)

LIBRARY_NAME = "libpnmem_c.so"

MAX_DIES = 16
KV_FORMATS = 7
MAX_ACTIVATION_ANCHORS = 8
MAX_KV_WINDOWS = 4
MAX_LAYER_GROUPS = 8
CGROUP_PATH_MAX = 256


class LibraryNotFound(ImportError):
    """libpnmem_c could not be loaded from any place pnmem looks; the message lists them."""


# --- Structs -------------------------------------------------------------------------------

U64_DIES = c_uint64 * MAX_DIES
U64_FORMATS = c_uint64 * KV_FORMATS


class pnmem_state(Structure):
    _fields_ = [
        ("host_total_bytes", c_uint64),
        ("host_avail_bytes", c_uint64),
        ("host_psi_some_avg10", c_double),
        ("host_psi_full_avg10", c_double),
        ("host_psi_some_rate", c_double),
        ("host_psi_full_rate", c_double),
        ("cgroup_current_bytes", c_uint64),
        ("cgroup_high_bytes", c_uint64),
        ("cgroup_max_bytes", c_uint64),
        ("n_dies", c_int),
        ("per_die_free", U64_DIES),
        ("per_die_budget", U64_DIES),
        ("per_die_used", U64_DIES),
        ("per_die_retiring", U64_DIES),
        ("level", c_int),
        ("raw_level", c_int),
        ("seq", c_uint64),
        ("sample_time_ns", c_int64),
    ]


class pnmem_snapshot(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("state", pnmem_state),
        ("sources_read", c_uint32),
        ("sources_failed", c_uint32),
        ("cgroup_mode", c_int),
        ("psi_mode", c_int),
        ("meminfo_total_bytes", c_uint64),
        ("meminfo_avail_bytes", c_uint64),
        ("cgroup_limit_bytes", c_uint64),
        ("cgroup_working_set_bytes", c_uint64),
        ("limit_cgroup", c_char * CGROUP_PATH_MAX),
        ("host_level", c_int),
        ("psi_level", c_int),
        ("die_level", c_int),
        ("os_level", c_int),
        ("memory_level", c_int),
    ]


class pnmem_watcher_options(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("poll_interval_ms", c_uint32),
        ("pressure_poll_interval_ms", c_uint32),
        ("step_down_dwell_ms", c_uint32),
        ("root", c_char_p),  # the sampler's root directory; NULL = "/"
        ("ledger", c_char_p),  # the box ledger; NULL = PN_LEDGER's (auto)
    ]


class pnmem_activation_anchor(Structure):
    _fields_ = [("tokens", c_uint64), ("peak_bytes", c_uint64)]


class pnmem_kv_window(Structure):
    _fields_ = [("window", c_uint64), ("bytes_per_token", U64_FORMATS)]


class pnmem_model(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("kv", c_int),
        ("gpu_resident", c_int),
        ("max_window", c_int),
        ("die", c_int),
        ("max_slots", c_int),
        ("full_kv_bytes_per_token", U64_FORMATS),
        ("sliding_kv_bytes_per_token", U64_FORMATS),
        ("sliding_window", c_uint64),
        ("state_bytes_per_seq", c_uint64),
        ("normal_kv", c_int),
        ("compact_kv", c_int),
        ("n_anchors", c_uint32),
        ("anchors", pnmem_activation_anchor * MAX_ACTIVATION_ANCHORS),
        ("activation_fixed_bytes", c_uint64),
        ("activation_per_token_bytes", c_uint64),
        ("activation_per_token_sq_bytes", c_uint64),
        # version 2
        ("n_more_windows", c_uint32),
        ("more_windows", pnmem_kv_window * (MAX_KV_WINDOWS - 1)),
        ("kv_bytes_per_encoder_item", U64_FORMATS),
        ("kv_block_tokens", c_uint32),
        # version 3
        ("zero_cost", c_int),
    ]


class pnmem_engine_rule(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("engine", c_int),
        ("block_tokens", c_uint32),
        ("max_batched_tokens", c_uint32),
        ("ubatch_tokens", c_uint32),
        ("seqs", c_uint32),
        ("state_copies", c_uint32),
        ("ssm_state_fp32", c_int),
        ("mtp", c_int),
        ("hybrid_manager_off", c_int),
    ]


class pnmem_layer_group(Structure):
    _fields_ = [
        ("kind", c_int),
        ("layers", c_uint32),
        ("kv_heads", c_uint32),
        ("key_dim", c_uint32),
        ("value_dim", c_uint32),
        ("k_only", c_int),
        ("span", c_uint32),
        ("conv_state_values", c_uint64),
        ("ssm_state_values", c_uint64),
    ]


class pnmem_model_shape(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("n_groups", c_uint32),
        ("groups", pnmem_layer_group * MAX_LAYER_GROUPS),
        ("query_heads", c_uint32),
        ("hidden_size", c_uint32),
        ("fixed_activation_bytes", c_uint64),
        ("normal_kv", c_int),
        ("compact_kv", c_int),
        ("state_format", c_int),
        ("ssm_state_format", c_int),
        ("side_bytes", c_uint32 * MAX_LAYER_GROUPS),  # since version 2
    ]


class pnmem_request(Structure):
    _fields_ = [("struct_size", c_uint32), ("n_tokens", c_int), ("encoder_items", c_int)]


class pnmem_admit_answer(Structure):
    _fields_ = [
        ("status", c_int),
        ("fit_tokens", c_int),
        ("reason", c_char_p),  # a static string of pnmem's (pnmem_explain recognises it by its address)
        ("level", c_int),
        ("die", c_int),
        ("window", c_int),
        ("need_bytes", c_uint64),
        ("limit_bytes", c_uint64),
        ("pending_bytes", c_uint64),
    ]


class pnmem_model_load(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("weights_bytes", c_uint64),
        ("kv_bytes", c_uint64),
        ("die", c_int),
    ]


class pnmem_policy(Structure):
    _fields_ = [
        ("host_reserve_min_bytes", c_uint64),
        ("host_reserve_bp", c_uint32),
        ("psi_full_reject_bp", c_uint32),
        ("psi_some_tight_bp", c_uint32),
        ("psi_full_window_ms", c_uint32),
        ("die_tight_divisor", c_uint32),
        ("die_watch_divisor", c_uint32),
        ("die_reserve_bytes", c_uint64),
        ("die_scratch_bytes", c_uint64),
        ("load_spike_bytes", c_uint64),
        ("ladder_disabled", c_bool),
        ("host_total_bytes", c_uint64),
        ("host_reserve_bytes", c_uint64),
    ]


class pnmem_budget(Structure):
    _fields_ = [
        ("total_bytes", c_uint64),
        ("avail_bytes", c_uint64),
        ("reserve_bytes", c_uint64),
        ("headroom_bytes", c_uint64),
        ("pending_bytes", c_uint64),
        ("unpromised_bytes", c_uint64),
        ("level", c_int),
        ("seq", c_uint64),
    ]


class pnmem_room(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("sampled", c_int),
        ("level", c_int),
        ("avail_bytes", c_uint64),
        ("reserve_bytes", c_uint64),
        ("pending_bytes", c_uint64),
        ("credited_bytes", c_uint64),
        ("take_bytes", c_uint64 * 4),
        ("free_bytes", c_uint64 * 4),
        ("seq", c_uint64),
    ]


class pnmem_level_change(Structure):
    _fields_ = [
        ("from", c_int),
        ("to", c_int),
        ("seq", c_uint64),
        ("sample_time_ns", c_int64),
        ("state", POINTER(pnmem_state)),
    ]


class pnmem_ladder_plan(Structure):
    _fields_ = [
        ("level", c_int),
        ("max_slots", c_int),
        ("force_kv_q4", c_bool),
        ("kv_evict", c_bool),
        ("prefill_window", c_int),
        ("degraded", c_bool),
        ("note", c_char_p),
    ]


class pnmem_kv_allocation(Structure):
    _fields_ = [("format", c_int), ("bytes", c_uint64)]


class pnmem_eviction_limits(Structure):
    _fields_ = [("min_keep_tokens", c_int32), ("min_keep_permille", c_int32)]


class pnmem_keep_answer(Structure):
    _fields_ = [("tokens", c_int32), ("keep_tokens", c_int32), ("freed_bytes", c_uint64)]


class pnmem_eviction(Structure):
    _fields_ = [
        ("considered", c_int),
        ("after_eviction", c_int),
        ("enough", c_int),
        ("cut_to_tokens", c_int32),
        ("slots_cut", c_int32),
        ("evict_bytes", c_uint64),
        ("freed_bytes", c_uint64),
    ]


STRUCTS = (pnmem_state, pnmem_snapshot, pnmem_watcher_options, pnmem_activation_anchor, pnmem_kv_window, pnmem_model,
           pnmem_engine_rule, pnmem_layer_group, pnmem_model_shape, pnmem_request, pnmem_admit_answer, pnmem_model_load,
           pnmem_policy, pnmem_budget, pnmem_room, pnmem_level_change, pnmem_ladder_plan, pnmem_kv_allocation,
           pnmem_eviction_limits, pnmem_keep_answer, pnmem_eviction)

LEVEL_FN = CFUNCTYPE(None, c_void_p, POINTER(pnmem_level_change))
LOG_FN = CFUNCTYPE(None, c_void_p, c_char_p)
FREE_FN = CFUNCTYPE(c_uint64, c_uint64, c_void_p)

# name: (restype, argtypes). Every function pnmem_c.h exports (the static inline *_init helpers are
# the *_init_sized ones here, called with ctypes.sizeof).
PROTOTYPES = {
    "pnmem_select_keep": (c_int, [POINTER(c_float), c_int, c_int, c_int, c_int, POINTER(c_int), POINTER(c_float)]),
    "pnmem_observation_scores": (c_int, [POINTER(c_float), c_int, c_int, c_int, POINTER(c_float), POINTER(c_float)]),
    "pnmem_key_norm_scores": (c_int, [POINTER(c_float), c_int, c_int, POINTER(c_float)]),
    "pnmem_eviction_limits_default": (pnmem_eviction_limits, []),
    "pnmem_plan_eviction": (c_int, [POINTER(pnmem_model), POINTER(c_int), c_int, c_uint64,
                                    POINTER(pnmem_eviction_limits), POINTER(pnmem_keep_answer),
                                    POINTER(pnmem_eviction)]),
    "pnmem_admit_after_eviction": (c_int, [POINTER(pnmem_model), POINTER(pnmem_request), POINTER(c_int), c_int,
                                           POINTER(pnmem_eviction_limits), POINTER(pnmem_admit_answer),
                                           POINTER(pnmem_eviction), POINTER(pnmem_keep_answer)]),
    "pnmem_watcher_options_init_sized": (c_int, [POINTER(pnmem_watcher_options), c_size_t]),
    "pnmem_watcher_start_with": (c_int, [POINTER(pnmem_watcher_options)]),
    "pnmem_watcher_start": (c_int, []),
    "pnmem_watcher_stop": (None, []),
    "pnmem_watcher_running": (c_bool, []),
    "pnmem_watcher_poll_now": (None, []),
    "pnmem_read": (c_int, [POINTER(pnmem_state)]),
    "pnmem_snapshot_init_sized": (c_int, [POINTER(pnmem_snapshot), c_size_t]),
    "pnmem_read_snapshot": (c_int, [POINTER(pnmem_snapshot)]),
    "pnmem_set_die": (c_int, [c_int, c_uint64, c_uint64, c_uint64, c_uint64]),
    "pnmem_model_init_sized": (c_int, [POINTER(pnmem_model), c_size_t]),
    "pnmem_model_init_reference_sized": (c_int, [POINTER(pnmem_model), c_size_t]),
    "pnmem_model_init_preallocated_sized": (c_int, [POINTER(pnmem_model), c_size_t]),
    "pnmem_metrics_text": (c_int, [c_void_p, c_size_t, ctypes.c_uint]),
    "pnmem_model_cost_from_json": (c_int, [c_char_p, c_size_t, POINTER(pnmem_model), c_void_p, c_size_t]),
    "pnmem_engine_rule_init_sized": (c_int, [POINTER(pnmem_engine_rule), c_size_t]),
    "pnmem_model_shape_init_sized": (c_int, [POINTER(pnmem_model_shape), c_size_t]),
    "pnmem_model_cost_from_shape": (c_int, [POINTER(pnmem_model_shape), POINTER(pnmem_engine_rule), POINTER(pnmem_model),
                                            c_void_p, c_size_t]),
    "pnmem_model_cost_from_hf_config": (c_int, [c_char_p, c_size_t, POINTER(pnmem_engine_rule), POINTER(pnmem_model),
                                                c_void_p, c_size_t]),
    "pnmem_model_cost_from_hf_config_file": (c_int, [c_char_p, POINTER(pnmem_engine_rule), POINTER(pnmem_model),
                                                     c_void_p, c_size_t]),
    "pnmem_model_cost_from_gguf_file": (c_int, [c_char_p, POINTER(pnmem_engine_rule), POINTER(pnmem_model), c_void_p,
                                                c_size_t]),
    "pnmem_model_shape_from_hf_config": (c_int, [c_char_p, c_size_t, POINTER(pnmem_model_shape), c_void_p, c_size_t]),
    "pnmem_request_init_sized": (c_int, [POINTER(pnmem_request), c_size_t]),
    "pnmem_admit_request": (c_int, [POINTER(pnmem_model), POINTER(pnmem_request), POINTER(pnmem_admit_answer),
                                    POINTER(c_uint64)]),
    "pnmem_admit": (c_int, [POINTER(pnmem_model), c_int, POINTER(pnmem_admit_answer)]),
    "pnmem_admit_wait": (c_int, [POINTER(pnmem_model), c_int, c_int64, POINTER(pnmem_admit_answer)]),
    "pnmem_explain": (c_int, [POINTER(pnmem_admit_answer), c_void_p, c_size_t]),
    "pnmem_model_load_init_sized": (c_int, [POINTER(pnmem_model_load), c_size_t]),
    "pnmem_admit_model_load": (c_int, [POINTER(pnmem_model_load), POINTER(pnmem_admit_answer)]),
    "pnmem_admit_model_load_die": (c_int, [POINTER(pnmem_model_load), POINTER(pnmem_admit_answer)]),
    "pnmem_admit_load_spike": (c_int, [POINTER(pnmem_admit_answer)]),
    "pnmem_admit_reserved": (c_int, [POINTER(pnmem_model), c_int, POINTER(pnmem_admit_answer), POINTER(c_uint64)]),
    "pnmem_reserve_bytes": (c_int, [c_uint64, c_int64, POINTER(pnmem_admit_answer), POINTER(c_uint64)]),
    "pnmem_check_bytes": (c_int, [c_uint64, c_int, POINTER(pnmem_admit_answer)]),
    "pnmem_reserve_die_bytes": (c_int, [c_int, c_uint64, c_int64, POINTER(pnmem_admit_answer), POINTER(c_uint64)]),
    "pnmem_admit_model_load_reserved": (c_int, [POINTER(pnmem_model_load), POINTER(pnmem_admit_answer),
                                                POINTER(c_uint64)]),
    "pnmem_admit_model_load_die_reserved": (c_int, [POINTER(pnmem_model_load), POINTER(pnmem_admit_answer),
                                                    POINTER(c_uint64)]),
    "pnmem_set_die_uuid": (c_int, [c_int, c_char_p]),
    "pnmem_retry_after_ms": (c_int64, [POINTER(pnmem_admit_answer), POINTER(c_char_p)]),
    "pnmem_retry_after_seconds": (c_int64, [c_int64]),
    "pnmem_retry_basis_is_guess": (c_int, [c_char_p]),
    "pnmem_reservation_settle": (None, [c_uint64]),
    "pnmem_reservation_cancel": (None, [c_uint64]),
    "pnmem_pending_bytes": (c_uint64, []),
    "pnmem_policy_get": (c_int, [POINTER(pnmem_policy)]),
    "pnmem_host_budget": (c_int, [POINTER(pnmem_budget)]),
    "pnmem_room_init_sized": (c_int, [POINTER(pnmem_room), c_size_t]),
    "pnmem_host_room": (c_int, [POINTER(pnmem_room)]),
    "pnmem_credit_freed": (c_int, [c_uint64]),
    "pnmem_make_room": (c_int, [c_uint64, c_int64, FREE_FN, c_void_p, POINTER(pnmem_admit_answer), POINTER(c_uint64)]),
    "pnmem_shed_bytes": (c_int, [POINTER(c_uint64)]),
    "pnmem_set_shed_hook": (c_int, [FREE_FN, c_void_p]),
    "pnmem_set_fleet_load": (c_int, [c_uint64, c_uint64, c_uint64, c_uint64, c_uint64]),
    "pnmem_admit_host_load": (c_int, [c_uint64, c_uint64, c_int, c_int, c_int64, POINTER(pnmem_admit_answer),
                                      POINTER(c_uint64)]),
    "pnmem_subscribe": (c_uint64, [LEVEL_FN, c_void_p]),
    "pnmem_unsubscribe": (None, [c_uint64]),
    "pnmem_plan_ladder": (pnmem_ladder_plan, [c_int, c_int, c_int, c_bool]),
    "pnmem_plan_ladder_now": (pnmem_ladder_plan, [c_int, c_int, c_bool]),
    "pnmem_kv_allocation_for": (c_int, [POINTER(pnmem_ladder_plan), POINTER(pnmem_model), c_uint64,
                                        POINTER(pnmem_kv_allocation)]),
    "pnmem_set_log_sink": (None, [LOG_FN, c_void_p]),
    "pnmem_gate_create": (c_void_p, [c_int, c_int]),
    "pnmem_gate_destroy": (None, [c_void_p]),
    "pnmem_gate_acquire": (c_int, [c_void_p, c_int64]),
    "pnmem_gate_release": (None, [c_void_p]),
    "pnmem_gate_notify_pressure": (None, [c_void_p, c_int]),
    "pnmem_gate_set_capacity": (None, [c_void_p, c_int]),
    "pnmem_gate_create_for": (c_void_p, [POINTER(pnmem_model), c_int]),
    "pnmem_gate_acquire_tokens": (c_int, [c_void_p, c_int, c_int64]),
    "pnmem_gate_notify_denied": (None, [c_void_p, POINTER(pnmem_admit_answer), c_int]),
    "pnmem_level_name": (c_char_p, [c_int]),
}


# --- Finding the library ---------------------------------------------------------------------

def _pkg_config_libdirs() -> list[tuple[str, str | None, str]]:
    """(place, libdir or None, why not) for pnmem-c, then pnmem."""
    out: list[tuple[str, str | None, str]] = []
    exe = shutil.which("pkg-config")
    for package in ("pnmem-c", "pnmem"):
        place = f"pkg-config --variable=libdir {package}"
        if exe is None:
            out.append((place, None, "pkg-config is not on PATH"))
            continue
        try:
            r = subprocess.run([exe, "--variable=libdir", package], capture_output=True, text=True, timeout=10,
                               check=False)
        except (OSError, subprocess.SubprocessError) as e:
            out.append((place, None, f"could not run pkg-config: {e}"))
            continue
        libdir = r.stdout.strip()
        if r.returncode != 0:
            msg = (r.stderr.strip().splitlines() or ["no such package"])[0]
            out.append((place, None, f"package not found ({msg}; PKG_CONFIG_PATH="
                                     f"{os.environ.get('PKG_CONFIG_PATH', '')!r})"))
        elif not libdir:
            out.append((place, None, f"{package}.pc has no libdir variable"))
        else:
            out.append((place, libdir, ""))
    return out


def _build_tree_candidates() -> list[str]:
    """<checkout>/build*/integration/libpnmem_c.so, newest first, when this package sits in a pnmem checkout."""
    checkout = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if not os.path.isfile(os.path.join(checkout, "include", "pnmem", "pnmem_c.h")):
        return []
    found = glob.glob(os.path.join(checkout, "build*", "integration", LIBRARY_NAME))

    def mtime(p: str) -> float:
        try:
            return os.path.getmtime(p)
        except OSError:
            return 0.0
    return sorted(found, key=mtime, reverse=True)


def _try_load(path: str) -> tuple[ctypes.CDLL | None, str]:
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        return None, str(e)
    missing = [name for name in PROTOTYPES if not hasattr(lib, name)]
    if missing:
        return None, (f"loaded, but it lacks {len(missing)} function(s) this package needs "
                      f"(an older libpnmem_c?): {', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''}")
    return lib, ""


def load_library() -> tuple[ctypes.CDLL, str]:
    """The library and the path it was loaded from; LibraryNotFound naming every place tried."""
    tried: list[str] = []

    def attempt(place: str, path: str) -> ctypes.CDLL | None:
        if os.sep in path and not os.path.exists(path):
            tried.append(f"  {place}: {path}: no such file")
            return None
        lib, why = _try_load(path)
        if lib is None:
            tried.append(f"  {place}: {path}: {why}")
        return lib

    env = os.environ.get("PNMEM_LIBRARY")
    if env:
        if os.path.isdir(env):  # a directory: the library in it (a build's integration/, an install's lib/)
            env = os.path.join(env, LIBRARY_NAME)
        lib = attempt("$PNMEM_LIBRARY", env)
        if lib is not None:
            return lib, env
        raise LibraryNotFound("pnmem: cannot load libpnmem_c from $PNMEM_LIBRARY (when it is set, no other place "
                              "is tried):\n" + "\n".join(tried), name="pnmem", path=env)
    tried.append("  $PNMEM_LIBRARY: not set")

    for place, libdir, why in _pkg_config_libdirs():
        if libdir is None:
            tried.append(f"  {place}: {why}")
            continue
        path = os.path.join(libdir, LIBRARY_NAME)
        lib = attempt(place, path)
        if lib is not None:
            return lib, path

    candidates = _build_tree_candidates()
    if not candidates:
        tried.append(f"  build tree: no build*/integration/{LIBRARY_NAME} next to this package's source "
                     f"({os.path.dirname(os.path.abspath(__file__))})")
    for path in candidates:
        lib = attempt("build tree", path)
        if lib is not None:
            return lib, path

    lib = attempt("the loader's search (LD_LIBRARY_PATH, ld.so.cache)", LIBRARY_NAME)
    if lib is not None:
        return lib, LIBRARY_NAME
    raise LibraryNotFound("pnmem: cannot find libpnmem_c; tried, in order:\n" + "\n".join(tried) +
                          "\nSet PNMEM_LIBRARY to the path of libpnmem_c.so (or its directory), or PKG_CONFIG_PATH to the pkgconfig "
                          "directory of an installed pnmem.", name="pnmem")


def bind(lib: ctypes.CDLL) -> None:
    for name, (restype, argtypes) in PROTOTYPES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


lib, library_path = load_library()
bind(lib)
