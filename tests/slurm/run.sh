#!/usr/bin/env bash
# The Slurm test: a real single-node Slurm (Debian's slurmctld, slurmd and munge), configured on
# loopback only and started by this script, runs the whole pipeline `culturelens slurm
# --generate-args` writes with the culturelens binary: generate as an array job (3 tasks, the
# tiny committed SD-1-like pipeline, 18 prompts, two 16×16 images each in 4 steps) → merge-images →
# embed as an array job (the tiny CLIP fixture, on the merged folder's manifest) → merge → sos,
# and checks:
#   1. the merged image folder (manifest.csv and every PNG) equals a single-machine `culturelens
#      generate` run, byte for byte;
#   2. the merged table and the SoS scores equal a single-machine embed and sos of those images,
#      byte for byte;
#   3. one generate task requeued mid-run (`scontrol requeue`) finishes without losing or redoing
#      completed items: its second start resumes exactly the prompts its resume log held, and
#      generates only the rest.
# It installs the packages when missing (apt), stops its daemons on exit, and fails (never skips)
# when anything is missing or goes wrong. Time: about 33 s on 2 busy cores with the debug build
# (the Slurm packages already installed), 17 s more than the embed → merge → sos version (16 s).
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
    tail -n 30 "$work"/*.log "$work"/jobs/logs/* >&2 2>/dev/null || true
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

# The pipeline's input: a prompt table (18 prompts, two languages, three cultures: the metadata
# SoS needs) for the tiny committed SD-1-like pipeline, one 16×16 image per prompt in 4 steps;
# the tiny CLIP fixture embeds them. (One image per prompt: `merge` refuses a generate shard with
# more images than prompts, "N rows in a shard of M items", so --images-per-prompt 2 cannot be
# merged yet.)
pipeline=$root/tests/fixtures/diffusion/tiny-sd1
clip=$root/tests/fixtures/encoders/clip
mkdir -p "$work/data"
echo "prompt,language,culture" > "$work/data/prompts.csv"
prompts=0
for culture in china india nigeria; do
  for language in en de; do
    for subject in food street wedding; do
      echo "a photo of the $subject in $culture ($language),$language,$culture" >> "$work/data/prompts.csv"
      prompts=$((prompts + 1))
    done
  done
done
per_prompt=2   # two images per prompt: the merge checks rows per prompt (part.json rows_per_item)
tasks=3
gen_args="--pipeline $pipeline --prompts $work/data/prompts.csv --steps 4 --height 16 --width 16 --images-per-prompt $per_prompt"

say "single-machine run ($prompts prompts, $per_prompt image(s) each: generate, embed, sos)"
# shellcheck disable=SC2086 # gen_args are shell words, as `culturelens slurm --generate-args` writes them
"$bin" generate $gen_args --out "$work/single_images" 2>/dev/null
"$bin" embed --images "$work/single_images/manifest.csv" --weights "$clip" --batch 1 \
  --out "$work/single.npy" 2>/dev/null
"$bin" sos --embeddings "$work/single.npy" --meta "$work/single.csv" --out "$work/single_sos.csv" \
  --per-image "$work/single_sos_per_image.csv" 2>/dev/null

say "writing and submitting the array pipeline ($tasks tasks per array stage)"
"$bin" slurm --dir "$work/jobs" --tasks "$tasks" --generate-args "$gen_args" --weights "$clip" --batch 1
ids=$("$work/jobs/submit.sh")
echo "$ids"
generate=$(sed -n 's/^generate=//p' <<<"$ids")
sos=$(sed -n 's/^sos=//p' <<<"$ids")

# Requeue generate task 2 once its resume log holds its first prompt's images (after the header
# line, a record per image: its name's length, 4 bytes, and the name, 13) and before it ends.
log=$work/jobs/parts/images-2/manifest.csv.resume
for _ in $(seq 3000); do
  if [ -s "$log" ]; then
    header=$(head -n 1 "$log" | wc -c)
    [ "$(stat -c %s "$log")" -ge $((header + per_prompt * 17)) ] && break
  fi
  sleep 0.01
done
[ -f "$log" ] || { echo "generate task 2 never started writing $log" >&2; exit 1; }
scontrol requeue "${generate}_2"
say "requeued task ${generate}_2 mid-run"
# Slurm holds a requeued job back (its begin time is set about two minutes ahead); let it start
# as soon as its old processes are gone, so the test does not wait.
for _ in $(seq 100); do
  reason=$(scontrol show job "${generate}_2" | sed -n 's/.*JobState=\([A-Z_]*\) Reason=\([A-Za-z_]*\).*/\1 \2/p')
  [ "${reason%% *}" = PENDING ] && break
  sleep 0.1
