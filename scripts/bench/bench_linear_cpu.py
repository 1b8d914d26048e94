#!/usr/bin/env python3
"""The encoders' linear layers on the CPU, side by side: culturelens's CPU device
(`burn::tensor::module::linear`, Burn's flex backend on gemm 0.19, the call vit.rs makes) against
PyTorch's `torch.nn.functional.linear` (oneDNN/MKL) on the same shapes and the same numbers.

This isolates the matrix products of `culturelens embed` (bench_embed_cpu.py measures the whole
loop: decoding, preprocessing, the model): a ViT-B's layers at batch 16 — CLIP and OpenCLIP B/32
(50 tokens), SigLIP B/16 (196), DINOv2 base (257) — as [batch, tokens, d_in] x [d_in, d_out]:
qkv (768 -> 2304), attention output (768 -> 768), MLP up (768 -> 3072) and down (3072 -> 768).

    cargo build --release -p culturelens-models --example linear_shapes
    python3 scripts/bench/bench_linear_cpu.py [--bin target/release/examples/linear_shapes] \
        [--repeats 10] [--threads 0] [--shapes 16x50x768x2304 ...]

Both sides use every core (`--threads N`: torch.set_num_threads and RAYON_NUM_THREADS; 0 leaves
both at their defaults) and report the best of --repeats calls after one warm-up. Inputs are the
same fixed hash of each value's index (`value` below, the example's formula), PyTorch's weight the
transpose of the example's [d_in, d_out] (nn.Linear's [d_out, d_in] layout, contiguous). Each
shape prints PyTorch's and culturelens's milliseconds and GFLOP/s, the ratio (PyTorch time /
culturelens time; above 1 is culturelens faster) and the relative difference of sum(y^2) between
the sides; the script exits non-zero when that exceeds 1e-4 (the products agree to f32 rounding).
Each side runs in its own process (PyTorch in a fresh Python), and the last line is both sides'
peak RSS (peak_rss.py).

Requirements: scripts/requirements/torch.txt
"""
import argparse
import json
import os
import time

import numpy as np
import torch

import peak_rss

SHAPES = [
    f"16x{tokens}x{d_in}x{d_out}"
    for tokens in (50, 196, 257)
    for d_in, d_out in ((768, 2304), (768, 768), (768, 3072), (3072, 768))
]


def value(n, salt):
    """((i * 2654435761 + salt) mod 2^32) / 2^32 - 1/2 for i < n, as float32 (the example's)."""
    i = np.arange(n, dtype=np.uint64)
    return (((i * np.uint64(2654435761) + np.uint64(salt)) % np.uint64(1 << 32)) / 4294967296.0 - 0.5).astype(
        np.float32
    )


def torch_side(shapes, repeats, threads):
    """PyTorch's [best seconds, sum(y^2)] per shape (run alone in a fresh Python for its peak RSS)."""
    if threads:
        torch.set_num_threads(threads)
    rows = []
    for shape in shapes:
        batch, tokens, d_in, d_out = (int(d) for d in shape.split("x"))
        x = torch.from_numpy(value(batch * tokens * d_in, 1).reshape(batch, tokens, d_in))
        w = torch.from_numpy(value(d_in * d_out, 2).reshape(d_in, d_out).T.copy())
        with torch.inference_mode():
            y = torch.nn.functional.linear(x, w)
            best = float("inf")
            for _ in range(repeats):
                start = time.perf_counter()
                torch.nn.functional.linear(x, w)
                best = min(best, time.perf_counter() - start)
        rows.append([best, float((y.double() ** 2).sum())])
    return {"threads": torch.get_num_threads(), "version": torch.__version__, "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/examples/linear_shapes")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--shapes", nargs="+", default=SHAPES)
    args = ap.parse_args()
    env = dict(os.environ)
    if args.threads:
        env["RAYON_NUM_THREADS"] = str(args.threads)
    run = peak_rss.run([args.bin, "--repeats", str(args.repeats), *args.shapes], env=env)
    ours = {row["shape"]: row for row in map(json.loads, run.stdout.splitlines())}
    peer, peer_run = peak_rss.call(__file__, "torch_side", args.shapes, args.repeats, args.threads)
    print(f"torch {peer['version']}, {peer['threads']} threads; best of {args.repeats}")
    print("shape (batch x tokens x d_in x d_out) | PyTorch ms (GFLOP/s) | culturelens ms (GFLOP/s) | ratio | sum(y^2) rel diff")
    worst = 0.0
    for shape, (seconds, peer_sum) in zip(args.shapes, peer["rows"]):
        batch, tokens, d_in, d_out = (int(d) for d in shape.split("x"))
        flops = 2.0 * batch * tokens * d_in * d_out
        row = ours[shape]
        diff = abs(row["sum_sq"] - peer_sum) / abs(peer_sum)
        worst = max(worst, diff)
        print(
            f"{shape} | {seconds * 1e3:.2f} ({flops / seconds / 1e9:.0f}) | {row['seconds'] * 1e3:.2f} "
            f"({row['gflops']:.0f}) | {seconds / row['seconds']:.2f}x | {diff:.1e}"
        )
    print(peak_rss.line(run.peak_kib, "PyTorch", peer_run.peak_kib))
    if worst > 1e-4:
        raise SystemExit(f"the sides disagree: sum(y^2) differs by {worst:.1e} relative")


if __name__ == "__main__":
    main()
