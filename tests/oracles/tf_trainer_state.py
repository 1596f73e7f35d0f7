"""TensorFlow oracle for trainer state (tests/core/test_trainer_state.c).

    tf_trainer_state.py OURS

Restores the C-written checkpoint OURS, whose data loader position and RNG
state sit under the root child `trainer_state` (role "trainer" on our side),
into a tf.train.Checkpoint of the same layout, asserts every object
matched, and prints position and rng as JSON: the role lives in the key,
and TensorFlow reads it as any object path.
"""
import json
import sys

import tensorflow as tf


def main():
    state = tf.Module()
    state.position = tf.Variable(tf.constant(0, tf.int64))
    state.rng = tf.Variable(tf.zeros([4], tf.int64))
    root = tf.train.Checkpoint(step=tf.Variable(tf.constant(0, tf.int64)),
                               kernel=tf.Variable(tf.zeros([16], tf.float32)),
                               trainer_state=state)
    # the file also holds an optimizer slot, which this layout leaves out
    root.read(sys.argv[1]).assert_existing_objects_matched().expect_partial()
    print(json.dumps({"position": int(state.position.numpy()), "rng": [int(x) for x in state.rng.numpy()],
                      "step": int(root.step.numpy())}, sort_keys=True))


if __name__ == "__main__":
    main()
