"""Clip files keyed by content hash: ``<root>/<key[:2]>/<key>.<fmt>``, written atomically.

A key is 32 lowercase hex characters (see :meth:`preflab.media.MediaService.key_for`); any
other string is rejected before it touches the file system, so a media URL can never name a
path. Writers render into a temporary file in the same folder and ``os.replace`` it into
place: readers see either no file or the whole clip.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from pathlib import Path

from preflab.media.encode import check_format

KEY_RE = re.compile(r"^[0-9a-f]{32}$")
PART = ".part."


def valid_key(key: str) -> bool:
    """True for 32 lowercase hex characters."""
    return isinstance(key, str) and KEY_RE.fullmatch(key) is not None


def temp_path(final: Path) -> Path:
    """A unique temporary file beside ``final`` (same suffix, so ffmpeg picks the container)."""
    return final.with_name(f".{final.stem}.{uuid.uuid4().hex[:8]}{PART}{final.suffix[1:]}")


def commit(tmp: Path, final: Path) -> None:
    """Move a finished temporary file into place (atomic on one file system)."""
    os.replace(tmp, final)


class ClipCache:
    """Where the clip of each key lives."""

    def __init__(self, root: str | Path, fmt: str) -> None:
        check_format(fmt)
        self.root = Path(root)
        self.fmt = fmt
        self.root.mkdir(parents=True, exist_ok=True)

    def path_for(self, key: str) -> Path:
        """The clip's file (whether or not it exists); ValueError for a malformed key."""
        if not valid_key(key):
            raise ValueError(f"media key must be 32 lowercase hex characters, got {key!r}")
        return self.root / key[:2] / f"{key}.{self.fmt}"

    def get(self, key: str) -> Path | None:
        """The clip's file when it exists, else None (also for malformed keys)."""
        if not valid_key(key):
            return None
        p = self.path_for(key)
        return p if p.is_file() else None

    def remove_stale_parts(self, older_than_s: float = 3600.0) -> int:
        """Delete temporary files left by crashed writers; returns how many."""
        n, cutoff = 0, time.time() - older_than_s
        for p in self.root.glob(f"*/.*{PART}*"):
            try:
                if p.stat().st_mtime < cutoff:
                    p.unlink()
                    n += 1
            except OSError:
                pass
        return n
