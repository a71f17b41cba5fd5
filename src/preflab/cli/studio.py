"""``preflab studio RUN_DIR``: serve PrefLab Studio for a run; ``preflab studio add-annotator``;
``preflab studio task TEXT RUN_DIR``; ``preflab studio study RUN_DIR`` (a study with real
people, :mod:`preflab.cli.studio_study`)."""

from __future__ import annotations

import argparse
import ipaddress
import json
import logging
import os
import secrets
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from preflab.config.ports import check_port
from preflab.errors import ConfigError
from preflab.records import Annotator

if TYPE_CHECKING:
    from preflab.store import FeedbackStore

log = logging.getLogger("preflab.studio")


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _link(host: str, port: int, token: str) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/#token={token}"


def _need_web_extra() -> None:
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            f"the studio needs FastAPI and uvicorn ({exc}); install them with "
            "pip install 'preflab[web]' (or bash scripts/setup.sh)"
        ) from exc


def serve(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="preflab studio",
        description="Serve PrefLab Studio (people judge behaviour while the run trains). "
        "Also: preflab studio add-annotator NAME RUN_DIR",
    )
    ap.add_argument("run_dir", help="run directory written by `preflab train` (holds feedback.db)")
    ap.add_argument("--store-url", help="SQLAlchemy URL of the store (default RUN_DIR/feedback.db)")
    ap.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    ap.add_argument("--no-media", action="store_true", help="do not render clips")
    ap.add_argument("--access-log", action="store_true", help="log every request")
    queue = ap.add_argument_group("how people are asked")
    queue.add_argument(
        "--repeat-share",
        type=float,
        default=0.0,
        help="share of a person's answered pairs asked once more as a consistency check "
        "(default 0: nobody is asked a pair twice; the Owner page shows the agreement)",
    )
    queue.add_argument(
        "--min-plays",
        type=int,
        default=1,
        help="times both clips must play before an answer counts (default 1; 0: no check)",
    )
    queue.add_argument(
        "--min-answer-s",
        type=float,
        default=1.0,
        help="seconds after a pair is shown before its answer is accepted (default 1)",
    )
    queue.add_argument(
        "--undo-s",
        type=float,
        default=10.0,
        help="seconds an answer can be undone; the trainer takes it only after (default 10)",
    )
    web = ap.add_argument_group("serving on the internet behind a TLS proxy (issue #61)")
    web.add_argument(
        "--root-path",
        default="",
        help="path prefix the proxy serves the studio under, e.g. /study (default: none)",
    )
    web.add_argument(
        "--forwarded-allow-ips",
        default="",
        help="addresses of the proxy whose X-Forwarded-For/-Proto headers are trusted (the "
        "client address used by the rate limits), e.g. 127.0.0.1 (default: none trusted)",
    )
    web.add_argument(
        "--secure-cookies",
        action="store_true",
        help="mark the session cookie Secure (when the proxy serves HTTPS)",
    )
    args = ap.parse_args(argv)
    if args.workers < 1:
        raise ConfigError(f"--workers must be ≥ 1, got {args.workers}")
    if args.root_path and (not args.root_path.startswith("/") or args.root_path.endswith("/")):
        raise ConfigError(
            f"--root-path must start with / and not end with one (e.g. /study), got "
            f"{args.root_path!r}"
        )
    queue_rules = _queue_rules(args)
    if args.secure_cookies:
        queue_rules["cookie_secure"] = True
    _need_web_extra()
    from preflab.studio.auth import TokenMaskFilter
    from preflab.studio.bootstrap import (
        OWNER_TOKEN_FILE,
        make_media,
        open_store,
        owner_token,
        shown_url,
    )
    from preflab.studio.config import StudioConfig
    from preflab.studio.launch import (
        ENV_INSTANCE,
        ENV_PARENT_PID,
        check_port_free,
        exit_with_parent,
        log_config,
    )

    run = Path(args.run_dir)
    store = open_store(run, args.store_url)
    _check_stored_study(store, run)
    check_port_free(args.host, args.port, port_flag="--port", host_flag="--host")
    token = owner_token(store, run)
    import uvicorn

    shown = f"[{args.host}]" if ":" in args.host else args.host
    print(f"PrefLab Studio: http://{shown}:{args.port}/  (store {shown_url(store)})")
    if sys.stdout.isatty():
        print(f"owner link (keep it private): {_link(args.host, args.port, token)}")
    else:  # a log file: never write the token (it is in RUN_DIR/studio_owner_token, mode 600)
        print(
            f"owner link (keep it private): {_link(args.host, args.port, '***')} with the "
            f"token in {run / OWNER_TOKEN_FILE}"
        )
    print(f"add people with: preflab studio add-annotator NAME {run}", flush=True)
    if not _is_loopback(args.host):
        log.warning("serving plain HTTP on %s: anyone on that network can reach it", args.host)
    instance = os.environ.get(ENV_INSTANCE) or secrets.token_hex(16)
    os.environ[ENV_INSTANCE] = instance  # uvicorn's worker processes (--workers N) read it
    for handler in logging.getLogger().handlers:  # tokens never reach a log
        handler.addFilter(TokenMaskFilter())
    parent = os.environ.get(ENV_PARENT_PID, "")
    if parent.isdigit():  # started by `preflab train --studio`: stop when the trainer is gone
        exit_with_parent(int(parent))
    common = {
        "host": args.host,
        "port": args.port,
        "access_log": args.access_log,
        "log_level": "info",
        "log_config": log_config(),
        "timeout_graceful_shutdown": 5,
        "timeout_keep_alive": 30,
        "root_path": args.root_path,
        "proxy_headers": bool(args.forwarded_allow_ips),
        "forwarded_allow_ips": args.forwarded_allow_ips or None,
    }
    if args.workers == 1:
        from preflab.studio.app import create_app

        media = None if args.no_media else make_media(store, run)
        try:
            config = StudioConfig(instance=instance, **queue_rules)
            app = create_app(store, media=media, config=config, run_dir=run)
            uvicorn.run(app, **common)
        finally:
            if media is not None:
                media.close()
        return 0
    from preflab.studio import serve as factory

    store.close()
    os.environ[factory.ENV_RUN_DIR] = str(run.resolve())
    os.environ[factory.ENV_STORE_URL] = args.store_url or ""
    os.environ[factory.ENV_MEDIA] = "0" if args.no_media else "1"
    os.environ[factory.ENV_QUEUE] = json.dumps(queue_rules)
    uvicorn.run("preflab.studio.serve:app_from_env", factory=True, workers=args.workers, **common)
    return 0


