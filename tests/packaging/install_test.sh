#!/usr/bin/env bash
# Install pnmem into a temporary prefix and build a consumer program against the
# install three ways. Run by `meson test` (suite packaging, test "install").
#
#   install_test.sh SRCDIR SCRATCH_PARENT VERSION CXX...
#
#   SRCDIR          the pnmem source tree
#   SCRATCH_PARENT  a directory (the build directory) for this run's scratch dir
#   VERSION         meson.project_version(): what every consumer must report
#   CXX...          the compiler command (meson's cxx.cmd_array(), maybe with ccache)
#
# Steps:
#   1. configure a separate build of SRCDIR (tools, tests and benchmarks disabled,
#      so nothing here depends on them building), `meson install` it into
#      <scratch>/stage, check the installed file set, then move the whole prefix to
#      <scratch>/moved: everything below uses only the moved tree, so the
#      pkg-config and CMake files must be relocatable.
#   2. pkg-config: `pkg-config --cflags pnmem`, compile consumer/main.cpp, run it.
#   3. CMake: find_package(pnmem X.Y REQUIRED) + pnmem::pnmem (consumer/CMakeLists.txt
#      also checks the version-compatibility rules), build, run.
#   4. Meson: consumer/meson.build with the source tree as subprojects/pnmem;
#      dependency('pnmem') must come from meson.override_dependency, build, run.
#   5. The C ABI: a C11 program includes pnmem/pnmem_c.h and its former name
#      pnmem/pnmem.h (kept for one release), links the installed libpnmem_c, runs.
# Every run must print the expected plan. Exit 77 (skip) if cmake or pkg-config is
# missing. The scratch dir is removed on success and kept (path printed) on failure.
set -euo pipefail

if [ "$#" -lt 4 ]; then
  echo "usage: $0 SRCDIR SCRATCH_PARENT VERSION CXX..." >&2
  exit 2
fi
srcdir=$(cd "$1" && pwd)
scratch_parent=$2
version=$3
shift 3
cxx_cmd=("$@")

for tool in cmake pkg-config meson; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "SKIP: $tool not found on PATH"
    exit 77
  fi
done

mkdir -p "$scratch_parent"
tmp=$(mktemp -d "$scratch_parent/install-test.XXXXXX")
cleanup() {
  rc=$?
  if [ "$rc" -eq 0 ]; then
    rm -rf "$tmp"
  else
    echo "FAILED (exit $rc); scratch files kept in $tmp" >&2
  fi
}
trap cleanup EXIT

