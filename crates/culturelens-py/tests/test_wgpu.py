"""The GPU wheel (`--features gpu`) against the CLI's `--device wgpu` on the committed tiny models:
`Encoder` image and text rows and `Pipeline` images equal the command's to the last bit, on
whatever wgpu adapter the machine has (lavapipe in CI). scripts/test_python.sh builds that wheel
as well and runs this file against it with CULTURELENS_WHEEL_GPU=1; against the default wheel
(no wgpu) the file is skipped, and test_encoder.py / test_pipeline.py check the refusal instead.

Burn sets up the wgpu device once per process, so every test here uses f32."""

import csv
import os

import numpy as np
import pytest
from PIL import Image

import culturelens
from conftest import ROOT

pytestmark = pytest.mark.skipif(os.environ.get("CULTURELENS_WHEEL_GPU") != "1",
                                reason="the default wheel has no wgpu (scripts/test_python.sh runs this file against the GPU wheel)")

ENCODERS = ROOT / "tests/fixtures/encoders"
DIFFUSION = ROOT / "tests/fixtures/diffusion"
IMAGES = sorted((ENCODERS / "images").iterdir())
PROMPTS = ["a photo of a cat", "ein Foto einer Katze, die schläft", "猫の写真"]


def cli_rows(cli, out, *args):
    done = cli(*args, "--device", "wgpu", "--out", out)
    assert done.returncode == 0, done.stderr
    rows = np.load(out)
    assert rows.dtype == np.float32
    return rows


def assert_same_bits(got, want, label):
    assert got.dtype == np.float32 and got.shape == want.shape, (label, got.dtype, got.shape, want.shape)
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64)).max()
    print(f"{label}: max |python wgpu - cli wgpu| = {diff:.3e}")
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), label


@pytest.mark.parametrize("model", ["clip", "siglip"])
def test_encoder_on_wgpu_equals_the_cli(cli, tmp_path, model):
    want_images = cli_rows(cli, tmp_path / "i.npy", "embed", "--images", ENCODERS / "images", "--weights", ENCODERS / model)
    prompts = tmp_path / "prompts.csv"
    with open(prompts, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([["prompt"], *[[p] for p in PROMPTS]])
    want_texts = cli_rows(cli, tmp_path / "t.npy", "embed-text", "--prompts", prompts, "--weights", ENCODERS / model)
    encoder = culturelens.Encoder.from_pretrained(ENCODERS / model, device="wgpu", precision="f32")
    assert_same_bits(encoder.embed_images(IMAGES), want_images, f"{model} images")
    assert_same_bits(encoder.embed_texts(PROMPTS), want_texts, f"{model} texts")
    # The device did the work: the CPU's rows are close but not the same bits (measured 5.1e-7
    # apart on lavapipe), so the wgpu rows are no CPU fallback.
    cpu = culturelens.Encoder.from_pretrained(ENCODERS / model, device="cpu").embed_texts(PROMPTS)
    assert np.abs(cpu - want_texts).max() < 1e-4
    assert not np.array_equal(cpu, want_texts)


def test_pipeline_on_wgpu_equals_the_cli_pngs(cli, tmp_path):
    table = tmp_path / "prompts.csv"
    with open(table, "w", newline="") as f:
        csv.writer(f).writerows([["prompt"], *[[p] for p in PROMPTS]])
    out = tmp_path / "out"
    done = cli("generate", "--pipeline", DIFFUSION / "tiny-sd1", "--prompts", table, "--out", out, "--steps", "2",
               "--height", "16", "--width", "16", "--seed", "5", "--device", "wgpu")
    assert done.returncode == 0, done.stderr
    with open(out / "manifest.csv", newline="") as f:
        want = [np.asarray(Image.open(out / row["image"])) for row in csv.DictReader(f)]
    pipeline = culturelens.Pipeline.from_pretrained(DIFFUSION / "tiny-sd1", device="wgpu", precision="f32")
    images = pipeline.generate(PROMPTS, steps=2, height=16, width=16, seed=5)
    assert len(images) == len(want) == len(PROMPTS)
    worst = max(int(np.abs(np.asarray(im).astype(int) - w.astype(int)).max()) for im, w in zip(images, want))
    print(f"tiny-sd1 on wgpu: max pixel difference from the CLI's PNGs {worst}")
    assert worst == 0
    assert not np.array_equal(np.asarray(images[0]), np.asarray(images[1]))
    # Not checked here: that the device did the work. On this tiny pipeline the CPU's 8-bit PNGs
    # are the same as wgpu's (tried), so only the encoder test above tells a CPU fallback apart;
    # both go through the same device set-up (culturelens_models_io::device).
