"""An export that ``--check`` passes is one ``--import`` takes, and a failed import or export
leaves nothing behind: every record checked before the first write, a judgement the target store
holds with another answer refused in import words, a manifest of the wrong shape refused, and a
folder the export made removed when it fails."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from preflab.cli.main import main
from preflab.errors import ConflictError, DataError, StoreError
from preflab.export.feedback import export_run, import_export, read_export
from preflab.store import FeedbackStore
from tests.export.test_exporting import full_store


@pytest.fixture
def exported(tmp_path: Path) -> Path:
    """An export of :func:`full_store`: segments, pair/group/rating queries, two annotators."""
    store = FeedbackStore(tmp_path / "src" / "feedback.db")
    full_store(store)
    export_run(store, tmp_path / "exp")
    store.close()
    return tmp_path / "exp"


def edit(d: Path, name: str, change: Callable[[int, dict[str, Any]], None]) -> None:
    """Change the rows of table ``name`` by hand (as another tool would write it, nulls allowed)
    and write the new digests into manifest.json, so only the records' checks can refuse it."""
    path = d / name
    table = pq.read_table(path)
    rows = table.to_pylist()
    for i, row in enumerate(rows):
        change(i, row)
    schema = pa.schema([f.with_nullable(True) for f in table.schema])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    manifest = json.loads((d / "manifest.json").read_text())
    manifest["sha256"][name] = hashlib.sha256(path.read_bytes()).hexdigest()
    (d / "manifest.json").write_text(json.dumps(manifest))


def first_row(column: str, value: Any) -> Callable[[int, dict[str, Any]], None]:
    def change(i: int, row: dict[str, Any]) -> None:
        if i == 0:
            row[column] = value

    return change


def contents(run: Path) -> dict[str, Any]:
    """What a run directory's store holds (and its segment files)."""
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    try:
        return {
            "annotators": sorted(a.id for a in store.annotators.all()),
            "segments": store.segments.count(),
            "queries": [q.id for q in store.queries.all()],
            "judgements": [(j.id, j.p) for _s, j in store.answers.judgements()],
            "ratings": len(store.ratings.all()),
            "files": sorted(p.name for p in (run / "segments").rglob("*") if p.is_file()),
        }
    finally:
        store.close()


BAD_RECORDS = {
    "query meta not an object": ("queries.parquet", first_row("meta", "[1]"), "meta must be"),
    "annotator meta a list": ("annotators.parquet", first_row("meta", "[1,2]"), "meta must be"),
    "segment env_id null": ("segments.parquet", first_row("env_id", None), "'env_id'"),
    "judgement time NaN": ("judgements.parquet", first_row("created_at", float("nan")), "NaN"),
    "query id twice": ("queries.parquet", lambda i, r: r.update(id="dup"), "appears twice"),
    "annotator source unknown": ("annotators.parquet", first_row("source", "robot"), "source"),
}


@pytest.mark.parametrize("case", list(BAD_RECORDS))
def test_check_refuses_what_import_refuses_and_a_refused_import_writes_nothing(
    exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    name, change, why = BAD_RECORDS[case]
    edit(exported, name, change)
    assert main(["export", "--check", str(exported)]) == 1
    err = capsys.readouterr().err
    assert f"{exported}/{name}" in err and why in err and len(err.strip().splitlines()) == 1
    run = tmp_path / "dst"
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    with pytest.raises(DataError, match=name):
        import_export(exported, store)
    store.close()
    assert contents(run) == {
        "annotators": [],
        "segments": 0,
        "queries": [],
        "judgements": [],
        "ratings": 0,
        "files": [],
    }


def test_import_of_a_judgement_the_store_holds_with_another_answer_is_refused_first(
    exported: Path, tmp_path: Path
) -> None:
    run = tmp_path / "dst"
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    import_export(exported, store)
    before = contents(run)
    edit(exported, "judgements.parquet", first_row("p", 0.0))  # j1 was 1.0
    # and annotators the store lacks: the old import stored them before it met the conflict
    edit(exported, "annotators.parquet", lambda i, r: r.update(id=f"new-{i}"))
    with pytest.raises(ConflictError) as exc:
        import_export(exported, store)
    store.close()
    msg = str(exc.value)
    assert f"{exported}/judgements.parquet row 1" in msg
    assert "already holds judgement j1 with another answer (p 1.0, the export's 0.0)" in msg
    assert "nothing was imported" in msg and "Import into a new run directory" in msg
    assert "idempotency key" not in msg  # the studio's words, not an import's
    assert contents(run) == before


def test_import_of_a_query_the_store_holds_with_other_segments_is_refused(
    exported: Path, tmp_path: Path
) -> None:
    run = tmp_path / "dst"
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    import_export(exported, store)
    before = contents(run)
    segs = [s.id for s in read_export(exported).segments]
    pair = next(q for q in read_export(exported).queries if q.kind == "pair")
    other = next(s for s in segs if s not in (*pair.a, *pair.b))

    def swap(i: int, row: dict[str, Any]) -> None:
        if row["id"] == pair.id:
            row["b"] = [other]

    edit(exported, "queries.parquet", swap)
    with pytest.raises(ConflictError, match=f"already holds query {pair.id}"):
        import_export(exported, store)
    store.close()
    assert contents(run) == before


@pytest.mark.parametrize("counts", [["segments"], {"segments": "4"}, 3])
def test_a_manifest_whose_counts_are_no_object_of_numbers_is_refused(
    exported: Path, counts: Any
) -> None:
    manifest = json.loads((exported / "manifest.json").read_text())
    manifest["counts"] = counts
    (exported / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DataError, match=r"manifest.json: \"counts\" must be a JSON object"):
        read_export(exported)


def test_a_failed_export_removes_the_folder_it_made_and_keeps_one_that_was_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    full_store(store)
    for f in (run / "segments").rglob("*.npz"):
        f.write_bytes(b"")  # the store's arrays cannot be read
    with pytest.raises(StoreError):
        export_run(store, tmp_path / "new" / "deep")
    store.close()
    assert not (tmp_path / "new").exists()
    assert main(["export", str(run), "--out", str(tmp_path / "made")]) == 1
    assert "missing or corrupt" in capsys.readouterr().err
    assert not (tmp_path / "made").exists() and not (run / "export").exists()
    (tmp_path / "empty").mkdir()
    assert main(["export", str(run), "--out", str(tmp_path / "empty")]) == 1
    assert (tmp_path / "empty").is_dir()


def test_a_refused_import_into_a_new_folder_leaves_no_folder(
    capsys, exported: Path, tmp_path: Path
) -> None:
    """`preflab export --import DIR --into NEW` that is refused leaves no NEW folder (with an
    empty store in it) behind; a folder that was there stays."""
    edit(exported, "queries.parquet", first_row("meta", "[1]"))
    new = tmp_path / "runs" / "new"
    assert main(["export", "--import", str(exported), "--into", str(new)]) != 0
    assert "meta must be" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()
    there = tmp_path / "there"
    there.mkdir()
    assert main(["export", "--import", str(exported), "--into", str(there)]) != 0
    assert there.is_dir() and not any(there.iterdir())  # no empty store made in it
