"""The denoiser steps of issue 30's GPU benchmark: an SDXL UNet step and a FLUX.1-dev
transformer step at 1024 x 1024, `culturelens generate` against diffusers on the same saved
pipeline (imported by run.py; workloads `sdxl-unet-step` and `flux-step`).

Each pipeline is saved once under `--work`: the denoiser at the published checkpoint's size with
random weights (SDXL base 1.0's `UNet2DConditionModel`, 2.6 B parameters; FLUX.1-dev's
`FluxTransformer2DModel`, 11.9 B), around it one-layer text encoders of the real output widths
(CLIP-L 768 and bigG 1280 with its 1280 projection for SDXL; CLIP-L pooled 768 and a T5 of
d_model 4096 for FLUX) and a four-block VAE of 8 channels (scale factor 8, SDXL's 4 or FLUX's 16
latent channels with its scaling and shift factors), with the tokenizers and scheduler configs of
the committed tiny fixtures (tests/fixtures/diffusion/tiny-sdxl, tiny-flux-dev). A step's time is
the difference of two step counts (bench_generate_cpu.per_step), so the encoders and the VAE
cancel out and what is timed is the denoiser at its real size: SDXL with classifier-free guidance
5.0 (a batch of 2 at 128 x 128 latents), FLUX-dev with its guidance embedding 3.5 (one call, 4,096
image tokens and 512 T5 tokens). culturelens runs `--precision bf16` (FLUX) or `f16` (SDXL),
diffusers the same dtype on the same device.

`--smoke` builds the same pipelines at toy widths and runs both sides on the CPU in f32 at 64 x 64,
where the images must agree within 1e-3 (the check that this file works without a GPU).

Requirements: scripts/requirements/torch.txt
"""
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

from bench_generate_cpu import per_step

FIXTURES = pathlib.Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "diffusion"
PROMPT = "a photo of a wedding in japan"

# workload: (fixture, guidance, published size, half precision of the real run)
FAMILIES = {
    "sdxl-unet-step": ("tiny-sdxl", 5.0, 1024, "f16"),
    "flux-step": ("tiny-flux-dev", 3.5, 1024, "bf16"),
}


def _vae(fixture, smoke):
    """A four-block AutoencoderKL (scale factor 8) with the fixture VAE's latent statistics."""
    from diffusers import AutoencoderKL

    cfg = AutoencoderKL.load_config(fixture / "vae")
    keep = {k: cfg[k] for k in ("latent_channels", "scaling_factor", "shift_factor", "force_upcast",
                                "latents_mean", "latents_std") if cfg.get(k) is not None}
    return AutoencoderKL(in_channels=3, out_channels=3, down_block_types=["DownEncoderBlock2D"] * 4,
                         up_block_types=["UpDecoderBlock2D"] * 4, block_out_channels=[8] * 4, layers_per_block=1,
                         norm_num_groups=4, sample_size=64 if smoke else 1024, **keep)


