#!/usr/bin/env python3
"""One question, one answer: C++, C, Python and the pnmem tool share their defaults and answer alike.

  bindings_agree.py defaults --cxx CXX_ANSWERS --c C_ANSWERS --tool PNMEM --fixtures DIR
  bindings_agree.py answers  --cxx CXX_ANSWERS --c C_ANSWERS --tool PNMEM --fixtures DIR [--count N] [--seed S]

defaults: every default a binding has of its own (a request's KV format, window, die and slots; the eviction
floors; the keep window and the observation kernel; each engine's settings; the ladder's config; the
watcher's intervals; the policy; Retry-After's whole seconds) is the C++ one (cxx_answers defaults): C's
init calls (c_answers defaults), the Python package's (its dataclasses' fields and its functions' keyword
defaults, read with inspect) and the tool's (what it answers or prints when a flag is not given).

answers: N random snapshots (host total and available memory, PSI some and full, a die or none) with a
request each (one of the fixture models' config.json, a prompt length, the running slots' tokens), every
request field left at its binding's default. For each, C++ (pnmem::admit_after_eviction on a watcher
holding the snapshot), C (pnmem_admit_after_eviction on a watcher whose sampler reads a tree written with
the snapshot's numbers), Python (pnmem.admit_after_eviction, the same way) and the tool (pnmem admit
--from-hf-config ... --running-tokens ...) must give the same status, reason, fit, need and limit, the same
KV format, and the same eviction answer (considered, after eviction, the bytes, the cut). Exits 1 naming the
first lines that differ, 77 when the Python package cannot load this build's library (a sanitized build).

PNMEM_LIBRARY and PYTHONPATH (python/) come from the environment (meson test sets them).
"""
import argparse
import inspect
import json
import os
import random
import subprocess
import sys
import tempfile

GiB = 1 << 30
MiB = 1 << 20

MODELS = ["llama-3-8b.config.json", "qwen3-next-80b-a3b-thinking.config.json", "gemma-2-9b.config.json",
          "deepseek-v2-lite.config.json", "mistral-7b-v0.1.config.json", "gemma-3-4b-it.config.json"]

failures = []


def fail(msg):
    failures.append(msg)
    print(f"FAIL: {msg}", flush=True)


def clean_env():
    return {k: v for k, v in os.environ.items() if not k.startswith("PN_")}


def run(argv, stdin=None):
    p = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=600, env=clean_env())
    if p.returncode != 0:
        raise SystemExit(f"bindings_agree: {' '.join(argv[:3])} ... exited {p.returncode}: {p.stderr[-2000:]}")
    return p.stdout


def same(where, cxx, other, name):
    if cxx != other:
        fail(f"{where}: C++ {cxx!r}, {name} {other!r}")


# --- defaults -------------------------------------------------------------------------------------

def python_defaults(pnmem):
    m = pnmem.Model()
    e = pnmem.EngineRule()
    pe = inspect.signature(pnmem.plan_eviction).parameters
    ae = inspect.signature(pnmem.admit_after_eviction).parameters
    sk = inspect.signature(pnmem.select_keep).parameters
    ob = inspect.signature(pnmem.observation_scores).parameters
    pl = inspect.signature(pnmem.plan).parameters
    return {
        "request": {"kv": None if m.kv is None else str(m.kv), "gpu_resident": m.gpu_resident,
                    "max_window": m.max_window, "die": m.die, "max_slots": m.max_slots, "zero_cost": str(m.zero_cost)},
        "eviction_limits": {"min_keep_tokens": pe["min_keep_tokens"].default,
                            "min_keep_permille": pe["min_keep_permille"].default},
        "eviction_limits (admit_after_eviction)": {"min_keep_tokens": ae["min_keep_tokens"].default,
                                                   "min_keep_permille": ae["min_keep_permille"].default},
        "keep_window": {"sinks": sk["sinks"].default, "recent": sk["recent"].default},
        "observation_kernel": ob["kernel"].default,
        "engine_rule": {"engine": str(e.engine), "block_tokens": e.block_tokens,
                        "max_batched_tokens": e.max_batched_tokens, "ubatch_tokens": e.ubatch_tokens, "seqs": e.seqs,
                        "state_copies": e.state_copies, "ssm_state_fp32": e.ssm_state_fp32, "mtp": e.mtp,
                        "hybrid_manager_off": e.hybrid_manager_off},
        "ladder_config": {"max_slots": pl["max_slots"].default, "prefill_window": pl["prefill_window"].default,
                          "kv_q4": pl["kv_q4"].default},
        "retry_after_seconds": {str(ms): pnmem.RetryHint(ms, "none").seconds
                                for ms in (0, 1, 500, 999, 1000, 1001, 9999, 10000, 60000)},
    }


