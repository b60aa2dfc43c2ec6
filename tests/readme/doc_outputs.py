"""What the pages show a command printing, checked against what it prints (check_readme.py's part for outputs).

Transcripts. A fenced block with no language whose first line starts with `$ ` is a transcript: each `$ CMD`
line (continued onto the next line by a trailing backslash) is followed by the lines the command prints,
stdout and stderr together, as a terminal shows them. Every command of a block runs, in order, in one bash
process in the scratch directory the code blocks were built in (the source tree's top-level entries and the
build directory, `build`, are linked there), so a variable or a file one command sets is there for the next.
`pnmem` is this build's tool, `python3` finds this checkout's package and this build's libpnmem_c, and no
PN_* variable of the caller's environment leaks in. What a command printed must match what the page shows:

  - a line `...` stands for any number of lines (none included), and `...` inside a line for any text;
  - `$ cat FILE`, where FILE does not exist when the block starts, writes the lines shown into FILE (the
    page shows the file a later command reads);
  - trailing spaces and trailing empty lines do not count.

An HTML comment on the line before the block (`<!-- output: ... -->`) says what varies from box to box:

  numbers vary         every number is any number (a run of spaces any run: columns move with widths)
  live box             numbers vary, and so do level names (ok, watch, tight, critical, unknown, upper
                       case too): a command that reads this box
  live box, any lines  as live box, and the lines are not in a fixed number or order: each line printed
                       must be one the page shows (at least one line printed)

A live-box block shows what a quiet box prints (level ok): at a higher level the answers differ (a window
capped, the ladder's `[ladder] ...` lines on stderr). Before each one the checker reads the box as a
program's watcher does (`pnmem watch`, WATCH_COUNT polls: the stall rates one sample cannot see) and, while
any poll is above ok (PSI still high after the memory-cgroup tests of suite `slow`, say), waits up to
SETTLE_S seconds for it to come back; a box that stays above ok fails the block and says what the box read,
rather than comparing a busy box's lines with a quiet one's. A live-box block whose lines differ is run once
more after the box is quiet again (a stall can start while it runs), with what the box read in between.
  not run: WHY         the block is not run (a minutes-long run in a memory cgroup, a GPU); WHY is required
                       and printed

The synopsis. A block after `<!-- synopsis: pnmem -->` lists each command `pnmem --help` lists, as
`pnmem [--json] NAME ...`; its lines name every flag `pnmem NAME --help` lists, and no flag that command lacks (a command whose lines say
MODEL takes the flags of the block's `MODEL:` and `ENGINE:` lines too).

Lists. The paragraph after `<!-- list: meson options -->` names every project option (`-Dname=`) and only
those; the one after `<!-- list: test suites -->` every test suite and only those, as "suites `a`, `b`, ...
and `z`". A paragraph after `<!-- build counts: OPTIONS; OPTIONS -->` says "N steps (M objects)" once per
configuration (`(none)`: the defaults), as a fresh `meson setup` with those options has them: `ninja -n`'s
steps, and the objects it compiles.
"""
import json
import os
import re
import shlex
import subprocess
import time

LEVEL_WORDS = r"(?:ok|watch|tight|critical|unknown|OK|WATCH|TIGHT|CRITICAL)"
NUMBER = r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?"
MARKER = "@@pnmem-doc-step"
SETTLE_S = 180   # how long a live-box block waits for a busy box to come back to level ok
WATCH_COUNT, WATCH_INTERVAL_MS = 6, 250   # how the box is read: `pnmem watch --count 6 --interval 250`
BOX_LEVELS = ("ok", "watch", "tight", "critical", "unknown")   # as `pnmem watch` prints them, best first


def marker_before(lines, fence_line):
    """The `<!-- NAME: TEXT -->` comment on the last non-blank line before a fence (1-based line), or None."""
    i = fence_line - 2
    while i >= 0 and not lines[i].strip():
        i -= 1
    if i < 0:
        return None
    m = re.match(r"^\s*<!--\s*([\w ]+?)\s*:\s*(.*?)\s*-->\s*$", lines[i])
    return (m.group(1).strip(), m.group(2).strip()) if m else None


