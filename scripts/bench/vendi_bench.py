#!/usr/bin/env python3
"""Vendi scores: culturelens vs the vendi-score package, side by side.

For N x 1280 seeded random embeddings (float32 on disk, the same values as float64 for the peer):
  * vendi-score score_X (N x N kernel eigenvalues, scipy) vs `culturelens vendi` (auto route);
  * vendi-score score_dual (d x d) vs `culturelens vendi --route dual`;
and prints the times (best of --repeats), the ratios and |difference| of the scores (q = 1).
culturelens times are whole commands (process start, .npy load, product, eigenvalues, JSON); the
peer starts from data already in memory, so the script also prints culturelens's compute stages
alone (`--timings`: product + eigenvalues) and that ratio.

Usage: python3 scripts/bench/vendi_bench.py [--bin target/release/culturelens] [--n 10000]
       [--skip-score-x] [--repeats 3]
Requires: numpy, scipy, vendi-score.
"""
import argparse
import json
import os
import subprocess
import tempfile
import time

import numpy as np
from vendi_score import vendi


def best(fn, repeats):
    times, value = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - t0)
    return min(times), value


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

    stages = {}

    def culturelens(route):
        out = os.path.join(work, f"{route}.json")
        run = subprocess.run([args.bin, "vendi", "--embeddings", emb, "--route", route, "--timings",
                              "--out", out], check=True, capture_output=True, text=True)
        laps = dict(line.split()[1:3] for line in run.stderr.splitlines() if line.startswith("timing "))
        compute = float(laps.get("product", 0)) + float(laps.get("eigenvalues", 0))
        stages[route] = min(stages.get(route, compute), compute)
        with open(out) as f:
            return json.load(f)["vs"]

    print(f"N = {args.n}, d = {args.d}, q = 1")
    t_cl, v_cl = best(lambda: culturelens("auto"), args.repeats)
    t_dual, v_dual = best(lambda: vendi.score_dual(x64), args.repeats)
    print(f"vendi-score score_dual: {t_dual:.3f} s  culturelens (auto -> dual): {t_cl:.3f} s  "
          f"ratio {t_dual / t_cl:.2f}x  |diff| {abs(v_cl - v_dual):.2e} (rel {abs(v_cl - v_dual) / v_dual:.1e})")
    print(f"  compute stages only (product + eigenvalues): culturelens {stages['auto']:.3f} s  "
          f"ratio {t_dual / stages['auto']:.2f}x")
    if not args.skip_score_x:
        t_x, v_x = best(lambda: vendi.score_X(x64), 1)
        print(f"vendi-score score_X (N x N): {t_x:.3f} s  culturelens (auto): {t_cl:.3f} s  "
              f"ratio {t_x / t_cl:.1f}x  |diff| {abs(v_cl - v_x):.2e} (rel {abs(v_cl - v_x) / v_x:.1e})")
        t_k, v_k = best(lambda: culturelens("kernel"), 1)
        print(f"culturelens --route kernel (N x N): {t_k:.3f} s  ratio vs score_X {t_x / t_k:.2f}x  "
              f"|diff| {abs(v_k - v_x):.2e}")


if __name__ == "__main__":
    main()
