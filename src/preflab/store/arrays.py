"""Segment arrays in compressed .npz files addressed by segment id (a content hash)."""

from __future__ import annotations

import os
import re
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from preflab.errors import StoreError
from preflab.pixels.frames import compact_frames, stacked_view
from preflab.records import Segment

SEGMENT_ID = re.compile(r"^(s-[0-9a-f]{20}|[A-Za-z0-9][A-Za-z0-9_-]{0,63})$")
"""Segment ids: the content hash ``s-`` + 20 lowercase hex digits (Segment.content_id), or an
id of your own of 1–64 letters, digits, '_' and '-' starting with a letter or digit (no dots or
slashes: ids become file names)."""


class ArrayStore:
    """``<root>/<id[-4:]>/<id>.npz`` with obs, acts, true_rewards and (optional) states;
    written atomically. Files written before ``states`` existed still load (states absent).

    Image segments whose observations are a sliding frame stack (T, k, H, W) are stored as
    ``frames`` (T + k − 1, H, W) and ``frame_stack`` = k instead of ``obs`` (the newest frame of
    every step plus the k − 1 before the segment) and rebuilt on read."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def path(self, segment_id: str) -> Path:
        if not isinstance(segment_id, str) or not SEGMENT_ID.match(segment_id):
            raise StoreError(
                f"segment id {str(segment_id)[:80]!r} is not a valid segment id; expected "
                "'s-' + 20 hex digits (Segment.content_id) or 1–64 letters, digits, '_' or '-' "
                "starting with a letter or digit"
            )
        return self.root / segment_id[-4:] / f"{segment_id}.npz"

    def write(self, seg: Segment) -> None:
        p = self.path(seg.id)
        if p.exists():
            return
        try:
            fd, tmp = tempfile.mkstemp(dir=p.parent, suffix=".tmp")
        except FileNotFoundError:  # the first segment of its directory
            p.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=p.parent, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                # values typed Any: numpy's stubs match **arrays against savez's allow_pickle:
                # bool too (passing allow_pickle=False would store an array of it on numpy 1.x)
                arrays: dict[str, Any] = {
                    "obs": seg.obs,
                    "acts": seg.acts,
                    "true_rewards": seg.true_rewards,
                }
                frames = compact_frames(seg.obs) if seg.obs.ndim == 4 else None  # pixels
                if frames is not None:
                    del arrays["obs"]
                    arrays["frames"] = frames
                    arrays["frame_stack"] = np.asarray(seg.obs.shape[1], np.int64)
                if seg.states is not None:
                    arrays["states"] = seg.states
                # images compress well; float rows barely do (≈6 %) and cost twice the time
                save = np.savez_compressed if seg.obs.dtype == np.uint8 else np.savez
                save(f, **arrays)
            os.replace(tmp, p)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def read(self, segment_id: str) -> dict[str, np.ndarray]:
        """obs, acts, true_rewards, and states when the file has them."""
        p = self.path(segment_id)
        try:
            with np.load(p, allow_pickle=False) as z:
                out = {k: z[k] for k in ("acts", "true_rewards")}
                if "frames" in z.files:  # pixels: a compacted frame stack
                    out["obs"] = stacked_view(z["frames"], int(z["frame_stack"]))
                else:
                    out["obs"] = z["obs"]
                if "states" in z.files:
                    out["states"] = z["states"]
                return out
        except (OSError, EOFError, KeyError, ValueError, zipfile.BadZipFile) as exc:
            raise StoreError(f"segment arrays {p} are missing or corrupt: {exc}") from exc
