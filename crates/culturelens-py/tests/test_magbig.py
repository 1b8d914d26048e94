"""culturelens.magbig against `culturelens magbig` on the same attribute tables: equal to the last bit."""

import numpy as np
import pandas as pd
import pytest

import culturelens
from test_sos import assert_same_as_cli

BY_HAND = (
    "model,language,set,prompt_id,gender,image\n"
    "m1,de,direct,a,male,1.png\nm1,de,direct,a,male,2.png\nm1,de,direct,a,female,3.png\n"
    "m1,de,direct,a,male,4.png\nm1,de,direct,a,,5.png\nm1,de,direct,b,female,6.png\n"
    "m1,de,direct,b,female,7.png\nm1,de,direct,c,,8.png\nm1,de,indirect,a,male,9.png\n"
    "m1,de,indirect,a,female,10.png\nm0,en,direct,x,male,11.png\n"
)


def cli_magbig(cli, tmp_path, text):
    attributes, out = tmp_path / "a.csv", tmp_path / "out.csv"
    attributes.write_text(text)
    done = cli("magbig", "--attributes", attributes, "--out", out)
    return done, out


def test_by_hand_equals_the_cli_and_the_hand_values(cli, tmp_path):
    """The table of tests/analyses_cli.rs `magbig_by_hand`, read by pandas with its defaults."""
    done, out = cli_magbig(cli, tmp_path, BY_HAND)
    assert done.returncode == 0, done.stderr
    frame = culturelens.magbig(pd.read_csv(tmp_path / "a.csv"))  # empty gender -> NaN -> empty
    assert_same_as_cli(frame, out)
    assert frame[["model", "language", "set"]].agg("/".join, axis=1).tolist() == [
        "m0/en/direct",
        "m1/de/direct",
        "m1/de/indirect",
    ]
    assert frame["n_prompts"].tolist() == [1, 2, 1] and frame["n_images"].tolist() == [1, 6, 2]
    assert frame["mad"].tolist() == [1.0, 0.75, 0.0]
    assert frame["male_share"].tolist() == [1.0, 0.375, 0.5]
    np.testing.assert_allclose(frame["mad_random"], [1.0, 0.4375, 0.5], rtol=0, atol=1e-15)


def test_a_large_random_table_equals_the_cli(cli, tmp_path):
    rng = np.random.default_rng(34)
    n = 5000
    table = pd.DataFrame(
        {
            "model": rng.choice(["sd21", "altdiffusion", "mgen"], n),
            "language": rng.choice(["de", "en", "fr", "ja", "zh"], n),
            "set": rng.choice(["direct", "indirect", "star"], n),
            "prompt_id": rng.integers(0, 40, n).astype(str),
            "gender": rng.choice(["male", "female", ""], n, p=[0.5, 0.35, 0.15]),
        }
    )
    done, out = cli_magbig(cli, tmp_path, table.to_csv(index=False))
    assert done.returncode == 0, done.stderr
    frame = culturelens.magbig(table)
    assert len(frame) == 45
    assert_same_as_cli(frame, out)
    # A mapping of columns is the same table.
    pd.testing.assert_frame_equal(culturelens.magbig(table.to_dict("list")), frame, check_exact=True)


def test_unknown_gender_names_row_and_column(cli, tmp_path):
    text = "model,language,set,prompt_id,gender\nm,de,direct,a,male\nm,de,direct,a,Frau\n"
    done, out = cli_magbig(cli, tmp_path, text)
    assert done.returncode != 0 and not out.exists()
    with pytest.raises(ValueError) as err:
        culturelens.magbig(pd.read_csv(tmp_path / "a.csv"))
    assert str(err.value) == 'row 1, column gender: unknown gender "Frau" (expected male, female or empty)'
    assert done.stderr.strip().endswith('column gender: unknown gender "Frau" (expected male, female or empty)')
    assert "line 3 (data row 1)" in done.stderr


def test_missing_column_and_empty_key(cli, tmp_path):
    done, out = cli_magbig(cli, tmp_path, "model,language,prompt_id,gender\nm,de,a,male\n")
    assert done.returncode != 0
    with pytest.raises(ValueError) as err:
        culturelens.magbig(pd.read_csv(tmp_path / "a.csv"))
    assert str(err.value).startswith("column set: required column is missing (columns present: model, language")
    assert done.stderr.strip().endswith(str(err.value)), done.stderr
    table = {"model": ["m", "m"], "language": ["de", None], "set": ["d", "d"], "prompt_id": ["a", "b"],
             "gender": ["male", "female"]}
    with pytest.raises(ValueError, match=r"^row 1, column language: empty value"):
        culturelens.magbig(table)
