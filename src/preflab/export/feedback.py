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
  every column's type (:data:`SCHEMAS`) and every record as a store would (meta a JSON object,
  ids unique, every query's shape and every answer against its kind): what ``export --check``
  passes, ``export --import`` takes.
- ``answers.parquet``: one label per answer (a, b, p = P(a ≻ b), weight, judgement_ids), from
  those judgements (identity aggregation).
- ``labels.parquet``: the labels the run trained on (same columns): the run's aggregator (e.g.
  SML for a crowd) applied to those judgements and ratings; the manifest's ``labels`` entry
  names it. Without a run configuration (a bare store) they are the per-answer labels.
- ``annotators.parquet`` (id, source, name, meta; never token hashes): every registered
  annotator and everyone who answered (simulated teachers, crowd users with their β, γ, ε).
- ``README.md``: the dataset card (:func:`write_dataset_card`), so the folder is a Hugging
  Face dataset (:mod:`preflab.export.hf_dataset`).

Version 2 had no ``answers.parquet``; its ``labels.parquet`` held the per-answer labels (read
back as both). Version 1 had no digests, ratings or annotators.
Converters for other label conventions live here (the boundary), nowhere else.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import zipfile
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from preflab.aggregate import Aggregator, Feedback, IdentityAggregator
from preflab.errors import ConfigError, ConflictError, DataError, PrefLabError
from preflab.export.limits import check_fits_store
from preflab.export.staging import holds_only_temp, staged
from preflab.kinds import check_judgement, check_query
from preflab.records import SOURCE_KINDS, Annotator, Judgement, Label, Query, Rating, Segment
from preflab.rundir.folders import check_output_dir, made_folder
from preflab.store import FeedbackStore
from preflab.store.arrays import SEGMENT_ID

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
FILES_V1 = tuple(f for f in FILES_V2 if f not in ("ratings.parquet", "annotators.parquet"))
"""The files a version-1 export holds."""
TABLES = tuple(f.removesuffix(".parquet") for f in FILES if f.endswith(".parquet"))
"""The export's tables, each a dataset config of its card (and a split of
:func:`preflab.export.hf_dataset.load`'s DatasetDict)."""
_HAS_STATES = "states" in {f.name for f in dataclasses.fields(Segment)}
_AGAIN = "the file was altered or written by another tool; export the run again"


def _needed(name: str, type_: pa.DataType) -> pa.Field:
    return pa.field(name, type_, nullable=False)


_STR, _INT, _FLOAT, _IDS = pa.string(), pa.int64(), pa.float64(), pa.list_(pa.string())
_LABELS = pa.schema(
    [
        _needed("a", _STR),
        _needed("b", _STR),
        _needed("p", _FLOAT),
        _needed("weight", _FLOAT),
        _needed("judgement_ids", _IDS),
    ]
)
SCHEMAS: dict[str, pa.Schema] = {
    "segments.parquet": pa.schema(
        [
            _needed("id", _STR),
            _needed("env_id", _STR),
            _needed("episode", _INT),
            _needed("start", _INT),
            _needed("round", _INT),
            _needed("length", _INT),
            _needed("true_return", _FLOAT),
        ]
    ),
    "queries.parquet": pa.schema(
        [
            _needed("id", _STR),
            _needed("kind", _STR),
            _needed("a", _IDS),
            _needed("b", _IDS),
            _needed("round", _INT),
            _needed("created_at", _FLOAT),
            _needed("meta", _STR),  # a JSON object
        ]
    ),
    "judgements.parquet": pa.schema(
        [
            _needed("id", _STR),
            _needed("query_id", _STR),
            _needed("annotator_id", _STR),
            _needed("source", _STR),
            pa.field("p", _FLOAT),  # null: skipped
            _needed("created_at", _FLOAT),
            pa.field("response_time_s", _FLOAT),
            _needed("meta", _STR),
        ]
    ),
    "answers.parquet": _LABELS,
    "labels.parquet": _LABELS,
    "ratings.parquet": pa.schema(
        [
            _needed("annotator_id", _STR),
            _needed("stream_id", _STR),
            _needed("step", _INT),
            _needed("t", _FLOAT),
            _needed("value", _FLOAT),
        ]
    ),
    "annotators.parquet": pa.schema(
        [_needed("id", _STR), _needed("source", _STR), _needed("name", _STR), _needed("meta", _STR)]
    ),
}
"""Each table's columns: written with these types, and read back only when every column has its
type, no empty (null) value where one is needed and finite numbers."""


