#!/usr/bin/env bash
# The Slurm test: a real single-node Slurm (Debian's slurmctld, slurmd and munge), configured on
# loopback only and started by this script, runs the pipeline `culturelens slurm` writes
# (embed as an array job → merge → sos) with the culturelens binary, and:
#   1. the merged table and the SoS scores equal a single-machine run, byte for byte;
#   2. one array task requeued mid-run (`scontrol requeue`) finishes without losing or redoing
#      completed items: its second start resumes exactly the rows its resume log held, and embeds
#      only the rest.
# It installs the packages when missing (apt), stops its daemons on exit, and fails (never skips)
# when anything is missing or goes wrong.
#
#   tests/slurm/run.sh [PATH/TO/culturelens]      (default: target/debug/culturelens)
set -euo pipefail
# The daemons run as root (slurmd starts the jobs as the submitting user).
if [ "$(id -u)" != 0 ]; then exec sudo -E "$0" "$@"; fi
cd "$(dirname "$0")/../.."
root=$PWD
bin=$(realpath "${1:-target/debug/culturelens}")
test -x "$bin" || { echo "slurm test: no culturelens binary at $bin (build it first)" >&2; exit 1; }
start=$SECONDS
say() { printf '[slurm test %3ds] %s\n' "$((SECONDS - start))" "$*"; }

need=()
for pkg in slurmctld slurmd munge slurm-client; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  say "installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# Everything lives in one scratch folder; the daemons run as this user, on 127.0.0.1 only.
work=$(mktemp -d /tmp/culturelens-slurm.XXXXXX)
chmod 755 "$work"
pids=()
stop() {
  local rc=$?
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ "$rc" != 0 ]; then
    echo "slurm test FAILED (exit $rc); daemon and job logs:" >&2
    tail -n 30 "$work"/*.log "$work"/jobs/logs/* 2>/dev/null >&2 || true
  fi
  rm -rf "$work"
  exit "$rc"
}
trap stop EXIT

node=$(hostname -s)
cpus=$(nproc)
mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2 ))
# Ports above the usual 6817/6818, so a Slurm already on the machine is not disturbed.
ctld_port=$(( 20000 + RANDOM % 20000 ))
mkdir -p "$work/state" "$work/spool" "$work/munge" "$work/munge-key"

say "starting munged"
dd if=/dev/urandom of="$work/munge-key/munge.key" bs=1024 count=1 status=none
chmod 700 "$work/munge-key"
chmod 400 "$work/munge-key/munge.key"
munged --foreground --force --key-file="$work/munge-key/munge.key" --socket="$work/munge/munge.sock" \
  --pid-file="$work/munge/munged.pid" --log-file="$work/munged.log" --seed-file="$work/munge/seed" \
  --num-threads=2 >"$work/munged.out" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [ -S "$work/munge/munge.sock" ] && break; sleep 0.1; done
test -S "$work/munge/munge.sock" || { echo "munged did not start" >&2; exit 1; }

cat > "$work/slurm.conf" <<EOF
ClusterName=culturelens-test
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$((ctld_port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$work/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
JobRequeue=1
DependencyParameters=kill_invalid_depend
MinJobAge=3600
SchedulerParameters=defer_batch
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$work/slurm.conf

say "starting slurmctld and slurmd ($node on 127.0.0.1:$ctld_port)"
slurmctld -D -i -f "$SLURM_CONF" >"$work/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" -N "$node" >"$work/slurmd.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  state=$(sinfo -h -N -o '%T' 2>/dev/null || true)
  [ "$state" = idle ] && break
  sleep 0.2
done
[ "$state" = idle ] || { echo "the Slurm node did not come up (state: ${state:-none})" >&2; exit 1; }
say "node $node is $state"

# The pipeline's input: the fixture images under many names (enough rows that a task is still
# running when it is requeued), with the metadata SoS needs.
fixtures=$root/crates/culturelens-models-io/tests/fixtures/encoders
mkdir -p "$work/data/img"
echo "image,model,language,culture" > "$work/data/manifest.csv"
i=0
for rep in $(seq 40); do
  for f in a_rgb.png b_grey.png c_rgba.png d_photo.jpg e_lossless.webp; do
    name=$(printf '%04d_%s' "$i" "$f")
    cp "$fixtures/images/$f" "$work/data/img/$name"
    echo "img/$name,m$((i % 2)),l$(( (i / 2) % 3 )),c$(( (i / 6) % 4 ))" >> "$work/data/manifest.csv"
    i=$((i + 1))
  done
done
rows=$i
tasks=3

say "single-machine run ($rows images)"
"$bin" embed --images "$work/data/manifest.csv" --weights "$fixtures/clip" --batch 1 \
  --out "$work/single.npy" 2>/dev/null
"$bin" sos --embeddings "$work/single.npy" --meta "$work/single.csv" --out "$work/single_sos.csv" \
  --per-image "$work/single_sos_per_image.csv" 2>/dev/null

say "writing and submitting the array pipeline ($tasks tasks)"
"$bin" slurm --dir "$work/jobs" --tasks "$tasks" --images "$work/data/manifest.csv" \
  --weights "$fixtures/clip" --batch 1
ids=$("$work/jobs/submit.sh")
echo "$ids"
embed=$(sed -n 's/^embed=//p' <<<"$ids")
sos=$(sed -n 's/^sos=//p' <<<"$ids")

# Requeue task 2 once its resume log holds some finished rows and before it ends.
log=$work/jobs/parts/embed-2.npy.resume
for _ in $(seq 3000); do
  [ -f "$log" ] && [ "$(stat -c %s "$log")" -gt 2000 ] && break
  sleep 0.01
done
[ -f "$log" ] || { echo "task 2 never started writing $log" >&2; exit 1; }
scontrol requeue "${embed}_2"
say "requeued task ${embed}_2 mid-run"
# Slurm holds a requeued job back (its begin time is set about two minutes ahead); let it start
# as soon as its old processes are gone, so the test does not wait.
for _ in $(seq 100); do
  reason=$(scontrol show job "${embed}_2" | sed -n 's/.*JobState=\([A-Z_]*\) Reason=\([A-Za-z_]*\).*/\1 \2/p')
  [ "${reason%% *}" = PENDING ] && break
  sleep 0.1
