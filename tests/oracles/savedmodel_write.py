"""Write the SavedModels and checkpoints the saved_model suite reads (TensorFlow at test time).

usage: savedmodel_write.py OUTDIR

OUTDIR/module      tf.saved_model.save of a tf.Module: several signatures, dtypes
                   (float32/64, int32/64, uint8, bool, string), unknown dims and an
                   unknown rank; user-named metrics train_accuracy (tf.keras.metrics.Mean)
                   and train_loss (tf.keras.metrics.Sum) with accumulated values; a
                   variable made ON_READ/MEAN by hand (moving_mean) and plain ones.
                   Keras 3 metrics are not TF trackables themselves; their variables
                   (tf.Variables, ON_READ + SUM, as Keras creates them) are tracked
                   under the user's name by a tf.Module, as a TF trainer tracks them.
OUTDIR/keras       a Keras model (Dense layers) saved with tf.saved_model.save;
OUTDIR/keras_export the same model through Keras 3's model.export().
OUTDIR/tf1         TF1 graph mode SavedModelBuilder: two MetaGraphs (tags
                   ['serve'] and ['train', 'gpu']), a signature whose output is a
                   reference variable (DT_FLOAT_REF), a sparse input.
OUTDIR/ckpt/ckpt-1 tf.train.Checkpoint (no SavedModel) with the same user-named
                   metrics train_accuracy / train_loss and a weight.
Prints a JSON summary: {"metrics": {key: value}} of the checkpoint's metric values.
"""
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402

out = sys.argv[1]


def tracked(metric):
    """A tf.Module holding the metric's variables under their names (total, count)."""
    m = tf.Module(name=metric.name)
    for v in metric.variables:
        setattr(m, v.name, v)
    return m


class Net(tf.Module):
    def __init__(self):
        super().__init__()
        self.w = tf.Variable(tf.constant([[1.0, 2.0], [3.0, 4.0]]), name="w")
        self.step = tf.Variable(tf.constant(7, tf.int64), name="step")
        self.moving_mean = tf.Variable(tf.constant([0.5, 1.5]), name="moving_mean",
                                       synchronization=tf.VariableSynchronization.ON_READ,
                                       aggregation=tf.VariableAggregation.MEAN, trainable=False)
        self.acc_metric = tf.keras.metrics.Mean(name="train_accuracy")
        self.loss_metric = tf.keras.metrics.Sum(name="train_loss")
        self.train_accuracy = tracked(self.acc_metric)
        self.train_loss = tracked(self.loss_metric)

    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32, name="x")])
    def predict(self, x):
        return {"y": tf.matmul(x, self.w), "norm": tf.reduce_sum(x, axis=1)}

    @tf.function(input_signature=[tf.TensorSpec([None, None, 3], tf.float64, name="img"),
                                  tf.TensorSpec([], tf.int64, name="k"),
                                  tf.TensorSpec(None, tf.int32, name="anything")])
    def mixed(self, img, k, anything):
        return {"count": tf.size(anything, out_type=tf.int64) + k,
                "mean": tf.reduce_mean(img, axis=[1, 2]),
                "flag": tf.reduce_any(tf.equal(anything, 0))}

    @tf.function(input_signature=[tf.TensorSpec([4], tf.string, name="text"),
                                  tf.TensorSpec([2, 8], tf.uint8, name="raw")])
    def strings(self, text, raw):
        return {"lengths": tf.strings.length(text), "bytes": tf.cast(raw, tf.int32)}


net = Net()
net.acc_metric.update_state([1.0, 0.0, 1.0, 1.0])
net.loss_metric.update_state([0.25, 0.5, 2.0])
tf.saved_model.save(net, os.path.join(out, "module"),
                    signatures={"serving_default": net.predict, "mixed": net.mixed,
                                "strings": net.strings})

inp = keras.Input(shape=(3,), name="features")
h = keras.layers.Dense(4, activation="relu", name="hidden")(inp)
o = keras.layers.Dense(2, name="logits")(h)
model = keras.Model(inp, o)
tf.saved_model.save(model, os.path.join(out, "keras"))
model.export(os.path.join(out, "keras_export"), verbose=False)  # Keras 3 ExportArchive

with tf.Graph().as_default():
    x = tf.compat.v1.placeholder(tf.float32, [None, 1], name="x")
    sp = tf.compat.v1.sparse_placeholder(tf.int64, [None, 5], name="sp")
    a = tf.compat.v1.Variable(0.5, name="a", use_resource=False)
    b = tf.compat.v1.Variable(2.0, name="b", use_resource=False)
    y = tf.add(tf.multiply(a, x), b, name="y")
    info = tf.compat.v1.saved_model.utils.build_tensor_info
    sig = tf.compat.v1.saved_model.signature_def_utils.build_signature_def(
        inputs={"x": info(x), "sp": info(sp)}, outputs={"y": info(y), "a_ref": info(a._ref())},
        method_name="tensorflow/serving/predict")
    with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        builder = tf.compat.v1.saved_model.Builder(os.path.join(out, "tf1"))
        builder.add_meta_graph_and_variables(sess, ["serve"], signature_def_map={"serving_default": sig})
        builder.add_meta_graph(["train", "gpu"], signature_def_map={"train_sig": sig, "other": sig})
        builder.save()

ck = tf.train.Checkpoint(train_accuracy=net.train_accuracy, train_loss=net.train_loss, w=net.w)
ck.write(os.path.join(out, "ckpt", "ckpt-1"))
metrics = {}
for name, value in tf.train.list_variables(os.path.join(out, "ckpt", "ckpt-1")):
    if name.startswith("train_"):
        metrics[name] = float(tf.train.load_variable(os.path.join(out, "ckpt", "ckpt-1"), name))
print(json.dumps({"metrics": metrics}))
