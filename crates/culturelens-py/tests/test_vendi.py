"""culturelens.vendi against `culturelens vendi --csv` on the same inputs (equal to the last bit), the
closed forms of tests/vendi_cli.rs and numpy's eigenvalues."""

import math

import numpy as np
import pandas as pd
import pytest

import culturelens
from test_sos import assert_same_as_cli

FLOATS = {"q", "vs", "qvs", "qvs_norm", "intdiv"}


def assert_vendi_same_as_cli(frame, path):
    import test_sos

    saved = set(test_sos.FLOAT_COLUMNS)
    test_sos.FLOAT_COLUMNS |= FLOATS
    try:
        assert_same_as_cli(frame, path)
    finally:
        test_sos.FLOAT_COLUMNS.clear()
        test_sos.FLOAT_COLUMNS.update(saved)


def cli_vendi(cli, tmp_path, *args):
    out, csv_path = tmp_path / "v.json", tmp_path / "v.csv"
    done = cli("vendi", *args, "--out", out, "--csv", csv_path)
    assert done.returncode == 0, done.stderr
    return csv_path


def write_table(tmp_path, embeddings, meta=None):
    npy = tmp_path / "e.npy"
    np.save(npy, embeddings)
    args = ["--embeddings", npy]
    if meta is not None:
        meta.to_csv(tmp_path / "m.csv", index=False)
        args += ["--meta", tmp_path / "m.csv"]
    return args


@pytest.mark.parametrize("q", [0.5, 1, 2, math.inf])
@pytest.mark.parametrize("route", ["auto", "kernel"])
def test_cosine_by_group_equals_the_cli(cli, demo, tmp_path, q, route):
    _, embeddings, meta = demo
    meta = meta.copy()
    meta["hps"] = [repr(0.25 + (i % 7) / 8) for i in range(len(meta))]
    args = write_table(tmp_path, embeddings, meta)
    q_text = "inf" if math.isinf(q) else str(q)
    csv_path = cli_vendi(
        cli, tmp_path, *args, "--q", q_text, "--route", route, "--group-by", "model", "--quality-col", "hps", "--intdiv"
    )
    frame = culturelens.vendi(
        embeddings, meta, q=q, group_by="model", quality_col="hps", route=route, intdiv=True
    )
    assert list(frame["model"]) == sorted(set(meta["model"]))
    assert_vendi_same_as_cli(frame, csv_path)


def test_whole_collection_equals_the_cli_and_numpy(cli, demo, tmp_path):
    _, embeddings, _ = demo
    csv_path = cli_vendi(cli, tmp_path, *write_table(tmp_path, embeddings))
    frame = culturelens.vendi(embeddings)
    assert list(frame.columns) == ["n", "q", "vs", "qvs", "qvs_norm"]
    assert_vendi_same_as_cli(frame, csv_path)
    # numpy: eigenvalues of K/N for the L2-normalised rows, VS_1 = exp(-sum p ln p).
    x = embeddings.astype(np.float64)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    p = np.linalg.eigvalsh(x.T @ x / len(x))
    p = p[p > 1e-12]
    want = math.exp(-float(np.sum(p * np.log(p))))
    print(f"|vs - numpy| = {abs(frame['vs'][0] - want):.2e}")
    assert abs(frame["vs"][0] - want) <= 1e-9 * want


README_SPECTRUM = [1.9 / 3.0, 0.1 / 3.0, 1.0 / 3.0]


def test_the_vendi_score_readme_kernel(cli, tmp_path):
    """K = [[1,.9,0],[.9,1,0],[0,0,1]] as cosine rows: VS_1 = 2.1573 (vendi-score's README)."""
    r = math.sqrt(0.19)
    x = np.array([[1, 0, 0], [0.9, r, 0], [0, 0, 1]], dtype=np.float32)
    frame = culturelens.vendi(x)
    want = math.exp(-sum(p * math.log(p) for p in README_SPECTRUM))
    assert abs(frame["vs"][0] - want) <= 1e-7  # the CLI test's bound (f32 data)
    assert_vendi_same_as_cli(frame, cli_vendi(cli, tmp_path, *write_table(tmp_path, x)))


