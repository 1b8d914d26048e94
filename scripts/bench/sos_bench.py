#!/usr/bin/env python3
"""SoS at the SoS paper's full scale, culturelens vs a numpy reference, side by side.

Builds a synthetic embedding table of 150,822 x 1280 float32 (7 models x 14 languages x 171
cultures x 3 templates x 3 person terms, the paper's grid), writes it as .npy + CSV, then times

  * numpy: the reference implementation below (vectorised; OpenBLAS where it helps), and
  * culturelens: `culturelens sos --timings` (release build), the stages of SCORE_STAGES (group
    ids, upload, device work and read-back, aggregates: everything between load and write),

on the same in-memory data (load and write are timed separately and reported too). Prints both
times, the ratio, and the max |difference| of the joint scores (must be <= 1e-5), and the peak RSS
of both sides (peak_rss.py): culturelens's whole command (the largest of its runs) against a fresh
Python that loads the same files as the numpy side does and computes the SoS once (`numpy_side`).

With `--ci` it then times the bootstrap intervals (issue 37) on the same table: the whole command
with `--ci 0.95 --bootstrap 1000` in the fast mode (references held at the full-table estimate)
against the same command without `--ci`, and the exact mode (references recomputed from every
resample) with `--exact-resamples` resamples, reported per resample.

Usage:  python3 scripts/bench/sos_bench.py [--bin target/release/culturelens] [--device cpu]
        [--rows-scale 1.0] [--repeats 3] [--workdir /tmp/culturelens-sos-bench]
        [--ci] [--exact-resamples 10]
Requires: numpy.

Requirements: scripts/requirements/light.txt
"""
import argparse
import csv
import os
import subprocess
import time

import numpy as np

import peak_rss

MODELS, LANGS, CULTS, TEMPLATES, PERSONS = 7, 14, 171, 3, 3



# The stages of `culturelens sos --timings` between load and write; "device" alone is the device
# work and the read-back of its result (the table already uploaded).
SCORE_STAGES = ("layout", "upload", "device", "report")


def timing_stages(stderr, wanted=SCORE_STAGES):
    """The `timing <stage> <seconds>` lines of a `--timings` run, by stage; every `wanted` stage
    must be there."""
    stages = {}
    for line in stderr.splitlines():
        if line.startswith("timing "):
            name, seconds = line[len("timing "):].rsplit(" ", 1)
            stages[name] = float(seconds)
    missing = [s for s in wanted if s not in stages]
    if missing:
        raise SystemExit(f"no `timing {missing[0]}` line in culturelens's stderr:\n{stderr}")
    return stages


def score_seconds(stages):
    """SoS compute of a `culturelens sos --timings` run: the SCORE_STAGES together."""
    return sum(stages[s] for s in SCORE_STAGES)

def make_table(workdir, dim, seed=0):
    emb_path = os.path.join(workdir, "embeddings.npy")
    meta_path = os.path.join(workdir, "meta.csv")
    if os.path.exists(emb_path) and os.path.exists(meta_path):
        return emb_path, meta_path
    rng = np.random.default_rng(seed)
    grid = np.array(np.meshgrid(np.arange(MODELS), np.arange(LANGS), np.arange(CULTS),
                                np.arange(TEMPLATES), np.arange(PERSONS), indexing="ij")).reshape(5, -1).T
    lang_dir = rng.standard_normal((LANGS, dim), dtype=np.float32)
    cult_dir = rng.standard_normal((CULTS, dim), dtype=np.float32)
    x = rng.standard_normal((grid.shape[0], dim), dtype=np.float32)
    x += 0.8 * lang_dir[grid[:, 1]] + 0.6 * cult_dir[grid[:, 2]]
    np.save(emb_path, x)
    with open(meta_path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["model", "language", "culture", "template", "person"])
        for m, l, c, t, p in grid:
            w.writerow([f"model{m}", f"lang{l:02d}", f"culture{c:03d}", "abc"[t], ["person", "woman", "man"][p]])
    return emb_path, meta_path


def sos_numpy(x, model, language, culture):
    """SoS paper Eq. (1), references pooled over all models; returns joint scores per cell."""
    lang_ids = np.unique(language, return_inverse=True)[1]
    cult_ids = np.unique(culture, return_inverse=True)[1]
    e = x / np.linalg.norm(x, axis=1, keepdims=True)

    def unit_group_means(ids):
        order = np.argsort(ids, kind="stable")
        starts = np.flatnonzero(np.r_[True, np.diff(ids[order]) != 0])
        sums = np.add.reduceat(e[order], starts, axis=0)
        return sums / np.linalg.norm(sums, axis=1, keepdims=True)

    sur = unit_group_means(lang_ids)
    sem = unit_group_means(cult_ids)
    per_image = np.einsum("ij,ij->i", e, sem[cult_ids]) - np.einsum("ij,ij->i", e, sur[lang_ids])
    cell_keys = np.char.add(np.char.add(np.char.add(model, "|"), np.char.add(language, "|")), culture)
    cells, cell_ids = np.unique(cell_keys, return_inverse=True)
    joint = np.bincount(cell_ids, weights=per_image.astype(np.float64)) / np.bincount(cell_ids)
    return dict(zip(cells, joint))


