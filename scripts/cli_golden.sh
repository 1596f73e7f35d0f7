#!/usr/bin/env bash
# Record what the `ckpt` CLI prints (stdout, stderr, exit status) for a broad
# set of invocations over tests/fixtures and files the commands themselves
# write, one file per invocation, so a refactoring of tools/ can be checked
# byte for byte:  scripts/cli_golden.sh build/tools/ckpt before/ ;
# (change) ; scripts/cli_golden.sh build/tools/ckpt after/ ; diff -r before after
# What changes from run to run is masked (normalize): timings, the save
# date a .keras archive records, temporary file names.
set -u
normalize() {  # normalize DIR: mask the run-dependent parts of every recorded output
	find "$1" -name '*.out' -o -name '*.err' | xargs sed -i -E \
		-e 's/in [0-9.]+ s \([0-9.]+ MB\/s\)/in T s (R MB\/s)/g' \
		-e 's/"seconds": [0-9.e+-]+/"seconds": T/g' \
		-e 's/[0-9]{4}-[0-9]{2}-[0-9]{2}@[0-9]{2}:[0-9]{2}:[0-9]{2}/DATE/g' \
		-e 's/\.tmp[0-9]+_[0-9]+_[0-9]+/.tmpN/g'
}
if [ "$1" = --normalize ]; then normalize "$2"; exit 0; fi
BIN=$(realpath "$1"); OUT=$(realpath -m "$2")
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=${CLI_GOLDEN_WORK:-/tmp/cli_golden_work}
rm -rf "$WORK" "$OUT"; mkdir -p "$WORK" "$OUT"
cp -r "$REPO/tests/fixtures/tf" "$REPO/tests/fixtures/keras" "$WORK/"
cd "$WORK"
n=0
run() {  # run NAME ARGS...: the output of `ckpt ARGS...` in $OUT/NAME
	local name=$1; shift
	n=$((n + 1))
	"$BIN" "$@" >"$OUT/$name.out" 2>"$OUT/$name.err" </dev/null
	echo $? >"$OUT/$name.rc"
}
TF="tf/tensor2tensor__transformer_test_ckpt_2shards/model.ckpt-1 tf/tensorflow__lso_ckpt_tf2.2/ckpt
 tf/tensorflow__old_string_tensors/foo tf/tensorflow__tftrt_mnist_ckpt_snappy/model.ckpt-46900
 tf/tfx__estimator_ckpts/model.ckpt-999 tf/tfx__estimator_ckpts tf/tfx__keras_adam_savedmodel
 tf/tensorflow__OptimizerSlotVariableModule_snappy tf/tensorflow__VarsAndArithmeticObjectGraph
 tf/tfjs__int64_multiply tf/serving__half_plus_two_tf2_cpu_snappy/00000123 tf/tensorflow__half_plus_two_v1/00000123"
