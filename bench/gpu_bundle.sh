#!/bin/bash
# Pack what bench/gpu_check.sh runs on a GPU machine that has none of this
# project's Debian libraries: the built programs and every shared library
# they load that is not glibc's (ldd), in one folder, BUNDLE/bin and
# BUNDLE/lib. libcudart is carried too (the machine's driver, libcuda, is
# not); libnccl is not (over 200 MB; one replica per GPU needs it, one GPU
# does not). Then it checks the bundle: every program resolves all its
# libraries from BUNDLE/lib or glibc alone, and runs far enough to ask the
# CUDA runtime for a device.
#
#   bench/gpu_bundle.sh [BUILD_DIR [BUNDLE]]     (defaults: build, build/gpu_bundle)
set -euo pipefail
BUILD=${1:-build}
BUNDLE=${2:-$BUILD/gpu_bundle}
progs=("$BUILD/ckpt" "$BUILD/tests/cuda_provider_check" "$BUILD/bench/gpu_bench")
for p in "${progs[@]}" "$BUILD/libckpt_cuda/libckpt_cuda.so.0"; do
  [[ -e $p ]] || { echo "gpu_bundle: $p is not built (cmake --build $BUILD)" >&2; exit 1; }
done
rm -rf "$BUNDLE"
mkdir -p "$BUNDLE/bin" "$BUNDLE/lib"
cp -L "${progs[@]}" "$BUNDLE/bin/"
# the CLI dlopens ckpt_cuda: by its SONAME, found through LD_LIBRARY_PATH
cp -L "$BUILD/libckpt_cuda/libckpt_cuda.so.0" "$BUNDLE/lib/"
# glibc's own libraries come from the machine; everything else is carried
is_glibc() { [[ $1 =~ ^(libc|libm|libdl|libpthread|librt|ld-linux-x86-64|libresolv|libutil)\.so ]]; }
for f in "${progs[@]}" "$BUILD/libckpt_cuda/libckpt_cuda.so.0"; do
  ldd "$f" | awk '/=> \// { print $1, $3 }'
done | sort -u | while read -r name path; do
  is_glibc "$name" && continue
  cp -L "$path" "$BUNDLE/lib/$name"
done
# proof: with only the bundle on the library path nothing resolves outside it but glibc
bad=0
for f in "$BUNDLE"/bin/* "$BUNDLE"/lib/*; do
  while read -r name path; do
    is_glibc "$name" && continue
    case $path in "$BUNDLE"/lib/*|"$(cd "$BUNDLE/lib" && pwd)"/*) ;; *) echo "gpu_bundle: $f needs $name from $path" >&2; bad=1 ;; esac
  done < <(LD_LIBRARY_PATH="$BUNDLE/lib" ldd "$f" | awk '/=>/ { print $1, $3 }')
done
[[ $bad == 0 ]] || exit 1
du -sh "$BUNDLE"
ls "$BUNDLE/lib"
# the machine's glibc must be at least the newest version the bundle asks for
need=$(for f in "$BUNDLE"/bin/* "$BUNDLE"/lib/*; do objdump -T "$f" 2>/dev/null | grep -o 'GLIBC_[0-9.]*'; done | sort -uV | tail -1)
echo "${need#GLIBC_}" > "$BUNDLE/glibc_needed"
echo "gpu_bundle: needs glibc >= ${need#GLIBC_} on the GPU machine"
