"""``preflab crowd aggregate FILE``: crowd judgements in, labels and annotator estimates out.

FILE is CSV or parquet with columns ``query``, ``annotator``, ``answer``. With
``--answers vote`` (default) an answer is +1 (first preferred), −1 (second) or 0 (tie /
skip); with ``--answers p`` it is p = P(first ≻ second) in [0, 1] (0.5 or empty = no vote).
FILE may also be PrefLab's own export (``preflab export``): its directory or its
``judgements.parquet`` (columns query_id, annotator_id, p; read as ``--answers p``, digests
checked when the manifest is beside it; pair queries only).
Writes to ``--out`` (default: ``<FILE stem>-aggregate/`` next to FILE or the export directory):

* ``labels.csv``     query, label (+1/−1/0), p, n_answers, a, b (the query's segments, for
  an export; empty for CSV)
* ``annotators.csv`` annotator, n_answers, sml_weight, est_accuracy, agreement, group
* ``viewpoints.json`` number of groups chosen by BIC, the BIC values and group means

Labels come from the same aggregator objects as the training loop
(:class:`preflab.aggregate.MajorityAggregator` / :class:`preflab.aggregate.SMLAggregator`):
every row becomes a judgement, in file order. Repeated answers: when an annotator answers a
query more than once, the LATER row counts (the loop's latest-answer rule); a later 0 / empty
answer withdraws that annotator's vote. SML weights, accuracies and viewpoints are estimated
whenever there are ≥ 3 annotators, whatever ``--method`` chose the labels. Nothing in FILE is
modified.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from preflab.aggregate import (
    CrowdAggregator,
    Feedback,
    MajorityAggregator,
    SMLAggregator,
    find_viewpoints,
    sml,
)
from preflab.errors import DataError, PrefLabError
from preflab.kinds import PAIR, kind_of
from preflab.records import Judgement, Query
from preflab.rundir.folders import check_output_dir

PARQUET = (".parquet", ".pq")
"""File name suffixes read as parquet (anything else as CSV)."""


@dataclass(frozen=True, kw_only=True)
class CrowdInput:
    """Judgements read from FILE, as strings (answers parsed later)."""

    queries: list[str]
    """Query id of every row."""
    annotators: list[str]
    """Annotator id of every row."""
    answers: list[str]
    """Answer of every row ('' = no answer)."""
    answer_kind: str | None = None
    """'p' when the file says its convention (a PrefLab export), else None (--answers)."""
    pairs: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Query id → (first, second) segment ids, when the file names them (an export)."""
    first_row: int = 2
    """The row number of the first judgement in FILE, for messages: 2 in a CSV (row 1 is
    its header), 1 in a parquet table."""


def read_input(path: Path) -> CrowdInput:
    """A CSV or parquet table of judgements, or PrefLab's own export (its directory, or its
    judgements.parquet)."""
    if path.is_dir():
        if not (path / "manifest.json").is_file():
            raise DataError(
                f"{path} is a directory but not a PrefLab export (no manifest.json); pass a "
                "CSV or parquet file, or a directory written by `preflab export`"
            )
        return _from_export(path)
    if path.suffix.lower() in PARQUET and path.is_file():
        import pyarrow.parquet as pq

        try:
            names = set(pq.read_schema(path).names)
        except Exception as exc:  # pyarrow raises several unrelated types
            raise DataError(f"cannot read parquet file {path}: {exc}") from exc
        if {"query_id", "annotator_id", "p"} <= names:  # PrefLab's judgements.parquet
            if (path.parent / "manifest.json").is_file():
                return _from_export(path.parent)
            table = pq.read_table(path, columns=["query_id", "annotator_id", "p"])
            return CrowdInput(
                queries=[str(v) for v in table.column("query_id").to_pylist()],
                annotators=[str(v) for v in table.column("annotator_id").to_pylist()],
                answers=[_answer_text(v) for v in table["p"].to_pylist()],
                answer_kind="p",
                first_row=1,
            )
    q, a, ans = read_table(path)
    first_row = 1 if path.suffix.lower() in PARQUET else 2  # a CSV's row 1: its header
    return CrowdInput(queries=q, annotators=a, answers=ans, first_row=first_row)