def transcript_steps(block_lines):
    """[(command, [expected lines])] of a transcript block."""
    steps = []
    i = 0
    while i < len(block_lines):
        line = block_lines[i]
        if line.startswith("$ "):
            cmd = line[2:]
            while cmd.endswith("\\") and i + 1 < len(block_lines):
                i += 1
                cmd = cmd[:-1] + " " + block_lines[i].strip()
            steps.append([cmd, []])
        elif steps:
            steps[-1][1].append(line)
        i += 1
    for s in steps:
        while s[1] and not s[1][-1].strip():
            s[1].pop()
    return steps


def line_pattern(expected, mode):
    """A regex for one shown line, under the block's mode."""
    vary_numbers = mode in ("numbers vary", "live box", "live box, any lines")
    vary_levels = mode in ("live box", "live box, any lines")
    out = []
    for i, part in enumerate(expected.rstrip().split("...")):
        if i > 0:
            out.append(".*")
        pos = 0
        tokens = []
        token_re = r"(\s+)|(" + NUMBER + r")|(" + LEVEL_WORDS + r")\b" if vary_levels else r"(\s+)|(" + NUMBER + r")"
        for m in re.finditer(token_re, part):
            tokens.append(re.escape(part[pos:m.start()]))
            if m.group(1) is not None:
                tokens.append(r"\s+" if vary_numbers else re.escape(m.group(1)))
            elif m.group(2) is not None:
                # A number inside a word (a name such as "Qwen3", a hex id) stays as written.
                inside_word = m.start() > 0 and (part[m.start() - 1].isalpha() or part[m.start() - 1] == "_")
                tokens.append(NUMBER if vary_numbers and not inside_word else re.escape(m.group(2)))
            else:
                tokens.append(LEVEL_WORDS)
            pos = m.end()
        tokens.append(re.escape(part[pos:]))
        out.append("".join(tokens))
    return re.compile("^" + "".join(out) + r"\s*$")


def lines_match(expected, actual, mode):
    """None when `actual` (lines printed) is what `expected` (lines shown) shows, else why not."""
    actual = [a.rstrip() for a in actual]
    while actual and not actual[-1]:
        actual.pop()
    if mode == "live box, any lines":
        templates = [line_pattern(e, mode) for e in expected if e.strip() != "..."]
        if not actual:
            return "printed nothing"
        for a in actual:
            if not any(t.match(a) for t in templates):
                return f"printed a line the page shows no line like: {a!r}"
        return None
    pats = [None if e.strip() == "..." else line_pattern(e, mode) for e in expected]
    # Match with `...` as any run of lines: positions (i in pats, j in actual) reachable.
    memo = {}

    def go(i, j):
        key = (i, j)
        if key in memo:
            return memo[key]
        if i == len(pats):
            r = j == len(actual)
        elif pats[i] is None:
            r = any(go(i + 1, k) for k in range(j, len(actual) + 1))
        else:
            r = j < len(actual) and bool(pats[i].match(actual[j])) and go(i + 1, j + 1)
        memo[key] = r
        return r

    if go(0, 0):
        return None
    # Say where: the first shown line that no printed line at its place matches, walking in order.
    j = 0
    for i, p in enumerate(pats):
        if p is None:
            continue
        k = j
        while k < len(actual) and not p.match(actual[k]):
            k += 1
        if k == len(actual):
            got = actual[j] if j < len(actual) else "(nothing more)"
            return f"shown line {i + 1} {expected[i]!r} is not printed; at its place: {got!r}"
        j = k + 1
    return f"{len(actual) - j} more line(s) printed than shown, from {actual[j]!r}" if j < len(actual) else \
        "the lines differ in number"


