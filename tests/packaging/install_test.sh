#!/usr/bin/env bash
# Install pnmem into a temporary prefix and build a consumer program against the
# install three ways. Run by `meson test` (suite packaging, test "install").
#
#   install_test.sh SRCDIR BUILD_ROOT SCRATCH_PARENT VERSION CXX...
#
#   SRCDIR          the pnmem source tree
#   BUILD_ROOT      the build that runs this test: what it installs (already built; the test suite
#                   builds everything first)
#   SCRATCH_PARENT  a directory (the build directory) for this run's scratch dir
#   VERSION         meson.project_version(): what every consumer must report
#   CXX...          the compiler command (meson's cxx.cmd_array(), maybe with ccache)
#
# Steps:
#   1. `meson install --no-rebuild --destdir <scratch>/stage` the build that runs the test (until
#      issue 41 a separate build of SRCDIR, a second copy of the libraries compiled on every run), check
#      the installed file set, then move the prefix to <scratch>/moved: everything below uses only the
#      moved tree, so the pkg-config and CMake files must be relocatable, and name neither the staging
#      directory nor the build.
#   2. pkg-config: `pkg-config --cflags pnmem`, compile consumer/main.cpp, run it.
#   3. CMake: find_package(pnmem X.Y REQUIRED) + pnmem::pnmem (consumer/CMakeLists.txt
#      also checks the version-compatibility rules), build, run.
#   4. Meson: consumer/meson.build with the source tree as subprojects/pnmem;
#      dependency('pnmem') must come from meson.override_dependency, build, run.
#   5. The C ABI: a C11 program includes pnmem/pnmem_c.h and its former name
#      pnmem/pnmem.h (kept for one release), links the installed libpnmem_c, runs.
#   6. The libraries through pkg-config (consumer_adapters/): pnmem-linux (a watcher over the
#      real sampler; and consumer_cxx17/ as C++17 with this compiler and clang++), pnmem-cuda (C++ and, renamed .cu, nvcc: with no GPU the cudart backend must
#      print the runtime's reason and exit 0), pnmem-c (a C compiler, C11; and the worked example
#      examples/prealloc_server/main.cpp, a C++17 server that uses only the C ABI, built with
#      `pkg-config --cflags --libs pnmem-c` by this compiler and clang++ (where installed) and run:
#      it must exit 0).
#   7. The same through CMake: find_package(pnmem COMPONENTS linux cuda c model_files) and the
#      pnmem::linux, pnmem::cuda, pnmem::c targets (a missing component must fail find_package).
#   8. Python: tests/python/venv_install_test.sh pip-installs python/ offline into a fresh venv
#      and imports it against this prefix's libpnmem_c, found through pkg-config.
# Every run must print the expected plan. Exit 77 (skip) if cmake or pkg-config is
# missing. The scratch dir is removed on success and kept (path printed) on failure.
set -euo pipefail

if [ "$#" -lt 5 ]; then
  echo "usage: $0 SRCDIR BUILD_ROOT SCRATCH_PARENT VERSION CXX..." >&2
  exit 2
fi
srcdir=$(cd "$1" && pwd)
build_root=$(cd "$2" && pwd)
scratch_parent=$3
version=$4
shift 4
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

step() { printf '\n=== %s (at %d s)\n' "$*" "$SECONDS"; }
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
build_prefix=$(meson introspect --buildoptions "$build_root" \
  | python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))') \
  || fail "meson introspect --buildoptions $build_root: no prefix"
meson install -C "$build_root" --no-rebuild --destdir "$tmp/stage" --quiet >"$tmp/install.log" 2>&1 \
  || { cat "$tmp/install.log"; fail "meson install failed"; }

mv "$tmp/stage$build_prefix" "$tmp/moved"
rm -rf "$tmp/stage"
prefix=$tmp/moved

# Files and links (libpnmem_c.so -> .so.0 -> .so.0.1.0: the SONAME's chain).
(cd "$prefix" && find . \( -type f -o -type l \) | sed 's|^\./||' | LC_ALL=C sort) >"$tmp/installed.txt"
cat "$tmp/installed.txt"

# Installed stripped (the project's default strip=true): no debug sections in the shared library.
if command -v readelf >/dev/null 2>&1; then
  for so in $(grep -E '/libpnmem_c\.so\.[0-9]+\.[0-9]+\.[0-9]+$' "$tmp/installed.txt"); do
    if readelf -S "$prefix/$so" | grep -q '\.debug_info'; then fail "$so was installed with debug info (strip=true is the default)"; fi
  done
  echo "ok: installed libraries carry no debug info"
fi

