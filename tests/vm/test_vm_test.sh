#!/usr/bin/env bash
# scripts/vm-test's own tests (suite linux-v2):
#   -- true              exits 0
#   -- false             exits 1
#   a command that writes "out" to stdout, "err" to stderr and exits 3: exactly those bytes on
#                        the caller's stdout and stderr, nothing of the boot, exit 3
#   the guest            root, the caller's cwd and exported variables (PNMEM_*), the checkout
#                        writable, the rest of / read-only, /tmp a tmpfs, cgroup2 with memory in
#                        /vm-test's subtree_control and the command in the leaf /vm-test/command
#   a checkout under /tmp     mounted over the guest's /tmp, the command runs and writes in it
#   a kernel that is not one (PNMEM_VM_KERNEL=garbage)   exits 125 at once with one line
#   a guest that never starts the command                exits 125 after the boot limit, twice
#   --timeout 5 -- sleep 600                             exits 125 (QEMU killed) in seconds
#
#   tests/vm/test_vm_test.sh [scripts/vm-test]
# Exit 0 pass, 1 fail, 77 (SKIP, one line) when the VM cannot be set up here (scripts/vm-test
# exits 77: qemu, busybox or the kernel cannot be installed).
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd -P)
vm_test=${1:-$here/../../scripts/vm-test}
checkout=$(cd "$here/../.." && pwd -P)
work=$(mktemp -d "$checkout/build-vm-selftest.XXXXXX") || { echo "FAIL: mktemp"; exit 1; }
trap 'rm -rf "$work"' EXIT

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }

# Runs scripts/vm-test with ARGS; sets rc, out, err, secs. A VM that hangs is vm-test's 125 after
# --timeout, well inside meson's limit for this script.
run() {
  local start=$SECONDS
  "$vm_test" --timeout 90 "$@" >"$work/out" 2>"$work/err"
  rc=$?
  secs=$((SECONDS - start))
  out=$(cat "$work/out")
  err=$(cat "$work/err")
}

run -- true
if [ "$rc" -eq 77 ]; then
  echo "SKIP: scripts/vm-test cannot set up the VM here: ${err:-exit 77}"
  exit 77
fi
if [ "$rc" -eq 0 ] && [ -z "$out" ] && [ -z "$err" ]; then ok "-- true: exit 0, nothing printed (${secs} s)"
else fail "-- true: exit $rc, stdout '$out', stderr '$err'"; fi

run -- false
if [ "$rc" -eq 1 ] && [ -z "$out" ] && [ -z "$err" ]; then ok "-- false: exit 1 (${secs} s)"
else fail "-- false: exit $rc, stdout '$out', stderr '$err'"; fi

run -- sh -c 'echo out; echo err >&2; exit 3'
if [ "$rc" -eq 3 ] && [ "$(od -c "$work/out")" = "$(printf 'out\n' | od -c)" ] &&
   [ "$(od -c "$work/err")" = "$(printf 'err\n' | od -c)" ]; then
  ok "stdout 'out', stderr 'err', separately and byte for byte; exit 3 passed through (${secs} s)"
else
  fail "sh -c 'echo out; echo err >&2; exit 3': exit $rc, stdout '$out', stderr '$err'"
fi

# What the command sees. Each line is "name value"; checked below. (Expanded in the guest.)
# shellcheck disable=SC2016
probe='
echo "uid $(id -u)"
echo "cwd $(pwd)"
echo "var ${PNMEM_VM_SELFTEST:-unset}"
echo "path ${PATH:+set}"
touch "$1/written" && echo "checkout writable" || echo "checkout read-only"
touch /usr/pnmem-vm-test 2>/dev/null && echo "root writable" || echo "root read-only"
echo "tmp $(stat -f -c %T /tmp)"
echo "cgroup $(cat /proc/self/cgroup)"
echo "root_subtree $(cat /sys/fs/cgroup/cgroup.subtree_control)"
echo "parent_subtree $(cat /sys/fs/cgroup/vm-test/cgroup.subtree_control)"
echo "leaf_memory $(cat /sys/fs/cgroup/vm-test/command/memory.max)"
echo "psi $(head -c 4 /sys/fs/cgroup/vm-test/command/memory.pressure)"
echo "v1 $(grep -c " - cgroup " /proc/self/mountinfo)"
'
# shellcheck disable=SC2016  # a literal $x: the value must arrive unexpanded
(cd "$work" && PNMEM_VM_SELFTEST='it is "quoted" & $x' "$vm_test" --timeout 90 -- sh -c "$probe" sh "$work" >"$work/out" 2>"$work/err")
rc=$?
field() { sed -n "s/^$1 //p" "$work/out"; }
expect() {  # NAME VALUE
  if [ "$(field "$1")" = "$2" ]; then ok "guest: $1 = $2"; else fail "guest: $1 is '$(field "$1")', expected '$2'"; fi
}
if [ "$rc" -ne 0 ]; then
  fail "the guest probe exited $rc: $(cat "$work/out" "$work/err")"
