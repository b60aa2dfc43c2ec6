#!/usr/bin/env python3
"""Print the public headers under <include dir>/pnmem, one a line, relative to the
include dir ("pnmem/level.hpp", "pnmem/detail/saturating.hpp"), sorted.

  list_headers.py INCLUDE_DIR [SUFFIX...]

SUFFIX: the endings to list (default .hpp): `.hpp .h` for the C++ check (the C
ABI's headers compile as C++ too), `.h` for the C one.

Run by tests/packaging/meson.build at configure time (Meson 1.0 has no glob)."""
import pathlib
import sys

root = pathlib.Path(sys.argv[1])
suffixes = tuple(sys.argv[2:]) or ('.hpp',)
headers = sorted(p.relative_to(root).as_posix() for p in (root / 'pnmem').rglob('*')
                 if p.is_file() and p.suffix in suffixes)
if not headers:
    sys.exit(f'list_headers.py: no {" ".join(suffixes)} headers under {root / "pnmem"}')
print('\n'.join(headers))
