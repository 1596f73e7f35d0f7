#!/usr/bin/python3
"""List every dataset of an HDF5 file as h5py reads it, for tests that need a
reader independent of libckpt.

Usage: h5_datasets.py FILE
One line per dataset, sorted by path:
  PATH<TAB>CLASS<TAB>SIZE<TAB>SIGNED<TAB>ORDER<TAB>DTYPE_ATTR<TAB>SHAPE<TAB>SHA1
CLASS is the HDF5 type class (FLOAT, INTEGER, ENUM, OPAQUE, ...), SIZE its
bytes, SIGNED 1/0 for integers (and an enum's base), ORDER LE/BE/-, SHAPE
the dataset's "dtype" attribute (Keras 3 marks bfloat16 so) or "-", SHAPE
comma-separated ("" for a scalar), SHA1 of the stored element bytes (read
with the file's own type, so no conversion).
"""
import hashlib
import sys

import h5py
import numpy as np
from h5py import h5s, h5t

CLS = {h5t.INTEGER: 'INTEGER', h5t.FLOAT: 'FLOAT', h5t.STRING: 'STRING', h5t.BITFIELD: 'BITFIELD',
       h5t.OPAQUE: 'OPAQUE', h5t.COMPOUND: 'COMPOUND', h5t.ENUM: 'ENUM', h5t.ARRAY: 'ARRAY'}


def describe(name, ds):
    t = ds.id.get_type()
    c = t.get_class()
    base = t.get_super() if c == h5t.ENUM else t
    signed = '-'
    if base.get_class() == h5t.INTEGER:
        signed = '1' if base.get_sign() == h5t.SGN_2 else '0'
    order = '-'
    if c in (h5t.INTEGER, h5t.FLOAT, h5t.ENUM):
        order = 'BE' if base.get_order() == h5t.ORDER_BE else 'LE'
    # the stored element bytes, read with the file's own type (no conversion)
    arr = np.empty(ds.shape, dtype='V%d' % t.get_size())
    if arr.size:
        ds.id.read(h5s.ALL, h5s.ALL, arr, mtype=t)
    blob = arr.tobytes()
    dattr = ds.attrs.get('dtype', '-')
    if isinstance(dattr, bytes):
        dattr = dattr.decode()
    print('\t'.join([name, CLS.get(c, str(c)), str(t.get_size()), signed, order, str(dattr),
                     ','.join(str(d) for d in ds.shape), hashlib.sha1(blob).hexdigest()]))


def main():
    found = []
    with h5py.File(sys.argv[1], 'r') as f:
        f.visititems(lambda n, o: found.append((n, o)) if isinstance(o, h5py.Dataset) else None)
        for name, ds in sorted(found, key=lambda x: x[0]):
            describe(name, ds)


main()
