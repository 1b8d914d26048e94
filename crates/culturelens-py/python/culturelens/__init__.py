"""culturelens in Python: the metrics of the culturelens CLI on numpy arrays and pandas DataFrames.

Every function here runs the CLI command's own compiled code (the Rust crates behind
``culturelens``), not a reimplementation: the same inputs give the same numbers, to the last bit,
and the same error messages (as ``ValueError``/``TypeError``). Results are pandas DataFrames with
the columns of the CLI's output files. pandas is imported only by the calls that return a
DataFrame (``pip install culturelens[pandas]``).

Inputs:
  embeddings: a 2-D numpy array (N x d) of float16, float32 or float64, C or Fortran order;
    converted to float32 as the CLI's ``.npy`` reader does.
  meta: one row per embedding, as a pandas or polars DataFrame, a pyarrow Table, or a mapping of
    column name to a sequence; cells are read as text, as the CLI reads ``meta.csv`` (a missing
    value, None or NaN, is an empty cell).
"""

from __future__ import annotations

import json
import math
from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

from . import _native

__version__: str = _native.__version__
__all__ = ["agreement", "magbig", "prompts", "sos", "validate", "vendi", "__version__"]

# Result columns the CLI writes as numbers; every other column is text.
_INT_COLUMNS = frozenset({"row", "n", "n_prompts", "n_images"})
# (validate's acc, p_sur and p_sem are empty where undefined: NaN here.)
_FLOAT_COLUMNS = frozenset(
    {"sos", "sos_lo", "sos_hi", "mad", "mad_random", "male_share", "q", "vs", "qvs", "qvs_norm", "intdiv", "acc", "p_sur", "p_sem"}
)


def _cell(value: Any) -> str:
    """One metadata value as the CLI would read its CSV text."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, float):
        return "" if math.isnan(value) else repr(value)
    if hasattr(value, "item"):  # numpy scalars
        return _cell(value.item())
    return str(value)


def _columns(meta: Any) -> List[Tuple[str, List[str]]]:
    """The columns of ``meta`` (pandas/polars DataFrame, pyarrow Table or mapping) as text."""
    if hasattr(meta, "to_pydict"):  # pyarrow Table
        meta = meta.to_pydict()
    elif hasattr(meta, "to_dict") and hasattr(meta, "columns"):
        if type(meta).__module__.startswith("polars"):
            meta = meta.to_dict(as_series=False)
        else:  # pandas
            # By position: a frame may repeat a name, which the CLI's check refuses by name.
            return [(str(name), [_cell(v) for v in meta.iloc[:, i].tolist()]) for i, name in enumerate(meta.columns)]
    if not isinstance(meta, Mapping):
        raise TypeError(
            "meta: expected a pandas or polars DataFrame, a pyarrow Table or a mapping of column "
            f"name to values, got {type(meta).__name__}"
        )
    return [(str(name), [_cell(v) for v in values]) for name, values in meta.items()]


def _order(q: Any) -> str:
    """The order q as the CLI's ``--q`` text (a number >= 0, or inf)."""
    if isinstance(q, str):
        return q
    q = float(q)
    return "inf" if math.isinf(q) and q > 0 else repr(q)


def _frame(records: Tuple[Sequence[str], Sequence[Sequence[str]]], numbers: bool = True):
    """A DataFrame of the CLI's header and cells, number columns parsed as the CLI's readers do
    (with ``numbers``; every column text without)."""
    import pandas as pd

    header, rows = records
    data = {}
    for i, name in enumerate(header):
        cells = [row[i] for row in rows]
        if numbers and name in _INT_COLUMNS:
            data[name] = pd.array([int(c) for c in cells], dtype="int64")
        elif numbers and name in _FLOAT_COLUMNS:
            data[name] = pd.array([float(c) if c else math.nan for c in cells], dtype="float64")
        else:
            data[name] = pd.array(cells, dtype=object)
    return pd.DataFrame(data, columns=list(header))


def sos(embeddings: Any, meta: Any, pool: str = "all", per_image: bool = False):
    """Surface-over-Semantics scores (SoS paper §4.1, Eq. 1; per layer §5.1), as ``culturelens sos``.

    SoS(o) = cos(sem_c, e_o) - cos(sur_l, e_o): the cosine of an output to the mean of the outputs
    targeting its culture, minus that to the mean of the outputs prompted in its language
    (embeddings L2-normalised first; references include the output itself).

    Args:
      embeddings: N x d numpy array (float16/32/64, any order).
      meta: N rows with the columns model, language, culture (non-empty), optionally layer and
        person (and image, carried into the per-image table).
      pool: "all" (references pooled over all models, §4.1) or "per-model" (``--pool``).
      per_image: return every output's score (``--per-image``) instead of the joint scores.

    Returns:
      A DataFrame: ``model,[layer,]language,culture,n,sos`` (the joint score of each cell, the
      mean over its outputs; ``--out``), or with ``per_image`` ``row,[image,]model,[layer,]
      language,culture,[person,]sos`` in input row order.

    Raises:
      ValueError: the CLI's message for a bad table (row and column named) or a bad ``pool``.
      TypeError: embeddings that are not a 2-D float array, or an unsupported ``meta``.
    """
    return _frame(_native.sos(embeddings, _columns(meta), pool, per_image))


