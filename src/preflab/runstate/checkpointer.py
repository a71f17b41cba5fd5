"""Atomic, verified checkpoint directories (see the package docstring for the layout)."""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import random
import re
import shutil
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from preflab.device import cpu_tensors
from preflab.errors import StoreError
from preflab.testing.failpoints import failpoint

FORMAT = 2
"""The checkpoint format written. Format 2 adds checkpoints within a round, after a phase of it
(``ckpt-NNNNN-PHASE``; the loop's state names the phase: :mod:`preflab.loop.snapshot`), which a
reader of format 1 would take for the round's start and redo on top of. Format 1 (written at
round ends only, no phase) is read as before."""
READS = (1, FORMAT)
"""The formats this PrefLab reads."""
_FILES = ("state.json", "tensors.pt", "arrays.npz")


@dataclass
class Checkpoint:
    """What one checkpoint holds: JSON state, torch tensors (state_dicts) and numpy arrays."""

    state: dict[str, Any] = field(default_factory=dict)
    tensors: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)


def global_rng_state() -> tuple[dict[str, Any], torch.Tensor]:
    """The process-wide RNGs that libraries use behind our back (SB3: numpy, torch, random)."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    py = random.getstate()
    return (
        {
            "numpy": [kind, np.asarray(keys).tolist(), pos, has_gauss, cached],
            "python": [py[0], list(py[1]), py[2]],
        },
        torch.get_rng_state(),
    )


def set_global_rng_state(state: dict[str, Any], torch_state: torch.Tensor) -> None:
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, np.asarray(keys, np.uint32), pos, has_gauss, cached))
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    torch.set_rng_state(torch_state)


def _tag_floats(value: Any) -> Any:
    """``value`` with each non-finite float as ``{"__float__": "NaN" | "Infinity" |
    "-Infinity"}``: state.json is strict JSON (a NaN metric of an early round included)."""
    if isinstance(value, float) and not math.isfinite(value):
        return {"__float__": repr(value).replace("inf", "Infinity").replace("nan", "NaN")}
    if isinstance(value, dict):
        return {k: _tag_floats(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_tag_floats(v) for v in value]
    return value


def _untag_floats(value: Any) -> Any:
    """Inverse of :func:`_tag_floats` (older checkpoints with bare NaN read the same)."""
    if isinstance(value, dict):
        if set(value) == {"__float__"}:
            return float(value["__float__"])
        return {k: _untag_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_untag_floats(v) for v in value]
    return value


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _write(path: Path, data: bytes) -> None:
    with path.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


class Checkpointer:
    """Writes ``checkpoints/ckpt-NNNNN`` directories atomically (``ckpt-NNNNN-PHASE`` within round
    NNNNN, after a phase of it); reads the latest verified one. Names sort in the order they are
    written (``ckpt-00000`` < ``ckpt-00000-pretrained`` < ``ckpt-00000-warmstarted`` <
    ``ckpt-00001``); LATEST names the newest
    and the others are removed once it does."""

    def __init__(self, run_dir: str | Path) -> None:
        self.root = Path(run_dir) / "checkpoints"

    def save(self, index: int, ckpt: Checkpoint, *, phase: str = "") -> Path:
        """Write checkpoint ``index`` (temp dir, fsync, rename; then LATEST); drop older ones.
        ``phase`` (lower-case letters): a checkpoint within round ``index``, after that phase
        of it, under its own name (round ``index``'s start is never overwritten in place)."""
        if phase and not re.fullmatch(r"[a-z]+", phase):
            raise ValueError(f"a checkpoint's phase is lower-case letters, got {phase!r}")
        name = f"ckpt-{index:05d}" + (f"-{phase}" if phase else "")
        self.root.mkdir(parents=True, exist_ok=True)
        final = self.root / name
        tmp = self.root / f".tmp-{name}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        _write(tmp / "state.json", json.dumps(_tag_floats(ckpt.state), allow_nan=False).encode())
        failpoint("checkpoint_partial")
        buf = io.BytesIO()
        torch.save(cpu_tensors(ckpt.tensors), buf)  # device-free: a GPU run resumes on a CPU
        _write(tmp / "tensors.pt", buf.getvalue())
        buf = io.BytesIO()
        # read back with allow_pickle=False, so object arrays are refused on writing too
        np.savez_compressed(buf, allow_pickle=False, **ckpt.arrays)
        _write(tmp / "arrays.npz", buf.getvalue())
        manifest = {"format": FORMAT, "files": {n: _digest(tmp / n) for n in _FILES}}
        _write(tmp / "manifest.json", json.dumps(manifest).encode())
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        latest_tmp = self.root / ".LATEST.tmp"
        _write(latest_tmp, final.name.encode())
        os.replace(latest_tmp, self.root / "LATEST")
        for old in self.root.glob("ckpt-*"):
            if old != final:
                shutil.rmtree(old, ignore_errors=True)
        return final

    def written(self) -> bool:
        """Whether a checkpoint was ever written here: LATEST or a checkpoint directory exists
        (the ``.tmp-*`` directory of a write that was killed is none)."""
        return (self.root / "LATEST").exists() or any(self.root.glob("ckpt-*"))

    def latest(self) -> Path:
        """The directory LATEST names; a StoreError saying what is wrong otherwise."""
        try:
            # bytes that are no UTF-8 name no checkpoint either: the name check below says so
            name = (self.root / "LATEST").read_bytes().decode(errors="replace").strip()
        except OSError as exc:
            # names sort in the order they were written: the last is the newest
            newest = sorted(p.name for p in self.root.glob("ckpt-*") if p.is_dir())
            fix = (
                f"write the name of its newest checkpoint ({newest[-1]}) into checkpoints/LATEST"
                if newest
                else "restore the run directory from a copy"
            )
            raise StoreError(
                f"{self.root.parent} has no checkpoint (checkpoints/LATEST is missing): {fix}, "
                "or start a new run in another directory"
            ) from exc
        path = self.root / name
        if not name.startswith("ckpt-") or not path.is_dir():
            raise StoreError(
                f"checkpoints/LATEST in {self.root.parent} names {name!r}, which is not a "
                "checkpoint directory; the run directory was edited by hand. Write the name of "
                "its newest checkpoints/ckpt-* directory into it, or start a new run"
            )
        return path

    def load(self) -> Checkpoint:
        """Read and verify the latest checkpoint (digests must match the manifest)."""
        path = self.latest()
        try:
            manifest = json.loads((path / "manifest.json").read_text())
            files = manifest["files"]
            if not isinstance(files, dict):
                raise TypeError(
                    f'"files" must map file names to SHA-256 digests, got {files!r:.40}'
                )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise StoreError(
                f"checkpoint {path} has no readable manifest.json ({exc}); the run cannot be "
                "resumed or loaded from it: restore the run directory from a copy, or start a new run"
            ) from exc
        if manifest.get("format") not in READS:
            raise StoreError(
                f"checkpoint {path} has format {manifest.get('format')!r}; this PrefLab reads "
                f"formats {', '.join(map(str, READS))}. Resume it with the PrefLab version that "
                "wrote it"
            )
        for name in _FILES:
            if not (path / name).is_file() or _digest(path / name) != files.get(name):
                raise StoreError(
                    f"checkpoint file {path / name} is missing, truncated or altered (its "
                    "SHA-256 does not match manifest.json); the run cannot be resumed from it. "
                    "The store (feedback.db) was not touched"
                )
        try:
            state = _untag_floats(json.loads((path / "state.json").read_text()))
            tensors = torch.load(path / "tensors.pt", map_location="cpu", weights_only=True)
            with np.load(path / "arrays.npz", allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        except (OSError, ValueError, RuntimeError, zipfile.BadZipFile) as exc:
            raise StoreError(f"checkpoint {path} cannot be read: {exc}") from exc
        return Checkpoint(state=state, tensors=tensors, arrays=arrays)
