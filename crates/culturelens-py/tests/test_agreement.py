"""culturelens.agreement against `culturelens agreement` (the same JSON, byte for byte) and the
statsmodels / scikit-learn / krippendorff values of tests/fixtures/agreement/expected.json."""

import json

import pandas as pd
import pytest

import culturelens
from test_sos import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "agreement"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text())["cases"]


def same(got, want, what):
    if want is None:
        assert got is None, what
    else:
        assert abs(got - want) <= 1e-12, f"{what}: {got} vs {want}"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_equals_the_cli_and_the_references(cli, tmp_path, name):
    want = EXPECTED[name]
    raters, level = want["raters"], want["level"]
    out = tmp_path / "a.json"
    done = cli("agreement", "--labels", FIXTURES / f"{name}.csv", "--raters", ",".join(raters), "--level", level,
               "--out", out)
    assert done.returncode == 0, done.stderr
    labels = pd.read_csv(FIXTURES / f"{name}.csv", dtype=str, keep_default_na=False)
    got = culturelens.agreement(labels, raters, level=level)
    # The CLI's report, parsed: the same keys in the same order and the same numbers, bit for bit.
    cli_report = json.loads(out.read_text())
    assert got == cli_report
    assert json.dumps(got) == json.dumps(cli_report)
    assert got["n_items"] == want["n_items"]
    same(got["fleiss_kappa"], want["fleiss_kappa"], "fleiss")
    same(got["krippendorff_alpha"], want["krippendorff_alpha"], "alpha")
    for pair, value in want["cohen_kappa"].items():
        same(got["cohen_kappa"][pair], value, f"cohen {pair}")
    assert len(got["per_label"]) == len(want["per_label"])
    for label, by_pair in want["per_label"].items():
        for pair, value in by_pair.items():
            same(got["per_label"][label][pair], value, f"per_label {label} {pair}")


def test_bad_input(cli, tmp_path):
    labels = pd.DataFrame({"a": ["1", "x"], "b": ["2", "1"]})
    with pytest.raises(ValueError, match=r"^column c: required column is missing \(columns present: a, b\)"):
        culturelens.agreement(labels, ["a", "c"])
    with pytest.raises(ValueError) as err:
        culturelens.agreement(labels, ["a", "b"], level="ordinal")
    assert str(err.value) == 'row 1, column a: ordinal labels must be numbers, got "x"'
    labels.to_csv(tmp_path / "l.csv", index=False)
    done = cli("agreement", "--labels", tmp_path / "l.csv", "--raters", "a,b", "--level", "ordinal",
               "--out", tmp_path / "o.json")
    assert done.returncode != 0
    assert 'l.csv, line 3 (data row 1), column a: ordinal labels must be numbers, got "x"' in done.stderr
    with pytest.raises(ValueError, match=r"^raters needs at least two rater columns \(got 1\)"):
        culturelens.agreement(labels, ["a"])
    with pytest.raises(ValueError, match=r"^level: expected 'nominal' or 'ordinal'"):
        culturelens.agreement(labels, ["a", "b"], level="interval")
