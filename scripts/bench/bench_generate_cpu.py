#!/usr/bin/env python3
"""`culturelens generate` against diffusers on the same random-weight Stable Diffusion pipeline,
side by side: seconds per denoising step and their ratio (issue 13).

Both sides run the pipeline saved here (`save_pipeline`: diffusers' `save_pretrained` folder,
DDIM scheduler) on one prompt with classifier-free guidance (guidance 7.5, so the UNet sees a
batch of 2 per image). A step's time is measured by difference: the whole generation at
`--steps-high` minus at `--steps-low` steps, over the step difference, so the text encoder, the
VAE decoder, loading and the image write cancel out. culturelens' time is its `--timings` stage
`generate` (read-back included); diffusers' is the wall time of `pipe(...)` under
`torch.inference_mode()`. Each is the best of `--repeats` runs. The images of the high-step runs
must agree (max abs ≤ 1e-3 in [0, 1]) or the script fails. Both sides' peak RSS (peak_rss.py) is
printed too: culturelens's whole command (the largest of its runs) against a fresh Python that loads
the pipeline and runs `pipe(...)` once at `--steps-high` (`diffusers_side`).

Sizes (`--size`):
  * `small` (the CPU benchmark of BENCHMARKS.md): SD 1.x's UNet layout (four blocks, two
    resnets each, cross-attention in the first three, 8 heads) at widths 32/64/128/128 with
    cross-attention width 128, a 2-layer CLIP text tower of width 128, a small VAE, 256 × 256
    images (32 × 32 latents);
  * `sd15`: SD 1.5's UNet at full width (320/640/1280/1280, 8 heads, conv projections,
    cross-attention width 768) with a 1-layer text tower of width 768 and a small VAE, 256 × 256
    images (32 × 32 latents): issue 36's second CPU workload;
  * `sd21`: SD 2.1's UNet at full size (320/640/1280/1280, heads 5/10/20/20, linear
    projections, cross-attention width 1024) with a 1-layer text tower of width 1024 and a small
    VAE, 512 × 512 images: the GPU workload `unet-step` of scripts/bench/gpu/run.py, which
    imports this file;
  * `toy`: widths 8/16 for smoke runs.

The pipeline is built once in the work folder and reused. Run on a quiet machine:

    python3 scripts/bench/bench_generate_cpu.py --bin target/release/culturelens

(needs torch, diffusers 0.31.0, transformers 4.46.3; see docs/generate.md).

Requirements: scripts/requirements/torch.txt
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

import peak_rss

PROMPT = "a photo of a wedding in japan"
SIZES = {
    "toy": dict(blocks=(8, 16), heads=2, cross=16, layers=1, down=("CrossAttnDownBlock2D", "DownBlock2D"),
                up=("UpBlock2D", "CrossAttnUpBlock2D"), linear=False, text=(16, 1, 2), image=32),
    "small": dict(blocks=(32, 64, 128, 128), heads=8, cross=128, layers=2,
                  down=("CrossAttnDownBlock2D",) * 3 + ("DownBlock2D",),
                  up=("UpBlock2D",) + ("CrossAttnUpBlock2D",) * 3, linear=False, text=(128, 2, 4), image=256),
    "sd15": dict(blocks=(320, 640, 1280, 1280), heads=8, cross=768, layers=2,
                 down=("CrossAttnDownBlock2D",) * 3 + ("DownBlock2D",),
                 up=("UpBlock2D",) + ("CrossAttnUpBlock2D",) * 3, linear=False, text=(768, 1, 12), image=256),
    "sd21": dict(blocks=(320, 640, 1280, 1280), heads=(5, 10, 20, 20), cross=1024, layers=2,
                 down=("CrossAttnDownBlock2D",) * 3 + ("DownBlock2D",),
                 up=("UpBlock2D",) + ("CrossAttnUpBlock2D",) * 3, linear=True, text=(1024, 1, 16), image=512),
}


def save_pipeline(out, size):
    """A random-weight StableDiffusionPipeline of `size` saved in `out` (once); returns `out`."""
    if os.path.exists(os.path.join(out, "model_index.json")):
        return out
    import torch
    from diffusers import AutoencoderKL, DDIMScheduler, StableDiffusionPipeline, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from gpt2_bytes import bytes_to_unicode  # scripts/gpt2_bytes.py

    s = SIZES[size]
    torch.manual_seed(0)
    src = tempfile.mkdtemp()
    symbols = list(bytes_to_unicode().values())
    vocab = symbols + [t + "</w>" for t in symbols] + ["<|startoftext|>", "<|endoftext|>"]
    with open(os.path.join(src, "vocab.json"), "w") as f:
        json.dump({t: i for i, t in enumerate(vocab)}, f)
    with open(os.path.join(src, "merges.txt"), "w") as f:
        f.write("#version: 0.2\n")
    tokenizer = CLIPTokenizer(os.path.join(src, "vocab.json"), os.path.join(src, "merges.txt"), model_max_length=77)
    width, layers, heads = s["text"]
    text_encoder = CLIPTextModel(CLIPTextConfig(
        vocab_size=len(vocab), hidden_size=width, intermediate_size=4 * width, num_hidden_layers=layers,
        num_attention_heads=heads, max_position_embeddings=77, hidden_act="gelu",
        bos_token_id=len(vocab) - 2, eos_token_id=len(vocab) - 1, pad_token_id=len(vocab) - 1))
    unet = UNet2DConditionModel(
        sample_size=s["image"] // 8, in_channels=4, out_channels=4, layers_per_block=s["layers"],
        block_out_channels=s["blocks"], down_block_types=s["down"], up_block_types=s["up"],
        cross_attention_dim=s["cross"], attention_head_dim=s["heads"], use_linear_projection=s["linear"],
        norm_num_groups=min(32, s["blocks"][0] // 2))
    vae = AutoencoderKL(
        in_channels=3, out_channels=3, down_block_types=["DownEncoderBlock2D"] * 4,
        up_block_types=["UpDecoderBlock2D"] * 4, block_out_channels=[8] * 4, layers_per_block=1,
        latent_channels=4, norm_num_groups=4, sample_size=s["image"])
    scheduler = DDIMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                              clip_sample=False, set_alpha_to_one=False, steps_offset=1)
    pipe = StableDiffusionPipeline(vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, unet=unet,
                                   scheduler=scheduler, safety_checker=None, feature_extractor=None,
                                   requires_safety_checker=False)
    pipe.save_pretrained(out, safe_serialization=True)
    return out


def culturelens_run(binary, pipeline, steps, images, size, device, precision, out_npy=None, peaks=None):
    """Seconds of `generate`'s `generate` stage (one prompt, `images` images, guidance 7.5); the
    command's peak RSS (KiB) is appended to `peaks` when given."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [binary, "generate", "--pipeline", pipeline, "--prompt", PROMPT, "--out", out, "--steps", str(steps),
               "--images-per-prompt", str(images), "--height", str(size), "--width", str(size), "--guidance", "7.5",
               "--device", device, "--precision", precision, "--timings"]
        if out_npy:
            cmd += ["--out-npy", out_npy]
        return generate_seconds(cmd, peaks)


