"""culturelens.sos against `culturelens sos` on the same inputs: equal to the last bit."""

import csv
import json
import math
import pathlib

import numpy as np
import pandas as pd
import pytest

import culturelens

ROOT = pathlib.Path(__file__).resolve().parents[3]

INT_COLUMNS = {"row", "n", "n_prompts", "n_images"}
FLOAT_COLUMNS = {"sos", "mad", "mad_random", "male_share"}


def test_imported_from_the_installed_wheel():
    """The suite must test the built wheel, not the source tree."""
    path = pathlib.Path(culturelens.__file__).resolve()
    assert "site-packages" in path.parts, path
    assert (path.parent / "py.typed").exists()
    assert (path.parent / "_native.pyi").exists()


def read_cli_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


def assert_same_as_cli(frame, path):
    """`frame` has the CSV's header, text cells equal and numbers equal to the last bit."""
    header, rows = read_cli_csv(path)
    assert list(frame.columns) == header
    assert len(frame) == len(rows)
    assert len(rows) > 0
    for i, name in enumerate(header):
        cells = [r[i] for r in rows]
        values = frame[name].tolist()
        if name in FLOAT_COLUMNS:
            assert frame[name].dtype == np.float64
            # An empty cell (undefined) is NaN.
            expected = np.array([float(c) if c else math.nan for c in cells], dtype=np.float64)
            got = np.array(values, dtype=np.float64)
            assert np.array_equal(expected.view(np.uint64), got.view(np.uint64)), name
        elif name in INT_COLUMNS:
            assert frame[name].dtype == np.int64
            assert values == [int(c) for c in cells], name
        else:
            assert values == cells, name


def run_cli_sos(cli, tmp_path, embeddings, meta, *flags):
    """Writes the inputs as the CLI reads them and runs `culturelens sos`; the two output paths."""
    npy, csv_path = tmp_path / "e.npy", tmp_path / "m.csv"
    np.save(npy, embeddings)
    meta.to_csv(csv_path, index=False)
    joint, per_image = tmp_path / "joint.csv", tmp_path / "per_image.csv"
    done = cli("sos", "--embeddings", npy, "--meta", csv_path, "--out", joint, "--per-image", per_image, *flags)
    assert done.returncode == 0, done.stderr
    return joint, per_image


@pytest.mark.parametrize("pool", ["all", "per-model"])
def test_joint_and_per_image_equal_the_cli(cli, demo, tmp_path, pool):
    folder, embeddings, meta = demo
    joint, per_image = run_cli_sos(cli, tmp_path, embeddings, meta, "--pool", pool)
    assert_same_as_cli(culturelens.sos(embeddings, meta, pool=pool), joint)
    assert_same_as_cli(culturelens.sos(embeddings, meta, pool=pool, per_image=True), per_image)


def test_demo_joint_equals_demo_write(demo):
    """`culturelens demo --write` scores the same table with the same code."""
    folder, embeddings, meta = demo
    assert_same_as_cli(culturelens.sos(embeddings, meta), folder / "sos.csv")


def test_layer_person_and_image_columns(cli, demo, tmp_path):
    _, embeddings, meta = demo
    meta = meta.copy()
    meta["layer"] = [str(i % 3) for i in range(len(meta))]
    meta["image"] = [f"img/{i:05}.png" for i in range(len(meta))]
    joint, per_image = run_cli_sos(cli, tmp_path, embeddings, meta)
    frame = culturelens.sos(embeddings, meta)
    assert "layer" in frame.columns
    assert_same_as_cli(frame, joint)
    frame = culturelens.sos(embeddings, meta, per_image=True)
    assert {"image", "layer", "person"} <= set(frame.columns)
    assert_same_as_cli(frame, per_image)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_float16_and_float64_as_the_cli_reads_them(cli, demo, tmp_path, dtype):
    _, embeddings, meta = demo
    cast = embeddings.astype(dtype) * dtype(1.5)
    joint, per_image = run_cli_sos(cli, tmp_path, cast, meta)
    assert_same_as_cli(culturelens.sos(cast, meta), joint)
    assert_same_as_cli(culturelens.sos(cast, meta, per_image=True), per_image)


