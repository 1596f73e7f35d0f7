"""TensorFlow reads a TensorBundle that libckpt converted from safetensors / GGUF.

Usage: flat_tf_check.py ORIGINAL_PREFIX CONVERTED_PREFIX
Checks, with TensorFlow itself:
  - tf.train.load_checkpoint lists the same keys, dtypes and shapes in both, values bit-equal;
  - both object graphs (_CHECKPOINTABLE_OBJECT_GRAPH, parsed by TF's own proto) have the same
    shape: object paths, attributes with their checkpoint keys, slot variables;
  - tf.train.Checkpoint restores the converted prefix into tf.Module / tf.Variable objects built
    from the graph, assert_existing_objects_matched() passes, and values equal the original's.
Prints "OK ..." and exits 0, or prints the mismatch and exits 1.
"""
import sys

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

orig, conv = sys.argv[1], sys.argv[2]
ro, rc = tf.train.load_checkpoint(orig), tf.train.load_checkpoint(conv)
mo, mc = ro.get_variable_to_shape_map(), rc.get_variable_to_shape_map()
do, dc = ro.get_variable_to_dtype_map(), rc.get_variable_to_dtype_map()
if set(mo) != set(mc):
    sys.exit("key sets differ: only in original %s, only in converted %s" % (sorted(set(mo) - set(mc)),
                                                                           sorted(set(mc) - set(mo))))
for k in mo:
    if k == "_CHECKPOINTABLE_OBJECT_GRAPH":
        continue
    if mo[k] != mc[k] or do[k] != dc[k]:
        sys.exit("%s: %s %s vs %s %s" % (k, do[k], mo[k], dc[k], mc[k]))
    a, b = ro.get_tensor(k), rc.get_tensor(k)
    if np.asarray(a).tobytes() != np.asarray(b).tobytes():
        sys.exit("%s: values differ" % k)


def shape_of(reader):
    g = trackable_object_graph_pb2.TrackableObjectGraph()
    g.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    paths = {0: ""}
    queue = [0]
    while queue:
        i = queue.pop(0)
        for c in g.nodes[i].children:
            if c.node_id not in paths:
                paths[c.node_id] = (paths[i] + "/" if paths[i] else "") + c.local_name
                queue.append(c.node_id)
    out = set()
    for i, n in enumerate(g.nodes):
        for a in n.attributes:
            out.add(("attr", a.name, a.checkpoint_key))
        for s in n.slot_variables:
            out.add(("slot", paths.get(i), paths.get(s.original_variable_node_id), s.slot_name,
                     tuple(a.checkpoint_key for a in g.nodes[s.slot_variable_node_id].attributes)))
    for i, p in paths.items():
        out.add(("node", p))
    return g, paths, out


go, po, so = shape_of(ro)
gc, pc, sc = shape_of(rc)
if so != sc:
    sys.exit("object graphs differ:\n  only in original %s\n  only in converted %s" % (sorted(so - sc, key=str),
                                                                                      sorted(sc - so, key=str)))

# restore into objects built from the converted graph (slot variables need an optimizer: not built)
slot_nodes = {s.slot_variable_node_id for n in gc.nodes for s in n.slot_variables}
built = {}


def build(i):
    n = gc.nodes[i]
    attrs = [a for a in n.attributes if a.name == "VARIABLE_VALUE"]
    if attrs and not n.children:
        k = attrs[0].checkpoint_key
        return tf.Variable(tf.zeros(mc[k], dtype=dc[k]))
    m = tf.Module()
    for c in n.children:
        if c.node_id not in slot_nodes:
            setattr(m, c.local_name, build(c.node_id))
    return m


# save_counter is the Checkpoint's own variable
root_children = {c.local_name: build(c.node_id) for c in gc.nodes[0].children if c.local_name != "save_counter"}
ck = tf.train.Checkpoint(**root_children)
ck.restore(conv).assert_existing_objects_matched()


def walk(obj, path):
    if isinstance(obj, tf.Variable):
        k = path + "/.ATTRIBUTES/VARIABLE_VALUE"
        if obj.numpy().tobytes() != np.asarray(ro.get_tensor(k)).tobytes():
            sys.exit("restored %s differs" % k)
        return 1
    return sum(walk(v, path + "/" + n) for n, v in vars(obj).items() if isinstance(v, (tf.Module, tf.Variable)))


restored = sum(walk(v, n) for n, v in root_children.items())
if ck.save_counter.numpy() != ro.get_tensor("save_counter/.ATTRIBUTES/VARIABLE_VALUE"):
    sys.exit("save_counter not restored")
print("OK %d keys, %d graph facts, %d variables restored by tf.train.Checkpoint" % (len(mo), len(so), restored))
