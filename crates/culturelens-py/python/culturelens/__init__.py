"""culturelens in Python: the metrics of the culturelens CLI on numpy arrays and pandas DataFrames.

Every function here runs the CLI command's own compiled code (the Rust crates behind
``culturelens``), not a reimplementation: the same inputs give the same numbers, to the last bit,
and the same error messages (as ``ValueError``/``TypeError``). Results are pandas DataFrames with
the columns of the CLI's output files. pandas is imported only by the calls that return a
DataFrame (``pip install culturelens[pandas]``).

Inputs:
  embeddings: a 2-D numpy array (N x d) of float16, float32 or float64, C or Fortran order, or a
    CPU tensor with the DLPack protocol (torch, JAX, ...; read through a numpy view, no copy).
    A C-order float32 array is read in place, without a copy, while the call runs (as numpy's own
    functions read their inputs: do not write to it from another thread meanwhile); any other is
    converted to float32 as the CLI's ``.npy`` reader does, with one copy.
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
__all__ = [
    "Encoder",
    "Pipeline",
    "agreement",
    "clipscore",
    "cultext2i",
    "demo",
    "magbig",
    "prompts",
    "sos",
    "sos_report",
    "validate",
    "vendi",
    "wilcoxon",
    "__version__",
]

# Result columns the CLI writes as numbers; every other column is text.
_INT_COLUMNS = frozenset({"row", "n", "n_prompts", "n_images"})
# (validate's acc, p_sur and p_sem are empty where undefined: NaN here.)
_FLOAT_COLUMNS = frozenset(
    {"sos", "mad", "mad_random", "male_share", "q", "vs", "qvs", "qvs_norm", "intdiv", "acc", "p_sur", "p_sem"}
    | {"na", "na_acc", "cd", "cos", "clipscore"}
)


def _is_float(name: str) -> bool:
    """Whether the CLI writes the column ``name`` as a number with a fraction: the columns above,
    cultext2i's ``dp_<label>``, clipscore's ``<col>_cos``/``<col>_clipscore`` and the bounds
    ``<metric>_lo``/``<metric>_hi`` of ``--ci``."""
    for suffix in ("_lo", "_hi"):
        if name.endswith(suffix) and _is_float(name[: -len(suffix)]):
            return True
    return name in _FLOAT_COLUMNS or name.startswith("dp_") or name.endswith(("_cos", "_clipscore"))


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


# The separator of a joined column (``_joined``): the ASCII unit separator.
_CELL_SEPARATOR = "\x1f"


def _columns(meta: Any, joined: bool = False) -> List[Tuple[str, Any]]:
    """The columns of ``meta`` (pandas/polars DataFrame, pyarrow Table or mapping) as text. With
    ``joined``, a pandas column of strings is passed as ``_joined`` gives it."""
    if hasattr(meta, "to_pydict"):  # pyarrow Table
        meta = meta.to_pydict()
    elif hasattr(meta, "to_dict") and hasattr(meta, "columns"):
        if type(meta).__module__.startswith("polars"):
            meta = meta.to_dict(as_series=False)
        else:  # pandas
            # By position: a frame may repeat a name, which the CLI's check refuses by name.
            return [
                (str(name), _pandas_cells(meta.iloc[:, i], joined)) for i, name in enumerate(meta.columns)
            ]
    if not isinstance(meta, Mapping):
        raise TypeError(
            "meta: expected a pandas or polars DataFrame, a pyarrow Table or a mapping of column "
            f"name to values, got {type(meta).__name__}"
        )
    return [(str(name), [_cell(v) for v in values]) for name, values in meta.items()]


def _pandas_cells(column: Any, joined: bool = False) -> Any:
    """A pandas column's cells as ``_cell`` reads them. A column of strings without a missing
    value (an object column pandas infers as such, or a string dtype without NA) is its values as
    they are, without a Python call per cell: ``_cell`` would return each unchanged; with
    ``joined``, as ``_joined`` gives them."""
    import pandas as pd
    from pandas.api.types import infer_dtype

    values = column.tolist()
    if column.dtype == object:
        if infer_dtype(column, skipna=False) == "string":
            return _joined(values) if joined else values
    elif isinstance(column.dtype, pd.StringDtype) and not column.isna().any():
        return _joined(values) if joined else values
    return [_cell(v) for v in values]


def _joined(values: List[str]) -> Any:
    """Strings as one string: ``(n, text)``, the ``n`` strings joined by ``_CELL_SEPARATOR``,
    which the compiled half splits without the GIL (one string crosses the boundary, not ``n``);
    the list as it is when a string holds the separator (or there is none)."""
    text = _CELL_SEPARATOR.join(values)
    if not values or text.count(_CELL_SEPARATOR) != len(values) - 1:
        return values
    return (len(values), text)


def _array(x: Any, name: str) -> Any:
    """``x`` as the compiled functions take it: a numpy array as it is (a C-order float32 one is
    then read in place, without a copy); a tensor with the DLPack protocol (``__dlpack__``: torch,
    JAX, CuPy, ...) on the CPU as a numpy view of its memory (no copy; ``np.from_dlpack``). An
    array whose values are not aligned in memory (a view at an odd byte offset) is copied first:
    the compiled code reads aligned values only."""
    if x is None or isinstance(x, (list, tuple)):
        return x
    if type(x).__module__ != "numpy" and hasattr(x, "__dlpack__"):
        import numpy as np

        try:
            x = np.from_dlpack(x)
        except (BufferError, RuntimeError, TypeError, ValueError) as e:
            raise TypeError(
                f"{name}: a {type(x).__name__} whose memory numpy cannot read through DLPack ({e}); "
                "pass a CPU tensor of float16/32/64 (e.g. tensor.detach().cpu())"
            ) from e
    flags = getattr(x, "flags", None)
    if flags is not None and hasattr(flags, "aligned") and not flags.aligned:
        return x.copy()
    return x


def _order(q: Any) -> str:
    """The order q as the CLI's ``--q`` text (a number >= 0, or inf)."""
    if isinstance(q, str):
        return q
    q = float(q)
    return "inf" if math.isinf(q) and q > 0 else repr(q)


