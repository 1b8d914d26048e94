"""CPU side-by-side: `culturelens embed` vs PyTorch on the same network, same images, images/s
and ratio. Models (`--model`; random weights are seeded, saved under `--work` and loaded back
from there by both sides, as make_encoders.py saves its fixtures of the same families):
- `clip-b32`: random-weight CLIP ViT-B/32 (transformers' `CLIPConfig()`, OpenAI architecture,
  quick-GELU, 224 px) against transformers' `get_image_features`;
- `siglip-b16`: random-weight SigLIP (`SiglipConfig()`: google/siglip-base-patch16-224 shapes,
  tanh-GELU, attention-pooling head) with `SiglipImageProcessorPil()` against
  `get_image_features`;
- `dinov2-b14`: random-weight DINOv2 (`Dinov2Config()`: facebook/dinov2-base shapes, exact
  GELU, 518 px position embeddings interpolated to the 224 px crop) with facebook/dinov2-base's
  processor (`BitImageProcessorPil`: shortest edge 256, bicubic, crop 224, ImageNet mean/std)
  against `pooler_output`;
- `open-clip-b32`: random-weight OpenCLIP `ViT-B-32` (`open_clip.create_model`, exact GELU) in
  the hub layout (`open_clip_config.json` + `open_clip_model.safetensors`) against open_clip's
  `encode_image` after its own evaluation transform (PIL), both loaded with `local-dir:`;
- `efficientnet-lite0`: the real ImageNet EfficientNet-Lite0 weights (scripts/fetch_test_weights.sh),
  imported with `culturelens import-weights`, against `efficientnet_lite_pytorch` pooled features.

    /tmp/venv/bin/python scripts/bench/bench_embed_cpu.py [--model MODEL] \
        [--images 64] [--batch 16] [--rounds 3] [--bin target/release/culturelens] \
        [--work /tmp/culturelens-bench]

Rounds alternate the two sides (PyTorch, then culturelens) so that both meet the same machine
state (shared VMs drift by 2x over minutes); each round prints its rates and the summary the
medians. The culturelens rate is of the command's embedding loop (PNG decoding, preprocessing
and the model, printed by the command; the command's total time, with weights loading and
writing, is printed too). PyTorch is timed two ways: `from files`, the same work (PIL opens and
decodes the PNGs, then the processor and the model), and `decoded`, the processor and the model
on images decoded before the clock starts (the only PyTorch number of this script before
2026-11-26). The floor of BENCHMARKS.md is judged on the first.

Both sides must compute the same thing: the script compares culturelens's embeddings with
PyTorch's, row by row, and exits non-zero when they differ by more than 1e-3 (max abs; measured
differences are ~1e-5; every model's random-weight embeddings are of order 1, largest |value|
about 3-4) or when the command's output has no rate to read.

It ends with the peak RSS of both sides (peak_rss.py): the command's own (the largest of its runs)
against a fresh Python that imports torch and transformers (and open_clip for `open-clip-b32`),
loads the same network from the saved weights, and embeds the images from files once
(`torch_side`).

Requirements: scripts/requirements/torch.txt
"""

import argparse
import json
import pathlib
import re
import subprocess
import sys
import time

import numpy as np
import torch
from PIL import Image
from safetensors.torch import save_file
from transformers import (
    CLIPConfig,
    CLIPImageProcessorPil,
    CLIPModel,
    Dinov2Config,
    Dinov2Model,
    SiglipConfig,
    SiglipImageProcessorPil,
    SiglipModel,
)
from transformers.image_utils import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD
from transformers.models.bit.image_processing_pil_bit import BitImageProcessorPil

import peak_rss

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "fixtures"))


def tensor_of(output):
    return output if isinstance(output, torch.Tensor) else output.pooler_output


def features(model):
    # transformers 5 returns the projected features as the output's `pooler_output`, 4.x as a tensor.
    return lambda pixels: tensor_of(model.get_image_features(pixel_values=pixels))


def pooled(model):
    return lambda pixels: model(pixel_values=pixels).pooler_output


