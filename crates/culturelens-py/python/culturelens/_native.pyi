"""The compiled core of culturelens (see the package docstring); call it through ``culturelens``."""

from typing import List, Sequence, Tuple

import numpy as np

__version__: str

def sos(
    embeddings: np.ndarray,
    columns: Sequence[Tuple[str, Sequence[str]]],
    pool: str = "all",
    per_image: bool = False,
) -> Tuple[List[str], List[List[str]]]: ...

def magbig(columns: Sequence[Tuple[str, Sequence[str]]]) -> Tuple[List[str], List[List[str]]]: ...