def magbig(attributes: Any):
    """MAGBIG's gender bias per (model, language, set) (MAGBIG §4, App. B), as ``culturelens magbig``.

    Per prompt (``prompt_id``) with m male and f female images, p_m = m / (m + f) and the deviation
    |p_m - 1/2| + |p_f - 1/2|; ``mad`` is its mean over the prompts, ``male_share`` the mean p_m,
    ``mad_random`` the exact expected mad were every image's gender a fair coin flip (each prompt
    keeping its number of classified images). Images with an empty gender are excluded; prompts
    without a classified image count nowhere.

    Args:
      attributes: one row per generated image with the columns model, language, set, prompt_id
        (non-empty) and gender (``male``, ``female`` or empty/None/NaN), as ``--attributes``.

    Returns:
      A DataFrame ``model,language,set,n_prompts,n_images,mad,mad_random,male_share``, one row per
      (model, language, set) with a classified image, sorted (``--out``).

    Raises:
      ValueError: the CLI's message for a missing column, an empty key or an unknown gender (row
        and column named).
    """
    return _frame(_native.magbig(_columns(attributes)))


def vendi(
    embeddings: Any = None,
    meta: Any = None,
    q: Union[float, str] = 1,
    kernel: Optional[str] = None,
    columns: Optional[Sequence[str]] = None,
    weights: Optional[Sequence[float]] = None,
    quality_col: Optional[str] = None,
    group_by: Optional[str] = None,
    route: str = "auto",
    intdiv: bool = False,
):
    """Vendi scores (CUBE §5.2, Eq. 2-3; Friedman & Dieng's Vendi Score), as ``culturelens vendi``.

    VS_q = exp of the order-q Renyi entropy of the eigenvalues of K/N (K the N x N similarity
    kernel, k(x, x) = 1); qVS_q = mean(quality) * VS_q (Eq. 2) and qVS_q / N (Eq. 3). The point
    estimate (the CLI without ``--protocol-batch`` and ``--ci``), on the CPU.

    Args:
      embeddings: N x d numpy array (float16/32/64) for the cosine kernel, or the N x N kernel
        matrix with ``kernel="precomputed"`` (read as float32, as the CLI reads K.npy).
      meta: one row per item (category, quality and group columns), as ``--meta``.
      q: the order, a number >= 0 or ``"inf"``/``math.inf`` (``--q``).
      kernel: "cosine" (default with embeddings), "categorical" (default without) or "precomputed".
      columns, weights: the categorical kernel's meta columns and their weights (>= 0, sum 1).
      quality_col: meta column of per-item quality scores (default 1).
      group_by: score each value of this meta column separately.
      route: "auto", "kernel" (N x N) or "dual" (d x d) eigenproblem (``--route``).
      intdiv: add intdiv = 1 - mean similarity of distinct items.

    Returns:
      A DataFrame with the columns of ``--csv``: ``[group_by,]n,q,vs,qvs,qvs_norm[,intdiv]``, one
      row per group (in value order), or one row without ``group_by``.

    Raises:
      ValueError: the CLI's message for bad input (row and column named) or a bad argument.
    """
    return _frame(
        _native.vendi(
            embeddings,
            None if meta is None else _columns(meta),
            _order(q),
            kernel,
            list(columns or []),
            [float(w) for w in (weights or [])],
            quality_col,
            group_by,
            route,
            intdiv,
        )
    )



def agreement(labels: Any, raters: Sequence[str], level: str = "nominal") -> dict:
    """Inter-rater agreement (SoS paper App. B.2, Tables 8-9), as ``culturelens agreement``.

    Fleiss' kappa over the items every rater labelled (statsmodels), Cohen's kappa per rater pair
    (scikit-learn, unweighted), category-specific Cohen's kappa per label, and Krippendorff's
    alpha over all pairable labels (``level`` "nominal" or "ordinal"; ordinal labels are numbers).
    Empty cells (None, NaN) are missing ratings.

    Args:
      labels: one row per item, one column per rater (as ``--labels``).
      raters: at least two rater columns (``--raters``).
      level: "nominal" or "ordinal" (``--level``).

    Returns:
      The command's JSON report as a dict: n_items, fleiss_kappa, cohen_kappa ({"a|b": kappa}),
      krippendorff_alpha, level, per_label ({label: {"a|b": kappa}}); None where undefined.

    Raises:
      ValueError: the CLI's message (row and column of a bad ordinal label, a missing column).
    """
    return json.loads(_native.agreement(_columns(labels), list(raters), level))


def validate(
    labels: Any,
    raters: Sequence[str],
    sos: Optional[str] = None,
    clipscore: Optional[Tuple[str, str]] = None,
):
    """The SoS validation against human labels (SoS paper §4.2, Table 2), as ``culturelens validate``.

    Each image's human label is the strict majority of its non-empty rater cells (surface,
    semantic, or another answer). The SoS rule labels an image surface when SoS < 0 and semantic
    when SoS > 0; the CLIPScore rule compares 2.5 * max(cos, 0) of the surface and semantic
    references. Accuracy, P_sur and P_sem over the labelled images, on all images and without
    English prompts (language ``en``). Point estimates (no ``--ci``).

    Args:
      labels: one row per image with a ``language`` column, the rater columns and the score
        columns (as ``--labels``).
      raters: the rater columns (``--raters``).
      sos: the per-image SoS column (``--sos``).
      clipscore: the (surface, semantic) cosine columns (``--clipscore-cols SUR,SEM``).

    Returns:
      A DataFrame ``method,subset,n,acc,p_sur,p_sem`` (NaN where undefined), as ``--out``.

    Raises:
      ValueError: the CLI's message (row and column of a cell that is not a number, a missing
        column), or neither ``sos`` nor ``clipscore`` given.
    """
    cs = None if clipscore is None else (str(clipscore[0]), str(clipscore[1]))
    return _frame(_native.validate(_columns(labels), list(raters), sos, cs))

from . import prompts  # noqa: E402  (the submodule needs _frame above)
