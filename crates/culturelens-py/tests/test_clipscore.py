"""culturelens.clipscore against `culturelens clipscore` on the tiny CLIP of the encoder fixtures
(tests/fixtures/encoders/clip): the embeddings of `embed` and `embed-text` scored in Python equal
the command's cells to the last bit."""

import numpy as np
import pandas as pd
import pytest

import culturelens
from conftest import ROOT

CLIP = ROOT / "tests/fixtures/encoders/clip"
IMAGES = ROOT / "tests/fixtures/encoders/images"


def test_equals_the_cli_on_the_tiny_clip(cli, tmp_path):
    names = sorted(p.name for p in IMAGES.iterdir())
    cultures = ["German", "Japanese", "Nigerian", "German", "Peruvian"][: len(names)]
    manifest = pd.DataFrame({"image": [str(IMAGES / n) for n in names], "surface": cultures,
                             "semantic": cultures[::-1]})
    manifest.to_csv(tmp_path / "m.csv", index=False)
    out = tmp_path / "scores.csv"
    done = cli("clipscore", "--images", tmp_path / "m.csv", "--caption-cols", "surface,semantic", "--weights", CLIP,
               "--template", "A photo of a {} person", "--w", "100", "--out", out)
    assert done.returncode == 0, done.stderr
    done = cli("embed", "--images", tmp_path / "m.csv", "--weights", CLIP, "--out", tmp_path / "i.npy")
    assert done.returncode == 0, done.stderr
    captions = {}
    for col in ("surface", "semantic"):
        prompts = pd.DataFrame({"prompt": [f"A photo of a {c} person" for c in manifest[col]]})
        prompts.to_csv(tmp_path / f"{col}.csv", index=False)
        done = cli("embed-text", "--prompts", tmp_path / f"{col}.csv", "--weights", CLIP, "--out", tmp_path / f"{col}.npy")
        assert done.returncode == 0, done.stderr
        captions[col] = np.load(tmp_path / f"{col}.npy")
    images = np.load(tmp_path / "i.npy")
    frame = culturelens.clipscore(images, captions, w=100)
    cli_frame = pd.read_csv(out)
    assert list(frame.columns) == ["surface_cos", "surface_clipscore", "semantic_cos", "semantic_clipscore"]
    for name in frame.columns:
        assert np.array_equal(frame[name].to_numpy().view(np.uint64), cli_frame[name].to_numpy().view(np.uint64)), name
    assert (frame["surface_cos"] != frame["semantic_cos"]).any()
    # A bare caption array: columns cos, clipscore; w = 2.5 by default.
    bare = culturelens.clipscore(images, captions["surface"])
    assert list(bare.columns) == ["cos", "clipscore"] and bare["cos"].equals(frame["surface_cos"])
    np.testing.assert_allclose(bare["clipscore"], 2.5 * np.maximum(bare["cos"], 0), rtol=1e-15, atol=0)


def test_bad_input():
    a = np.eye(3, dtype=np.float32)
    with pytest.raises(ValueError, match=r"^captions: 2 x 3 embeddings for 3 x 3 image embeddings"):
        culturelens.clipscore(a, a[:2])
    z = a.copy()
    z[1] = 0
    with pytest.raises(ValueError, match=r"^captions: row 1: zero-norm embedding"):
        culturelens.clipscore(a, z)
    with pytest.raises(TypeError, match=r"^images: expected a 2-D numpy array"):
        culturelens.clipscore(a[0], a)
