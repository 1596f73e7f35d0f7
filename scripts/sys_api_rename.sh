#!/usr/bin/env bash
# sys_api_rename.sh [DIR...]
#
# Moves code outside the library (libckpt_mpi/ by default) from the core's
# internal names (libckpt/internal.h, libckpt/model/strategy_impl.h, the old
# formats/tf_bundle/tfb_part.h) to the public extender API under
# libckpt/include/ckpt/sys/. Idempotent: run it again after merging a branch
# that still uses the old names. Edits only include lines and identifiers
# (plus the version field every ckpt_strategy_methods table needs, and the
# parameter order of ckpt_bundle_part_finish: outputs first).
set -euo pipefail
cd "$(dirname "$0")/.."
dirs=("$@")
[ ${#dirs[@]} -gt 0 ] || dirs=(libckpt_mpi)
mapfile -t files < <(find "${dirs[@]}" -name '*.[ch]' | sort)
[ ${#files[@]} -gt 0 ] || { echo "no .c/.h files under ${dirs[*]}"; exit 1; }

sed -i -E \
  -e 's|^#include "libckpt/model/strategy_impl.h"$|#include "ckpt/sys/alloc.h"\n#include "ckpt/sys/error.h"\n#include "ckpt/sys/strategy.h"|' \
  -e 's|^#include "formats/tf_bundle/tfb_part.h"$|#include "ckpt/sys/bundle_part.h"|' \
  -e 's/\bckpt__fail\b/ckpt_error_set/g' \
  -e 's/\bckpt__(malloc|calloc|realloc|free)\b/ckpt_\1/g' \
  -e 's/\bckpt__strategy_ops_of\b/ckpt_strategy_get_methods/g' \
  -e 's/\bckpt__strategy_ops\b/ckpt_strategy_methods/g' \
  -e 's/\bckpt__strategy_create\b/ckpt_strategy_custom_new/g' \
  -e 's/\bckpt__strategy_impl\b/ckpt_strategy_impl/g' \
  -e 's/\bckpt__save_request\b/ckpt_strategy_save_request/g' \
  -e 's/\bckpt__variable_(fill_from_primary|local_copy|read_copy|write_copy|on_device)\b/ckpt_variable_\1/g' \
  -e 's/\bckpt__strategy_attach_memory\b/ckpt_strategy_attach_memory/g' \
  -e 's/\bCKPT__KIND_(F32|F64|I32|I64)\b/CKPT_REDUCE_ELEM_\1/g' \
  -e 's/\bckpt__tfb_part_finish\(([^,()]+), ([^,()]+), ([^,()]+), ([^,()]+)\)/ckpt_bundle_part_finish(\3, \4, \1, \2)/g' \
  -e 's/\bckpt__tfb_part_(open|add_slice|add_partitioned_entry|add|free|discard)\b/ckpt_bundle_part_\1/g' \
  -e 's/\bckpt__tfb_part\b/ckpt_bundle_part/g' \
  -e 's/\bckpt__tfb_merge_commit\b/ckpt_bundle_merge_commit/g' \
  "${files[@]}"
# every method table declares the version of the header it was written against
sed -i -E '/^(static )?const ckpt_strategy_methods [a-z_0-9]+ = \{$/{n;/\.version = /!i\
	.version = CKPT_STRATEGY_METHODS_VERSION,
}' "${files[@]}"

# what is left of the core's internals is an error: the library does not export it
# (comments may still name them)
left=""
for f in "${files[@]}"; do
  hits=$(sed -E 's|/\*.*\*/||g; s|//.*||; s|^\s*(/\*\|\*).*||' "$f" |
    grep -nE '\bckpt__[a-z_0-9]+|\bCKPT__[A-Z_0-9]+|#include "(libckpt|formats)/' || true)
  [ -z "$hits" ] || left+="$f: $hits"$'\n'
done
if [ -n "$left" ]; then
  echo "still using the library's internals (not exported):"
  printf '%s' "$left"
  exit 1
fi
echo "renamed to the ckpt/sys/ API: ${files[*]}"
