#!/usr/bin/env python3
"""`culturelens generate` against diffusers 0.42 on the committed tiny pipelines of issue 30
(tests/fixtures/diffusion/tiny-sd3, tiny-sd35, tiny-flux-dev, tiny-flux-schnell, tiny-sdxl,
tiny-playground), side by side: seconds per denoising step and their ratio.

Each side runs one prompt at 16 × 16 (with 16 T5 tokens where the pipeline has T5) and the
pipeline's default guidance (SD 3: 7.0 and SDXL: 5.0, so the denoiser sees a batch of 2; FLUX:
3.5 into dev's guidance embedding, one call).
A step's time is measured by difference, as `bench_generate_cpu.py` does (whose `per_step` this
reuses): the whole generation at `--steps-high` minus at `--steps-low`, over the difference, so
loading, the text encoders and the VAE cancel out. culturelens' time is its `--timings` stage
`generate`; diffusers' the wall time of `pipe(...)` under `torch.inference_mode()`; each the best of
`--repeats` runs. The high-step images must agree within 1e-5 max abs or the script fails.
Each variant's line also has both sides' peak RSS (peak_rss.py, KiB): culturelens's whole command
(the largest of its runs) against a fresh Python that loads the pipeline and runs `pipe(...)` once at
`--steps-high` (`diffusers_side`), and their ratio.

These pipelines are tiny (widths 16–32, tens of tokens), so the numbers measure per-step overhead
(dispatch, small kernels), not arithmetic throughput. Run on a quiet machine:

    /work/venv/bin/python scripts/bench/bench_generate_flow_cpu.py --bin target/release/culturelens

(needs torch, diffusers 0.42.1, transformers 5.23.0).

Requirements: scripts/requirements/torch.txt
"""
import argparse
import json
import os
import pathlib
import sys
import tempfile
import time

import numpy as np

import peak_rss
from bench_generate_cpu import generate_seconds, per_step

PROMPT = "a photo of the food in china"
FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "diffusion"
SIZE = 16
TOKENS = 16


def has_t5(variant):
    return variant not in ("sdxl", "playground")


def culturelens_run(binary, pipeline, steps, out_npy, t5=True, peaks=None):
    """Seconds of `generate`'s `generate` stage; its peak RSS (KiB) is appended to `peaks`."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [binary, "generate", "--pipeline", str(pipeline), "--prompt", PROMPT, "--out", out, "--steps", str(steps),
               "--height", str(SIZE), "--width", str(SIZE), "--timings", "--out-npy", out_npy]
        cmd += ["--max-sequence-length", str(TOKENS)] if t5 else []
        return generate_seconds(cmd, peaks)


def diffusers_run(pipe, steps, t5=True):
    import torch

    t0 = time.perf_counter()
    extra = dict(max_sequence_length=TOKENS) if t5 else {}
    with torch.inference_mode():
        out = pipe(PROMPT, num_inference_steps=steps, height=SIZE, width=SIZE,
                   generator=torch.Generator().manual_seed(0), output_type="np", **extra).images
    return time.perf_counter() - t0, out


def diffusers_side(variant, steps, threads):
    """diffusers once on `variant`'s pipeline (run alone in a child Python for its peak RSS)."""
    import torch
    from diffusers import DiffusionPipeline

    torch.set_num_threads(threads)
    pipe = DiffusionPipeline.from_pretrained(FIXTURES / f"tiny-{variant}")
    pipe.set_progress_bar_config(disable=True)
    diffusers_run(pipe, steps, has_t5(variant))


def compare(binary, variant, low, high, repeats, work, threads):
    import diffusers
    import torch
    from diffusers import DiffusionPipeline

    pipeline = FIXTURES / f"tiny-{variant}"
    t5 = has_t5(variant)
    pipe = DiffusionPipeline.from_pretrained(pipeline)
    pipe.set_progress_bar_config(disable=True)
    diffusers_run(pipe, low, t5)  # warm-up
    peer, peer_images = per_step(lambda n: diffusers_run(pipe, n, t5), low, high, repeats)
    npy = os.path.join(work, f"{variant}.npy")
    peaks = []

    def ours_run(steps):
        return culturelens_run(binary, pipeline, steps, npy, t5, peaks), np.load(npy)

    ours, ours_images = per_step(ours_run, low, high, repeats)
    agreement = float(np.abs(ours_images - peer_images).max())
    peer_peak = peak_rss.call(__file__, "diffusers_side", variant, high, threads)[1].peak_kib
    return dict(workload=f"generate-tiny-{variant}-cpu", culturelens_s_per_step=ours,
                peer=f"diffusers {diffusers.__version__} torch {torch.__version__} float32", peer_s_per_step=peer,
                ratio=peer / ours, max_abs_image_difference=agreement, culturelens_peak_rss_kib=max(peaks),
                peer_peak_rss_kib=peer_peak, peak_rss_ratio=max(peaks) / peer_peak)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True, help="the culturelens release binary")
    ap.add_argument("--steps-low", type=int, default=4)
    ap.add_argument("--steps-high", type=int, default=28)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="torch intra-op threads")
    ap.add_argument("--variants", nargs="+", default=["sd3", "sd35", "flux-dev", "flux-schnell", "sdxl", "playground"])
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as work:
        for variant in args.variants:
            result = compare(args.bin, variant, args.steps_low, args.steps_high, args.repeats, work, args.threads)
            if result["max_abs_image_difference"] > 1e-5:
                sys.exit(f"the images disagree: {result}")
            print(json.dumps(dict(threads=args.threads, **result)))
            print(peak_rss.line(result["culturelens_peak_rss_kib"], "diffusers", result["peer_peak_rss_kib"]))


if __name__ == "__main__":
    main()
