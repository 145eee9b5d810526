#!/usr/bin/env bash
# Live runs on a real GPU machine: `gandiva up` (policy gandiva, the GPUs
# nvidia-smi lists) and N PyTorch trainers submitted at once; prints the
# makespan and the GPU's average utilisation (nvidia-smi every second) over
# it. Run from the repository root with a gandiva binary built elsewhere
# (CGO_ENABLED=0 go build -o gandiva ./cmd/gandiva):
#
#   GANDIVA=./gandiva examples/pytorch/liveruns/run.sh A   # 4 ResNet-50 jobs, 400 steps, pre-run on
#   GANDIVA=./gandiva examples/pytorch/liveruns/run.sh B   # 6 jobs, 300 steps, --mem-gib 11 --no-prerun
#
# Results under $OUT (default ./liveruns-out): RUN.summary, RUN.smi.csv,
# RUN.jobs.json, RUN.up.log. As root, jobs run as gandiva-job (created if
# missing) from a world-readable copy of the trainer under /opt/gandiva-liveruns;
# if that account cannot import torch, the script makes the directories from
# the interpreter and torch up to / searchable by others (o+x) and torch's
# readable: meant for a throwaway GPU machine, not a shared one.
# PY, MODEL, BATCH, DEVICE and FAKE (fake GPUs, for trying the script without
# one) override the defaults.
set -euo pipefail
RUN=${1:?usage: run.sh A|B}
OUT=${OUT:-./liveruns-out}
GANDIVA=$(readlink -f "${GANDIVA:-./gandiva}")
PY=${PY:-$(command -v python3)}
PY=$(readlink -f "$PY")
MODEL=${MODEL:-resnet50}
BATCH=${BATCH:-64}
DEVICE=${DEVICE:-auto}
mkdir -p "$OUT"
case $RUN in
A) N=4 STEPS=${STEPS:-400} EXTRA=() ;;
B) N=6 STEPS=${STEPS:-300} EXTRA=(--mem-gib 11 --no-prerun) ;;
*) echo "run.sh: unknown run $RUN (A or B)" >&2; exit 2 ;;
esac

SRC=/opt/gandiva-liveruns
if [ "$(id -u)" = 0 ]; then
  id gandiva-job >/dev/null 2>&1 || useradd --system --user-group --no-create-home --shell /usr/sbin/nologin gandiva-job
  rm -rf "$SRC"; mkdir -p "$SRC/examples"
  cp -r examples/pytorch "$SRC/examples/"; cp -r python "$SRC/"
  chmod -R a+rX "$SRC"
  # the job's account must reach the interpreter and torch
  if ! runuser -u gandiva-job -- "$PY" -c 'import torch' 2>/dev/null; then
    TD=$("$PY" -c 'import torch,os;print(os.path.dirname(torch.__file__))')
    d=$TD; while [ "$d" != / ]; do chmod o+x "$d"; d=$(dirname "$d"); done
    chmod -R o+rX "$(dirname "$TD")" || true
    d=$(dirname "$PY"); while [ "$d" != / ]; do chmod o+x "$d"; d=$(dirname "$d"); done
    runuser -u gandiva-job -- "$PY" -c 'import torch' || { echo "gandiva-job cannot import torch with $PY" >&2; exit 1; }
  fi
else
  SRC=$PWD
fi

DATA=$(mktemp -d); chmod 755 "$DATA"
WORK=$(mktemp -d); chmod 1777 "$WORK"
PORT=$((17000 + RANDOM % 1000))
UPFLAGS=(--data-dir "$DATA" --listen 127.0.0.1:$PORT --policy gandiva)
[ -n "${FAKE:-}" ] && UPFLAGS+=(--fake-gpus "$FAKE")
"$GANDIVA" up "${UPFLAGS[@]}" >"$OUT/$RUN.up.log" 2>&1 &
UP=$!
G() { local c=$1; shift; "$GANDIVA" "$c" --server http://127.0.0.1:$PORT --token-file "$DATA/admin.token" "$@"; }
for i in $(seq 120); do G nodes >/dev/null 2>&1 && break; sleep 0.5; done
G nodes | tee "$OUT/$RUN.nodes"
SMI=
if command -v nvidia-smi >/dev/null && [ -z "${FAKE:-}" ]; then
  nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader,nounits -lms 1000 >"$OUT/$RUN.smi.csv" &
  SMI=$!
fi
T0=$(date +%s.%N); S0=$SECONDS
for i in $(seq $N); do
  G submit --workdir "$WORK" --gpus 1 --iters "$STEPS" "${EXTRA[@]}" --name "$RUN$i" -- "$PY" "$SRC/examples/pytorch/train.py" \
    --model "$MODEL" --batch "$BATCH" --steps "$STEPS" --device "$DEVICE"
done
while :; do
  G jobs --all --json >"$OUT/$RUN.jobs.json"
  if "$PY" - "$OUT/$RUN.jobs.json" <<'PYEOF'
import json,sys
j=json.load(open(sys.argv[1]))
jobs=j if isinstance(j,list) else j.get("jobs",[])
sys.exit(0 if jobs and all(x.get("state") in ("done","succeeded","failed","cancelled","finished") for x in jobs) else 1)
PYEOF
  then break; fi
  sleep 1
  (( SECONDS - S0 > ${LIMIT:-600} )) && { echo "run $RUN: not done after ${LIMIT:-600}s" | tee -a "$OUT/$RUN.summary"; break; }
done
T1=$(date +%s.%N)
for i in $(seq $N); do G status "j$i" >>"$OUT/$RUN.status.txt" 2>&1 || true; done
G jobs --all | tee -a "$OUT/$RUN.summary"
[ -n "$SMI" ] && kill $SMI
kill -INT $UP; wait $UP || true
"$PY" - "$OUT/$RUN.smi.csv" "$T0" "$T1" "$RUN" <<'PYEOF' | tee -a "$OUT/$RUN.summary"
import sys,datetime,os
f,t0,t1,run=sys.argv[1],float(sys.argv[2]),float(sys.argv[3]),sys.argv[4]
print(f"run {run}: makespan {t1-t0:.1f} s")
if not os.path.exists(f): print("no nvidia-smi samples"); sys.exit()
u=[];m=[]
for line in open(f):
    p=[x.strip() for x in line.split(",")]
    if len(p)<3: continue
    try:
        ts=datetime.datetime.strptime(p[0],"%Y/%m/%d %H:%M:%S.%f").timestamp()
    except ValueError: continue
    if t0<=ts<=t1: u.append(float(p[1])); m.append(float(p[2]))
if u: print(f"GPU utilisation: average {sum(u)/len(u):.0f}% over {len(u)} samples; peak memory {max(m):.0f} MiB")
PYEOF
