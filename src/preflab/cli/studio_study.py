"""``preflab studio study RUN_DIR``: create or change the run's study with real people (issue
#61), print its link, close or open enrolment, and write its payments table and agreement
statistics."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from preflab.errors import ConfigError
from preflab.rundir.folders import check_output_dir

if TYPE_CHECKING:
    from preflab.store import FeedbackStore

log = logging.getLogger("preflab.studio")

LINK_FILE = "study_link"
"""RUN_DIR/study_link (mode 0600): the study link's secret, so the link can be printed again
(the store keeps only its SHA-256)."""
PROLIFIC_TAIL = (
    "?PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
)
"""What Prolific's "study URL" needs after the link: its placeholders for the three ids."""

_FLAGS: dict[str, tuple[type, str]] = {
    "title": (str, "shown at the top of every study page"),
    "cap": (int, "most people who may join"),
    "overlap": (int, "people per pair (k); SML labels the crowd when k >= 3"),
    "gold_rate": (float, "share of questions that are attention checks (default 0.1)"),
    "gold_fail_share": (float, "flag a person failing more than this share of checks"),
    "quota_answers": (int, "answers after which a person is done (0: none)"),
    "quota_minutes": (float, "minutes on task after which a person is done (0: none)"),
    "completion_code": (str, "the code the completion page shows (Prolific's)"),
    "redirect_url": (str, "where the completion page sends people"),
    "practice_pairs": (int, "practice pairs with feedback before answers count"),
    "clip_s": (float, "seconds a pair's clips play (0: from the segments)"),
}


