"""`culturelens.Pipeline` against `culturelens generate` on the committed tiny pipelines: the same
prompts, seed and settings give the CLI's PNG pixels bit for bit (SD 1.x with two images per
prompt, a negative prompt, another scheduler and a batch of two; FLUX-schnell), and so do the
CLI's other options (given latents, a DiffusionLens text layer, T5's max sequence length,
attention slicing, offloading, Kandinsky 2.1's prior settings and latents); bad input raises the
CLI's message."""

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
    assert len(images) == len(PROMPTS) * kwargs.get("images_per_prompt", 1)
    # Also: the images differ between prompts (the check is not of blank images).
    assert_images_equal(images, expected, f"{folder} {' '.join(flags)}")


def assert_images_equal(images, expected, label):
    """`images` (PIL) have the pixels of the CLI's PNGs `expected`; prints the worst difference."""
    assert len(images) == len(expected), label
    worst = 0
    for i, (image, want) in enumerate(zip(images, expected)):
        assert image.mode == "RGB" and image.size == (want.shape[1], want.shape[0]), i
        worst = max(worst, int(np.abs(np.asarray(image).astype(int) - want.astype(int)).max()))
    print(f"{label}: {len(images)} images, max |pixel difference| from the CLI's PNGs = {worst}")
    assert worst == 0
    assert not np.array_equal(np.asarray(images[0]), np.asarray(images[-1]))


def given_array(tmp_path, name, shape, seed):
    """A float32 array of `shape` and the .npy file holding it (for the CLI's flag)."""
    array = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    path = tmp_path / f"{name}.npy"
    np.save(path, array)
    return array, path


# Each option of `generate` the Pipeline takes: the folder, the flags, from_pretrained's and
# generate's keyword arguments, and arrays given both ways ({name: shape}: `--name FILE.npy`,
# `name=array`).
OPTIONS = [
    ("latents", "tiny-sd1", ["--steps", "2", "--height", "16", "--width", "16", "--images-per-prompt", "2"],
     {}, dict(steps=2, height=16, width=16, images_per_prompt=2), {"latents": (2, 4, 8, 8)}),
    ("text-layer", "tiny-sd1", ["--steps", "2", "--height", "16", "--width", "16", "--text-layer", "1"],
     {}, dict(steps=2, height=16, width=16, text_layer=1), {}),
    ("attention-slice-offload", "tiny-sd1",
     ["--steps", "2", "--height", "16", "--width", "16", "--attention-slice", "max", "--offload"],
     dict(attention_slice="max", offload=True), dict(steps=2, height=16, width=16), {}),
    ("max-sequence-length", "tiny-flux-schnell",
     ["--steps", "2", "--height", "16", "--width", "16", "--max-sequence-length", "4"],
     dict(max_sequence_length=4), dict(steps=2, height=16, width=16), {}),
    ("kandinsky21-prior", "tiny-kandinsky21",
     ["--steps", "2", "--height", "16", "--width", "16", "--seed", "6", "--prior-steps", "2",
      "--prior-guidance", "2.5"],
     {}, dict(steps=2, height=16, width=16, seed=6, prior_steps=2, prior_guidance=2.5), {}),
    ("kandinsky21-latents", "tiny-kandinsky21",
     ["--steps", "2", "--height", "16", "--width", "16", "--seed", "6", "--prior-steps", "2",
      "--negative-prompt", "blurry"],
     {}, dict(steps=2, height=16, width=16, seed=6, prior_steps=2, negative_prompt="blurry"),
     {"latents": (1, 4, 8, 8), "prior_latents": (2, 8)}),
]


@pytest.mark.parametrize("name,folder,flags,load,kwargs,arrays", OPTIONS, ids=[o[0] for o in OPTIONS])
def test_options_equal_the_cli_pngs(cli, tmp_path, name, folder, flags, load, kwargs, arrays):
    flags, kwargs = list(flags), dict(kwargs)
    for seed, (key, shape) in enumerate(arrays.items()):
        array, path = given_array(tmp_path, key, shape, seed)
        flags += ["--" + key.replace("_", "-"), path]
        kwargs[key] = array
    expected = cli_images(cli, tmp_path, DIFFUSION / folder, flags)
    pipeline = culturelens.Pipeline.from_pretrained(DIFFUSION / folder, **load)
    images = pipeline.generate(PROMPTS, **kwargs)
    assert_images_equal(images, expected, f"{name}: {folder} {' '.join(map(str, flags))}")


