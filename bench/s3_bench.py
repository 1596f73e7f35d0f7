"""Save and restore of a checkpoint on S3: libckpt against boto3 and the AWS CLI.

Run under tests/s3/with_s3_server.sh (a warm local SeaweedFS; its variables
name the endpoint, bucket and credentials):

    CKPT_ORACLE_PYTHON=VENV/bin/python tests/s3/with_s3_server.sh \
        VENV/bin/python bench/s3_bench.py --states medium,large --reps 3 --large-reps 1 \
        [--aws PEERS/bin/aws] [--s5cmd PEERS/bin/s5cmd]

(PEERS: a venv with bench/s3_peers_requirements.txt.)

For each state, ckpt_bench --export writes it once to a local directory.
Then, whole processes, timed by wall clock, medians of --reps:
  save     ours:  ckpt convert LOCAL s3://.../ours-i --to tf  (reads the local
                  checkpoint, uploads data objects then the index)
           boto3: upload_file of the same files, TransferConfig with the same
                  concurrency (max_concurrency = CKPT_S3_PARALLEL, 8 MiB parts)
           awscli: aws s3 cp --recursive of the same directory
           s5cmd: s5cmd cp 'LOCAL/*' with the same part size and concurrency
  restore  ours:  ckpt restore s3://.../ours-i --strategy default (reads and
                  checks every tensor into memory: crc32c verified)
           boto3: download_file of every object into a fresh directory
           awscli: aws s3 cp --recursive down
           s5cmd: s5cmd cp of the prefix's objects down, same settings
Every process starts after a sync(), so no transfer pays for the writeback
of the one before it, and --settle seconds later (5), so none reuses the pages
the one before it freed: on this VM (Firecracker, free page reporting) fresh
pages cost the host's fault, reused ones do not, and a 2 GB process run right
after another's exit ran 2-4 s faster. Rep i starts with tool i (rotation), so
over as many reps as tools each tool takes each place once. Peak RSS and CPU time (user + sys) of each process from wait4; the load
average before and after. Prints a Markdown table.
"""
import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("CKPT_BUILD_DIR", os.path.join(ROOT, "build"))


SETTLE = 5.0
PART_MIB = 8  # every tool's part size (libckpt's default, boto3's TransferConfig, s5cmd -p)


def timed(argv, env=None):
    os.sync()  # the previous transfer's writes (the server's, the downloads') are not flushed during this one
    # Pages the previous process freed go back to the VM's host a couple of seconds later (free page
    # reporting, PAGE_REPORTING_DELAY 2 s); a process started before that reuses them at a fraction of the
    # cost of fresh ones, so whichever tool ran right after a big free won. Every process starts settled.
    time.sleep(SETTLE)
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    dt = time.perf_counter() - t0
    err = p.stderr.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(argv)} failed:\n{err}")
    return dt, ru.ru_maxrss / 1024.0, ru.ru_utime + ru.ru_stime


def rotated(tools, i):
    """Rep i starts with tool i: over len(tools) reps each tool takes each place once."""
    k = i % len(tools)
    return tools[k:] + tools[:k]


BOTO_UP = """
import os, sys, boto3
from boto3.s3.transfer import TransferConfig
src, bucket, prefix, conc = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
cfg = TransferConfig(max_concurrency=conc, multipart_chunksize=8 << 20, multipart_threshold=8 << 20)
s3 = boto3.client("s3")
for name in sorted(os.listdir(src)):
    s3.upload_file(os.path.join(src, name), bucket, prefix + "/" + name, Config=cfg)
"""

