"""TensorFlow oracle: restore a checkpoint libckpt saved from device replicas
(tests/distribute/test_device_mirrored.c, the guarded test provider).

    tf_restore_device.py PREFIX NW NB BASE

Builds root/model/{w, b, plain} and root/step as TensorFlow variables inside
a MirroredStrategy over two logical CPUs, restores PREFIX with
assert_consumed(), checks every value against the formula the C side
assigned (w[i] = BASE + i * 0.25, b = w's formula + 1000, plain = - 5,
step = 3 * BASE) on every replica, and prints "restored N values".
"""
import sys

import numpy as np
import tensorflow as tf


def main():
    prefix, nw, nb, base = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        model = tf.Module()
        model.w = tf.Variable(tf.zeros([nw], tf.float32))
        model.b = tf.Variable(tf.zeros([nb], tf.float32))
        step = tf.Variable(tf.constant(0, tf.int64))
    model.plain = tf.Variable(tf.zeros([nb], tf.float32))
    ck = tf.train.Checkpoint(model=model, step=step)
    ck.restore(prefix).assert_consumed()

    def want(n, b):
        return (np.float32(b) + np.arange(n, dtype=np.float32) * np.float32(0.25)).astype(np.float32)

    checks = [(model.w, want(nw, base)), (model.b, want(nb, base + 1000)), (model.plain, want(nb, base - 5))]
    count = 0
    for var, expect in checks:
        for value in strategy.experimental_local_results(var) if hasattr(var, "values") else [var]:
            got = value.numpy()
            if got.tobytes() != expect.tobytes():
                raise SystemExit(f"{var.name}: restored values differ from the assigned ones")
        count += 1
    if int(step.numpy()) != int(base) * 3:
        raise SystemExit(f"step is {int(step.numpy())}, want {int(base) * 3}")
    print(f"restored {count + 1} values")


if __name__ == "__main__":
    main()
