#!/usr/bin/env python3
"""Checks README.md and the guides as a newcomer would use them: every code block, as the page shows it.

  check_readme.py SOURCE_ROOT BUILD_ROOT --cxx CMD --cc CMD [--extra-flags FLAGS] [--cuda yes|no] [--meson CMD]
                  [--tool PATH] [--python-lib PATH] [--page PATH]...

The pages are README.md, CHANGES.md, python/README.md and every docs/*.md (or the --page paths, relative to SOURCE_ROOT). Their
blocks are read from the pages at run time (no second copies). Each fenced block:

  ```cpp / ```c   A complete program whose first line names it and says how to build it,
                  `// admit.cpp: g++ -std=c++20 -I include admit.cpp -o admit && ./admit`
                  (C: `/* hello.c: gcc ... */`). The block is written to NAME in a scratch
                  directory where `include` and `adapters` lead to the source tree and `build`
                  to this build directory, and the command runs there as shown, with this
                  build's compiler in place of g++/gcc and -Wall -Wextra -Wpedantic -Werror
                  added. Or a fragment whose first line is `// from PATH`: PATH must exist in
                  the repository and hold the block's lines, in order (`// ...` lines skip).
                  Program names are unique over all the pages: a page may build another's program.
  ```sh           `bash -n`. A compiler line is run as above (once per distinct command);
                  `scripts/X` must exist and be executable; `-Dname=` options of `meson setup`
                  must be options of this build; `pkg-config` runs against a staging install
                  (`meson install --destdir`) of this build.
  ```cmake        configured and built against that staging install, in a project around
                  the block that builds the README's admit.cpp as the target it names.
  ```yaml         parsed (PyYAML; without it, a block with no pnmem command is NOT CHECKED); a
                  `command: [...]` starting with "pnmem" runs with the built tool and must exit 0
                  or 1 (not 2, a bad argument).
  ```python       compiled (syntax), then run by this interpreter in the scratch directory with
                  the package in python/ on its path and PNMEM_LIBRARY at this build's libpnmem_c
                  (--python-lib; not given in a sanitized build: NOT CHECKED); it must exit 0.
                  A block whose first line starts `# sketch` is only compiled: it is shown as a
                  sketch against another project's API that is not installed here.
                  Every block, a sketch too, is also type-checked, run or not: `mypy --strict`
                  (this interpreter's `-m mypy`, no configuration file) on the block as a file, with
                  MYPYPATH at python/, must report nothing; its lines are printed when it does. A sketch is checked
                  with --ignore-missing-imports and --allow-subclassing-any: the other project's
                  modules are not installed, so their names are Any (pnmem's still are not). When
                  this interpreter cannot import mypy (apt-get install mypy), each block's mypy
                  part is NOT CHECKED, with one line saying so.
  ``` (no lang)   output. One whose first line starts `$ ` is a transcript: its commands run here, in
                  order, and what each prints must be what the page shows (doc_outputs.py says how, and
                  how a `<!-- output: ... -->` comment before it marks what varies from box to box);
                  one after `<!-- synopsis: pnmem -->` must name every flag of each command's --help and
                  no other. Any other: left alone.
  ```python       (above) A block whose first line is `# NAME.py: python3 NAME.py` is written to NAME.py
                  and run with that command, so a transcript can show what `$ python3 NAME.py` prints.

A paragraph after `<!-- list: meson options -->` or `<!-- list: test suites -->` must name every
option or suite of this build and no other; one after `<!-- build counts: OPTIONS; ... -->` must give
the steps and objects a fresh `meson setup` with those options has (doc_outputs.py).

A block that needs something this build lacks (the CUDA toolkit, the tool) is reported as
"NOT CHECKED: ..." and the test exits 77 (Meson: SKIP), never 0, unless a block failed (1).

It also checks that each page cites nothing outside the repository: no `shared/` path, and no
`../` path that leaves SOURCE_ROOT once resolved from the page's own directory. Every relative link,
resolved from the page's directory, exists; every `#anchor` (on the page itself, or after a link to a
Markdown page) is the GitHub slug of one of that page's headings; every backticked repository path
(`include/...`, `docs/...`; from the repository root, as commands run) exists, except on a page that
cites other projects' trees (FOREIGN_PATHS). Every message names PAGE:LINE.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

import doc_outputs

COMPILERS_CXX = {"g++", "c++", "clang++"}
COMPILERS_C = {"gcc", "cc", "clang"}
WARNINGS = ["-Wall", "-Wextra", "-Wpedantic", "-Werror"]
REPO_DIRS = ("include/", "adapters/", "tests/", "examples/", "docs/", "scripts/", "tools/",
             "integration/", "benchmarks/", "fuzz/", "cmake/", ".ci/")
# Pages whose backticked paths name files in other projects' trees (vLLM's, llama.cpp's), not this one.
FOREIGN_PATHS = {"docs/engine-rules-research.md"}

failures = []
not_checked = []
checked = []


def fail(where, msg):
    failures.append(f"{where}: {msg}")
    print(f"FAIL: {where}: {msg}", flush=True)


def ok(where, msg):
    checked.append(where)
    print(f"ok: {where}: {msg}", flush=True)


def skip(where, msg):
    not_checked.append(f"{where}: {msg}")
    print(f"NOT CHECKED: {where}: {msg}", flush=True)


def blocks(text, page):
    """(line number of the opening fence, lang, [lines]) for each fenced block."""
    out, cur = [], None
    for n, line in enumerate(text.split("\n"), 1):
        m = re.match(r"^```\s*([\w+-]*)\s*$", line)
        if cur is None and m:
            cur = (n, m.group(1).lower(), [])
        elif cur is not None and line.strip() == "```":
            out.append(cur)
            cur = None
        elif cur is not None:
            cur[2].append(line)
    if cur is not None:
        fail(f"{page}:{cur[0]}", "fence never closed")
    return out


def header(lines, lang):
    """('program', name, command) | ('fragment', path, None) | (None, None, None)."""
    if not lines:
        return None, None, None
    first = lines[0].strip()
    m = re.match(r"^(?://|#|/\*)\s*from\s+(\S+?)\s*(?:\*/)?$", first)
    if m:
        return "fragment", m.group(1), None
    if lang in ("cpp", "c++", "c"):
        m = re.match(r"^(?://|/\*)\s*([\w.-]+\.(?:cpp|cc|c)):\s*(.+?)\s*(?:\*/)?$", first)
        if m:
            return "program", m.group(1), m.group(2)
    return None, None, None


def check_fragment(where, src_root, path, lines):
    full = os.path.join(src_root, path)
    if not os.path.isfile(full):
        fail(where, f"cut from {path}, which does not exist")
        return
    have = [l.strip() for l in open(full, encoding="utf-8").read().split("\n")]
    i = 0
    for want in (l.strip() for l in lines[1:]):
        if not want or want in ("...", "// ...", "# ...", "/* ... */"):
            continue
        while i < len(have) and have[i] != want:
            i += 1
        if i == len(have):
            fail(where, f"{path} does not hold this line (in this order): {want}")
            return
        i += 1
    ok(where, f"fragment of {path}")


class Runner:
    def __init__(self, args):
        self.a = args
        self.work = tempfile.mkdtemp(prefix="readme_blocks.")
        os.symlink(os.path.join(args.source_root, "include"), os.path.join(self.work, "include"))
        os.symlink(os.path.join(args.source_root, "adapters"), os.path.join(self.work, "adapters"))
        os.symlink(args.build_root, os.path.join(self.work, "build"))
        self.ran = {}  # command as shown -> (ok, message)
        self.stage = None
        self.mypy = None  # whether this interpreter imports mypy (asked at the first python block)
        self.python_blocks = 0
        self.cuda_root = next((os.environ[v] for v in ("CUDA_PATH", "CUDA_HOME", "CUDA_ROOT")
                               if os.environ.get(v)), "/usr/local/cuda")

    def shell(self, cmd, timeout=600, env=None):
        # Without Meson's LD_LIBRARY_PATH: a program must find libpnmem_c.so the way the README says.
        env = dict(env if env is not None else os.environ)
        env.pop("LD_LIBRARY_PATH", None)
        p = subprocess.run(["bash", "-c", cmd], cwd=self.work, capture_output=True, text=True,
                           timeout=timeout, env=env)
        return p.returncode, (p.stdout + p.stderr).strip()

    def compile_line(self, where, cmd):
        """Runs a g++/gcc command line as shown; the build's compiler replaces the first word."""
        if cmd in self.ran:
            good, msg = self.ran[cmd]
            (ok if good else fail)(where, f"same command as above: {msg}")
            return
        words = cmd.split(None, 1)
        if "cudart" in cmd and self.a.cuda != "yes":
            skip(where, "needs the CUDA toolkit, which this build did not find (meson option `cuda`): " + cmd)
            return
        compiler = self.a.cxx if words[0] in COMPILERS_CXX else self.a.cc
        extra = self.a.extra_flags.split()
        if extra and words[0] in COMPILERS_C and "clang" in compiler:
            # A sanitized libpnmem_c.so carries UBSan's C++ checks (vptr): clang's C driver links
            # their runtime, and the C++ library it needs, only when asked.
            extra += ["-fsanitize-link-c++-runtime", "-lstdc++"]
        real = compiler + " " + " ".join(WARNINGS + extra) + " " + words[1]
        real = real.replace("/usr/local/cuda", self.cuda_root)
        print(f"run: {where}: {cmd}", flush=True)
        rc, out = self.shell(real)
        if out:
            print("    " + out.replace("\n", "\n    "), flush=True)
        good = rc == 0
        msg = "built and ran" if "./" in cmd else "built"
        self.ran[cmd] = (good, msg if good else f"exit {rc}")
        if good:
            ok(where, msg)
        else:
            fail(where, f"exit {rc} from: {real}")

    def staging(self):
        """An install of this build into a scratch DESTDIR: (pkg-config dir, CMake package dir)."""
        if self.stage is None:
            dest = os.path.join(self.work, "stage")
            # Every install target is among the test's depends. No --tags: the CMake files carry none.
            cmd = f"{self.a.meson} install -C {shlex.quote(self.a.build_root)} --no-rebuild --quiet " \
                  f"--destdir {shlex.quote(dest)}"
            rc, out = self.shell(cmd)
            if rc != 0:
                self.stage = ""
                fail("staging install", f"exit {rc} from {cmd}\n{out}")
            else:
                found = [r for r, _, fs in os.walk(dest) if "pnmem.pc" in fs]
                cmake = [r for r, _, fs in os.walk(dest) if "pnmemConfig.cmake" in fs]
                self.stage = (found[0] if found else "", cmake[0] if cmake else "")
        return self.stage

    def python_block(self, where, lines):
        src = "\n".join(lines) + "\n"
        try:
            compile(src, where, "exec")
        except SyntaxError as e:
            fail(where, f"not valid Python: {e}")
            return
        named = re.match(r"^#\s*([\w.-]+\.py):\s*(python3? \1)\s*$", lines[0]) if lines else None
        sketch = bool(lines) and lines[0].startswith("# sketch")
        self.mypy_block(where, src, sketch)
        if sketch:
            ok(where, "compiles (a sketch: not run)")
            return
        if not self.a.python_lib:
            skip(where, "a Python block needs an uninstrumented libpnmem_c (this build is sanitized)")
            return
        env = dict(os.environ)
        env.pop("LD_LIBRARY_PATH", None)
        env["PYTHONPATH"] = os.path.join(self.a.source_root, "python")
        env["PNMEM_LIBRARY"] = self.a.python_lib
        if named:  # the file a transcript may run again: `$ python3 NAME.py`
            with open(os.path.join(self.work, named.group(1)), "w") as f:
                f.write(src)
            argv = [sys.executable, named.group(1)]
        else:
            argv = [sys.executable, "-c", src]
        p = subprocess.run(argv, cwd=self.work, capture_output=True, text=True, timeout=120, env=env)
        out = (p.stdout + p.stderr).strip()
        (ok if p.returncode == 0 else fail)(where, f"python exit {p.returncode}: {out[-400:]}")

    def mypy_block(self, where, src, sketch):
        """`mypy --strict` on one python block (the module docstring says how)."""
        where = f"{where} mypy"
        if self.mypy is None:
            p = subprocess.run([sys.executable, "-c", "import mypy"], capture_output=True, text=True)
            self.mypy = p.returncode == 0
        if not self.mypy:
            skip(where, f"mypy is not importable by {sys.executable} (apt-get install mypy): not type-checked")
            return
        self.python_blocks += 1
        path = os.path.join(self.work, f"python_block_{self.python_blocks}.py")
        with open(path, "w") as f:
            f.write(src)
        flags = ["--ignore-missing-imports", "--allow-subclassing-any"] if sketch else []
        # One cache per set of flags, in the scratch directory: pnmem is analysed once, not per block.
        cache = os.path.join(self.work, ".mypy_cache" + ("_sketch" if sketch else ""))
        env = dict(os.environ, MYPYPATH=os.path.join(self.a.source_root, "python"))
        p = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--config-file", "", "--cache-dir", cache]
                           + flags + [path],
                           cwd=self.work, capture_output=True, text=True, timeout=300, env=env)
        out = (p.stdout + p.stderr).strip()
        for name in (path, os.path.basename(path)):  # mypy names it relative to cwd, or as given
            out = out.replace(name + ":", "block:")  # block:LINE: the line within the block
        how = "mypy --strict" + "".join(f" {f}" for f in flags)
        if p.returncode == 0:
            ok(where, f"{how}: no issues")
        else:
            fail(where, f"{how}: exit {p.returncode}:\n    " + out.replace("\n", "\n    "))

    def sh_block(self, where, lines, src_root, names):
        text = "\n".join(lines) + "\n"
        p = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
        if p.returncode != 0:
            fail(where, "bash -n: " + p.stderr.strip())
            return
        for k, raw in enumerate(lines):
            cmd = raw.split(" #")[0].strip() if not raw.lstrip().startswith("#") else ""
            if not cmd:
                continue
            here = f"{where}+{k + 1}"
            try:
                words = shlex.split(cmd, comments=True)
            except ValueError as e:  # a line continued with '\\', or an open quote: the checker reads lines
                fail(here, f"cannot split the line into words ({e}); keep each command on one line: {cmd}")
                continue
            env_words = 0
            while env_words < len(words) and re.match(r"^[A-Z_]+=", words[env_words]):
                env_words += 1
            prog = words[env_words] if env_words < len(words) else ""
            if prog in COMPILERS_CXX | COMPILERS_C:
                if not any(n in words for n in names):
                    fail(here, f"builds a file no program block of the pages defines ({', '.join(sorted(names))})")
                else:
                    self.compile_line(here, cmd)
            elif prog.startswith("scripts/"):
                path = os.path.join(src_root, prog)
                if os.path.isfile(path) and os.access(path, os.X_OK):
                    ok(here, f"{prog} exists (not run here: it builds or runs for minutes)")
                else:
                    fail(here, f"{prog} is not an executable script in the repository")
            elif prog == "meson" and len(words) > env_words + 1 and words[env_words + 1] == "setup":
                opts = [w[2:].split("=")[0] for w in words if w.startswith("-D")]
                unknown = [o for o in opts if o not in self.options()]
                if unknown:
                    fail(here, "unknown meson options: " + ", ".join(unknown))
                else:
                    ok(here, "syntax and every -D option checked (not run: a whole new build)")
            elif prog == "pkg-config":
                stage = self.staging()
                if not stage or not stage[0]:
                    fail(here, "no pnmem.pc in the staging install")
                    continue
                env = dict(os.environ, PKG_CONFIG_PATH=stage[0])
                rc, out = self.shell(cmd, env=env)
                (ok if rc == 0 else fail)(here, f"exit {rc} against a staging install: {out}")
            elif prog == "meson" and len(words) > env_words + 1 and words[env_words + 1] == "test":
                ok(here, "syntax checked (not run: runs a whole suite)")
            else:
                ok(here, "syntax checked only")

    def options(self):
        if not hasattr(self, "_options"):
            p = subprocess.run(self.a.meson.split() + ["introspect", "--buildoptions", self.a.build_root],
                               capture_output=True, text=True)
            self._options = {o["name"] for o in json.loads(p.stdout)} if p.returncode == 0 else set()
        return self._options

    def cmake_block(self, where, lines, programs):
        if not shutil.which("cmake"):
            skip(where, "cmake not found")
            return
        target = None
        for l in lines:
            m = re.search(r"target_link_libraries\(\s*(\w+)", l)
            if m:
                target = m.group(1)
        cpp = next((n for n in programs if n.endswith(".cpp") and "-I include " in programs[n]
                    and "build/" not in programs[n]), None)
        if target is None or cpp is None:
            fail(where, "expected a target_link_libraries(TARGET ...) line and a header-only C++ program")
            return
        stage = self.staging()
        if not stage or not stage[1]:
            fail(where, "no pnmemConfig.cmake in the staging install")
            return
        proj = os.path.join(self.work, "cmake-project")
        os.makedirs(proj, exist_ok=True)
        shutil.copy(os.path.join(self.work, cpp), proj)
        with open(os.path.join(proj, "CMakeLists.txt"), "w") as f:
            f.write("cmake_minimum_required(VERSION 3.14)\nproject(readme_block LANGUAGES CXX)\n"
                    f"add_executable({target} {cpp})\n" + "\n".join(lines) + "\n")
        env = dict(os.environ, CXX=self.a.cxx.split()[0])
        cmd = (f"cmake -S {proj} -B {proj}/build -DCMAKE_PREFIX_PATH={shlex.quote(stage[1])} >/dev/null && "
               f"cmake --build {proj}/build >/dev/null && {proj}/build/{target}")
        rc, out = self.shell(cmd, env=env)
        (ok if rc == 0 else fail)(where, f"exit {rc}: configured, built {cpp} as {target} and ran it "
                                         f"against a staging install: {out}")

    def yaml_block(self, where, lines):
        text = "\n".join(lines)
        try:
            import yaml
        except ImportError:
            yaml = None
        if yaml is not None:
            try:
                yaml.safe_load(text)
            except yaml.YAMLError as e:
                fail(where, f"not valid YAML: {e}")
                return
        m = re.search(r"command:\s*(\[.*\])", text)
        argv = json.loads(m.group(1)) if m else []
        if not argv or argv[0] != "pnmem":
            if yaml is None:
                skip(where, "a yaml block without a pnmem command, and no PyYAML (python3-yaml) to parse it")
            else:
                ok(where, "parses as YAML (no pnmem command in it to run)")
            return
        if not self.a.tool or not os.path.isfile(self.a.tool):
            skip(where, "the pnmem tool is not built here")
            return
        p = subprocess.run([self.a.tool] + argv[1:], capture_output=True, text=True, timeout=60)
        (ok if p.returncode in (0, 1) else fail)(
            where, f"{' '.join(argv)} exit {p.returncode}: {(p.stdout + p.stderr).strip()}")


