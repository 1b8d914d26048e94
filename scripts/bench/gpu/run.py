#!/usr/bin/env python3
"""One GPU benchmark: carried culturelens binaries against the Python peers, side by side.

For an NVIDIA machine with PyTorch + transformers (+ numpy, scipy, vendi-score) and no Rust
toolchain: copy the repository's `scripts/` and the release binaries built elsewhere
(`scripts/build_cuda.sh` for CUDA, the default build for Vulkan/wgpu) and run

    python3 scripts/bench/gpu/run.py --bin cuda=/path/culturelens-cuda --bin wgpu=/path/culturelens

Each workload prints one JSON line: workload, binary, both times (or rates), the ratio
peer / culturelens for times and culturelens / peer for rates (so > 1 means culturelens is
faster), the agreement, and the H100 anchor of issue 15 (PyTorch 2.11). Workloads:

  * `sos`: SoS at paper scale (150,822 x 1280 f32, the grid of scripts/bench/sos_bench.py):
    `culturelens sos --timings` stage `device` (the fused kernels and the read-back, with the
    table on the GPU as for the peer; `culturelens_score_s`: all of SoS's compute) against the
    same computation in PyTorch f32 on the GPU (anchor 6.2 ms); the joint scores must agree to
    1e-5.
  * `vendi-10k`, `vendi-100k`: N x 1280 cosine Vendi (q = 1): `culturelens vendi --timings`
    stages `product` + `eigenvalues` against torch f64 `score_dual` on the GPU (XᵀX then
    `eigvalsh`, anchor 15 ms) and vendi-score's `score_dual` (numpy); relative agreement 1e-9.
  * `embed-<model>`: fp16 image embedding of CLIP L/14, OpenCLIP bigG/14, SigLIP so400m@384 and
    DINOv2-giant-reg with random weights (transformers' configs at full size, saved with
    `save_pretrained`): `culturelens embed --precision f16` images/s of its embedding loop
    (decode + preprocess + model) against transformers with SDPA attention on preprocessed
    tensors (model only); anchors 2,165 / 488 / 466 / 657 images/s.
  * `unet-step`: seconds per denoising step of an SD-2.1-size random-weight UNet at 512 x 512 in
    fp16 with classifier-free guidance, one image and eight per prompt: `culturelens generate
    --precision f16 --timings` against diffusers' `StableDiffusionPipeline` in fp16 on the same
    saved pipeline, each step's time by difference of two step counts
    (scripts/bench/bench_generate_cpu.py, size `sd21`); anchors 36.2 ms (one image) and
    49.3 ms (eight) of issue 13. The max abs difference of the images is reported.
  * `sdxl-unet-step`, `flux-step` (issue 30): seconds per denoiser step at 1024 x 1024 of SDXL
    base 1.0's UNet (f16, guidance 5.0: a batch of 2) and FLUX.1-dev's transformer (bf16, its
    guidance embedding: one call), random weights at the published sizes around one-layer text
    encoders and a small VAE (families.py), against diffusers on the same saved pipeline. No
    anchor exists yet. FLUX-dev's pipeline is saved once in bf16 (about 24 GB under --work).

`--smoke` runs every workload at toy sizes with `--device cpu` and f32 and the peers on the CPU:
the check that the script's own parts work on a machine without a GPU (the times mean nothing).

Usage: python3 scripts/bench/gpu/run.py --bin DEVICE=PATH [--bin DEVICE=PATH ...]
       [--only sos,vendi-10k,...] [--repeats 3] [--images 256] [--work /tmp/culturelens-gpu-bench]
       [--smoke]

Requirements: scripts/requirements/torch.txt
"""
import argparse
import csv
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import sos_bench  # noqa: E402  (the paper-scale table and the numpy reference)
import bench_generate_cpu  # noqa: E402  (the random-weight SD pipeline and the per-step timing)
import families  # noqa: E402  (issue 30's SDXL and FLUX denoiser steps)

