"""``preflab export RUN_DIR [--out DIR]`` and ``preflab export --check DIR`` (read back)."""

from __future__ import annotations

import argparse
from pathlib import Path

from preflab.exporting import export_run, read_export
from preflab.store import FeedbackStore


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="preflab export", description=__doc__)
    ap.add_argument("run_dir", nargs="?", help="run directory (holds feedback.db) or a store URL")
    ap.add_argument("--out", default="", help="export directory (default RUN_DIR/export)")
    ap.add_argument(
        "--check", default="", help="read an export directory back and report its counts"
    )
    args = ap.parse_args(argv)
    if args.check:
        data = read_export(args.check)
        print(
            f"{args.check}: {len(data.segments)} segments, {len(data.queries)} queries, "
            f"{len(data.judgements)} judgements, {len(data.labels)} labels (p = P(a ≻ b))"
        )
        return 0
    if not args.run_dir:
        ap.error("give a RUN_DIR to export, or --check DIR")
    run = Path(args.run_dir)
    target = run / "feedback.db" if run.is_dir() else args.run_dir
    store = FeedbackStore(target, array_dir=run / "segments" if run.is_dir() else None)
    out = Path(args.out or run / "export")
    counts = export_run(store, out, source_run=str(run))
    print(f"exported to {out}: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    return 0