def test_fortran_order_and_strided_views(demo):
    _, embeddings, meta = demo
    expected = culturelens.sos(embeddings, meta, per_image=True)
    fortran = np.asfortranarray(embeddings)
    assert not fortran.flags.c_contiguous
    pd.testing.assert_frame_equal(culturelens.sos(fortran, meta, per_image=True), expected, check_exact=True)
    wide = np.zeros((embeddings.shape[0], embeddings.shape[1] * 2), dtype=np.float32)
    wide[:, ::2] = embeddings
    pd.testing.assert_frame_equal(culturelens.sos(wide[:, ::2], meta, per_image=True), expected, check_exact=True)


def test_meta_as_mapping_and_typed_pandas_columns(demo):
    _, embeddings, meta = demo
    expected = culturelens.sos(embeddings, meta)
    as_dict = {name: meta[name].tolist() for name in meta.columns}
    pd.testing.assert_frame_equal(culturelens.sos(embeddings, as_dict), expected, check_exact=True)
    # An integer column (as pandas reads `seed` from meta.csv) is text to SoS, as in the CLI.
    typed = meta.copy()
    typed["layer"] = [i % 2 for i in range(len(meta))]
    strings = meta.copy()
    strings["layer"] = [str(i % 2) for i in range(len(meta))]
    pd.testing.assert_frame_equal(
        culturelens.sos(embeddings, typed), culturelens.sos(embeddings, strings), check_exact=True
    )


def cli_error(cli, tmp_path, embeddings, meta):
    npy, csv_path = tmp_path / "e.npy", tmp_path / "m.csv"
    np.save(npy, embeddings)
    meta.to_csv(csv_path, index=False)
    done = cli("sos", "--embeddings", npy, "--meta", csv_path, "--out", tmp_path / "o.csv")
    assert done.returncode != 0
    assert not (tmp_path / "o.csv").exists()
    return done.stderr.strip()


def test_empty_culture_names_row_and_column(cli, demo, tmp_path):
    _, embeddings, meta = demo
    meta = meta.copy()
    meta.loc[3, "culture"] = ""
    cli_message = cli_error(cli, tmp_path, embeddings, meta)
    with pytest.raises(ValueError) as err:
        culturelens.sos(embeddings, meta)
    message = str(err.value)
    assert message == "row 3, column culture: empty value: every row needs one for this column"
    # The CLI names the file and its line too; the rest is the same text.
    assert cli_message.endswith(": empty value: every row needs one for this column"), cli_message
    assert "data row 3" in cli_message and "column culture" in cli_message
    # None and NaN are empty cells too.
    meta.loc[3, "culture"] = None
    with pytest.raises(ValueError, match="row 3, column culture: empty value"):
        culturelens.sos(embeddings, meta)


def test_missing_column(cli, demo, tmp_path):
    _, embeddings, meta = demo
    meta = meta.drop(columns=["language"])
    cli_message = cli_error(cli, tmp_path, embeddings, meta)
    with pytest.raises(ValueError) as err:
        culturelens.sos(embeddings, meta)
    message = str(err.value)
    assert message.startswith("column language: required column is missing (columns present: model, culture")
    assert cli_message.endswith(message), cli_message


@pytest.mark.parametrize("value,shown", [(np.nan, "NaN"), (np.inf, "inf")])
def test_non_finite_value(cli, demo, tmp_path, value, shown):
    _, embeddings, meta = demo
    bad = embeddings.copy()
    bad[1, 2] = value
    cli_message = cli_error(cli, tmp_path, bad, meta)
    with pytest.raises(ValueError) as err:
        culturelens.sos(bad, meta)
    assert str(err.value) == f"row 1, column dim 2: non-finite value {shown}"
    assert cli_message.endswith("e.npy, " + str(err.value)), cli_message