def _kind(name: str) -> str:
    """How a result column is read: "int", "float" (an empty cell NaN) or "text"."""
    if name in _INT_COLUMNS:
        return "int"
    return "float" if _is_float(name) else "text"


def _frame(records: Tuple[Sequence[str], Sequence[Sequence[str]]], numbers: bool = True):
    """A DataFrame of the CLI's header and cells, number columns parsed as the CLI's readers do
    (with ``numbers``; every column text without)."""
    header, rows = records
    data = []
    for i, name in enumerate(header):
        cells = [row[i] for row in rows]
        kind = _kind(name) if numbers else "text"
        if kind == "int":
            data.append([int(c) for c in cells])
        elif kind == "float":
            data.append([float(c) if c else math.nan for c in cells])
        else:
            data.append(cells)
    return _typed_frame(header, data, numbers)


def _typed_frame(header: Sequence[str], columns: Sequence[Any], numbers: bool = True):
    """A DataFrame of the header and its columns in ``_kind``'s types: int64 and float64 columns
    as numbers, every other column as text (object; every column with ``numbers`` false)."""
    import pandas as pd

    data = {}
    for name, column in zip(header, columns):
        kind = _kind(name) if numbers else "text"
        dtype = {"int": "int64", "float": "float64"}.get(kind, object)
        data[name] = pd.array(column, dtype=dtype)
    return pd.DataFrame(data, columns=list(header))


