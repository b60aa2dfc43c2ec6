#!/usr/bin/env python3
"""The pnmem tool inside a cgroup v2 leaf (suite linux-v2, run in scripts/vm-test's VM as root).

    pnmem_tool_v2.py PNMEM nested   the Done-when check: `pnmem sample --json` in a leaf with
                                    memory.max 512 MiB under a parent with memory.max 256 MiB
                                    reports v2, the 256 MiB limit and the parent as limiting
    pnmem_tool_v2.py PNMEM tool     sample (text and JSON), watch, probe and metrics in that leaf:
                                    the parent's limit, then the leaf's memory.high below it,
                                    then 160 MiB held in the leaf (container-aware avail: the
                                    level rises to WATCH and the probe says not ready at OK)

The cgroups are siblings of this process's own, in its parent, which must enable the memory
controller for its children (scripts/vm-test: /sys/fs/cgroup/vm-test). Each pnmem run moves
itself into the leaf before it starts. Exit 0 pass, 1 fail, 77 (SKIP, one line) without root or
such a parent.
"""
import json
import os
import signal
import subprocess
import sys
import time

MiB = 1 << 20


def fail(why):
    print("FAIL: " + why)
    sys.exit(1)


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


def cgroup2_mount():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            if right.split()[0] == "cgroup2":
                return left.split()[4]
    return None


def own_cgroup():
    with open("/proc/self/cgroup") as f:
        for line in f:
            if line.startswith("0::"):
                return line[3:].strip()
    return None


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


class Rig:
    """A parent cgroup (memory.max 256 MiB) with one leaf (memory.max 512 MiB), next to ours."""

    def __init__(self, pnmem):
        self.pnmem = pnmem
        mount = cgroup2_mount()
        own = own_cgroup()
        if mount is None or own is None:
            skip("no cgroup2 mounted for this process")
        here = os.path.dirname(own) if own != "/" else "/"
        self.home = mount + here
        with open(os.path.join(self.home, "cgroup.subtree_control")) as f:
            if "memory" not in f.read().split():
                skip(self.home + " does not delegate the memory controller")
        self.parent_path = os.path.join(here, "pnmem-tool-test-%d" % os.getpid())
        self.parent = mount + self.parent_path
        self.leaf_path = self.parent_path + "/leaf"
        self.leaf = mount + self.leaf_path
        self.holder = None
        os.mkdir(self.parent)
        write(self.parent + "/memory.max", str(256 * MiB))
        write(self.parent + "/cgroup.subtree_control", "+memory")
        os.mkdir(self.leaf)
        write(self.leaf + "/memory.max", str(512 * MiB))

    def close(self):
        if self.holder is not None:
            self.holder.kill()
            self.holder.wait()
        for d in (self.leaf, self.parent):
            for _ in range(100):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)

    def enter(self):
        write(self.leaf + "/cgroup.procs", str(os.getpid()))

    def run(self, *args, env=None, check=True):
        p = subprocess.run([self.pnmem] + list(args), capture_output=True, text=True, preexec_fn=self.enter,
                           env=env, timeout=60)
        if check and p.returncode != 0:
            fail("pnmem %s: exit %d: %s%s" % (" ".join(args), p.returncode, p.stdout, p.stderr))
        return p

    def sample(self):
        return json.loads(self.run("sample", "--json").stdout)

    def hold(self, nbytes):
        """A process in the leaf holding nbytes of touched anonymous memory."""
        code = "import sys; b = b'\\x01' * %d; print('ready', flush=True); sys.stdin.read()" % nbytes
        self.holder = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       text=True, preexec_fn=self.enter)
        if self.holder.stdout.readline().strip() != "ready":
            fail("the holder did not start")


def check_limited(s, limit, path, what):
    p = s["provenance"]
    got = "cgroup %s, limit %d at %s, total %d, avail %d, working set %d, max %d, high %d" % (
        p["cgroup_mode"], p["cgroup_limit_bytes"], p["limit_cgroup"], s["host_total_bytes"], s["host_avail_bytes"],
        p["cgroup_working_set_bytes"], s["cgroup_max_bytes"], s["cgroup_high_bytes"])
    if p["cgroup_mode"] != "v2" or p["cgroup_limit_bytes"] != limit or p["limit_cgroup"] != path:
        fail("%s: expected v2, limit %d at %s; got %s" % (what, limit, path, got))
    if s["host_total_bytes"] != min(limit, p["meminfo_total_bytes"]):
        fail("%s: total is not min(MemTotal, limit): %s" % (what, got))
    headroom = max(0, limit - p["cgroup_working_set_bytes"])
    if s["host_avail_bytes"] != min(p["meminfo_avail_bytes"], headroom, s["host_total_bytes"]):
        fail("%s: avail is not min(MemAvailable, limit - working set): %s" % (what, got))
    if p["sources_failed"]:
        fail("%s: sources failed: %s" % (what, p["sources_failed"]))
    return got


def nested(rig):
    s = rig.sample()
    got = check_limited(s, 256 * MiB, rig.parent_path, "pnmem sample --json in the leaf")
    if s["cgroup_max_bytes"] != 256 * MiB or s["cgroup_high_bytes"] != 0:
        fail("memory.max/high over the levels: %d/%d" % (s["cgroup_max_bytes"], s["cgroup_high_bytes"]))
    print("pnmem sample --json in %s (memory.max 512 MiB) under %s (memory.max 256 MiB): %s" %
          (rig.leaf_path, rig.parent_path, got))
    print("PASS: the 256 MiB limit, and the parent named as the limiting cgroup")


