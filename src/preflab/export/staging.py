"""Writing an export into a folder whole or not at all.

An export is written into a temporary folder inside its own folder (one filesystem, so every
move is an atomic rename), read back, and only then are its files moved into place; a failed
export (a write, the read-back or a move) leaves the previous export's files as they were and
removes the temporary folder. Files of the folder that are no export's (a ``.git`` of a Hugging
Face dataset repository, a licence) stay where they are.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from preflab.errors import DataError

TEMP_PREFIX = ".preflab-export-tmp-"
"""The name of a folder an export is written into before it replaces the previous one."""
_KEPT = "(it keeps the files it had; nothing was replaced)"


@contextlib.contextmanager
def staged(out: Path) -> Iterator[Path]:
    """A new temporary folder inside the folder ``out`` (which exists) for the block to write
    an export into; when the block succeeds its files replace those of the same names in
    ``out``, the manifest last. When the block fails, or a move fails, ``out`` keeps its files
    (moves already made are undone) and the temporary folder is removed. An OSError of the
    block or of a move becomes a DataError naming ``out``."""
    try:
        holder = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=out))
    except OSError as exc:
        raise DataError(f"cannot write the export directory {out}: {exc}") from exc
    try:
        new = holder / "new"
        new.mkdir()
        try:
            yield new
            _move_in(new, out, holder / "old")
        except OSError as exc:
            raise DataError(f"cannot write the export to {out} {_KEPT}: {exc}") from exc
    finally:
        shutil.rmtree(holder, ignore_errors=True)


def _move_in(new: Path, out: Path, old: Path) -> None:
    """Move every file of ``new`` into ``out`` (manifest.json last), each file of ``out`` it
    replaces first into ``old``; on an OSError, put ``out``'s files back and re-raise."""
    old.mkdir()
    names = sorted((p.name for p in new.iterdir()), key=lambda n: (n == "manifest.json", n))
    aside: list[str] = []
    moved: list[str] = []
    try:
        for name in names:
            if (out / name).exists() or (out / name).is_symlink():
                os.replace(out / name, old / name)
                aside.append(name)
            os.replace(new / name, out / name)
            moved.append(name)
    except OSError:
        for name in moved:
            if name not in aside:
                with contextlib.suppress(OSError):
                    (out / name).unlink()
        for name in aside:
            os.replace(old / name, out / name)
        raise


def holds_only_temp(folder: Path) -> bool:
    """Whether every entry of ``folder`` is a temporary folder an export left (killed while it
    wrote): such a folder counts as empty."""
    return all(p.name.startswith(TEMP_PREFIX) for p in folder.iterdir())
