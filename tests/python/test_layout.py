"""The ctypes mirrors in pnmem/_ffi.py have pnmem_c.h's layout: every struct's size, and every
field's name, order, offset and size, as the C compiler laid them out (tests/python/layout_dump.c,
built by meson: PNMEM_LAYOUT_DUMP)."""
import ctypes
import os
import re
import subprocess

import pytest
from pnmem import _ffi


def c_layout() -> dict:
    exe = os.environ.get("PNMEM_LAYOUT_DUMP")
    if not exe:
        pytest.skip("PNMEM_LAYOUT_DUMP is not set (meson test sets it)")
    out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
    layout: dict = {}
    for line in out.splitlines():
        struct, field, offset, size = line.split()
        layout.setdefault(struct, []).append((field, int(offset), int(size)))
    return layout


def test_every_header_struct_is_dumped_and_mirrored(header_text):
    declared = set(re.findall(r"typedef struct (\w+) \{", header_text))
    assert declared == set(c_layout()), "layout_dump.c does not print every struct of pnmem_c.h"
    assert declared == {s.__name__ for s in _ffi.STRUCTS}


@pytest.mark.parametrize("struct", _ffi.STRUCTS, ids=lambda s: s.__name__)
def test_struct_layout(struct):
    c = c_layout()[struct.__name__]
    assert c[0] == ("-", 0, ctypes.sizeof(struct)), "sizeof differs"
    c_fields = c[1:]
    py_fields = [(name, getattr(struct, name).offset, getattr(struct, name).size) for name, _ in struct._fields_]
    assert py_fields == c_fields