done
scontrol update JobId="${embed}_2" StartTime=now

# Wait for the whole pipeline (jobs stay listed for MinJobAge once done).
for _ in $(seq 600); do
  state=$(scontrol show job "$sos" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | head -1)
  case "$state" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) break ;; esac
  sleep 0.5
done
say "sos job $sos: ${state:-unknown}"
for job in $(squeue -h -o %i 2>/dev/null); do scontrol show job "$job" >&2; done
[ "$state" = COMPLETED ] || { echo "the pipeline did not complete (sos job state: ${state:-unknown})" >&2; exit 1; }

# 1. The merged result equals the single-machine run.
cmp "$work/jobs/embeddings.npy" "$work/single.npy"
cmp "$work/jobs/embeddings.csv" "$work/single.csv"
cmp "$work/jobs/sos.csv" "$work/single_sos.csv"
cmp "$work/jobs/sos_per_image.csv" "$work/single_sos_per_image.csv"
say "merged table and SoS scores equal the single-machine run"

# 2. The requeued task started twice; its second start resumed exactly the rows logged by the
#    first and embedded only the rest of its shard.
task_log=$(ls "$work"/jobs/logs/embed-"${embed}"_2.out)
restarts=$(scontrol show job "${embed}_2" | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p' | head -1)
[ "$restarts" = 1 ] || { echo "task 2 was not requeued (Restarts=$restarts)" >&2; cat "$task_log" >&2; exit 1; }
starts=$(grep -c '^culturelens: task 2/3 ' "$task_log")
[ "$starts" = 2 ] || { echo "task 2 started $starts times, expected 2" >&2; cat "$task_log" >&2; exit 1; }
shard_rows=$(( 2 * rows / tasks - rows / tasks ))
resumed=$(sed -n "s/^resuming: \([0-9]*\) of $shard_rows rows already embedded$/\1/p" "$task_log")
embedded=$(sed -n 's/^embedded \([0-9]*\) images in .*/\1/p' "$task_log")
[ -n "$resumed" ] && [ "$resumed" -gt 0 ] || { echo "task 2 did not resume" >&2; cat "$task_log" >&2; exit 1; }
[ $((resumed + embedded)) = "$shard_rows" ] || {
  echo "task 2: resumed $resumed + embedded $embedded != its $shard_rows rows (redone or lost)" >&2
  cat "$task_log" >&2; exit 1; }
say "task 2: requeued once, resumed $resumed rows, embedded the other $embedded of $shard_rows"
for k in 1 3; do
  grep -q "^resuming" "$work"/jobs/logs/embed-"${embed}"_$k.out && { echo "task $k resumed but was never requeued" >&2; exit 1; }
done
say "passed in $((SECONDS - start)) s"
