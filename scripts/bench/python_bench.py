#!/usr/bin/env python3
"""The Python package against its numpy peers in one process, no file I/O on either side (issue 34).

  * SoS: `culturelens.sos(x, meta)` against sos_bench.py's numpy reference (`sos_numpy`) on the
    SoS paper's grid (150,822 x 1280 float32 at `--rows-scale 1`; the same synthetic table), both
    from the same in-memory array and metadata; the joint scores must agree within 1e-5.
  * Vendi: `culturelens.vendi(x)` against vendi-score's `score_dual` (numpy, float64) on N x 1280
    seeded random embeddings (N = `--vendi-n`); VS_1 must agree within 1e-6 relative.

Prints one JSON line per workload: both times (best of `--repeats`), the ratio peer / culturelens
(> 1: culturelens faster) and the agreement, then a line with the peak RSS of both sides. Both
sides share one process by design, so that process's peak says nothing about either: for the peaks
each side runs once more, alone, in a fresh Python (peak_rss.py; `side`) that builds the same
in-memory input and calls one side; both children pay the same interpreter, imports (numpy,
pandas, culturelens) and input. The CLI's ratios for the same workloads are the rows of
BENCHMARKS.md (sos_bench.py, vendi_bench.py).

Usage: python3 scripts/bench/python_bench.py [--rows-scale 1.0] [--vendi-n 10000] [--repeats 3]
Requires: the culturelens wheel (scripts/test_python.sh builds it), numpy, pandas, vendi-score.

Requirements: scripts/requirements/light.txt
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sos_bench import CULTS, LANGS, MODELS, PERSONS, TEMPLATES, sos_numpy  # noqa: E402

import culturelens  # noqa: E402
import peak_rss  # noqa: E402


def best(fn, repeats):
    times, value = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - t0)
    return min(times), value


def sos_table(scale, dim=1280, seed=0):
    """sos_bench.make_table's table, in memory: (x, meta) with `scale` of its cultures."""
    rng = np.random.default_rng(seed)
    cults = max(1, int(round(CULTS * scale)))
    grid = np.array(np.meshgrid(np.arange(MODELS), np.arange(LANGS), np.arange(cults), np.arange(TEMPLATES),
                                np.arange(PERSONS), indexing="ij")).reshape(5, -1).T
    lang_dir = rng.standard_normal((LANGS, dim), dtype=np.float32)
    cult_dir = rng.standard_normal((cults, dim), dtype=np.float32)
    x = rng.standard_normal((grid.shape[0], dim), dtype=np.float32)
    x += 0.8 * lang_dir[grid[:, 1]] + 0.6 * cult_dir[grid[:, 2]]
    meta = pd.DataFrame({
        "model": [f"model{m}" for m in grid[:, 0]],
        "language": [f"lang{v:02d}" for v in grid[:, 1]],
        "culture": [f"culture{v:03d}" for v in grid[:, 2]],
    })
    return x, meta


def side(workload, which, rows_scale, vendi_n):
    """One side of one workload once, alone (run in a child Python for its peak RSS): `which` is
    "peer" or "culturelens"."""
    if workload == "sos":
        x, meta = sos_table(rows_scale)
        if which == "peer":
            sos_numpy(x, *[meta[c].to_numpy().astype(str) for c in ("model", "language", "culture")])
        else:
            culturelens.sos(x, meta)
    else:
        x = vendi_input(vendi_n)
        if which == "peer":
            from vendi_score import vendi

            vendi.score_dual(x.astype(np.float64), normalize=True)
        else:
            culturelens.vendi(x)


def print_peaks(workload, peer, args):
    peaks = [peak_rss.call(__file__, "side", workload, which, args.rows_scale, args.vendi_n)[1].peak_kib
             for which in ("culturelens", "peer")]
    print(f"{workload}: {peak_rss.line(peaks[0], peer, peaks[1])} (each alone in a fresh Python, input included)")


def vendi_input(n):
    return np.random.default_rng(1).standard_normal((n, 1280), dtype=np.float32)


def bench_sos(args):
    x, meta = sos_table(args.rows_scale)
    cols = [meta[c].to_numpy().astype(str) for c in ("model", "language", "culture")]
    t_peer, peer = best(lambda: sos_numpy(x, *cols), args.repeats)
    t_ours, ours = best(lambda: culturelens.sos(x, meta), args.repeats)
    keys = ours["model"] + "|" + ours["language"] + "|" + ours["culture"]
    diff = max(abs(v - peer[k]) for k, v in zip(keys, ours["sos"]))
    if diff > 1e-5:
        sys.exit(f"sos: joint scores differ by {diff}")
    print(json.dumps(dict(workload="sos", rows=int(x.shape[0]), dim=int(x.shape[1]), peer="numpy (sos_bench.sos_numpy)",
                          peer_s=t_peer, culturelens_s=t_ours, ratio=t_peer / t_ours, max_abs_joint_diff=diff)))
    print_peaks("sos", "numpy", args)


def bench_vendi(args):
    from vendi_score import vendi

    x = vendi_input(args.vendi_n)
    x64 = x.astype(np.float64)
    t_peer, peer = best(lambda: vendi.score_dual(x64, normalize=True), args.repeats)
    t_ours, ours = best(lambda: float(culturelens.vendi(x)["vs"][0]), args.repeats)
    rel = abs(ours - peer) / abs(peer)
    if rel > 1e-6:
        sys.exit(f"vendi: VS_1 differ by {rel} relative")
    print(json.dumps(dict(workload="vendi", n=args.vendi_n, dim=1280, peer="vendi-score score_dual (numpy f64)",
                          peer_s=t_peer, culturelens_s=t_ours, ratio=t_peer / t_ours, rel_diff=rel)))
    print_peaks("vendi", "vendi-score score_dual", args)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows-scale", type=float, default=1.0, help="the share of the paper's cultures")
    ap.add_argument("--vendi-n", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", choices=["sos", "vendi"])
    args = ap.parse_args()
    if args.only in (None, "sos"):
        bench_sos(args)
    if args.only in (None, "vendi"):
        bench_vendi(args)


if __name__ == "__main__":
    main()
