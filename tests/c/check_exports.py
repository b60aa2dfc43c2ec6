#!/usr/bin/env python3
"""Fails when libpnmem_c exports a C function that the abuse test never calls, or anything but pnmem_
functions, or has the wrong SONAME.

  check_exports.py NM LIBRARY TEST_SOURCE [READELF SONAME]

Every defined dynamic symbol with a C name (not a mangled C++ name, not a
reserved _name) must appear as a call, `name(`, in TEST_SOURCE (test_c_abuse.c):
a new entry point then needs its NULL and out-of-range cases there. Also fails
when the library exports none of the names (a broken nm run must not pass), and
when it exports a mangled C++ name: the library is built with hidden visibility
and only PNMEM_C_API functions are its interface. With a version script
(integration/libpnmem_c.map; the linker took one when the library has a version node,
an absolute symbol such as PNMEM_C_0), every other defined symbol fails too: the
standard library's template instances included. With READELF, the library's SONAME
must be SONAME (libpnmem_c.so.<major>: a versioned one, so an ABI break can be told)."""
import re
import subprocess
import sys

nm, library, source = sys.argv[1:4]
readelf, soname = (sys.argv[4], sys.argv[5]) if len(sys.argv) > 5 else (None, None)
out = subprocess.run([nm, '-D', '--defined-only', library], check=True, capture_output=True, text=True).stdout
# (type, name) of each defined symbol, the name without its version (pnmem_read@@PNMEM_C_0).
symbols = [(f[-2], f[-1].split('@')[0]) for f in (line.split() for line in out.splitlines()) if len(f) >= 2]
nodes = [name for kind, name in symbols if kind == 'A']  # a version script's nodes: absolute symbols
exported = sorted({name for kind, name in symbols if kind != 'A' and not name.startswith('_')})
with open(source, encoding='utf-8') as f:
    text = f.read()
called = set(re.findall(r'\b([A-Za-z_]\w*)\s*\(', text))
missing = [name for name in exported if name not in called]
print(f'{len(exported)} C functions exported by {library}:')
for name in exported:
    print(f'  {name}{"" if name in called else "   <- never called by " + source}')
if not exported or not any(name.startswith('pnmem_') for name in exported):
    sys.exit('check_exports.py: no pnmem_ export found: is this libpnmem_c?')
# Symbols defined in namespace pnmem (functions, vtables, typeinfo, function-local statics); a standard
# library template instantiated on a pnmem type (std::thread's state for the watcher's lambda) is std's.
own = re.compile(r'^_Z(?:T[VIS]|Z)?N[KVRO]*5pnmem')
cxx = sorted({name for _, name in symbols if own.match(name)})
if cxx:
    sys.exit(f'check_exports.py: {len(cxx)} pnmem C++ symbol(s) exported, e.g. {", ".join(cxx[:3])}: only PNMEM_C_API functions may be')
if missing:
    sys.exit(f'check_exports.py: {len(missing)} exported function(s) not called by {source}: {", ".join(missing)}')
# The version script: its node is an absolute symbol; with one, nothing but pnmem_ functions is exported.
if readelf and not nodes:
    sys.exit('check_exports.py: no version node exported: the version script (integration/libpnmem_c.map) '
             'was not applied, so the standard library\'s instances are exported too')
if nodes:
    others = sorted(name for kind, name in symbols if kind != 'A' and not name.startswith('pnmem_'))
    if others:
        sys.exit(f'check_exports.py: {len(others)} symbol(s) exported beside the pnmem_ functions, e.g. '
                 f'{", ".join(others[:3])}: the version script must keep them local')
    print(f'version node(s): {", ".join(nodes)}; nothing else exported')
if readelf:
    dyn = subprocess.run([readelf, '-d', library], check=True, capture_output=True, text=True).stdout
    found = re.findall(r'\(SONAME\)\s+Library soname: \[([^\]]+)\]', dyn)
    if found != [soname]:
        sys.exit(f'check_exports.py: SONAME is {found[0] if found else "missing"}, expected {soname}')
    print(f'SONAME {soname}')
