"""The compiled core of culturelens (see the package docstring); call it through ``culturelens``."""

from typing import Any, Callable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

__version__: str

_Columns = Sequence[Tuple[str, Union[Sequence[str], Tuple[int, str]]]]

def sos(
    embeddings: np.ndarray,
    columns: Union[_Columns, Callable[[], _Columns]],
    pool: str = "all",
    output: str = "joint",
    ci: Optional[float] = None,
    bootstrap: int = 1000,
    ci_method: str = "bca",
    seed: int = 0,
    ci_mode: str = "fast",
    cluster: Sequence[str] = ...,
    kind: Optional[Callable[[str], str]] = None,
) -> Tuple[Optional[Tuple[List[str], List[Any]]], Optional[str]]: ...

def magbig(
    columns: Sequence[Tuple[str, Sequence[str]]],
    ci: Optional[float] = None,
    bootstrap: int = 1000,
    ci_method: str = "bca",
    seed: int = 0,
) -> Tuple[List[str], List[List[str]]]: ...

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
    ci: Optional[float] = None,
    bootstrap: int = 1000,
    ci_method: str = "bca",
    seed: int = 0,
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
    ci: Optional[float] = None,
    bootstrap: int = 1000,
    ci_method: str = "bca",
    seed: int = 0,
) -> Tuple[List[str], List[List[str]]]: ...

def cultext2i(
    images: np.ndarray,
    image_columns: Sequence[Tuple[str, Sequence[str]]],
    texts: np.ndarray,
    text_columns: Sequence[Tuple[str, Sequence[str]]],
    temperature: float = 1.0,
    report: bool = False,
    vqa: Optional[Sequence[Tuple[str, Sequence[str]]]] = None,
    ci: Optional[float] = None,
    bootstrap: int = 1000,
    ci_method: str = "bca",
    seed: int = 0,
) -> Tuple[Tuple[List[str], List[List[str]]], Optional[str]]: ...

def clipscore(images: np.ndarray, captions: np.ndarray, w: float = 2.5) -> Tuple[List[str], List[str]]: ...

def wilcoxon(
    a: Optional[Mapping[str, float]] = None,
    b: Optional[Mapping[str, float]] = None,
    d: Optional[Sequence[float]] = None,
) -> str: ...

def demo() -> Tuple[np.ndarray, List[Tuple[str, List[str]]]]: ...

class Encoder:
    """An encoder of a weights folder (``culturelens embed --weights``); see ``culturelens.Encoder``."""

    @staticmethod
    def from_pretrained(folder: str, device: str = "cpu", precision: str = "f32") -> "Encoder": ...
    @property
    def family(self) -> str: ...
    def embed_image_files(self, paths: Sequence[str], batch: int = 16) -> np.ndarray: ...
    def embed_pixels(self, images: Sequence[Tuple[np.ndarray, bool]], batch: int = 16) -> np.ndarray: ...
    def embed_texts(self, texts: Sequence[str], batch: int = 64) -> np.ndarray: ...

class Pipeline:
    """A diffusers pipeline folder (``culturelens generate --pipeline``); see ``culturelens.Pipeline``."""

    @staticmethod
    def from_pretrained(
        folder: str,
        device: str = "cpu",
        precision: str = "f32",
        offload: bool = False,
        max_sequence_length: Optional[int] = None,
        attention_slice: Optional[str] = None,
    ) -> "Pipeline": ...
    def generate(
        self,
        prompts: Sequence[str],
        seed: int = 0,
        steps: Optional[int] = None,
        guidance: Optional[float] = None,
        negative_prompt: Optional[str] = None,
        height: Optional[int] = None,
        width: Optional[int] = None,
        scheduler: Optional[str] = None,
        images_per_prompt: int = 1,
        seed_per_image: bool = False,
        true_cfg: float = 1.0,
        batch: int = 1,
        latents: Optional["np.ndarray"] = None,
        text_layer: Optional[int] = None,
        prior_steps: Optional[int] = None,
        prior_guidance: Optional[float] = None,
        prior_latents: Optional["np.ndarray"] = None,
    ) -> List[Tuple[int, int, bytes]]: ...
