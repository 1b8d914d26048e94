"""culturelens.wilcoxon against `culturelens magbig --report --compare` (equal to the last bit) and
scipy.stats.wilcoxon (the committed fixture of scripts/fixtures/make_magbig_wilcoxon.py, with the
Rust test's bounds)."""

import json

import numpy as np
import pandas as pd
import pytest

import culturelens
from conftest import ROOT


def deviation(male, female):
    """crates/culturelens-metrics/src/magbig.rs `deviation`, the same float operations."""
    p = male / (male + female)
    return abs(p - 0.5) + abs((1.0 - p) - 0.5)


def test_equals_the_magbig_report(cli, tmp_path):
    rng = np.random.default_rng(5)
    n = 3000
    table = pd.DataFrame(
        {"model": rng.choice(["sd", "alt"], n), "language": rng.choice(["de", "ja"], n),
         "set": rng.choice(["direct", "indirect"], n), "prompt_id": rng.integers(0, 30, n).astype(str),
         "gender": rng.choice(["male", "female"], n, p=[0.6, 0.4])}
    )
    path, out, report = tmp_path / "a.csv", tmp_path / "o.csv", tmp_path / "r.json"
    table.to_csv(path, index=False)
    done = cli("magbig", "--attributes", path, "--out", out, "--report", report, "--compare", "direct,indirect")
    assert done.returncode == 0, done.stderr
    tests = json.loads(report.read_text())["wilcoxon"]
    assert len(tests) == 4
    counts = table.groupby(["model", "language", "set", "prompt_id"])["gender"].value_counts().unstack(fill_value=0)
    for t in tests:
        per_set = {
            s: {p: deviation(float(r["male"]), float(r["female"]))
                for p, r in counts.loc[(t["model"], t["language"], s)].iterrows()}
            for s in ("direct", "indirect")
        }
        got = culturelens.wilcoxon(per_set["direct"], per_set["indirect"])
        assert got == t["test"], (t, got)
    assert {t["test"]["method"] for t in tests} == {"asymptotic"}


def test_scipy_fixture():
    fixture = json.loads((ROOT / "tests/fixtures/magbig/wilcoxon.json").read_text())
    for case in fixture["cases"]:
        got = culturelens.wilcoxon(case["d"])
        assert abs(got["statistic"] - case["statistic"]) < 1e-9, case["name"]
        p = case["pvalue"]
        assert abs(got["pvalue"] - p) < 1e-12 * max(p, 1e-300) + 1e-15, (case["name"], got["pvalue"], p)
        assert got["method"] == case["method"], case["name"]
    assert len(fixture["cases"]) >= 4


def test_pairs_and_errors():
    # By hand: d = (1, -2, 3): ranks 1, 2, 3; R+ = 4, R- = 2; exact p = 2 * P(R+ <= 2) = 2 * 3/8.
    got = culturelens.wilcoxon([2, 0, 4], [1, 2, 1])
    assert (got["n"], got["statistic"], got["r_plus"], got["pvalue"], got["method"]) == (3, 2.0, 4.0, 0.75, "exact")
    assert culturelens.wilcoxon([0.0, 0.0])["pvalue"] is None
    with pytest.raises(ValueError, match="no key in common"):
        culturelens.wilcoxon({"a": 1.0}, {"b": 2.0})
    with pytest.raises(ValueError, match=r"^a and b must pair up: 2 values against 1"):
        culturelens.wilcoxon([1, 2], [1])
    with pytest.raises(ValueError, match=r"^d\[1\]: expected a finite difference, got NaN"):
        culturelens.wilcoxon([1.0, float("nan")])