def test_zero_norm_row(cli, demo, tmp_path):
    _, embeddings, meta = demo
    bad = embeddings.copy()
    bad[5] = 0
    cli_message = cli_error(cli, tmp_path, bad, meta)
    with pytest.raises(ValueError) as err:
        culturelens.sos(bad, meta)
    assert str(err.value).startswith("row 5: zero-norm embedding")
    assert cli_message.endswith("e.npy, " + str(err.value)), cli_message


def test_a_bad_row_is_reported_before_an_empty_cell_and_an_undefined_reference(cli, demo, tmp_path):
    """The rows are checked on a thread of their own while the layout is built and the rows are
    scored: the check's error must still come first, as the CLI's (which checks rows as it loads
    them), whatever the metadata or the scoring find later."""
    _, embeddings, meta = demo
    bad = embeddings.copy()
    bad[7, 0] = np.nan
    empty = meta.copy()
    empty.loc[3, "culture"] = ""
    cli_message = cli_error(cli, tmp_path, bad, empty)
    with pytest.raises(ValueError) as err:
        culturelens.sos(bad, empty)
    assert str(err.value) == "row 7, column dim 0: non-finite value NaN"
    assert cli_message.endswith("e.npy, " + str(err.value)), cli_message
    # Opposite rows make language en's reference undefined, which the scoring finds; a bad row
    # elsewhere is still what is reported.
    meta = pd.DataFrame({"model": ["A"] * 4, "language": ["en", "en", "de", "de"], "culture": ["X", "Y", "X", "Y"]})
    rows = np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=np.float32)
    with pytest.raises(ValueError, match="SoS cannot be computed for this table"):
        culturelens.sos(rows, meta)
    rows[2, 1] = np.inf
    cli_message = cli_error(cli, tmp_path, rows, meta)
    with pytest.raises(ValueError) as err:
        culturelens.sos(rows, meta)
    assert str(err.value) == "row 2, column dim 1: non-finite value inf"
    assert cli_message.endswith("e.npy, " + str(err.value)), cli_message


def test_row_count_mismatch(demo):
    _, embeddings, meta = demo
    with pytest.raises(ValueError) as err:
        culturelens.sos(embeddings, meta.iloc[1:])
    assert str(err.value) == (
        "meta: row-count mismatch: the metadata has 2159 data rows but embeddings has 2160 embeddings"
    )


def test_duplicated_column(cli, demo, tmp_path):
    _, embeddings, meta = demo
    dup = meta.rename(columns={"template": "model"})
    assert list(dup.columns).count("model") == 2
    cli_message = cli_error(cli, tmp_path, embeddings, dup)
    with pytest.raises(ValueError) as err:
        culturelens.sos(embeddings, dup)
    assert str(err.value) == "column model: duplicated column name"
    # The CLI's CSV reader adds where: "... in header".
    assert "line 1, " + str(err.value) in cli_message, cli_message


# The CLI's bound against the independent numpy reference (tests/sos_cli.rs, NUMPY_BOUND).
NUMPY_BOUND = 2e-7


@pytest.mark.parametrize(
    "pool,name", [("all", "demo_sos_reference.csv"), ("per-model", "demo_sos_reference_per_model.csv")]
)
def test_demo_equals_the_numpy_reference(demo, pool, name):
    """As `sos_on_demo_table_equals_the_numpy_reference`: f32 on the device against numpy in f64."""
    _, embeddings, meta = demo
    reference = pd.read_csv(ROOT / "tests" / "fixtures" / name, dtype={"model": str, "language": str, "culture": str})
    frame = culturelens.sos(embeddings, meta, pool=pool)
    assert list(frame.columns) == list(reference.columns)
    key = ["model", "language", "culture", "n"]
    pd.testing.assert_frame_equal(frame[key], reference[key], check_dtype=False)
    worst = float(np.max(np.abs(frame["sos"].to_numpy() - reference["sos"].to_numpy())))
    print(f"max |joint SoS - numpy| ({pool}): {worst:.2e}")
    assert worst <= NUMPY_BOUND


