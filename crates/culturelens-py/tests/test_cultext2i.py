"""culturelens.cultext2i against `culturelens cultext2i` (tests/cultext2i_cli.rs's hand-worked
example and a random table): equal to the last bit, the report and the intervals included."""

import json

import numpy as np
import pandas as pd
import pytest

import culturelens
from test_sos import FLOAT_COLUMNS, assert_same_as_cli

TEXT_META = (
    "kind,label,language\nnationality,german,\nnationality,spanish,\n"
    "dimension,modern,\nconcept,city,en\nconcept,city,de\n"
)
IMAGE_META = (
    "model,language,concept,template,nationality\nm,de,city,t,german\nm,de,city,t,german\nm,es,city,t,spanish\n"
)
VQA = (
    "model,language,concept,template,question,answer,nationality\n"
    "m,de,city,t,nationality,Germany,germany\nm,de,city,t,nationality, germany ,germany\n"
    "m,de,city,t,nationality,Spain,germany\n"
    "m,es,city,t,nationality,Spain,spain\nm,es,city,t,nationality,Mexico,spain\n"
    "m,de,city,t,modern|ancient,modern,\nm,de,city,t,modern|ancient,modern,\n"
    "m,de,city,t,modern|ancient,ancient,\nm,de,food,t,modern|ancient,ancient,\n"
    "m,de,house,t,modern|ancient,Modern,\n"
)
IMAGES = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 4.0]], dtype=np.float32)
TEXTS = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [1.0, 0.0], [0.0, 1.0]], dtype=np.float32)


@pytest.fixture(autouse=True)
def cultext2i_columns():
    """The float columns of the hand-worked example's output (with intervals)."""
    names = {"na", "na_acc", "cd", "dp_modern", "dp_x", "dp_y"}
    added = ({n + s for n in names for s in ("", "_lo", "_hi")}) - FLOAT_COLUMNS
    FLOAT_COLUMNS.update(added)
    yield
    FLOAT_COLUMNS.difference_update(added)


def write_inputs(tmp_path, images, image_meta, texts, text_meta):
    paths = {name: tmp_path / name for name in ("i.npy", "im.csv", "t.npy", "tm.csv")}
    np.save(paths["i.npy"], images)
    np.save(paths["t.npy"], texts)
    for name, meta in (("im.csv", image_meta), ("tm.csv", text_meta)):
        if isinstance(meta, str):
            paths[name].write_text(meta)
        else:
            meta.to_csv(paths[name], index=False)
    return paths


def run_cli(cli, paths, out, *flags):
    return cli(
        "cultext2i", "--image-embeddings", paths["i.npy"], "--image-meta", paths["im.csv"], "--text-embeddings", paths["t.npy"],
        "--text-meta", paths["tm.csv"], "--out", out, *flags,
    )


def read(path):
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def test_by_hand_with_report_and_vqa_equals_the_cli(cli, tmp_path):
    paths = write_inputs(tmp_path, IMAGES, IMAGE_META, TEXTS, TEXT_META)
    (tmp_path / "vqa.csv").write_text(VQA)
    out, report = tmp_path / "out.csv", tmp_path / "r.json"
    done = run_cli(cli, paths, out, "--report", report, "--vqa", tmp_path / "vqa.csv")
    assert done.returncode == 0, done.stderr
    frame, got = culturelens.cultext2i(
        IMAGES, read(paths["im.csv"]), TEXTS, read(paths["tm.csv"]), report=True,
        vqa=read(tmp_path / "vqa.csv"),
    )
    assert_same_as_cli(frame, out)
    assert got == json.loads(report.read_text())
    # The hand values of tests/cultext2i_cli.rs: NA(de) = 1/2, NA(es) = 1/(1 + e^-0.2).
    np.testing.assert_allclose(frame["na"], [0.5, 1 / (1 + np.exp(-0.2))], rtol=0, atol=1e-6)
    assert frame["na_acc"].tolist() == [0.5, 1.0]
    assert got["confusion"]["m"]["counts"] == [[1, 1], [0, 1]]
    # Without report: the DataFrame alone, the same one; T = 100 as --temperature 100.
    alone = culturelens.cultext2i(IMAGES, read(paths["im.csv"]), TEXTS, read(paths["tm.csv"]))
    pd.testing.assert_frame_equal(alone, frame, check_exact=True)
    assert run_cli(cli, paths, out, "--temperature", "100").returncode == 0
    assert_same_as_cli(culturelens.cultext2i(IMAGES, read(paths["im.csv"]), TEXTS, read(paths["tm.csv"]), temperature=100), out)


