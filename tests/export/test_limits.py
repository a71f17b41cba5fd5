"""``export --check`` refuses an export whose values a store's columns cannot hold, by the check
``export --import`` runs (:func:`preflab.export.limits.check_fits_store`, its limits read from
the store schema): every misfit column named, with its limit and how to fix it, one line, exit
1 and nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from preflab.cli.main import main
from preflab.errors import DataError
from preflab.export.feedback import export_run, import_export
from preflab.export.limits import check_fits_store
from preflab.records import Annotator, Judgement, Rating
from preflab.store import FeedbackStore
from preflab.store.schema import metadata
from tests.export.test_export_checks import TOO_LONG, edit, files_of_folder
from tests.export.test_exporting import full_store

LONG = "x" * 130


def long_values_run(run: Path) -> None:
    """A SQLite run (SQLite keeps what PostgreSQL refuses) with two annotator ids of 130
    characters, one of whom answered, and a rating whose step is past a 32-bit integer."""
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    try:
        full_store(store)
        store.annotators.add(Annotator(id=LONG, source="human", name="long"))
        store.annotators.add(Annotator(id="y" * 200, source="human", name="longer"))
        query_id = store.queries.all()[0].id
        j = Judgement(id="j5", query_id=query_id, annotator_id=LONG, source="human", p=1.0)
        store.answers.add([j])
        store.ratings.add([Rating(annotator_id="bob", stream_id="s", step=2**31, t=0.0, value=0.0)])
    finally:
        store.close()


def test_check_refuses_an_export_of_a_130_character_id_naming_every_misfit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, exp = tmp_path / "run", tmp_path / "exp"
    long_values_run(run)
    assert main(["export", str(run), "--out", str(exp)]) == 0
    before, around = files_of_folder(exp), sorted(tmp_path.rglob("*"))
    capsys.readouterr()
    assert main(["export", "--check", str(exp)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    x40 = "x" * 40
    assert err == (
        f"preflab export: error: {exp}: 3 of the store's columns cannot hold values of this "
        "export (PostgreSQL refuses them; SQLite does not check); preflab export --import would "
        "refuse this export (its files are whole). Make annotators.id at most 128 characters, "
        "judgements.annotator_id at most 128 characters, ratings.step a whole number in "
        "-2147483648..2147483647 in the run the export came from and export it again. The "
        f"values: annotators.parquet row 3: id '{x40}…' is 130 characters long (also row 4); "
        f"judgements.parquet row 5 (id 'j5'): annotator_id '{x40}…' is 130 characters long; "
        "ratings.parquet row 1: step 2147483648 is out of range\n"
    )
    assert files_of_folder(exp) == before and sorted(tmp_path.rglob("*")) == around


def test_check_and_import_refuse_an_export_by_the_same_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, exp = tmp_path / "run", tmp_path / "exp"
    long_values_run(run)
    assert main(["export", str(run), "--out", str(exp)]) == 0
    into = tmp_path / "dst"
    store = FeedbackStore(into / "feedback.db", array_dir=into / "segments")
    try:
        with pytest.raises(DataError) as imported:
            import_export(exp, store)
        assert store.annotators.all() == [] and store.segments.count() == 0
    finally:
        store.close()
    capsys.readouterr()
    assert main(["export", "--check", str(exp)]) == 1
    checked = capsys.readouterr().err.strip().removeprefix("preflab export: error: ")
    refused = "preflab export --import would refuse this export (its files are whole)"
    assert checked == str(imported.value).replace("nothing was imported", refused)


@pytest.mark.parametrize("case", list(TOO_LONG))
def test_check_refuses_each_value_an_import_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    store = FeedbackStore(tmp_path / "src" / "feedback.db")
    full_store(store)
    export_run(store, tmp_path / "exp")
    store.close()
    exp = tmp_path / "exp"
    name, change, column, limit = TOO_LONG[case]
    edit(exp, name, change)
    capsys.readouterr()
    assert main(["export", "--check", str(exp)]) == 1
    err = capsys.readouterr().err
    assert f"{exp}/{name} row 1" in err and f"store's column {column} holds" in err
    assert limit in err and "export it again" in err and len(err.strip().splitlines()) == 1


def test_the_limits_are_read_from_the_store_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    """A column's length as the schema has it (not a copy of it); a column no record has (one
    the store derives) is left out."""
    monkeypatch.setattr(metadata.tables["annotators"].c.id.type, "length", 3)
    ok, long = Annotator(id="abc", source="human"), Annotator(id="abcd", source="human")
    check_fits_store(Path("exp"), [("annotators", [ok])])
    with pytest.raises(DataError, match=r"row 2: id 'abcd' is 4 characters long"):
        check_fits_store(Path("exp"), [("annotators", [ok, long])])
