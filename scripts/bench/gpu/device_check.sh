#!/usr/bin/env bash
# One GPU session, for a machine with an NVIDIA driver, PyTorch and transformers but no Rust
# toolchain: a carried culturelens binary is first checked against its own `--device cpu` run on
# the committed fixtures (SoS, Vendi, CLIP image embeddings in f32 and f16, and three tiny
# pipelines through `generate`; each command under its own 90 s limit), then run.py's workloads
# run in the order given, each group under its own time limit, so that a slow or failing part
# costs only its own minutes (a lease is short). Every part reports on its own JSON line; the
# exit status is 1 when any check or group failed. The benchmarks carry their own agreement
# checks, so they run even when a smoke check failed.
#
# Usage: scripts/bench/gpu/device_check.sh BIN DEVICE OUTDIR [SECONDS:WORKLOAD[,WORKLOAD...] ...]
#   BIN     the culturelens binary (built with `--features cuda` for DEVICE=cuda: scripts/build_cuda.sh)
#   DEVICE  cuda | wgpu | vulkan (as `--device`)
#   OUTDIR  the smoke check's files and a log (smoke.json: one line per check)
#   each further argument: a time limit and the run.py workloads of one group, e.g.
#   150:sos,vendi-10k,vendi-100k 90:embed-clip-l14 (a group may name another device: 60:wgpu@sos)
# Env: RUN_PY_ARGS (extra run.py arguments, e.g. "--repeats 2"), SMOKE_SECONDS (default 600).
#
# Requirements: scripts/requirements/torch.txt
set -uo pipefail

bin=$1 device=$2 out=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
fixtures=$root/tests/fixtures
work=$(mktemp -d)
mkdir -p "$out"

smoke() {
  local b=$bin d=$device w=$work
  "$b" demo --write "$w/demo" > /dev/null
  for dev in cpu "$d"; do
    timeout 90 "$b" sos --embeddings "$w/demo/embeddings.npy" --meta "$w/demo/meta.csv" --device "$dev" --out "$w/sos-$dev.csv"
    timeout 90 "$b" vendi --embeddings "$w/demo/embeddings.npy" --device "$dev" --out "$w/vendi-$dev.json"
    for precision in f32 f16; do
      [ "$dev" = cpu ] && [ $precision = f16 ] && continue
      timeout 90 "$b" embed --images "$fixtures/encoders/images" --weights "$fixtures/encoders/clip" --device "$dev" \
        --precision $precision --out "$w/clip-$dev-$precision.npy"
    done
    for p in sd1 sdxl sd3; do
      timeout 90 "$b" generate --pipeline "$fixtures/diffusion/tiny-$p" --prompt "a photo of a cat" --steps 3 \
        --out "$w/gen-$p-$dev" --out-npy "$w/gen-$p-$dev.npy" --device "$dev"
    done
  done
  python3 - "$w" "$d" "$out/smoke.json" <<'EOF'
import csv, json, sys
import numpy as np
w, d, path = sys.argv[1:]
def guarded(name, bound, diff):
    try:
        return name, diff(), bound
    except Exception as err:  # a command that failed or timed out left no file
        print(f"{name}: {type(err).__name__}: {err}", file=sys.stderr)
        return name, float("inf"), bound
def sos(dev):
    with open(f"{w}/sos-{dev}.csv") as f:
        return {(r["model"], r["language"], r["culture"]): float(r["sos"]) for r in csv.DictReader(f)}
def vs(dev):
    with open(f"{w}/vendi-{dev}.json") as f:
        return json.load(f)["vs"]
a, b = sos("cpu"), sos(d)
def npy(a, b):
    return lambda: float(np.abs(np.load(f"{w}/{a}.npy") - np.load(f"{w}/{b}.npy")).max())
def sos_diff():
    a, b = sos("cpu"), sos(d)
    return max(abs(a[k] - b[k]) for k in a) if a.keys() == b.keys() else float("inf")
checks = [guarded("sos", 1e-5, sos_diff),
          guarded("vendi", 1e-9, lambda: abs(vs("cpu") - vs(d)) / vs("cpu")),
          # 1e-3, not 1e-5: on tensor-core GPUs CubeCL's matmul reads f32 operands as TF32
          # (cubek-matmul 0.3.1 `adjust_dtypes`), as PyTorch does with allow_tf32; 5.6e-4 on an H100.
          guarded("embed-clip-f32", 1e-3, npy("clip-cpu-f32", f"clip-{d}-f32")),
          guarded("embed-clip-f16", 5e-3, npy("clip-cpu-f32", f"clip-{d}-f16"))]
for p in ("sd1", "sdxl", "sd3"):
    checks.append(guarded(f"generate-{p}", 1e-3, npy(f"gen-{p}-cpu", f"gen-{p}-{d}")))
ok = True
with open(path, "w") as f:
    for name, diff, bound in checks:
        line = json.dumps({"check": name, "device": d, "max_diff_vs_cpu": diff, "bound": bound, "ok": diff <= bound})
        print(line, flush=True)
        f.write(line + "\n")
        ok &= diff <= bound
sys.exit(0 if ok else 1)
EOF
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
start=$(date +%s)
export bin device work fixtures out
export -f smoke
status=0
if timeout "${SMOKE_SECONDS:-600}" bash -c smoke; then
  echo "device_check: smoke check passed in $(( $(date +%s) - start )) s" >&2
else
  echo "device_check: the $device smoke check failed (exit $?) after $(( $(date +%s) - start )) s" >&2
  status=1
fi
for group in "$@"; do
  seconds=${group%%:*} rest=${group#*:}
  dev=$device workloads=$rest
  case $rest in *@*) dev=${rest%%@*} workloads=${rest#*@} ;; esac
  start=$(date +%s)
  # shellcheck disable=SC2086
  timeout "$seconds" python3 "$here/run.py" --bin "$dev=$bin" --only "$workloads" ${RUN_PY_ARGS:-} || {
    echo "device_check: group $group stopped (exit $?) after $(( $(date +%s) - start )) s" >&2
    status=1
  }
done
exit $status
