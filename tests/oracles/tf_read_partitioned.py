"""TensorFlow (2.21) reads a partitioned variable libckpt wrote.

Usage: tf_read_partitioned.py PREFIX KEY ROWS COLS tf1|tf2 P [P ...]
The entry KEY (float32, ROWS x COLS) holds full[i, j] = i * COLS + j.
  1. tf.train.load_checkpoint(PREFIX).get_tensor(KEY) is the full tensor,
     byte for byte, and the reader lists KEY with its full shape;
  2. tf1 (KEY is the variable's name): for each P, in TF1 graph mode,
     tf.compat.v1.get_variable(KEY, ..., partitioner=fixed_size_partitioner(P))
     restored by tf.compat.v1.train.Saver holds those rows in every
     partition, byte for byte (TensorFlow reassembles them from our slices);
     tf2 (KEY is "ATTR/.ATTRIBUTES/VARIABLE_VALUE"): for each P, a
     ShardedVariable of P shards tracked as ATTR restored by
     tf.train.Checkpoint holds those rows in every shard.
Prints "TF PARTITIONED READ OK".
"""
import sys

import numpy as np
import tensorflow as tf

prefix, name = sys.argv[1], sys.argv[2]
rows, cols = int(sys.argv[3]), int(sys.argv[4])
mode = sys.argv[5]
parts = [int(p) for p in sys.argv[6:]]
full = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols)

r = tf.train.load_checkpoint(prefix)
shapes = r.get_variable_to_shape_map()
assert shapes.get(name) == [rows, cols], shapes
got = r.get_tensor(name)
assert got.dtype == np.float32 and got.tobytes() == full.tobytes(), got

v1 = tf.compat.v1
if mode == "tf2":
    from tensorflow.python.distribute import sharded_variable  # noqa: E402
    attr = name.split("/")[0]
    for p in parts:
        split = np.array_split(np.zeros_like(full), p, axis=0)
        shards = [tf.Variable(z, name="%s/part_%d" % (attr, k)) for k, z in enumerate(split)]
        sv = sharded_variable.ShardedVariable(shards, name=attr)
        ck = tf.train.Checkpoint(**{attr: sv})
        # values, not assert_existing_objects_matched: a checkpoint written without save (ours by
        # ckpt_checkpoint_write) has no save_counter; the shards start at zero, so a miss fails below
        ck.restore(prefix).expect_partial()
        at = 0
        for k, var in enumerate(shards):
            val = var.numpy()
            assert val.tobytes() == full[at:at + val.shape[0]].tobytes(), (p, k, val)
            at += val.shape[0]
        assert at == rows
        print("TF2 Checkpoint restored %s into a ShardedVariable of %d shards" % (attr, p))
    parts = []
for p in parts:
    g = tf.Graph()
    with g.as_default():
        emb = v1.get_variable(name, shape=[rows, cols], dtype=tf.float32, initializer=v1.zeros_initializer(),
                              partitioner=v1.fixed_size_partitioner(p))
        pv = list(emb)
        assert len(pv) == min(p, rows), len(pv)
        saver = v1.train.Saver(var_list=[emb])
        with v1.Session() as sess:
            saver.restore(sess, prefix)
            at = 0
            for k, var in enumerate(pv):
                val = sess.run(var)
                n = val.shape[0]
                assert val.tobytes() == full[at:at + n].tobytes(), (p, k, val)
                at += n
            assert at == rows
    print("TF1 Saver restored %s into %d partitions" % (name, len(pv)))
print("TF PARTITIONED READ OK")
