#!/usr/bin/env python3
"""Compiles the cudart backend against the CUDA 11.4 header shim: the API floor test.

    check_api_floor.py --shim DIR --source FILE [--include DIR]... -- COMPILER [FLAGS...]

1. Compiles FILE (-c, no link) with the shim directory first on the include path and
   no real CUDA toolkit on it: every CUDA runtime symbol the backend uses without a
   CUDART_VERSION guard must be declared by the shim (tests/cuda/cuda114_shim), which
   declares only the 11.4 API surface.
2. Reads the compiler's dependency list and fails if any CUDA header other than the
   shim's was included (a toolkit in a default include directory, e.g. Debian's
   nvidia-cuda-toolkit in /usr/include, would otherwise make the test meaningless).
3. Control: a one-line program calling cudaStreamGetId (CUDA 12.0) must NOT compile
   against the shim, or the shim is too permissive to prove anything.
Exit 0 when all hold, 1 otherwise, with the compiler's output.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

# Headers of NVIDIA's toolkit the backend could pick up behind the shim's back.
CUDA_HEADER = re.compile(
    r"^(cuda[A-Za-z_0-9]*|cu[A-Z][A-Za-z_0-9]*|driver_types|vector_types|builtin_types|host_defines|"
    r"host_config|surface_types|texture_types|device_types|library_types|channel_descriptor|"
    r"driver_functions|vector_functions|crt/.*)\.(h|hpp)$")


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


def deps_of(depfile):
    text = open(depfile).read().replace("\\\n", " ")
    _, _, rest = text.partition(":")
    return [d for d in rest.split() if d]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shim", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--include", action="append", default=[])
    ap.add_argument("compiler", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cc = [c for c in a.compiler if c != "--"]
    if not cc:
        print("check_api_floor: no compiler given")
        return 1
    shim = os.path.realpath(a.shim)
    if not os.path.isfile(os.path.join(shim, "cuda_runtime_api.h")):
        print(f"check_api_floor: {shim}/cuda_runtime_api.h not found")
        return 1
    # The shim first (as a system directory, as the real toolkit is), then the project's own headers.
    inc = ["-isystem", shim] + [f"-I{d}" for d in a.include]
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        obj = os.path.join(tmp, "backend.o")
        dep = os.path.join(tmp, "backend.d")
        cmd = cc + inc + ["-c", a.source, "-o", obj, "-MD", "-MF", dep]
        print("$ " + " ".join(cmd))
        rc, out = run(cmd)
        sys.stdout.write(out)
        if rc != 0:
            print(f"FAIL: {os.path.basename(a.source)} does not compile against the CUDA 11.4 shim "
                  "(a call newer than 11.4 without a CUDART_VERSION guard?)")
            return 1
        used_shim = False
        own = [os.path.realpath(d) + os.sep for d in a.include + [os.path.dirname(a.source)]]
        for d in deps_of(dep):
            real = os.path.realpath(d)
            if os.path.dirname(real) == shim:
                used_shim = used_shim or os.path.basename(real) == "cuda_runtime_api.h"
                continue
            if any(real.startswith(o) for o in own):
                continue  # the project's own headers (pnmem/cuda/cudart_backend.hpp, ...)
            name = os.path.basename(real)
            rel = "crt/" + name if os.path.basename(os.path.dirname(real)) == "crt" else name
            if CUDA_HEADER.match(name) or CUDA_HEADER.match(rel):
                print(f"FAIL: a real CUDA header was included, not the shim: {real}")
                failed = True
        if not used_shim:
            print("FAIL: the shim's cuda_runtime_api.h was not included")
            failed = True

        # Control: the shim must refuse a 12.0 symbol.
        probe = os.path.join(tmp, "probe.cpp")
        with open(probe, "w") as f:
            f.write("#include <cuda_runtime_api.h>\n"
                    "int main() { unsigned long long id = 0; return static_cast<int>(cudaStreamGetId(nullptr, &id)); }\n")
        rc, out = run(cc + inc + ["-fsyntax-only", probe])
        if rc == 0:
            print("FAIL: control: cudaStreamGetId (CUDA 12.0) compiles against the shim: the shim is too permissive")
            failed = True
        else:
            print("control: cudaStreamGetId (12.0) is refused by the shim, as it must be")
    if failed:
        return 1
    print(f"ok: {os.path.basename(a.source)} compiles against the CUDA 11.4 API shim "
          "(CUDART_VERSION 11040) with no real toolkit header")
    return 0


if __name__ == "__main__":
    sys.exit(main())
