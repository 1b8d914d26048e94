"""culturelens.validate against `culturelens validate` (tests/analyses_cli.rs `validate_by_hand`)."""

import math

import numpy as np
import pandas as pd
import pytest

import culturelens
from test_sos import FLOAT_COLUMNS, assert_same_as_cli

BY_HAND = (
    "language,r1,r2,r3,sos,cs_sur,cs_sem\n"
    "de,surface,surface,semantic,-0.1,0.3,0.2\nde,semantic,semantic,,0.2,0.3,0.2\n"
    "en,surface,japan,japan,0.1,-0.1,-0.2\nen,surface,semantic,japan,0.1,0.1,0.3\n"
    "ja,surface,surface,surface,0,0.1,0.4\n"
)


@pytest.fixture(autouse=True)
def validate_columns():
    added = {"acc", "p_sur", "p_sem"} - FLOAT_COLUMNS
    FLOAT_COLUMNS.update(added)
    yield
    FLOAT_COLUMNS.difference_update(added)


def run_cli(cli, tmp_path, text, *args):
    (tmp_path / "l.csv").write_text(text)
    out = tmp_path / "v.csv"
    return cli("validate", "--labels", tmp_path / "l.csv", *args, "--out", out), out


def test_by_hand_equals_the_cli_and_the_hand_values(cli, tmp_path):
    done, out = run_cli(cli, tmp_path, BY_HAND, "--raters", "r1,r2,r3", "--sos-col", "sos", "--clipscore-cols", "cs_sur,cs_sem")
    assert done.returncode == 0, done.stderr
    labels = pd.read_csv(tmp_path / "l.csv")  # numbers as floats, the empty rater cell as NaN
    frame = culturelens.validate(labels, ["r1", "r2", "r3"], sos="sos", clipscore=("cs_sur", "cs_sem"))
    assert_same_as_cli(frame, out)
    assert frame[["method", "subset"]].values.tolist() == [
        ["sos", "all"], ["sos", "no_en"], ["clipscore", "all"], ["clipscore", "no_en"]
    ]
    assert frame["n"].tolist() == [4, 3, 4, 3]
    np.testing.assert_allclose(frame["acc"], [0.5, 2 / 3, 0.25, 1 / 3], rtol=0, atol=1e-15)
    assert frame["p_sur"].tolist() == [1.0, 1.0, 0.5, 0.5]
    assert frame["p_sem"].tolist() == [0.5, 1.0, 0.0, 0.0]


def test_sos_only_and_undefined_shares(cli, tmp_path):
    text = "language,r1,r2,sos\nde,semantic,semantic,0.2\nen,japan,japan,0.1\n"
    done, out = run_cli(cli, tmp_path, text, "--raters", "r1,r2", "--sos-col", "sos")
    assert done.returncode == 0, done.stderr
    frame = culturelens.validate(pd.read_csv(tmp_path / "l.csv", dtype=str), ["r1", "r2"], sos="sos")
    assert_same_as_cli(frame, out)
    assert math.isnan(frame["p_sur"][0])  # no human "surface" label: undefined, empty in the CSV


def test_bad_input(cli, tmp_path):
    done, _ = run_cli(cli, tmp_path, "language,r1,r2,sos\nde,surface,surface,x\n", "--raters", "r1,r2", "--sos-col", "sos")
    assert done.returncode != 0
    with pytest.raises(ValueError) as err:
        culturelens.validate(pd.read_csv(tmp_path / "l.csv", dtype=str), ["r1", "r2"], sos="sos")
    assert str(err.value) == 'row 0, column sos: expected a number, got "x"'
    assert 'l.csv, line 2 (data row 0), column sos: expected a number, got "x"' in done.stderr
    with pytest.raises(ValueError, match=r"^give sos=COL and/or clipscore=\(SUR, SEM\)"):
        culturelens.validate(pd.read_csv(tmp_path / "l.csv", dtype=str), ["r1", "r2"])
    with pytest.raises(ValueError, match=r"^column language: required column is missing"):
        culturelens.validate({"r1": ["surface"], "sos": ["1"]}, ["r1"], sos="sos")
