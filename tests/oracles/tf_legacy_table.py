"""A lookup table saved through TF's legacy SaveableObject path.

tf.lookup MutableHashTable implements _serialize_to_tensors, which TF 2.21
restores from the first attribute's key prefix. A Trackable that only offers
_gather_saveables_for_checkpoint (as tables did in TF 2.2-2.9) is restored
by attribute name instead: attribute "table", checkpoint key
".../.ATTRIBUTES/table", tensors key + "-keys" / "-values" -- the second way
TF matches a multi-tensor attribute, exercised by restoring into it.
"""
import functools

import tensorflow as tf
from tensorflow.python.trackable import base


class LegacyTable(base.Trackable):
    def __init__(self, key_dtype, value_dtype, default_value):
        # base.Trackable: the inner table is not tracked as a child
        self.t = tf.lookup.experimental.MutableHashTable(key_dtype, value_dtype, default_value=default_value)

    def _gather_saveables_for_checkpoint(self):
        return {"table": functools.partial(tf.lookup.experimental.MutableHashTable._Saveable, table=self.t)}

    def export(self):
        return self.t.export()

    def lookup(self, keys):
        return self.t.lookup(keys)

    def insert(self, keys, values):
        return self.t.insert(keys, values)
