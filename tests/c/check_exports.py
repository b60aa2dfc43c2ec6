#!/usr/bin/env python3
"""Fails when libpnmem_c exports a C function that the abuse test never calls, or any C++ symbol.

  check_exports.py NM LIBRARY TEST_SOURCE

Every defined dynamic symbol with a C name (not a mangled C++ name, not a
reserved _name) must appear as a call, `name(`, in TEST_SOURCE (test_c_abuse.c):
a new entry point then needs its NULL and out-of-range cases there. Also fails
when the library exports none of the names (a broken nm run must not pass), and
when it exports a mangled C++ name: the library is built with hidden visibility
and only PNMEM_C_API functions are its interface. (Instantiations of the standard
library's own templates stay visible: libstdc++ declares namespace std visible.)"""
import re
import subprocess
import sys

nm, library, source = sys.argv[1:4]
out = subprocess.run([nm, '-D', '--defined-only', library], check=True, capture_output=True, text=True).stdout
exported = sorted({line.split()[-1] for line in out.splitlines()
                   if line.split() and not line.split()[-1].startswith('_')})
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
cxx = sorted({line.split()[-1] for line in out.splitlines() if line.split() and own.match(line.split()[-1])})
if cxx:
    sys.exit(f'check_exports.py: {len(cxx)} pnmem C++ symbol(s) exported, e.g. {", ".join(cxx[:3])}: only PNMEM_C_API functions may be')
if missing:
    sys.exit(f'check_exports.py: {len(missing)} exported function(s) not called by {source}: {", ".join(missing)}')
