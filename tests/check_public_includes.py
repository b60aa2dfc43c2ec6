#!/usr/bin/env python3
"""Checks what the public headers include.

  include/pnmem/**            the policy layer and the watcher: the C++ standard
                              library and other pnmem headers only (no OS, no CUDA)
  adapters/*/include/**       the adapters' public headers: the same; an adapter's
                              OS or CUDA headers belong in its .cpp files, so an
                              engine including a pnmem header gets no <poll.h>,
                              <unistd.h> or <cuda_runtime.h> it did not ask for
  include/pnmem/*.h           the C header: C's <stddef.h>, <stdint.h>, <stdbool.h>
  PER_FILE                    the exceptions, each with its reason (<pthread.h> in fork_guard.hpp)

Usage: check_public_includes.py SOURCE_ROOT. Prints every offending line; exit 1 if any."""
import pathlib
import re
import sys

CXX_STANDARD = set("""
algorithm any array atomic barrier bit bitset cassert cctype cerrno cfenv cfloat charconv chrono cinttypes
climits clocale cmath codecvt compare complex concepts condition_variable coroutine csetjmp csignal cstdarg
cstddef cstdint cstdio cstdlib cstring ctime cuchar cwchar cwctype deque exception execution filesystem
format forward_list fstream functional future initializer_list iomanip ios iosfwd iostream istream iterator
latch limits list locale map memory memory_resource mutex new numbers numeric optional ostream queue random
ranges ratio regex scoped_allocator semaphore set shared_mutex source_location span sstream stack stdexcept
stop_token streambuf string string_view syncstream system_error thread tuple type_traits typeindex typeinfo
unordered_map unordered_set utility valarray variant vector version
""".split())
C_STANDARD = {"stddef.h", "stdint.h", "stdbool.h"}
# The one OS header a public header may include, and only there: pthread_atfork, which no standard
# header offers and the watcher needs (a forked child must know its poll thread stayed behind).
# <thread> and <mutex> already include it wherever they are built on POSIX threads (libstdc++'s
# gthr-posix.h, libc++'s __threading_support), so an engine gets nothing it did not have.
PER_FILE = {"include/pnmem/detail/fork_guard.hpp": {"pthread.h"}}

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def check(path: pathlib.Path, allowed: set) -> list:
    bad = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        m = INCLUDE.match(line)
        if not m:
            continue
        kind, name = m.groups()
        if kind == '"' or name.startswith("pnmem/"):
            if not name.startswith("pnmem/"):
                bad.append(f"{path}:{n}: {line.strip()}: a public header includes pnmem headers as \"pnmem/...\"")
            continue
        if name not in allowed:
            bad.append(f"{path}:{n}: {line.strip()}: not a standard header (an OS or vendor header in a public header)")
    return bad


def main() -> int:
    root = pathlib.Path(sys.argv[1])
    dirs = [root / "include"] + sorted((root / "adapters").glob("*/include"))
    bad, seen = [], 0
    for d in dirs:
        for p in sorted(d.rglob("*")):
            if p.suffix == ".hpp":
                bad += check(p, CXX_STANDARD | PER_FILE.get(p.relative_to(root).as_posix(), set()))
            elif p.suffix == ".h":
                bad += check(p, C_STANDARD)
            else:
                continue
            seen += 1
    if seen == 0:
        print(f"check_public_includes: no headers found under {root}")
        return 1
    for b in bad:
        print(b)
    print(f"{seen} public headers checked, {len(bad)} offending includes")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