def test_bad_arguments(demo):
    _, embeddings, meta = demo
    with pytest.raises(ValueError, match=r"pool: expected 'all' or 'per-model'"):
        culturelens.sos(embeddings, meta, pool="per_model")
    with pytest.raises(TypeError, match=r"embeddings: expected a 2-D numpy array .* dtype int64 and 2 dimensions"):
        culturelens.sos(embeddings.astype(np.int64), meta)
    with pytest.raises(TypeError, match=r"embeddings: expected a 2-D numpy array .* 1 dimensions"):
        culturelens.sos(embeddings[0], meta)
    with pytest.raises(TypeError, match=r"meta: expected a pandas or polars DataFrame"):
        culturelens.sos(embeddings, [1, 2, 3])


def test_import_does_not_need_pandas():
    """pandas (and polars, pyarrow) are imported only by the calls that take or return frames."""
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['pandas'] = None; sys.modules['polars'] = None; sys.modules['pyarrow'] = None\n"
        "import culturelens\n"
        "print(sorted(culturelens.__all__))\n"
        "try:\n"
        "    culturelens.magbig({'model': ['m'], 'language': ['de'], 'set': ['d'], 'prompt_id': ['a'], 'gender': ['male']})\n"
        "except ImportError:\n"
        "    print('frames need pandas')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == [
        "['Encoder', 'Pipeline', '__version__', 'agreement', 'clipscore', 'cultext2i', 'demo', 'magbig', 'prompts', 'sos', 'sos_report', "
        "'validate', 'vendi', 'wilcoxon']",
        "frames need pandas",
    ]


@pytest.mark.parametrize("pool", ["all", "per-model"])
def test_report_equals_the_cli(cli, demo, tmp_path, pool):
    _, embeddings, meta = demo
    report = tmp_path / "report.json"
    run_cli_sos(cli, tmp_path, embeddings, meta, "--pool", pool, "--report", report)
    got = culturelens.sos_report(embeddings, meta, pool=pool)
    assert got == json.loads(report.read_text())
    assert {"joint", "per_model", "language_medians", "language_correlation", "person_means"} <= set(got)
    # Its joint entries are the joint table's values.
    joint = culturelens.sos(embeddings, meta, pool=pool)
    assert [j["sos"] for j in got["joint"]] == joint["sos"].tolist()


class Tensor:
    """A foreign tensor that offers only the DLPack protocol (as torch's CPU tensors do)."""

    def __init__(self, array, refuse=None):
        self._array, self._refuse = array, refuse

    def __dlpack__(self, **kwargs):
        if self._refuse:
            raise RuntimeError(self._refuse)
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


def test_dlpack_tensors_equal_numpy(demo):
    _, embeddings, meta = demo
    want = culturelens.sos(embeddings, meta, per_image=True)
    pd.testing.assert_frame_equal(culturelens.sos(Tensor(embeddings), meta, per_image=True), want, check_exact=True)
    half = embeddings.astype(np.float16)
    pd.testing.assert_frame_equal(culturelens.sos(Tensor(half), meta), culturelens.sos(half, meta), check_exact=True)
    vendi = culturelens.vendi(Tensor(embeddings), meta, group_by="model")
    pd.testing.assert_frame_equal(vendi, culturelens.vendi(embeddings, meta, group_by="model"), check_exact=True)
    # As torch refuses a tensor that requires grad.
    refused = Tensor(embeddings, refuse="Can't export tensors that require gradient, use tensor.detach()")
    with pytest.raises(TypeError, match=r"^embeddings: a Tensor whose memory numpy cannot read through DLPack \(Can't"):
        culturelens.sos(refused, meta)
