"""``preflab export RUN_DIR [--out DIR]``, ``preflab export --check DIR`` (read back, verify
digests and records, and that a store's columns hold every value, as an import checks them) and
``preflab export --import DIR --into RUN_DIR_OR_URL`` (load into a store)."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

from preflab.errors import ConfigError
from preflab.export.feedback import check_fits, export_run, import_export, read_export
from preflab.rundir.folders import check_output_dir, made_folder
from preflab.runs.export import RunExportParts, run_export_parts
from preflab.store import FeedbackStore

_UNFIT = "preflab export --import would refuse this export (its files are whole)"
"""What ``--check`` says of an export whose values a store's columns cannot hold."""


def _open(target: str, *, create: bool = False) -> FeedbackStore:
    """The store of ``target`` (a run directory, a store file or URL); made only when
    ``create`` (an import's target): an export never swaps a lost store for an empty one."""
    run = Path(target)
    if "://" in target:
        return _open_url(target, create=create)
    if run.is_dir():
        return FeedbackStore(run / "feedback.db", array_dir=run / "segments", create=create)
    if run.exists():
        return FeedbackStore(run, create=create)
    raise ConfigError(
        f"{target} does not exist; pass a run directory (it holds feedback.db) or a store URL"
    )


def _open_url(url: str, *, create: bool) -> FeedbackStore:
    """The store at ``url``; a store that cannot be opened leaves no ``./segments`` behind."""
    arrays = Path("segments")
    made = not arrays.exists()
    try:
        return FeedbackStore(url, array_dir=arrays, create=create)
    except BaseException:
        if made:
            with contextlib.suppress(OSError):
                arrays.rmdir()  # only when empty: never a folder with files in it
        raise


def _check_run(target: str) -> None:
    """Refuse a directory that holds no run before anything is opened or written."""
    run = Path(target)
    if "://" not in target and run.is_dir() and not (run / "feedback.db").is_file():
        raise ConfigError(
            f"{target} is not a PrefLab run directory (no feedback.db); pass a directory made "
            "by `preflab train`, or a store URL"
        )


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="preflab export", description=__doc__)
    ap.add_argument("run_dir", nargs="?", help="run directory (holds feedback.db) or a store URL")
    ap.add_argument("--out", default="", help="export directory (default RUN_DIR/export)")
    ap.add_argument(
        "--check",
        default="",
        help="read an export directory back, check it as --import does and report its counts",
    )
    ap.add_argument("--import", dest="import_dir", default="", help="export directory to load")
    ap.add_argument(
        "--into", default="", help="with --import: run directory (created) or store URL"
    )
    args = ap.parse_args(argv)
    if args.check:
        data = read_export(args.check)
        check_fits(Path(args.check), data, outcome=_UNFIT)  # as --import checks it
        print(
            f"{args.check}: {len(data.segments)} segments, {len(data.queries)} queries, "
            f"{len(data.judgements)} judgements, {len(data.answers)} answers, "
            f"{len(data.labels)} labels trained on ({data.labels_aggregator}; p = P(a ≻ b)), "
            f"{len(data.ratings)} ratings, {len(data.annotators)} annotators; digests match, "
            "every value fits a store's columns"
        )
        return 0
    if args.import_dir:
        target = args.into or args.run_dir
        if not target:
            ap.error("--import DIR needs --into RUN_DIR (or a store URL)")
        into = None if "://" in target else check_output_dir(target, what="--into")
        data = read_export(args.import_dir)  # a bad export: refused before any store is made
        with made_folder(into, what="--into folder") if into else contextlib.nullcontext():
            store = _open(target, create=True)  # a failed import leaves no new run folder
            try:
                counts = import_export(args.import_dir, store, data=data)
            finally:
                store.close()
        print(f"imported into {store.url}: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
        return 0
    if not args.run_dir:
        ap.error("give a RUN_DIR to export, --check DIR, or --import DIR --into RUN_DIR")
    _check_run(args.run_dir)
    run = Path(args.run_dir)
    out = check_output_dir(args.out or (run / "export" if run.is_dir() else "export"), what="--out")
    store = _open(args.run_dir)
    parts = run_export_parts(run) if run.is_dir() else RunExportParts()
    try:
        counts = export_run(
            store, out, source_run=store.url, aggregator=parts.aggregator, simulated=parts.simulated
        )
    finally:
        store.close()  # not left to the garbage collector: a run's -wal/-shm files go with it
    print(f"exported to {out}: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    return 0