def generate_seconds(cmd, peaks=None):
    """Runs a `culturelens generate ... --timings` command (under peak_rss's launcher when `peaks`
    is a list, appending its peak RSS in KiB); returns its `timing generate` seconds."""
    proc = peak_rss.run(cmd, check=False) if peaks is not None else subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    if peaks is not None:
        peaks.append(proc.peak_kib)
    lap = re.search(r"^timing generate ([\d.]+)$", proc.stderr, re.M)
    if lap is None:
        sys.exit(f"culturelens generate printed no `timing generate` line:\n{proc.stderr}")
    return float(lap.group(1))


def diffusers_run(pipe, steps, images, size, sync):
    """Seconds of one `pipe(...)` call and its float images."""
    import torch

    generator = torch.Generator().manual_seed(0)
    t0 = time.perf_counter()
    with torch.inference_mode():
        out = pipe(PROMPT, num_inference_steps=steps, guidance_scale=7.5, num_images_per_prompt=images,
                   height=size, width=size, generator=generator, output_type="np").images
    sync()
    return time.perf_counter() - t0, out


def per_step(run, low, high, repeats):
    """(seconds per step, the last high-step result) from the best of `repeats` runs each."""
    best = {}
    last = None
    for steps in (low, high):
        times = []
        for _ in range(repeats):
            t, value = run(steps)
            times.append(t)
            if steps == high:
                last = value
        best[steps] = min(times)
    return (best[high] - best[low]) / (high - low), last