BOTO_DOWN = """
import os, sys, boto3
from boto3.s3.transfer import TransferConfig
bucket, prefix, dst, conc = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
cfg = TransferConfig(max_concurrency=conc, multipart_chunksize=8 << 20, multipart_threshold=8 << 20)
s3 = boto3.client("s3")
os.makedirs(dst, exist_ok=True)
for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix + "/")["Contents"]:
    s3.download_file(bucket, o["Key"], os.path.join(dst, o["Key"].rsplit("/", 1)[1]), Config=cfg)
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--states", default="medium")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--large-reps", type=int, default=None, help="repetitions of the large state (default --reps)")
    ap.add_argument("--aws", default=os.environ.get("CKPT_BENCH_AWS"), help="the aws command (awscli venv)")
    ap.add_argument("--s5cmd", default=os.environ.get("CKPT_BENCH_S5CMD"), help="the s5cmd command")
    ap.add_argument("--settle", type=float, default=SETTLE,
                    help="seconds to wait after sync() before each timed process (default %(default)s)")
    ap.add_argument("--before", help="another build directory of libckpt, measured alongside as 'libckpt-before'")
    a = ap.parse_args()
    globals()["SETTLE"] = a.settle
    bucket = os.environ["CKPT_S3_TEST_BUCKET"]
    conc = int(os.environ.get("CKPT_S3_PARALLEL", "8"))
    py = sys.executable
    ckpt = os.path.join(BUILD, "ckpt")
    rows = []

    def env_for(name):
        if name != "libckpt-before":
            return None
        return dict(os.environ, LD_LIBRARY_PATH=a.before)  # its ckpt finds its own libckpt first

    work = tempfile.mkdtemp(prefix="ckpt-s3-bench-")
    run = f"bench-{os.getpid()}"
    load0 = os.getloadavg()
    t_start = time.time()
    try:
        for state in a.states.split(","):
            reps = a.large_reps if state == "large" and a.large_reps else a.reps
            local = os.path.join(work, state)
            os.makedirs(local)
            subprocess.run([os.path.join(BUILD, "bench", "ckpt_bench"), "--export", state, local + "/ckpt"],
                           check=True, stdout=subprocess.DEVNULL)
            size = sum(os.path.getsize(os.path.join(local, f)) for f in os.listdir(local))
            res = {}
            for i in range(reps):
                ours = f"{run}/{state}/ours-{i}"
                tools = [("libckpt", [ckpt, "convert", local + "/ckpt", f"s3://{bucket}/{ours}/ckpt", "--to", "tf"]),
                         ("boto3", [py, "-c", BOTO_UP, local, bucket, f"{run}/{state}/boto-{i}", str(conc)])]
                if a.aws:
                    tools.append(("awscli", [a.aws, "s3", "cp", "--recursive", "--quiet", local,
                                             f"s3://{bucket}/{run}/{state}/aws-{i}"]))
                s5 = [a.s5cmd, "--endpoint-url", os.environ["AWS_ENDPOINT_URL"]] if a.s5cmd else None
                if s5:
                    tools.append(("s5cmd", s5 + ["cp", "-p", str(PART_MIB), "-c", str(conc), local + "/*",
                                                 f"s3://{bucket}/{run}/{state}/s5-{i}/"]))
                if a.before:
                    tools.append(("libckpt-before", [os.path.join(a.before, "ckpt"), "convert", local + "/ckpt",
                                                     f"s3://{bucket}/{run}/{state}/before-{i}/ckpt", "--to", "tf"]))
                for name, argv in rotated(tools, i):
                    res.setdefault(("save", name), []).append(timed(argv, env_for(name)))
                down = os.path.join(work, f"down-{i}")
                tools = [("libckpt", [ckpt, "restore", f"s3://{bucket}/{ours}/ckpt", "--strategy", "default"]),
                         ("boto3", [py, "-c", BOTO_DOWN, bucket, f"{run}/{state}/boto-{i}", down + "-boto", str(conc)])]
                if a.aws:
                    tools.append(("awscli", [a.aws, "s3", "cp", "--recursive", "--quiet",
                                             f"s3://{bucket}/{run}/{state}/aws-{i}", down + "-aws"]))
                if s5:
                    tools.append(("s5cmd", s5 + ["cp", "-p", str(PART_MIB), "-c", str(conc),
                                                 f"s3://{bucket}/{run}/{state}/s5-{i}/*", down + "-s5/"]))
                if a.before:
                    tools.append(("libckpt-before", [os.path.join(a.before, "ckpt"), "restore",
                                                     f"s3://{bucket}/{run}/{state}/before-{i}/ckpt", "--strategy",
                                                     "default"]))
                for name, argv in rotated(tools, i):
                    res.setdefault(("restore", name), []).append(timed(argv, env_for(name)))
                for d in (down + "-boto", down + "-aws", down + "-s5"):
                    shutil.rmtree(d, ignore_errors=True)
            for (op, name), v in sorted(res.items()):
                t = statistics.median(x[0] for x in v)
                rss = max(x[1] for x in v)
                cpu = statistics.median(x[2] for x in v)
                best = min(statistics.median(x[0] for x in res[(op, n)]) for (o, n) in res
                           if o == op and not n.startswith("libckpt"))
                rows.append((state, size, op, name, len(v), t, min(x[0] for x in v), max(x[0] for x in v),
                             size / t / 1e6, cpu, rss, t / best if name == "libckpt" else None))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load1 = os.getloadavg()
    print(f"load average {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f} at the start, "
          f"{load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f} at the end; {time.time() - t_start:.0f} s; "
          f"{os.cpu_count()} CPUs; concurrency {conc}")
    print()
    print("| state | bytes | op | tool | reps | median s (min-max) | MB/s | CPU s (user+sys) | peak RSS MiB | ours / best peer |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for st, size, op, name, n, t, lo, hi, mbs, cpu, rss, ratio in rows:
        print(f"| {st} | {size} | {op} | {name} | {n} | {t:.2f} ({lo:.2f}-{hi:.2f}) | {mbs:.0f} | {cpu:.2f} | {rss:.0f} | "
              f"{'' if ratio is None else f'{ratio:.2f}'} |")


if __name__ == "__main__":
    main()
