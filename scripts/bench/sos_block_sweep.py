#!/usr/bin/env python3
"""SoS row-block-size sweep: the SoS compute of `culturelens sos --timings` (the stages
sos_bench.SCORE_STAGES) for several
`--block-rows` values, on the paper-scale synthetic table of sos_bench.py (150,822 x 1280 float32).

Each block size is given in bytes of f32 rows (rows = bytes / (4 * dim)); "whole" is one block
(the GPU default). The default of `culturelens sos --device cpu` is 1 MiB (culturelens_compute::sos::
CPU_BLOCK_BYTES). Prints one line per block size with the best `score` time of --repeats runs, and
checks that every block size gives the same joint scores as the default (<= 1e-5).

Usage:  python3 scripts/bench/sos_block_sweep.py [--bin target/release/culturelens] [--device cpu]
        [--sizes 256K,1M,2M,8M,32M,whole] [--repeats 3] [--models 7] [--workdir DIR]
(--models < 7 builds a smaller table with fewer models, for a quick try.)
Requires: numpy.

Requirements: scripts/requirements/light.txt
"""
import argparse
import csv
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sos_bench  # noqa: E402  (the paper-scale table builder)


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def joint_scores(path):
    with open(path) as f:
        return {f"{r['model']}|{r['language']}|{r['culture']}": float(r["sos"]) for r in csv.DictReader(f)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/culturelens")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dim", type=int, default=1280)
    ap.add_argument("--sizes", default="256K,1M,2M,8M,32M,whole")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--models", type=int, default=sos_bench.MODELS)
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    sos_bench.MODELS = args.models
    workdir = args.workdir or f"/tmp/culturelens-sos-bench-{args.models}m-{args.dim}"
    os.makedirs(workdir, exist_ok=True)
    emb, meta = sos_bench.make_table(workdir, args.dim)
    rows = sum(1 for _ in open(meta)) - 1

    def run(extra, out):
        cmd = [args.bin, "sos", "--embeddings", emb, "--meta", meta, "--out", out, "--device", args.device,
               "--timings", *extra]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr}")
        return sos_bench.score_seconds(sos_bench.timing_stages(proc.stderr))

    reference = os.path.join(workdir, "sweep-default.csv")
    run([], reference)
    want = joint_scores(reference)
    print(f"table: {rows} x {args.dim} float32; culturelens sos --device {args.device}, SoS compute, "
          f"best of {args.repeats}")
    for size in args.sizes.split(","):
        block_rows = rows if size == "whole" else max(1, parse_size(size) // (4 * args.dim))
        out = os.path.join(workdir, f"sweep-{size}.csv")
        best = min(run(["--block-rows", str(block_rows)], out) for _ in range(args.repeats))
        got = joint_scores(out)
        assert len(got) == len(want), (len(got), len(want))
        diff = max(abs(got[k] - v) for k, v in want.items())
        assert diff <= 1e-5, f"block size {size} changes the joint scores by {diff}"
        print(f"block {size:>6} ({block_rows:>6} rows): score {best:.3f} s   max |diff| vs default {diff:.1e}")


if __name__ == "__main__":
    main()