class Outputs:
    """Runs the transcripts of the pages in a Runner's scratch directory."""

    def __init__(self, runner, ok, fail, skip):
        self.r = runner
        self.ok, self.fail, self.skip = ok, fail, skip
        self.not_run = []
        src = runner.a.source_root
        for name in os.listdir(src):
            if name.startswith(".") or name.startswith("build"):
                continue
            link = os.path.join(runner.work, name)
            if not os.path.lexists(link):
                os.symlink(os.path.join(src, name), link)

    def env(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("PN_")}
        env.pop("LD_LIBRARY_PATH", None)
        env["LC_ALL"] = "C"
        paths = []
        if self.r.a.tool:
            paths.append(os.path.dirname(os.path.abspath(self.r.a.tool)))
        env["PATH"] = os.pathsep.join(paths + [env.get("PATH", "/usr/bin:/bin")])
        env["PYTHONPATH"] = os.path.join(self.r.a.source_root, "python")
        if self.r.a.python_lib:
            env["PNMEM_LIBRARY"] = self.r.a.python_lib
        return env

    def box_level(self):
        """(the worst level of WATCH_COUNT polls of `pnmem watch`, what it printed): the box as a program's
        watcher reads it. (None, why) without a tool; ("unreadable", printed) when the tool's lines name no
        level, which fails the block: the checker must not go on unchecked because it misread the tool."""
        if not (self.r.a.tool and os.path.isfile(self.r.a.tool)):
            return None, "this build has no pnmem tool to read the box with"
        cmd = [self.r.a.tool, "watch", "--count", str(WATCH_COUNT), "--interval", str(WATCH_INTERVAL_MS)]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=self.env())
        printed = (p.stdout + p.stderr).strip()
        levels = re.findall(r"^\d\d:\d\d:\d\d (\w+) ", p.stdout, re.M)
        if p.returncode != 0 or len(levels) != WATCH_COUNT or any(lv not in BOX_LEVELS for lv in levels):
            return "unreadable", f"`{' '.join(cmd[1:])}` (exit {p.returncode}) printed:\n" + printed
        return max(levels, key=BOX_LEVELS.index), printed

    def wait_for_quiet_box(self):
        """None once the box reads level ok (at once on a quiet box), or why not after SETTLE_S seconds."""
        level, printed = self.box_level()
        if level is None:
            print(f"note: live-box blocks run unchecked for the box's level: {printed}", flush=True)
            return None
        start = time.monotonic()
        waited = False
        while level != "ok":
            if level == "unreadable":
                return "could not read the box's level: " + printed
            if waited and time.monotonic() - start >= SETTLE_S:
                return (f"the box stayed at level {level} for {SETTLE_S} s, and the page shows what a quiet box "
                        "(level ok) prints; `pnmem watch` printed:\n      " + "\n      ".join(printed.split("\n")))
            if not waited:
                print(f"the box is at level {level}; waiting up to {SETTLE_S} s for level ok before a live-box "
                      "block:\n  " + "\n  ".join(printed.split("\n")), flush=True)
                waited = True
            time.sleep(2)
            level, printed = self.box_level()
        if waited:
            print(f"the box is at level ok after {time.monotonic() - start:.0f} s", flush=True)
        return None

    def check_transcript(self, where, mode, steps):
        if mode.startswith("not run"):
            why = mode.partition(":")[2].strip()
            if not why:
                self.fail(where, "`not run` needs a reason: <!-- output: not run: WHY -->")
            else:
                self.not_run.append(f"{where}: {why}")
                print(f"not run (the page says why): {where}: {why}", flush=True)
            return
        if mode not in ("exact", "numbers vary", "live box", "live box, any lines"):
            self.fail(where, f"unknown output mode {mode!r} (exact, numbers vary, live box, live box, any lines, "
                             "not run: WHY)")
            return
        needs_tool = any(re.search(r"(^|[\s;|&(])pnmem\s", c) for c, _ in steps)
        if needs_tool and not (self.r.a.tool and os.path.isfile(self.r.a.tool)):
            self.skip(where, "a transcript of the pnmem tool, which this build did not build")
            return
        if any(re.search(r"(^|[\s;|&(])python3?\s", c) for c, _ in steps) and not self.r.a.python_lib:
            self.skip(where, "a Python transcript needs an uninstrumented libpnmem_c (this build is sanitized)")
            return
        live = mode.startswith("live box")
        if live:
            busy = self.wait_for_quiet_box()
            if busy:
                self.fail(where, busy)
                return
        script = ["exec 2>&1"]
        run_steps = []
        for n, (cmd, expected) in enumerate(steps):
            m = re.match(r"^cat\s+(\S+)\s*$", cmd)
            if m and not os.path.exists(os.path.join(self.r.work, m.group(1))):
                with open(os.path.join(self.r.work, m.group(1)), "w") as f:
                    f.write("\n".join(expected) + "\n")
                self.ok(f"{where} $ {cmd}", "the file the page shows, written for the commands after it")
                continue
            script.append(f"printf '\\n{MARKER} {n}\\n'")
            script.append(cmd)
            run_steps.append((n, cmd, expected))
        if not run_steps:
            return
        results = self.run_block(where, mode, script, run_steps)
        if live and any(why for _, why in results):
            # The box may have stalled while the block ran: run the block once more once it is quiet (the
            # wait prints what the box reads if it is not). Lines that still differ on a quiet box are the
            # page's to fix.
            print(f"{where}: the lines differ; running the block again once the box is quiet", flush=True)
            busy = self.wait_for_quiet_box()
            if busy:
                self.fail(where, busy)
                return
            results = self.run_block(where, mode, script, run_steps)
        for here, why in results:
            if why is None:
                self.ok(here, f"printed what the page shows ({mode})")
            else:
                self.fail(here, why)

    def run_block(self, where, mode, script, run_steps):
        """Runs a block's script; [(where the step is, None or why its lines differ)] for each step."""
        print(f"run: {where}: {len(run_steps)} command(s), {mode}", flush=True)
        results = []
        try:
            p = subprocess.run(["bash", "-c", "\n".join(script)], cwd=self.r.work, capture_output=True, text=True,
                               timeout=600, env=self.env())
            out = p.stdout
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"").decode("utf-8", "replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            results.append((where, "the commands ran past 600 s"))
        parts = re.split(r"\n?" + re.escape(MARKER) + r" (\d+)\n", out)
        printed = {int(parts[i]): parts[i + 1] for i in range(1, len(parts) - 1, 2)}
        for n, cmd, expected in run_steps:
            here = f"{where} $ {cmd}"
            got = printed.get(n)
            if got is None:
                results.append((here, "did not run (an earlier command ended the shell)"))
                continue
            why = lines_match(expected, got.split("\n"), mode)
            results.append((here, None if why is None else
                            why + "\n    printed:\n      " + "\n      ".join(got.rstrip("\n").split("\n")[:40])))
        return results


def help_flags(tool, command):
    """The long flags `pnmem COMMAND --help` lists (its own and the model's), without --help and --help-all."""
    p = subprocess.run([tool, command, "--help"], capture_output=True, text=True, timeout=60)
    flags = set()
    for line in p.stdout.split("\n"):
        m = re.match(r"^\s{2}(-\w,)?(--[\w-]+)(,--[\w-]+)*", line)
        if m:
            for f in re.findall(r"--[\w-]+", m.group(0)):
                flags.add(f)
    return flags - {"--help", "--help-all"}


def check_synopsis(where, lines, tool, ok, fail):
    """The synopsis block names every flag of each command's --help and no other (see the module's doc)."""
    entries = {}
    current = None
    groups = {}
    for line in lines:
        m = re.match(r"^pnmem \[--json\] ([\w-]+)\b(.*)$", line)
        g = re.match(r"^\s*([A-Z]+):(.*)$", line)
        if m:
            current = m.group(1)
            entries.setdefault(current, []).append(m.group(2))
        elif g and g.group(1) in ("MODEL", "ENGINE", "FORMAT"):
            current = None
            groups.setdefault(g.group(1), []).append(g.group(2))
            last_group = g.group(1)
        elif current is not None:
            entries[current].append(line)
        elif groups:
            groups[last_group].append(line)
    if not entries:
        fail(where, "a synopsis block with no `pnmem [--json] NAME` line")
        return
    # Every command the tool has is in the synopsis.
    top = subprocess.run([tool, "--help"], capture_output=True, text=True, timeout=60).stdout
    listed = re.findall(r"^\s{2}([a-z][\w-]*)\s{2,}", top.split("Subcommands:", 1)[-1], re.M)
    for missing in sorted(set(listed) - set(entries)):
        fail(f"{where} {missing}", f"the synopsis has no `pnmem [--json] {missing}` line (`pnmem --help` lists it)")
    group_flags = {k: set(re.findall(r"--[\w-]+", " ".join(v))) for k, v in groups.items()}
    for command, text_lines in entries.items():
        text = " ".join(text_lines)
        shown = set(re.findall(r"--[\w-]+", text)) - {"--json"}
        if re.search(r"\bMODEL\b", text):
            shown |= group_flags.get("MODEL", set()) | group_flags.get("ENGINE", set())
        have = help_flags(tool, command)
        if not have:
            fail(f"{where} {command}", f"`pnmem {command} --help` lists no flags (no such command?)")
            continue
        missing = sorted(have - shown)
        extra = sorted(shown - have)
        if missing or extra:
            fail(f"{where} {command}", "the synopsis " + (f"lacks {', '.join(missing)}" if missing else "") +
                 ("; " if missing and extra else "") + (f"names flags the command does not take: {', '.join(extra)}"
                                                          if extra else ""))
        else:
            ok(f"{where} {command}", f"every flag of `pnmem {command} --help` ({len(have)}) and no other")


def check_list(where, kind, paragraph, build_root, meson, ok, fail):
    """A paragraph that lists the project's options or test suites (see the module's doc)."""
    if kind == "meson options":
        p = subprocess.run(meson.split() + ["introspect", "--buildoptions", build_root], capture_output=True, text=True)
        have = {o["name"] for o in json.loads(p.stdout) if o.get("section") == "user"} if p.returncode == 0 else set()
        shown = set(re.findall(r"`-D([\w-]+)=", paragraph))
    elif kind == "test suites":
        p = subprocess.run(meson.split() + ["introspect", "--tests", build_root], capture_output=True, text=True)
        have = set()
        if p.returncode == 0:
            for t in json.loads(p.stdout):
                have.update(s.split(":", 1)[-1] for s in t["suite"])
        # "suites `a`, `b`, ... and `z`": the run of backticked names after the word "suites".
        m = re.search(r"suites\s+((?:`[\w-]+`(?:,\s*(?:and\s+)?|\s+and\s+)?)+)", paragraph)
        shown = set(re.findall(r"`([\w-]+)`", m.group(1))) if m else set()
    else:
        fail(where, f"unknown list {kind!r} (meson options, test suites)")
        return
    if not have:
        fail(where, f"meson introspect gave no {kind}")
        return
    missing = sorted(have - shown)
    extra = sorted(shown - have)
    if missing or extra:
        fail(where, f"the page's {kind}: " + (f"lacks {', '.join(missing)}" if missing else "") +
             ("; " if missing and extra else "") + (f"names ones this build lacks: {', '.join(extra)}" if extra else ""))
    else:
        ok(where, f"names every one of the {len(have)} {kind}")


def check_build_counts(where, configs, paragraph, source_root, meson, scratch, ok, fail):
    """`<!-- build counts: OPTS; OPTS -->`: the paragraph's "N steps (M objects)", in order, are what a fresh
    `meson setup` with each configuration's options ("(none)": the defaults) has ninja run and compile."""
    claims = re.findall(r"(\d+) steps \((\d+) objects\)", paragraph)
    configs = [c.strip() for c in configs.split(";")]
    if len(claims) != len(configs):
        fail(where, f"{len(configs)} configurations but {len(claims)} \"N steps (M objects)\" in the paragraph")
        return
    for k, (config, (steps, objects)) in enumerate(zip(configs, claims)):
        opts = [] if config == "(none)" else shlex.split(config)
        build = os.path.join(scratch, f"build-counts-{k}")
        p = subprocess.run(meson.split() + ["setup", build] + opts, cwd=source_root, capture_output=True, text=True,
                           timeout=300)
        if p.returncode != 0:
            fail(where, f"meson setup {config}: exit {p.returncode}: {p.stdout[-400:]}{p.stderr[-400:]}")
            continue
        dry = subprocess.run(["ninja", "-C", build, "-n"], capture_output=True, text=True, timeout=300)
        m = re.search(r"\[\d+/(\d+)\]", dry.stdout.strip().split("\n")[-1] if dry.stdout.strip() else "")
        targets = subprocess.run(["ninja", "-C", build, "-t", "targets", "all"], capture_output=True, text=True,
                                 timeout=300)
        have_steps = m.group(1) if m else "?"
        have_objects = str(sum(1 for line in targets.stdout.split("\n") if re.match(r"^\S+\.o:", line)))
        if (have_steps, have_objects) != (steps, objects):
            fail(where, f"{config}: the page says {steps} steps ({objects} objects); a fresh setup has {have_steps} "
                        f"steps ({have_objects} objects)")
        else:
            ok(where, f"{config}: {steps} steps ({objects} objects), as a fresh setup has")
