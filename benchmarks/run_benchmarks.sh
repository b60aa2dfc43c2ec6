#!/bin/sh
# Produce the figures of BENCHMARKS.md from a configured release build dir.
#
#   meson setup build-bench -Dbuildtype=release -Dbenchmarks=enabled
#   meson compile -C build-bench
#   benchmarks/run_benchmarks.sh build-bench
#
# Runs bench_policy with 10 repetitions (aggregates only), keeps the JSON next to
# the binary and prints the context and a Markdown table of medians.
set -eu
builddir=${1:-build-bench}
out=${2:-$builddir/bench_policy.json}
"$builddir/benchmarks/bench_policy" \
  --benchmark_repetitions=10 \
  --benchmark_report_aggregates_only=true \
  --benchmark_out="$out" --benchmark_out_format=json
python3 "$(dirname "$0")/summarize.py" "$out"