def tool_defaults(tool, fixtures):
    """What the tool does when a flag is not given."""
    config = os.path.join(fixtures, "llama-3-8b.config.json")

    def js(*args):
        return json.loads(run([tool, "--json"] + list(args)))

    admit = js("admit", "--host-total", "64GiB", "--host-avail", "32GiB", "--prompt", "1", "--from-hf-config", config)
    normal = json.loads(run([tool, "model", "--from-hf-config", config]))["normal_kv"]
    plan = js("plan", "--level", "tight", "--slots", "1", "--window", "0", "--from-hf-config", config, "--tokens", "100")
    rule = json.loads(run([tool, "model", "--from-hf-config", config, "--engine", "vllm"]))["engine"]
    llama = json.loads(run([tool, "model", "--from-hf-config", config, "--engine", "llama.cpp"]))["engine"]
    exact = json.loads(run([tool, "model", "--from-hf-config", config]))["engine"]
    watch_help = run([tool, "watch", "--help"])
    admit_help = run([tool, "admit", "--help"])
    zero_cost = next((line.split("default ", 1)[1].split(")", 1)[0] for line in admit_help.split("\n")
                      if line.strip().startswith("--zero-cost ")), None)

    def default_ms(flag):
        for line in watch_help.split("\n"):
            if line.strip().startswith(flag + " "):
                after = line.split("default ", 1)[1]
                return int(after.split(" ms", 1)[0])
        return None

    return {
        # No --kv: the model's own format (the same as the model's normal_kv), and no window, no die.
        "request": {"kv": None if admit["kv"] == normal else f"{admit['kv']} (not the model's {normal})",
                    "gpu_resident": admit["gpu_resident"], "max_window": admit["max_window"]},
        "eviction_limits": {"min_keep_tokens": plan["eviction"]["min_keep_tokens"],
                            "min_keep_permille": plan["eviction"]["min_keep_permille"]},
        "engine_rule": {"engine": exact["engine"], "block_tokens": rule["block_tokens"],
                        "max_batched_tokens": rule["max_batched_tokens"], "ubatch_tokens": llama["ubatch_tokens"],
                        "seqs": llama["seqs"], "state_copies": rule["state_copies"],
                        "ssm_state_fp32": rule["ssm_state_fp32"],
                        "mtp": rule.get("mtp", False),  # written only when set
                        "hybrid_manager_off": rule.get("hybrid_manager_off", False)},
        "policy": {"zero_cost": zero_cost},
        "watcher": {"poll_interval_ms": default_ms("--interval"),
                    "pressure_poll_interval_ms": default_ms("--pressure-interval"),
                    "step_down_dwell_ms": default_ms("--dwell")},
    }


def check_defaults(a):
    cxx = json.loads(run([a.cxx, "defaults"]))
    c = json.loads(run([a.c, "defaults"]))
    import pnmem  # noqa: the package under test, on PYTHONPATH
    py = python_defaults(pnmem)
    tool = tool_defaults(a.tool, a.fixtures)
    compared = 0
    for name, side in (("C", c), ("Python", py), ("the tool", tool)):
        for group, values in side.items():
            base = group.split(" (")[0]
            for key, value in values.items() if isinstance(values, dict) else [(None, values)]:
                want = cxx[base] if key is None else cxx[base].get(key, "(no C++ default)")
                same(f"{group}.{key}" if key else group, want, value, name)
                compared += 1
    print(f"{compared} defaults compared with C++'s: C {sum(len(v) for v in c.values())}, Python "
          f"{sum(len(v) if isinstance(v, dict) else 1 for v in py.values())}, the tool "
          f"{sum(len(v) for v in tool.values())}")


# --- answers --------------------------------------------------------------------------------------

