"""Requests per checkpoint operation on S3: libckpt beside boto3, the AWS CLI and s5cmd (issue 36, point 8).

Run under tests/s3/with_s3_server.sh (a local SeaweedFS; its variables name
the endpoint, bucket and credentials), from a build with the bench and the
tests (build/bench/s3_ops, build/tests/fault_proxy):

    CKPT_ORACLE_PYTHON=VENV/bin/python bash tests/s3/with_s3_server.sh \\
        VENV/bin/python bench/s3_requests.py [--mib 43] \\
        [--aws PEERS/bin/aws] [--s5cmd PEERS/bin/s5cmd]

(PEERS: a venv with bench/s3_peers_requirements.txt.) Every tool talks to
the server through the fault proxy with no fault (tests/s3/fault_proxy.c),
whose log holds one line per request; an operation's requests are the lines
it added. On loopback a request costs well under a millisecond; against a
remote store at 20-50 ms each, the count is what the operation waits.

The jobs, on a checkpoint of one float32 variable of --mib MiB and a step:
  libckpt  bench/s3_ops (one process, a manager keeping 2): start (the
           one-writer lock, the directory's listing), three saves (the third
           deletes ckpt-1: its requests beyond the second's are retention),
           close, list (a new manager: which checkpoints, which is latest),
           restore of the latest, close; then `ckpt restore DIR --strategy
           default` and `ckpt verify DIR/ckpt-3` as new processes.
  peers    the same files (ckpt-3's data and index, the state file `checkpoint`,
           copied from libckpt's prefix beforehand), each tool in its own
           prefix: save = upload the three; list = list the prefix and read
           the state file; restore = download ckpt-3's two objects; verify =
           read them with their stored checksums checked (boto3 only: the CLIs
           have no such command); delete = remove ckpt-3's two objects.
Part size 8 MiB for every tool (libckpt's default; boto3 TransferConfig,
the AWS CLI's default, s5cmd -p 8).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("CKPT_BUILD_DIR", os.path.join(ROOT, "build"))
PART = 8 << 20


class Proxy:
    def __init__(self):
        up = urllib.parse.urlparse(os.environ["AWS_ENDPOINT_URL"]).port
        self.dir = tempfile.mkdtemp(prefix="ckpt-s3-req-")
        self.count = os.path.join(self.dir, "count")
        self.p = subprocess.Popen([os.path.join(BUILD, "tests", "fault_proxy"), str(up), "0", "none", self.count],
                                  stdout=subprocess.PIPE, text=True)
        self.port = int(self.p.stdout.readline())
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def lines(self):
        try:
            with open(self.count + ".log") as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return []

    def stop(self):
        self.p.kill()
        self.p.wait()


def kinds(lines):
    """'2 HEAD, 1 LIST, ...' of the request lines."""
    c = {}
    for ln in lines:
        method, target = ln.split(" ", 1)
        path = target.split("?", 1)[0]
        bucket_level = path.rstrip("/").count("/") == 1  # path style: /BUCKET?... or /BUCKET/?...
        if method == "GET" and bucket_level:
            k = "LIST"
        elif method == "POST" and bucket_level and "delete" in target:
            k = "DELETE (batch)"
        else:
            k = method
        c[k] = c.get(k, 0) + 1
    order = ["HEAD", "LIST", "GET", "PUT", "POST", "DELETE", "DELETE (batch)"]
    return ", ".join(f"{c[k]} {k}" for k in order if k in c)


BOTO = r"""
import os, sys, boto3
from boto3.s3.transfer import TransferConfig
op, bucket, prefix, local = sys.argv[1:5]
cfg = TransferConfig(max_concurrency=8, multipart_chunksize=8 << 20, multipart_threshold=8 << 20)
s3 = boto3.client("s3")
if op == "save":
    for name in sorted(os.listdir(local)):
        s3.upload_file(os.path.join(local, name), bucket, prefix + name, Config=cfg)
elif op == "list":
    names = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix, Delimiter="/").get("Contents", [])]
    state = s3.get_object(Bucket=bucket, Key=prefix + "checkpoint")["Body"].read()
    assert prefix + "ckpt-3.index" in names and b"ckpt-3" in state
elif op == "restore":
    os.makedirs(local, exist_ok=True)
    for name in ("ckpt-3.data-00000-of-00001", "ckpt-3.index"):
        s3.download_file(bucket, prefix + name, os.path.join(local, name), Config=cfg)
elif op == "verify":
    for name in ("ckpt-3.data-00000-of-00001", "ckpt-3.index"):
        r = s3.get_object(Bucket=bucket, Key=prefix + name, ChecksumMode="ENABLED")
        r["Body"].read()  # botocore checks the stored checksum it was given