else
  expect uid 0
  expect cwd "$work"
  # shellcheck disable=SC2016
  expect var 'it is "quoted" & $x'
  expect path set
  expect checkout writable
  expect root read-only
  expect tmp tmpfs
  expect cgroup 0::/vm-test/command
  expect leaf_memory max
  expect psi some
  expect v1 0
  case " $(field root_subtree) " in *" memory "*) ok "guest: memory on in the root's subtree_control" ;;
    *) fail "guest: root subtree_control '$(field root_subtree)' lacks memory" ;; esac
  case " $(field parent_subtree) " in *" memory "*) ok "guest: memory on in /vm-test's subtree_control" ;;
    *) fail "guest: /vm-test subtree_control '$(field parent_subtree)' lacks memory" ;; esac
  if [ -f "$work/written" ]; then ok "the guest's write reached the host"
  else fail "the guest's write to the checkout is not on the host"; fi
  [ -s "$work/err" ] && fail "the guest probe wrote to stderr: $(cat "$work/err")"
fi

# A checkout under /tmp (CI clones often are): it is mounted over the guest's /tmp tmpfs, writable,
# and the command can run in it. The script is copied into such a tree; it shares this checkout's cache.
tmp_checkout=$(mktemp -d /tmp/pnmem-vm-checkout.XXXXXX) || { echo "FAIL: mktemp /tmp"; exit 1; }
trap 'rm -rf "$work" "$tmp_checkout"' EXIT
mkdir -p "$tmp_checkout/scripts/sub" && cp "$vm_test" "$tmp_checkout/scripts/vm-test"
(cd "$tmp_checkout/scripts/sub" && PNMEM_VM_CACHE=${PNMEM_VM_CACHE:-$checkout/build-vm} \
  "$tmp_checkout/scripts/vm-test" --timeout 90 -- sh -c 'pwd; touch ../../written' >"$work/out" 2>"$work/err")
rc=$?
if [ "$rc" -eq 0 ] && [ "$(cat "$work/out")" = "$tmp_checkout/scripts/sub" ] && [ -f "$tmp_checkout/written" ] &&
   [ ! -s "$work/err" ]; then
  ok "a checkout under /tmp: the command ran in it and wrote to it"
else
  fail "a checkout under /tmp ($tmp_checkout): exit $rc, stdout '$(cat "$work/out")', stderr '$(cat "$work/err")'"
fi

head -c 1048576 /dev/urandom >"$work/not-a-kernel"
PNMEM_VM_KERNEL=$work/not-a-kernel run -- true
if [ "$rc" -eq 125 ] && [ "$(wc -l <"$work/err")" -eq 1 ] && [ -z "$out" ] && [ "$secs" -lt 60 ]; then
  ok "a kernel that does not boot: exit 125 in ${secs} s: $err"
else
  fail "a kernel that does not boot: exit $rc after ${secs} s, stdout '$out', stderr '$err'"
fi

# A kernel that boots but never starts the command (its init a shell waiting for a console): killed
# after the boot limit, booted once more, then 125.
PNMEM_VM_APPEND="rdinit=/bin/sh" PNMEM_VM_BOOT_LIMIT=10 run -- true
if [ "$rc" -eq 125 ] && [ "$(wc -l <"$work/err")" -eq 1 ] && [ -z "$out" ] && [ "$secs" -lt 60 ]; then
  ok "a guest that hangs while booting: exit 125 in ${secs} s: $err"
else
  fail "a guest that hangs while booting: exit $rc after ${secs} s, stdout '$out', stderr '$err'"
fi

run --timeout 5 -- sleep 600
if [ "$rc" -eq 125 ] && [ "$(wc -l <"$work/err")" -eq 1 ] && [ "$secs" -lt 30 ]; then
  ok "--timeout 5 -- sleep 600: exit 125 in ${secs} s: $err"
else
  fail "--timeout 5 -- sleep 600: exit $rc after ${secs} s, stderr '$err'"
fi

if [ "$failures" -gt 0 ]; then
  echo "FAIL: $failures check(s) of scripts/vm-test failed"
  exit 1
fi
echo "PASS: scripts/vm-test"