def snapshots(count, seed):
    """Lines for cxx_answers / c_answers: TOTAL AVAIL SOME FULL DIE_FREE DIE_BUDGET PROMPT MODEL RUNNING."""
    r = random.Random(seed)
    out = []
    for _ in range(count):
        total = r.choice([1, 2, 4, 8, 16, 24, 64, 128, 512]) * GiB + r.randrange(0, 64) * MiB
        band = r.random()
        if band < 0.3:  # near or inside the reserve: the bands, a CAP, eviction
            avail = r.randrange(0, min(total, 16 * GiB) // 1024) * 1024
        else:
            avail = r.randrange(0, total // 1024) * 1024
        total = total // 1024 * 1024
        some = r.choice([0, 0, 0, r.randrange(0, 3000)]) / 100
        full = r.choice([0, 0, 0, 0, r.randrange(0, 2500)]) / 100
        if r.random() < 0.3:
            budget = r.choice([16, 24, 80]) * GiB
            die_free = r.randrange(0, budget // MiB) * MiB
        else:
            budget = die_free = 0
        prompt = r.choice([0, 1, r.randrange(1, 4096), r.randrange(1, 65536), r.randrange(1, 262144)])
        model = r.randrange(len(MODELS))
        running = ",".join(str(r.choice([0, r.randrange(1, 1024), r.randrange(1, 65536)]))
                           for _ in range(r.randrange(1, 5)))
        out.append(f"{total} {avail} {some:.2f} {full:.2f} {die_free} {budget} {prompt} {model} {running}")
    return out




def tree(root):
    for d in ("proc/pressure", "proc/self"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    # No cgroup: the host's numbers are the snapshot's.
    with open(os.path.join(root, "proc/self/mountinfo"), "w") as f:
        f.write("23 1 253:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
                "24 23 0:22 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n")
    with open(os.path.join(root, "proc/meminfo"), "w") as f:
        f.write("MemTotal: 1048576 kB\nMemFree: 524288 kB\nMemAvailable: 524288 kB\n")
    with open(os.path.join(root, "proc/pressure/memory"), "w") as f:
        f.write("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")


PYTHON_SIDE = r"""
import json, os, sys
import pnmem
root, configs = sys.argv[1], sys.argv[2:]
models = [pnmem.Model.from_hf_config(c) for c in configs]   # every request field at its default
meminfo = os.path.join(root, "proc/meminfo")
pressure = os.path.join(root, "proc/pressure/memory")
def write(path, text):   # in place: the sampler keeps its files open
    with open(path, "r+") as f:
        f.write(text)
        f.truncate()
with pnmem.Watcher(root=root, poll_interval_ms=60000, pressure_poll_interval_ms=60000):
    for line in sys.stdin:
        total, avail, some, full, die_free, die_budget, prompt, model, running = line.split()
        write(meminfo, f"MemTotal: {int(total) // 1024} kB\nMemFree: {int(avail) // 1024} kB\n"
                       f"MemAvailable: {int(avail) // 1024} kB\n")
        write(pressure, f"some avg10={some} avg60=0.00 avg300=0.00 total=0\n"
                        f"full avg10={full} avg60=0.00 avg300=0.00 total=0\n")
        pnmem.set_die(0, int(die_free), int(die_budget))
        pnmem.poll_now()
        m = models[int(model)]
        a, e = pnmem.admit_after_eviction(int(prompt), [int(t) for t in running.split(",")], m)
        print(json.dumps({"status": str(a.status), "reason": str(a.reason), "fit": a.fit_tokens, "need": a.need_bytes,
                          "limit": a.limit_bytes, "level": str(a.level), "kv": str(m.request_kv),
                          "considered": e.considered, "after_eviction": e.after_eviction,
                          "evict_bytes": e.evict_bytes if e.considered else 0,
                          "cut_to": e.cut_to_tokens if e.considered else 0,
                          "freed": e.freed_bytes if e.considered else 0}), flush=True)
"""

VERDICT_STATUS = {"admit": "admitted", "cap": "capped", "reject": "denied"}


def tool_answer(tool, config, line):
    total, avail, some, full, die_free, die_budget, prompt, _, running = line.split()
    argv = [tool, "--json", "admit", "--host-total", total, "--host-avail", avail, "--psi-some", some, "--psi-full",
            full, "--prompt", prompt, "--from-hf-config", config, "--running-tokens", running]
    if int(die_budget) != 0:
        argv += ["--die", f"{die_free}:{die_budget}"]
    j = json.loads(run(argv))
    e = j["eviction"]
    return {"status": VERDICT_STATUS[j["verdict"]], "reason": j["reason"], "fit": j["fit_tokens"], "need": j["need_bytes"],
            "limit": j["limit_bytes"], "level": j["level"], "kv": j["kv"], "considered": e["considered"],
            "after_eviction": e["after_eviction"], "evict_bytes": e["evict_bytes"] if e["considered"] else 0,
            "cut_to": e.get("cut_to_tokens", 0) if e["considered"] else 0,
            "freed": e.get("freed_bytes", 0) if e["considered"] else 0}


def check_answers(a):
    configs = [os.path.join(a.fixtures, m) for m in MODELS]
    lines = snapshots(a.count, a.seed)
    stdin = "\n".join(lines) + "\n"
    cxx = [json.loads(x) for x in run([a.cxx, "answers"] + configs, stdin).splitlines()]
    with tempfile.TemporaryDirectory(prefix="bindings_agree.") as work:
        c_root = os.path.join(work, "c")
        py_root = os.path.join(work, "py")
        tree(c_root)
        tree(py_root)
        c = [json.loads(x) for x in run([a.c, "answers", c_root] + configs, stdin).splitlines()]
        py = [json.loads(x) for x in run([sys.executable, "-c", PYTHON_SIDE, py_root] + configs, stdin).splitlines()]
    tool = [tool_answer(a.tool, configs[int(line.split()[7])], line) for line in lines]
    for name, side in (("C", c), ("Python", py), ("the tool", tool)):
        if len(side) != len(lines):
            fail(f"{name} answered {len(side)} of {len(lines)} snapshots")
            continue
        differ = 0
        for i, (line, want, got) in enumerate(zip(lines, cxx, side)):
            if want != got:
                differ += 1
                if differ <= 5:
                    keys = [k for k in want if want.get(k) != got.get(k)]
                    fail(f"snapshot {i} ({line}): {name} differs from C++ in {', '.join(keys)}: C++ "
                         f"{ {k: want.get(k) for k in keys} }, {name} { {k: got.get(k) for k in keys} }")
        if differ:
            fail(f"{name}: {differ} of {len(lines)} snapshots differ from C++")
    kinds = {}
    for w in cxx:
        key = f"{w['status']} ({w['reason']})" + (", after eviction" if w["after_eviction"] else "")
        kinds[key] = kinds.get(key, 0) + 1
    print(f"{len(lines)} snapshots, 4 bindings: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    levels = {}
    for w in cxx:
        levels[w["level"]] = levels.get(w["level"], 0) + 1
    print("levels: " + ", ".join(f"{k} {v}" for k, v in sorted(levels.items())))
    # The draw must reach every answer the comparison is about, or the test proves less than it says.
    for need in ("admitted (fits)", "capped (host_budget)", "denied (host_reserve)", "denied (psi_stall)"):
        if not any(k.startswith(need) for k in kinds):
            fail(f"no snapshot was answered {need}: the draw does not cover it (seed {a.seed})")
    if not any(w["considered"] for w in cxx) or not any(w["after_eviction"] for w in cxx):
        fail("no snapshot considered eviction, or none was admitted after it: the draw does not cover it")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["defaults", "answers"])
    ap.add_argument("--cxx", required=True)
    ap.add_argument("--c", required=True)
    ap.add_argument("--tool", required=True)
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--seed", type=int, default=39)
    a = ap.parse_args()
    try:
        import pnmem  # noqa: F401
    except ImportError as e:
        print(f"SKIP: the pnmem package cannot load this build's libpnmem_c ({e.__class__.__name__}): a sanitized build")
        return 77
    if a.mode == "defaults":
        check_defaults(a)
    else:
        check_answers(a)
    if failures:
        print(f"{len(failures)} problem(s)")
        return 1
    print("OK: every binding agrees with C++")
    return 0


if __name__ == "__main__":
    sys.exit(main())
