#!/usr/bin/env bash
# install_test.sh BUILD_DIR SOURCE_DIR
#
# libckpt as a dependency: `cmake --install` the build tree into a temporary
# prefix, then build the mlp_mirrored sample out of tree against the
# installed library twice, once with find_package(ckpt) -> ckpt::ckpt and
# once with pkg-config (ckpt.pc), and run both builds for one epoch. Then
# an extender (tests/scripts/sys_consumer.c) against the installed headers
# only, every ckpt/sys/ header among them.
# Prints "find_package: OK", "pkg-config: OK" and "sys headers: OK"; exits
# non-zero on any failure.
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

echo "== cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
for f in include/ckpt/ckpt.h include/ckpt/checkpoint.h include/ckpt/sys/alloc.h include/ckpt/sys/error.h \
  include/ckpt/sys/strategy.h include/ckpt/sys/bundle_part.h bin/ckpt libexec/ckpt/ckpt-h5-reader; do
  [ -e "$prefix/$f" ] || { echo "not installed: $f"; exit 1; }
done
pc=$(find "$prefix" -name ckpt.pc | head -n1)
cfg=$(find "$prefix" -name ckptConfig.cmake | head -n1)
[ -n "$pc" ] && [ -n "$cfg" ] || { echo "ckpt.pc or ckptConfig.cmake not installed"; exit 1; }
libdir=$(dirname "$(dirname "$pc")")
ls "$libdir"/libckpt.so* "$libdir"/libckpt.a >/dev/null
"$prefix/bin/ckpt" --version

# A sanitizer build of the library needs the same runtime in the consumer.
san=""
if grep -q '^CKPT_SANITIZE:BOOL=ON' "$build/CMakeCache.txt"; then
  san="-fsanitize=address,undefined"
fi

echo "== find_package(ckpt): configure and build out of tree"
mkdir -p "$work/consumer"
cat >"$work/consumer/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.20)
project(ckpt_consumer C)
find_package(ckpt 0.1 REQUIRED)
add_executable(mlp_mirrored "$src/samples/mlp_mirrored.c" "$src/samples/mlp_model.c")
set_target_properties(mlp_mirrored PROPERTIES C_STANDARD 99 C_EXTENSIONS OFF)
target_link_libraries(mlp_mirrored PRIVATE ckpt::ckpt m)
CMAKE
cmake -S "$work/consumer" -B "$work/consumer/build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE= -DCMAKE_C_FLAGS="-O2 $san" >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; exit 1; }
cmake --build "$work/consumer/build" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
# the binary must use the installed library, not the build tree's
ldd "$work/consumer/build/mlp_mirrored" >"$work/ldd.txt"
grep -q "$libdir/libckpt.so" "$work/ldd.txt" ||
  { echo "find_package build does not load $libdir/libckpt.so:"; cat "$work/ldd.txt"; exit 1; }
"$work/consumer/build/mlp_mirrored" --epochs 1 --dir "$work/run-cmake"
[ -e "$work/run-cmake/ckpt-1.index" ] || { echo "no checkpoint written"; exit 1; }
echo "find_package: OK"

echo "== pkg-config ckpt: compile and link by hand"
export PKG_CONFIG_PATH="$(dirname "$pc")"
cflags=$(pkg-config --cflags ckpt)
libs=$(pkg-config --libs ckpt)
echo "cc $cflags ... $libs"
cc -std=c99 -O2 $san $cflags -o "$work/mlp_pc" "$src/samples/mlp_mirrored.c" "$src/samples/mlp_model.c" $libs -lm
LD_LIBRARY_PATH="$libdir" "$work/mlp_pc" --epochs 1 --dir "$work/run-pc"
[ -e "$work/run-pc/ckpt-1.index" ] || { echo "no checkpoint written"; exit 1; }
# both builds (same flags) train the same model from the same seed: identical checkpoints
"$prefix/bin/ckpt" diff "$work/run-cmake/ckpt-1" "$work/run-pc/ckpt-1" >/dev/null ||
  { echo "the two builds wrote different checkpoints"; exit 1; }
echo "pkg-config: OK"

echo "== ckpt/sys/: each header on its own, then an extender, against the installed headers only"
for h in "$prefix"/include/ckpt/sys/*.h; do
  rel=${h#"$prefix/include/"}
  printf '#include <%s>\n' "$rel" >"$work/one_header.c"
  cc -std=c99 -Wall -Wextra -Werror -fsyntax-only $cflags "$work/one_header.c" ||
    { echo "$rel does not compile on its own"; exit 1; }
done
cc -std=c99 -O2 -Wall -Wextra -Werror $san $cflags -o "$work/sys_consumer" "$src/tests/scripts/sys_consumer.c" $libs
mkdir -p "$work/run-sys"
LD_LIBRARY_PATH="$libdir" "$work/sys_consumer" "$work/run-sys"
echo "sys headers: OK"
