"""CPU side-by-side: `culturelens embed` vs PyTorch on the same network, same images, images/s
and ratio. Models:
- `clip-b32`: random-weight CLIP ViT-B/32 (OpenAI architecture, 224 px) against transformers'
  `get_image_features`;
- `efficientnet-lite0`: the real ImageNet EfficientNet-Lite0 weights (scripts/fetch_test_weights.sh),
  imported with `culturelens import-weights`, against `efficientnet_lite_pytorch` pooled features.

    /tmp/venv/bin/python scripts/bench/bench_embed_cpu.py [--model clip-b32|efficientnet-lite0] \
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
differences are ~1e-5) or when the command's output has no rate to read.

Requirements: scripts/requirements/torch.txt
"""

import argparse
import pathlib
import re
import subprocess
import sys
import time

import numpy as np
import torch
from PIL import Image
from transformers import CLIPConfig, CLIPImageProcessorPil, CLIPModel


def tensor_of(output):
    return output if isinstance(output, torch.Tensor) else output.pooler_output


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=64)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bin", default="target/release/culturelens")
    ap.add_argument("--work", default="/tmp/culturelens-bench")
    ap.add_argument("--model", choices=["clip-b32", "efficientnet-lite0"], default="clip-b32")
    args = ap.parse_args()

    work = pathlib.Path(args.work)
    weights, imgs = work / args.model, work / "images"
    imgs.mkdir(parents=True, exist_ok=True)
    if args.model == "clip-b32":
        torch.manual_seed(0)
        model = CLIPModel(CLIPConfig()).eval()  # defaults = openai/clip-vit-base-patch32 shapes
        processor = CLIPImageProcessorPil()
        model.save_pretrained(weights)
        processor.save_pretrained(weights)
        # transformers 5 returns the projected features as the output's `pooler_output`, 4.x as a tensor.
        embed = lambda pixels: tensor_of(model.get_image_features(pixel_values=pixels))  # noqa: E731
    else:
        # The network and preprocessing the parity fixture was made with.
        sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "fixtures"))
        from make_encoders_efficientnet_lite0 import PTH, reference_model, reference_processor

        model, processor = reference_model(), reference_processor()
        if not weights.exists():
            subprocess.run(
                [args.bin, "import-weights", "--arch", "efficientnet-lite0", "--pickle", str(PTH), "--out", str(weights)],
                check=True,
            )
        embed = lambda pixels: model.extract_features(pixels).mean(dim=(2, 3))  # noqa: E731
    rng = np.random.default_rng(0)
    for old in imgs.glob("*.png"):  # a previous run's images, possibly more of them
        old.unlink()
    for i in range(args.images):
        Image.fromarray(rng.integers(0, 256, (512, 512, 3), dtype=np.uint8)).save(imgs / f"{i:05d}.png")

    files = sorted(imgs.glob("*.png"))
    with torch.inference_mode():
        embed(processor(images=[Image.open(files[0]).convert("RGB")], return_tensors="pt")["pixel_values"])  # warm-up

    def torch_rate(decoded: bool) -> tuple[float, np.ndarray]:
        """PyTorch's images/s, decoding inside the clock (`decoded=False`) or before it."""
        pil = [Image.open(p).convert("RGB") for p in files] if decoded else None
        with torch.inference_mode():
            start = time.perf_counter()
            out = []
            for i in range(0, len(files), args.batch):
                batch = pil[i : i + args.batch] if decoded else [Image.open(p).convert("RGB") for p in files[i : i + args.batch]]
                out.append(embed(processor(images=batch, return_tensors="pt")["pixel_values"]))
            seconds = time.perf_counter() - start
        return len(files) / seconds, torch.cat(out).float().numpy()

    out = work / "out.npy"

    def ours_rate() -> tuple[float, float]:
        """culturelens's images/s in the embedding loop, and the command's total seconds."""
        start = time.perf_counter()
        run = subprocess.run(
            [args.bin, "embed", "--images", str(imgs), "--weights", str(weights), "--out", str(out), "--batch", str(args.batch)],
            capture_output=True,
            text=True,
            check=True,
        )
        total_s = time.perf_counter() - start
        loop = re.search(r"\(([\d.]+) images/s\)", run.stderr)
        if loop is None:
            sys.exit(f"culturelens embed printed no '(N images/s)' rate; its stderr was:\n{run.stderr}")
        return float(loop.group(1)), total_s

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


if __name__ == "__main__":
    main()
