"""culturelens.prompts.load against `culturelens prompts export` from the shared upstream mirror."""

import csv

import pytest

import culturelens
from test_sos import ROOT

MIRROR = ROOT.parent / "shared" / "data" / "upstream"


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    """A fresh cache (so the licence shows once) and no mirror or base URL from the environment."""
    monkeypatch.setenv("CULTURELENS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CULTURELENS_DATA_MIRROR", raising=False)
    monkeypatch.delenv("CULTURELENS_DATA_BASE_URL", raising=False)
    assert (MIRROR / "SHA256SUMS").is_file(), f"the upstream mirror {MIRROR} is missing"
    return tmp_path / "cache"


def exported(cli, tmp_path, cache, *args):
    out = tmp_path / "p.csv"
    done = cli("prompts", "export", *args, "--out", out, "--mirror", MIRROR)
    assert done.returncode == 0, done.stderr
    with open(out, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


def assert_same_table(frame, header, rows):
    assert list(frame.columns) == header
    assert len(frame) == len(rows) > 0
    assert frame.astype(str).values.tolist() == rows


@pytest.mark.parametrize(
    "set,languages,count",
    [("sos", None, 21546), ("magbig", ["en", "German"], 795), ("cube", None, 1031)],
)
def test_equals_prompts_export(cli, tmp_path, cache, capfd, set, languages, count):
    frame = culturelens.prompts.load(set, languages=languages, mirror=MIRROR)
    assert len(frame) == count
    assert f"Licence of the {set} prompt set" in capfd.readouterr().err
    flags = ["--languages", ",".join(languages)] if languages else []
    # The CLI with its own cache: the same table, cell for cell.
    header, rows = exported(cli, tmp_path, cache, set, *flags)
    assert_same_table(frame, header, rows)


def test_mirror_from_the_environment(monkeypatch):
    monkeypatch.setenv("CULTURELENS_DATA_MIRROR", str(MIRROR))
    frame = culturelens.prompts.load("sos", languages=["de"])
    assert set(frame["language"]) == {"de"} and len(frame) == 1539


def test_bad_requests(tmp_path):
    with pytest.raises(ValueError, match=r'^set: unknown prompt set "laion" \(expected one of sos, magbig, cube, cultext2i\)'):
        culturelens.prompts.load("laion", mirror=MIRROR)
    with pytest.raises(ValueError, match=r'^languages: unknown language "klingon" \(known: '):
        culturelens.prompts.load("sos", languages=["klingon"], mirror=MIRROR)
    with pytest.raises(ValueError, match=r"cube has no prompts in de \(languages: en\)"):
        culturelens.prompts.load("cube", languages=["de"], mirror=MIRROR)
    empty = tmp_path / "empty-mirror"
    empty.mkdir()
    with pytest.raises(ValueError, match=r"^loading the cube prompt set: .*has no cube/cube_1k.json"):
        culturelens.prompts.load("cube", mirror=empty)
    corrupt = tmp_path / "corrupt-mirror"
    (corrupt / "cube").mkdir(parents=True)
    (corrupt / "cube" / "cube_1k.json").write_text("[]")
    with pytest.raises(ValueError, match=r"checksum mismatch for cube/cube_1k.json"):
        culturelens.prompts.load("cube", mirror=corrupt)
