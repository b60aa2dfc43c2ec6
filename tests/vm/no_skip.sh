#!/bin/sh
# Runs a real-kernel test program inside scripts/vm-test's VM, where it must not skip: there the
# VM gives it what it needs (root, cgroup2 with the memory controller delegated, PSI), so an
# exit 77 (SKIP) means the test no longer finds it, and counts as a failure (exit 1).
#   tests/vm/no_skip.sh PROGRAM [ARGS...]
"$@"
rc=$?
if [ "$rc" -eq 77 ]; then
  echo "FAIL: $1 skipped (exit 77) inside the VM, where cgroup v2 with memory and PSI are there: a skip here is a failure"
  exit 1
fi
exit "$rc"
