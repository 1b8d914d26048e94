"""Embeddings read in place against the copies every other array gets.

A C-order, aligned float32 array is lent to the compiled code without a copy; float64, Fortran
order, strided views and unaligned views are converted with one copy. Both paths must give the
same results to the last bit; the lent array is never written; results already returned do not
change when the array is written afterwards; and the lent memory stays alive for an interrupted
call's work even when Python drops the array at once. Also the pandas columns' fast path: a string
column passed as it is gives the cells of the per-cell conversion."""

import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import culturelens
from culturelens import _cell, _columns


def other_layouts(x):
    """The values of `x` (C-order float32) through every path that converts them."""
    wide = np.zeros((x.shape[0], 2 * x.shape[1]), dtype=np.float32)
    wide[:, ::2] = x
    raw = np.zeros(x.nbytes + 1, dtype=np.uint8)
    unaligned = np.frombuffer(raw.data, dtype=np.float32, count=x.size, offset=1).reshape(x.shape)
    unaligned[...] = x
    layouts = {
        "fortran": np.asfortranarray(x),
        "float64": x.astype(np.float64),
        "strided": wide[:, ::2],
        "unaligned": unaligned,
    }
    assert not layouts["fortran"].flags.c_contiguous
    assert not layouts["strided"].flags.c_contiguous
    assert not layouts["unaligned"].flags.aligned
    return layouts


def bits(x):
    return np.ascontiguousarray(x).view(np.uint32).copy()


def test_sos_of_a_lent_array_equals_every_converted_layout(demo):
    _, embeddings, meta = demo
    assert embeddings.dtype == np.float32 and embeddings.flags.c_contiguous and embeddings.flags.aligned
    per_image = culturelens.sos(embeddings, meta, per_image=True)
    joint = culturelens.sos(embeddings, meta)
    for name, x in other_layouts(embeddings).items():
        pd.testing.assert_frame_equal(culturelens.sos(x, meta, per_image=True), per_image, check_exact=True, obj=name)
        pd.testing.assert_frame_equal(culturelens.sos(x, meta), joint, check_exact=True, obj=name)


def test_vendi_of_a_lent_array_equals_every_converted_layout(demo):
    _, embeddings, meta = demo
    grouped = culturelens.vendi(embeddings, meta, group_by="model", intdiv=True)
    whole = culturelens.vendi(embeddings)
    for name, x in other_layouts(embeddings).items():
        pd.testing.assert_frame_equal(culturelens.vendi(x, meta, group_by="model", intdiv=True), grouped, check_exact=True, obj=name)
        pd.testing.assert_frame_equal(culturelens.vendi(x), whole, check_exact=True, obj=name)


def test_a_lent_array_is_never_written_and_later_writes_change_no_returned_result(demo):
    _, embeddings, meta = demo
    x = embeddings.copy()
    before = bits(x)
    joint = culturelens.sos(x, meta)
    scores = culturelens.vendi(x, meta, group_by="language")
    clip = culturelens.clipscore(x, x[::-1].copy())
    assert np.array_equal(bits(x), before), "a call wrote into the array it read"
    # The read-only borrow ended with the call: the array is writable again.
    assert x.flags.writeable
    saved = (joint.copy(), scores.copy(), clip.copy())
    x *= -3.0
    x[:, 0] += 1.0
    for got, kept in zip((joint, scores, clip), saved):
        pd.testing.assert_frame_equal(got, kept, check_exact=True)
    # The writes are seen by the next call (the array is read, not a copy taken at import).
    assert not culturelens.sos(x, meta)["sos"].equals(joint["sos"])


KEEP_ALIVE = """
import gc, os, signal, sys, threading, time
import numpy as np
import culturelens

def interrupted_refs(x):
    # References to x: before the call, and right after a SIGINT interrupted it (the call has
    # returned; its work stops at its next resample, and pyo3 releases a reference dropped off
    # the interpreter only at its next call into Python).
    base = sys.getrefcount(x)
    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
    interrupted = False
    try:
        culturelens.vendi(x, ci=0.9, bootstrap=20000, ci_method="percentile")
    except KeyboardInterrupt:
        interrupted = True
    assert interrupted
    gc.collect()
    return base, sys.getrefcount(x)

x = np.random.default_rng(0).standard_normal((20000, 256), dtype=np.float32)
x64 = x.astype(np.float64)
start = (sys.getrefcount(x), sys.getrefcount(x64))
lent = interrupted_refs(x)
converted = interrupted_refs(x64)
# Once the interrupted work has stopped (at its next resample: seconds in a debug build), the
# next call releases the reference it dropped.
deadline = time.monotonic() + 60
while time.monotonic() < deadline and [sys.getrefcount(x), sys.getrefcount(x64)] != list(start):
    time.sleep(0.2)
    culturelens.vendi(np.eye(3, dtype=np.float32))
    gc.collect()
print(*lent, *converted, *start, sys.getrefcount(x), sys.getrefcount(x64), flush=True)
"""


def test_the_lent_array_is_referenced_by_the_work_until_it_ends():
    """The lent buffer holds a reference to the array while the work may read it, so Python
    cannot free the memory under an interrupted call's work; it is released after the work ends
    (no leak). A converted array's work holds no reference (its copy is its own)."""
    done = subprocess.run([sys.executable, "-c", KEEP_ALIVE], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    lent_base, lent_after, converted_base, converted_after, *start, lent_end, converted_end = map(int, done.stdout.split())
    print(f"references in the call: lent {lent_base} -> {lent_after}, converted {converted_base} -> {converted_after}; "
          f"at the top level: {start} before, {[lent_end, converted_end]} after")
    assert lent_after == lent_base + 1, "the interrupted work holds no reference to the array it reads"
    assert converted_after == converted_base
    assert [lent_end, converted_end] == start, "a reference was not released"


def test_string_columns_passed_as_they_are_equal_the_per_cell_conversion():
    n = 6
    frame = pd.DataFrame(
        {
            "strings": pd.Series([f"s{i}" for i in range(n)], dtype=object),
            "with_none": pd.Series(["a", None, "b", "c", "d", "e"], dtype=object),
            "with_nan": pd.Series(["a", math.nan, "b", "c", "d", "e"], dtype=object),
            "mixed": pd.Series(["a", 1, 2.5, True, "e", "f"], dtype=object),
            "string_dtype": pd.Series([f"t{i}" for i in range(n)], dtype="string"),
            "string_dtype_na": pd.Series(["a", None, "b", "c", "d", "e"], dtype="string"),
            "categorical": pd.Series(["x", "y", "x", None, "y", "x"], dtype="category"),
            "ints": np.arange(n),
            "floats": np.array([0.5, math.nan, 1.0, 2.0, 3.0, 1e-7]),
        }
    )
    want = [(name, [_cell(v) for v in frame[name].tolist()]) for name in frame.columns]
    got = _columns(frame)
    assert got == want
    assert all(type(c) is str for _, cells in got for c in cells)
