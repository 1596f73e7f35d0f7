"""Writes TensorFlow checkpoints at test time and what TF reports about them.

usage: tf_write_refs.py OUTDIR

Writes under OUTDIR, then OUTDIR/manifest.json:
  keras_mgr/     Keras 3 model + Adam + metric under tf.train.Checkpoint and
                 tf.train.CheckpointManager (two saves, max_to_keep=2)
  mirrored/      variables and a SUM sync-on-read variable created in a
                 MirroredStrategy scope over 2 logical CPU devices
  sharded/       tf.train.CheckpointOptions(experimental_sharding_callback=
                 MaxShardSizePolicy): num_shards > 1
  saver_sharded/ TF1 graph-mode Saver(sharded=True), variables on 2 devices
  dtypes/        one variable per dtype TF checkpoints, strings included
  table/         tf.lookup.experimental.MutableHashTable (string -> int64)
                 and (int64 -> float32), and a legacy-saveable table
                 (tf_legacy_table.py): a multi-tensor SaveableObject each
  savedmodel/    tf.saved_model.save of a module with variables and a signature

Each manifest record: "id", "open" (what libckpt is given), "prefix" (the
bundle TF reads), "entries" (tf_manifest.bundle_entries: TF's names, dtypes,
shapes, bytes), "num_shards" (data files TF wrote), and for managers
"latest" (tf.train.latest_checkpoint).
"""
import glob
import os
import sys

import numpy as np
import tensorflow as tf

cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(
    cpus[0], [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])

import keras  # noqa: E402  (after the device configuration)

from tf_legacy_table import LegacyTable  # noqa: E402
from tf_manifest import bundle_entries, dump  # noqa: E402

out = sys.argv[1]
records = []


def record(rid, open_path, prefix, **extra):
    shards = glob.glob(prefix + ".data-*-of-*")
    rec = {"id": rid, "open": open_path, "prefix": prefix, "entries": bundle_entries(prefix),
           "num_shards": len(shards)}
    rec.update(extra)
    records.append(rec)


def keras_mgr():
    keras.utils.set_random_seed(7)
    d = os.path.join(out, "keras_mgr")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"),
                              keras.layers.BatchNormalization(), keras.layers.Dense(2)])
    opt = keras.optimizers.Adam(learning_rate=0.01)
    model.compile(optimizer=opt, loss="mse", metrics=["mae"])
    metric = keras.metrics.MeanAbsoluteError()
    x = np.random.RandomState(0).rand(32, 4).astype("float32")
    y = np.random.RandomState(1).rand(32, 2).astype("float32")
    # Keras 3 metrics are not trackable: their state variables go under a tf.Module
    mstate = tf.Module()
    mstate.total, mstate.count = (v.value for v in metric.variables)
    ck = tf.train.Checkpoint(model=model, optimizer=opt, metric=mstate, step=tf.Variable(0, dtype=tf.int64))
    mgr = tf.train.CheckpointManager(ck, d, max_to_keep=2)
    for epoch in range(3):
        model.fit(x, y, epochs=1, batch_size=8, verbose=0)
        metric.update_state(y, model(x))
        ck.step.assign_add(1)
        mgr.save()
    latest = tf.train.latest_checkpoint(d)
    record("keras_mgr", d, latest, latest=latest,
           kept=[os.path.basename(p) for p in mgr.checkpoints])


def mirrored():
    d = os.path.join(out, "mirrored")
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    assert strategy.num_replicas_in_sync == 2
    with strategy.scope():
        w = tf.Variable(np.arange(12, dtype=np.float32).reshape(3, 4) / 7.0, name="w")
        b = tf.Variable(np.ones(4, np.float32) * 0.25, name="b")
        total = tf.Variable(0.0, synchronization=tf.VariableSynchronization.ON_READ,
                            aggregation=tf.VariableAggregation.SUM, name="total")

    @tf.function
    def step():
        def fn():
            ctx = tf.distribute.get_replica_context()
            total.assign_add(tf.cast(ctx.replica_id_in_sync_group + 1, tf.float32) * 1.5)
        strategy.run(fn)
    step()
    ck = tf.train.Checkpoint(w=w, b=b, total=total)
    p = ck.write(os.path.join(d, "ckpt"))
    record("mirrored", p, p)