def files_of(version: int) -> tuple[str, ...]:
    """The data files an export of format ``version`` holds (manifest.json aside)."""
    return FILES if version >= 3 else FILES_V2 if version == 2 else FILES_V1


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
    version: int = FORMAT_VERSION
    """The export's format version (which files it holds: :func:`files_of`)."""


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

    The one export of a run: ``preflab export`` and the studio's owner export both call it.
    Everything is read from the store before ``out_dir`` is made; the files are written to a
    temporary folder inside it and read back (as ``export --check`` does) before they replace
    a previous export's (:func:`preflab.export.staging.staged`). A failed export leaves the
    previous one whole, and removes a folder it made itself (a folder that was there before is
    kept)."""
    out = check_output_dir(out_dir, what="export directory")
    if out.is_dir() and not holds_only_temp(out) and not _holds_export(out):
        raise ConfigError(
            f"{out} is a folder that is not empty and holds no PrefLab export (no manifest.json "
            'with format "preflab-export"); exporting there would replace its files: pick a new '
            "or empty folder (preflab export RUN --out DIR)"
        )
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
    with made_folder(out), staged(out) as new:
        write_export(
            new,
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
        _read_back(new, out)
    return {
        "segments": len(segments),
        "queries": len(queries),
        "judgements": len(judgements),
        "answers": len(answers),
        "labels": len(labels),
        "ratings": len(ratings),
        "annotators": len(annotators),
    }


def _read_back(new: Path, out: Path) -> None:
    """Read the export just written to ``new`` back as ``export --check`` does; a DataError
    naming ``out`` (which it was not moved into) when that fails."""
    try:
        read_export(new)
    except DataError as exc:
        raise DataError(
            f"the export was not written to {out} (it keeps the files it had): the new files do "
            f"not read back: {str(exc).replace(str(new), str(out))}"
        ) from exc


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
    _write_table(
        out / "segments.parquet",
        id=[s.id for s in segments],
        env_id=[s.env_id for s in segments],
        episode=[s.episode for s in segments],
        start=[s.start for s in segments],
        round=[s.round for s in segments],
        length=[s.length for s in segments],
        true_return=[s.true_return for s in segments],
    )
    _write_table(
        out / "queries.parquet",
        id=[q.id for q in queries],
        kind=[q.kind for q in queries],
        a=[list(q.a) for q in queries],
        b=[list(q.b) for q in queries],
        round=[q.round for q in queries],
        created_at=[q.created_at for q in queries],
        meta=[json.dumps(dict(q.meta)) for q in queries],
    )
    _write_table(
        out / "judgements.parquet",
        id=[j.id for j in judgements],
        query_id=[j.query_id for j in judgements],
        annotator_id=[j.annotator_id for j in judgements],
        source=[j.source for j in judgements],
        p=[j.p for j in judgements],
        created_at=[j.created_at for j in judgements],
        response_time_s=[j.response_time_s for j in judgements],
        meta=[json.dumps(dict(j.meta)) for j in judgements],
    )
    _write_labels(labels, out / "labels.parquet")
    _write_labels(labels if answers is None else answers, out / "answers.parquet")
    _write_table(
        out / "ratings.parquet",
        annotator_id=[r.annotator_id for r in ratings],
        stream_id=[r.stream_id for r in ratings],
        step=[r.step for r in ratings],
        t=[r.t for r in ratings],
        value=[r.value for r in ratings],
    )
    _write_table(
        out / "annotators.parquet",
        id=[a.id for a in annotators],
        source=[a.source for a in annotators],
        name=[a.name for a in annotators],
        meta=[json.dumps(dict(a.meta)) for a in annotators],
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
    _write_table(
        path,
        a=[lab.a for lab in labels],
        b=[lab.b for lab in labels],
        p=[lab.p for lab in labels],
        weight=[lab.weight for lab in labels],
        judgement_ids=[list(lab.judgement_ids) for lab in labels],
    )


def _write_table(path: Path, **columns: list[Any]) -> None:
    """Write the table ``path.name`` with its columns in the types of :data:`SCHEMAS`."""
    pq.write_table(pa.table(columns, schema=SCHEMAS[path.name]), path)


def write_dataset_card(
    out: Path,
    manifest: dict[str, Any],
    *,
    env_ids: list[str],
    sources: dict[str, int],
    annotators: list[str],
    license: str = "other",
) -> Path:
    """Write ``out/README.md``, the dataset card of the export in ``out`` (issue #29); returns
    its path. YAML front matter names each parquet table as a ``datasets`` config (so
    ``datasets.load_dataset(EXPORT_DIR, "labels")`` works on the directory, or on a Hub
    repository it is uploaded to), then what the data is: env and version, who answered
    (pseudonymous ids), the label convention p = P(a ≻ b), the PrefLab version, counts and a
    licence field."""
    counts = manifest.get("counts", {})
    configs = "\n".join(
        f"- config_name: {t}\n  data_files: {t}.parquet"
        for t in TABLES
        if (out / f"{t}.parquet").exists()
    )
    # datasets keys its cache of a local folder by the folder's name and the card alone (the
    # card's data_files are relative patterns; the files' paths and contents are not hashed), so
    # two exports in folders of the same name would share one cache entry and the second load
    # would return the first's rows. Each table's sha256 in its config's info tells them apart.
    digests = manifest.get("sha256", {})
    infos = "\n".join(
        f"- config_name: {t}\n  description: PrefLab export table {t}.parquet, sha256 "
        f"{digests.get(f'{t}.parquet') or _sha256(out / f'{t}.parquet')}"
        for t in TABLES
        if (out / f"{t}.parquet").exists()
    )
    who = ", ".join(f"{k} ({v} judgements)" for k, v in sorted(sources.items())) or "none"
    people = ", ".join(annotators[:20]) + (" …" if len(annotators) > 20 else "")
    rows = "\n".join(f"| {k} | {v} |" for k, v in counts.items())
    text = f"""---
license: {license}
tags:
- preference-based-reinforcement-learning
- rlhf
- preflab
configs:
{configs}
dataset_info:
{infos}
---

# PrefLab preference data

Feedback from a PrefLab run{f" ({manifest['source_run']})" if manifest.get("source_run") else ""}:
segments of behaviour, the queries asked about them, the answers given and the labels a reward
model trained on.

- **Environment:** {", ".join(env_ids) or "unknown"}
- **Who answered:** {who}; annotator ids (pseudonymous): {people or "none"}
- **Label convention:** `p = P(a ≻ b)`: 1 when segment `a` is preferred, 0 when `b` is, 0.5
  for "equally good"; `weight` is the label's weight in the reward model's loss.
- **Labels:** `labels` are what the run trained on (aggregator:
  `{manifest.get("labels", {}).get("aggregator", "identity")}`); `answers` hold one label per
  answer.
- **Made by:** PrefLab {_version()}, export format version {manifest.get("version")}.
- **Licence:** `{license}` (set by whoever publishes this data).

| table | rows |
|---|---|
{rows}

Load it with `datasets.load_dataset(PATH, "labels")` (one table), or with
`preflab.export.hf_dataset.load(PATH)` (every table; segments with their `obs`, `acts` and
`true_rewards` per step). `preflab export --import PATH --into RUN_DIR` loads it into a
PrefLab store; `preflab export --check PATH` verifies the files against `manifest.json`.
"""
    path = out / "README.md"
    path.write_text(text, encoding="utf-8")
    return path


def _version() -> str:
    try:
        return metadata.version("preflab")
    except metadata.PackageNotFoundError:
        return "unknown"


def read_export(directory: str | Path) -> ExportedData:
    """Read an export directory back into records, validated: a DataError (never a library
    traceback) naming the file for a missing, truncated or altered file, and for a record that
    the store would refuse (:func:`check_records`): what ``--check`` passes, ``--import``
    takes."""
    d = Path(directory)
    manifest = _read_manifest(d)
    version = manifest["version"]
    if version >= 2:
        _check_digests(d, manifest.get("sha256"), files_of(version))
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
    for key in ("segments", "queries", "judgements", "answers", "labels"):
        if key in counts and counts[key] != len(getattr(data, key)):
            raise DataError(
                f"{d}: manifest.json lists {counts[key]} {key}, the files hold "
                f"{len(getattr(data, key))}; the export was altered"
            )
    labels_entry = manifest.get("labels")
    if isinstance(labels_entry, dict) and isinstance(labels_entry.get("aggregator"), str):
        data = dataclasses.replace(data, labels_aggregator=labels_entry["aggregator"])
    return dataclasses.replace(data, version=version)


def _read_manifest(d: Path) -> dict[str, Any]:
    """The export's manifest.json, its format, version and counts checked."""
    try:
        manifest = json.loads((d / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataError(f"{d} is not a PrefLab export (no readable manifest.json): {exc}") from exc
    if not isinstance(manifest, dict):
        raise DataError(f"{d}/manifest.json is not a PrefLab export manifest")
    version = manifest.get("version")
    if (
        manifest.get("format") != "preflab-export"
        or not isinstance(version, int)
        or isinstance(version, bool)
        or version not in READABLE_VERSIONS
    ):
        raise DataError(
            f"{d}: unsupported export format {manifest.get('format')!r} "
            f"v{version}; this PrefLab reads versions {READABLE_VERSIONS}"
        )
    counts = manifest.get("counts", {})
    if not isinstance(counts, dict) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in counts.values()
    ):
        raise DataError(
            f'{d}/manifest.json: "counts" must be a JSON object of whole numbers such as '
            f'{{"segments": 4, "queries": 2}}, got {json.dumps(counts)[:80]}; {_AGAIN}'
        )
    return manifest


def _check_digests(d: Path, digests: Any, names: Sequence[str]) -> None:
    """A DataError for a file of ``names`` that is missing or differs from its SHA-256."""
    if not isinstance(digests, dict):
        raise DataError(f"{d}/manifest.json has no file digests; the export is incomplete")
    for name in names:
        path = d / name
        if not path.is_file():
            raise DataError(f"{d}: {name} is missing; the export is incomplete")
        if _sha256(path) != digests.get(name):
            raise DataError(
                f"{d}/{name} does not match its SHA-256 in manifest.json: the file was "
                "truncated or altered after export. Export the run again"
            )


def read_table(d: Path, name: str) -> pa.Table:
    """The table ``name`` (e.g. ``"judgements.parquet"``) of the export in ``d``: its columns of
    :data:`SCHEMAS` (others are left out), each of its type, with no empty (null) value where
    one is needed and finite numbers; a DataError naming the file else."""
    try:
        table = pq.read_table(d / name)
    except (OSError, pa.ArrowException) as exc:
        raise DataError(f"{d}/{name} cannot be read ({str(exc)[:200]}); {_AGAIN}") from exc
    for col in SCHEMAS[name]:
        _check_column(d / name, table, col)
    return table.select(SCHEMAS[name].names)


def _check_column(path: Path, table: pa.Table, want: pa.Field) -> None:
    where = f"{path}: column {want.name!r}"
    if want.name not in table.column_names:
        raise DataError(f"{where} is missing; {_AGAIN}")
    values = table.column(want.name)
    if values.type != want.type:
        raise DataError(f"{where} holds {values.type}, expected {want.type}; {_AGAIN}")
    items = pc.list_flatten(values) if pa.types.is_list(want.type) else values
    if not want.nullable and (values.null_count or items.null_count):
        raise DataError(f"{where} has empty (null) values, every row needs one; {_AGAIN}")
    if pa.types.is_floating(want.type) and pc.any(pc.invert(pc.is_finite(values))).as_py():
        raise DataError(f"{where} holds NaN or infinite values, expected finite numbers; {_AGAIN}")


_T = TypeVar("_T")
_R = TypeVar("_R")


def _build(path: Path, rows: Iterable[_T], build: Callable[[_T], _R]) -> list[_R]:
    """``build`` applied to each row of the file ``path``; its DataError names the file and
    row."""
    out = []
    for i, row in enumerate(rows, 1):
        try:
            out.append(build(row))
        except DataError as exc:
            raise DataError(f"{path} row {i}: {str(exc).rstrip('.')}; {_AGAIN}") from exc
    return out


def _records(d: Path, name: str, build: Callable[[dict[str, Any]], _R]) -> list[_R]:
    """The records of the table ``name``, one per row (:func:`read_table`, :func:`_build`)."""
    return _build(d / name, read_table(d, name).to_pylist(), build)


def _meta(text: str) -> dict[str, Any]:
    """A record's meta: a JSON object."""
    try:
        meta = json.loads(text)
    except ValueError as exc:
        raise DataError(f"meta is not JSON ({exc}); expected a JSON object such as {{}}") from exc
    if not isinstance(meta, dict):
        raise DataError(
            f'meta must be a JSON object such as {{"key": 1}} (or {{}}), got {text[:60]!r}'
        )
    return meta


def _query(r: dict[str, Any]) -> Query:
    return check_query(Query.from_row(r | {"meta": _meta(r["meta"])}))


def _judgement(r: dict[str, Any]) -> Judgement:
    return Judgement.from_row(r | {"meta": _meta(r["meta"])})


def _label(r: dict[str, Any]) -> Label:
    return Label(**(r | {"judgement_ids": tuple(r["judgement_ids"])}))


def _annotator(r: dict[str, Any]) -> Annotator:
    if r["source"] not in SOURCE_KINDS:
        raise DataError(
            f"annotator {r['id']}: source must be one of {SOURCE_KINDS}, got {r['source']!r}"
        )
    return Annotator(id=r["id"], source=r["source"], name=r["name"], meta=_meta(r["meta"]))


def _read(d: Path, version: int) -> ExportedData:
    segments = _read_segments(d)
    queries = _records(d, "queries.parquet", _query)
    judgements = _records(d, "judgements.parquet", _judgement)
    labels = _records(d, "labels.parquet", _label)
    data = ExportedData(
        segments=segments,
        queries=queries,
        judgements=judgements,
        labels=labels,
        ratings=_records(d, "ratings.parquet", lambda r: Rating(**r)) if version >= 2 else [],
        annotators=_records(d, "annotators.parquet", _annotator) if version >= 2 else [],
        answers=_records(d, "answers.parquet", _label) if version >= 3 else labels,
    )
    check_records(d, data)
    return data


def _read_npz(d: Path) -> dict[str, np.ndarray]:
    """The arrays of segments.npz; a DataError naming the file when it cannot be read."""
    try:
        with np.load(d / "segments.npz", allow_pickle=False) as z:
            return {name: z[name] for name in z.files}
    except (OSError, EOFError, ValueError, zipfile.BadZipFile) as exc:
        raise DataError(f"{d}/segments.npz cannot be read ({exc}); {_AGAIN}") from exc


def _read_segments(d: Path) -> list[Segment]:
    z = _read_npz(d)
    missing = [k for k in ("obs", "acts", "true_rewards", "lengths", "ids") if k not in z]
    if missing:
        raise DataError(f"{d}/segments.npz lacks the arrays {missing}; {_AGAIN}")
    obs, acts, rew, lengths, ids = z["obs"], z["acts"], z["true_rewards"], z["lengths"], z["ids"]
    n = len(ids)
    if obs.ndim != 3 or acts.ndim != 3 or rew.ndim != 2 or lengths.shape != (n,):
        raise DataError(f"{d}/segments.npz has arrays of the wrong shape")
    if obs.shape[0] != n or acts.shape[0] != n or rew.shape[0] != n:
        raise DataError(f"{d}/segments.npz: {n} ids but arrays for {obs.shape[0]} segments")
    if n and (lengths.min() < 1 or lengths.max() > obs.shape[1]):
        raise DataError(f"{d}/segments.npz has segment lengths outside 1..{obs.shape[1]}")
    rows = read_table(d, "segments.parquet").to_pylist()
    if [r["id"] for r in rows] != [str(i) for i in ids]:
        raise DataError(
            f"{d}: segments.parquet and segments.npz list different segments (or in another "
            f"order); {_AGAIN}"
        )
    states, has_states = z.get("states"), z.get("has_states")
    state_dims = z.get("state_dims")
    for i, r in enumerate(rows):
        length = int(lengths[i])
        r |= {"obs": obs[i, :length], "acts": acts[i, :length], "true_rewards": rew[i, :length]}
        if _HAS_STATES and states is not None and has_states is not None and has_states[i]:
            sd = int(state_dims[i]) if state_dims is not None else states.shape[2]
            r["states"] = states[i, :length, :sd]
    return _build(d / "segments.parquet", rows, _segment)


def _segment(r: dict[str, Any]) -> Segment:
    return Segment(**{k: v for k, v in r.items() if k not in ("length", "true_return")})


def check_records(d: Path, data: ExportedData) -> None:
    """The checks across an export's records (``d`` names it in messages): ids are unique and
    ones the store accepts, every query names segments of the export, every judgement answers
    a query of the export as the query's kind defines an answer. A DataError else."""
    for name, what, keys in (
        ("segments.parquet", "segment id", [s.id for s in data.segments]),
        ("queries.parquet", "query id", [q.id for q in data.queries]),
        ("judgements.parquet", "judgement id", [j.id for j in data.judgements]),
        ("annotators.parquet", "annotator id", [a.id for a in data.annotators]),
        (
            "ratings.parquet",
            "(annotator, stream, time) of a rating",
            [(r.annotator_id, r.stream_id, r.t) for r in data.ratings],
        ),
    ):
        _check_unique(d / name, what, keys)
    bad = [s.id for s in data.segments if not SEGMENT_ID.match(s.id)]
    if bad:
        raise DataError(
            f"{d}/segments.parquet: segment ids {bad[:3]} are not ones a store keeps: 's-' + 20 "
            f"hex digits, or 1–64 letters, digits, '_' or '-'; {_AGAIN}"
        )
    sids = {s.id for s in data.segments}
    for q in data.queries:
        missing = [s for s in (*q.a, *q.b) if s not in sids]
        if missing:
            raise DataError(
                f"{d}/queries.parquet: query {q.id} names segments {missing[:3]} that "
                f"segments.parquet lacks; {_AGAIN}"
            )
    asked = {q.id: q for q in data.queries}
    _build(d / "judgements.parquet", data.judgements, lambda j: _check_answer(asked, j))


def _check_answer(asked: dict[str, Query], j: Judgement) -> Judgement:
    q = asked.get(j.query_id)
    if q is None:
        raise DataError(f"judgement {j.id} answers query {j.query_id}, which queries.parquet lacks")
    return check_judgement(q, j)


def _check_unique(path: Path, what: str, keys: Sequence[Hashable]) -> None:
    seen: set[Hashable] = set()
    for i, key in enumerate(keys, 1):
        if key in seen:
            raise DataError(
                f"{path} row {i}: the {what} {key!r} appears twice, each must appear once; {_AGAIN}"
            )
        seen.add(key)


_STORED = ("segments", "queries", "annotators", "judgements", "ratings")
"""The export's tables that an import writes into the store's tables of the same names."""


def import_export(
    directory: str | Path, store: FeedbackStore, *, data: ExportedData | None = None
) -> dict[str, int]:
    """Read (and check) an export, then write it into ``store``: segments, queries, annotators
    (without tokens), judgements (in their exported order) and ratings. Rows already in the
    store are skipped; a judgement (or query) whose id the store holds with other content is a
    ConflictError. Everything is validated, against the export, against the columns of the
    store's schema (an id longer than its column allows: :mod:`preflab.export.limits`) and
    against what ``store`` holds, before the first write. ``data``: the export as
    :func:`read_export` already read it (checked before the target store was opened)."""
    d = Path(directory)
    data = read_export(d) if data is None else data
    check_fits(d, data)
    known = _check_against_store(d, data, store)
    have = {(r.annotator_id, r.stream_id, r.t) for r in store.ratings.all()}
    new_ratings = [r for r in data.ratings if (r.annotator_id, r.stream_id, r.t) not in have]
    store.segments.add(data.segments)
    store.queries.add([q for q in data.queries if q.id not in known])
    for a in data.annotators:
        store.annotators.add(a)
    n_j = store.answers.add(data.judgements, if_absent=True)
    store.ratings.add(new_ratings)
    return {
        "segments": len(data.segments),
        "queries": len(data.queries) - len(known),
        "judgements": n_j,
        "ratings": len(new_ratings),
        "annotators": len(data.annotators),
    }


def check_fits(d: Path, data: ExportedData, *, outcome: str = "nothing was imported") -> None:
    """A DataError naming every value of ``data`` (the export ``d``) that a store's column
    cannot hold (:func:`preflab.export.limits.check_fits_store`): :func:`import_export` refuses
    such an export before the first write, and ``export --check`` refuses it too. ``outcome``
    says what became of the command."""
    check_fits_store(d, [(t, getattr(data, t)) for t in _STORED], outcome=outcome)


def _check_against_store(d: Path, data: ExportedData, store: FeedbackStore) -> set[str]:
    """The ids of the export's queries ``store`` holds already; a ConflictError when it holds
    one of the export's queries or judgements with other content (:func:`import_export` would
    add answers that contradict it)."""
    stored = {q.id: q for q in store.queries.get_many([q.id for q in data.queries])}
    for q in data.queries:
        old = stored.get(q.id)
        if old is not None and (old.kind, old.a, old.b) != (q.kind, q.a, q.b):
            raise ConflictError(
                f"{d}/queries.parquet: the target store already holds query {q.id} as a "
                f"{old.kind} of {old.a} against {old.b}, the export as a {q.kind} of {q.a} "
                f"against {q.b}; {_into_new_run(d)}"
            )
    answered = {j.id: j for _s, j in store.answers.judgements(include_retracted=True)}
    for i, j in enumerate(data.judgements, 1):
        old_j = answered.get(j.id)
        other = None if old_j is None else _differs(old_j, j)
        if other is not None:
            raise ConflictError(
                f"{d}/judgements.parquet row {i}: the target store already holds judgement "
                f"{j.id} with another answer ({other} {getattr(old_j, other)!r}, the export's "
                f"{getattr(j, other)!r}); {_into_new_run(d)}"
            )
    return set(stored)


def _into_new_run(d: Path) -> str:
    return (
        "nothing was imported. Import into a new run directory: "
        f"preflab export --import {d} --into NEW_RUN_DIR"
    )


def _differs(old: Judgement, new: Judgement) -> str | None:
    """The first field (its time aside) in which two judgements of one id differ, or None."""
    for f in dataclasses.fields(Judgement):
        if f.name != "created_at" and getattr(old, f.name) != getattr(new, f.name):
            return f.name
    return None


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
