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

    def write(self, seg: Segment) -> bool:
        """Write ``seg``'s arrays unless its file exists; True when this call created the file
        (:meth:`stage`, then :meth:`place`)."""
        tmp = self.stage(seg)
        if tmp is None:
            return False
        try:
            return self.place(tmp, seg.id)
        finally:
            self.discard(tmp)

    def stage(self, seg: Segment) -> Path | None:
        """Write ``seg``'s arrays to a temporary file beside their place, to be put there by
        :meth:`place` (and always :meth:`discard`-ed after); None when the file exists already.
        The slow part of a write (encoding, compressing), done before a caller takes a lock."""
        p = self.path(seg.id)
        if p.exists():
            return None
        try:
            try:
                fd, tmp = tempfile.mkstemp(dir=p.parent, suffix=".tmp")
            except FileNotFoundError:  # the first segment of its directory
                p.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=p.parent, suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as f:
                    _save(f, seg)
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError as exc:
            raise StoreError(
                f"cannot write segment arrays {p}: {exc}. Check that {self.root} is writable "
                "and its disk has space"
            ) from exc
        return Path(tmp)

    def place(self, tmp: Path, segment_id: str) -> bool:
        """Give the staged file ``tmp`` its segment's name unless a file is there; True when
        this call put it there. The file appears whole or not at all and never replaces one
        that is there: a hard link fails when another writer's file got there first, so exactly
        one writer creates each file, and only that writer may :meth:`remove` it (a file system
        without hard links falls back to an atomic rename, which may replace a file another
        writer placed meanwhile: the same id, the same content for a content id)."""
        p = self.path(segment_id)
        try:
            try:
                os.link(tmp, p)  # fails if p exists: never replaces another writer's file
            except FileExistsError:
                return False
            except OSError:  # no hard links on this file system: an atomic rename instead
                os.replace(tmp, p)
        except OSError as exc:
            raise StoreError(
                f"cannot write segment arrays {p}: {exc}. Check that {self.root} is writable"
            ) from exc
        return True

    @staticmethod
    def discard(tmp: Path) -> None:
        """Delete a staged file (placed or not: a placed one lives on under its name)."""
        tmp.unlink(missing_ok=True)

    def remove(self, segment_id: str) -> None:
        """Delete the file of ``segment_id`` if there is one: only a file the caller's
        :meth:`place` created and no stored row points to (see
        :meth:`preflab.store.segments.Segments.add`)."""
        self.path(segment_id).unlink(missing_ok=True)

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


def _save(f: Any, seg: Segment) -> None:
    """``seg``'s arrays as .npz into the open binary file ``f``."""
    # values typed Any: numpy's stubs match **arrays against savez's allow_pickle:
    # bool too (passing allow_pickle=False would store an array of it on numpy 1.x)
    arrays: dict[str, Any] = {"obs": seg.obs, "acts": seg.acts, "true_rewards": seg.true_rewards}
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
