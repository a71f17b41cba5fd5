"""What a run was started with: ``checkpoints/run.json``, written when a run starts (and when a
resume extends its budgets), read on resume and load.

It holds a copy of the run's config (as in ``config.json`` when it was written), the kind of
feedback source (the config's ``source``, or ``"user"`` for a source passed from Python, with
its class) and the kind of env (``"config"``: the config's ``env_id``; ``"id"``, ``"factory"``
or ``"model"``: passed from Python). A resume compares ``config.json`` with the copy (an edited
``config.json`` is refused) and the parts it is given with the recorded ones. Strict JSON.
Runs made before this file existed have none; they are resumed without these checks.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, NoReturn

from preflab.errors import StoreError

FILE = "run.json"
"""Its name inside ``RUN_DIR/checkpoints``."""

PARTS = ("config", "source", "env")
"""The record's entries that are JSON objects (each may be absent)."""


def path(run_dir: str | Path) -> Path:
    return Path(run_dir) / "checkpoints" / FILE


def describe_part(part: object) -> str:
    """A user-supplied part's class as ``module.QualName``."""
    return f"{type(part).__module__}.{type(part).__qualname__}"


def save(run_dir: str | Path, record: dict[str, Any]) -> None:
    """Write ``record`` atomically (temp file, rename); ``record`` must be strict JSON."""
    p = path(run_dir)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=2, allow_nan=False) + "\n")
    os.replace(tmp, p)


def load(run_dir: str | Path) -> dict[str, Any] | None:
    """The record, or None for a run made before it existed (no file). A file that is there
    but cannot be read is refused: read as 'no record' it would turn off the checks the record
    exists for (an edited config.json, other parts on resume)."""
    p = path(run_dir)
    if not p.exists():
        return None
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError) as exc:
        raise StoreError(
            f"{p} cannot be read ({exc}); it records what the run started with, so the run "
            "cannot be checked: restore it (from a copy of the run) or start a new run"
        ) from None
    if not isinstance(data, dict):
        _refuse(p, "expected a JSON object")
    wrong = [f'"{k}": {json.dumps(data[k])[:40]}' for k in PARTS if _not_object(data, k)]
    if wrong:
        _refuse(p, f"{', '.join(PARTS)} must be JSON objects, got {', '.join(wrong)}")
    return data


def _not_object(data: dict[str, Any], key: str) -> bool:
    """Whether ``data`` has ``key`` (an older record may lack it) with a value not an object."""
    return key in data and not isinstance(data[key], dict)


def _refuse(p: Path, what: str) -> NoReturn:
    raise StoreError(
        f"{p} is not a run record ({what}); restore it from a copy of the run or start a new run"
    )


def changed_fields(
    before: dict[str, Any], after: dict[str, Any], prefix: str = ""
) -> list[tuple[str, Any, Any]]:
    """``(dotted name, before, after)`` for each value that differs between two config dicts
    (nested dicts compared field by field)."""
    out: list[tuple[str, Any, Any]] = []
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key), after.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += changed_fields(a, b, f"{prefix}{key}.")
        elif a != b:
            out.append((f"{prefix}{key}", a, b))
    return out