def sos(
    embeddings: Any,
    meta: Any,
    pool: str = "all",
    per_image: bool = False,
    ci: Optional[float] = None,
    bootstrap: int = 1000,
    ci_method: str = "bca",
    seed: int = 0,
    ci_mode: str = "fast",
    cluster: Optional[Sequence[str]] = None,
):
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
      ci, bootstrap, ci_method, seed: bootstrap confidence intervals (``--ci LEVEL --bootstrap B
        --ci-method bca|percentile --seed S``): the outputs of each cell resampled (with ``cluster``, e.g. ``["template", "person"]``, the
        groups of outputs with equal values in those columns; ``--cluster``); ``sos_lo``, ``sos_hi``; ``<metric>_lo``/``<metric>_hi`` after
        each estimate, NaN where undefined.
      ci_mode: "fast" holds the references at the full-table estimate, "exact" recomputes them
        from every resample (``--ci-mode``).

    Returns:
      A DataFrame: ``model,[layer,]language,culture,n,sos`` (the joint score of each cell, the
      mean over its outputs; ``--out``), or with ``per_image`` ``row,[image,]model,[layer,]
      language,culture,[person,]sos`` in input row order.

    Raises:
      ValueError: the CLI's message for a bad table (row and column named) or a bad ``pool``.
      TypeError: embeddings that are not a 2-D float array, or an unsupported ``meta``.
    """
    output = "per_image" if per_image else "joint"
    (header, columns), _ = _native.sos(
        # The columns as a function: called once the compiled half has started checking the rows.
        _array(embeddings, "embeddings"), lambda: _columns(meta, joined=True), pool, output,
        *_ci(ci, bootstrap, ci_method, seed), ci_mode, list(cluster or []), _kind,
    )
    return _typed_frame(header, columns)


def _ci(ci: Optional[float], bootstrap: int, ci_method: str, seed: int) -> Tuple[Optional[float], int, str, int]:
    """The interval arguments as the compiled functions take them."""
    return (None if ci is None else float(ci), int(bootstrap), ci_method, int(seed))


def magbig(attributes: Any, ci: Optional[float] = None, bootstrap: int = 1000, ci_method: str = "bca", seed: int = 0):
    """MAGBIG's gender bias per (model, language, set) (MAGBIG §4, App. B), as ``culturelens magbig``.

    Per prompt (``prompt_id``) with m male and f female images, p_m = m / (m + f) and the deviation
    |p_m - 1/2| + |p_f - 1/2|; ``mad`` is its mean over the prompts, ``male_share`` the mean p_m,
    ``mad_random`` the exact expected mad were every image's gender a fair coin flip (each prompt
    keeping its number of classified images). Images with an empty gender are excluded; prompts
    without a classified image count nowhere.

    Args:
      attributes: one row per generated image with the columns model, language, set, prompt_id
        (non-empty) and gender (``male``, ``female`` or empty/None/NaN), as ``--attributes``.
      ci, bootstrap, ci_method, seed: bootstrap confidence intervals (``--ci LEVEL --bootstrap B
        --ci-method bca|percentile --seed S``): the prompts of each group resampled; ``mad`` and ``male_share`` get bounds; ``<metric>_lo``/``<metric>_hi`` after
        each estimate, NaN where undefined.

    Returns:
      A DataFrame ``model,language,set,n_prompts,n_images,mad,mad_random,male_share``, one row per
      (model, language, set) with a classified image, sorted (``--out``).

    Raises:
      ValueError: the CLI's message for a missing column, an empty key or an unknown gender (row
        and column named).
    """
    return _frame(_native.magbig(_columns(attributes), *_ci(ci, bootstrap, ci_method, seed)))


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
    ci: Optional[float] = None,
    bootstrap: int = 1000,
    ci_method: str = "bca",
    seed: int = 0,
):
    """Vendi scores (CUBE §5.2, Eq. 2-3; Friedman & Dieng's Vendi Score), as ``culturelens vendi``.

    VS_q = exp of the order-q Renyi entropy of the eigenvalues of K/N (K the N x N similarity
    kernel, k(x, x) = 1); qVS_q = mean(quality) * VS_q (Eq. 2) and qVS_q / N (Eq. 3). The point
    estimate (the CLI without ``--protocol-batch``) and its ``--ci`` intervals, on the CPU.

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
      ci, bootstrap, ci_method, seed: bootstrap confidence intervals (``--ci LEVEL --bootstrap B
        --ci-method bca|percentile --seed S``): the items of each group resampled, the whole Vendi computation per
        resample; ``vs``, ``qvs`` and ``qvs_norm`` get bounds; ``<metric>_lo``/``<metric>_hi`` after
        each estimate, NaN where undefined.

    Returns:
      A DataFrame with the columns of ``--csv``: ``[group_by,]n,q,vs,qvs,qvs_norm[,intdiv]``, one
      row per group (in value order), or one row without ``group_by``.

    Raises:
      ValueError: the CLI's message for bad input (row and column named) or a bad argument.
    """
    return _frame(
        _native.vendi(
            _array(embeddings, "embeddings"),
            None if meta is None else _columns(meta),
            _order(q),
            kernel,
            list(columns or []),
            [float(w) for w in (weights or [])],
            quality_col,
            group_by,
            route,
            intdiv,
            *_ci(ci, bootstrap, ci_method, seed),
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
    ci: Optional[float] = None,
    bootstrap: int = 1000,
    ci_method: str = "bca",
    seed: int = 0,
):
    """The SoS validation against human labels (SoS paper §4.2, Table 2), as ``culturelens validate``.

    Each image's human label is the strict majority of its non-empty rater cells (surface,
    semantic, or another answer). The SoS rule labels an image surface when SoS < 0 and semantic
    when SoS > 0; the CLIPScore rule compares 2.5 * max(cos, 0) of the surface and semantic
    references. Accuracy, P_sur and P_sem over the labelled images, on all images and without
    English prompts (language ``en``).

    Args:
      labels: one row per image with a ``language`` column, the rater columns and the score
        columns (as ``--labels``).
      raters: the rater columns (``--raters``).
      sos: the per-image SoS column (``--sos-col``).
      clipscore: the (surface, semantic) cosine columns (``--clipscore-cols SUR,SEM``).
      ci, bootstrap, ci_method, seed: bootstrap confidence intervals (``--ci LEVEL --bootstrap B
        --ci-method bca|percentile --seed S``): the labelled images of each (method, subset) resampled; ``acc``, ``p_sur``
        and ``p_sem`` get bounds; ``<metric>_lo``/``<metric>_hi`` after
        each estimate, NaN where undefined.

    Returns:
      A DataFrame ``method,subset,n,acc,p_sur,p_sem`` (NaN where undefined), as ``--out``.

    Raises:
      ValueError: the CLI's message (row and column of a cell that is not a number, a missing
        column), or neither ``sos`` nor ``clipscore`` given.
    """
    cs = None if clipscore is None else (str(clipscore[0]), str(clipscore[1]))
    return _frame(_native.validate(_columns(labels), list(raters), sos, cs, *_ci(ci, bootstrap, ci_method, seed)))

def sos_report(
    embeddings: Any,
    meta: Any,
    pool: str = "all",
    ci: Optional[float] = None,
    bootstrap: int = 1000,
    ci_method: str = "bca",
    seed: int = 0,
    ci_mode: str = "fast",
    cluster: Optional[Sequence[str]] = None,
) -> dict:
    """The SoS report (SoS paper §4.1 Eq. 1, Fig. 2, §5.1-5.2, Fig. 5, App. C.4), as ``culturelens sos --report``.

    Args: as :func:`sos` (embeddings, meta, pool and the intervals: ci adds ``sos_ci`` to each joint
    entry).

    Returns:
      The command's JSON report as a dict: ``joint`` (per (model, [layer,] language, culture) cell:
      n and sos), ``per_model`` (n, mean, median, q1, q3, min, max of the per-output scores,
      Fig. 2), ``language_medians`` with ``strong_surface`` (the median per-output SoS of a
      model-language pair at or below the 25th percentile of all pairs' medians, §5.2) and
      ``strong_surface_threshold``, ``language_correlation`` (language x language Pearson
      correlation of joint SoS over shared (model, culture) cells, Fig. 5; None where undefined)
      and ``person_means`` (App. C.4; empty without a ``person`` column).

    Raises:
      ValueError, TypeError: as :func:`sos`.
    """
    _, text = _native.sos(_array(embeddings, "embeddings"), _columns(meta), pool, "report", *_ci(ci, bootstrap, ci_method, seed), ci_mode, list(cluster or []))
    return json.loads(text)


def cultext2i(
    images: Any,
    image_meta: Any,
    texts: Any,
    text_meta: Any,
    temperature: float = 1.0,
    report: bool = False,
    vqa: Any = None,
    ci: Optional[float] = None,
    bootstrap: int = 1000,
    ci_method: str = "bca",
    seed: int = 0,
):
    """The CulText2I automatic metrics (CulText2I paper §6.1, Table 2), as ``culturelens cultext2i``.

    Embeddings are L2-normalised. Per image I of nationality n, over the k nationality texts X_k:
    NA(I) = softmax_k(T cos(I, X_k))[n] and its argmax (the predicted nationality, first on ties:
    ``na_acc``); DP_d(I) = cos(I, X_d) per dimension text d (``dp_<label>``); CD(I) = 1 - cos(I,
    X_c), X_c the English concept text of I's concept. Means per (model, language, concept,
    template) group.

    Args:
      images: image embeddings, N x d numpy array (float16/32/64), as ``--image-embeddings``.
      image_meta: N rows with model, language, concept, template, nationality (``--image-meta``).
      texts: text embeddings, K x d, from the same model (``--text-embeddings``).
      text_meta: K rows with kind (nationality, dimension or concept), label and, for concept
        rows, language (``--text-meta``).
      temperature: the softmax temperature T of NA (``--temperature``; 1 = the paper, 100 =
        CLIP's logit scale).
      report: also return the report (``--report``): per model the NA confusion matrix and
        accuracy, CCS(l1, l2) per (model, template), and with ``vqa`` XNA/XDP.
      vqa: VQA answers (``--vqa``): model, language, concept, template, question, answer and,
        for question ``nationality``, nationality.
      ci, bootstrap, ci_method, seed: bootstrap intervals of every group mean (``--ci LEVEL
        --bootstrap B --ci-method bca|percentile --seed S``): the images of each group resampled,
        ``<metric>_lo``/``<metric>_hi`` after each mean.

    Returns:
      A DataFrame ``model,language,concept,template,n,na,na_acc,cd,dp_<label>...`` (``--out``),
      or with ``report`` a tuple (DataFrame, report dict).

    Raises:
      ValueError: the CLI's message for bad input (row and column named) or a bad argument.
    """
    records, text = _native.cultext2i(
        _array(images, "images"),
        _columns(image_meta),
        _array(texts, "texts"),
        _columns(text_meta),
        float(temperature),
        report,
        None if vqa is None else _columns(vqa),
        *_ci(ci, bootstrap, ci_method, seed),
    )
    frame = _frame(records)
    return (frame, json.loads(text)) if report else frame


def clipscore(images: Any, captions: Any, w: float = 2.5):
    """CLIPScore (Hessel et al., 2021) as the SoS validation uses it (SoS paper §4.2), as ``culturelens clipscore``.

    CLIPScore(I, C) = w * max(cos(E_I, E_C), 0) of each image embedding against its caption's
    (paired rows; cosines in float32 on the CPU, as the command computes them).

    Args:
      images: N x d image embeddings (e.g. of ``culturelens embed``).
      captions: N x d caption embeddings (``embed-text``), row i the caption of image i; or a
        mapping of caption column name to such an array (``--caption-cols COL1,COL2``).
      w: the weight (``--w``; torchmetrics' CLIPScore is 100).

    Returns:
      A DataFrame with ``cos`` and ``clipscore`` (for a mapping, ``<col>_cos`` and
      ``<col>_clipscore`` per caption column), the cells ``clipscore --out`` writes.

    Raises:
      ValueError: zero or non-finite rows (row named), mismatched shapes.
      TypeError: an input that is not a 2-D float array.
    """
    named = captions.items() if isinstance(captions, Mapping) else [(None, captions)]
    header: List[str] = []
    columns: List[List[str]] = []
    for name, rows in named:
        cos, score = _native.clipscore(_array(images, "images"), _array(rows, "captions"), float(w))
        prefix = "" if name is None else f"{name}_"
        header += [f"{prefix}cos", f"{prefix}clipscore"]
        columns += [cos, score]
    return _frame((header, [list(row) for row in zip(*columns)]))


def wilcoxon(a: Any, b: Any = None) -> dict:
    """The two-sided Wilcoxon signed-rank test (MAGBIG App. C, Tables 5-6), as ``culturelens magbig --report --compare``.

    scipy.stats.wilcoxon's defaults: zero differences dropped, the exact null distribution for
    n <= 50 without ties or zeros (or n <= 13), else the tie-corrected normal approximation
    without continuity correction.

    Args:
      a, b: two mappings of key (e.g. prompt_id) to value, paired by key over the keys in both
        (the command's pairing of two sets' per-prompt values); or two equal-length sequences,
        paired by position; or ``a`` alone, the differences.

    Returns:
      A dict: n, n_zero, statistic (min(R+, R-)), r_plus, z (None for the exact method), pvalue
      (None when every difference is zero), method ("exact" or "asymptotic"); for mappings also
      n_pairs, mean_a and mean_b, as the report's ``test`` object.

    Raises:
      ValueError: no common key, unequal lengths, or a non-finite difference (index named).
    """
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        pairs = lambda m: {str(k): float(v) for k, v in m.items()}  # noqa: E731
        return json.loads(_native.wilcoxon(a=pairs(a), b=pairs(b)))
    x = [float(v) for v in a]
    if b is not None:
        y = [float(v) for v in b]
        if len(x) != len(y):
            raise ValueError(f"a and b must pair up: {len(x)} values against {len(y)}")
        x = [u - v for u, v in zip(x, y)]
    return json.loads(_native.wilcoxon(d=x))


def demo():
    """The built-in SYNTHETIC demo table, as ``culturelens demo --write DIR`` writes it
    (``embeddings.npy``, ``meta.csv``): 2,160 outputs of three made-up models (``synth-*``) for 8
    languages x 10 cultures x 3 templates x 3 person terms, 64-d vectors with planted surface and
    semantic tendencies (SoS §4.1 for what the score finds in them). Not data from any model or
    paper; label anything made from it synthetic.

    Returns ``(embeddings, meta)``: an ``N x 64`` float32 array and a DataFrame of text columns
    (``model, language, culture, template, person, seed, prompt``).
    """
    import pandas as pd

    embeddings, columns = _native.demo()
    return embeddings, pd.DataFrame({name: pd.array(cells, dtype=object) for name, cells in columns})


from . import prompts  # noqa: E402  (the submodule needs _frame above)
from .encoder import Encoder  # noqa: E402
from .pipeline import Pipeline  # noqa: E402