def slug(heading):
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors_of(text):
    """The anchors GitHub gives a page's headings (outside code blocks; a repeated one gets -1, -2, ...)."""
    seen, out, in_code = {}, set(), False
    for line in text.split("\n"):
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not re.match(r"^#{1,6} ", line):
            continue
        a = slug(line.lstrip("#"))
        n = seen.get(a, 0)
        seen[a] = n + 1
        out.add(a if n == 0 else f"{a}-{n}")
    return out


_anchor_cache = {}


def page_anchors(path):
    if path not in _anchor_cache:
        _anchor_cache[path] = anchors_of(open(path, encoding="utf-8").read())
    return _anchor_cache[path]


def inside(root, path):
    return os.path.commonpath([root, path]) == root


def check_citations(page, text, src_root):
    """Links, anchors and paths of one page (PAGE relative to src_root)."""
    here_dir = os.path.dirname(os.path.join(src_root, page))
    anchors = anchors_of(text)
    foreign = page in FOREIGN_PATHS
    in_code = False
    for n, line in enumerate(text.split("\n"), 1):
        where = f"{page}:{n}"
        if re.search(r"(?<![\w/.-])shared/", line):
            fail(where, "cites shared/, which is not in the repository")
        prose = line if in_code else re.sub(r"\]\([^)]*\)", "]()", line)  # link targets: checked below
        for up in re.findall(r"(?<![\w.])((?:\.\./)+[^\s)`'\"\]#]*)", prose):
            if not inside(src_root, os.path.normpath(os.path.join(here_dir, up))):
                fail(where, f"cites {up}, outside the repository")
        if line.startswith("```"):
            in_code = not in_code
        if in_code or line.startswith("```"):
            continue  # links and paths are prose's; code blocks are checked as code
        for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", line):
            if re.match(r"^[a-z]+:", target):
                continue  # https://, mailto:
            path, _, anchor = target.partition("#")
            if not path:
                if anchor not in anchors:
                    fail(where, f"links to #{anchor}, which no heading of {page} has")
                continue
            full = os.path.normpath(os.path.join(here_dir, path))
            if not inside(src_root, full):
                fail(where, f"links to {target}, outside the repository")
            elif not os.path.exists(full):
                fail(where, f"links to {path} ({os.path.relpath(full, src_root)}), which is not in the repository")
            elif anchor and full.endswith(".md") and anchor not in page_anchors(full):
                fail(where, f"links to {target}: no heading of {os.path.relpath(full, src_root)} has #{anchor}")
        if foreign:
            continue
        for tok in re.findall(r"`([^`\s]+)`", line):
            tok = tok.rstrip(",.;:")
            if not tok.startswith(REPO_DIRS) or re.search(r"[*<>{}]|\.\.\.", tok):
                continue
            if not os.path.exists(os.path.join(src_root, tok)):
                fail(where, f"names `{tok}`, which is not in the repository")