done
scontrol update JobId="${generate}_2" StartTime=now

# Wait for the whole pipeline (jobs stay listed for MinJobAge once done).
for _ in $(seq 600); do
  state=$(scontrol show job "$sos" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | head -1)
  case "$state" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) break ;; esac
  sleep 0.5
done
say "sos job $sos: ${state:-unknown}"
for job in $(squeue -h -o %i 2>/dev/null); do scontrol show job "$job" >&2; done
[ "$state" = COMPLETED ] || { echo "the pipeline did not complete (sos job state: ${state:-unknown})" >&2; exit 1; }

# 1. The merged image folder equals the single-machine run's: manifest and every PNG.
cmp "$work/jobs/images/manifest.csv" "$work/single_images/manifest.csv"
pngs=$(cd "$work/single_images" && ls ./*.png | sort)
[ "$(cd "$work/jobs/images" && ls ./*.png | sort)" = "$pngs" ] || {
  echo "the merged folder's PNGs are not the single-machine run's" >&2
  ls "$work/jobs/images" "$work/single_images" >&2; exit 1; }
images=$(wc -l <<<"$pngs")
[ "$images" = $((prompts * per_prompt)) ] || { echo "$images PNGs, expected $((prompts * per_prompt))" >&2; exit 1; }
for png in $pngs; do cmp "$work/jobs/images/$png" "$work/single_images/$png"; done
say "merged image folder ($images PNGs + manifest.csv) equals the single-machine run"

# 2. The merged table and the SoS scores equal the single-machine run.
cmp "$work/jobs/embeddings.npy" "$work/single.npy"
cmp "$work/jobs/embeddings.csv" "$work/single.csv"
cmp "$work/jobs/sos.csv" "$work/single_sos.csv"
cmp "$work/jobs/sos_per_image.csv" "$work/single_sos_per_image.csv"
say "merged table and SoS scores equal the single-machine run"

# 3. The requeued task started twice; its second start resumed exactly the prompts logged by the
#    first and generated only the rest of its shard.
task_log=$(ls "$work"/jobs/logs/generate-"${generate}"_2.out)
restarts=$(scontrol show job "${generate}_2" | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p' | head -1)
[ "$restarts" = 1 ] || { echo "task 2 was not requeued (Restarts=$restarts)" >&2; cat "$task_log" >&2; exit 1; }
starts=$(grep -c '^culturelens: task 2/3 ' "$task_log")
[ "$starts" = 2 ] || { echo "task 2 started $starts times, expected 2" >&2; cat "$task_log" >&2; exit 1; }
shard_prompts=$(( 2 * prompts / tasks - prompts / tasks ))
resumed=$(sed -n "s/^resuming: \([0-9]*\) of $shard_prompts prompts already generated$/\1/p" "$task_log")
generated=$(sed -n 's/^generated \([0-9]*\) images in .*/\1/p' "$task_log" | tail -n 1)
[ -n "$resumed" ] && [ "$resumed" -gt 0 ] || { echo "task 2 did not resume" >&2; cat "$task_log" >&2; exit 1; }
[ $((resumed * per_prompt + generated)) = $((shard_prompts * per_prompt)) ] || {
  echo "task 2: resumed $resumed prompts + generated $generated images != its $shard_prompts prompts × $per_prompt (redone or lost)" >&2
  cat "$task_log" >&2; exit 1; }
say "task 2: requeued once, resumed $resumed of its $shard_prompts prompts, generated the other $generated images"
for k in 1 3; do
  grep -q "^resuming" "$work"/jobs/logs/generate-"${generate}"_$k.out && { echo "task $k resumed but was never requeued" >&2; exit 1; }
done
say "passed in $((SECONDS - start)) s"