def diffusers_side(pipeline, steps, images, size, threads):
    """diffusers once on the CPU in float32, the pipeline loaded from `pipeline` (run alone in a
    child Python for its peak RSS)."""
    import torch
    from diffusers import StableDiffusionPipeline

    torch.set_num_threads(threads)
    pipe = StableDiffusionPipeline.from_pretrained(pipeline, torch_dtype=torch.float32)
    pipe.set_progress_bar_config(disable=True)
    diffusers_run(pipe, steps, images, size, lambda: None)


def compare(binary, pipeline, size, images, device, precision, torch_device, dtype, low, high, repeats, work,
            peaks=None):
    """Per-step seconds of both sides and their agreement; returns a dict for printing. With a
    list `peaks`, culturelens's peak RSS of each run (KiB) is appended to it."""
    import diffusers
    import torch
    from diffusers import StableDiffusionPipeline

    pipe = StableDiffusionPipeline.from_pretrained(pipeline, torch_dtype=dtype).to(torch_device)
    pipe.set_progress_bar_config(disable=True)
    sync = torch.cuda.synchronize if torch_device == "cuda" else (lambda: None)
    diffusers_run(pipe, low, images, size, sync)  # warm-up
    peer, peer_images = per_step(lambda n: diffusers_run(pipe, n, images, size, sync), low, high, repeats)
    npy = os.path.join(work, "culturelens-images.npy")

    def ours_run(steps):
        t = culturelens_run(binary, pipeline, steps, images, size, device, precision, npy, peaks)
        return t, np.load(npy)

    ours, ours_images = per_step(ours_run, low, high, repeats)
    agreement = float(np.abs(ours_images.astype(np.float32) - peer_images.astype(np.float32)).max())
    return dict(images=images, culturelens_s_per_step=ours, peer=f"diffusers {diffusers.__version__} "
                f"torch {torch.__version__} {str(dtype).split('.')[-1]}", peer_s_per_step=peer, ratio=peer / ours,
                max_abs_image_difference=agreement)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True, help="the culturelens release binary")
    ap.add_argument("--size", default="small", choices=sorted(SIZES))
    ap.add_argument("--steps-low", type=int, default=2)
    ap.add_argument("--steps-high", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="torch intra-op threads")
    ap.add_argument("--work", default="/tmp/culturelens-generate-bench")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    os.makedirs(args.work, exist_ok=True)
    pipeline = save_pipeline(os.path.join(args.work, f"pipeline-{args.size}"), args.size)
    image, peaks = SIZES[args.size]["image"], []
    result = compare(args.bin, pipeline, image, 1, "cpu", "f32", "cpu", torch.float32,
                     args.steps_low, args.steps_high, args.repeats, args.work, peaks)
    if result["max_abs_image_difference"] > 1e-3:
        sys.exit(f"the images disagree: {result}")
    print(json.dumps(dict(workload=f"generate-{args.size}-cpu", threads=args.threads, **result)))
    print(f"seconds per step (1 image, CFG): culturelens {result['culturelens_s_per_step']:.4f}, "
          f"diffusers {result['peer_s_per_step']:.4f}, ratio diffusers/culturelens {result['ratio']:.2f}")
    peer = peak_rss.call(__file__, "diffusers_side", pipeline, args.steps_high, 1, image, args.threads)[1]
    print(f"{peak_rss.line(max(peaks), 'diffusers', peer.peak_kib)} (whole command / a fresh Python loading the "
          f"pipeline and generating once at {args.steps_high} steps)")


if __name__ == "__main__":
    main()
