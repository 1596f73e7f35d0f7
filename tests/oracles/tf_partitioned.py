"""Reference partitioned-variable checkpoints written by TensorFlow (2.21).

Usage: tf_partitioned.py OUTDIR
Writes, with the value full[i, j] = i * 10 + j / 4 (float32, 7 x 4):
  OUTDIR/tf1/model.ckpt  TF1 graph mode (tf.compat.v1), get_variable "emb"
                         with fixed_size_partitioner(3): a Saver checkpoint
                         holding the full entry "emb" with its 3 slices.
  OUTDIR/tf2/ckpt-1      TF2 object checkpoint of a ShardedVariable of 3
                         shards (as ParameterServerStrategy's partitioners
                         make them), key "emb/.ATTRIBUTES/VARIABLE_VALUE".
  OUTDIR/full.f32        the full value, raw little-endian float32.
Prints "TF PARTITIONED OK".
"""
import os
import sys

import numpy as np
import tensorflow as tf

out = sys.argv[1]
full = (np.arange(7)[:, None] * 10 + np.arange(4)[None, :] / 4).astype(np.float32)
full.tofile(os.path.join(out, "full.f32"))

# TF1: a PartitionedVariable through the v1 graph-mode API
g = tf.Graph()
with g.as_default():
    v1 = tf.compat.v1
    def init(shape, dtype=None, partition_info=None):
        off = partition_info.var_offset[0] if partition_info else 0
        return tf.constant(full[off:off + shape[0]])
    emb = v1.get_variable("emb", shape=[7, 4], dtype=tf.float32, initializer=init,
                          partitioner=v1.fixed_size_partitioner(3))
    assert len(list(emb)) == 3
    saver = v1.train.Saver()
    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        os.makedirs(os.path.join(out, "tf1"), exist_ok=True)
        saver.save(sess, os.path.join(out, "tf1", "model.ckpt"))

# TF2: a ShardedVariable (what tf.distribute.experimental.partitioners.FixedShardsPartitioner
# produces under ParameterServerStrategy), built directly from its 3 shards
from tensorflow.python.distribute import sharded_variable  # noqa: E402

parts = np.array_split(full, 3, axis=0)
shards = [tf.Variable(p, name="emb/part_%d" % k) for k, p in enumerate(parts)]
sv = sharded_variable.ShardedVariable(shards, name="emb")
ck = tf.train.Checkpoint(emb=sv)
path = ck.save(os.path.join(out, "tf2", "ckpt"))

# both read back in TensorFlow as the full tensor
r1 = tf.train.load_checkpoint(os.path.join(out, "tf1", "model.ckpt"))
assert np.array_equal(r1.get_tensor("emb"), full)
r2 = tf.train.load_checkpoint(path)
assert np.array_equal(r2.get_tensor("emb/.ATTRIBUTES/VARIABLE_VALUE"), full), r2.get_variable_to_shape_map()
print("TF PARTITIONED OK", path)