def _clip(fixture_part, width, projection=None):
    """The fixture's CLIP text tower config (its special ids) at `width`, one layer."""
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

    cfg = CLIPTextConfig.from_pretrained(fixture_part)
    cfg.hidden_size, cfg.intermediate_size = width, 4 * width
    cfg.num_hidden_layers, cfg.num_attention_heads = 1, max(1, width // 64)
    if projection is None:
        return CLIPTextModel(cfg)
    cfg.projection_dim = projection
    return CLIPTextModelWithProjection(cfg)


def _sdxl(fixture, smoke):
    from diffusers import UNet2DConditionModel

    widths = (16, 32) if smoke else (768, 1280)
    if smoke:
        unet = dict(block_out_channels=(32, 64, 64), transformer_layers_per_block=(1, 1, 2),
                    attention_head_dim=(2, 4, 4), layers_per_block=1, addition_time_embed_dim=8, norm_num_groups=8)
    else:  # stabilityai/stable-diffusion-xl-base-1.0 unet/config.json
        unet = dict(block_out_channels=(320, 640, 1280), transformer_layers_per_block=(1, 2, 10),
                    attention_head_dim=(5, 10, 20), layers_per_block=2, addition_time_embed_dim=256,
                    norm_num_groups=32)
    unet = UNet2DConditionModel(
        sample_size=8 if smoke else 128, in_channels=4, out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=sum(widths), use_linear_projection=True, addition_embed_type="text_time",
        projection_class_embeddings_input_dim=widths[1] + 6 * unet["addition_time_embed_dim"], **unet)
    return dict(text_encoder=_clip(fixture / "text_encoder", widths[0]),
                text_encoder_2=_clip(fixture / "text_encoder_2", widths[1], projection=widths[1]), unet=unet)


def _flux(fixture, smoke):
    from diffusers import FluxTransformer2DModel
    from transformers import T5Config, T5EncoderModel

    pooled, joint = (16, 32) if smoke else (768, 4096)
    t5 = T5Config.from_pretrained(fixture / "text_encoder_2")
    t5.d_model, t5.d_ff, t5.num_layers, t5.num_heads, t5.d_kv = joint, 256, 1, 2, 16
    if smoke:
        transformer = dict(num_layers=1, num_single_layers=2, attention_head_dim=8, num_attention_heads=2,
                           axes_dims_rope=(2, 2, 4))
    else:  # black-forest-labs/FLUX.1-dev transformer/config.json
        transformer = dict(num_layers=19, num_single_layers=38, attention_head_dim=128, num_attention_heads=24,
                           axes_dims_rope=(16, 56, 56))
    transformer = FluxTransformer2DModel(patch_size=1, in_channels=64, joint_attention_dim=joint,
                                         pooled_projection_dim=pooled, guidance_embeds=True, **transformer)
    return dict(text_encoder=_clip(fixture / "text_encoder", pooled), text_encoder_2=T5EncoderModel(t5),
                transformer=transformer)


def save_pipeline(workload, work, smoke, dtype):
    """The pipeline of `workload` saved under `work` (once); returns its folder."""
    import torch
    from diffusers import DiffusionPipeline

    fixture_name = FAMILIES[workload][0]
    out = os.path.join(work, f"{workload}-{'toy' if smoke else 'full'}")
    if os.path.exists(os.path.join(out, "model_index.json")):
        return out
    fixture = FIXTURES / fixture_name
    torch.manual_seed(0)
    pipe = DiffusionPipeline.from_pretrained(fixture)
    parts = _sdxl(fixture, smoke) if workload.startswith("sdxl") else _flux(fixture, smoke)
    parts["vae"] = _vae(fixture, smoke)
    for name, module in parts.items():
        # The denoiser is saved in the dtype both sides run it in (FLUX-dev's 11.9 B parameters
        # are 48 GB in float32); the small parts stay float32.
        setattr(pipe, name, module.to(dtype) if name in ("unet", "transformer") else module)
    pipe.save_pretrained(out, safe_serialization=True)
    return out


def culturelens_run(binary, pipeline, steps, size, guidance, device, precision, out_npy):
    """Seconds of `generate`'s `generate` stage (one prompt, one image)."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [binary, "generate", "--pipeline", pipeline, "--prompt", PROMPT, "--out", out, "--steps", str(steps),
               "--height", str(size), "--width", str(size), "--guidance", str(guidance), "--device", device,
               "--precision", precision, "--timings", "--out-npy", out_npy]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
        lap = re.search(r"^timing generate ([\d.]+)$", proc.stderr, re.M)
        if lap is None:
            sys.exit(f"culturelens generate printed no `timing generate` line:\n{proc.stderr}")
        return float(lap.group(1))


def diffusers_run(pipe, steps, size, guidance, sync):
    import torch

    t0 = time.perf_counter()
    with torch.inference_mode():
        out = pipe(PROMPT, num_inference_steps=steps, guidance_scale=guidance, height=size, width=size,
                   generator=torch.Generator().manual_seed(0), output_type="np").images
    sync()
    return time.perf_counter() - t0, out


def compare(workload, bins, args, torch_device):
    """One result dict per binary: seconds per denoiser step of both sides, ratio, agreement."""
    import diffusers
    import torch
    from diffusers import DiffusionPipeline

    _, guidance, size, half = FAMILIES[workload]
    precision, dtype = ("f32", torch.float32) if args.smoke else (half, {"f16": torch.float16,
                                                                        "bf16": torch.bfloat16}[half])
    size = 64 if args.smoke else size
    low, high = (2, 4) if args.smoke else (5, 25)
    pipeline = save_pipeline(workload, args.work, args.smoke, dtype)
    pipe = DiffusionPipeline.from_pretrained(pipeline, torch_dtype=dtype).to(torch_device)
    pipe.set_progress_bar_config(disable=True)
    sync = torch.cuda.synchronize if torch_device.type == "cuda" else (lambda: None)
    diffusers_run(pipe, low, size, guidance, sync)  # warm-up
    peer, peer_images = per_step(lambda n: diffusers_run(pipe, n, size, guidance, sync), low, high, args.repeats)
    del pipe
    if torch_device.type == "cuda":
        torch.cuda.empty_cache()
    results = []
    for device, binary in bins:
        npy = os.path.join(args.work, f"{workload}.npy")

        def ours_run(steps):
            t = culturelens_run(binary, pipeline, steps, size, guidance, device, precision, npy)
            return t, np.load(npy)

        ours, ours_images = per_step(ours_run, low, high, args.repeats)
        agreement = float(np.abs(ours_images.astype(np.float32) - peer_images.astype(np.float32)).max())
        results.append((device, dict(
            size=size, precision=precision, guidance=guidance, culturelens_s_per_step=ours,
            peer=f"diffusers {diffusers.__version__} torch {torch.__version__} {str(dtype).split('.')[-1]}",
            peer_s_per_step=peer, ratio=peer / ours, max_abs_image_difference=agreement)))
    return results