step() { printf '\n=== %s\n' "$*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

# The compiler: a leading ccache/sccache is a launcher, the last word the compiler.
compiler=${cxx_cmd[${#cxx_cmd[@]} - 1]}
launcher=("${cxx_cmd[@]:0:${#cxx_cmd[@]} - 1}")
compiler_path=$(command -v "$compiler") || fail "compiler $compiler not found"
export CXX="${cxx_cmd[*]}"  # for the meson setups below

expected="pnmem $version
level tight
plan max_slots=4 prefill_window=2048 force_kv_q4=1 kv_evict=1
scratch 1.50 GiB"

check_output() {  # check_output WHAT PROGRAM
  local out
  out=$("$2") || fail "$1: consumer exited with $?"
  printf '%s\n' "$out"
  if [ "$out" != "$expected" ]; then
    diff <(printf '%s\n' "$expected") <(printf '%s\n' "$out") >&2 || true
    fail "$1: consumer output differs from the expected output (diff above: < expected, > actual)"
  fi
  echo "ok: $1"
}

# --- 1. install ------------------------------------------------------------------
step "install $srcdir into $tmp/stage"
meson setup "$tmp/build" "$srcdir" --prefix "$tmp/stage" \
  -Dtools=disabled -Dtests=disabled -Dbenchmarks=disabled >"$tmp/setup.log" 2>&1 \
  || { cat "$tmp/setup.log"; fail "meson setup of the install build failed"; }
meson install -C "$tmp/build" --quiet >"$tmp/install.log" 2>&1 \
  || { cat "$tmp/install.log"; fail "meson install failed"; }

mv "$tmp/stage" "$tmp/moved"
prefix=$tmp/moved
rm -rf "$tmp/build"  # nothing may refer back to the build directory either

(cd "$prefix" && find . -type f | sed 's|^\./||' | LC_ALL=C sort) >"$tmp/installed.txt"
cat "$tmp/installed.txt"

# The headers: exactly the source tree's include/pnmem, plus this platform's
# adapter headers (adapters/<os>/include/pnmem/<os>/), the platform selector
# (adapters/platform/include/pnmem/platform_sampler.hpp) and the model-files readers
# (adapters/model_files/include/pnmem/model_files/).
adapter_includes=("$srcdir/adapters/model_files/include")
[ "$(uname -s)" = Linux ] && adapter_includes+=("$srcdir/adapters/linux/include")
[ -d "$srcdir/adapters/platform/include" ] && adapter_includes+=("$srcdir/adapters/platform/include")
diff <(for d in "$srcdir/include" "${adapter_includes[@]}"; do (cd "$d" && find pnmem -type f); done | LC_ALL=C sort) \
     <(cd "$prefix/include" && find pnmem -type f | LC_ALL=C sort) \
  || fail "installed headers differ from the source trees (diff above: < source, > installed)"

pcfile=$(grep '/pkgconfig/pnmem\.pc$' "$tmp/installed.txt" | head -n 1) || true
cmakedir=$(grep '/cmake/pnmem/pnmemConfig\.cmake$' "$tmp/installed.txt" | head -n 1) || true
cmakedir=${cmakedir%/*}
[ -n "$pcfile" ] || fail "no pkgconfig/pnmem.pc installed"
[ -n "$cmakedir" ] || fail "no cmake/pnmem/pnmemConfig.cmake installed"
for f in pnmemConfig.cmake pnmemConfigVersion.cmake; do
  [ -f "$prefix/$cmakedir/$f" ] || fail "$cmakedir/$f not installed"
done
# Nothing but headers, the .pc file, the CMake package, the platform adapter's and the C ABI's
# libraries (no programs).
if grep -v -e '^include/pnmem/' -e "^${pcfile}\$" -e "^${cmakedir}/pnmemConfig\(Version\)\?\.cmake\$" \
     -e '^lib[^/]*\(/[^/]*\)\?/libpnmem_[a-z_]*\(\.a\|\.so[.0-9]*\)$' "$tmp/installed.txt"; then
  fail "unexpected files installed (above)"
fi
if grep -rnF -e "$tmp/stage" "$prefix/${pcfile%/*}" "$prefix/$cmakedir"; then
  fail "the pkg-config or CMake files hard-code the install prefix (above): not relocatable"
fi

# --- 2. pkg-config -------------------------------------------------------------------
step "pkg-config"
export PKG_CONFIG_PATH="$prefix/${pcfile%/*}"
pkg-config --exists --print-errors "pnmem = $version" || fail "pkg-config: pnmem = $version not found"
pkg-config --exists "pnmem >= $version" || fail "pkg-config: pnmem >= $version not found"
[ "$(pkg-config --modversion pnmem)" = "$version" ] || fail "pkg-config --modversion pnmem is not $version"
[ "$(pkg-config --variable=cxx_std pnmem)" = "20" ] || fail "pkg-config --variable=cxx_std pnmem is not 20"
read -r -a pc_cflags <<<"$(pkg-config --cflags pnmem)"
read -r -a pc_libs <<<"$(pkg-config --libs pnmem)"
echo "cflags: ${pc_cflags[*]}"
echo "libs:   ${pc_libs[*]:-(none)}"
[ -f "$(pkg-config --variable=includedir pnmem)/pnmem/pnmem.hpp" ] \
  || fail "pkg-config includedir does not hold pnmem/pnmem.hpp"
"${cxx_cmd[@]}" -std=c++20 -Wall -Wextra -Wpedantic -Werror ${pc_cflags[@]+"${pc_cflags[@]}"} \
  "$srcdir/tests/packaging/consumer/main.cpp" -o "$tmp/consumer-pkgconfig" ${pc_libs[@]+"${pc_libs[@]}"} \
  || fail "pkg-config consumer did not compile"
check_output pkg-config "$tmp/consumer-pkgconfig"
unset PKG_CONFIG_PATH

# --- 3. CMake ---------------------------------------------------------------------------
step "CMake find_package(pnmem)"
cmake_args=(-DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_COMPILER=$compiler_path"
  "-DCMAKE_PREFIX_PATH=$prefix" "-DPNMEM_EXPECT_VERSION=$version" "-DPNMEM_EXPECT_PREFIX=$prefix"
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
if command -v ninja >/dev/null 2>&1; then
  cmake_args+=(-G Ninja)
fi
if [ "${#launcher[@]}" -gt 0 ]; then
  cmake_args+=("-DCMAKE_CXX_COMPILER_LAUNCHER=$(IFS=';'; echo "${launcher[*]}")")
fi
cmake -S "$srcdir/tests/packaging/consumer" -B "$tmp/cmake-build" "${cmake_args[@]}" \
  || fail "cmake configure of the consumer failed"
cmake --build "$tmp/cmake-build" || fail "cmake build of the consumer failed"
check_output cmake "$tmp/cmake-build/consumer"

# --- 4. Meson subproject -----------------------------------------------------------------
step "Meson subproject: dependency('pnmem')"
mkdir -p "$tmp/meson-consumer/subprojects"
cp "$srcdir/tests/packaging/consumer/meson.build" "$srcdir/tests/packaging/consumer/main.cpp" \
  "$tmp/meson-consumer/"
ln -s "$srcdir" "$tmp/meson-consumer/subprojects/pnmem"
# --force-fallback-for: never an installed pnmem, always the subproject.
meson setup "$tmp/meson-consumer/build" "$tmp/meson-consumer" --force-fallback-for=pnmem \
  >"$tmp/meson-consumer.log" 2>&1 || { cat "$tmp/meson-consumer.log"; fail "meson setup of the consumer failed"; }
cat "$tmp/meson-consumer.log"
grep -q "Dependency pnmem found: YES $version (overridden)" "$tmp/meson-consumer.log" \
  || fail "dependency('pnmem') was not the subproject's override (no 'Dependency pnmem found: YES $version (overridden)')"
meson compile -C "$tmp/meson-consumer/build" || fail "meson build of the consumer failed"
check_output meson-subproject "$tmp/meson-consumer/build/consumer"

# --- 5. The C ABI ---------------------------------------------------------------------
step "C ABI: pnmem/pnmem_c.h, pnmem/pnmem.h and libpnmem_c"
c_lib=$(grep '/libpnmem_c\.so$' "$tmp/installed.txt" | head -n 1) || true
if [ -z "$c_lib" ]; then
  echo "no libpnmem_c.so installed (no platform sampler here): the C ABI is not checked"
else
  cat >"$tmp/c_consumer.c" <<'C_EOF'
#include <pnmem/pnmem_c.h>
#include <pnmem/pnmem.h> /* the former name: the same declarations, once */
#include <stdio.h>
int main(void) {
  pnmem_ladder_plan p = pnmem_plan_ladder(PNMEM_LEVEL_TIGHT, 8, 4096, false);
  printf("%s %d %d\n", pnmem_level_name(p.level), p.max_slots, p.prefill_window);
  return 0;
}
C_EOF
  # The C++ driver compiles the file as C (-x c) and links libstdc++, which libpnmem_c needs.
  "${cxx_cmd[@]}" -x c -std=c11 -Wall -Wextra -Wpedantic -Werror -I"$prefix/include" "$tmp/c_consumer.c" -x none \
    -o "$tmp/c-consumer" -L"$prefix/${c_lib%/*}" -lpnmem_c -Wl,-rpath,"$prefix/${c_lib%/*}" \
    || fail "C consumer did not compile or link against the installed C ABI"
  c_out=$("$tmp/c-consumer") || fail "C consumer exited with $?"
  [ "$c_out" = "tight 4 2048" ] || fail "C consumer printed '$c_out', expected 'tight 4 2048'"
  echo "ok: C ABI ($c_out)"
fi

step "all consumers built and ran against pnmem $version"