def _write_secret(run_dir: Path, secret: str) -> None:
    """Write the link's ``secret`` to RUN_DIR/study_link (mode 0600) atomically: a temporary
    file in the same folder, synced, then renamed over it, so a kill or a full disk leaves the
    old file or the new one, never an empty or partial one. Call it before the store gets the
    secret's hash: a failure after this leaves a file that no longer matches the store, which
    :func:`_read_secret` then refuses."""
    path = run_dir / LINK_FILE
    try:
        fd, tmp = tempfile.mkstemp(dir=run_dir, prefix=f".{LINK_FILE}.", suffix=".tmp")
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror}") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:  # mkstemp: mode 0600
            f.write(secret + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror}") from exc
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)  # gone once renamed
    with contextlib.suppress(OSError):  # the rename itself survives a power cut (POSIX)
        dir_fd = os.open(run_dir, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _read_secret(store: FeedbackStore, run_dir: Path) -> tuple[str | None, str]:
    """(the secret in RUN_DIR/study_link, "") when it is the stored study's link (its SHA-256
    is the one the store keeps), else (None, why not): the file is missing, unreadable, empty
    or holds another link (left by a renewal that was cut off)."""
    path = run_dir / LINK_FILE
    try:
        secret = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None, f"{path} is missing"
    except (OSError, UnicodeError) as exc:
        return None, f"{path} cannot be read ({getattr(exc, 'strerror', None) or exc})"
    if not secret:
        return None, f"{path} is empty"
    from preflab.store.annotators import hash_token
    from preflab.studio import study as S

    found = store.studies.by_link(hash_token(secret)) if S.SLUG_RE.match(secret) else None
    if found is None or found.id != S.STUDY_ID:
        return None, f"{path} does not hold the study's current link"
    return secret, ""


def _texts(consent: Path | None, instructions: Path | None) -> dict[str, str]:
    """The study's texts from the --consent and --instructions files given (UTF-8 text), each
    checked as :class:`StudyConfig` checks it (an empty or whitespace-only file is refused: its
    page would be blank), the error naming the file."""
    from preflab.rundir.textfiles import read_text_file
    from preflab.studio.study_config import StudyConfig

    texts = {}
    for field, flag, path in (
        ("consent_md", "--consent", consent),
        ("instructions_md", "--instructions", instructions),
    ):
        if path is None:
            continue
        text = read_text_file(path, what=flag)
        try:
            StudyConfig.from_json({field: text})
        except ConfigError as exc:
            raise ConfigError(f"{flag} {path}: {exc}") from exc
        texts[field] = text
    return texts


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="preflab studio study",
        description="Create or change the run's study (one link anyone may open, consent, "
        "practice, attention checks, overlap, completion code) and print its link.",
    )
    ap.add_argument("run_dir", help="run directory (holds feedback.db)")
    ap.add_argument(
        "--store-url", help="SQLAlchemy URL of the store instead of RUN_DIR/feedback.db"
    )
    for name, (typ, help_) in _FLAGS.items():
        ap.add_argument("--" + name.replace("_", "-"), type=typ, help=help_)
    ap.add_argument("--consent", type=Path, help="Markdown file with the consent text")
    ap.add_argument("--instructions", type=Path, help="Markdown file with the instructions")
    ap.add_argument("--new-link", action="store_true", help="a new link (the old one stops)")
    state = ap.add_mutually_exclusive_group()
    state.add_argument("--close", action="store_true", help="close enrolment to new people")
    state.add_argument("--open", action="store_true", help="open enrolment again")
    ap.add_argument(
        "--export",
        type=Path,
        metavar="DIR",
        help="write study_payments.csv and study_agreement.json into DIR",
    )
    ap.add_argument("--url", default="http://127.0.0.1:8765", help="the studio's public URL")
    args = ap.parse_args(argv)
    from preflab.studio import study as S
    from preflab.studio.bootstrap import open_store
    from preflab.studio.study_config import StudyConfig

    changes: dict[str, Any] = {k: getattr(args, k) for k in _FLAGS if getattr(args, k) is not None}
    changes.update(_texts(args.consent, args.instructions))
    if args.export is not None:  # before the study changes: a refused --export changes nothing
        check_output_dir(args.export, what="--export")
    run = Path(args.run_dir)
    store = open_store(run, args.store_url)
    try:
        loaded = store.studies.get(S.STUDY_ID)
        # the stored settings and the changes checked together, so that a stored setting this
        # PrefLab refuses (a blank text an older one accepted) can be replaced by its option
        config = StudyConfig.from_json({**(dict(loaded.config) if loaded else {}), **changes})
        kept, why = (None, "") if loaded is None or args.new_link else _read_secret(store, run)
        if kept is None:
            if why:
                log.warning(
                    "%s: making a new study link; the old link stops working, so give people "
                    "the new one printed below",
                    why,
                )
            # the file first: a failure between the two leaves a file the store does not
            # match, which the next call replaces (never a printed link the studio refuses)
            secret = S.new_secret()
            _write_secret(run, secret)
            S.create(store, config, secret=secret)
            print("study created" if loaded is None else "study link renewed")
        else:
            secret = kept
            store.studies.put(S.STUDY_ID, link_hash=None, config=config.to_json())
            print("study updated" if changes else "study unchanged")
        if args.close or args.open:
            store.studies.set_closed(S.STUDY_ID, bool(args.close))
            print("enrolment closed" if args.close else "enrolment open")
        link = f"{args.url.rstrip('/')}/s/{secret}"
        print(f"study link: {link}")
        print(f"  on Prolific, the study URL: {link}{PROLIFIC_TAIL}")
        print(f"  elsewhere, add ?pid=ID to carry a participant id: {link}?pid=ID")
        print(
            f"  {config.cap} people at most, k = {config.overlap}, attention checks "
            f"{config.gold_rate:.0%}, quota {config.quota_answers} answers, completion code "
            f"{config.completion_code or '(none)'}"
        )
        if args.export is not None:
            from preflab.studio.study_report import export_files

            args.export.mkdir(parents=True, exist_ok=True)
            for name, text in export_files(store).items():
                (args.export / name).write_text(text, encoding="utf-8")
                print(f"wrote {args.export / name}")
    finally:
        store.close()
    return 0
