"""TensorFlow restores what tests/mpi/mpi_tier.c persists, with assert_consumed.

Usage: tf_tier_mw.py PREFIX STEP
The MPI test model (tests/mpi/mpi_model.c: dense kernel and bias, an
embedding, Adam's slot m of the kernel, step, a sync-on-read metric) plus
mpi_tier's partitioned table (12 x 3 in 3 parts, cell = STEP * 100 + r * 3 + c)
rebuilt as TensorFlow objects (the table a ShardedVariable of 3 shards, the
optimizer a tf.compat.v1 Adam whose slot is created after the restore, so
TensorFlow's deferred slot restoration fills it): every object and value of
the checkpoint consumed, and the values those of STEP. Prints "TF
ASSERT_CONSUMED OK".
"""
import sys
import numpy as np
import tensorflow as tf
from tensorflow.python.distribute import sharded_variable

prefix, step = sys.argv[1], int(sys.argv[2])
f32 = np.float32
dense = tf.Module()
dense.kernel = tf.Variable(tf.zeros([8, 4]))
dense.bias = tf.Variable(tf.zeros([4]))
model = tf.Module()
setattr(model, "layer_with_weights-0", dense)
model.embedding = tf.Variable(tf.zeros([64, 4]))
metric = tf.Module()
metric.total = tf.Variable(tf.constant(0, tf.float32))
metric.count = tf.Variable(tf.zeros([2], tf.float64))
table = sharded_variable.ShardedVariable([tf.Variable(tf.zeros([4, 3])) for _ in range(3)], name="table")
opt = tf.compat.v1.train.AdamOptimizer()
ck = tf.train.Checkpoint(model=model, optimizer=opt, step=tf.Variable(tf.constant(0, tf.int64)), metric=metric,
                         table=table)
st = ck.restore(prefix)
slot = opt._zeros_slot(dense.kernel, "m", "Adam")  # the slot is created: TF restores it (deferred)
st.assert_consumed()
i = np.arange(32, dtype=f32)
assert np.array_equal(dense.kernel.numpy(), (f32(step) + i * f32(0.25)).reshape(8, 4))
assert np.array_equal(dense.bias.numpy(), -f32(step) - np.arange(4, dtype=f32))
e = np.arange(256, dtype=f32)
assert np.array_equal(model.embedding.numpy(), (f32(step) * f32(0.5) + e / f32(3.0)).reshape(64, 4))
full = np.concatenate([v.numpy() for v in table.variables])
assert np.array_equal(full, f32(step) * f32(100) + np.arange(36, dtype=f32).reshape(12, 3)), full
assert np.array_equal(slot.numpy(), (f32(step) * f32(0.01) * i).reshape(8, 4))
assert int(ck.step.numpy()) == step and int(ck.save_counter.numpy()) == step
print("TF ASSERT_CONSUMED OK")