@pytest.fixture(scope="module")
def sd1():
    return culturelens.Pipeline.from_pretrained(DIFFUSION / "tiny-sd1")


def cli_error(cli, tmp_path, folder, *flags):
    done = cli("generate", "--pipeline", folder, "--prompt", "a street", "--out", tmp_path / "out", *flags)
    assert done.returncode != 0
    # The error is the last line (after `loaded the pipeline …` where it comes after loading).
    return done.stderr.strip().splitlines()[-1].removeprefix("error: ")


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
    # The CI wheel is built without the `gpu` feature: wgpu is refused, naming the GPU wheel's build.
    with pytest.raises(ValueError, match=r"^device='wgpu': this wheel was built without the GPU backend .*--features gpu"):
        culturelens.Pipeline.from_pretrained(folder, device="wgpu")
    with pytest.raises(ValueError, match=r"^--precision f16 runs on a GPU"):
        culturelens.Pipeline.from_pretrained(folder, precision="f16")


def test_bad_options_raise_the_cli_message(cli, tmp_path, sd1):
    size = ["--steps", "1", "--height", "16", "--width", "16"]
    sd1_dir, k21_dir, flux_dir = (DIFFUSION / f for f in ["tiny-sd1", "tiny-kandinsky21", "tiny-flux-schnell"])
    k21 = culturelens.Pipeline.from_pretrained(k21_dir)
    # Given latents of the wrong shape: the CLI names the file, the Pipeline the argument.
    for pipeline, folder, key, shape in [(sd1, sd1_dir, "latents", (1, 4, 4, 4)), (k21, k21_dir, "prior_latents", (2, 8))]:
        array, path = given_array(tmp_path, key, shape, 0)
        message = cli_error(cli, tmp_path, folder, *size, "--" + key.replace("_", "-"), path)
        with pytest.raises(ValueError) as raised:
            pipeline.generate("a street", steps=1, height=16, width=16, **{key: array})
        print(f"{key} {shape}: {raised.value}")
        assert str(raised.value) == message.replace(str(path), key), key
    for flags, kwargs in [
        (["--text-layer", "4"], dict(text_layer=4)),
        (["--text-layer", "0"], dict(text_layer=0)),
        (["--prior-steps", "2"], dict(prior_steps=2)),
        (["--seed-per-image", "--images-per-prompt", "2"], dict(seed_per_image=True, images_per_prompt=2)),
    ]:
        pipeline, folder = (k21, k21_dir) if "--seed-per-image" in flags else (sd1, sd1_dir)
        message = cli_error(cli, tmp_path, folder, *size, *flags)
        with pytest.raises(ValueError) as raised:
            pipeline.generate("a street", steps=1, height=16, width=16, **kwargs)
        print(f"{flags}: {raised.value}")
        assert str(raised.value) == message, flags
    # The load-time settings.
    for folder, flags, kwargs in [
        (flux_dir, ["--max-sequence-length", "0"], dict(max_sequence_length=0)),
        (sd1_dir, ["--max-sequence-length", "8"], dict(max_sequence_length=8)),
        (sd1_dir, ["--attention-slice", "3"], dict(attention_slice=3)),
        (flux_dir, ["--attention-slice", "max"], dict(attention_slice="max")),
    ]:
        message = cli_error(cli, tmp_path, folder, *size, *flags)
        with pytest.raises(ValueError) as raised:
            culturelens.Pipeline.from_pretrained(folder, **kwargs)
        print(f"{flags}: {raised.value}")
        assert str(raised.value) == message, flags
    # clap words its own refusal; the reason is the same.
    done = cli("generate", "--pipeline", sd1_dir, "--prompt", "a street", "--out", tmp_path / "out", *size,
               "--attention-slice", "x")
    assert done.returncode != 0
    with pytest.raises(ValueError) as raised:
        culturelens.Pipeline.from_pretrained(sd1_dir, attention_slice="x")
    print(f"attention_slice='x': {raised.value}")
    assert str(raised.value).removeprefix("attention_slice: ") in done.stderr
    with pytest.raises(TypeError, match="latents: expected a float32 array, got float64"):
        sd1.generate("a street", steps=1, height=16, width=16, latents=np.zeros((1, 4, 2, 2)))
