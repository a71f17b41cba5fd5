"""An export that ``--check`` passes is one ``--import`` takes (a value longer, or larger, than a
store's column allows aside: refused before the first write), and a failed import or export
leaves nothing behind: every record checked before the first write, a judgement the target store
holds with another answer refused in import words, a manifest of the wrong shape refused, and a
folder the export made removed when it fails; a failed re-export keeps the previous export
whole."""

from __future__ import annotations

import errno
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from preflab.cli.main import main
from preflab.errors import ConflictError, DataError, StoreError
from preflab.export.feedback import export_run, import_export, read_export
from preflab.records import Annotator
from preflab.store import FeedbackStore
from preflab.testing.factories import random_segment
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


def files_of_folder(d: Path) -> dict[str, bytes]:
    """Every file under ``d`` (relative path → bytes)."""
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def failing_write(name: str) -> Callable[..., None]:
    """pyarrow's write_table that fails for the table ``name`` as a full disk would."""
    write = pq.write_table

    def write_table(table: pa.Table, where: Any, *args: Any, **kwargs: Any) -> None:
        if Path(str(where)).name == name:
            raise OSError(errno.ENOSPC, "No space left on device")
        write(table, where, *args, **kwargs)

    return write_table


def test_a_failed_re_export_keeps_the_previous_export_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run, out = tmp_path / "run", tmp_path / "run" / "export"
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    full_store(store)
    assert main(["export", str(run), "--out", str(out)]) == 0
    before = files_of_folder(out)
    # the run goes on (new records in the first files written), then the disk fills up part way
    store.segments.add([random_segment(np.random.default_rng(7), id="later", length=4)])
    store.close()
    monkeypatch.setattr(pq, "write_table", failing_write("judgements.parquet"))
    capsys.readouterr()
    assert main(["export", str(run), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert files_of_folder(out) == before  # no file of the new export, no temporary folder
    assert read_export(out).segments and main(["export", "--check", str(out)]) == 0
    assert "No space left on device" in err and "keeps the files it had" in err
    assert f"cannot write the export to {out}" in err and len(err.strip().splitlines()) == 1


def test_a_re_export_whose_files_fail_to_move_in_puts_the_previous_ones_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FeedbackStore(tmp_path / "run" / "feedback.db")
    full_store(store)
    out = tmp_path / "exp"
    export_run(store, out)
    before = files_of_folder(out)
    store.segments.add([random_segment(np.random.default_rng(7), id="later", length=4)])
    replace, calls = os.replace, []

    def fifth_fails(src: Any, dst: Any) -> None:
        calls.append(src)
        if len(calls) == 5:
            raise OSError(errno.EIO, "Input/output error")
        replace(src, dst)

    monkeypatch.setattr(os, "replace", fifth_fails)
    with pytest.raises(DataError, match="keeps the files it had"):
        export_run(store, out)
    store.close()
    assert len(calls) > 5 and files_of_folder(out) == before
    assert len(read_export(out).segments) == 4


def test_a_re_export_replaces_the_export_and_keeps_other_files(tmp_path: Path) -> None:
    """The folder of an export pushed to a Hugging Face dataset repository keeps its .git and
    licence; a temporary folder left by a killed export does not make a folder count as not
    empty."""
    store = FeedbackStore(tmp_path / "run" / "feedback.db")
    full_store(store)
    out = tmp_path / "exp"
    (out / ".preflab-export-tmp-killed").mkdir(parents=True)  # all it held: counts as empty
    export_run(store, out)
    (out / ".git").mkdir()
    (out / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (out / "LICENSE").write_text("CC-BY-4.0\n")
    store.segments.add([random_segment(np.random.default_rng(7), id="later", length=4)])
    export_run(store, out)
    store.close()
    assert len(read_export(out).segments) == 5
    assert (out / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"
    assert (out / "LICENSE").read_text() == "CC-BY-4.0\n"
    temp = [p.name for p in out.iterdir() if p.name.startswith(".preflab")]
    assert temp == [".preflab-export-tmp-killed"]  # only the killed one's: each removes its own


TOO_LONG = {
    "annotator id": ("annotators.parquet", first_row("id", "a" * 129), "annotators.id", "128"),
    "judgement id": ("judgements.parquet", first_row("id", "j" * 65), "judgements.id", "64"),
    "judgement's annotator": (
        "judgements.parquet",
        first_row("annotator_id", "b" * 129),
        "judgements.annotator_id",
        "128",
    ),
    "segment env id": (
        "segments.parquet",
        first_row("env_id", "E" * 129),
        "segments.env_id",
        "128",
    ),
    "rating stream": (
        "ratings.parquet",
        first_row("stream_id", "s" * 129),
        "ratings.stream_id",
        "128",
    ),
    "segment episode": (
        "segments.parquet",
        first_row("episode", 2**31),
        "segments.episode",
        "-2147483648..2147483647",
    ),
}


@pytest.mark.parametrize("case", list(TOO_LONG))
def test_an_import_of_a_value_longer_than_its_store_column_is_refused_before_any_write(
    exported: Path, tmp_path: Path, case: str
) -> None:
    name, change, column, limit = TOO_LONG[case]
    edit(exported, name, change)
    read_export(exported)  # the files are whole (export --check refuses it: test_limits.py)
    run = tmp_path / "dst"
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    with pytest.raises(DataError) as exc:
        import_export(exported, store)
    store.close()
    msg = str(exc.value)
    assert msg.startswith(f"{exported}/{name} row 1") and f"store's column {column}" in msg
    assert limit in msg and "nothing was imported" in msg and "export it again" in msg
    assert contents(run) == {
        "annotators": [],
        "segments": 0,
        "queries": [],
        "judgements": [],
        "ratings": 0,
        "files": [],
    }


LONG_IN_SQLITE = {
    "annotator id": (
        lambda s: s.annotators.add(Annotator(id="x" * 130, source="human", name="long")),
        "annotators.id",
    ),
    "segment episode": (
        lambda s: s.segments.add([random_segment(np.random.default_rng(1), episode=2**31)]),
        "segments.episode",
    ),
}


@pytest.mark.postgres
@pytest.mark.parametrize("case", list(LONG_IN_SQLITE))
def test_an_export_of_sqlite_values_postgres_cannot_hold_is_refused_with_nothing_written(
    postgres_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    case: str,
) -> None:
    from tests.store.conftest import drop_pg_database, fresh_pg_database

    add, column = LONG_IN_SQLITE[case]
    run = tmp_path / "run"
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    full_store(store)
    add(store)  # SQLite keeps it
    store.close()
    monkeypatch.chdir(tmp_path)  # an import into a URL keeps its arrays in ./segments
    assert main(["export", str(run), "--out", "exp"]) == 0
    assert main(["export", "--check", "exp"]) == 1  # refused as the import refuses it
    url, db = fresh_pg_database(postgres_url)
    try:
        capsys.readouterr()
        assert main(["export", "--import", "exp", "--into", url]) == 1
        pg = FeedbackStore(url, array_dir=tmp_path / "segments")
        try:
            assert pg.segments.count() == 0 and pg.queries.all() == []
            assert pg.annotators.all() == [] and pg.answers.count() == 0
            assert pg.ratings.all() == []
        finally:
            pg.close()
        err = capsys.readouterr().err
        assert f"store's column {column}" in err and "nothing was imported" in err
        assert len(err.strip().splitlines()) == 1
    finally:
        drop_pg_database(postgres_url, db)
