"""culturelens.Encoder against `culturelens embed` / `embed-text` on the tiny random-weight encoders
of the CLI tests (tests/fixtures/encoders, scripts/fixtures/make_encoders.py): the same images and
prompts give the command's rows to the last bit, and bad folders and images raise the command's
messages."""

import csv

import numpy as np
import pytest
from PIL import Image

import culturelens
from conftest import ROOT

ENCODERS = ROOT / "tests/fixtures/encoders"
IMAGES = sorted((ENCODERS / "images").iterdir())
# Every fixture image and Pillow's palette-with-transparency and bilevel modes: as PIL images
# they embed as their files do.
PIL_IMAGES = IMAGES + [ENCODERS / "pillow_modes/p_palette_trns.png", ENCODERS / "pillow_modes/q_bilevel.png"]
PROMPTS = ["a photo of a cat", "ein Foto einer Katze, die schläft", "猫の写真", "many words " * 60]


def cli_rows(cli, tmp_path, args, name="out"):
    out = tmp_path / f"{name}.npy"
    done = cli(*args, "--out", out)
    assert done.returncode == 0, done.stderr
    rows = np.load(out)
    assert rows.dtype == np.float32
    return rows


def same_bits(a, b):
    assert a.dtype == np.float32 and b.dtype == np.float32 and a.shape == b.shape, (a.dtype, a.shape, b.shape)
    diff = np.abs(a.astype(np.float64) - b.astype(np.float64)).max()
    print(f"max |python - cli| = {diff:.3e}")
    return np.array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("model,batch", [("clip", 2), ("siglip", 16), ("dinov2", 1), ("dinov2_reg", 3), ("open_clip", 5)])
def test_embed_images_equal_the_cli(cli, tmp_path, model, batch):
    want = cli_rows(cli, tmp_path, ["embed", "--images", ENCODERS / "images", "--weights", ENCODERS / model,
                                    "--batch", batch])
    encoder = culturelens.Encoder.from_pretrained(ENCODERS / model)
    got = encoder.embed_images(IMAGES, batch=batch)
    assert got.shape == (len(IMAGES), want.shape[1])
    assert same_bits(got, want)
    # str paths and a single-batch run give the same rows
    assert same_bits(encoder.embed_images([str(p) for p in reversed(IMAGES)])[::-1].copy(), want)


@pytest.mark.parametrize("model", ["clip", "open_clip", "siglip"])
def test_pil_images_and_arrays_equal_the_files(cli, tmp_path, model):
    manifest = tmp_path / "m.csv"
    manifest.write_text("image\n" + "".join(f"{p}\n" for p in PIL_IMAGES))
    want = cli_rows(cli, tmp_path, ["embed", "--images", manifest, "--weights", ENCODERS / model])
    encoder = culturelens.Encoder.from_pretrained(ENCODERS / model, device="cpu", precision="f32")
    pil = [Image.open(p) for p in PIL_IMAGES]
    assert [im.mode for im in pil] == ["RGB", "L", "RGBA", "RGB", "RGB", "P", "1"]
    assert same_bits(encoder.embed_images(pil, batch=2), want)
    # Arrays of the RGB and RGBA images (not the palette ones, which are resampled differently),
    # C-contiguous or not.
    arrays = [np.asarray(im.convert("RGBA" if im.mode == "RGBA" else "RGB")) for im in pil[:5]]
    assert same_bits(encoder.embed_images(arrays), want[:5])
    assert same_bits(encoder.embed_images([np.asfortranarray(a) for a in arrays]), want[:5])
    # The alpha matters: the RGBA image with its alpha dropped is not the file's row.
    assert not same_bits(encoder.embed_images([arrays[2][:, :, :3]]), want[2:3])


def test_embed_texts_equal_the_cli(cli, tmp_path):
    prompts = tmp_path / "prompts.csv"
    with open(prompts, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["prompt"])
        w.writerows([p] for p in PROMPTS)
    for model, batch in [("clip", 2), ("siglip", 64), ("siglip", 1)]:
        want = cli_rows(cli, tmp_path, ["embed-text", "--prompts", prompts, "--weights", ENCODERS / model,
                                        "--batch", batch], name=model)
        got = culturelens.Encoder.from_pretrained(ENCODERS / model).embed_texts(PROMPTS, batch=batch)
        assert same_bits(got, want), model


def cli_error(done):
    assert done.returncode != 0
    lines = [l for l in done.stderr.splitlines() if l.startswith("error: ")]
    assert len(lines) == 1, done.stderr
    return lines[0][len("error: "):]


