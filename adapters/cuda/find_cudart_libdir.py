#!/usr/bin/env python3
"""Prints the directory holding libcudart.so (for pnmem-cuda.pc), or nothing if none is found.

Looked for, in order: $CUDA_PATH, $CUDA_HOME, $CUDA_ROOT, the toolkit of the nvcc on PATH, /usr/local/cuda;
in each, lib64/, lib/, targets/<arch>-linux/lib/.
"""
import os
import platform
import shutil

roots = [os.environ.get(v, "") for v in ("CUDA_PATH", "CUDA_HOME", "CUDA_ROOT")]
nvcc = shutil.which("nvcc")
if nvcc:
    roots.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
roots.append("/usr/local/cuda")
for root in roots:
    if not root:
        continue
    for sub in ("lib64", "lib", os.path.join("targets", platform.machine() + "-linux", "lib")):
        d = os.path.join(root, sub)
        if os.path.exists(os.path.join(d, "libcudart.so")):
            print(os.path.realpath(d))
            raise SystemExit(0)
