"""What TensorFlow says a SavedModel holds: the reference for `ckpt inspect` of SavedModels.

usage: savedmodel_dump.py [cli:]DIR...

Prints one JSON object {DIR: {...}} with, per SavedModel directory:
  "saved_model": saved_model.pb decoded by TensorFlow's own protobuf classes
                 (saved_model_pb2), in the layout of `ckpt inspect --json`'s
                 "saved_model" (meta graphs in file order, signatures and their
                 tensors sorted by key, dtype names from types_pb2, shape null
                 for unknown rank);
  "show_all":    the tag-set / SignatureDef text of `saved_model_cli show --all`
                 (saved_model_cli._show_all, the function `show --all` runs, in
                 this process), without the op lists and the concrete functions;
  "sync":        {checkpoint key: [synchronization, aggregation]} for every
                 SavedVariable that is not AUTO, its key derived from its object
                 path (BFS over the SavedObjectGraph's children, TF's escaping),
                 each key checked to exist in tf.train.list_variables.
For an argument written cli:DIR, "show_all_cli" also holds the same part of the
real `saved_model_cli show --all --dir DIR` output (a subprocess, a few seconds
each), so the in-process text can be checked against the tool itself.
"""
import contextlib
import io
import json
import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402
from tensorflow.core.framework import types_pb2  # noqa: E402
from tensorflow.core.protobuf import saved_model_pb2  # noqa: E402
from tensorflow.python.tools import saved_model_cli  # noqa: E402

DTYPES = {v: k for k, v in types_pb2.DataType.items()}
SYNC = {0: "auto", 1: "auto", 2: "on_write", 3: "on_read"}
AGG = {0: "none", 1: "sum", 2: "mean", 3: "only_first_replica"}


def dtype_name(n):
    return DTYPES.get(n, "DataType(%d)" % n)


def shape(s):
    if s.unknown_rank:
        return None
    return [d.size for d in s.dim]


def tensors(m):
    out = []
    for key in sorted(m):
        t = m[key]
        enc = t.WhichOneof("encoding")
        name = t.name if enc == "name" else t.coo_sparse.values_tensor_name if enc == "coo_sparse" else ""
        out.append({"key": key, "name": name,
                    "encoding": {"name": "name", "coo_sparse": "coo_sparse",
                                 "composite_tensor": "composite", None: "none"}[enc],
                    "dtype": dtype_name(t.dtype), "shape": shape(t.tensor_shape)})
    return out


def escape(name):
    return name.replace(".", "..").replace("/", ".S")


def dump(d):
    sm = saved_model_pb2.SavedModel()
    with open(os.path.join(d, "saved_model.pb"), "rb") as f:
        sm.ParseFromString(f.read())
    mgs = []
    sync = {}
    for mg in sm.meta_graphs:
        og = mg.object_graph_def
        variables = []
        for i, n in enumerate(og.nodes):
            if n.WhichOneof("kind") != "variable":
                continue
            v = n.variable
            variables.append({"node_id": i, "name": v.name, "dtype": dtype_name(v.dtype), "shape": shape(v.shape),
                              "trainable": v.trainable, "synchronization": SYNC.get(v.synchronization, "auto"),
                              "aggregation": AGG.get(v.aggregation, "none")})
        mgs.append({"tags": list(mg.meta_info_def.tags), "tensorflow_version": mg.meta_info_def.tensorflow_version,
                    "signatures": [{"name": k, "method_name": mg.signature_def[k].method_name,
                                    "inputs": tensors(mg.signature_def[k].inputs),
                                    "outputs": tensors(mg.signature_def[k].outputs)}
                                   for k in sorted(mg.signature_def)],
                    "variables": variables})
        if not og.nodes:
            continue
        # object paths: first BFS path from the root, children in order
        paths = {0: ""}
        queue = [0]
        for u in queue:
            for c in og.nodes[u].children:
                if c.node_id not in paths:
                    paths[c.node_id] = (paths[u] + "/" if paths[u] else "") + escape(c.local_name)
                    queue.append(c.node_id)
        stored = {name for name, _ in tf.train.list_variables(os.path.join(d, "variables", "variables"))}
        for i, n in enumerate(og.nodes):
            if n.WhichOneof("kind") == "variable" and n.variable.synchronization >= 2 and i in paths:
                key = paths[i] + "/.ATTRIBUTES/VARIABLE_VALUE"
                assert key in stored, (d, key)
                sync[key] = [SYNC[n.variable.synchronization], AGG.get(n.variable.aggregation, "none")]
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        saved_model_cli._show_all(d)
    return {"saved_model": {"schema_version": sm.saved_model_schema_version, "meta_graphs": mgs},
            "show_all": signatures_part(out.getvalue()), "sync": sync}


def signatures_part(text):
    """Tag-sets and SignatureDefs: drop the op lists and everything from the concrete functions on."""
    text = text.split("\nConcrete Functions:")[0]
    return "".join(line for line in text.splitlines(True) if not line.startswith("The MetaGraph with tag set "))


def main():
    res = {}
    for arg in sys.argv[1:]:
        cli = arg.startswith("cli:")
        d = arg[4:] if cli else arg
        res[d] = dump(d)
        if cli:
            tool = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
            p = subprocess.run([tool, "show", "--all", "--dir", d], capture_output=True, text=True, check=True)
            res[d]["show_all_cli"] = signatures_part(p.stdout)
    print(json.dumps(res))


main()
