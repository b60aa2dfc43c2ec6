#!/usr/bin/env python3
"""Print the public headers under <include dir>/pnmem, one a line, relative to the
include dir ("pnmem/level.hpp", "pnmem/detail/saturating.hpp"), sorted.

Run by tests/packaging/meson.build at configure time (Meson 1.0 has no glob)."""
import pathlib
import sys

root = pathlib.Path(sys.argv[1])
headers = sorted(p.relative_to(root).as_posix() for p in (root / 'pnmem').rglob('*.hpp') if p.is_file())
if not headers:
    sys.exit(f'list_headers.py: no headers under {root / "pnmem"}')
print('\n'.join(headers))
