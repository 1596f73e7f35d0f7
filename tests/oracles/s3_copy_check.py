"""boto3's own server-side copies against the server libckpt's s3_copy.c talks to (issue 33).

usage: s3_copy_check.py s3://b/SRC s3://b/COMPOSED s3://b/COPY HEAD_FILE TAIL_FILE OFF LEN

With boto3 alone: COMPOSED is a multipart upload of HEAD_FILE's bytes
(upload_part), SRC[OFF, OFF+LEN) (upload_part_copy with CopySourceRange and
CopySourceIfMatch = SRC's ETag) and TAIL_FILE's bytes; COPY is copy_object
of SRC with CopySourceIfMatch. Both conditions are also tried with another
ETag, which the server must refuse with 412 (what libckpt's fallback relies
on). Prints the sha256 of COMPOSED and of COPY, one a line.
"""
import hashlib
import sys

import boto3
import botocore


def split(url):
    assert url.startswith("s3://"), url
    bucket, _, key = url[5:].partition("/")
    return bucket, key


def refused_412(fn, **kw):
    try:
        fn(**kw)
    except botocore.exceptions.ClientError as e:
        status = e.response["ResponseMetadata"]["HTTPStatusCode"]
        if status != 412:
            raise AssertionError(f"{fn.__name__} with another ETag: HTTP {status}, want 412")
        return
    raise AssertionError(f"{fn.__name__} with another ETag was not refused")


def main(src, composed, copy, head_file, tail_file, off, length):
    s3 = boto3.client("s3")
    b, sk = split(src)
    _, ck = split(composed)
    _, dk = split(copy)
    off, length = int(off), int(length)
    etag = s3.head_object(Bucket=b, Key=sk)["ETag"]
    source = {"Bucket": b, "Key": sk}
    rng = f"bytes={off}-{off + length - 1}"
    up = s3.create_multipart_upload(Bucket=b, Key=ck)["UploadId"]
    parts = []
    r = s3.upload_part(Bucket=b, Key=ck, UploadId=up, PartNumber=1, Body=open(head_file, "rb").read())
    parts.append({"PartNumber": 1, "ETag": r["ETag"]})
    refused_412(s3.upload_part_copy, Bucket=b, Key=ck, UploadId=up, PartNumber=2, CopySource=source,
                CopySourceRange=rng, CopySourceIfMatch='"0123456789abcdef0123456789abcdef"')
    r = s3.upload_part_copy(Bucket=b, Key=ck, UploadId=up, PartNumber=2, CopySource=source, CopySourceRange=rng,
                            CopySourceIfMatch=etag)
    parts.append({"PartNumber": 2, "ETag": r["CopyPartResult"]["ETag"]})
    r = s3.upload_part(Bucket=b, Key=ck, UploadId=up, PartNumber=3, Body=open(tail_file, "rb").read())
    parts.append({"PartNumber": 3, "ETag": r["ETag"]})
    s3.complete_multipart_upload(Bucket=b, Key=ck, UploadId=up, MultipartUpload={"Parts": parts})
    refused_412(s3.copy_object, Bucket=b, Key=dk, CopySource=source,
                CopySourceIfMatch='"0123456789abcdef0123456789abcdef"')
    s3.copy_object(Bucket=b, Key=dk, CopySource=source, CopySourceIfMatch=etag)
    for k in (ck, dk):
        print(hashlib.sha256(s3.get_object(Bucket=b, Key=k)["Body"].read()).hexdigest())


if __name__ == "__main__":
    main(*sys.argv[1:8])