def default_pages(src_root):
    docs = sorted(f"docs/{f}" for f in os.listdir(os.path.join(src_root, "docs")) if f.endswith(".md"))
    return ["README.md", "CHANGES.md", "python/README.md"] + docs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("source_root")
    ap.add_argument("build_root")
    ap.add_argument("--cxx", required=True)
    ap.add_argument("--extra-flags", default="", help="flags the build compiles with that a program linking it needs (-fsanitize=...)")
    ap.add_argument("--cc", required=True)
    ap.add_argument("--cuda", default="no")
    ap.add_argument("--meson", default="meson")
    ap.add_argument("--tool", default="")
    ap.add_argument("--python-lib", default="", help="libpnmem_c.so for ```python blocks (not in a sanitized build)")
    ap.add_argument("--page", action="append", default=[],
                    help="a page to check, relative to SOURCE_ROOT (repeatable; default: README.md, CHANGES.md, docs/*.md)")
    a = ap.parse_args()
    a.source_root = os.path.abspath(a.source_root)
    a.build_root = os.path.abspath(a.build_root)
    if a.python_lib:  # the blocks run in a scratch directory: a relative path would not lead there
        a.python_lib = os.path.abspath(a.python_lib)
    pages = a.page or default_pages(a.source_root)

    found = []  # (page, line, lang, lines) over every page, in page order
    markers = {}  # (page, line) -> the <!-- NAME: TEXT --> comment before that block
    lists = []  # (page, line, kind, paragraph)
    for page in pages:
        path = os.path.join(a.source_root, page)
        if not os.path.isfile(path):
            fail(page, "no such page")
            continue
        text = open(path, encoding="utf-8").read()
        check_citations(page, text, a.source_root)
        page_blocks = blocks(text, page)
        print(f"page: {page}: {len(page_blocks)} code blocks", flush=True)
        found += [(page, n, lang, lines) for n, lang, lines in page_blocks]
        page_lines = text.split("\n")
        for n, _, _ in page_blocks:
            m = doc_outputs.marker_before(page_lines, n)
            if m:
                markers[(page, n)] = m
        for i, line in enumerate(page_lines):
            m = re.match(r"^\s*<!--\s*(list|build counts):\s*(.*?)\s*-->\s*$", line)
            if m:
                para = []
                for follow in page_lines[i + 1:]:
                    if not follow.strip() and para:
                        break
                    para.append(follow)
                lists.append((page, i + 1, m.group(1), m.group(2), " ".join(para)))
    r = Runner(a)
    outputs = doc_outputs.Outputs(r, ok, fail, skip)
    transcripts = []  # run after every block is built: a transcript may run any page's program
    try:
        # Write every program first: a sh block, on any page, may build any of them.
        programs, defined_at = {}, {}
        for page, n, lang, lines in found:
            kind, name, cmd = header(lines, lang)
            if kind == "program":
                if name in programs:
                    fail(f"{page}:{n}", f"a second program named {name} (the first: {defined_at[name]})")
                    continue
                programs[name] = cmd
                defined_at[name] = f"{page}:{n}"
                with open(os.path.join(r.work, name), "w") as f:
                    f.write("\n".join(lines) + "\n")
        for page, n, lang, lines in found:
            where = f"{page}:{n} ```{lang}"
            kind, name, cmd = header(lines, lang)
            if kind == "fragment":
                check_fragment(where, a.source_root, name, lines)
            elif lang in ("cpp", "c++", "c"):
                if kind != "program":
                    fail(where, "neither a complete program (first line `// NAME.cpp: BUILD COMMAND`, "
                                "C: `/* NAME.c: BUILD COMMAND */`) nor a fragment (`// from PATH`)")
                    continue
                words = cmd.split()
                if words[0] not in (COMPILERS_C if lang == "c" else COMPILERS_CXX) or name not in words:
                    fail(where, f"the first line's command must build {name} with "
                                f"{'gcc' if lang == 'c' else 'g++'}: {cmd}")
                    continue
                r.compile_line(where, cmd)
            elif lang in ("sh", "bash", "shell"):
                r.sh_block(where, lines, a.source_root, set(programs))
            elif lang == "cmake":
                r.cmake_block(where, lines, programs)
            elif lang == "yaml":
                r.yaml_block(where, lines)
            elif lang == "python":
                r.python_block(where, lines)
            elif lang in ("", "text", "console"):
                marker = markers.get((page, n))
                if lines and lines[0].startswith("$ "):
                    mode = marker[1] if marker and marker[0] == "output" else "exact"
                    transcripts.append((f"{page}:{n}", mode, doc_outputs.transcript_steps(lines)))
                elif marker and marker[0] == "output":
                    fail(where, "an <!-- output: ... --> comment before a block that is not a transcript "
                                "(its first line must be `$ COMMAND`)")
                elif marker and marker[0] == "synopsis":
                    if a.tool and os.path.isfile(a.tool):
                        doc_outputs.check_synopsis(where, lines, a.tool, ok, fail)
                    else:
                        skip(where, "the synopsis of the pnmem tool, which this build did not build")
                # else: output shown without its command (checked elsewhere, e.g. test_c_explain), or prose
            else:
                skip(where, f"no checker for ```{lang} blocks")
        for where, mode, steps in transcripts:
            outputs.check_transcript(where, mode, steps)
        for page, n, what, kind, para in lists:
            if what == "list":
                doc_outputs.check_list(f"{page}:{n}", kind, para, a.build_root, a.meson, ok, fail)
            else:
                doc_outputs.check_build_counts(f"{page}:{n}", kind, para, a.source_root, a.meson, r.work, ok, fail)
    finally:
        shutil.rmtree(r.work, ignore_errors=True)

    print(f"\n{len(pages)} pages, {len(found)} code blocks: {len(checked)} checked, {len(failures)} failed, "
          f"{len(not_checked)} NOT CHECKED")
    print(f"{len(outputs.not_run)} transcripts not run, each with the page's reason:" if outputs.not_run else
          "every transcript ran")
    for m in outputs.not_run:
        print(f"  not run: {m}")
    for m in not_checked:
        print(f"NOT CHECKED: {m}")
    for m in failures:
        print(f"FAIL: {m}")
    if failures:
        return 1
    return 77 if not_checked else 0


if __name__ == "__main__":
    sys.exit(main())
