#!/usr/bin/env python3
"""Vendi scores: culturelens vs the vendi-score package, side by side (the rows of BENCHMARKS.md).

For N x 1280 seeded random embeddings (float32 on disk, the same values as float64 for the peer):
  * vendi-score score_dual (d x d) vs `culturelens vendi` (auto route, dual for N > d);
  * vendi-score score_X (N x N kernel eigenvalues, scipy) vs `culturelens vendi` (auto route);
  * vendi-score score_X vs `culturelens vendi --route kernel` (N x N, faer).
For each pair it prints one row: the peer's time, culturelens's whole-command time (process start,
.npy load, product, eigenvalues, JSON) and its compute stages alone (`--timings`: product +
eigenvalues, what the peer's in-memory time covers), the ratios peer / culturelens for both, and
the scores' relative difference (q = 1). Times are the best of --repeats (score_X and the kernel
route: one run). A missing `timing product` or `timing eigenvalues` line is an error.

Usage: python3 scripts/bench/vendi_bench.py [--bin target/release/culturelens] [--n 10000]
       [--skip-score-x] [--repeats 3]
Requires: numpy, scipy, vendi-score.

Requirements: scripts/requirements/light.txt
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from vendi_score import vendi

COMPUTE_STAGES = ("product", "eigenvalues")


def best(fn, repeats):
    """(best time, value of the last run, best compute-stage time or None) over `repeats` runs."""
    times, value, stages = [], None, []
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
        value, compute = result if isinstance(result, tuple) else (result, None)
        if compute is not None:
            stages.append(compute)
    return min(times), value, (min(stages) if stages else None)


def culturelens(binary, emb, work, route):
    """Runs `culturelens vendi`; returns (VS_1, product + eigenvalues seconds)."""
    out = os.path.join(work, f"{route}.json")
    run = subprocess.run([binary, "vendi", "--embeddings", emb, "--route", route, "--timings", "--out", out],
                         check=True, capture_output=True, text=True)
    laps = {}
    for line in run.stderr.splitlines():
        if line.startswith("timing "):
            parts = line.split()
            laps[" ".join(parts[1:-1])] = float(parts[-1])
    missing = [s for s in COMPUTE_STAGES if s not in laps]
    if missing:
        sys.exit(f"culturelens vendi --route {route} printed no `timing {missing[0]}` line; stderr:\n{run.stderr}")
    with open(out) as f:
        return json.load(f)["vs"], sum(laps[s] for s in COMPUTE_STAGES)


def row(peer, t_peer, v_peer, ours, t_ours, compute, v_ours):
    rel = abs(v_ours - v_peer) / abs(v_peer)
    print(f"| {peer} | {t_peer:.3f} s | {ours}: {t_ours:.3f} s (compute {compute:.3f} s) | "
          f"{t_peer / t_ours:.2f}x | {t_peer / compute:.2f}x | {rel:.1e} rel |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/culturelens")
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--d", type=int, default=1280)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-score-x", action="store_true", help="skip the N x N peer (slow for large N)")
    args = ap.parse_args()

    rng = np.random.default_rng(7)
    centres = rng.standard_normal((50, args.d))
    x = (rng.standard_normal((args.n, args.d)) + 2.0 * centres[np.arange(args.n) % 50]).astype(np.float32)
    x64 = x.astype(np.float64)
    work = tempfile.mkdtemp(prefix="culturelens-vendi-bench-")
    emb = os.path.join(work, "x.npy")
    np.save(emb, x)

    print(f"N = {args.n}, d = {args.d}, q = 1")
    print("| peer | peer time | culturelens | ratio (whole command) | ratio (compute) | agreement |")
    print("|---|---|---|---|---|---|")
    t_auto, v_auto, c_auto = best(lambda: culturelens(args.bin, emb, work, "auto"), args.repeats)
    t_dual, v_dual, _ = best(lambda: vendi.score_dual(x64), args.repeats)
    row("`score_dual`", t_dual, v_dual, "auto", t_auto, c_auto, v_auto)
    if not args.skip_score_x:
        t_x, v_x, _ = best(lambda: vendi.score_X(x64), 1)
        row("`score_X` (N x N, scipy)", t_x, v_x, "auto", t_auto, c_auto, v_auto)
        t_k, v_k, c_k = best(lambda: culturelens(args.bin, emb, work, "kernel"), 1)
        row("`score_X` (N x N, scipy)", t_x, v_x, "`--route kernel`", t_k, c_k, v_k)


if __name__ == "__main__":
    main()
