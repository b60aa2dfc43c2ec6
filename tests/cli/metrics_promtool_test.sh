#!/usr/bin/env bash
# `pnmem metrics` through Prometheus's own linter. Run by `meson test` (suite cli, test
# cli_metrics_promtool).
#
#   metrics_promtool_test.sh PNMEM [FIXTURES]
#
# `promtool check metrics` (Debian's prometheus package) must accept, with no lint
# problem, `pnmem metrics` for this box and, when FIXTURES (tests/fixtures/linux) is
# given, for every fixture tree under it (--root). Exit 77 (skip), with one line, when
# promtool is not installed.
set -euo pipefail

if [ "$#" -lt 1 ] || [ "$#" -gt 2 ]; then
  echo "usage: $0 PNMEM [FIXTURES]" >&2
  exit 2
fi
pnmem=$1
fixtures=${2:-}

promtool=$(command -v promtool || true)
if [ -z "$promtool" ]; then
  echo "SKIP: not installed: promtool (package prometheus)"
  exit 77
fi

errfile=$(mktemp)
trap 'rm -f "$errfile"' EXIT
failed=0
# check NAME ARGS...: `pnmem metrics ARGS` must exit 0 and pass promtool silently.
check() {
  local name=$1 text out
  shift
  if ! text=$("$pnmem" metrics "$@" 2>"$errfile"); then
    echo "FAIL: $name: pnmem metrics $*: $(cat "$errfile")"
    failed=1
    return
  fi
  if ! out=$("$promtool" check metrics <<<"$text" 2>&1) || [ -n "$out" ]; then
    echo "FAIL: $name: promtool check metrics: $out"
    failed=1
    return
  fi
  echo "ok: $name"
}

check "this box"
if [ -n "$fixtures" ]; then
  for root in "$fixtures"/*/; do
    check "fixture $(basename "$root")" --root "$root"
  done
fi
exit "$failed"