ANCHORS = {
    "sos": {"unit": "s", "h100_torch": 6.2e-3},
    "vendi-10k": {"unit": "s", "h100_torch": 15e-3},
    "vendi-100k": {"unit": "s", "h100_torch": None},
    "embed-clip-l14": {"unit": "images/s", "h100_torch": 2165},
    "embed-openclip-bigg14": {"unit": "images/s", "h100_torch": 488},
    "embed-siglip-so400m": {"unit": "images/s", "h100_torch": 466},
    "embed-dinov2-giant-reg": {"unit": "images/s", "h100_torch": 657},
    "unet-step": {"unit": "s", "h100_torch": {"1": 36.2e-3, "8": 49.3e-3}},
    "sdxl-unet-step": {"unit": "s", "h100_torch": None},
    "flux-step": {"unit": "s", "h100_torch": None},
}


def emit(**fields):
    print(json.dumps(fields, default=lambda v: v.item()), flush=True)  # numpy scalars as Python ones


def stages_of(cmd, wanted=()):
    """Runs a culturelens command with --timings; returns its stages (every `wanted` one there)."""
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    return sos_bench.timing_stages(proc.stderr, wanted)


def run_timed(cmd, wanted):
    """Runs a culturelens command with --timings; returns the sum of the `wanted` stages."""
    laps = stages_of(cmd, wanted)
    return sum(laps[s] for s in wanted)


def torch_device(smoke):
    import torch

    if smoke:
        return torch.device("cpu")
    if not torch.cuda.is_available():
        sys.exit("no CUDA device visible to PyTorch (use --smoke on a CPU machine)")
    return torch.device("cuda")


def timed_torch(fn, repeats, device):
    """Best wall time of `fn()` over `repeats` runs after one warm-up, synchronising CUDA."""
    import torch

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    value = fn()
    sync()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        value = fn()
        sync()
        best = min(best, time.perf_counter() - t0)
    return best, value


def sos_torch(x, lang_ids, cult_ids, cell_ids, n_cells):
    """The numpy reference of sos_bench.py in torch f32 (group sums by index_add_)."""
    import torch

    e = torch.nn.functional.normalize(x, dim=1)

    def unit_means(ids, k):
        sums = torch.zeros(k, e.shape[1], device=e.device).index_add_(0, ids, e)
        return torch.nn.functional.normalize(sums, dim=1)

    sur = unit_means(lang_ids, int(lang_ids.max()) + 1)
    sem = unit_means(cult_ids, int(cult_ids.max()) + 1)
    per_image = (e * sem[cult_ids]).sum(1) - (e * sur[lang_ids]).sum(1)
    sums = torch.zeros(n_cells, device=e.device, dtype=torch.float64).index_add_(0, cell_ids, per_image.double())
    counts = torch.bincount(cell_ids, minlength=n_cells)
    return sums / counts


def bench_sos(bins, args):
    import torch

    dev = torch_device(args.smoke)
    work = os.path.join(args.work, "sos")
    os.makedirs(work, exist_ok=True)
    dim = 32 if args.smoke else 1280
    emb, meta = sos_bench.make_table(work, dim)
    x = np.load(emb)
    rows = np.loadtxt(meta, delimiter=",", skiprows=1, dtype=str)
    if args.smoke:
        x, rows = x[: args.smoke_rows], rows[: args.smoke_rows]
        emb, meta = os.path.join(work, "smoke.npy"), os.path.join(work, "smoke.csv")
        np.save(emb, x)
        np.savetxt(meta, rows, delimiter=",", fmt="%s", header="model,language,culture,template,person", comments="")
    model, language, culture = rows[:, 0], rows[:, 1], rows[:, 2]
    ids = [np.unique(c, return_inverse=True)[1] for c in (language, culture)]
    keys = np.char.add(np.char.add(np.char.add(model, "|"), np.char.add(language, "|")), culture)
    cells, cell_ids = np.unique(keys, return_inverse=True)
    xt = torch.from_numpy(x).to(dev)
    lang_t, cult_t, cell_t = (torch.from_numpy(a).to(dev) for a in (*ids, cell_ids))
    t_peer, joint = timed_torch(lambda: sos_torch(xt, lang_t, cult_t, cell_t, len(cells)), args.repeats, dev)
    joint = dict(zip(cells, joint.cpu().numpy()))
    for device, binary in bins:
        out = os.path.join(work, f"sos-{device}.csv")
        cmd = [binary, "sos", "--embeddings", emb, "--meta", meta, "--out", out, "--device", device, "--timings"]
        # The device work alone (the peer's time starts with the table on the GPU too), and all
        # of SoS's compute (group ids, upload, device work, aggregates).
        laps = [stages_of(cmd, sos_bench.SCORE_STAGES) for _ in range(args.repeats)]
        t_ours = min(lap["device"] for lap in laps)
        t_score = min(sos_bench.score_seconds(lap) for lap in laps)
        with open(out) as f:
            got = {f"{r['model']}|{r['language']}|{r['culture']}": float(r["sos"]) for r in csv.DictReader(f)}
        if len(got) != len(joint):
            sys.exit(f"culturelens wrote {len(got)} cells, the peer computed {len(joint)}")
        diff = max(abs(got[k] - v) for k, v in joint.items())
        emit(workload="sos", binary=device, rows=int(x.shape[0]), dim=int(x.shape[1]),
             culturelens_s=t_ours, culturelens_score_s=t_score, peer="torch f32 (index_add_)", peer_s=t_peer,
             ratio=t_peer / t_ours,
             max_abs_diff=diff, agree=diff <= 1e-5, anchor=ANCHORS["sos"])


