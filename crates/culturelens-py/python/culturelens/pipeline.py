"""``culturelens.Pipeline``: the text-to-image pipelines of ``culturelens generate`` (Stable
Diffusion 1.x/2.x, AltDiffusion, SDXL, SD 3/3.5, FLUX.1, CogView4, Lumina 2, Kandinsky 3 and
2.1, DeepFloyd IF stage I; SoS §3 "Image Generation", §5.1 DiffusionLens), run by the CLI's own
compiled loop with its options, with PIL images out."""

from __future__ import annotations

import os
from typing import Any, List, Optional, Sequence

from . import _native


class Pipeline:
    """A diffusers pipeline folder, as ``culturelens generate --pipeline DIR`` loads it.

    Load with :meth:`from_pretrained`; generate with :meth:`generate`. The images are the CLI's
    to the last bit (same folder, prompts, seed and settings): the same compiled pipeline, the same
    seeded latents (torch's CPU generator, as diffusers draws them), the same batches and the same
    rounding to 8 bits as the PNGs ``generate`` writes. ``device="wgpu"`` (``--device wgpu``)
    needs a wheel built with the ``gpu`` feature (docs/python.md); ``precision="f16"`` runs there.
    Each call runs without the GIL, and Ctrl-C interrupts it (between denoising steps).
    """

    def __init__(self, native: Any) -> None:
        self._native = native

    @classmethod
    def from_pretrained(
        cls,
        folder: "str | os.PathLike[str]",
        device: str = "cpu",
        precision: str = "f32",
        offload: bool = False,
        max_sequence_length: Optional[int] = None,
        attention_slice: "str | int | None" = None,
    ) -> "Pipeline":
        """Loads the diffusers pipeline folder ``folder`` (``--pipeline``: ``model_index.json`` and
        one subfolder per component, safetensors weights, as ``save_pretrained`` writes it; its
        ``_class_name`` picks the family), or a hub id ``ORG/NAME[@REVISION]`` (a string that is
        no existing path): its snapshot in the hub cache, fetched as ``generate --model`` fetches it.

        Args:
          device, precision: ``"cpu"`` or ``"wgpu"`` (a wheel built with the ``gpu`` feature),
            ``"f32"``, ``"f16"`` or ``"bf16"`` (a GPU's): ``--device``, ``--precision``.
          offload: keep the components in the machine's memory and move each to the device only
            while it runs (``--offload``; changes nothing on the CPU).
          max_sequence_length: SD 3 and FLUX: T5 tokens (at most 512); CogView4: GLM tokens;
            Lumina 2: Gemma tokens (``--max-sequence-length``; the pipeline's default when None).
          attention_slice: ``"auto"``, ``"max"`` or N: diffusers' ``enable_attention_slicing`` of
            the UNet pipelines (``--attention-slice``; the same images).

        These three are the CLI's load-time settings, applied by the same calls as it applies
        them, so they are fixed for the loaded pipeline.

        Raises:
          ValueError: the CLI's message (the file and key at fault, or the flag), or a
            device/precision this wheel does not run.
        """
        slice_ = None if attention_slice is None else str(attention_slice)
        return cls(
            _native.Pipeline.from_pretrained(
                os.fspath(folder), device, precision, offload, max_sequence_length, slice_
            )
        )

    def generate(
        self,
        prompts: "str | Sequence[str]",
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
        latents: Any = None,
        text_layer: Optional[int] = None,
        prior_steps: Optional[int] = None,
        prior_guidance: Optional[float] = None,
        prior_latents: Any = None,
    ) -> List[Any]:
        """The images of ``prompts``, as ``culturelens generate`` makes them (SoS §3).

        Args:
          prompts: a prompt or a list of prompts.
          seed: every prompt starts from ``torch.Generator().manual_seed(seed)`` (``--seed``).
          steps, guidance: denoising steps and classifier-free guidance scale (``--steps``,
            ``--guidance``; the pipeline's defaults when None).
          negative_prompt: one negative prompt for every prompt (``--negative-prompt``).
          height, width: the image size (``--height``, ``--width``; the pipeline's default).
          scheduler: a scheduler class replacing the folder's (``--scheduler``, e.g. ``ddim``,
            ``euler``, ``dpm-solver``).
          images_per_prompt: images per prompt (``--images-per-prompt``), one draw of K latents.
          seed_per_image: image k from its own generator seeded ``seed + k`` (``--seed-per-image``).
          true_cfg: SD 3's and FLUX's true classifier-free guidance (``--true-cfg``).
          batch: prompts per pipeline call (``--batch``); the same batch gives the CLI's bits.
          latents: a float32 numpy array of the pipeline's ``latents=`` shape for every prompt
            instead of the seed's draw (``--latents``): ``(K, c, h, w)``, FLUX's packed
            ``(K, (h/2)(w/2), 4c)``, IF's ``(K, 3, H, W)``, Kandinsky 2.1's decoder's.
          text_layer: DiffusionLens: condition on text-encoder layer K (``--text-layer``).
          prior_steps, prior_guidance: Kandinsky 2.1's prior steps and guidance scale
            (``--prior-steps``, ``--prior-guidance``; diffusers' 25 and 4.0 when None).
          prior_latents: Kandinsky 2.1: a float32 array of the prior's initial latents,
            ``(K, d)`` or ``(2K, d)`` with a negative prompt (``--prior-latents``).

        Returns:
          A list of RGB ``PIL.Image`` images, prompt by prompt, each prompt's
          ``images_per_prompt`` in order (the CLI's ``000000_00.png, 000000_01.png, ...``).

        Raises:
          ValueError: the CLI's message for a bad size, scheduler, latents' shape, layer or
            setting (``latents``/``prior_latents`` named where the CLI names the file).
          TypeError: latents that are not a float32 array.
        """
        from PIL import Image

        if isinstance(prompts, str):
            prompts = [prompts]
        images = self._native.generate(
            list(prompts),
            seed=seed,
            steps=steps,
            guidance=guidance,
            negative_prompt=negative_prompt,
            height=height,
            width=width,
            scheduler=scheduler,
            images_per_prompt=images_per_prompt,
            seed_per_image=seed_per_image,
            true_cfg=true_cfg,
            batch=batch,
            latents=_float32(latents, "latents"),
            text_layer=text_layer,
            prior_steps=prior_steps,
            prior_guidance=prior_guidance,
            prior_latents=_float32(prior_latents, "prior_latents"),
        )
        return [Image.frombytes("RGB", (w, h), bytes(pixels)) for h, w, pixels in images]


def _float32(array: Any, name: str) -> Any:
    """``array`` as a float32 numpy array (None stays None); a TypeError for any other dtype (the
    CLI's ``.npy`` latents are float32, and a cast would change the bits)."""
    if array is None:
        return None
    import numpy as np

    array = np.asarray(array)
    if array.dtype != np.float32:
        raise TypeError(f"{name}: expected a float32 array, got {array.dtype}")
    return array
