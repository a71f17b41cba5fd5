"""Output folders: a path where a command writes a folder of files (a run directory, an export,
a sweep) is checked before anything is made, so that a file in its place is a clear error."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

from preflab.errors import ConfigError, DataError


def check_output_dir(path: str | Path, *, what: str) -> Path:
    """``path`` as a :class:`~pathlib.Path` when a folder can be written there: it is a folder,
    or it does not exist and the nearest of its parents that exists is a folder. Otherwise a
    ConfigError naming ``what`` (the option that gave the path, e.g. ``--out``, or a name such as
    ``run directory``) says which file is in the way. Makes nothing."""
    p = Path(path)
    for part in (p, *p.parents):
        if part.is_dir():
            break
        if part.exists():
            raise ConfigError(_in_the_way(p, part, what))
    return p


def _in_the_way(path: Path, blocker: Path, what: str) -> str:
    if blocker == path:
        return (
            f"{what} {path} is a file, but a folder is expected there: give the path of a "
            "folder (a missing one is made), or move the file away"
        )
    return (
        f"{what} {path} must be a folder, but {blocker} is a file, so no folder can be made "
        f"inside it: give a path whose parent folders are folders, or move {blocker} away"
    )


@contextlib.contextmanager
def made_folder(out: Path, *, what: str = "export directory") -> Iterator[None]:
    """Make the folder ``out`` (and missing parents) for the block; when the block fails, remove
    what was made here, never a folder that existed before (a failed command leaves no empty
    folder behind). ``what`` names the folder in the error when it cannot be made."""
    made = next((p for p in (*reversed(out.parents), out) if not p.exists()), None)
    try:
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DataError(f"cannot create the {what} {out}: {exc}") from exc
        yield
    except BaseException:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
        raise
