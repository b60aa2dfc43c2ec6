#!/usr/bin/env bash
# venv_install_test.sh PREFIX SRCDIR SCRATCH_DIR
#
# The pnmem Python package installs with pip, offline, into a fresh venv, and works there against an
# installed libpnmem_c found through pkg-config (no PNMEM_LIBRARY, no build tree):
#   1. /usr/bin/python3 -m venv SCRATCH_DIR/venv
#   2. pip install --no-index SRCDIR/python      (the in-tree PEP 517 backend: nothing downloaded)
#   3. with PKG_CONFIG_PATH = PREFIX's pkgconfig directory, from a directory outside the source tree:
#        python3 -c "import pnmem; print(pnmem.Watcher().__enter__().state().level)"
#      must print a level name.
# PREFIX is an installed pnmem (meson install, possibly relocated). Exits non-zero with a message
# saying which step failed.
set -euo pipefail

if [ $# -ne 3 ]; then
  echo "usage: $0 PREFIX SRCDIR SCRATCH_DIR" >&2
  exit 2
fi
prefix=$(cd "$1" && pwd)
srcdir=$(cd "$2" && pwd)
scratch=$3
mkdir -p "$scratch"
scratch=$(cd "$scratch" && pwd)
fail() { echo "venv_install_test: FAIL: $*" >&2; exit 1; }

interpreter=/usr/bin/python3
[ -x "$interpreter" ] || fail "$interpreter not found"
"$interpreter" -c 'import ensurepip' 2>/dev/null || fail "$interpreter has no venv support (apt-get install python3-venv)"

# The prefix's pkgconfig directory (lib/pkgconfig, lib/<triplet>/pkgconfig, share/pkgconfig).
pcfile=$(find "$prefix" -name 'pnmem-c.pc' -path '*/pkgconfig/*' -print -quit)
[ -n "$pcfile" ] || pcfile=$(find "$prefix" -name 'pnmem.pc' -path '*/pkgconfig/*' -print -quit)
[ -n "$pcfile" ] || fail "no pkgconfig/pnmem-c.pc or pnmem.pc under $prefix"
pcdir=$(dirname "$pcfile")
libdir=$(PKG_CONFIG_PATH="$pcdir" pkg-config --variable=libdir "$(basename "$pcfile" .pc)") ||
  fail "pkg-config cannot read $pcfile"
[ -e "$libdir/libpnmem_c.so" ] || fail "$pcfile says libdir=$libdir, which has no libpnmem_c.so"

venv="$scratch/venv"
rm -rf "$venv"
"$interpreter" -m venv "$venv" || fail "python3 -m venv $venv"
log="$scratch/pip.log"
if ! PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 "$venv/bin/pip" install --no-index "$srcdir/python" >"$log" 2>&1; then
  cat "$log" >&2
  fail "pip install --no-index $srcdir/python"
fi
grep -q "Successfully installed pnmem" "$log" || { cat "$log" >&2; fail "pip did not report pnmem installed"; }

# Outside the source tree (and outside the prefix): the package must come from the venv, and
# libpnmem_c from pkg-config.
run_dir="$scratch/run"
mkdir -p "$run_dir"
out=$(cd "$run_dir" && env -u PNMEM_LIBRARY -u PYTHONPATH -u LD_LIBRARY_PATH PKG_CONFIG_PATH="$pcdir" \
  "$venv/bin/python3" -c "import pnmem; print(pnmem.Watcher().__enter__().state().level)" 2>"$scratch/run.err") || {
  cat "$scratch/run.err" >&2
  fail "import pnmem and read the level from the venv"
}
case "$out" in
  ok|watch|tight|critical) ;;
  *) cat "$scratch/run.err" >&2; fail "expected a level name (ok, watch, tight, critical), got: '$out'" ;;
esac
where=$(cd "$run_dir" && env -u PNMEM_LIBRARY -u PYTHONPATH -u LD_LIBRARY_PATH PKG_CONFIG_PATH="$pcdir" \
  "$venv/bin/python3" -c "import pnmem; print(pnmem.__file__); print(pnmem.library_path)")
case "$where" in
  "$venv"/*) ;;
  *) fail "pnmem was not imported from the venv: $where" ;;
esac
echo "$where" | tail -n 1 | grep -q "^$libdir/libpnmem_c.so$" ||
  fail "libpnmem_c was not loaded from the prefix's libdir ($libdir): $where"
echo "venv_install_test: level $out (pnmem from $venv, libpnmem_c from $libdir via $pcfile)"
