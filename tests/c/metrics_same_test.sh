#!/usr/bin/env bash
# The C ABI's exposition is `pnmem metrics`'s, to the byte, for the same state. Run by `meson test`
# (suite integration, test c_metrics_same).
#
#   metrics_same_test.sh PNMEM DUMP FIXTURES
#
# For every fixture tree under FIXTURES (tests/fixtures/linux), `DUMP ROOT box` (metrics_text_dump.c:
# pnmem_metrics_text from a C watcher whose sampler reads ROOT, pnmem_watcher_options.root) must equal
# `PNMEM metrics --root ROOT` byte for byte, except the value of pnmem_snapshot_age_seconds (the time
# since the sample, which moves). Both read the fixture's files and the same PN_* environment: the same
# state. Then `promtool check metrics` (Debian's prometheus package) must accept `DUMP ROOT all` (the
# box's families and the C calls' counters) silently; without promtool that part is skipped with a line,
# and the test still fails on a difference (exit 1) but otherwise exits 77 so the missing lint shows.
set -euo pipefail

if [ "$#" -ne 3 ]; then
  echo "usage: $0 PNMEM DUMP FIXTURES" >&2
  exit 2
fi
pnmem=$1
dump=$2
fixtures=$3

mask_age() { sed -E 's/^(pnmem_snapshot_age_seconds) .*/\1 AGE/'; }

failed=0
compared=0
for root in "$fixtures"/*/; do
  name=$(basename "$root")
  # A tree whose meminfo cannot be read (garbage, truncated) is answered too, with exit 1 and a warning:
  # nothing read is no all-clear. Any other status fails.
  rc=0
  want=$("$pnmem" metrics --root "$root" 2>/dev/null) || rc=$?
  if [ "$rc" -ne 0 ] && { [ "$rc" -ne 1 ] || ! grep -q '^pnmem_host_total_bytes 0$' <<<"$want"; }; then
    echo "FAIL: $name: pnmem metrics --root $root exited $rc"
    failed=1
    continue
  fi
  want=$(mask_age <<<"$want")
  got=$("$dump" "$root" box 2>/dev/null | mask_age) || {
    echo "FAIL: $name: metrics_text_dump $root box exited $?"
    failed=1
    continue
  }
  if [ "$want" != "$got" ]; then
    echo "FAIL: $name: pnmem_metrics_text differs from pnmem metrics:"
    diff <(printf '%s\n' "$want") <(printf '%s\n' "$got") | head -20 || true
    failed=1
    continue
  fi
  if ! grep -q '^pnmem_host_total_bytes ' <<<"$got"; then
    echo "FAIL: $name: no pnmem_host_total_bytes sample (nothing compared)"
    failed=1
    continue
  fi
  compared=$((compared + 1))
  echo "ok: $name: identical ($(wc -l <<<"$got") lines)"
done
if [ "$compared" -eq 0 ] && [ "$failed" -eq 0 ]; then
  echo "FAIL: no fixture under $fixtures"
  exit 1
fi

promtool=$(command -v promtool || true)
if [ -z "$promtool" ]; then
  [ "$failed" -eq 0 ] || exit 1
  echo "SKIP: not installed: promtool (package prometheus); the texts were identical"
  exit 77
fi
for root in "$fixtures"/*/; do
  name=$(basename "$root")
  text=$("$dump" "$root" all) || { echo "FAIL: $name: metrics_text_dump $root all"; failed=1; continue; }
  if ! out=$("$promtool" check metrics <<<"$text" 2>&1) || [ -n "$out" ]; then
    echo "FAIL: $name: promtool check metrics on pnmem_metrics_text(ALL): $out"
    failed=1
  else
    echo "ok: $name: promtool accepts pnmem_metrics_text(ALL)"
  fi
done
exit "$failed"