def bench_vendi(bins, args, n, name):
    import torch
    from vendi_score import vendi

    dev = torch_device(args.smoke)
    d = 64 if args.smoke else 1280
    n = min(n, args.smoke_rows) if args.smoke else n
    rng = np.random.default_rng(7)
    centres = rng.standard_normal((50, d))
    x = (rng.standard_normal((n, d)) + 2.0 * centres[np.arange(n) % 50]).astype(np.float32)
    work = os.path.join(args.work, name)
    os.makedirs(work, exist_ok=True)
    emb = os.path.join(work, "x.npy")
    np.save(emb, x)
    x64 = x.astype(np.float64)

    xt = torch.from_numpy(x64).to(dev)

    def dual():
        f = torch.nn.functional.normalize(xt, dim=1)
        w = torch.linalg.eigvalsh(f.T @ f / n).clamp(min=0)
        p = w[w > 0] / w.sum()
        return torch.exp(-(p * p.log()).sum())

    t_torch, v_torch = timed_torch(dual, args.repeats, dev)
    t_numpy, v_numpy = timed_torch(lambda: vendi.score_dual(x64), args.repeats, torch.device("cpu"))
    v_torch = float(v_torch)
    for device, binary in bins:
        out = os.path.join(work, f"vendi-{device}.json")
        cmd = [binary, "vendi", "--embeddings", emb, "--device", device, "--timings", "--out", out]
        t_ours = min(run_timed(cmd, ["product", "eigenvalues"]) for _ in range(args.repeats))
        with open(out) as f:
            v_ours = json.load(f)["vs"]
        rel = abs(v_ours - v_numpy) / abs(v_numpy)
        emit(workload=name, binary=device, n=n, dim=d, culturelens_s=t_ours,
             peer="torch f64 score_dual", peer_s=t_torch, ratio=t_torch / t_ours,
             numpy_score_dual_s=t_numpy, ratio_numpy=t_numpy / t_ours,
             rel_diff=rel, rel_diff_torch=abs(v_ours - v_torch) / abs(v_torch), agree=rel <= 1e-9,
             anchor=ANCHORS[name])