def transformers_family(model_cls, config_cls, processor_cls, embed, **processor_args):
    """(save, load) of a seeded random-weight transformers model with its default config."""

    def save(weights, _binary):
        torch.manual_seed(0)
        model_cls(config_cls()).save_pretrained(weights)
        processor_cls(**processor_args).save_pretrained(weights)

    def load(weights):
        model = model_cls.from_pretrained(weights).eval()
        return model, processor_cls.from_pretrained(weights), embed(model)

    return save, load


def save_open_clip(weights, _binary):
    """A seeded random-weight OpenCLIP ViT-B-32 in the hub layout, as make_encoders.make_open_clip
    writes its fixture: the state dict as is, `{model_cfg, preprocess_cfg}` as the config."""
    import open_clip

    torch.manual_seed(0)
    model = open_clip.create_model("ViT-B-32")
    weights.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, weights / "open_clip_model.safetensors")
    config = {"model_cfg": open_clip.get_model_config("ViT-B-32"),
              "preprocess_cfg": open_clip.get_model_preprocess_cfg(model)}
    (weights / "open_clip_config.json").write_text(json.dumps(config, indent=2) + "\n")


def load_open_clip(weights):
    """The saved OpenCLIP folder loaded by open_clip itself, with its evaluation transform
    (called like a transformers processor)."""
    import open_clip

    model, _, transform = open_clip.create_model_and_transforms(f"local-dir:{weights}")
    model.eval()

    def processor(images, return_tensors):
        return {"pixel_values": torch.stack([transform(image) for image in images])}

    return model, processor, model.encode_image


def save_efficientnet(weights, binary):
    from make_encoders_efficientnet_lite0 import PTH

    if not weights.exists():
        subprocess.run(
            [binary, "import-weights", "--arch", "efficientnet-lite0", "--pickle", str(PTH), "--out", str(weights)],
            check=True,
        )


def load_efficientnet(_weights):
    """The EfficientNet-Lite0 network and preprocessing the parity fixture was made with, and its
    pooled-features function."""
    from make_encoders_efficientnet_lite0 import reference_model, reference_processor

    model, processor = reference_model(), reference_processor()
    return model, processor, lambda pixels: model.extract_features(pixels).mean(dim=(2, 3))


# --model: (save(weights folder, culturelens binary), load(weights folder) -> (model, processor, embed)).
MODELS = {
    "clip-b32": transformers_family(CLIPModel, CLIPConfig, CLIPImageProcessorPil, features),
    "siglip-b16": transformers_family(SiglipModel, SiglipConfig, SiglipImageProcessorPil, features),
    "dinov2-b14": transformers_family(
        Dinov2Model, Dinov2Config, BitImageProcessorPil, pooled,
        size={"shortest_edge": 256}, crop_size={"height": 224, "width": 224}, resample=3,
        image_mean=IMAGENET_DEFAULT_MEAN, image_std=IMAGENET_DEFAULT_STD, do_convert_rgb=True,
    ),
    "open-clip-b32": (save_open_clip, load_open_clip),
    "efficientnet-lite0": (save_efficientnet, load_efficientnet),
}


def torch_embed(embed, processor, files, batch, decoded):
    """PyTorch's images/s and embeddings, decoding inside the clock (`decoded=False`) or before it."""
    pil = [Image.open(p).convert("RGB") for p in files] if decoded else None
    with torch.inference_mode():
        start = time.perf_counter()
        out = []
        for i in range(0, len(files), batch):
            images = pil[i : i + batch] if decoded else [Image.open(p).convert("RGB") for p in files[i : i + batch]]
            out.append(embed(processor(images=images, return_tensors="pt")["pixel_values"]))
        seconds = time.perf_counter() - start
    return len(files) / seconds, torch.cat(out).float().numpy()