def tool(rig):
    env = dict(os.environ, PN_HOST_RESERVE_BYTES=str(48 * MiB))

    # sample, text and JSON: the parent's memory.max.
    text = rig.run("sample", env=env).stdout
    want = "cgroup: v2, limit 256.00 MiB at %s" % rig.parent_path
    if want not in text:
        fail("pnmem sample: no line with '%s' in:\n%s" % (want, text))
    print("pnmem sample: " + next(line for line in text.splitlines() if line.startswith("cgroup:")))

    # The leaf's memory.high below the parent's memory.max: the leaf is limiting.
    write(rig.leaf + "/memory.high", str(192 * MiB))
    s = rig.sample()
    got = check_limited(s, 192 * MiB, rig.leaf_path, "leaf memory.high 192 MiB")
    if s["cgroup_high_bytes"] != 192 * MiB or s["cgroup_max_bytes"] != 256 * MiB:
        fail("memory.high/max over the levels: %d/%d" % (s["cgroup_high_bytes"], s["cgroup_max_bytes"]))
    print("pnmem sample --json, leaf memory.high 192 MiB: " + got)
    write(rig.leaf + "/memory.high", "max")

    # metrics: the limit, the container's total, where the limit is.
    m = rig.run("metrics", env=env).stdout
    for line in ("pnmem_cgroup_limit_bytes %d" % (256 * MiB), "pnmem_host_total_bytes %d" % (256 * MiB)):
        if line not in m.splitlines():
            fail("pnmem metrics: no line '%s'" % line)
    info = [line for line in m.splitlines() if line.startswith("pnmem_provenance_info{")]
    if not info or 'cgroup_mode="v2"' not in info[0] or 'limit_cgroup="%s"' % rig.parent_path not in info[0]:
        fail("pnmem metrics: provenance %s" % info)
    print("pnmem metrics: " + info[0])

    # probe with nothing held: the level is OK (48 MiB reserve in a 256 MiB container).
    p = rig.run("probe", "--json", "--max-level", "ok", env=env, check=False)
    before = json.loads(p.stdout)
    if p.returncode != 0 or before["level"] != "ok":
        fail("pnmem probe --max-level ok with nothing held: exit %d, %s" % (p.returncode, p.stdout.strip()))
    print("pnmem probe --max-level ok, nothing held: exit 0, %s" % p.stdout.strip())

    # 160 MiB held in the leaf: avail = 256 MiB - working set < 2 x reserve: WATCH.
    rig.hold(160 * MiB)
    s = rig.sample()
    check_limited(s, 256 * MiB, rig.parent_path, "160 MiB held")
    if s["provenance"]["cgroup_working_set_bytes"] < 160 * MiB:
        fail("160 MiB held but a working set of %d" % s["provenance"]["cgroup_working_set_bytes"])
    p = rig.run("probe", "--json", "--max-level", "ok", env=env, check=False)
    held = json.loads(p.stdout)
    if p.returncode != 1 or held["ready"] or held["level"] == "ok":
        fail("pnmem probe --max-level ok with 160 MiB held: exit %d, %s" % (p.returncode, p.stdout.strip()))
    print("pnmem probe --max-level ok, 160 MiB held: exit 1, %s" % p.stdout.strip())
    p = rig.run("probe", "--json", "--max-level", "critical", env=env, check=False)
    if p.returncode != 0:
        fail("pnmem probe --max-level critical: exit %d, %s" % (p.returncode, p.stdout.strip()))

    # watch: three samples, each the container's view at the level probe saw.
    out = rig.run("watch", "--json", "--count", "3", "--interval", "100", env=env).stdout
    samples = [json.loads(line) for line in out.splitlines() if line.strip()]
    states = [e["state"] for e in samples if e.get("event") == "sample"]
    if len(states) != 3:
        fail("pnmem watch --count 3: %d sample lines in:\n%s" % (len(states), out))
    for st in states:
        check_limited(st, 256 * MiB, rig.parent_path, "pnmem watch")
        if st["level"] == "ok":
            fail("pnmem watch: level ok with 160 MiB held in a 256 MiB container: %s" % json.dumps(st))
    # Root in the guest: the watcher's PSI trigger (1 s window) is armed as asked.
    modes = sorted({st["provenance"]["psi_mode"] for st in states})
    if modes != ["trigger"]:
        fail("pnmem watch: psi_mode %s, expected trigger (armed as root)" % modes)
    print("pnmem watch --json --count 3: levels %s, avail %s MiB, limit at %s, psi_mode %s" % (
        [st["level"] for st in states], [st["host_avail_bytes"] // MiB for st in states],
        states[0]["provenance"]["limit_cgroup"], modes[0]))
    print("PASS: sample, watch, probe and metrics report the v2 container's limit, total and avail")


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in ("nested", "tool"):
        print("usage: pnmem_tool_v2.py PNMEM nested|tool", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        skip("not root: cannot create cgroups")
    rig = Rig(sys.argv[1])
    try:
        (nested if sys.argv[2] == "nested" else tool)(rig)
    finally:
        rig.close()
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    sys.exit(main())