def sharded():
    d = os.path.join(out, "sharded")
    vs = {"v%d" % i: tf.Variable(np.arange(40, dtype=np.float32) + i) for i in range(6)}
    vs["name"] = tf.Variable(b"sharded")
    ck = tf.train.Checkpoint(**vs)
    opts = tf.train.CheckpointOptions(
        experimental_sharding_callback=tf.train.experimental.MaxShardSizePolicy(max_shard_size=200))
    p = ck.write(os.path.join(d, "ckpt"), options=opts)
    record("sharded", p, p)


def saver_sharded():
    d = os.path.join(out, "saver_sharded")
    os.makedirs(d, exist_ok=True)
    g = tf.Graph()
    with g.as_default():
        with tf.device("/cpu:0"):
            a = tf.compat.v1.get_variable("a", initializer=np.arange(6, dtype=np.float64).reshape(2, 3))
        with tf.device("/cpu:1"):
            b = tf.compat.v1.get_variable("scope/b", initializer=np.array([1, -2, 3], np.int32))
        saver = tf.compat.v1.train.Saver([a, b], sharded=True)
        with tf.compat.v1.Session(graph=g) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            p = saver.save(sess, os.path.join(d, "model.ckpt"), write_meta_graph=False)
    record("saver_sharded", p, p)


STRINGS = [b"", b"a", b"\x00\xffbinary\x00", "ünïcode".encode(), b"x" * 300]


def dtypes():
    d = os.path.join(out, "dtypes")
    rs = np.random.RandomState(3)
    v = {}
    for name in ["float16", "bfloat16", "float32", "float64"]:
        v[name] = tf.Variable(tf.cast(rs.randn(2, 3) * 100, name))
    for name in ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]:
        info = np.iinfo(name)
        v[name] = tf.Variable(np.array([info.min, info.max, 0, 1, 2, 3], dtype=name).reshape(2, 3))
    v["bool"] = tf.Variable(np.array([True, False, True]))
    v["complex64"] = tf.Variable(np.array([1 + 2j, -3.5j], np.complex64))
    v["complex128"] = tf.Variable(np.array([[1e300 + 1j], [-0.0 - 2j]], np.complex128))
    v["string"] = tf.Variable(tf.constant(STRINGS))
    v["string_scalar"] = tf.Variable(b"one string")
    v["string_matrix"] = tf.Variable(tf.constant([[b"r0c0", b""], [b"r1c0", b"\n"]]))
    v["scalar_f32"] = tf.Variable(3.25)
    v["empty_f32"] = tf.Variable(tf.zeros([0, 4]))
    p = tf.train.Checkpoint(**v).write(os.path.join(d, "ckpt"))
    record("dtypes", p, p)


def table():
    d = os.path.join(out, "table")
    t = tf.lookup.experimental.MutableHashTable(tf.string, tf.int64, default_value=-1)
    t.insert(tf.constant([b"alpha", b"beta", b"", b"\x00z"]), tf.constant([1, 2, 3, -4], tf.int64))
    t2 = tf.lookup.experimental.MutableHashTable(tf.int64, tf.float32, default_value=0.0)
    t2.insert(tf.constant([10, 20], tf.int64), tf.constant([0.5, -1.25]))
    t3 = LegacyTable(tf.string, tf.float64, 0.0)
    t3.insert(tf.constant([b"k1", b"k2"]), tf.constant([1.5, 2.5], tf.float64))
    ck = tf.train.Checkpoint(table=t, ids=t2, legacy=t3, v=tf.Variable([1.0, 2.0]))
    p = ck.write(os.path.join(d, "ckpt"))
    record("table", p, p)


def savedmodel():
    d = os.path.join(out, "savedmodel")
    m = tf.Module()
    m.w = tf.Variable(np.arange(6, dtype=np.float32).reshape(3, 2))
    m.b = tf.Variable(np.array([0.5, -0.5], np.float32))
    m.steps = tf.Variable(5, dtype=tf.int64)

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
    def serve(x):
        return {"y": tf.matmul(x, m.w) + m.b}
    m.serve = serve
    tf.saved_model.save(m, d, signatures={"serving_default": serve})
    record("savedmodel", d, os.path.join(d, "variables", "variables"))


for fn in (keras_mgr, mirrored, sharded, saver_sharded, dtypes, table, savedmodel):
    fn()
dump(os.path.join(out, "manifest.json"), {"tensorflow": tf.__version__, "keras": keras.__version__,
                                          "checkpoints": records})
