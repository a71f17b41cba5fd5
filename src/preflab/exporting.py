"""Export a run's feedback in open formats (parquet + npz + JSON) and read it back.

Layout of an export directory:
- ``manifest.json``: format version, counts, source run, label convention.
- ``segments.npz``: ``obs``, ``acts``, ``true_rewards`` (N, T, ·) zero-padded, ``lengths``, ``ids``.
- ``segments.parquet``: id, env_id, episode, start, round, length, true_return.
- ``queries.parquet``, ``judgements.parquet`` (provenance kept), ``labels.parquet``
  (a, b, p = P(a ≻ b), judgement_ids).
Converters for other label conventions live here (the boundary), nowhere else.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from preflab.aggregate import Feedback, IdentityAggregator
from preflab.errors import DataError
from preflab.records import Judgement, Label, Query, Segment
from preflab.store import FeedbackStore

FORMAT_VERSION = 1


@dataclass(frozen=True)
class ExportedData:
    """What :func:`read_export` returns."""

    segments: list[Segment]
    queries: list[Query]
    judgements: list[Judgement]
    labels: list[Label]


def export_run(
    store: FeedbackStore, out_dir: str | Path, *, source_run: str = ""
) -> dict[str, int]:
    """Write every stored segment, query, judgement and the identity labels to ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    segments = store.segments()
    queries = store.queries()
    judgements = [j for _s, j in store.judgements()]
    labels = IdentityAggregator().labels(
        Feedback(queries={q.id: q for q in queries}, judgements=judgements)
    )
    write_export(out, segments, queries, judgements, labels, source_run=source_run)
    return {
        "segments": len(segments),
        "queries": len(queries),
        "judgements": len(judgements),
        "labels": len(labels),
    }


def write_export(
    out: Path,
    segments: Sequence[Segment],
    queries: Sequence[Query],
    judgements: Sequence[Judgement],
    labels: Sequence[Label],
    *,
    source_run: str = "",
) -> None:
    n = len(segments)
    t_max = max((s.length for s in segments), default=0)
    od = segments[0].obs.shape[1] if n else 0
    ad = segments[0].acts.shape[1] if n else 0
    obs = np.zeros((n, t_max, od), np.float32)
    acts = np.zeros((n, t_max, ad), np.float32)
    rew = np.zeros((n, t_max), np.float32)
    for i, s in enumerate(segments):
        obs[i, : s.length], acts[i, : s.length], rew[i, : s.length] = s.obs, s.acts, s.true_rewards
    np.savez_compressed(
        out / "segments.npz",
        obs=obs,
        acts=acts,
        true_rewards=rew,
        lengths=np.array([s.length for s in segments], np.int64),
        ids=np.array([s.id for s in segments], dtype=np.str_),
    )
    pq.write_table(
        pa.table(
            {
                "id": [s.id for s in segments],
                "env_id": [s.env_id for s in segments],
                "episode": [s.episode for s in segments],
                "start": [s.start for s in segments],
                "round": [s.round for s in segments],
                "length": [s.length for s in segments],
                "true_return": [s.true_return for s in segments],
            }
        ),
        out / "segments.parquet",
    )
    pq.write_table(
        pa.table(
            {
                "id": [q.id for q in queries],
                "kind": [q.kind for q in queries],
                "a": [list(q.a) for q in queries],
                "b": [list(q.b) for q in queries],
                "round": [q.round for q in queries],
                "created_at": [q.created_at for q in queries],
                "meta": [json.dumps(dict(q.meta)) for q in queries],
            },
            schema=pa.schema(
                [
                    ("id", pa.string()),
                    ("kind", pa.string()),
                    ("a", pa.list_(pa.string())),
                    ("b", pa.list_(pa.string())),
                    ("round", pa.int64()),
                    ("created_at", pa.float64()),
                    ("meta", pa.string()),
                ]
            ),
        ),
        out / "queries.parquet",
    )
    pq.write_table(
        pa.table(
            {
                "id": [j.id for j in judgements],
                "query_id": [j.query_id for j in judgements],
                "annotator_id": [j.annotator_id for j in judgements],
                "source": [j.source for j in judgements],
                "p": pa.array([j.p for j in judgements], pa.float64()),
                "created_at": [j.created_at for j in judgements],
                "response_time_s": pa.array([j.response_time_s for j in judgements], pa.float64()),
                "meta": [json.dumps(dict(j.meta)) for j in judgements],
            }
        ),
        out / "judgements.parquet",
    )
    pq.write_table(
        pa.table(
            {
                "a": pa.array([lab.a for lab in labels], pa.string()),
                "b": pa.array([lab.b for lab in labels], pa.string()),
                "p": pa.array([lab.p for lab in labels], pa.float64()),
                "weight": pa.array([lab.weight for lab in labels], pa.float64()),
                "judgement_ids": pa.array(
                    [list(lab.judgement_ids) for lab in labels], pa.list_(pa.string())
                ),
            }
        ),
        out / "labels.parquet",
    )
    (out / "manifest.json").write_text(
        json.dumps(
            {
                "format": "preflab-export",
                "version": FORMAT_VERSION,
                "label_convention": "p = P(a preferred to b)",
                "source_run": source_run,
                "counts": {
                    "segments": n,
                    "queries": len(queries),
                    "judgements": len(judgements),
                    "labels": len(labels),
                },
            },
            indent=2,
        )
    )