def torch_side(model_name, weights, images, batch):
    """The PyTorch side once from files, its network loaded from `weights` (run alone in a child
    Python for its peak RSS); returns its images/s."""
    _, processor, embed = MODELS[model_name][1](pathlib.Path(weights))
    return torch_embed(embed, processor, sorted(pathlib.Path(images).glob("*.png")), batch, decoded=False)[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=64)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bin", default="target/release/culturelens")
    ap.add_argument("--work", default="/tmp/culturelens-bench")
    ap.add_argument("--model", choices=list(MODELS), default="clip-b32")
    args = ap.parse_args()

    work = pathlib.Path(args.work)
    weights, imgs = work / args.model, work / "images"
    imgs.mkdir(parents=True, exist_ok=True)
    save, load = MODELS[args.model]
    save(weights, args.bin)
    _, processor, embed = load(weights)
    rng = np.random.default_rng(0)
    for old in imgs.glob("*.png"):  # a previous run's images, possibly more of them
        old.unlink()
    for i in range(args.images):
        Image.fromarray(rng.integers(0, 256, (512, 512, 3), dtype=np.uint8)).save(imgs / f"{i:05d}.png")

    files = sorted(imgs.glob("*.png"))
    with torch.inference_mode():
        embed(processor(images=[Image.open(files[0]).convert("RGB")], return_tensors="pt")["pixel_values"])  # warm-up

    def torch_rate(decoded: bool) -> tuple[float, np.ndarray]:
        return torch_embed(embed, processor, files, args.batch, decoded)

    out = work / "out.npy"
    peaks = []

    def ours_rate() -> tuple[float, float]:
        """culturelens's images/s in the embedding loop, and the command's total seconds."""
        run = peak_rss.run(
            [args.bin, "embed", "--images", imgs, "--weights", weights, "--out", out, "--batch", args.batch]
        )
        peaks.append(run.peak_kib)
        loop = re.search(r"\(([\d.]+) images/s\)", run.stderr)
        if loop is None:
            sys.exit(f"culturelens embed printed no '(N images/s)' rate; its stderr was:\n{run.stderr}")
        return float(loop.group(1)), run.seconds

    rounds = []
    for r in range(args.rounds):
        files_ips, theirs = torch_rate(decoded=False)
        decoded_ips, _ = torch_rate(decoded=True)
        ours_ips, total_s = ours_rate()
        rounds.append((files_ips, decoded_ips, ours_ips))
        print(
            f"round {r + 1}: torch from files {files_ips:.1f}, decoded {decoded_ips:.1f}; culturelens {ours_ips:.1f} "
            f"images/s ({total_s:.1f} s in all); ratio {ours_ips / files_ips:.2f}x ({ours_ips / decoded_ips:.2f}x vs decoded)"
        )

    ours = np.load(out)
    if ours.shape != theirs.shape:
        sys.exit(f"culturelens wrote embeddings of shape {ours.shape}, PyTorch computed {theirs.shape}")
    diff = float(np.abs(ours - theirs).max())
    if not diff <= 1e-3:
        sys.exit(f"culturelens and PyTorch embeddings differ by {diff:.2e} (max abs): not the same computation")
    files_ips, decoded_ips, ours_ips = (float(np.median(c)) for c in zip(*rounds))
    ratios = [o / f for f, _, o in rounds]

    print(
        f"{args.model}, torch {torch.__version__}, {torch.get_num_threads()} threads, medians of {args.rounds} rounds: "
        f"{files_ips:.1f} images/s from files, {decoded_ips:.1f} decoded"
    )
    print(f"culturelens embed (cpu/flex): {ours_ips:.1f} images/s in the embedding loop")
    print(
        f"ratio culturelens / torch from files: {np.median(ratios):.2f}x (rounds {', '.join(f'{x:.2f}' for x in ratios)}); "
        f"vs decoded: {ours_ips / decoded_ips:.2f}x"
    )
    print(f"embeddings agree: max abs difference {diff:.2e} over {ours.shape[0]} x {ours.shape[1]}")
    _, peer = peak_rss.call(__file__, "torch_side", args.model, str(weights), str(imgs), args.batch)
    print(f"{peak_rss.line(max(peaks), f'torch from files ({args.model} loaded)', peer.peak_kib)} "
          "(whole command / a fresh Python's whole run)")


if __name__ == "__main__":
    main()
