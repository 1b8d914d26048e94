"""``culturelens.Pipeline``: the text-to-image pipelines of ``culturelens generate`` (Stable
Diffusion 1.x/2.x, AltDiffusion, SDXL, SD 3/3.5, FLUX.1, CogView4, Lumina 2, Kandinsky 3,
DeepFloyd IF stage I; SoS §3 "Image Generation"), run by the CLI's own compiled loop, with PIL
images out."""

from __future__ import annotations

import os
from typing import Any, List, Optional, Sequence

from . import _native


class Pipeline:
    """A diffusers pipeline folder, as ``culturelens generate --pipeline DIR`` loads it.

    Load with :meth:`from_pretrained`; generate with :meth:`generate`. The images are the CLI's
    to the last bit (same folder, prompts, seed and settings): the same compiled pipeline, the same
    seeded latents (torch's CPU generator, as diffusers draws them), the same batches and the same
    rounding to 8 bits as the PNGs ``generate`` writes. The wheel runs the CPU backend
    (``device="cpu"``, ``precision="f32"``); the GPU devices are the CLI's (``--device wgpu``).
    Each call runs without the GIL, and Ctrl-C interrupts it (between denoising steps).
    """

    def __init__(self, native: Any) -> None:
        self._native = native

    @classmethod
    def from_pretrained(cls, folder: "str | os.PathLike[str]", device: str = "cpu", precision: str = "f32") -> "Pipeline":
        """Loads the diffusers pipeline folder ``folder`` (``--pipeline``: ``model_index.json`` and
        one subfolder per component, safetensors weights, as ``save_pretrained`` writes it; its
        ``_class_name`` picks the family), or a hub id ``ORG/NAME[@REVISION]`` (a string that is
        no existing path): its snapshot in the hub cache, fetched as ``generate --model`` fetches it.

        Raises:
          ValueError: the CLI's message (the file and key at fault), or a device/precision this
            wheel does not run.
        """
        return cls(_native.Pipeline.from_pretrained(os.fspath(folder), device, precision))

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

        Returns:
          A list of RGB ``PIL.Image`` images, prompt by prompt, each prompt's
          ``images_per_prompt`` in order (the CLI's ``000000_00.png, 000000_01.png, ...``).

        Raises:
          ValueError: the CLI's message for a bad size, scheduler or setting.
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
        )
        return [Image.frombytes("RGB", (w, h), bytes(pixels)) for h, w, pixels in images]