KERAS=$(ls keras/*.h5 keras/*.hdf5 keras/*.keras keras/synthetic/*.h5)
ALL="$TF $KERAS"
i=0
for p in $ALL; do
	i=$((i + 1))
	run "inspect.$i" inspect "$p"
	run "inspect-json.$i" inspect --json "$p"
	run "inspect-json-ma2.$i" inspect --json --max-array 2 "$p"
	run "verify.$i" verify "$p"
	run "restore-default.$i" restore --strategy default "$p"
	run "restore-mirrored.$i" restore --strategy mirrored --replicas 3 --json "$p"
	run "restore-partial.$i" restore --strategy mirrored --expect-partial "$p"
	run "restore-partial-json.$i" restore --strategy default --expect-partial --json "$p"
	run "diff-self.$i" diff "$p" "$p"
	run "diff-self-json.$i" diff --json "$p" "$p"
	for to in tf keras-h5 keras-weights keras safetensors gguf; do
		case $to in tf) o=conv/$i.$to/ckpt ;; keras) o=conv/$i.$to.keras ;; keras-weights) o=conv/$i.weights.h5 ;;
			keras-h5) o=conv/$i.h5 ;; *) o=conv/$i.$to ;; esac
		mkdir -p conv/$i.$to
		run "convert-$to.$i" convert "$p" "$o" --to "$to"
		run "convert-partial-$to.$i" convert "$p" "$o.p" --to "$to" --allow-partial --no-optimizer
		for q in "$o" "$o.p"; do
			[ -e "$q" ] || [ -e "$q.index" ] || continue
			k=$(basename "$q")
			run "conv-inspect.$i.$to.$k" inspect "$q"
			run "conv-inspect-json.$i.$to.$k" inspect --json "$q"
			run "conv-verify.$i.$to.$k" verify "$q"
			run "conv-diff.$i.$to.$k" diff "$p" "$q"
			run "conv-diff-json.$i.$to.$k" diff --json --atol 1e-6 --rtol 0.01 "$p" "$q"
		done
	done
	mkdir -p saved/$i
	run "restore-save.$i" restore --strategy mirrored --expect-partial --save saved/$i/ckpt "$p"
	run "restore-save-inspect.$i" inspect saved/$i/ckpt
done
# pairs of different checkpoints, sync rules, and errors
set -- $ALL
run diff-ab diff "$1" "$2"
run diff-ab-json diff --json "$1" "$2"
run diff-ab-tol diff --atol 0.5 --rtol 0.5 "$4" "$4"
run diff-est diff tf/tfx__estimator_ckpts/model.ckpt-0 tf/tfx__estimator_ckpts/model.ckpt-1000
run diff-est-json diff --json tf/tfx__estimator_ckpts/model.ckpt-0 tf/tfx__estimator_ckpts/model.ckpt-1000
run diff-est-tol diff --atol 100 tf/tfx__estimator_ckpts/model.ckpt-0 tf/tfx__estimator_ckpts/model.ckpt-1000
for s in '*=sum' 'dense*=mean,*=only_first_replica' '*=none' 'bad' '*=bogus' '=sum'; do
	n2=$(echo "$s" | tr -c 'a-z0-9' _)
	run "sync-inspect.$n2" inspect --sync-on-read "$s" tf/tfx__keras_adam_savedmodel
	run "sync-inspect-json.$n2" inspect --json --sync-on-read "$s" tf/tfx__keras_adam_savedmodel
	run "sync-restore.$n2" restore --strategy mirrored --sync-on-read "$s" --json tf/tfx__keras_adam_savedmodel
	run "sync-restore-text.$n2" restore --strategy mirrored --sync-on-read "$s" tf/tfx__keras_adam_savedmodel
done
# corrupted and missing files
mkdir -p bad; cp tf/tensorflow__lso_ckpt_tf2.2/ckpt.* bad/
printf 'XXXX' | dd of=bad/ckpt.data-00000-of-00002 bs=1 seek=8 conv=notrunc 2>/dev/null
cp tf/tensorflow__lso_ckpt_tf2.2/ckpt.index bad/m.index
cp tf/tensorflow__lso_ckpt_tf2.2/ckpt.data-00000-of-00002 bad/m.data-00000-of-00002
head -c 100 tf/tensorflow__lso_ckpt_tf2.2/ckpt.index > bad/t.index
head -c 1000 keras/tiny__keras3.7.0_legacy_h5_resnet_adam.h5 > bad/t.h5
echo garbage > bad/g.safetensors
for p in bad/ckpt bad/m bad/t bad/t.h5 bad/g.safetensors nonexistent nonexistent.h5 tf; do
	k=$(echo "$p" | tr / _)
	run "bad-inspect.$k" inspect "$p"
	run "bad-inspect-json.$k" inspect --json "$p"
	run "bad-verify.$k" verify "$p"
	run "bad-restore.$k" restore --strategy mirrored "$p"
	run "bad-restore-json.$k" restore --strategy mirrored --json "$p"
	run "bad-diff.$k" diff "$p" tf/tensorflow__lso_ckpt_tf2.2/ckpt
	run "bad-diff-json.$k" diff --json tf/tensorflow__lso_ckpt_tf2.2/ckpt "$p"
	run "bad-convert.$k" convert "$p" bad/out --to safetensors
done
# usage errors and help
P=tf/tensorflow__lso_ckpt_tf2.2/ckpt
run u-none
run u-help --help; run u-h -h; run u-version --version; run u-bogus bogus; run u-help-help help help
run u-help-bogus help bogus; run u-help-extra help inspect x; run u-help-cmd help
for c in inspect verify diff restore convert; do
	run "u-help.$c" help "$c"; run "u-dashhelp.$c" "$c" --help; run "u-noarg.$c" "$c"
	run "u-unknown.$c" "$c" --bogus "$P"; run "u-short.$c" "$c" -x "$P"; run "u-extra.$c" "$c" "$P" "$P" "$P"
	run "u-dashdash.$c" "$c" -- "$P"; run "u-switcheq.$c" "$c" --json=1 "$P"
done
run u-ma inspect --max-array x "$P"; run u-ma-neg inspect --max-array -1 "$P"; run u-ma-eq inspect --json --max-array=3 "$P"
run u-ma-missing inspect "$P" --max-array
run u-atol diff --atol x "$P" "$P"; run u-atol-neg diff --atol -1 "$P" "$P"; run u-rtol diff --rtol inf "$P" "$P"
run u-rtol-nan diff --rtol nan "$P" "$P"; run u-atol-eq diff --atol=0.1 "$P" "$P"
run u-strat restore --strategy bogus "$P"; run u-strat-miss restore "$P"
run u-rep restore --strategy mirrored --replicas 0 "$P"; run u-rep2 restore --strategy mirrored --replicas 5000 "$P"
run u-rep3 restore --strategy mirrored --replicas x "$P"; run u-rep4 restore --strategy default --replicas 2 "$P"
run u-dev restore --strategy default --device cuda "$P"; run u-dev2 restore --strategy mirrored --device tpu "$P"
run u-dev3 restore --strategy mirrored --device cpu "$P"; run u-dev4 restore --strategy mirrored --device cuda:x "$P"
run u-dev5 restore --strategy mirrored --device cuda:0,0 "$P"
run u-to convert "$P" x --to bogus; run u-to-miss convert "$P" x
run u-opt convert "$P" x --to tf --no-optimizer --keep-optimizer
run u-keep convert "$P" conv/keep --to safetensors --keep-optimizer
normalize "$OUT"
echo "$n invocations" >"$OUT/COUNT"
echo "$n invocations recorded in $OUT"
