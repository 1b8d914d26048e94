"""culturelens.sos's fast boundary: a pandas column of strings crosses as one joined string
(split in the compiled half), and the result comes back as typed columns. Both must give what
the list-and-records path gives, to the last bit, and the CLI's output (test_sos.py)."""

import numpy as np
import pandas as pd
import pytest

import culturelens
from culturelens import _native

SEP = "\x1f"


def list_path(embeddings, meta, per_image=False, **ci):
    """SoS through the path without joined columns or typed results: every column a list of
    strings, the table returned as records and parsed in Python."""
    output = "per_image" if per_image else "joint"
    args = culturelens._ci(ci.get("ci"), ci.get("bootstrap", 1000), "bca", 0)
    records, _ = _native.sos(embeddings, culturelens._columns(meta), "all", output, *args, "fast", [])
    return culturelens._frame(records)


def assert_bit_equal(got, expected):
    pd.testing.assert_frame_equal(got, expected, check_exact=True)
    for name in expected.columns:
        if expected[name].dtype == np.float64:
            assert np.array_equal(got[name].to_numpy().view(np.uint64), expected[name].to_numpy().view(np.uint64)), name


def test_string_columns_are_joined(demo):
    _, _, meta = demo
    columns = dict(culturelens._columns(meta, joined=True))
    for name in ("model", "language", "culture"):
        n, text = columns[name]
        assert n == len(meta)
        assert text.split(SEP) == meta[name].tolist()
    # Without `joined` (the other functions), lists as before.
    assert all(isinstance(cells, list) for _, cells in culturelens._columns(meta))


@pytest.mark.parametrize("per_image", [False, True])
def test_joined_and_typed_equal_the_list_path(demo, per_image):
    _, embeddings, meta = demo
    meta = meta.copy()
    meta["layer"] = [str(i % 3) for i in range(len(meta))]
    meta["image"] = [f"img/{i:05}.png" for i in range(len(meta))]
    got = culturelens.sos(embeddings, meta, per_image=per_image)
    expected = list_path(embeddings, meta, per_image=per_image)
    assert len(got) > 0
    assert got["sos"].dtype == np.float64
    assert got["row" if per_image else "n"].dtype == np.int64
    assert_bit_equal(got, expected)


def test_intervals_with_undefined_bounds_equal_the_list_path(demo):
    """`sos_lo`/`sos_hi` come back as floats, an undefined (empty) bound NaN, as before."""
    _, embeddings, meta = demo
    got = culturelens.sos(embeddings, meta, ci=0.9, bootstrap=50)
    assert_bit_equal(got, list_path(embeddings, meta, ci=0.9, bootstrap=50))
    assert got["sos_lo"].dtype == np.float64


def test_a_cell_holding_the_separator_is_passed_as_a_list(demo):
    _, embeddings, meta = demo
    meta = meta.copy()
    culture = meta["culture"].tolist()
    meta["culture"] = [c.replace(c[:1], c[:1] + SEP, 1) for c in culture]
    columns = dict(culturelens._columns(meta, joined=True))
    assert columns["culture"] == meta["culture"].tolist()
    assert isinstance(columns["model"], tuple)
    got = culturelens.sos(embeddings, meta)
    assert all(SEP in c for c in got["culture"])
    assert_bit_equal(got, list_path(embeddings, meta))


def test_a_joined_column_that_does_not_split_into_its_cells_is_refused(demo):
    _, embeddings, meta = demo
    columns = culturelens._columns(meta)
    name, cells = columns[0]
    joined = (len(cells), SEP.join(cells) + SEP + "extra")
    with pytest.raises(ValueError, match=f'column "{name}": {len(cells)} cells joined by U\\+001F split into {len(cells) + 1}'):
        _native.sos(embeddings, [(name, joined)] + columns[1:])
    # The same cells joined right are read as the list.
    ok = (len(cells), SEP.join(cells))
    assert _native.sos(embeddings, [(name, ok)] + columns[1:]) == _native.sos(embeddings, columns)


def test_missing_and_non_string_cells_are_not_joined(demo):
    """A column with None/NaN or numbers is read cell by cell (`_cell`), as before."""
    _, _, meta = demo
    meta = meta.copy()
    meta.loc[3, "culture"] = None
    meta["layer"] = [i % 2 for i in range(len(meta))]
    columns = dict(culturelens._columns(meta, joined=True))
    assert columns["culture"][3] == "" and isinstance(columns["culture"], list)
    assert columns["layer"][:2] == ["0", "1"]
    assert isinstance(columns["model"], tuple)


def test_columns_given_by_a_function(demo):
    """`culturelens.sos` passes its columns as a function, called once the rows' check started:
    the same result, and the function's exception raised as it is."""
    _, embeddings, meta = demo
    columns = culturelens._columns(meta, joined=True)
    assert _native.sos(embeddings, lambda: columns) == _native.sos(embeddings, columns)

    def refuse():
        raise TypeError("meta: not a table")

    with pytest.raises(TypeError, match="meta: not a table"):
        _native.sos(embeddings, refuse)
