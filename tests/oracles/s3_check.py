"""boto3 (the independent S3 client) checks what libckpt wrote to S3.

usage: s3_check.py ACTION ARGS...
  keys     s3://b/prefix                 print every key under prefix/, one a line (relative)
  same     s3://b/key LOCAL_FILE         the object's bytes equal LOCAL_FILE's
  sha256   s3://b/key                    print "<sha256 hex> <size> <etag>"
  put      s3://b/key TEXT               put TEXT as the object (a foreign writer)
  get      s3://b/key                    print the object's bytes (text)
  download s3://b/prefix LOCAL_DIR       copy every object under prefix/ into LOCAL_DIR
  upload_left s3://b/key                 begin a multipart upload with one part and leave it
  put_plain_multipart s3://b/key LOCAL   LOCAL's bytes as a 2-part upload with no checksum of any kind
  uploads  s3://b/prefix                 print the number of unfinished uploads under prefix
  tf_same  CKPT_A CKPT_B                 TensorFlow reads both prefixes: same names, dtypes, shapes, bytes
  tf_latest LOCAL_DIR NAME               tf.train.latest_checkpoint(LOCAL_DIR) ends with NAME
"""
import hashlib
import os
import sys

import boto3


def split(url):
    assert url.startswith("s3://"), url
    bucket, _, key = url[5:].partition("/")
    return bucket, key


def main():
    action, args = sys.argv[1], sys.argv[2:]
    s3 = boto3.client("s3")
    if action == "keys":
        b, p = split(args[0])
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=b, Prefix=p + "/")
        for page in pages:
            for o in page.get("Contents", []):
                print(o["Key"][len(p) + 1:])
    elif action == "nkeys":
        # every key under the prefix, however it is spelt (a newline in a key would split "keys")
        b, p = split(args[0])
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=b, Prefix=p + "/")
        print(sum(len(page.get("Contents", [])) for page in pages))
    elif action == "same":
        b, k = split(args[0])
        got = s3.get_object(Bucket=b, Key=k)["Body"].read()
        want = open(args[1], "rb").read()
        if got != want:
            sys.exit(f"{args[0]}: {len(got)} bytes differ from {args[1]} ({len(want)} bytes)")
    elif action == "sha256":
        b, k = split(args[0])
        o = s3.get_object(Bucket=b, Key=k)
        body = o["Body"].read()
        print(hashlib.sha256(body).hexdigest(), len(body), o["ETag"].strip('"'))
    elif action == "put":
        b, k = split(args[0])
        s3.put_object(Bucket=b, Key=k, Body=args[1].encode())
    elif action == "get":
        b, k = split(args[0])
        sys.stdout.write(s3.get_object(Bucket=b, Key=k)["Body"].read().decode())
    elif action == "download":
        b, p = split(args[0])
        os.makedirs(args[1], exist_ok=True)
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=b, Prefix=p + "/"):
            for o in page.get("Contents", []):
                rel = o["Key"][len(p) + 1:]
                dst = os.path.join(args[1], rel)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                s3.download_file(b, o["Key"], dst)
    elif action == "upload_left":
        b, k = split(args[0])
        u = s3.create_multipart_upload(Bucket=b, Key=k)
        s3.upload_part(Bucket=b, Key=k, UploadId=u["UploadId"], PartNumber=1, Body=b"x" * 1000)
        print(u["UploadId"])
    elif action == "put_plain_multipart":
        # checksums only when an operation requires them: the parts carry none, so the object has no
        # whole-object checksum (as from a client or server without the flexible checksums)
        from botocore.config import Config
        plain = boto3.client("s3", config=Config(request_checksum_calculation="when_required"))
        b, k = split(args[0])
        data = open(args[1], "rb").read()
        half = max(5 << 20, len(data) // 2)
        u = plain.create_multipart_upload(Bucket=b, Key=k)
        parts = []
        for i, off in enumerate(range(0, len(data), half)):
            r = plain.upload_part(Bucket=b, Key=k, UploadId=u["UploadId"], PartNumber=i + 1, Body=data[off:off + half])
            parts.append({"PartNumber": i + 1, "ETag": r["ETag"]})
        plain.complete_multipart_upload(Bucket=b, Key=k, UploadId=u["UploadId"], MultipartUpload={"Parts": parts})
    elif action == "uploads":
        b, p = split(args[0])  # a string prefix, as S3 takes it: "run1" counts run10/'s uploads too
        print(len(s3.list_multipart_uploads(Bucket=b, Prefix=p).get("Uploads", [])))
    elif action == "tf_same":
        import numpy as np
        import tensorflow as tf
        ra, rb = tf.train.load_checkpoint(args[0]), tf.train.load_checkpoint(args[1])
        ma, mb = ra.get_variable_to_shape_map(), rb.get_variable_to_shape_map()
        if ma != mb:
            sys.exit(f"names/shapes differ: {sorted(ma)} vs {sorted(mb)}")
        da, db = ra.get_variable_to_dtype_map(), rb.get_variable_to_dtype_map()
        for name in ma:
            if da[name] != db[name]:
                sys.exit(f"{name}: dtype {da[name]} vs {db[name]}")
            a, bb = ra.get_tensor(name), rb.get_tensor(name)
            if isinstance(a, np.ndarray) and a.dtype != object:
                if a.tobytes() != bb.tobytes():
                    sys.exit(f"{name}: bytes differ")
            elif a != bb:
                sys.exit(f"{name}: values differ")
        print("ok", len(ma))
    elif action == "tf_latest":
        import tensorflow as tf
        got = tf.train.latest_checkpoint(args[0])
        if not got or not got.endswith(args[1]):
            sys.exit(f"latest_checkpoint({args[0]}) = {got}, expected .../{args[1]}")
        print("ok", got)
    else:
        sys.exit(f"unknown action {action}")


if __name__ == "__main__":
    main()
