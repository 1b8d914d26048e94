"""Peak memory (RSS) of one side of a benchmark, measured on its own process (issue 36).

Linux's peak RSS of a process (`ru_maxrss`, KiB) is not reset by fork or exec: a child forked from
a large benchmark process starts with the parent's pages counted (copy-on-write pages count) and
keeps that high-water mark through `execve`. So neither `resource.getrusage(RUSAGE_CHILDREN)`
(the largest of all children, not per child) nor `os.wait4` on a child of the benchmark itself
gives a side's own peak. Here every measured side is started by a small launcher (a fresh
`python -I -S`, about 10 MB) that forks and execs it and reaps it with `os.wait4`: that child's
`ru_maxrss` is its own peak, or the launcher's size when that is larger (the floor of any reading,
`floor_kib()`).

* `run(cmd)`: like `subprocess.run(cmd, capture_output=True, text=True, check=True)` for a command
  (the culturelens binary); the result has `.peak_kib` and `.seconds` (the command's wall time,
  from its start to its reaping, without the launcher's start).
* `call(module_file, function, *args)`: an in-process peer (numpy, vendi-score, PyTorch, diffusers)
  run alone in a fresh Python: imports the module (its imports included, e.g. torch) and calls
  `function(*args)` (JSON-able arguments and result); returns (its result, the completed process).
* `line(ours_kib, peer, peer_kib)`: the printed line, `peak RSS: culturelens X MB, <peer> Y MB, ratio
  culturelens/peer Z.ZZx` (MB = 10^6 bytes).

Requirements: scripts/requirements/light.txt
"""
import json
import os
import subprocess
import sys

LAUNCHER = """
import os, subprocess, sys, time
fd, cmd = int(sys.argv[1]), sys.argv[2:]
t0 = time.perf_counter()
child = subprocess.Popen(cmd)
_, status, usage = os.wait4(child.pid, 0)
seconds = time.perf_counter() - t0
child.returncode = os.waitstatus_to_exitcode(status)
os.write(fd, f"{usage.ru_maxrss} {seconds}".encode())
sys.exit(child.returncode if child.returncode >= 0 else 128 - child.returncode)
"""
RESULT = "peak_rss-result "


def run(cmd, check=True, env=None, cwd=None):
    """Runs `cmd` (output captured as text) under the launcher; returns a CompletedProcess with
    `.peak_kib` (the command's own peak RSS, KiB) and `.seconds` (its wall time)."""
    cmd = [str(c) for c in cmd]
    read, write = os.pipe()
    try:
        proc = subprocess.run([sys.executable, "-I", "-S", "-c", LAUNCHER, str(write), *cmd], capture_output=True,
                              text=True, env=env, cwd=cwd, pass_fds=(write,))
    finally:
        os.close(write)
    with os.fdopen(read) as f:
        report = f.read().split()
    if len(report) != 2:  # the launcher could not start the command
        raise SystemExit(f"could not run {' '.join(cmd)}:\n{proc.stderr}")
    if check and proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, cmd, proc.stdout, proc.stderr)
    done = subprocess.CompletedProcess(cmd, proc.returncode, proc.stdout, proc.stderr)
    done.peak_kib, done.seconds = int(report[0]), float(report[1])
    return done


def call(module_file, function, *args, env=None):
    """`function(*args)` of the module `module_file` in a fresh Python under the launcher; returns
    (its result, the CompletedProcess with `.peak_kib` and `.seconds`)."""
    folder, name = os.path.split(os.path.abspath(module_file))
    code = (f"import importlib, json, sys\nsys.path.insert(0, {folder!r})\n"
            f"result = getattr(importlib.import_module({os.path.splitext(name)[0]!r}), {function!r})"
            f"(*json.loads(sys.argv[1]))\nprint({RESULT!r} + json.dumps(result))\n")
    proc = run([sys.executable, "-c", code, json.dumps(args)], check=False, env=env)
    results = [ln[len(RESULT):] for ln in proc.stdout.splitlines() if ln.startswith(RESULT)]
    if proc.returncode != 0 or not results:
        raise SystemExit(f"{name}.{function} in a child Python failed ({proc.returncode}):\n{proc.stderr}")
    return json.loads(results[-1]), proc


def floor_kib():
    """The peak RSS `run` reports for a command that allocates nothing (`true`): the launcher's
    size, below which no reading can go."""
    return run(["true"]).peak_kib


def mb(kib):
    return kib * 1024 / 1e6


def line(ours_kib, peer, peer_kib):
    return (f"peak RSS: culturelens {mb(ours_kib):.0f} MB, {peer} {mb(peer_kib):.0f} MB, "
            f"ratio culturelens/peer {ours_kib / peer_kib:.2f}x")


if __name__ == "__main__":  # a self-check: a child's own peak, not the parent's
    big = bytearray(300 * 2**20)  # 300 MiB in this process, touched
    for i in range(0, len(big), 4096):
        big[i] = 1
    floor = floor_kib()
    alloc = run([sys.executable, "-c", "b = bytearray(200 * 2**20)\nfor i in range(0, len(b), 4096): b[i] = 1"])
    print(f"parent ~{mb(len(big) // 1024):.0f} MB; `true` {mb(floor):.0f} MB (the floor); "
          f"a Python touching 200 MiB {mb(alloc.peak_kib):.0f} MB")
    assert floor < 100 * 1024, "the launcher's reading includes the parent's memory"
    assert 200 * 1024 < alloc.peak_kib < 300 * 1024, alloc.peak_kib
