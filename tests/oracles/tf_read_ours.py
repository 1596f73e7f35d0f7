"""TensorFlow reads what libckpt wrote.

usage: tf_read_ours.py PLAN.json

PLAN is a list of checks (one TensorFlow import for all of them); each
prints "ok <check> <id>" or raises. Checks:
  same_as_tf   {ours, tf}: tf.train.load_checkpoint lists the same names,
               dtypes and shapes in both, every tensor equal byte for byte;
               both object graphs hold the same attributes (name,
               checkpoint_key, full_name): a multi-tensor attribute is one
               "table" with key ".../table", as TF writes it
  restore_tf   {ours, tf, kind, scratch}: TF builds the objects the TF-written
               file came from (kind: dtypes | table | mirrored | keras_mgr),
               Checkpoint.restore(ours).assert_consumed(), writes them again
               itself: names, dtypes, shapes and bytes equal the TF-written file
  table        {ours, tables: {attr: [key dtype, value dtype, keys, values]}}:
               MutableHashTables, then legacy-saveable tables (matched by
               attribute name, tf_legacy_table.py), restore from our file
               (assert_consumed) and export exactly the given contents
  mlp          {ours, entries}: the sample trainer's tree (Dense/Dense MLP,
               legacy-Keras Adam with m/v slots, metric, custom state) built
               from TF objects; restore(ours).assert_consumed(); every value
               equal to libckpt's record; load_checkpoint lists exactly the
               recorded names, dtypes and shapes
  manager      {dir, latest}: tf.train.CheckpointManager and
               tf.train.latest_checkpoint on our directory find `latest`
  resaved      {ours, tf, savedmodel | table}: `ckpt restore TF --save OURS`
               of a TF-written checkpoint. Our object graph equals TF's
               (every field, has_checkpoint_values included); the tensors
               are TF's byte for byte; TF rebuilds the objects (the SavedModel
               `savedmodel` loaded, or tf_table_module.TableModule for
               `table`) and restores OURS with assert_consumed(): read() for a
               file without save_counter (what TF's write() makes; restore()
               would create a save_counter the file cannot match, on TF's own
               file alike, which is checked too), restore() for one with it
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf

cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(
    cpus[0], [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])

from tensorflow.core.protobuf import trackable_object_graph_pb2  # noqa: E402
from tensorflow.python.trackable.autotrackable import AutoTrackable  # noqa: E402

from tf_legacy_table import LegacyTable  # noqa: E402
from tf_manifest import tensor_record  # noqa: E402

GRAPH = "_CHECKPOINTABLE_OBJECT_GRAPH"


def fail(msg):
    raise AssertionError(msg)


def value_bytes(v):
    a = v.numpy()
    if v.dtype == tf.string:
        return [bytes(e) for e in np.asarray(a, dtype=object).reshape(-1)]
    return np.ascontiguousarray(a).tobytes()


def record_bytes(rec):
    if rec["dtype"] == "string":
        return [bytes.fromhex(e) for e in rec["elems"]]
    return bytes.fromhex(rec["hex"])


def listing(prefix):
    r = tf.train.load_checkpoint(prefix)
    return r, {k: (dt.name, r.get_variable_to_shape_map()[k]) for k, dt in r.get_variable_to_dtype_map().items()}


def graph_attributes(blob):
    g = trackable_object_graph_pb2.TrackableObjectGraph()
    g.ParseFromString(blob)
    return {(a.name, a.checkpoint_key, a.full_name) for n in g.nodes for a in n.attributes}


def same_as_tf(c):
    ro, lo = listing(c["ours"])
    rt, lt = listing(c["tf"])
    if lo != lt:
        fail("names/dtypes/shapes differ:\n ours %s\n tf   %s" % (sorted(lo.items()), sorted(lt.items())))
    for k, (dt, _) in lt.items():
        if k == GRAPH and c.get("graph", True):
            # node ids and edges may differ; the attributes (how each value is named) must not
            a, b = (graph_attributes(x.get_tensor(k)) for x in (ro, rt))
            if a != b:
                fail("object graph attributes differ:\n ours %s\n tf   %s" % (sorted(a - b), sorted(b - a)))
            continue
        if k == GRAPH:
            continue
        a, b = tensor_record(dt, ro.get_tensor(k)), tensor_record(dt, rt.get_tensor(k))
        if c.get("unordered_tables") and "/.ATTRIBUTES/table-" in k:
            # a table TF exported again lists its entries in its own hash order
            a, b = (sorted(np.asarray(x.get_tensor(k)).reshape(-1).tolist()) for x in (ro, rt))
        if a != b:
            fail("%s differs: ours %s tf %s" % (k, a, b))


def obj(**kw):
    o = AutoTrackable()
    for k, v in kw.items():
        setattr(o, k, v)
    return o


def zeros_like_entry(dt, shape):
    if dt == "string":
        return tf.Variable(tf.fill(shape, ""))
    return tf.Variable(tf.zeros(shape, dt))


def build_dtypes(tf_prefix):
    """One variable per root attribute, as tf_write_refs.dtypes() made them."""
    _, lt = listing(tf_prefix)
    vs = {}
    for k, (dt, shape) in lt.items():
        if k == GRAPH or k == "save_counter/.ATTRIBUTES/VARIABLE_VALUE":
            continue
        vs[k.split("/")[0]] = zeros_like_entry(dt, shape)
    return tf.train.Checkpoint(**vs), {k + "/.ATTRIBUTES/VARIABLE_VALUE": v for k, v in vs.items()}


def build_mirrored(tf_prefix):
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        w = tf.Variable(tf.zeros([3, 4]))
        b = tf.Variable(tf.zeros([4]))
        total = tf.Variable(0.0, synchronization=tf.VariableSynchronization.ON_READ,
                            aggregation=tf.VariableAggregation.SUM)
    vs = {"w": w, "b": b, "total": total}
    return tf.train.Checkpoint(**vs), {k + "/.ATTRIBUTES/VARIABLE_VALUE": v for k, v in vs.items()}


def build_keras_mgr(tf_prefix):
    import keras
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"),
                              keras.layers.BatchNormalization(), keras.layers.Dense(2)])
    opt = keras.optimizers.Adam(learning_rate=0.01)
    opt.build(model.trainable_variables)
    metric = keras.metrics.MeanAbsoluteError()
    mstate = tf.Module()
    mstate.total, mstate.count = (v.value for v in metric.variables)
    ck = tf.train.Checkpoint(model=model, optimizer=opt, metric=mstate, step=tf.Variable(0, dtype=tf.int64))
    return ck, None


def build_table(tf_prefix):
    t = tf.lookup.experimental.MutableHashTable(tf.string, tf.int64, default_value=-1)
    t2 = tf.lookup.experimental.MutableHashTable(tf.int64, tf.float32, default_value=0.0)
    t3 = LegacyTable(tf.string, tf.float64, 0.0)
    ck = tf.train.Checkpoint(table=t, ids=t2, legacy=t3, v=tf.Variable([0.0, 0.0]))
    return ck, {"v/.ATTRIBUTES/VARIABLE_VALUE": ck.v}


def restore_tf(c):
    """Restore ours into fresh TF objects, write them with TF, compare with what TF wrote first."""
    ck, _ = {"dtypes": build_dtypes, "mirrored": build_mirrored, "keras_mgr": build_keras_mgr,
             "table": build_table}[c["kind"]](c["tf"])
    # read() pairs with write(): files without a save_counter (TF's write()) do not create one
    has_counter = "save_counter/.ATTRIBUTES/VARIABLE_VALUE" in listing(c["tf"])[1]
    (ck.restore if has_counter else ck.read)(c["ours"]).assert_consumed()
    again = ck.write(os.path.join(c["scratch"], c["kind"], "ckpt"))
    # TF names fresh objects anew ("dense_1"): full names differ, so the graphs are not compared here
    same_as_tf({"ours": again, "tf": c["tf"], "unordered_tables": c["kind"] == "table", "graph": False})
    if c["kind"] == "table":
        check_tables(ck, {"table": ["string", "int64", [b"alpha", b"beta", b"", b"\x00z"], [1, 2, 3, -4]],
                          "ids": ["int64", "float32", [10, 20], [0.5, -1.25]],
                          "legacy": ["string", "float64", [b"k1", b"k2"], [1.5, 2.5]]})


def check_tables(ck, want):
    for attr, (kdt, vdt, keys, values) in want.items():
        t = getattr(ck, attr)
        k, v = t.export()
        got = sorted(zip([bytes(x) if kdt == "string" else int(x) for x in k.numpy()], v.numpy().tolist()))
        exp = sorted(zip(keys, values))
        if got != exp:
            fail("table %s: restored %r, want %r" % (attr, got, exp))
        probe = tf.constant([keys[0]], dtype=kdt)
        if t.lookup(probe).numpy().tolist() != [values[0]]:
            fail("table %s: lookup of %r" % (attr, keys[0]))


def table(c):
    """Restore into MutableHashTables, then into legacy-saveable tables (matched by attribute name)."""
    for make in (lambda kdt, vdt: tf.lookup.experimental.MutableHashTable(kdt, vdt, default_value=tf.zeros([], vdt)),
                 lambda kdt, vdt: LegacyTable(kdt, vdt, tf.zeros([], vdt))):
        tabs, vs, want = {}, {}, {}
        for attr, (kdt, vdt, keys, values) in c["tables"].items():
            keys = [bytes.fromhex(k) for k in keys] if kdt == "string" else keys
            tabs[attr] = make(kdt, vdt)
            want[attr] = [kdt, vdt, keys, values]
        for name, rec in c.get("variables", {}).items():
            vs[name] = zeros_like_entry(rec["dtype"], rec["shape"])
        ck = tf.train.Checkpoint(**tabs, **vs)
        ck.restore(c["ours"]).assert_consumed()
        check_tables(ck, want)
        for name, rec in c.get("variables", {}).items():
            if value_bytes(vs[name]) != record_bytes(rec):
                fail("variable %s: %r" % (name, value_bytes(vs[name])))


def mlp_tree():
    from tensorflow.python.keras.optimizer_v2 import adam

    def var(shape, dt=tf.float32):
        return tf.Variable(tf.zeros(shape, dt))
    model = obj(**{"layer_with_weights-0": obj(kernel=var([8, 16]), bias=var([16])),
                   "layer_with_weights-1": obj(kernel=var([16, 1]), bias=var([1]))})
    prims = [getattr(getattr(model, "layer_with_weights-%d" % i), n) for i in range(2) for n in ("kernel", "bias")]
    opt = adam.Adam()
    opt._create_all_weights(prims)
    metric = obj(total=var([]), count=var([]))
    ck = tf.train.Checkpoint(model=model, optimizer=opt, metric=metric, step=var([], tf.int64),
                             rng_state=var([4], tf.int64), data_position=var([], tf.int64))
    by_key = {}
    for i in range(2):
        for n in ("kernel", "bias"):
            p = "model/layer_with_weights-%d/%s" % (i, n)
            v = getattr(getattr(model, "layer_with_weights-%d" % i), n)
            by_key[p + "/.ATTRIBUTES/VARIABLE_VALUE"] = v
            for s in ("m", "v"):
                by_key[p + "/.OPTIMIZER_SLOT/optimizer/%s/.ATTRIBUTES/VARIABLE_VALUE" % s] = opt.get_slot(v, s)
    for n in ("iter", "beta_1", "beta_2", "decay", "learning_rate"):
        by_key["optimizer/%s/.ATTRIBUTES/VARIABLE_VALUE" % n] = getattr(opt, "iterations" if n == "iter" else n) \
            if n == "iter" else opt._get_hyper(n)
    for k in ("total", "count"):
        by_key["metric/%s/.ATTRIBUTES/VARIABLE_VALUE" % k] = getattr(metric, k)
    for k in ("step", "rng_state", "data_position", "save_counter"):
        by_key[k + "/.ATTRIBUTES/VARIABLE_VALUE"] = getattr(ck, k)
    return ck, by_key


def mlp(c):
    ck, by_key = mlp_tree()
    ck.restore(c["ours"]).assert_consumed()
    entries = c["entries"]
    _, lo = listing(c["ours"])
    want = {k: (r["dtype"], r["shape"]) for k, r in entries.items()}
    if lo != want:
        fail("load_checkpoint lists %s, libckpt wrote %s" % (sorted(lo.items()), sorted(want.items())))
    if set(by_key) != set(want) - {GRAPH}:
        fail("tree keys %s vs file %s" % (sorted(by_key), sorted(want)))
    for k, v in by_key.items():
        if value_bytes(v) != record_bytes(entries[k]):
            fail("%s: TF restored %r, libckpt wrote %r" % (k, value_bytes(v), record_bytes(entries[k])))


def manager(c):
    ck, _ = mlp_tree()
    mgr = tf.train.CheckpointManager(ck, c["dir"], max_to_keep=5)
    if mgr.latest_checkpoint != c["latest"]:
        fail("CheckpointManager.latest_checkpoint %r, want %r" % (mgr.latest_checkpoint, c["latest"]))
    if tf.train.latest_checkpoint(c["dir"]) != c["latest"]:
        fail("tf.train.latest_checkpoint %r" % tf.train.latest_checkpoint(c["dir"]))
    if mgr.restore_or_initialize() != c["latest"]:
        fail("restore_or_initialize did not restore %r" % c["latest"])
    if [os.path.basename(p) for p in mgr.checkpoints] != c["kept"]:
        fail("checkpoints %r, want %r" % (mgr.checkpoints, c["kept"]))


def object_graph(prefix):
    g = trackable_object_graph_pb2.TrackableObjectGraph()
    g.ParseFromString(tf.train.load_checkpoint(prefix).get_tensor(GRAPH))
    return g


def consumed(how, ck, prefix):
    """None when how(prefix).assert_consumed() passes, else its message."""
    try:
        getattr(ck, how)(prefix).assert_consumed()
        return None
    except AssertionError as e:
        return str(e)


def resaved(c):
    ours, theirs = object_graph(c["ours"]), object_graph(c["tf"])
    if ours != theirs:
        diff = [i for i, (a, b) in enumerate(zip(ours.nodes, theirs.nodes)) if a != b]
        i = diff[0] if diff else min(len(ours.nodes), len(theirs.nodes))
        fail("object graph differs from TF's (%d / %d nodes; first at node %d):\n ours %s\n tf   %s" % (
            len(ours.nodes), len(theirs.nodes), i, ours.nodes[i] if i < len(ours.nodes) else None,
            theirs.nodes[i] if i < len(theirs.nodes) else None))
    same_as_tf({"ours": c["ours"], "tf": c["tf"]})
    if "savedmodel" in c:
        def build():
            return tf.saved_model.load(c["savedmodel"])
    else:
        from tf_table_module import TableModule

        def build():
            return TableModule(filled=False)
    has_counter = "save_counter/.ATTRIBUTES/VARIABLE_VALUE" in listing(c["tf"])[1]
    how = "restore" if has_counter else "read"
    obj = build()
    err = consumed(how, tf.train.Checkpoint(obj), c["ours"])
    if err:
        fail("TF %s(ours).assert_consumed(): %s" % (how, err))
    if "table" in c:
        got = obj.lookup_table.lookup(tf.constant([1, 2, 3], tf.int64)).numpy().tolist()
        if got != [1, 4, -1]:
            fail("the table restored from ours looks up %r, want [1, 4, -1]" % got)
    if not has_counter:
        # restore() adds a save_counter: TF's verdict on ours is its verdict on its own file
        a = consumed("restore", tf.train.Checkpoint(build()), c["ours"])
        b = consumed("restore", tf.train.Checkpoint(build()), c["tf"])
        if (a is None) != (b is None) or (a and "save_counter" not in a):
            fail("restore().assert_consumed(): ours %r, TF's own file %r" % (a, b))


CHECKS = {"same_as_tf": same_as_tf, "restore_tf": restore_tf, "table": table, "mlp": mlp, "manager": manager,
          "resaved": resaved}

with open(sys.argv[1]) as f:
    plan = json.load(f)
for c in plan:
    CHECKS[c["check"]](c)
    print("ok", c["check"], c.get("id", ""))
    sys.stdout.flush()
