"""``culturelens.Encoder``: the image and text encoders of ``culturelens embed`` / ``embed-text``
(CLIP, OpenCLIP, SigLIP, DINOv2, EfficientNet-Lite: the embeddings SoS, Vendi and CLIPScore read),
run by the CLI's own compiled loop on image files, PIL images, RGB arrays and prompt lists."""

from __future__ import annotations

import os
from typing import Any, Sequence

from . import _native


def _is_path(x: Any) -> bool:
    return isinstance(x, (str, bytes, os.PathLike))


# PIL modes with transparency, handed over as RGBA so that the folder's preprocessing treats the
# alpha as it does for the file.
_ALPHA_MODES = frozenset({"RGBA", "RGBa", "LA", "La", "PA"})


def _pixels(x: Any, i: int) -> Any:
    """Image ``i`` as the compiled loop takes it: a C-contiguous height x width x 3 (RGB) or 4
    (RGBA) uint8 array, and whether it is a palette or bilevel image (``P``/``1``: resampled with
    nearest neighbour, as Pillow does and the CLI does for such files)."""
    import numpy as np

    palette = False
    if type(x).__module__.startswith("PIL."):
        palette = x.mode in ("P", "1")
        alpha = x.mode in _ALPHA_MODES or (x.mode == "P" and "transparency" in x.info)
        x = np.asarray(x.convert("RGBA" if alpha else "RGB"))
    elif not isinstance(x, np.ndarray):
        raise TypeError(f"images[{i}]: expected a path, a PIL image or a uint8 array, got {type(x).__name__}")
    if x.dtype != np.uint8 or x.ndim != 3 or x.shape[2] not in (3, 4):
        raise TypeError(
            f"images[{i}]: expected a uint8 array of shape (height, width, 3 or 4), got {x.dtype} {tuple(x.shape)}"
        )
    return np.ascontiguousarray(x), palette


class Encoder:
    """An image/text encoder of a weights folder, as ``culturelens embed --weights DIR`` loads it.

    Load with :meth:`from_pretrained`; embed with :meth:`embed_images` and :meth:`embed_texts`.
    The rows are the CLI's to the last bit (same folder, same batch size): the same compiled
    model, preprocessing, batching and (for image files) decoding. ``device="wgpu"`` (``--device
    wgpu``) needs a wheel built with the ``gpu`` feature (docs/python.md).
    Each call runs without the GIL, and Ctrl-C interrupts it.
    """

    def __init__(self, native: Any) -> None:
        self._native = native

    @classmethod
    def from_pretrained(cls, folder: "str | os.PathLike[str]", device: str = "cpu", precision: str = "f32") -> "Encoder":
        """Loads the weights folder ``folder`` (``--weights``): transformers' ``save_pretrained``
        layout (config.json, model.safetensors or a sharded index, preprocessor_config.json for
        images, tokenizer.json or SigLIP's spiece.model for text), an OpenCLIP hub folder, or one
        written by ``culturelens import-weights``; or a hub id ``ORG/NAME[@REVISION]`` (a string that
        is no existing path): its snapshot in the hub cache, fetched as ``embed --model`` fetches it.
        ``device``: ``"cpu"`` or ``"wgpu"`` (``--device``; a wheel built with the ``gpu`` feature);
        ``precision``: ``"f32"``, ``"f16"`` or ``"bf16"`` (``--precision``; f16/bf16 on a GPU).

        Raises:
          ValueError: the CLI's message for a folder it cannot load (naming the file), or a
            ``device``/``precision`` this wheel cannot run.
        """
        return cls(_native.Encoder.from_pretrained(os.fspath(folder), device, precision))

    @property
    def family(self) -> str:
        """The model family as the CLI names it (``clip``, ``siglip``, ``dinov2``, ...)."""
        return self._native.family

    def embed_images(self, images: Sequence[Any], batch: int = 16) -> Any:
        """The image embeddings of ``images`` as an ``n x d`` float32 numpy array, in order.

        ``images`` is a sequence of image file paths, read and decoded exactly as
        ``culturelens embed`` reads them (PNG, JPEG with libjpeg-turbo, WebP: Pillow's pixels), or
        of in-memory images: PIL images or ``height x width x 3`` (RGB) / ``x 4`` (RGBA) uint8
        arrays. These skip the file decoder and go through the same preprocessing: a PIL image
        is handed over as RGB, or as RGBA when it has transparency (so the folder's alpha
        handling applies as to the file), and a palette (``P``) or bilevel (``1``) one is
        resampled with nearest neighbour as its file is. A PIL image opened from a file gives
        that file's row to the last bit where Pillow decodes the file as the CLI does (the
        fixtures: PNG, WebP, and JPEG, which both decode with libjpeg-turbo; a different
        libjpeg-turbo build may round a JPEG's pixels differently): pass paths for the CLI's
        decoder itself.
        ``batch`` images per forward pass (``--batch``, default 16).

        Raises:
          ValueError: images that cannot be read or decoded, listed as the CLI lists them
            (``N image(s) could not be embedded:`` and one ``  PATH: reason`` line each).
          TypeError: an item that is not a path, PIL image or uint8 RGB(A) array, or paths mixed
            with images.
        """
        items = list(images)
        if items and all(_is_path(x) for x in items):
            return self._native.embed_image_files([os.fsdecode(x) for x in items], batch)
        for i, x in enumerate(items):
            if _is_path(x) != _is_path(items[0]):
                raise TypeError(f"images[{i}]: mixes paths and in-memory images; pass all paths or all images")
        return self._native.embed_pixels([_pixels(x, i) for i, x in enumerate(items)], batch)

    def embed_texts(self, texts: Sequence[str], batch: int = 64) -> Any:
        """The text embeddings of ``texts`` as an ``n x d`` float32 numpy array, in order, as
        ``culturelens embed-text`` computes them (the folder's tokenizer, truncated to the text
        tower's length; OpenCLIP's text cleaning for OpenCLIP folders), ``batch`` prompts per
        forward pass (``--batch``, default 64).

        Raises:
          ValueError: the CLI's message (e.g. a folder without a tokenizer), or an empty prompt
            (which ``embed-text`` refuses in its prompt file).
          TypeError: ``texts`` is a string, or holds something that is not one.
        """
        if isinstance(texts, (str, bytes)):
            raise TypeError(f"texts: expected a sequence of str, got {type(texts).__name__}")
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"texts[{i}]: expected str, got {type(t).__name__}")
            if not t:  # the CLI's prompt files refuse an empty cell too
                raise ValueError(f"texts[{i}]: empty value: every prompt needs one")
        return self._native.embed_texts(texts, batch)

    def __repr__(self) -> str:
        return f"culturelens.Encoder(family={self.family!r})"