elif op == "delete":
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix + "ckpt-3.").get("Contents", [])]
    assert len(keys) == 2, keys
    s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys]})
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=43, help="the variable's size (default 43: the issue's checkpoint)")
    ap.add_argument("--aws", default=os.environ.get("CKPT_BENCH_AWS"), help="the aws command")
    ap.add_argument("--s5cmd", default=os.environ.get("CKPT_BENCH_S5CMD"), help="the s5cmd command")
    ap.add_argument("--log", action="store_true", help="print every operation's requests on stderr")
    a = ap.parse_args()
    bucket = os.environ["CKPT_S3_TEST_BUCKET"]
    direct = os.environ["AWS_ENDPOINT_URL"]
    run = f"req-{os.getpid()}"
    ours = f"s3://{bucket}/{run}/ours"
    proxy = Proxy()
    env = dict(os.environ, AWS_ENDPOINT_URL=proxy.endpoint, CKPT_S3_PART_SIZE=str(PART))
    rows = []  # (op, tool, requests, kinds, seconds)
    local = tempfile.mkdtemp(prefix="ckpt-s3-req-files-")
    down = tempfile.mkdtemp(prefix="ckpt-s3-req-down-")  # not under `local`: a recursive upload would take it

    def measure(op, tool, argv, stdin=None):
        before = len(proxy.lines())
        t0 = time.perf_counter()
        r = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        dt = time.perf_counter() - t0
        if r.returncode != 0:
            sys.exit(f"{op} by {tool}: {' '.join(argv)} failed:\n{r.stderr}")
        new = proxy.lines()[before:]
        rows.append((op, tool, len(new), kinds(new), dt))
        if a.log:
            print(f"## {op} by {tool}", *new, sep="\n  ", file=sys.stderr)

    try:
        # libckpt's operations, one process, counted between its phases
        p = subprocess.Popen([os.path.join(BUILD, "bench", "s3_ops"), ours, str(a.mib)], env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        phases = []
        while True:
            name = p.stdout.readline().strip()
            if not name:
                sys.exit(f"s3_ops failed (exit {p.wait()})")
            phases.append((name, len(proxy.lines()), time.perf_counter()))
            p.stdin.write("go\n")
            p.stdin.flush()
            if name == "end":
                break
        p.stdin.close()
        if p.wait() != 0:
            sys.exit("s3_ops failed")
        log = proxy.lines()
        got = {}
        for (name, at, t), (_, nxt, t2) in zip(phases, phases[1:]):
            got[name] = (log[at:nxt], t2 - t)
        label = {"start": "manager start (lock, listing)", "save-1": "first save", "save-2": "save",
                 "save-3": "save + retention", "close": "manager close (lock release)", "list": "list (new manager)",
                 "restore": "restore latest (manager)", "close-2": "manager close (lock release)"}
        for name in ("start", "save-1", "save-2", "save-3", "close", "list", "restore"):
            lines, dt = got[name]
            rows.append((label[name], "libckpt", len(lines), kinds(lines), dt))
            if a.log:
                print(f"## {label[name]} by libckpt", *lines, sep="\n  ", file=sys.stderr)
        retention = len(got["save-3"][0]) - len(got["save-2"][0])
        rows.append(("retention (save + retention minus save)", "libckpt", retention, "", None))
        measure("restore DIR (new process)", "libckpt",
                [os.path.join(BUILD, "ckpt"), "restore", ours, "--strategy", "default"])
        measure("verify", "libckpt", [os.path.join(BUILD, "ckpt"), "verify", ours + "/ckpt-3"])

        # the same files for the peers, fetched directly (not counted)
        import boto3
        s3 = boto3.client("s3", endpoint_url=direct)
        for name in ("checkpoint", "ckpt-3.data-00000-of-00001", "ckpt-3.index"):
            s3.download_file(bucket, f"{run}/ours/{name}", os.path.join(local, name))
        size = sum(os.path.getsize(os.path.join(local, f)) for f in os.listdir(local))
        py = sys.executable
        for op in ("save", "list", "restore", "verify", "delete"):
            measure(op, "boto3", [py, "-c", BOTO, op, bucket, f"{run}/boto/",
                                  local if op == "save" else os.path.join(down, "boto")])
        if a.aws:
            pre = f"s3://{bucket}/{run}/aws/"
            measure("save", "aws s3", [a.aws, "s3", "cp", "--recursive", "--quiet", local, pre])
            measure("list", "aws s3", ["sh", "-c", f"'{a.aws}' s3 ls '{pre}' && '{a.aws}' s3 cp '{pre}checkpoint' -"])
            measure("restore", "aws s3", [a.aws, "s3", "cp", "--recursive", "--quiet", pre, os.path.join(down, "aws"),
                                          "--exclude", "*", "--include", "ckpt-3.*"])
            measure("delete", "aws s3", [a.aws, "s3", "rm", "--recursive", "--quiet", pre,
                                         "--exclude", "*", "--include", "ckpt-3.*"])
        if a.s5cmd:
            pre = f"s3://{bucket}/{run}/s5/"
            s5 = [a.s5cmd, "--endpoint-url", proxy.endpoint]
            measure("save", "s5cmd", s5 + ["cp", "-p", "8", "-c", "8", local + "/*", pre])
            measure("list", "s5cmd", ["sh", "-c", f"'{a.s5cmd}' --endpoint-url {proxy.endpoint} ls '{pre}*' && "
                                      f"'{a.s5cmd}' --endpoint-url {proxy.endpoint} cat '{pre}checkpoint'"])
            measure("restore", "s5cmd", s5 + ["cp", "-p", "8", "-c", "8", pre + "ckpt-3.*",
                                              os.path.join(down, "s5") + "/"])
            measure("delete", "s5cmd", s5 + ["rm", pre + "ckpt-3.*"])
    finally:
        proxy.stop()
        for d in (local, down, proxy.dir):
            shutil.rmtree(d, ignore_errors=True)
    print(f"checkpoint: one float32 variable of {a.mib} MiB and a step; ckpt-3's files and the state file "
          f"{size} bytes; part size 8 MiB; {time.strftime('%Y-%m-%d')}")
    print()
    print("| operation | tool | requests | of which | wall s (loopback) |")
    print("|---|---|---|---|---|")
    for op, tool, n, k, dt in rows:
        print(f"| {op} | {tool} | {n} | {k} | {'' if dt is None else f'{dt:.2f}'} |")


if __name__ == "__main__":
    main()