def _answer_text(value: object) -> str:
    """A parquet cell as the answer text :func:`parse_answers` reads: '' for none, a number as
    its float's repr, anything else (a string, a list) as written, refused there by row."""
    if value is None:
        return ""
    if isinstance(value, (bool, int, float)):
        return repr(float(value))
    return str(value)


def _from_export(directory: Path) -> CrowdInput:
    """The pair judgements of an export (read back and checked by
    :func:`preflab.export.feedback.read_export`)."""
    from preflab.export.feedback import read_export

    data = read_export(directory)
    pairs = {q.id: p for q in data.queries if (p := kind_of(q).as_pair(q)) is not None}
    rows = [j for j in data.judgements if j.query_id in pairs]
    return CrowdInput(
        queries=[j.query_id for j in rows],
        annotators=[j.annotator_id for j in rows],
        answers=[_answer_text(j.p) for j in rows],
        answer_kind="p",
        pairs=pairs,
    )


def read_table(path: Path) -> tuple[list[str], list[str], list[str]]:
    """The three columns of a CSV or parquet file, as strings (answers parsed later)."""
    if not path.is_file():
        raise DataError(f"no such file: {path}; pass a CSV or parquet file of judgements")
    if path.suffix.lower() in PARQUET:
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except Exception as exc:  # pyarrow raises several unrelated types
            raise DataError(f"cannot read parquet file {path}: {exc}") from exc
        cols = {name.lower(): name for name in table.column_names}
        missing = [c for c in ("query", "annotator", "answer") if c not in cols]
        if missing:
            raise DataError(f"{path} lacks column(s) {missing}; expected query, annotator, answer")
        get = lambda c: ["" if v is None else str(v) for v in table.column(cols[c]).to_pylist()]  # noqa: E731
        return get("query"), get("annotator"), get("answer")
    return _read_csv(path)


MAX_FIELD = 10_000
"""Longest field accepted in a crowd CSV (characters); ids and answers are short."""


