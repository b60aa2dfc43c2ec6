#!/usr/bin/env python3
"""Runs the C++17 consumer (main.cpp) and checks the line it prints.

  check.py run EXE
      run a consumer this build compiled (test cxx17-consumer)
  check.py build CXX MAIN_CPP SOURCE_ROOT LIBPNMEM_LINUX SCRATCH_DIR B_SANITIZE
      compile MAIN_CPP with CXX -std=c++17 -Wall -Wextra -Wpedantic -Werror against
      SOURCE_ROOT's headers, link it with LIBPNMEM_LINUX (the build's libpnmem_linux.a)
      and -lpthread, run it (test cxx17-consumer-<cxx>). Exit 77 (SKIP) when CXX is not
      installed, or when the build is sanitized (B_SANITIZE not 'none'): its library then
      needs the build compiler's sanitizer runtime, which another compiler does not link.

The line: cxx17 <level> <verdict> slots=<n>."""
import os
import re
import shutil
import subprocess
import sys

LINE = re.compile(r'^cxx17 (ok|watch|tight|critical) (admit|cap|reject) slots=[1-9][0-9]*$')


def run(exe: str) -> int:
    p = subprocess.run([exe], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    sys.stderr.write(p.stderr)
    out = p.stdout.strip()
    print(out)
    if p.returncode != 0:
        print(f'FAIL: {exe} exited {p.returncode}')
        return 1
    if not LINE.match(out):
        print(f'FAIL: expected one line "cxx17 <level> <verdict> slots=<n>", got {out!r}')
        return 1
    return 0


def build(cxx: str, main_cpp: str, root: str, lib: str, scratch: str, sanitize: str) -> int:
    compiler = shutil.which(cxx)
    if compiler is None:
        print(f'SKIP: {cxx} not found')
        return 77
    if sanitize not in ('', 'none'):
        print(f'SKIP: this build is sanitized ({sanitize}); its libpnmem_linux needs the build compiler\'s runtime')
        return 77
    os.makedirs(scratch, exist_ok=True)
    exe = os.path.join(scratch, 'consumer_cxx17')
    cmd = [compiler, '-std=c++17', '-Wall', '-Wextra', '-Wpedantic', '-Werror',
           '-I' + os.path.join(root, 'include'),
           '-I' + os.path.join(root, 'adapters', 'linux', 'include'),
           main_cpp, '-o', exe, lib, '-lpthread']
    print(' '.join(cmd))
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    if p.returncode != 0:
        print(p.stdout)
        print(f'FAIL: {cxx} could not build the C++17 consumer')
        return 1
    return run(exe)


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == 'run':
        return run(sys.argv[2])
    if len(sys.argv) == 8 and sys.argv[1] == 'build':
        return build(*sys.argv[2:])
    print(__doc__)
    return 2


if __name__ == '__main__':
    sys.exit(main())
