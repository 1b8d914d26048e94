"""The prompt sets of the four papers (SoS, MAGBIG, CUBE, CulText2I), as ``culturelens prompts``."""

from __future__ import annotations

import os
from typing import Optional, Sequence, Union

from . import _native

__all__ = ["load"]


def load(
    set: str,
    languages: Optional[Sequence[str]] = None,
    mirror: Optional[Union[str, "os.PathLike[str]"]] = None,
):
    """One prompt set as its normalised table, as ``culturelens prompts export SET --languages ...``.

    ``sos``: SoS paper §3 (171 cultures x 3 templates x 3 person terms, 13 languages + English);
    ``magbig``: MAGBIG §3 (adjectives and occupations; direct, indirect, German gender star);
    ``cube``: CUBE §4-5 (CUBE-1K and the cultural-diversity prompts); ``cultext2i``: CulText2I
    §4 (Table 9 concepts x Table 1 templates x 10 languages). The upstream files are downloaded
    on first use from their pinned commits and verified against a pinned sha256 (or read from
    ``mirror`` / ``$CULTURELENS_DATA_MIRROR``); the licence is printed to stderr once.

    Args:
      set: "sos", "magbig", "cube" or "cultext2i".
      languages: ISO 639-1 codes or English names to keep (all when None or empty).
      mirror: a folder laid out like the cache's ``upstream/`` folder, instead of downloading.

    Returns:
      A DataFrame with the columns of ``prompts export`` (the common columns first), every cell
      text as in the exported CSV.

    Raises:
      ValueError: an unknown set or language, a checksum mismatch, a failed download (the CLI's
        messages).
    """
    from . import _frame

    records = _native.prompts_load(set, list(languages or []), None if mirror is None else os.fspath(mirror))
    return _frame(records, numbers=False)
