"""Export a run's feedback in open formats (parquet + npz + JSON), check it, read it back and
import it into another store.

Layout of an export directory (format version 3):
- ``manifest.json``: format version, counts, source run, label convention, and the SHA-256 of
  every file (``export --check`` refuses truncated or altered files).
- ``segments.npz``: ``obs``, ``acts``, ``true_rewards`` (N, T, ·) zero-padded, ``lengths``,
  ``ids``; ``states`` (N, T, S) and ``has_states`` (N,) when segments carry render states.
- ``segments.parquet``: id, env_id, episode, start, round, length, true_return.
- ``queries.parquet`` (every kind of :mod:`preflab.kinds`: pair, group, ranking, rating),
  ``judgements.parquet`` (the ones that count: provenance kept, store order, undone ones left
  out; a ranking's answer holds its ranks in ``meta``), ``ratings.parquet``. Reading checks
  every query's shape and every answer against its kind.
- ``answers.parquet``: one label per answer (a, b, p = P(a ≻ b), weight, judgement_ids), from
  those judgements (identity aggregation).
- ``labels.parquet``: the labels the run trained on (same columns): the run's aggregator (e.g.
  SML for a crowd) applied to those judgements and ratings; the manifest's ``labels`` entry
  names it. Without a run configuration (a bare store) they are the per-answer labels.
- ``annotators.parquet`` (id, source, name, meta; never token hashes): every registered
  annotator and everyone who answered (simulated teachers, crowd users with their β, γ, ε).

Version 2 had no ``answers.parquet``; its ``labels.parquet`` held the per-answer labels (read
back as both). Version 1 had no digests, ratings or annotators.
Converters for other label conventions live here (the boundary), nowhere else.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from preflab.aggregate import Aggregator, Feedback, IdentityAggregator
from preflab.errors import ConfigError, DataError, PrefLabError
from preflab.export.hf_dataset import write_dataset_card
from preflab.kinds import check_judgement, check_query
from preflab.records import Annotator, Judgement, Label, Query, Rating, Segment
from preflab.rundir.folders import check_output_dir
from preflab.store import FeedbackStore

FORMAT_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)
FILES = (
    "segments.npz",
    "segments.parquet",
    "queries.parquet",
    "judgements.parquet",
    "answers.parquet",
    "labels.parquet",
    "ratings.parquet",
    "annotators.parquet",
)
FILES_V2 = tuple(f for f in FILES if f != "answers.parquet")
"""The files a version-2 export holds."""
_HAS_STATES = "states" in {f.name for f in dataclasses.fields(Segment)}


@dataclass(frozen=True)
class ExportedData:
    """What :func:`read_export` returns."""

    segments: list[Segment]
    queries: list[Query]
    judgements: list[Judgement]
    labels: list[Label]
    """The labels the run trained on (labels.parquet)."""
    ratings: list[Rating] = field(default_factory=list)
    annotators: list[Annotator] = field(default_factory=list)
    answers: list[Label] = field(default_factory=list)
    """One label per answer (answers.parquet; a version-2 export's labels.parquet)."""
    labels_aggregator: str = "identity"
    """The aggregator that made ``labels`` (the manifest's labels entry)."""


def export_run(
    store: FeedbackStore,
    out_dir: str | Path,
    *,
    source_run: str = "",
    aggregator: Aggregator | None = None,
    simulated: Sequence[Annotator] = (),
) -> dict[str, int]:
    """Write every stored segment, query, rating and annotator, the judgements that count
    (undone ones are left out), one label per answer (answers.parquet) and the labels the run
    trained on (labels.parquet: ``aggregator``'s labels from those judgements and ratings; the
    per-answer labels when it is None) to ``out_dir``. The annotators are the stored ones, then
    ``simulated`` (e.g. crowd users with their parameters), then anyone else who answered.

    The one export of a run: ``preflab export`` and the studio's owner export both call it."""
    out = check_output_dir(out_dir, what="export directory")
    if out.is_dir() and any(out.iterdir()) and not _holds_export(out):
        raise ConfigError(
            f"{out} is a folder that is not empty and holds no PrefLab export (no manifest.json "
            'with format "preflab-export"); exporting there would replace its files: pick a new '
            "or empty folder (preflab export RUN --out DIR)"
        )
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DataError(f"cannot create the export directory {out}: {exc}") from exc
    segments = store.segments.all()
    queries = store.queries.all()
    judgements = [j for _s, j in store.answers.judgements()]  # without retracted ones
    ratings = store.ratings.all()
    annotators = answering_annotators(store.annotators.all(), simulated, judgements)
    answers = identity_labels(queries, judgements)
    labels = answers
    if aggregator is not None:
        labels = aggregator.labels(
            Feedback(
                queries={q.id: q for q in queries},
                judgements=judgements,
                ratings=ratings,
                segments={s.id: s for s in segments},
            )
        )
    write_export(
        out,
        segments,
        queries,
        judgements,
        labels,
        source_run=source_run,
        ratings=ratings,
        annotators=annotators,
        answers=answers,
        labels_aggregator=aggregator.name if aggregator is not None else "identity",
    )
    return {
        "segments": len(segments),
        "queries": len(queries),
        "judgements": len(judgements),
        "answers": len(answers),
        "labels": len(labels),
        "ratings": len(ratings),
        "annotators": len(annotators),
    }


def _holds_export(d: Path) -> bool:
    """Whether ``d`` holds a previous export (its manifest.json says format preflab-export)."""
    try:
        manifest = json.loads((d / "manifest.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("format") == "preflab-export"


def export_env_ids(directory: str | Path) -> list[str]:
    """The env ids of the segments of the export in ``directory`` (``segments.parquet``),
    sorted; empty when ``directory`` holds no export, or none is named."""
    d = Path(directory)
    if not _holds_export(d):
        return []
    try:
        ids = pq.read_table(d / "segments.parquet", columns=["env_id"]).column(0).to_pylist()
    except (OSError, KeyError, pa.ArrowException) as exc:
        raise DataError(
            f"{d}/segments.parquet cannot be read ({exc}); it names the env of the export's "
            "segments: export the run again"
        ) from None
    return sorted({str(i) for i in ids if i})


def answering_annotators(
    stored: Sequence[Annotator], simulated: Sequence[Annotator], judgements: Sequence[Judgement]
) -> list[Annotator]:
    """The stored annotators, then the ``simulated`` ones not stored, then every other
    annotator id that answered (its source from its first judgement), each once."""
    out = {a.id: a for a in stored}
    for a in simulated:
        out.setdefault(a.id, a)
    for j in judgements:
        if j.annotator_id not in out:
            out[j.annotator_id] = Annotator(id=j.annotator_id, source=j.source, name=j.annotator_id)
    return list(out.values())


def identity_labels(queries: Sequence[Query], judgements: Sequence[Judgement]) -> list[Label]:
    return IdentityAggregator().labels(
        Feedback(queries={q.id: q for q in queries}, judgements=list(judgements))
    )


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_export(
    out: Path,
    segments: Sequence[Segment],
    queries: Sequence[Query],
    judgements: Sequence[Judgement],
    labels: Sequence[Label],
    *,
    source_run: str = "",
    ratings: Sequence[Rating] = (),
    annotators: Sequence[Annotator] = (),
    answers: Sequence[Label] | None = None,
    labels_aggregator: str = "identity",
) -> None:
    """Write an export directory (layout: module docstring). ``answers`` (one label per
    answer) defaults to ``labels``; ``labels_aggregator`` names what made ``labels``."""
    n = len(segments)
    t_max = max((s.length for s in segments), default=0)
    od = segments[0].obs.shape[1] if n else 0
    ad = segments[0].acts.shape[1] if n else 0
    obs = np.zeros((n, t_max, od), np.float32)
    acts = np.zeros((n, t_max, ad), np.float32)
    rew = np.zeros((n, t_max), np.float32)
    for i, s in enumerate(segments):
        if s.obs.shape[1] != od or s.acts.shape[1] != ad:
            raise DataError(
                f"segment {s.id} has obs/act dims {s.obs.shape[1]}/{s.acts.shape[1]}, others "
                f"{od}/{ad}; export one environment's segments at a time"
            )
        obs[i, : s.length], acts[i, : s.length], rew[i, : s.length] = s.obs, s.acts, s.true_rewards
    # values typed Any: numpy's stubs match **arrays against savez's allow_pickle: bool too
    arrays: dict[str, Any] = {
        "obs": obs,
        "acts": acts,
        "true_rewards": rew,
        "lengths": np.array([s.length for s in segments], np.int64),
        "ids": np.array([s.id for s in segments], dtype=np.str_),
    }
    states = [getattr(s, "states", None) for s in segments]
    if any(st is not None for st in states):
        sd = max(np.asarray(st).shape[1] for st in states if st is not None)
        arr = np.zeros((n, t_max, sd), np.float64)
        for i, st in enumerate(states):
            if st is not None:
                st = np.asarray(st, np.float64)
                arr[i, : st.shape[0], : st.shape[1]] = st
        arrays["states"] = arr
        arrays["has_states"] = np.array([st is not None for st in states])
        arrays["state_dims"] = np.array(
            [0 if st is None else np.asarray(st).shape[1] for st in states], np.int64
        )
    np.savez_compressed(out / "segments.npz", **arrays)
    pq.write_table(
        pa.table(
            {
                "id": pa.array([s.id for s in segments], pa.string()),
                "env_id": pa.array([s.env_id for s in segments], pa.string()),
                "episode": pa.array([s.episode for s in segments], pa.int64()),
                "start": pa.array([s.start for s in segments], pa.int64()),
                "round": pa.array([s.round for s in segments], pa.int64()),
                "length": pa.array([s.length for s in segments], pa.int64()),
                "true_return": pa.array([s.true_return for s in segments], pa.float64()),
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
                "id": pa.array([j.id for j in judgements], pa.string()),
                "query_id": pa.array([j.query_id for j in judgements], pa.string()),
                "annotator_id": pa.array([j.annotator_id for j in judgements], pa.string()),
                "source": pa.array([j.source for j in judgements], pa.string()),
                "p": pa.array([j.p for j in judgements], pa.float64()),
                "created_at": pa.array([j.created_at for j in judgements], pa.float64()),
                "response_time_s": pa.array([j.response_time_s for j in judgements], pa.float64()),
                "meta": pa.array([json.dumps(dict(j.meta)) for j in judgements], pa.string()),
            }
        ),
        out / "judgements.parquet",
    )
    _write_labels(labels, out / "labels.parquet")
    _write_labels(labels if answers is None else answers, out / "answers.parquet")
    pq.write_table(
        pa.table(
            {
                "annotator_id": pa.array([r.annotator_id for r in ratings], pa.string()),
                "stream_id": pa.array([r.stream_id for r in ratings], pa.string()),
                "step": pa.array([r.step for r in ratings], pa.int64()),
                "t": pa.array([r.t for r in ratings], pa.float64()),
                "value": pa.array([r.value for r in ratings], pa.float64()),
            }
        ),
        out / "ratings.parquet",
    )
    pq.write_table(
        pa.table(
            {
                "id": pa.array([a.id for a in annotators], pa.string()),
                "source": pa.array([a.source for a in annotators], pa.string()),
                "name": pa.array([a.name for a in annotators], pa.string()),
                "meta": pa.array([json.dumps(dict(a.meta)) for a in annotators], pa.string()),
            }
        ),
        out / "annotators.parquet",
    )
    (out / "manifest.json").write_text(
        json.dumps(
            {
                "format": "preflab-export",
                "version": FORMAT_VERSION,
                "label_convention": "p = P(a preferred to b)",
                "source_run": source_run,
                "labels": {
                    "aggregator": labels_aggregator,
                    "meaning": "labels.parquet: the labels the run trained on; "
                    "answers.parquet: one label per answer",
                },
                "counts": {
                    "segments": n,
                    "queries": len(queries),
                    "judgements": len(judgements),
                    "answers": len(labels if answers is None else answers),
                    "labels": len(labels),
                    "ratings": len(ratings),
                    "annotators": len(annotators),
                },
                "sha256": {name: _sha256(out / name) for name in FILES},
            },
            indent=2,
        )
    )
    sources: dict[str, int] = {}
    for j in judgements:
        sources[j.source] = sources.get(j.source, 0) + 1
    write_dataset_card(
        out,
        json.loads((out / "manifest.json").read_text()),
        env_ids=sorted({s.env_id for s in segments if s.env_id}),
        sources=sources,
        annotators=sorted({j.annotator_id for j in judgements} | {r.annotator_id for r in ratings}),
    )


def _write_labels(labels: Sequence[Label], path: Path) -> None:
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
        path,
    )


def _read_labels(path: Path) -> list[Label]:
    return [
        Label(
            a=r["a"],
            b=r["b"],
            p=r["p"],
            weight=r["weight"],
            judgement_ids=tuple(r["judgement_ids"]),
        )
        for r in pq.read_table(path).to_pylist()
    ]


def read_export(directory: str | Path) -> ExportedData:
    """Read an export directory back into records, validated: a DataError (never a library
    traceback) for missing, truncated or altered files."""
    d = Path(directory)
    try:
        manifest = json.loads((d / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataError(f"{d} is not a PrefLab export (no readable manifest.json): {exc}") from exc
    if not isinstance(manifest, dict):
        raise DataError(f"{d}/manifest.json is not a PrefLab export manifest")
    if (
        manifest.get("format") != "preflab-export"
        or manifest.get("version") not in READABLE_VERSIONS
    ):
        raise DataError(
            f"{d}: unsupported export format {manifest.get('format')!r} "
            f"v{manifest.get('version')}; this PrefLab reads versions {READABLE_VERSIONS}"
        )
    version = manifest["version"]
    digests = manifest.get("sha256") if version >= 2 else None
    if version >= 2:
        if not isinstance(digests, dict):
            raise DataError(f"{d}/manifest.json has no file digests; the export is incomplete")
        for name in FILES if version >= 3 else FILES_V2:
            path = d / name
            if not path.is_file():
                raise DataError(f"{d}: {name} is missing; the export is incomplete")
            if _sha256(path) != digests.get(name):
                raise DataError(
                    f"{d}/{name} does not match its SHA-256 in manifest.json: the file was "
                    "truncated or altered after export. Export the run again"
                )
    try:
        data = _read(d, version)
    except Exception as exc:  # numpy, zipfile, pyarrow and json raise many unrelated types
        if isinstance(exc, PrefLabError):
            raise
        raise DataError(
            f"{d} is not a readable PrefLab export ({type(exc).__name__}: {str(exc)[:200]}); "
            "export the run again"
        ) from exc
    counts = manifest.get("counts", {})
    labels_entry = manifest.get("labels")
    if isinstance(labels_entry, dict) and isinstance(labels_entry.get("aggregator"), str):
        data = dataclasses.replace(data, labels_aggregator=labels_entry["aggregator"])
    for key in ("segments", "queries", "judgements", "answers", "labels"):
        if key in counts and counts[key] != len(getattr(data, key)):
            raise DataError(
                f"{d}: manifest.json lists {counts[key]} {key}, the files hold "
                f"{len(getattr(data, key))}; the export was altered"
            )
    return data


def _read(d: Path, version: int) -> ExportedData:
    with np.load(d / "segments.npz", allow_pickle=False) as z:
        obs, acts, rew, lengths, ids = (
            z["obs"],
            z["acts"],
            z["true_rewards"],
            z["lengths"],
            z["ids"],
        )
        states = z["states"] if "states" in z.files else None
        has_states = z["has_states"] if "has_states" in z.files else None
        state_dims = z["state_dims"] if "state_dims" in z.files else None
    n = len(ids)
    if obs.ndim != 3 or acts.ndim != 3 or rew.ndim != 2 or lengths.shape != (n,):
        raise DataError(f"{d}/segments.npz has arrays of the wrong shape")
    if obs.shape[0] != n or acts.shape[0] != n or rew.shape[0] != n:
        raise DataError(f"{d}/segments.npz: {n} ids but arrays for {obs.shape[0]} segments")
    if n and (lengths.min() < 1 or lengths.max() > obs.shape[1]):
        raise DataError(f"{d}/segments.npz has segment lengths outside 1..{obs.shape[1]}")
    meta = pq.read_table(d / "segments.parquet").to_pylist()
    by_id = {m["id"]: m for m in meta}
    missing = [str(i) for i in ids if str(i) not in by_id]
    if missing:
        raise DataError(f"{d}: segments {missing[:3]} are in segments.npz but not segments.parquet")
    segments = []
    for i, (sid, length) in enumerate(zip(ids, lengths, strict=True)):
        sid, length = str(sid), int(length)
        extra: dict[str, Any] = {}
        if _HAS_STATES and states is not None and has_states is not None and has_states[i]:
            sd = int(state_dims[i]) if state_dims is not None else states.shape[2]
            extra["states"] = states[i, :length, :sd]
        segments.append(
            Segment(
                id=sid,
                obs=obs[i, :length],
                acts=acts[i, :length],
                true_rewards=rew[i, :length],
                env_id=by_id[sid]["env_id"],
                episode=by_id[sid]["episode"],
                start=by_id[sid]["start"],
                round=by_id[sid]["round"],
                **extra,
            )
        )
    queries = [
        check_query(Query.from_row(r | {"meta": json.loads(r["meta"])}))
        for r in pq.read_table(d / "queries.parquet").to_pylist()
    ]
    judgements = [
        Judgement.from_row(r | {"meta": json.loads(r["meta"])})
        for r in pq.read_table(d / "judgements.parquet").to_pylist()
    ]
    asked = {q.id: q for q in queries}
    for j in judgements:
        if j.query_id in asked:
            check_judgement(asked[j.query_id], j)
    labels = _read_labels(d / "labels.parquet")
    answers = _read_labels(d / "answers.parquet") if version >= 3 else labels
    ratings: list[Rating] = []
    annotators: list[Annotator] = []
    if version >= 2:
        ratings = [Rating(**r) for r in pq.read_table(d / "ratings.parquet").to_pylist()]
        annotators = [
            Annotator(id=r["id"], source=r["source"], name=r["name"], meta=json.loads(r["meta"]))
            for r in pq.read_table(d / "annotators.parquet").to_pylist()
        ]
    for j in judgements:
        if j.p is not None and not math.isfinite(j.p):
            raise DataError(f"{d}: judgement {j.id} has p = {j.p}")
    return ExportedData(
        segments=segments,
        queries=queries,
        judgements=judgements,
        labels=labels,
        ratings=ratings,
        annotators=annotators,
        answers=answers,
    )


def import_export(directory: str | Path, store: FeedbackStore) -> dict[str, int]:
    """Read (and check) an export, then write it into ``store``: annotators (without tokens),
    segments, queries, judgements (in their exported order) and ratings. Rows already in the
    store are skipped; judgements whose id is stored with other content raise ConflictError.
    Everything is validated before the first write."""
    data = read_export(directory)
    qids = {q.id for q in data.queries}
    sids = {s.id for s in data.segments}
    for q in data.queries:
        missing = [s for s in (*q.a, *q.b) if s not in sids]
        if missing:
            raise DataError(f"query {q.id} names segments {missing[:3]} that the export lacks")
    bad = [j.id for j in data.judgements if j.query_id not in qids]
    if bad:
        raise DataError(f"judgements {bad[:3]} answer queries the export lacks")
    for a in data.annotators:
        store.annotators.add(a)
    store.segments.add(data.segments)
    known = store.queries.known_ids(qids)
    store.queries.add([q for q in data.queries if q.id not in known])
    n_j = store.answers.add(data.judgements, if_absent=True)
    have = {(r.annotator_id, r.stream_id, r.t) for r in store.ratings.all()}
    new_ratings = [r for r in data.ratings if (r.annotator_id, r.stream_id, r.t) not in have]
    store.ratings.add(new_ratings)
    return {
        "segments": len(data.segments),
        "queries": len(data.queries) - len(known),
        "judgements": n_j,
        "ratings": len(new_ratings),
        "annotators": len(data.annotators),
    }


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