CUBE = pd.DataFrame(
    {"continent": ["A", "A", "E", "E"], "country": ["JP", "CN", "DE", "DE"], "artifact": ["a", "b", "c", "c"]}
)


def test_categorical_kernel(cli, tmp_path):
    CUBE.to_csv(tmp_path / "cube.csv", index=False)
    args = ["--meta", tmp_path / "cube.csv", "--kernel", "categorical", "--columns", "continent,country,artifact"]
    csv_path = cli_vendi(cli, tmp_path, *args, "--kernel-weights", "0.5,0.3,0.2", "--q", "inf", "--intdiv")
    frame = culturelens.vendi(
        meta=CUBE, columns=["continent", "country", "artifact"], weights=[0.5, 0.3, 0.2], q="inf", intdiv=True
    )
    assert abs(frame["vs"][0] - 2.0) < 1e-12 and abs(frame["intdiv"][0] - 0.75) < 1e-12
    assert_vendi_same_as_cli(frame, csv_path)
    with pytest.raises(ValueError, match="sum to 1"):
        culturelens.vendi(meta=CUBE, columns=["continent", "country", "artifact"], weights=[0.5, 0.3, 0.3])
    with pytest.raises(ValueError, match=r"one weight per column \(got 3 columns, 2 weights\)"):
        culturelens.vendi(meta=CUBE, columns=["continent", "country", "artifact"], weights=[0.5, 0.5])


def test_precomputed_kernel(cli, tmp_path):
    k = np.array([[1, 0.9, 0], [0.9, 1, 0], [0, 0, 1]], dtype=np.float64)  # read as f32, as the CLI
    np.save(tmp_path / "k.npy", k.astype(np.float32))
    csv_path = cli_vendi(cli, tmp_path, "--embeddings", tmp_path / "k.npy", "--kernel", "precomputed", "--q", "2")
    frame = culturelens.vendi(k, kernel="precomputed", q=2)
    assert abs(frame["vs"][0] - 9.0 / 4.62) <= 1e-7
    assert_vendi_same_as_cli(frame, csv_path)
    with pytest.raises(ValueError, match="not positive semi-definite"):
        culturelens.vendi(np.array([[1, 2], [2, 1]], dtype=np.float32), kernel="precomputed")
    with pytest.raises(ValueError, match="route applies to cosine and categorical kernels"):
        culturelens.vendi(k, kernel="precomputed", route="dual")
    with pytest.raises(ValueError, match="a kernel matrix must be square, found 3 x 2"):
        culturelens.vendi(k[:, :2], kernel="precomputed")


def test_arguments_that_would_be_ignored_are_errors(demo):
    _, embeddings, meta = demo
    with pytest.raises(ValueError, match=r"categories and weights belong to kernel='categorical'"):
        culturelens.vendi(embeddings, meta, columns=["prompt"], weights=[1])
    with pytest.raises(ValueError, match=r"drop embeddings"):
        culturelens.vendi(embeddings, meta, kernel="categorical", columns=["prompt"], weights=[1])
    with pytest.raises(ValueError, match=r"^q: order q must be a number >= 0 or `inf`, got `-1.0`"):
        culturelens.vendi(embeddings, q=-1)
    with pytest.raises(ValueError, match=r"kernel: expected"):
        culturelens.vendi(embeddings, kernel="rbf")


def test_bad_quality_is_located(cli, tmp_path):
    x = np.eye(3, dtype=np.float32)
    meta = pd.DataFrame({"prompt": ["p", "p", "p"], "hps": ["0.5", "high", "1"]})
    args = write_table(tmp_path, x, meta)
    done = cli("vendi", *args, "--quality-col", "hps", "--out", tmp_path / "c.json")
    assert done.returncode != 0
    with pytest.raises(ValueError) as err:
        culturelens.vendi(x, meta, quality_col="hps")
    assert str(err.value) == "row 1, column hps: quality must be a finite number, got `high`"
    assert "m.csv, line 3 (data row 1), column hps: quality must be a finite number, got `high`" in done.stderr