def load_table(emb_path, meta_path):
    """The numpy side's input: the embeddings and the model, language and culture columns."""
    x = np.load(emb_path)
    with open(meta_path) as f:
        rows = list(csv.reader(f))[1:]
    return x, np.array([r[0] for r in rows]), np.array([r[1] for r in rows]), np.array([r[2] for r in rows])


def numpy_side(emb_path, meta_path):
    """The numpy side once, load included (run alone in a child Python for its peak RSS)."""
    return len(sos_numpy(*load_table(emb_path, meta_path)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/culturelens")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dim", type=int, default=1280)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workdir", default="/tmp/culturelens-sos-bench")
    ap.add_argument("--ci", action="store_true", help="also time --ci in the fast and the exact mode")
    ap.add_argument("--exact-resamples", type=int, default=10)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    emb_path, meta_path = make_table(args.workdir, args.dim)

    t0 = time.perf_counter()
    x, model, language, culture = load_table(emb_path, meta_path)
    np_load = time.perf_counter() - t0
    np_times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        ref = sos_numpy(x, model, language, culture)
        np_times.append(time.perf_counter() - t0)

    cl_score, cl_load, cl_total, cl_peak = [], [], [], []
    out = os.path.join(args.workdir, "sos.csv")
    for _ in range(args.repeats):
        proc = peak_rss.run([args.bin, "sos", "--embeddings", emb_path, "--meta", meta_path, "--out", out,
                             "--device", args.device, "--timings"])
        cl_total.append(proc.seconds)
        cl_peak.append(proc.peak_kib)
        stages = timing_stages(proc.stderr)
        cl_score.append(score_seconds(stages))
        cl_load.append(stages["load"])

    with open(out) as f:
        got = {f"{r['model']}|{r['language']}|{r['culture']}": float(r["sos"]) for r in csv.DictReader(f)}
    max_diff = max(abs(got[k] - v) for k, v in ref.items())
    assert len(got) == len(ref), (len(got), len(ref))

    n = x.shape[0]
    print(f"table: {n} x {x.shape[1]} float32, {len(ref)} cells")
    print(f"numpy {np.__version__}: load {np_load:.3f} s, SoS {min(np_times):.3f} s (best of {args.repeats})")
    print(f"culturelens ({args.device}): load {min(cl_load):.3f} s, SoS {min(cl_score):.3f} s, "
          f"whole command {min(cl_total):.3f} s (best of {args.repeats})")
    print(f"ratio numpy/culturelens (SoS compute): {min(np_times) / min(cl_score):.2f}x")
    print(f"whole command / numpy's load of the same files: {min(cl_total) / np_load:.2f}x")
    _, np_run = peak_rss.call(__file__, "numpy_side", emb_path, meta_path)
    print(f"{peak_rss.line(max(cl_peak), 'numpy (load + SoS)', np_run.peak_kib)} (whole command / whole side)")
    print(f"max |joint SoS difference|: {max_diff:.2e}")
    assert max_diff <= 1e-5, "culturelens and numpy disagree"
    if args.ci:
        time_intervals(args, emb_path, meta_path, min(cl_total))


def time_intervals(args, emb_path, meta_path, point_seconds):
    """Whole-command times of `sos --ci` (fast, B = 1000; exact, B = --exact-resamples) against
    the point estimate's."""
    def run(extra):
        out = os.path.join(args.workdir, "sos-ci.csv")
        best = None
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            subprocess.run([args.bin, "sos", "--embeddings", emb_path, "--meta", meta_path, "--out", out,
                            "--device", args.device, "--ci", "0.95", "--seed", "1", *extra],
                           capture_output=True, text=True, check=True)
            took = time.perf_counter() - t0
            best = took if best is None else min(best, took)
        return best

    fast = run(["--bootstrap", "1000", "--ci-mode", "fast"])
    b = args.exact_resamples
    exact = run(["--bootstrap", str(b), "--ci-mode", "exact"])
    print(f"--ci fast, 1000 resamples: whole command {fast:.3f} s = {fast / point_seconds:.2f}x the point "
          f"estimate's {point_seconds:.3f} s")
    print(f"--ci exact, {b} resamples: whole command {exact:.3f} s; "
          f"{(exact - point_seconds) / b:.3f} s per resample beyond the point estimate")


if __name__ == "__main__":
    main()