def read_export(directory: str | Path) -> ExportedData:
    """Read an export directory back into records (validated)."""
    d = Path(directory)
    try:
        manifest = json.loads((d / "manifest.json").read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"{d} is not a PrefLab export (no readable manifest.json): {exc}") from exc
    if manifest.get("format") != "preflab-export" or manifest.get("version") != FORMAT_VERSION:
        raise DataError(
            f"{d}: unsupported export format {manifest.get('format')!r} v{manifest.get('version')}"
        )
    with np.load(d / "segments.npz", allow_pickle=False) as z:
        obs, acts, rew, lengths, ids = (
            z["obs"],
            z["acts"],
            z["true_rewards"],
            z["lengths"],
            z["ids"],
        )
    meta = pq.read_table(d / "segments.parquet").to_pylist()
    by_id = {m["id"]: m for m in meta}
    segments = [
        Segment(
            id=str(sid),
            obs=obs[i, :n],
            acts=acts[i, :n],
            true_rewards=rew[i, :n],
            env_id=by_id[str(sid)]["env_id"],
            episode=by_id[str(sid)]["episode"],
            start=by_id[str(sid)]["start"],
            round=by_id[str(sid)]["round"],
        )
        for i, (sid, n) in enumerate(zip(ids, lengths, strict=True))
    ]
    queries = [
        Query.from_row(r | {"meta": json.loads(r["meta"])})
        for r in pq.read_table(d / "queries.parquet").to_pylist()
    ]
    judgements = [
        Judgement.from_row(r | {"meta": json.loads(r["meta"])})
        for r in pq.read_table(d / "judgements.parquet").to_pylist()
    ]
    labels = [
        Label(
            a=r["a"],
            b=r["b"],
            p=r["p"],
            weight=r["weight"],
            judgement_ids=tuple(r["judgement_ids"]),
        )
        for r in pq.read_table(d / "labels.parquet").to_pylist()
    ]
    return ExportedData(segments=segments, queries=queries, judgements=judgements, labels=labels)


# ----- label-convention converters (the boundary) -------------------------------------------
def p_from_signed(values: np.ndarray) -> np.ndarray:
    """±1 convention (+1 = first preferred, −1 = second, 0 = equal) → p = P(a ≻ b)."""
    v = np.asarray(values, np.float64)
    if not np.isin(v, (-1.0, 0.0, 1.0)).all():
        raise DataError("signed labels must be −1, 0 or +1")
    return (v + 1.0) / 2.0


def p_to_signed(p: np.ndarray) -> np.ndarray:
    """p = P(a ≻ b) → ±1 (0 for p = 0.5)."""
    return np.sign(np.asarray(p, np.float64) - 0.5).astype(np.int64)


def p_from_bpref(labels: np.ndarray) -> np.ndarray:
    """B-Pref stores 1 when the SECOND segment is preferred, 0 for the first, 0.5 equal."""
    lab = np.asarray(labels, np.float64)
    if ((lab < 0) | (lab > 1)).any():
        raise DataError("B-Pref labels must be in [0, 1]")
    return 1.0 - lab