def test_bad_folders_raise_the_cli_message(cli, tmp_path):
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "config.json").write_bytes((ENCODERS / "clip/config.json").read_bytes())
    for folder in [tmp_path / "w", tmp_path / "missing"]:
        done = cli("embed", "--images", ENCODERS / "images", "--weights", folder, "--out", tmp_path / "x.npy")
        with pytest.raises(ValueError) as e:
            culturelens.Encoder.from_pretrained(folder)
        assert str(e.value) == cli_error(done)
    assert "model.safetensors" in str(e.value) or "missing" in str(e.value)
    # A folder without a tokenizer cannot embed text; one without preprocessing cannot embed images.
    prompts = tmp_path / "p.txt"
    prompts.write_text("a cat\n")
    done = cli("embed-text", "--prompts", prompts, "--weights", ENCODERS / "dinov2", "--out", tmp_path / "t.npy")
    with pytest.raises(ValueError) as e:
        culturelens.Encoder.from_pretrained(ENCODERS / "dinov2").embed_texts(["a cat"])
    assert str(e.value) == cli_error(done) and "tokenizer.json" in str(e.value)


def test_bad_images_raise_the_cli_message(cli, tmp_path):
    photo = (ENCODERS / "images/d_photo.jpg").read_bytes()
    (tmp_path / "imgs").mkdir()
    cut = tmp_path / "imgs" / "cut.jpg"
    cut.write_bytes(photo[:1200])
    junk = tmp_path / "imgs" / "junk.png"
    junk.write_bytes(b"\x89PNG not really")
    done = cli("embed", "--images", tmp_path / "imgs", "--weights", ENCODERS / "clip", "--out", tmp_path / "x.npy")
    assert done.returncode != 0
    encoder = culturelens.Encoder.from_pretrained(ENCODERS / "clip")
    with pytest.raises(ValueError) as e:
        encoder.embed_images([IMAGES[0], cut, junk, tmp_path / "nothing.png"])
    lines = str(e.value).splitlines()
    assert lines[0] == "3 image(s) could not be embedded:"
    for line in lines[1:3]:
        assert line in done.stderr.splitlines(), (line, done.stderr)
    assert f"  {cut}: cannot decode image: image file is truncated" in lines
    assert lines[3].startswith(f"  {tmp_path / 'nothing.png'}: ")


def test_bad_arguments():
    encoder = culturelens.Encoder.from_pretrained(ENCODERS / "clip")
    # The CLI's `--precision` refusal; the CI wheel has no wgpu (the `gpu` feature) and says how to build one.
    with pytest.raises(ValueError, match=r"^--precision f16 runs on a GPU \(--device wgpu or cuda\); the CPU backend computes in f32"):
        culturelens.Encoder.from_pretrained(ENCODERS / "clip", precision="f16")
    with pytest.raises(ValueError, match=r"^precision='f64': expected"):
        culturelens.Encoder.from_pretrained(ENCODERS / "clip", precision="f64")
    with pytest.raises(ValueError, match=r"^device='wgpu': this wheel was built without the GPU backend .*--features gpu"):
        culturelens.Encoder.from_pretrained(ENCODERS / "clip", device="wgpu")
    with pytest.raises(ValueError, match=r"^device='tpu': expected \"cpu\" or \"wgpu\""):
        culturelens.Encoder.from_pretrained(ENCODERS / "clip", device="tpu")
    with pytest.raises(ValueError, match=r"^batch must be at least 1"):
        encoder.embed_texts(["a"], batch=0)
    with pytest.raises(ValueError, match=r"^texts: nothing to embed"):
        encoder.embed_texts([])
    with pytest.raises(TypeError, match=r"^texts: expected a sequence of str, got str"):
        encoder.embed_texts("a cat")
    with pytest.raises(ValueError, match=r"^texts\[1\]: empty value: every prompt needs one"):
        encoder.embed_texts(["a", ""])
    with pytest.raises(TypeError, match=r"^texts\[1\]: expected str, got int"):
        encoder.embed_texts(["a", 1])
    with pytest.raises(TypeError, match=r"^images\[0\]: expected a uint8 array of shape \(height, width, 3 or 4\), got float32 \(2, 2, 3\)"):
        encoder.embed_images([np.zeros((2, 2, 3), np.float32)])
    with pytest.raises(TypeError, match=r"^images\[1\]: expected a uint8 array of shape \(height, width, 3 or 4\), got uint8 \(2, 2\)"):
        encoder.embed_images([np.zeros((2, 2, 3), np.uint8), np.zeros((2, 2), np.uint8)])
    with pytest.raises(ValueError, match=r"^images\[0\]: 0 x 2 x 3 pixels, expected height x width x 3 \(RGB\) or 4"):
        encoder.embed_images([np.zeros((0, 2, 3), np.uint8)])
    with pytest.raises(TypeError, match=r"^images\[1\]: mixes paths and in-memory images"):
        encoder.embed_images([IMAGES[0], np.zeros((2, 2, 3), np.uint8)])
    with pytest.raises(TypeError, match=r"^images\[0\]: expected a path, a PIL image or a uint8 array, got int"):
        encoder.embed_images([3])
