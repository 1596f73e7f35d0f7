"""TensorFlow's own table_legacy_saveable_object checkpoint, written now.

usage: tf_table_module.py DIR

TensorFlow's checkpoint tests keep a file written by their
testdata/generate_checkpoint.py: a tf.Module holding a DenseHashTable of
int64 -> int64 (empty_key 0, deleted_key -1, 32 buckets) with 1 -> 1 and
2 -> 4, written by tf.train.Checkpoint(module).write(). The same module is
built here and written twice: DIR/write/table by write() (no save_counter,
as the original) and DIR/save/table-1 by save() (with one). Prints both
prefixes.
"""
import os
import sys

import tensorflow as tf


class TableModule(tf.Module):
    def __init__(self, filled=True):
        super().__init__()
        self.lookup_table = tf.lookup.experimental.DenseHashTable(
            tf.int64, tf.int64, default_value=-1, empty_key=0, deleted_key=-1, name="t1", initial_num_buckets=32)
        if filled:
            self.lookup_table.insert(tf.constant(1, tf.int64), tf.constant(1, tf.int64))
            self.lookup_table.insert(tf.constant(2, tf.int64), tf.constant(4, tf.int64))


if __name__ == "__main__":
    out = sys.argv[1]
    print(tf.train.Checkpoint(TableModule()).write(os.path.join(out, "write", "table")))
    print(tf.train.Checkpoint(TableModule()).save(os.path.join(out, "save", "table")))
