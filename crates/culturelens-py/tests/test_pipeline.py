"""`culturelens.Pipeline` against `culturelens generate` on the committed tiny pipelines: the same
prompts, seed and settings give the CLI's PNG pixels bit for bit (SD 1.x with two images per
prompt, a negative prompt, another scheduler and a batch of two; FLUX-schnell), and bad input
raises the CLI's message."""

import csv

import numpy as np
import pytest
from PIL import Image

import culturelens
from conftest import ROOT

DIFFUSION = ROOT / "tests" / "fixtures" / "diffusion"
PROMPTS = ["a photo of the food in china", "a street in japan", "a wedding"]


def cli_images(cli, tmp_path, folder, flags):
    """The images `culturelens generate` writes for PROMPTS with `flags`, in manifest order."""
    table = tmp_path / "prompts.csv"
    with open(table, "w", newline="") as f:
        csv.writer(f).writerows([["prompt"], *[[p] for p in PROMPTS]])
    out = tmp_path / "out"
    done = cli("generate", "--pipeline", folder, "--prompts", table, "--out", out, *flags)
    assert done.returncode == 0, done.stderr
    with open(out / "manifest.csv", newline="") as f:
        names = [row["image"] for row in csv.DictReader(f)]
    return [np.asarray(Image.open(out / name)) for name in names]


CASES = [
    ("tiny-sd1", ["--steps", "2", "--height", "16", "--width", "16", "--seed", "3", "--images-per-prompt", "2"],
     dict(steps=2, height=16, width=16, seed=3, images_per_prompt=2)),
    ("tiny-sd1", ["--steps", "3", "--height", "24", "--width", "16", "--negative-prompt", "blurry", "--scheduler", "ddim",
                  "--guidance", "5", "--batch", "2"],
     dict(steps=3, height=24, width=16, negative_prompt="blurry", scheduler="ddim", guidance=5.0, batch=2)),
    ("tiny-flux-schnell", ["--steps", "2", "--height", "16", "--width", "16", "--seed", "7"],
     dict(steps=2, height=16, width=16, seed=7)),
]


@pytest.mark.parametrize("folder,flags,kwargs", CASES, ids=["sd1-two-images", "sd1-ddim-negative-batch", "flux-schnell"])
def test_images_equal_the_cli_pngs(cli, tmp_path, folder, flags, kwargs):
    expected = cli_images(cli, tmp_path, DIFFUSION / folder, flags)
    pipeline = culturelens.Pipeline.from_pretrained(DIFFUSION / folder)
    images = pipeline.generate(PROMPTS, **kwargs)
    assert len(images) == len(expected) == len(PROMPTS) * kwargs.get("images_per_prompt", 1)
    worst = 0
    for i, (image, want) in enumerate(zip(images, expected)):
        assert image.mode == "RGB" and image.size == (want.shape[1], want.shape[0]), i
        got = np.asarray(image)
        worst = max(worst, int(np.abs(got.astype(int) - want.astype(int)).max()))
    print(f"{folder} {' '.join(flags)}: {len(images)} images, max |pixel difference| from the CLI's PNGs = {worst}")
    assert worst == 0
    # The images differ between prompts (the check above is not of blank images).
    assert not np.array_equal(np.asarray(images[0]), np.asarray(images[-1]))


@pytest.fixture(scope="module")
def sd1():
    return culturelens.Pipeline.from_pretrained(DIFFUSION / "tiny-sd1")


def cli_error(cli, tmp_path, folder, *flags):
    done = cli("generate", "--pipeline", folder, "--prompt", "a street", "--out", tmp_path / "out", *flags)
    assert done.returncode != 0
    return done.stderr.strip().removeprefix("error: ")


def test_bad_input_raises_the_cli_message(cli, tmp_path, sd1):
    folder = DIFFUSION / "tiny-sd1"
    for flags, kwargs in [
        (["--height", "20", "--width", "16"], dict(height=20, width=16)),
        (["--height", "16", "--width", "16", "--scheduler", "heun"], dict(height=16, width=16, scheduler="heun")),
        (["--height", "16", "--width", "16", "--scheduler", "flow-euler"], dict(height=16, width=16, scheduler="flow-euler")),
        (["--height", "16", "--width", "16", "--batch", "0"], dict(height=16, width=16, batch=0)),
    ]:
        message = cli_error(cli, tmp_path, folder, "--steps", "1", *flags)
        with pytest.raises(ValueError) as raised:
            sd1.generate("a street", steps=1, **kwargs)
        print(f"{flags}: {raised.value}")
        assert str(raised.value) == message, flags
    missing = tmp_path / "no-such-pipeline"
    message = cli_error(cli, tmp_path, missing, "--steps", "1")
    with pytest.raises(ValueError) as raised:
        culturelens.Pipeline.from_pretrained(missing)
    assert str(raised.value) == message
    with pytest.raises(ValueError, match="CPU backend only"):
        culturelens.Pipeline.from_pretrained(folder, device="wgpu")
