#!/usr/bin/env bash
# Groups the Criterion suites tests/test_*.c into one folder per area (issue 25, point 7).
# Re-runnable: a file already in its folder is left alone, so it can be run again after
# branches that add or edit tests at the top level are merged. It fails, naming them, when a
# tests/test_*.c at the top level is not in the table below: add it to an area, then run again.
# Mentions of a moved file's old path (tests/test_x.c) in tracked files are rewritten to the new one.
set -euo pipefail
cd "$(dirname "$0")/.."

declare -A AREA=(
	# the public and extender API, the README's examples, install and packaging
	[test_public_api.c]=api [test_sys_api.c]=api [test_readme.c]=api [test_install.c]=api
	[test_samples.c]=api [test_lazy_libs.c]=api [test_error_messages.c]=api
	# the core: errors, tensors, variables, object graph, checkpoint objects, utilities
	[test_core.c]=core [test_variable.c]=core [test_object_graph.c]=core [test_og_codec.c]=core
	[test_slab.c]=core [test_sort.c]=core [test_async.c]=core [test_find_variable.c]=core
	[test_host_state.c]=core [test_checkpoint.c]=core
	[test_include_graph.c]=core
	# file formats (TensorBundle, SavedModel, safetensors, GGUF, flat) and their real-TensorFlow checks
	[test_tf_bundle.c]=formats [test_tfb_entry.c]=formats [test_tfb_io.c]=formats [test_sstable.c]=formats
	[test_saved_model.c]=formats [test_safetensors.c]=formats [test_gguf.c]=formats
	[test_flat_convert.c]=formats [test_writer_announce.c]=formats [test_direct_read.c]=formats
	[test_tf_interop.c]=formats [test_checkpoint_tf.c]=formats
	# Keras (.keras archives, .weights.h5, the libhdf5 sandbox)
	[test_keras_archive.c]=keras [test_keras_h5.c]=keras [test_keras_h5_io.c]=keras
	[test_keras_tf_keys.c]=keras [test_keras3_interop.c]=keras [test_h5_sandbox_server.c]=keras
	# hostile input: corruption and truncation sweeps, fuzz regressions, bombs, mutants
	[test_hostile.c]=hostile [test_corruption.c]=hostile [test_truncation.c]=hostile
	[test_fuzz_replay.c]=hostile [test_keras_bomb.c]=hostile [test_keras_hostile.c]=hostile
	[test_h5_mutants.c]=hostile [test_h5_headers.c]=hostile
	# restore patterns
	[test_restore_inplace.c]=restore [test_fresh_start.c]=restore [test_sync_on_read_exact.c]=restore
	# the command-line tool
	[test_cli.c]=cli [test_cli_device.c]=cli [test_cli_paths.c]=cli [test_cli_progress.c]=cli
	[test_convert_faults.c]=cli [test_inspect_meta.c]=cli [test_meta_budget.c]=cli
	[test_json_writer.c]=cli
	# the checkpoint manager and crash safety
	[test_manager.c]=manager [test_manager_async.c]=manager [test_manager_crash.c]=manager
	[test_manager_lock.c]=manager [test_kill.c]=manager
	# strategies, mirrored replicas, MPI, partitioned and sliced variables
	[test_strategy.c]=distribute [test_device_mirrored.c]=distribute [test_mpi.c]=distribute
	[test_partitioned.c]=distribute [test_sliced_shards.c]=distribute [test_divergence.c]=distribute
	[test_replica_check.c]=distribute
	# memory providers (host, device)
	[test_memory_provider.c]=memory [test_cuda_provider.c]=memory
	# object storage (its helper programs live in the same folder)
	[test_s3.c]=s3 [test_s3_config.c]=s3 [test_s3_faults.c]=s3 [test_s3_kill.c]=s3 [test_s3_mpi.c]=s3
	# the VFS door and injected faults
	[test_vfs_door.c]=io [test_fault_injection.c]=io [test_checkpoint_faults.c]=io
)

moved=0
for f in $(printf '%s\n' "${!AREA[@]}" | sort); do
	dest="tests/${AREA[$f]}/$f"
	if [ -e "tests/$f" ]; then
		if [ -e "$dest" ]; then
			echo "group_tests: both tests/$f and $dest exist; merge them by hand" >&2
			exit 1
		fi
		mkdir -p "tests/${AREA[$f]}"
		git mv "tests/$f" "$dest"
		moved=$((moved + 1))
	fi
	# old mentions, wherever a branch merged since may have written them
	{ git grep -lF "tests/$f" -- . ':!scripts/group_tests.sh' || true; } | while read -r ref; do
		sed -i "s#tests/${f//./\\.}#$dest#g" "$ref"
	done
done
echo "group_tests: $moved file(s) moved"

shopt -s nullglob
unknown=(tests/test_*.c)
if [ ${#unknown[@]} -gt 0 ]; then
	echo "group_tests: not in the table of scripts/group_tests.sh (give each an area):" >&2
	printf '  %s\n' "${unknown[@]}" >&2
	exit 1
fi