def random_inputs(seed=34, n=600, d=24):
    rng = np.random.default_rng(seed)
    nationalities = ["german", "spanish", "japanese", "nigerian"]
    concepts = ["city", "food", "house"]
    text_meta = pd.DataFrame(
        {"kind": ["nationality"] * 4 + ["dimension"] * 2 + ["concept"] * 6,
         "label": nationalities + ["x", "y"] + concepts * 2,
         "language": [""] * 6 + ["en"] * 3 + ["de"] * 3}
    )
    image_meta = pd.DataFrame(
        {"model": rng.choice(["sd", "alt"], n), "language": rng.choice(["de", "en", "ja"], n),
         "concept": rng.choice(concepts, n), "template": rng.choice(["t0", "t1"], n),
         "nationality": rng.choice(nationalities, n)}
    )
    images = rng.standard_normal((n, d)).astype(np.float32)
    texts = rng.standard_normal((len(text_meta), d)).astype(np.float32)
    return images, image_meta, texts, text_meta


@pytest.mark.parametrize("method", ["bca", "percentile"])
def test_random_table_with_intervals_equals_the_cli(cli, tmp_path, method):
    images, image_meta, texts, text_meta = random_inputs()
    paths = write_inputs(tmp_path, images, image_meta, texts, text_meta)
    out = tmp_path / "out.csv"
    flags = ("--ci", "0.9", "--bootstrap", "200", "--ci-method", method, "--seed", "7", "--temperature", "50")
    done = run_cli(cli, paths, out, *flags)
    assert done.returncode == 0, done.stderr
    frame = culturelens.cultext2i(
        images, image_meta, texts, text_meta, temperature=50, ci=0.9, bootstrap=200, ci_method=method, seed=7
    )
    assert "na_acc_lo" in frame.columns and len(frame) == 2 * 3 * 3 * 2
    assert_same_as_cli(frame, out)
    # Another seed changes the intervals, not the means.
    other = culturelens.cultext2i(images, image_meta, texts, text_meta, temperature=50, ci=0.9, bootstrap=200,
                                  ci_method=method, seed=8)
    assert other["na"].equals(frame["na"]) and not other["na_lo"].equals(frame["na_lo"])


def test_bad_input_as_the_cli(cli, tmp_path):
    out = tmp_path / "out.csv"
    unknown = TEXT_META.replace("dimension,modern", "dimensions,modern")
    paths = write_inputs(tmp_path, IMAGES, IMAGE_META, TEXTS, unknown)
    done = run_cli(cli, paths, out)
    assert done.returncode != 0 and not out.exists()
    with pytest.raises(ValueError) as err:
        culturelens.cultext2i(IMAGES, read(paths["im.csv"]), TEXTS, read(paths["tm.csv"]))
    assert str(err.value).startswith("row 2, column kind: unknown text kind")
    assert done.stderr.strip().endswith(str(err.value).split(": ", 1)[1]), done.stderr
    french = IMAGE_META.replace("m,de,city,t,german\nm,es", "m,de,city,t,french\nm,es")
    paths = write_inputs(tmp_path, IMAGES, french, TEXTS, TEXT_META)
    done = run_cli(cli, paths, out)
    assert done.returncode != 0
    with pytest.raises(ValueError) as err:
        culturelens.cultext2i(IMAGES, read(paths["im.csv"]), TEXTS, read(paths["tm.csv"]))
    assert str(err.value).startswith('row 1, column nationality: nationality "french" has no nationality text')
    assert "line 3 (data row 1), column nationality" in done.stderr
    meta, texts = read(paths["im.csv"]), read(paths["tm.csv"])
    with pytest.raises(ValueError, match=r"^image_meta: row-count mismatch: the metadata has 3 data rows but images has 2 embeddings"):
        culturelens.cultext2i(IMAGES[:2], meta, TEXTS, texts)
    with pytest.raises(ValueError, match=r"^images has 2-dimensional embeddings but texts has 3"):
        culturelens.cultext2i(IMAGES, meta, np.ones((5, 3), np.float32), texts)
    with pytest.raises(ValueError, match=r"^texts: row 1: zero-norm embedding"):
        culturelens.cultext2i(IMAGES, meta, TEXTS * np.array([[1], [0], [1], [1], [1]], np.float32), texts)
    with pytest.raises(ValueError, match=r"^temperature must be a positive number"):
        culturelens.cultext2i(IMAGES, meta, TEXTS, texts, temperature=0)
    with pytest.raises(ValueError, match=r"^ci: a confidence level lies strictly between 0 and 1"):
        culturelens.cultext2i(IMAGES, meta, TEXTS, texts, ci=1.5)
    with pytest.raises(ValueError, match=r"^bootstrap: the bootstrap needs at least 1 resample"):
        culturelens.cultext2i(IMAGES, meta, TEXTS, texts, ci=0.9, bootstrap=0)
    with pytest.raises(TypeError, match=r"^images: expected a 2-D numpy array"):
        culturelens.cultext2i(IMAGES[0], meta, TEXTS, texts)
