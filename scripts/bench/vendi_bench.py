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
Each row also gives the peak RSS of both sides (peak_rss.py): culturelens's whole command (the
largest of its runs) against a fresh Python that loads the same .npy, converts it to float64 as the
rows' peer gets it, and scores it once (`peer_side`).

Usage: python3 scripts/bench/vendi_bench.py [--bin target/release/culturelens] [--n 10000]
       [--skip-score-x] [--repeats 3]
Requires: numpy, scipy, vendi-score.

Requirements: scripts/requirements/light.txt
"""
import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np
from vendi_score import vendi

import peak_rss

COMPUTE_STAGES = ("product", "eigenvalues")


def best(fn, repeats):
    """(best time, value of the last run, best compute-stage time or None) over `repeats` runs; a
    run's time is its own when `fn` returns (value, seconds, compute seconds), else the call's."""
    times, value, stages = [], None, []
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        took = time.perf_counter() - t0
        if isinstance(result, tuple):
            value, took, compute = result
            stages.append(compute)
        else:
            value = result
        times.append(took)
    return min(times), value, (min(stages) if stages else None)


def culturelens(binary, emb, work, route, peaks):
    """Runs `culturelens vendi`, appending its peak RSS (KiB) to `peaks`; returns (VS_1, its own
    wall seconds, product + eigenvalues seconds)."""
    out = os.path.join(work, f"{route}.json")
    run = peak_rss.run([binary, "vendi", "--embeddings", emb, "--route", route, "--timings", "--out", out])
    peaks.append(run.peak_kib)
    laps = {}
    for line in run.stderr.splitlines():
        if line.startswith("timing "):
            parts = line.split()
            laps[" ".join(parts[1:-1])] = float(parts[-1])
    missing = [s for s in COMPUTE_STAGES if s not in laps]
    if missing:
        sys.exit(f"culturelens vendi --route {route} printed no `timing {missing[0]}` line; stderr:\n{run.stderr}")
    with open(out) as f:
        return json.load(f)["vs"], run.seconds, sum(laps[s] for s in COMPUTE_STAGES)


def peer_side(emb, score):
    """vendi-score's `score` ("score_dual" or "score_X") once on the .npy as float64 (run alone in a
    child Python for its peak RSS)."""
    return float(getattr(vendi, score)(np.load(emb).astype(np.float64)))


def row(peer, t_peer, v_peer, ours, t_ours, compute, v_ours, rss_ours, rss_peer):
    rel = abs(v_ours - v_peer) / abs(v_peer)
    mb = peak_rss.mb
    print(f"| {peer} | {t_peer:.3f} s | {ours}: {t_ours:.3f} s (compute {compute:.3f} s) | "
          f"{t_peer / t_ours:.2f}x | {t_peer / compute:.2f}x | {rel:.1e} rel | "
          f"{mb(rss_ours):.0f} MB / {mb(rss_peer):.0f} MB = {rss_ours / rss_peer:.2f}x |")


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
    print("| peer | peer time | culturelens | ratio (whole command) | ratio (compute) | agreement "
          "| peak RSS culturelens / peer |")
    print("|---|---|---|---|---|---|---|")
    auto_peaks, kernel_peaks = [], []
    t_auto, v_auto, c_auto = best(lambda: culturelens(args.bin, emb, work, "auto", auto_peaks), args.repeats)
    t_dual, v_dual, _ = best(lambda: vendi.score_dual(x64), args.repeats)
    rss_dual = peak_rss.call(__file__, "peer_side", emb, "score_dual")[1].peak_kib
    row("`score_dual`", t_dual, v_dual, "auto", t_auto, c_auto, v_auto, max(auto_peaks), rss_dual)
    if not args.skip_score_x:
        t_x, v_x, _ = best(lambda: vendi.score_X(x64), 1)
        rss_x = peak_rss.call(__file__, "peer_side", emb, "score_X")[1].peak_kib
        row("`score_X` (N x N, scipy)", t_x, v_x, "auto", t_auto, c_auto, v_auto, max(auto_peaks), rss_x)
        t_k, v_k, c_k = best(lambda: culturelens(args.bin, emb, work, "kernel", kernel_peaks), 1)
        row("`score_X` (N x N, scipy)", t_x, v_x, "`--route kernel`", t_k, c_k, v_k, max(kernel_peaks), rss_x)


if __name__ == "__main__":
    main()
