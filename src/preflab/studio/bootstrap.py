"""Opening a run's store for the studio, the owner token, and the optional media service."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import tempfile
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

from preflab.errors import ConfigError, PrefLabError
from preflab.records import Annotator
from preflab.store import FeedbackStore

log = logging.getLogger(__name__)
OWNER_ID = "studio-owner"
OWNER_TOKEN_FILE = "studio_owner_token"


def one_line(exc: PrefLabError) -> PrefLabError:
    """The same error with its message on one line (the CLI prints one line)."""
    return type(exc)(" ".join(str(exc).split()))


def open_store(run_dir: str | Path | None, store_url: str | None) -> FeedbackStore:
    """The run's store: RUN_DIR/feedback.db, or ``store_url`` (segments in RUN_DIR/segments)."""
    if run_dir is None and store_url is None:
        raise ConfigError("give a run directory (made by `preflab train`) or --store-url URL")
    run = Path(run_dir) if run_dir is not None else None
    if run is not None and not run.is_dir():
        raise ConfigError(
            f"{run} is not a directory; expected a PrefLab run directory (the one "
            "`preflab train` writes, holding feedback.db)"
        )
    if store_url is None:
        assert run is not None
        db = run / "feedback.db"
        if not db.is_file():
            raise ConfigError(
                f"{run} is not a PrefLab run directory: it has no feedback.db. Pass the "
                "directory `preflab train` wrote, or --store-url URL for a PostgreSQL store"
            )
        target: str | Path = db
    else:
        target = store_url
    arrays = run / "segments" if run is not None else Path(tempfile.mkdtemp(prefix="preflab-"))
    try:
        # a run's feedback.db is opened, never made (an emptied one is refused, not reset)
        return FeedbackStore(target, array_dir=arrays, create=store_url is not None)
    except PrefLabError as exc:
        raise one_line(exc) from exc


def shown_url(store: FeedbackStore) -> str:
    """The store URL without a password."""
    return make_url(store.url).render_as_string(hide_password=True)


def owner_token(store: FeedbackStore, run_dir: Path) -> str:
    """The owner's token, kept in RUN_DIR/studio_owner_token (mode 0600) so that the owner link
    can be printed on every start; created (and registered in the store) on first start."""
    path = run_dir / OWNER_TOKEN_FILE
    token = _stored_owner_token(path)
    if not token:
        token = secrets.token_urlsafe(24)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(token + "\n")
    os.chmod(path, 0o600)
    if store.annotators.by_token(token) is None:
        if store.annotators.get(OWNER_ID) is None:
            store.annotators.add(
                Annotator(id=OWNER_ID, source="human", name="owner", meta={"role": "owner"}),
                token=token,
            )
        else:
            store.annotators.set_token(OWNER_ID, token)
    return token


MIN_OWNER_TOKEN = 16
"""The fewest characters an owner token kept in RUN_DIR/studio_owner_token may have (the
studio makes 32): a short one could be guessed, and it signs the owner in."""


def _stored_owner_token(path: Path) -> str:
    """The token in ``path`` ('' when there is none or the file is blank); a ConfigError for
    one that is not UTF-8 text or too short to be safe."""
    if not path.is_file():
        return ""
    try:
        token = path.read_text(encoding="utf-8").strip()
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path} is not UTF-8 text ({exc.reason}). Delete the file and the studio makes a "
            "new owner token (the owner link changes)"
        ) from None
    if token and (len(token) < MIN_OWNER_TOKEN or any(c.isspace() for c in token)):
        raise ConfigError(
            f"{path} holds an owner token of {len(token)} characters"
            + (" with spaces" if any(c.isspace() for c in token) else "")
            + f"; it needs at least {MIN_OWNER_TOKEN} and no spaces, or it could be guessed. "
            "Delete the file and the studio makes a new one (the owner link changes)"
        )
    return token


def make_media(store: FeedbackStore, run_dir: Path) -> Any:
    """preflab.media.MediaService caching clips in RUN_DIR/media, or None if unavailable."""
    try:
        from preflab.media import MediaConfig, MediaService
    except ImportError as exc:
        log.warning("clips disabled: preflab.media is not available (%s)", exc)
        return None
    warm: tuple[str, ...] = ()
    # workers build the run's env and draw one frame at start: the first clip comes sooner
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):  # none: no warm env
        warm = (str(json.loads((run_dir / "config.json").read_text())["env_id"]),)
    try:
        return MediaService(store, run_dir / "media", config=MediaConfig(warm_env_ids=warm))
    except Exception as exc:
        log.warning("clips disabled: the media service did not start (%s)", exc)
        return None
