"""TensorFlow oracle for host state tracked by pointer (tests/core/test_host_state.c).

    tf_host_state.py OURS THEIRS

Restores the C-written checkpoint OURS into a tf.train.Checkpoint with the
same layout (step and kernel on the root, a nested `loop` object with rng,
position, lr, hist and epoch), asserts every value was consumed, and prints the values as
JSON. Then writes THEIRS from TensorFlow with values derived from the ones
read (step + 1, ...), for the C side to restore into host memory.
"""
import json
import sys

import tensorflow as tf


def layout():
    loop = tf.train.Checkpoint(
        rng=tf.Variable(tf.zeros([4], tf.int64)),
        position=tf.Variable(tf.constant(0, tf.int64)),
        lr=tf.Variable(tf.constant(0.0, tf.float64)),
        hist=tf.Variable(tf.zeros([3], tf.float32)),
        epoch=tf.Variable(tf.constant(0, tf.int32)),
    )
    root = tf.train.Checkpoint(step=tf.Variable(tf.constant(0, tf.int64)), loop=loop,
                               kernel=tf.Variable(tf.zeros([2], tf.float32)))
    return root, loop


def main():
    ours, theirs = sys.argv[1], sys.argv[2]
    root, loop = layout()
    root.read(ours).assert_consumed()
    got = {
        "step": int(root.step.numpy()),
        "rng": [int(x) for x in loop.rng.numpy()],
        "position": int(loop.position.numpy()),
        "lr": float(loop.lr.numpy()).hex(),
        "hist": [float(x).hex() for x in loop.hist.numpy()],
        "epoch": int(loop.epoch.numpy()),
    }
    print(json.dumps(got, sort_keys=True))
    root.step.assign(got["step"] + 1)
    loop.rng.assign([x + 1 for x in got["rng"]])
    loop.position.assign(got["position"] + 64)
    loop.lr.assign(float.fromhex(got["lr"]) / 2)
    loop.hist.assign([float.fromhex(x) * 2 for x in got["hist"]])
    loop.epoch.assign(got["epoch"] + 1)
    root.kernel.assign(root.kernel * 3)
    root.write(theirs)


if __name__ == "__main__":
    main()
