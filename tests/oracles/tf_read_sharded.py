"""TensorFlow reads a multi-worker (sharded, merged-index) checkpoint.

Usage: tf_read_sharded.py PREFIX STEP SAVED_R NUM_SHARDS
Checks with tf.train.load_checkpoint (TensorFlow's BundleReader over the
merged index and every data shard) that every value is the one the MPI test
model (tests/mpi/mpi_model.c) holds at STEP, saved from SAVED_R replicas,
and that the bundle really has NUM_SHARDS data files. Prints "TF OK n".
"""
import glob
import sys

import numpy as np
import tensorflow as tf

prefix, step, R, nshards = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
shards = sorted(glob.glob(prefix + ".data-*-of-%05d" % nshards))
assert len(shards) == nshards, shards
r = tf.train.load_checkpoint(prefix)
v = lambda k: r.get_tensor(k + "/.ATTRIBUTES/VARIABLE_VALUE")
f32 = np.float32
i = np.arange(32, dtype=f32)
checks = 0
def same(name, got, want):
    global checks
    checks += np.size(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (name, got.dtype, got.shape, want.dtype, want.shape)
    assert np.array_equal(got, want), (name, got, want)
same("kernel", v("model/layer_with_weights-0/kernel"), (f32(step) + i * f32(0.25)).reshape(8, 4))
same("bias", v("model/layer_with_weights-0/bias"), -f32(step) - np.arange(4, dtype=f32))
e = np.arange(256, dtype=f32)
same("embedding", v("model/embedding"), (f32(step) * f32(0.5) + e / f32(3.0)).reshape(64, 4))
slot = r.get_tensor("model/layer_with_weights-0/kernel/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE")
same("slot m", slot, (f32(step) * f32(0.01) * i).reshape(8, 4))
same("step", v("step"), np.int64(step))
total = f32(1) * f32(step) / f32(8)
for k in range(1, R):
    total += f32(k + 1) * f32(step) / f32(8)
same("metric total", v("metric/total"), np.float32(total))
assert r.get_tensor("save_counter/.ATTRIBUTES/VARIABLE_VALUE") == step
checks += 1
print("TF OK %d" % checks)
