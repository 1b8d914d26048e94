"""The compiled core of culturelens (see the package docstring); call it through ``culturelens``."""

from typing import List, Optional, Sequence, Tuple

import numpy as np

__version__: str

def sos(
    embeddings: np.ndarray,
    columns: Sequence[Tuple[str, Sequence[str]]],
    pool: str = "all",
    per_image: bool = False,
) -> Tuple[List[str], List[List[str]]]: ...

def magbig(columns: Sequence[Tuple[str, Sequence[str]]]) -> Tuple[List[str], List[List[str]]]: ...

def vendi(
    embeddings: Optional[np.ndarray],
    columns: Optional[Sequence[Tuple[str, Sequence[str]]]],
    q: str = "1",
    kernel: Optional[str] = None,
    categories: Sequence[str] = ...,
    weights: Sequence[float] = ...,
    quality_col: Optional[str] = None,
    group_by: Optional[str] = None,
    route: str = "auto",
    intdiv: bool = False,
) -> Tuple[List[str], List[List[str]]]: ...

def prompts_load(
    set: str, languages: Sequence[str] = ..., mirror: Optional[str] = None
) -> Tuple[List[str], List[List[str]]]: ...

def agreement(
    columns: Sequence[Tuple[str, Sequence[str]]], raters: Sequence[str], level: str = "nominal"
) -> str: ...

def validate(
    columns: Sequence[Tuple[str, Sequence[str]]],
    raters: Sequence[str],
    sos: Optional[str] = None,
    clipscore: Optional[Tuple[str, str]] = None,
) -> Tuple[List[str], List[List[str]]]: ...
