"""TensorFlow restores incremental checkpoints (issue 33).

usage: tf_incremental.py DIR EXPECT_DIR [NAME]

tf.train.get_checkpoint_state(DIR) lists the kept checkpoints; for each
one P, EXPECT_DIR/<basename P>/ holds NAME.f32 (the raw float32 bytes every
root variable NAME must have). TensorFlow lists P with load_checkpoint (the
same names, float32, the shapes libckpt recorded in NAME.shape), builds
tf.train.Checkpoint(NAME=tf.Variable(...)), restores P with
assert_consumed() and compares every value byte for byte. Prints
"ok P" per checkpoint and "ok all N". With NAME, only the listed checkpoint
of that basename (which must be listed).
"""
import os
import sys

import numpy as np
import tensorflow as tf


def main(d, expect, only=None):
    st = tf.train.get_checkpoint_state(d)
    if st is None:
        raise AssertionError(f"TF finds no checkpoint state in {d}")
    paths = list(st.all_model_checkpoint_paths)
    if not paths or paths[-1] != st.model_checkpoint_path:
        raise AssertionError(f"bad state: {paths} / {st.model_checkpoint_path}")
    if only is not None:
        paths = [p for p in paths if os.path.basename(p) == only]
        if len(paths) != 1:
            raise AssertionError(f"{only} is not listed once in {d}'s checkpoint state")
    for p in paths:
        ed = os.path.join(expect, os.path.basename(p))
        names = sorted(f[:-4] for f in os.listdir(ed) if f.endswith(".f32"))
        r = tf.train.load_checkpoint(p)
        shapes = r.get_variable_to_shape_map()
        vars_ = {}
        for n in names:
            shape = [int(x) for x in open(os.path.join(ed, n + ".shape")).read().split()]
            key = n + "/.ATTRIBUTES/VARIABLE_VALUE"
            if key not in shapes or list(shapes[key]) != shape:
                raise AssertionError(f"{p}: {key} listed as {shapes.get(key)}, want {shape}")
            vars_[n] = tf.Variable(tf.zeros(shape, tf.float32))
        ck = tf.train.Checkpoint(**vars_)
        ck.restore(p).assert_consumed()
        for n in names:
            want = open(os.path.join(ed, n + ".f32"), "rb").read()
            got = np.ascontiguousarray(vars_[n].numpy()).tobytes()
            if got != want:
                bad = next(i for i in range(len(want)) if got[i] != want[i])
                raise AssertionError(f"{p}: {n} differs from byte {bad}")
        print("ok", p)
    print("ok all", len(paths))


if __name__ == "__main__":
    main(*sys.argv[1:4])