# The headers: exactly the source tree's include/pnmem, plus this platform's
# adapter headers (adapters/<os>/include/pnmem/<os>/), the platform selector
# (adapters/platform/include/pnmem/platform_sampler.hpp) and the model-files readers
# (adapters/model_files/include/pnmem/model_files/).
adapter_includes=("$srcdir/adapters/model_files/include" "$srcdir/adapters/cuda/include")
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
# Nothing but headers, the .pc files, the CMake package, the adapters' and the C ABI's libraries, and
# the pnmem tool where the build has it (no other program).
pcdir=${pcfile%/*}
for pc in pnmem-model-files pnmem-cuda; do
  [ -f "$prefix/$pcdir/$pc.pc" ] || fail "$pcdir/$pc.pc not installed"
done
if [ "$(uname -s)" = Linux ]; then
  for pc in pnmem-linux pnmem-c; do
    [ -f "$prefix/$pcdir/$pc.pc" ] || fail "$pcdir/$pc.pc not installed"
  done
fi
if grep -v -e '^include/pnmem/' -e "^${pcfile}\$" -e "^${pcdir}/pnmem-[a-z-]*\.pc\$" \
     -e "^${cmakedir}/pnmemConfig\(Version\)\?\.cmake\$" \
     -e '^lib[^/]*\(/[^/]*\)\?/libpnmem_[a-z_]*\(\.a\|\.so[.0-9]*\)$' -e '^bin/pnmem$' "$tmp/installed.txt"; then
  fail "unexpected files installed (above)"
fi
if grep -rnF -e "$tmp/stage" -e "$build_root" "$prefix/${pcfile%/*}" "$prefix/$cmakedir"; then
  fail "the pkg-config or CMake files hard-code the install prefix or the build (above): not relocatable"
fi

# --- 2. pkg-config -------------------------------------------------------------------
step "pkg-config"
export PKG_CONFIG_PATH="$prefix/${pcfile%/*}"
pkg-config --exists --print-errors "pnmem = $version" || fail "pkg-config: pnmem = $version not found"
pkg-config --exists "pnmem >= $version" || fail "pkg-config: pnmem >= $version not found"
[ "$(pkg-config --modversion pnmem)" = "$version" ] || fail "pkg-config --modversion pnmem is not $version"
[ "$(pkg-config --variable=cxx_std pnmem)" = "17" ] || fail "pkg-config --variable=cxx_std pnmem is not 17"
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
# The consumer alone: it takes the header-only dependency, so none of pnmem's libraries is compiled.
meson compile -C "$tmp/meson-consumer/build" consumer || fail "meson build of the consumer failed"
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
  # The consumer records the SONAME, libpnmem_c.so.<major>, not the development link's name.
  if command -v readelf >/dev/null 2>&1; then
    needed=$(readelf -d "$tmp/c-consumer" | sed -n 's/.*(NEEDED).*\[\(libpnmem_c[^]]*\)\].*/\1/p')
    [ "$needed" = "libpnmem_c.so.${version%%.*}" ] || fail "the C consumer needs '$needed', not libpnmem_c.so.${version%%.*}"
    [ -e "$prefix/${c_lib%/*}/$needed" ] || fail "$needed is not installed beside ${c_lib##*/}"
  fi
  echo "ok: C ABI ($c_out; needs ${needed:-libpnmem_c})"
fi

# --- 6. The libraries through pkg-config ------------------------------------------------
step "pkg-config: pnmem-linux, pnmem-cuda (g++ and nvcc), pnmem-c (cc; and examples/prealloc_server as C++17)"
export PKG_CONFIG_PATH="$prefix/$pcdir"
adapters_src=$srcdir/tests/packaging/consumer_adapters
pc_words() { read -r -a words <<<"$(pkg-config "$@")"; }
if [ "$(uname -s)" = Linux ]; then
  pc_words --cflags pnmem-linux; linux_cflags=("${words[@]}")
  pc_words --libs pnmem-linux; linux_libs=("${words[@]}")
  "${cxx_cmd[@]}" -std=c++20 -Wall -Wextra -Wpedantic -Werror "${linux_cflags[@]}" "$adapters_src/linux_main.cpp" \
    -o "$tmp/linux-pkgconfig" "${linux_libs[@]}" || fail "pnmem-linux consumer did not compile or link"
  out=$("$tmp/linux-pkgconfig") || fail "pnmem-linux consumer exited with $?: $out"
  [[ "$out" =~ ^linux\ (ok|watch|tight|critical)\ (admit|cap|reject)$ ]] || fail "pnmem-linux consumer printed '$out'"
  echo "ok: pnmem-linux ($out)"
  # A C++17 engine (llama.cpp pins C++17): the watcher, the live read, admission, the ladder, the engine
  # layer, with this compiler and with clang++ (where installed).
  [ "$(pkg-config --variable=cxx_std pnmem-linux)" = "17" ] || fail "pkg-config --variable=cxx_std pnmem-linux is not 17"
  cxx17_compilers=("${cxx_cmd[*]}")
  if command -v clang++ >/dev/null 2>&1 && [ "$compiler" != clang++ ]; then cxx17_compilers+=(clang++); fi
  for c in "${cxx17_compilers[@]}"; do
    read -r -a c_words <<<"$c"
    "${c_words[@]}" -std=c++17 -Wall -Wextra -Wpedantic -Werror "${linux_cflags[@]}" \
      "$srcdir/tests/packaging/consumer_cxx17/main.cpp" -o "$tmp/cxx17" "${linux_libs[@]}" \
      || fail "the C++17 consumer did not compile or link with $c"
    out=$("$tmp/cxx17") || fail "the C++17 consumer ($c) exited with $?: $out"
    [[ "$out" =~ ^cxx17\ (ok|watch|tight|critical)\ (admit|cap|reject)\ slots=[0-9]+$ ]] || fail "the C++17 consumer ($c) printed '$out'"
    echo "ok: C++17 consumer with $c ($out)"
  done
fi

cudart=$(pkg-config --variable=cudart pnmem-cuda)
cuda_defs=()
[ "$cudart" = yes ] && cuda_defs=(-DPNMEM_CONSUMER_CUDART=1)
check_cuda_output() {  # WHAT OUTPUT
  local first rest
  first=${2%%$'\n'*}
  [ "$first" = "cuda fake dies=2" ] || fail "$1 printed '$2' (first line should be 'cuda fake dies=2')"
  if [ "$cudart" = yes ]; then
    rest=${2#*$'\n'}
    [[ "$rest" =~ ^cudart:\ (no\ device:\ .+|[0-9]+\ device\(s\))$ ]] || fail "$1 printed '$2' (no cudart line)"
  fi
  echo "ok: $1 (${2//$'\n'/; })"
}
pc_words --cflags pnmem-cuda; cuda_cflags=("${words[@]}")
pc_words --libs pnmem-cuda; cuda_libs=("${words[@]}")
"${cxx_cmd[@]}" -std=c++20 -Wall -Wextra -Wpedantic -Werror "${cuda_defs[@]}" "${cuda_cflags[@]}" \
  "$adapters_src/cuda_main.cpp" -o "$tmp/cuda-pkgconfig" "${cuda_libs[@]}" || fail "pnmem-cuda consumer did not compile or link"
out=$("$tmp/cuda-pkgconfig") || fail "pnmem-cuda consumer exited with $?: $out"
check_cuda_output "pnmem-cuda (C++)" "$out"
if [ "$cudart" = yes ]; then
  # The toolkit was found when pnmem was built, so nvcc must be there too: a CUDA translation unit is
  # where engines include pnmem's headers, and nvcc's front end parses them (not the host compiler).
  nvcc=$(command -v nvcc || true)
  cudart_libdir=$(pkg-config --variable=cudart_libdir pnmem-cuda)
  [ -n "$nvcc" ] || [ ! -x "$cudart_libdir/../bin/nvcc" ] || nvcc=$cudart_libdir/../bin/nvcc
  [ -n "$nvcc" ] || fail "pnmem-cuda has the cudart backend but nvcc is not on PATH (nor in $cudart_libdir/../bin)"
  cp "$adapters_src/cuda_main.cpp" "$tmp/cuda_main.cu"
  "$nvcc" -std=c++20 -Werror all-warnings "${cuda_defs[@]}" "${cuda_cflags[@]}" "$tmp/cuda_main.cu" -o "$tmp/cuda-nvcc" \
    "${cuda_libs[@]}" || fail "pnmem-cuda consumer did not compile or link with nvcc ($nvcc)"
  out=$("$tmp/cuda-nvcc") || fail "pnmem-cuda nvcc consumer exited with $?: $out"
  check_cuda_output "pnmem-cuda (nvcc)" "$out"
fi

if [ -n "$c_lib" ]; then
  cc=$(command -v cc || command -v gcc || command -v clang || true)
  [ -n "$cc" ] || fail "no C compiler (cc, gcc, clang) for the pnmem-c consumer"
  pc_words --cflags pnmem-c; c_cflags=("${words[@]}")
  pc_words --libs pnmem-c; c_libs=("${words[@]}")
  "$cc" -std=c11 -Wall -Wextra -Wpedantic -Werror "${c_cflags[@]}" "$adapters_src/c_main.c" -o "$tmp/c-pkgconfig" \
    "${c_libs[@]}" "-Wl,-rpath,$(pkg-config --variable=libdir pnmem-c)" || fail "pnmem-c consumer did not compile or link ($cc)"
  out=$("$tmp/c-pkgconfig") || fail "pnmem-c consumer exited with $?"
  [ "$out" = "c tight 4 2048" ] || fail "pnmem-c consumer printed '$out', expected 'c tight 4 2048'"
  echo "ok: pnmem-c with $cc ($out)"
  # The worked example of docs/engine-integration.md ("pnmem in a server that preallocates"): C++17, the C ABI
  # only, built as its header comment says; it exits 0 when every pnmem answer was one its call documents.
  pc_words --cflags --libs pnmem-c; c_cxx_flags=("${words[@]}")
  prealloc_compilers=("${cxx_cmd[*]}")
  if command -v clang++ >/dev/null 2>&1 && [ "$compiler" != clang++ ]; then prealloc_compilers+=(clang++); fi
  for c in "${prealloc_compilers[@]}"; do
    read -r -a c_words <<<"$c"
    "${c_words[@]}" -std=c++17 -Wall -Wextra -Wpedantic -Werror "$srcdir/examples/prealloc_server/main.cpp" \
      "${c_cxx_flags[@]}" "-Wl,-rpath,$(pkg-config --variable=libdir pnmem-c)" -o "$tmp/prealloc-server" \
      || fail "examples/prealloc_server/main.cpp did not compile or link against pnmem-c with $c"
    prealloc_rc=0
    out=$("$tmp/prealloc-server") || prealloc_rc=$?
    if [ "$prealloc_rc" -ne 0 ]; then
      printf '%s\n' "$out"
      fail "prealloc_server ($c) exited with $prealloc_rc (its output above)"
    fi
    last=${out##*$'\n'}
    [[ "$last" == "OK: "* ]] || { printf '%s\n' "$out"; fail "prealloc_server ($c) did not end with an OK: line"; }
    echo "ok: prealloc_server against pnmem-c with $c ($last)"
  done
fi
unset PKG_CONFIG_PATH

# --- 7. The libraries through CMake components ---------------------------------------------
step "CMake find_package(pnmem COMPONENTS ...)"
components=(model_files cuda)
[ "$(uname -s)" = Linux ] && components+=(linux)
[ -n "$c_lib" ] && components+=(c)
expect_cudart=OFF
[ "$cudart" = yes ] && expect_cudart=ON
cmake -S "$adapters_src" -B "$tmp/cmake-adapters" "${cmake_args[@]}" -DCMAKE_C_COMPILER=cc \
  "-DPNMEM_EXPECT_COMPONENTS=$(IFS=';'; echo "${components[*]}")" "-DPNMEM_EXPECT_CUDART=$expect_cudart" \
  || fail "cmake configure of the adapter consumers failed"
cmake --build "$tmp/cmake-adapters" || fail "cmake build of the adapter consumers failed"
out=$("$tmp/cmake-adapters/cuda_consumer") || fail "pnmem::cuda consumer exited with $?: $out"
check_cuda_output "pnmem::cuda (CMake)" "$out"
if [ -x "$tmp/cmake-adapters/linux_consumer" ]; then
  out=$("$tmp/cmake-adapters/linux_consumer") || fail "pnmem::linux consumer exited with $?: $out"
  [[ "$out" =~ ^linux\ (ok|watch|tight|critical)\ (admit|cap|reject)$ ]] || fail "pnmem::linux consumer printed '$out'"
  echo "ok: pnmem::linux (CMake) ($out)"
  out=$("$tmp/cmake-adapters/cxx17_consumer") || fail "the C++17 pnmem::linux consumer exited with $?: $out"
  [[ "$out" =~ ^cxx17\  ]] || fail "the C++17 pnmem::linux consumer printed '$out'"
  echo "ok: C++17 pnmem::linux (CMake) ($out)"
fi
if [ -x "$tmp/cmake-adapters/c_consumer" ]; then
  out=$("$tmp/cmake-adapters/c_consumer") || fail "pnmem::c consumer exited with $?"
  [ "$out" = "c tight 4 2048" ] || fail "pnmem::c consumer printed '$out'"
  echo "ok: pnmem::c (CMake) ($out)"
fi

# --- 8. Python ----------------------------------------------------------------------------
if [ -n "$c_lib" ]; then
  step "Python: pip install ./python into a fresh venv, against this prefix"
  "$srcdir/tests/python/venv_install_test.sh" "$prefix" "$srcdir" "$tmp/python" || fail "the Python package (above)"
fi

step "all consumers built and ran against pnmem $version"