def _read_csv(path: Path) -> tuple[list[str], list[str], list[str]]:
    """CSV in UTF-8 (a byte-order mark is accepted); every row must have the header's fields."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(
            f"{path} is not UTF-8 text (byte {exc.start} cannot be decoded); save it as UTF-8 "
            "(e.g. iconv -f latin1 -t utf-8)"
        ) from exc
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc}") from exc
    if "\x00" in text:
        raise DataError(f"{path} holds NUL bytes; expected a text CSV file")
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader, None)
        if header is None:
            raise DataError(f"{path} is empty; expected a header query,annotator,answer")
        fields = {f.strip().lower(): k for k, f in enumerate(header)}
        missing = [c for c in ("query", "annotator", "answer") if c not in fields]
        if missing:
            raise DataError(
                f"{path} lacks column(s) {missing} (has {list(fields)[:10]}); expected a "
                "header query,annotator,answer"
            )
        cols: tuple[list[str], list[str], list[str]] = ([], [], [])
        for row in reader:
            line = reader.line_num
            if not row:
                continue  # blank line
            if len(row) != len(header):
                raise DataError(
                    f"{path} line {line}: {len(row)} field(s), the header has {len(header)}; "
                    "every row needs query,annotator,answer (quote fields holding commas)"
                )
            for k, name in enumerate(("query", "annotator", "answer")):
                value = row[fields[name]]
                if len(value) > MAX_FIELD:
                    raise DataError(
                        f"{path} line {line}: field {name!r} is {len(value):,} characters "
                        f"long; at most {MAX_FIELD:,} are accepted"
                    )
                cols[k].append(value.strip())
    except csv.Error as exc:
        if "field limit" in str(exc):
            raise DataError(
                f"{path} line {reader.line_num}: a field is longer than "
                f"{csv.field_size_limit():,} characters; ids and answers are short"
            ) from exc
        raise DataError(f"{path} is not a valid CSV file (line {reader.line_num}): {exc}") from exc
    return cols


def parse_answers(
    raw: list[str], kind: str, *, where: str | Path = "", first_row: int = 2
) -> np.ndarray:
    """Votes (+1/−1/0) from answer strings; DataError names the file (``where``) and the first
    bad row (``first_row``: the row number of ``raw[0]`` there)."""
    out = np.zeros(len(raw), dtype=np.int8)
    at = f"{where} row" if where else "row"
    for i, s in enumerate(raw):
        if s == "" and kind == "p":
            continue
        try:
            x = float(s)
        except ValueError:
            x = float("nan")
        if kind == "vote":
            if x not in (-1.0, 0.0, 1.0):
                raise DataError(
                    f"{at} {i + first_row}: answer {s!r} is not a vote; expected +1 (first "
                    "preferred), −1 (second) or 0 (tie/skip), or pass --answers p for probabilities"
                )
            out[i] = int(x)
        else:
            if not 0.0 <= x <= 1.0:
                raise DataError(
                    f"{at} {i + first_row}: answer {s!r} is not a probability in [0, 1] (or empty)"
                )
            out[i] = 1 if x > 0.5 else -1 if x < 0.5 else 0
    return out


def run(path: Path, method: str, out: Path, answers: str | None, max_groups: int) -> dict:
    """Aggregate FILE (see the module docstring); ``answers`` None = the file's own convention
    (p for a PrefLab export), else 'vote'."""
    data = read_input(path)
    queries, annotators, raw = data.queries, data.annotators, data.answers
    if data.answer_kind is not None and answers not in (None, data.answer_kind):
        raise DataError(
            f"{path} is PrefLab's own export: its answers are p = P(a ≻ b); drop "
            f"--answers {answers}"
        )
    answers = answers or data.answer_kind or "vote"
    if not queries:
        raise DataError(f"{path} has no judgements")
    if any(not q for q in queries) or any(not a for a in annotators):
        raise DataError(f"{path}: every row needs a query and an annotator id")
    votes = parse_answers(raw, answers, where=path, first_row=data.first_row)
    q_ids = list(dict.fromkeys(queries))
    qmap = {q: Query(id=q, kind=PAIR.name, a=(f"{q}/a",), b=(f"{q}/b",)) for q in q_ids}
    side_a = {query.a[0]: q for q, query in qmap.items()}
    p_of = {1: 1.0, -1: 0.0, 0: None}
    judgements = [
        Judgement(
            id=f"row{i + 2}",
            query_id=q,
            annotator_id=a,
            source="crowd",
            p=p_of[int(v)],
            created_at=0.0,  # equal times: the later row counts
        )
        for i, (q, a, v) in enumerate(zip(queries, annotators, votes, strict=True))
    ]
    agg: CrowdAggregator = SMLAggregator(strict=True) if method == "sml" else MajorityAggregator()
    try:
        label_list = agg.labels(Feedback(queries=qmap, judgements=judgements))
    except DataError as exc:
        raise DataError(f"--method {method}: {exc}; or use --method majority") from exc
    table = agg.last_table
    assert table is not None and table.query_ids == tuple(q_ids)
    a_ids = list(table.annotator_ids)
    m = table.votes
    labels = np.zeros(len(q_ids), np.int8)
    index = {q: k for k, q in enumerate(q_ids)}
    for lab in label_list:
        labels[index[side_a[lab.a]]] = 1 if lab.p > 0.5 else -1 if lab.p < 0.5 else 0
    n_answers = np.diff(m.indptr)
    active = np.flatnonzero(n_answers > 0)
    weights = np.full(len(a_ids), np.nan)
    accuracy = np.full(len(a_ids), np.nan)
    group = np.full(len(a_ids), -1)
    viewpoints: dict = {"n_groups": None, "bic": [], "means": [], "note": ""}
    res = agg.last_sml
    note = f"SML needs ≥ 3 annotators with answers, got {active.size}"
    if res is None and active.size >= 3:
        try:  # annotator estimates beside the majority labels; optional
            res = sml(m[active])
        except DataError as exc:
            note = f"no SML estimates: {exc}"
    if res is not None:
        weights[active] = res.weights
        accuracy[active] = res.accuracy
        ok = active[~res.isolated]
        vp = find_viewpoints(weights[ok], max_groups=max_groups)
        group[ok] = vp.assignment
        viewpoints = {
            "n_groups": vp.n_groups,
            "bic": [float(b) for b in vp.bic if np.isfinite(b)],
            "means": vp.means.tolist(),
            "note": "group 0 is the largest",
        }
    else:
        viewpoints["note"] = note
    per_query = np.diff(m.tocsc().indptr)
    dense_agree = m.multiply(sp.csr_matrix(labels[None, :].astype(np.float64))).tocsr()
    agree = np.asarray((dense_agree > 0).sum(axis=1)).ravel() / np.maximum(n_answers, 1)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "labels.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["query", "label", "p", "n_answers", "a", "b"])
        for k, q in enumerate(q_ids):
            p = (
                ""
                if per_query[k] == 0
                else (1.0 if labels[k] > 0 else 0.0 if labels[k] < 0 else 0.5)
            )
            w.writerow([q, int(labels[k]), p, int(per_query[k]), *data.pairs.get(q, ("", ""))])
    with (out / "annotators.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["annotator", "n_answers", "sml_weight", "est_accuracy", "agreement", "group"])
        for i, a in enumerate(a_ids):
            w.writerow(
                [
                    a,
                    int(n_answers[i]),
                    _fmt(weights[i]),
                    _fmt(accuracy[i]),
                    _fmt(agree[i]),
                    "" if group[i] < 0 else int(group[i]),
                ]
            )
    (out / "viewpoints.json").write_text(json.dumps(viewpoints, indent=2))
    return {
        "a_ids": a_ids,
        "n_answers": n_answers,
        "weights": weights,
        "accuracy": accuracy,
        "agree": agree,
        "group": group,
        "viewpoints": viewpoints,
        "n_queries": len(q_ids),
        "n_labels": int((per_query > 0).sum()),
    }


def _fmt(x: float) -> str:
    return "" if not np.isfinite(x) else f"{x:.6g}"


def _print(summary: dict, method: str, out: Path, limit: int) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"annotators ({method} labels; SML estimates)")
    for col in ("annotator", "answers", "SML weight", "est. accuracy", "agreement", "group"):
        table.add_column(col, justify="left" if col == "annotator" else "right")
    order = np.argsort(-np.nan_to_num(summary["weights"], nan=-np.inf), kind="stable")
    for i in order[:limit]:
        table.add_row(
            summary["a_ids"][i],
            str(summary["n_answers"][i]),
            _fmt(summary["weights"][i]),
            _fmt(summary["accuracy"][i]),
            f"{summary['agree'][i]:.3f}",
            "" if summary["group"][i] < 0 else str(summary["group"][i]),
        )
    console = Console()
    console.print(table)
    if len(order) > limit:
        console.print(f"… {len(order) - limit} more annotators in annotators.csv")
    vp = summary["viewpoints"]
    console.print(
        f"{summary['n_labels']} labels for {summary['n_queries']} queries; viewpoints: "
        f"{vp['n_groups'] if vp['n_groups'] is not None else 'n/a'} ({vp['note']}); wrote {out}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="preflab crowd", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    agg = sub.add_parser("aggregate", help="aggregate a file of crowd judgements")
    agg.add_argument(
        "file",
        type=Path,
        help="CSV or parquet with columns query, annotator, answer, or PrefLab's own export "
        "(its directory or judgements.parquet); when an annotator answers a query twice the "
        "later row counts",
    )
    agg.add_argument(
        "--method", choices=("majority", "sml"), default="sml", help="label aggregation"
    )
    agg.add_argument("--out", type=Path, default=None, help="output directory")
    agg.add_argument(
        "--answers",
        choices=("vote", "p"),
        default=None,
        help="answer column holds votes (+1/−1/0) or probabilities p in [0, 1] (default: "
        "vote; p for a PrefLab export)",
    )
    agg.add_argument("--max-groups", type=int, default=4, help="largest number of viewpoints tried")
    agg.add_argument("--show", type=int, default=30, help="annotators shown in the table")
    args = parser.parse_args(argv)
    out = args.out or args.file.with_name(
        (args.file.name if args.file.is_dir() else args.file.stem) + "-aggregate"
    )
    try:
        check_output_dir(out, what="--out" if args.out else "the output folder")
        summary = run(args.file, args.method, out, args.answers, args.max_groups)
    except PrefLabError as exc:
        print(f"preflab crowd: error: {exc}", file=sys.stderr)
        return 1
    _print(summary, args.method, out, args.show)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
