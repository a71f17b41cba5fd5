"""Frames as image parts of a chat message: encoded (JPEG or PNG), content-hashed, base64.

A request carrying images is cached and keyed by the images' content hashes
(:func:`image_part` with ``redact=True``), never by the base64 text itself.
"""

from __future__ import annotations

import base64
import hashlib
import io
from dataclasses import dataclass
from typing import Any

import numpy as np

from preflab.vlm.frames import ImageFormat

MIME = {"jpeg": "image/jpeg", "png": "image/png"}
"""Content type of each image format."""


@dataclass(frozen=True, kw_only=True)
class EncodedImage:
    """One encoded frame."""

    data: bytes
    """The encoded file."""
    mime: str
    """Its content type, e.g. ``image/jpeg``."""
    width: int
    """Width in pixels."""
    height: int
    """Height in pixels."""

    @property
    def sha256(self) -> str:
        """Content hash of the encoded bytes."""
        return hashlib.sha256(self.data).hexdigest()

    @property
    def data_url(self) -> str:
        """``data:<mime>;base64,<data>``, as OpenAI-compatible servers take images."""
        return f"data:{self.mime};base64,{base64.b64encode(self.data).decode('ascii')}"


def encode(frame: np.ndarray, fmt: ImageFormat, *, quality: int = 85) -> EncodedImage:
    """An (H, W, 3) uint8 frame encoded as ``fmt`` (PNG deterministic and lossless)."""
    from PIL import Image

    arr = np.ascontiguousarray(np.asarray(frame)[..., :3], dtype=np.uint8)
    buf = io.BytesIO()
    img = Image.fromarray(arr)
    if fmt == "png":
        img.save(buf, format="PNG", optimize=False)
    else:
        img.save(buf, format="JPEG", quality=quality)
    return EncodedImage(
        data=buf.getvalue(), mime=MIME[fmt], width=arr.shape[1], height=arr.shape[0]
    )


def image_part(image: EncodedImage, *, redact: bool = False) -> dict[str, Any]:
    """The message part of ``image``; ``redact``: its content hash instead of its bytes (cache
    keys and provenance)."""
    if redact:
        url = f"sha256:{image.sha256} ({image.mime}, {image.width}x{image.height})"
    else:
        url = image.data_url
    return {"type": "image_url", "image_url": {"url": url}}
