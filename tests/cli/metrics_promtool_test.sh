#!/usr/bin/env bash
# `pnmem metrics` through Prometheus's own linter. Run by `meson test` (suite cli, test
# cli_metrics_promtool).
#
#   metrics_promtool_test.sh PNMEM [FIXTURES [ENGINE]]
#
# `promtool check metrics` (Debian's prometheus package) must accept, with no lint
# problem, `pnmem metrics` for this box and, when FIXTURES (tests/fixtures/linux) is
# given, for every fixture tree under it (--root). With ENGINE (examples/batched_decoder),
# also an engine's own /metrics text: its --metrics output after a short run, with the
# engine's counters and the model-server protocol's gauges (pnmem_queued_requests,
# pnmem_running_requests, pnmem_kv_cache_usage_ratio: engine/fleet_load.hpp), each of
# which must be there as a gauge. Exit 77 (skip), with one line, when promtool is not
# installed.
set -euo pipefail

if [ "$#" -lt 1 ] || [ "$#" -gt 3 ]; then
  echo "usage: $0 PNMEM [FIXTURES [ENGINE]]" >&2
  exit 2
fi
pnmem=$1
fixtures=${2:-}
engine=${3:-}

promtool=$(command -v promtool || true)
if [ -z "$promtool" ]; then
  echo "SKIP: not installed: promtool (package prometheus)"
  exit 77
fi

errfile=$(mktemp)
trap 'rm -f "$errfile"' EXIT
failed=0
# lint NAME TEXT: promtool must accept TEXT silently.
lint() {
  local out
  if ! out=$("$promtool" check metrics <<<"$2" 2>&1) || [ -n "$out" ]; then
    echo "FAIL: $1: promtool check metrics: $out"
    failed=1
    return 1
  fi
}
# check NAME ARGS...: `pnmem metrics ARGS` must exit 0 (or 1 with its text and a "nothing sampled"
# warning, for a tree whose meminfo cannot be read) and pass promtool silently.
check() {
  local name=$1 text rc=0
  shift
  text=$("$pnmem" metrics "$@" 2>"$errfile") || rc=$?
  if [ "$rc" -ne 0 ] && { [ "$rc" -ne 1 ] || ! grep -q '^pnmem: warning: nothing sampled: ' "$errfile"; }; then
    echo "FAIL: $name: pnmem metrics $* exited $rc: $(cat "$errfile")"
    failed=1
    return
  fi
  lint "$name" "$text" && echo "ok: $name"
}

check "this box"
if [ -n "$fixtures" ]; then
  for root in "$fixtures"/*/; do
    check "fixture $(basename "$root")" --root "$root"
  done
fi
if [ -n "$engine" ]; then
  # The exposition starts at the first HELP line, after the run's summary.
  if ! run=$("$engine" --requests 6 --duration-s 3 --metrics 2>"$errfile"); then
    echo "FAIL: engine: $engine --metrics: $(tail -3 "$errfile")"
    failed=1
  else
    text=$(sed -n '/^# HELP /,$p' <<<"$run")
    missing=()
    for family in pnmem_queued_requests pnmem_running_requests pnmem_kv_cache_usage_ratio pnmem_admissions_total; do
      grep -q "^# TYPE $family " <<<"$text" || missing+=("$family")
    done
    for family in pnmem_queued_requests pnmem_running_requests pnmem_kv_cache_usage_ratio; do
      grep -q "^# TYPE $family gauge\$" <<<"$text" || missing+=("$family as a gauge")
    done
    if [ "${#missing[@]}" -gt 0 ]; then
      echo "FAIL: engine: its metrics lack ${missing[*]}"
      failed=1
    elif lint "engine" "$text"; then
      echo "ok: engine ($(grep -cv '^#' <<<"$text") samples; $(grep -E '^pnmem_(queued_requests|running_requests|kv_cache_usage_ratio) ' <<<"$text" | tr '\n' ' '))"
    fi
  fi
fi
exit "$failed"