def _check_stored_study(store: FeedbackStore, run: Path) -> None:
    """A crowd study stored in the run whose settings this PrefLab refuses (edited by hand, or
    stored by an older PrefLab that took a blank text) stops the studio before it serves, naming
    the setting and the command that changes it: served, every study page would fail."""
    from preflab.studio import study as study_mod

    try:
        study_mod.load(store)
    except ConfigError as exc:
        store.close()
        raise ConfigError(
            f"the crowd study stored in {run} cannot be served: {exc}; change it with "
            f"`preflab studio study {run} --OPTION VALUE` (see `preflab studio study --help`)"
        ) from exc


def _queue_rules(args: argparse.Namespace) -> dict[str, Any]:
    """The StudioConfig fields set by the "how people are asked" flags, checked in one go."""
    bad = []
    if not 0.0 <= args.repeat_share <= 1.0:
        bad.append(f"--repeat-share must be in [0, 1], got {args.repeat_share}")
    if args.min_plays < 0:
        bad.append(f"--min-plays must be ≥ 0, got {args.min_plays}")
    if not 0.0 <= args.min_answer_s <= 600:
        bad.append(f"--min-answer-s must be in [0, 600] seconds, got {args.min_answer_s}")
    if not 0.0 <= args.undo_s <= 3600:
        bad.append(f"--undo-s must be in [0, 3600] seconds, got {args.undo_s}")
    if bad:
        raise ConfigError("; ".join(bad))
    return {
        "repeat_share": float(args.repeat_share),
        "min_plays": int(args.min_plays),
        "min_answer_s": float(args.min_answer_s),
        "undo_grace_s": float(args.undo_s),
    }


def add_annotator(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="preflab studio add-annotator",
        description="Create an annotator and print their personal studio link.",
    )
    ap.add_argument("name", help="display name")
    ap.add_argument("run_dir", nargs="?", help="run directory (holds feedback.db)")
    ap.add_argument("--store-url", help="SQLAlchemy URL of the store instead of RUN_DIR")
    ap.add_argument("--owner", action="store_true", help="give them the owner's role")
    ap.add_argument("--host", default="127.0.0.1", help="host shown in the link")
    ap.add_argument("--port", type=int, default=8765, help="port shown in the link")
    args = ap.parse_args(argv)
    if not args.name.strip() or len(args.name) > 256:
        raise ConfigError("NAME must be 1 to 256 characters")
    check_port(
        args.port,
        fix="give the port the studio serves on (`preflab studio RUN_DIR --port P`; "
        "default 8765), so that the printed link leads there",
    )
    from preflab.studio.bootstrap import open_store

    store = open_store(args.run_dir, args.store_url)
    token = secrets.token_urlsafe(24)
    role = "owner" if args.owner else "annotator"
    aid = "h-" + uuid.uuid4().hex[:12]
    store.annotators.add(
        Annotator(id=aid, source="human", name=args.name, meta={"role": role}), token=token
    )
    store.close()
    print(f"{role} {args.name!r} (id {aid}): {_link(args.host, args.port, token)}")
    return 0


def set_task(argv: list[str]) -> int:
    """``preflab studio task TEXT RUN_DIR``: the task instructions every annotator sees."""
    ap = argparse.ArgumentParser(
        prog="preflab studio task",
        description="Set what the agent should do, shown to every annotator above the clips "
        "(also editable on the studio's Owner page). An empty TEXT clears it.",
    )
    ap.add_argument("text", help="the instructions, plain text (at most 500 characters)")
    ap.add_argument("run_dir", nargs="?", help="run directory (holds feedback.db)")
    ap.add_argument("--store-url", help="SQLAlchemy URL of the store instead of RUN_DIR")
    args = ap.parse_args(argv)
    from preflab.studio.bootstrap import open_store
    from preflab.studio.schemas import TASK_MAX_CHARS

    text = args.text.strip()
    if len(text) > TASK_MAX_CHARS:
        raise ConfigError(
            f"TEXT has {len(text)} characters; at most {TASK_MAX_CHARS} fit above the clips: "
            "shorten it"
        )
    store = open_store(args.run_dir, args.store_url)
    try:
        store.settings.set("task", {"text": text, "updated_at": time.time(), "by": "cli"})
    finally:
        store.close()
    print(f"task set: {text!r}" if text else "task cleared")
    return 0


def main(argv: list[str]) -> int:
    if argv and argv[0] == "study":
        from preflab.cli.studio_study import main as study_main

        return study_main(argv[1:])
    if argv and argv[0] == "add-annotator":
        return add_annotator(argv[1:])
    if argv and argv[0] == "task":
        return set_task(argv[1:])
    return serve(argv)
