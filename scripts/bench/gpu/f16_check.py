#!/usr/bin/env python3
"""Who is right in f16 on a GPU: culturelens and diffusers, each in f16 and f32, on run.py's
SD-2.1-size random-weight pipeline (bench_generate_cpu.py, size `sd21`), 2 DDIM steps at 512²,
guidance 7.5, one image; prints each image's NaN count and mean and the max abs difference of
every pair. With random full-size weights an f16 run can overflow; the pair against diffusers
f32 says which side's f16 stays near the f32 result.

Usage: python3 scripts/bench/gpu/f16_check.py --bin culturelens-cuda [--device cuda] [--work DIR]

Requirements: scripts/requirements/torch.txt
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_generate_cpu as b  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--work", default="/tmp/culturelens-f16-check")
    args = ap.parse_args()
    import torch
    from diffusers import StableDiffusionPipeline

    t0 = time.time()
    os.makedirs(args.work, exist_ok=True)
    pipeline = b.save_pipeline(os.path.join(args.work, "pipeline-sd21"), "sd21")
    size = b.SIZES["sd21"]["image"]
    images = {}
    for name, dtype in (("diffusers-f32", torch.float32), ("diffusers-f16", torch.float16)):
        pipe = StableDiffusionPipeline.from_pretrained(pipeline, torch_dtype=dtype).to("cuda")
        pipe.set_progress_bar_config(disable=True)
        images[name] = b.diffusers_run(pipe, 2, 1, size, torch.cuda.synchronize)[1].astype(np.float32)
        del pipe
    for precision in ("f16", "f32"):
        npy = os.path.join(args.work, f"culturelens-{precision}.npy")
        b.culturelens_run(args.bin, pipeline, 2, 1, size, args.device, precision, npy)
        images[f"culturelens-{precision}"] = np.load(npy).astype(np.float32)
    for name, image in images.items():
        print(name, "nan", int(np.isnan(image).sum()), "mean", float(np.nanmean(image)), flush=True)
    names = list(images)
    for i, a in enumerate(names):
        for c in names[i + 1:]:
            print(a, c, "max_abs_diff", float(np.nanmax(np.abs(images[a] - images[c]))), flush=True)
    print("seconds", round(time.time() - t0, 1))


if __name__ == "__main__":
    main()