def encoder_configs(smoke):
    """(workload, transformers model class name, config, image size) at full size, or toy sizes."""
    from transformers import (CLIPConfig, Dinov2WithRegistersConfig, SiglipConfig)

    def clip(width, layers, heads, mlp, proj, text_width, text_layers, text_heads, act):
        return CLIPConfig(
            vision_config=dict(hidden_size=width, num_hidden_layers=layers, num_attention_heads=heads,
                               intermediate_size=mlp, patch_size=14, image_size=224, hidden_act=act),
            text_config=dict(hidden_size=text_width, num_hidden_layers=text_layers, num_attention_heads=text_heads,
                             intermediate_size=4 * text_width, hidden_act=act),
            projection_dim=proj)

    if smoke:
        tiny = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
        return [
            ("embed-clip-l14", "CLIPModel", CLIPConfig(vision_config={**tiny, "patch_size": 14, "image_size": 56},
                                                       text_config=tiny, projection_dim=16), 56),
            ("embed-siglip-so400m", "SiglipModel", SiglipConfig(vision_config={**tiny, "patch_size": 14,
                                                                               "image_size": 56},
                                                                 text_config=tiny), 56),
            ("embed-dinov2-giant-reg", "Dinov2WithRegistersModel",
             Dinov2WithRegistersConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, patch_size=14,
                                       image_size=56, use_swiglu_ffn=True, num_register_tokens=4), 56),
        ]
    return [
        ("embed-clip-l14", "CLIPModel", clip(1024, 24, 16, 4096, 768, 768, 12, 12, "quick_gelu"), 224),
        ("embed-openclip-bigg14", "CLIPModel", clip(1664, 48, 16, 8192, 1280, 1280, 32, 20, "gelu"), 224),
        ("embed-siglip-so400m", "SiglipModel",
         SiglipConfig(vision_config=dict(hidden_size=1152, num_hidden_layers=27, num_attention_heads=16,
                                         intermediate_size=4304, patch_size=14, image_size=384),
                      text_config=dict(hidden_size=1152, num_hidden_layers=27, num_attention_heads=16,
                                       intermediate_size=4304)), 384),
        ("embed-dinov2-giant-reg", "Dinov2WithRegistersModel",
         Dinov2WithRegistersConfig(hidden_size=1536, num_hidden_layers=40, num_attention_heads=24, mlp_ratio=4,
                                   patch_size=14, image_size=518, use_swiglu_ffn=True, num_register_tokens=4), 224),
    ]


def bench_embed(bins, args, only):
    import torch
    import transformers
    from PIL import Image

    dev = torch_device(args.smoke)
    dtype = torch.float32 if args.smoke else torch.float16
    images = os.path.join(args.work, "images")
    os.makedirs(images, exist_ok=True)
    n_images = 8 if args.smoke else args.images
    rng = np.random.default_rng(0)
    for i in range(n_images):
        path = os.path.join(images, f"{i:05d}.png")
        if not os.path.exists(path):
            Image.fromarray(rng.integers(0, 256, (256, 256, 3), dtype=np.uint8)).save(path)
    for name, cls, config, size in encoder_configs(args.smoke):
        if only and name not in only:
            continue
        torch.manual_seed(0)
        model = getattr(transformers, cls)(config)
        weights = os.path.join(args.work, name)
        model.save_pretrained(weights)
        processor = (transformers.BitImageProcessor(size={"shortest_edge": size}, crop_size=size)
                     if cls.startswith("Dinov2") else
                     transformers.SiglipImageProcessor(size={"height": size, "width": size})
                     if cls.startswith("Siglip") else
                     transformers.CLIPImageProcessor(size={"shortest_edge": size}, crop_size=size))
        processor.save_pretrained(weights)
        model = getattr(transformers, cls).from_pretrained(weights, attn_implementation="sdpa",
                                                           torch_dtype=dtype).to(dev).eval()
        pixels = torch.randn(args.batch, 3, size, size, dtype=dtype, device=dev)
        forward = (lambda: model(pixel_values=pixels).pooler_output) if cls.startswith("Dinov2") else \
            (lambda: model.get_image_features(pixel_values=pixels))
        with torch.inference_mode():
            t, _ = timed_torch(forward, args.repeats, dev)
        peer_ips = args.batch / t
        del model
        for device, binary in bins:
            out = os.path.join(args.work, f"{name}-{device}.npy")
            if os.path.exists(out):
                os.remove(out)
            cmd = [binary, "embed", "--images", images, "--weights", weights, "--out", out, "--device", device,
                   "--batch", str(args.batch), "--precision", "f32" if args.smoke else "f16"]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
            rate = re.search(r"\(([\d.]+) images/s\)", proc.stderr)
            if rate is None:
                sys.exit(f"culturelens embed printed no '(N images/s)' rate; stderr:\n{proc.stderr}")
            ours = float(rate.group(1))
            emit(workload=name, binary=device, images=n_images, culturelens_images_per_s=ours,
                 peer=f"transformers {transformers.__version__} sdpa {str(dtype).split('.')[-1]}",
                 peer_images_per_s=peer_ips, ratio=ours / peer_ips, anchor=ANCHORS[name])


