"""The intervals (`ci=`, `bootstrap=`, `ci_method=`, `seed=`; SoS's `ci_mode=` and `cluster=`)
against the CLI's `--ci` on the same inputs: equal to the last bit. (cultext2i's are in
test_cultext2i.py.)"""

import json

import numpy as np
import pandas as pd
import pytest

import culturelens
import test_sos
from test_sos import assert_same_as_cli, run_cli_sos
from test_validate import BY_HAND as VALIDATE_BY_HAND
from test_vendi import FLOATS as VENDI_FLOATS, cli_vendi, write_table


@pytest.fixture(autouse=True)
def bound_columns():
    """Every metric with bounds, and the bounds, compared as floats."""
    metrics = {"sos", "mad", "male_share", "acc", "p_sur", "p_sem"} | VENDI_FLOATS
    added = {m + s for m in metrics for s in ("", "_lo", "_hi")} - test_sos.FLOAT_COLUMNS
    test_sos.FLOAT_COLUMNS.update(added)
    yield
    test_sos.FLOAT_COLUMNS.difference_update(added)


@pytest.mark.parametrize(
    "mode, method, cluster, b",
    [("fast", "bca", None, 300), ("fast", "percentile", ["template", "person"], 300), ("exact", "bca", None, 8)],
)
def test_sos_intervals_equal_the_cli(cli, demo, tmp_path, mode, method, cluster, b):
    _, embeddings, meta = demo
    report = tmp_path / "r.json"
    flags = ["--ci", "0.9", "--bootstrap", str(b), "--ci-method", method, "--seed", "11", "--ci-mode", mode]
    if cluster:
        flags += ["--cluster", ",".join(cluster)]
    joint, _ = run_cli_sos(cli, tmp_path, embeddings, meta, *flags, "--report", report)
    kwargs = dict(ci=0.9, bootstrap=b, ci_method=method, seed=11, ci_mode=mode, cluster=cluster)
    frame = culturelens.sos(embeddings, meta, **kwargs)
    assert list(frame.columns)[-2:] == ["sos_lo", "sos_hi"]
    assert frame["sos_lo"].notna().sum() > len(frame) // 2  # (BCa of 8 exact resamples leaves some undefined)
    assert_same_as_cli(frame, joint)
    assert culturelens.sos_report(embeddings, meta, **kwargs) == json.loads(report.read_text())


def test_sos_interval_arguments(demo):
    _, embeddings, meta = demo
    with pytest.raises(ValueError, match=r"^cluster resamples for the intervals: give ci too"):
        culturelens.sos(embeddings, meta, cluster=["template"])
    with pytest.raises(ValueError, match=r"^ci_mode: expected 'fast' or 'exact', got \"slow\""):
        culturelens.sos(embeddings, meta, ci=0.9, ci_mode="slow")
    with pytest.raises(ValueError, match=r"^ci_method: expected 'bca' or 'percentile', got \"basic\""):
        culturelens.sos(embeddings, meta, ci=0.9, ci_method="basic")
    with pytest.raises(ValueError, match=r"^ci: a confidence level lies strictly between 0 and 1"):
        culturelens.sos(embeddings, meta, ci=0)
    with pytest.raises(ValueError, match=r"^column nope: required column is missing"):
        culturelens.sos(embeddings, meta, ci=0.9, cluster=["nope"])


def test_magbig_intervals_equal_the_cli(cli, tmp_path):
    rng = np.random.default_rng(9)
    n = 2000
    table = pd.DataFrame(
        {"model": rng.choice(["sd", "alt"], n), "language": rng.choice(["de", "ja"], n),
         "set": rng.choice(["direct", "indirect"], n), "prompt_id": rng.integers(0, 25, n).astype(str),
         "gender": rng.choice(["male", "female", ""], n, p=[0.5, 0.4, 0.1])}
    )
    table.to_csv(tmp_path / "a.csv", index=False)
    out = tmp_path / "o.csv"
    done = cli("magbig", "--attributes", tmp_path / "a.csv", "--out", out, "--ci", "0.95", "--bootstrap", "400",
               "--seed", "3")
    assert done.returncode == 0, done.stderr
    frame = culturelens.magbig(table, ci=0.95, bootstrap=400, seed=3)
    assert {"mad_lo", "mad_hi", "male_share_lo", "male_share_hi"} <= set(frame.columns)
    assert_same_as_cli(frame, out)


def test_validate_intervals_equal_the_cli(cli, tmp_path):
    (tmp_path / "l.csv").write_text(VALIDATE_BY_HAND)
    out = tmp_path / "v.csv"
    done = cli("validate", "--labels", tmp_path / "l.csv", "--raters", "r1,r2,r3", "--sos-col", "sos", "--clipscore-cols",
               "cs_sur,cs_sem", "--ci", "0.8", "--bootstrap", "200", "--ci-method", "percentile", "--out", out)
    assert done.returncode == 0, done.stderr
    frame = culturelens.validate(pd.read_csv(tmp_path / "l.csv"), ["r1", "r2", "r3"], sos="sos",
                                 clipscore=("cs_sur", "cs_sem"), ci=0.8, bootstrap=200, ci_method="percentile")
    assert "acc_lo" in frame.columns
    assert_same_as_cli(frame, out)


def test_vendi_intervals_equal_the_cli(cli, demo, tmp_path):
    _, embeddings, meta = demo
    # Every 12th output (180, 60 per model), 2 resamples: each is a whole Vendi computation
    # whole Vendi computation (the host eigensolver, slow in the debug builds CI tests).
    embeddings, meta = embeddings[::36], meta.iloc[::36].reset_index(drop=True)
    args = write_table(tmp_path, embeddings, meta)
    csv_path = cli_vendi(cli, tmp_path, *args, "--group-by", "model", "--q", "2", "--ci", "0.9", "--bootstrap", "2",
                         "--ci-method", "percentile", "--seed", "4")
    frame = culturelens.vendi(embeddings, meta, q=2, group_by="model", ci=0.9, bootstrap=2, ci_method="percentile", seed=4)
    assert {"vs_lo", "vs_hi", "qvs_norm_hi"} <= set(frame.columns)
    assert_same_as_cli(frame, csv_path)