def bench_unet_step(bins, args):
    import torch

    dev = torch_device(args.smoke)
    size = "toy" if args.smoke else "sd21"
    pipeline = bench_generate_cpu.save_pipeline(os.path.join(args.work, f"pipeline-{size}"), size)
    low, high = (2, 4) if args.smoke else (5, 25)
    for device, binary in bins:
        for images in (1, 8):
            result = bench_generate_cpu.compare(
                binary, pipeline, bench_generate_cpu.SIZES[size]["image"], images, device,
                "f32" if args.smoke else "f16", dev.type, torch.float32 if args.smoke else torch.float16,
                low, high, args.repeats, args.work)
            if args.smoke and result["max_abs_image_difference"] > 1e-3:
                sys.exit(f"unet-step: the images disagree: {result}")
            emit(workload="unet-step", binary=device, **result,
                 anchor={"unit": "s", "h100_torch": ANCHORS["unet-step"]["h100_torch"][str(images)]})


def bench_family_step(bins, args, workload):
    for device, result in families.compare(workload, bins, args, torch_device(args.smoke)):
        if args.smoke and result["max_abs_image_difference"] > 1e-3:
            sys.exit(f"{workload}: the images disagree: {result}")
        emit(workload=workload, binary=device, **result, anchor=ANCHORS[workload])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", action="append", default=[], metavar="DEVICE=PATH",
                    help="a culturelens binary and the --device it runs (cuda, wgpu, vulkan, cpu); repeatable")
    ap.add_argument("--only", default="", help="comma-separated workloads (default: all)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--images", type=int, default=256)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--work", default="/tmp/culturelens-gpu-bench")
    ap.add_argument("--smoke", action="store_true", help="toy sizes on the CPU: checks the script, not speed")
    ap.add_argument("--smoke-rows", type=int, default=2000, help=argparse.SUPPRESS)
    args = ap.parse_args()
    bins = []
    for spec in args.bin:
        device, sep, path = spec.partition("=")
        if not sep or not os.access(path, os.X_OK):
            sys.exit(f"--bin {spec}: expected DEVICE=PATH to an executable culturelens binary")
        bins.append((device, path))
    if not bins:
        sys.exit("give at least one --bin DEVICE=PATH")
    if args.smoke:
        args.batch = 4
    only = {w for w in args.only.split(",") if w}
    unknown = only - set(ANCHORS)
    if unknown:
        sys.exit(f"unknown workload(s) {sorted(unknown)}; known: {sorted(ANCHORS)}")
    os.makedirs(args.work, exist_ok=True)
    want = lambda w: not only or w in only  # noqa: E731
    steps = []
    if want("sos"):
        steps.append(("sos", lambda: bench_sos(bins, args)))
    if want("vendi-10k"):
        steps.append(("vendi-10k", lambda: bench_vendi(bins, args, 10_000, "vendi-10k")))
    if want("vendi-100k"):
        steps.append(("vendi-100k", lambda: bench_vendi(bins, args, 100_000, "vendi-100k")))
    if not only or any(w.startswith("embed-") for w in only):
        steps.append(("embed", lambda: bench_embed(bins, args, {w for w in only if w.startswith("embed-")})))
    if want("unet-step"):
        steps.append(("unet-step", lambda: bench_unet_step(bins, args)))
    for workload in families.FAMILIES:
        if want(workload):
            steps.append((workload, lambda w=workload: bench_family_step(bins, args, w)))
    # A failing workload is reported as one JSON line and the next one runs (a GPU lease is too
    # short to lose the rest of the run to one failure); the exit status says that one failed.
    failed = []
    for workload, step in steps:
        try:
            step()
        except (Exception, SystemExit) as err:  # sys.exit(message) inside a workload included
            message = err.code if isinstance(err, SystemExit) else f"{type(err).__name__}: {err}"
            emit(workload=workload, error=str(message)[-4000:])
            failed.append(workload)
    if failed:
        sys.exit(f"failed workloads: {', '.join(failed)}")


if __name__ == "__main__":
    main()
