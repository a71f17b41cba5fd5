"""A run whose store was lost or emptied: the commands that read it (export, resume, the
studio) refuse it with a message saying so and leave it as it was, instead of making a new
empty store and reporting an empty export (or failing later with a KeyError)."""

from __future__ import annotations

from pathlib import Path

import pytest

from preflab.cli.main import main
from tests.cli.test_bad_input import assert_one_line
from tests.run_support import copy_run


def _lost(finished: Path, tmp_path: Path, how: str) -> Path:
    run = copy_run(finished, tmp_path)
    db = run / "feedback.db"
    for extra in (run / "feedback.db-wal", run / "feedback.db-shm"):
        extra.unlink(missing_ok=True)
    if how == "emptied":
        db.write_bytes(b"")
    else:
        db.unlink()
    return run


def test_export_refuses_an_emptied_store(capsys, finished: Path, tmp_path: Path) -> None:
    run = _lost(finished, tmp_path, "emptied")
    code = main(["export", str(run), "--out", str(tmp_path / "out")])
    assert_one_line(code, capsys.readouterr().err, "no PrefLab store", "Restore")
    assert (run / "feedback.db").read_bytes() == b""
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_resume_refuses_a_lost_store(capsys, finished: Path, tmp_path: Path) -> None:
    run = _lost(finished, tmp_path, "deleted")
    code = main(["train", "--resume", str(run), "--total-steps", "1200"])
    assert_one_line(code, capsys.readouterr().err, "no PrefLab store", "feedback.db")
    assert not (run / "feedback.db").exists()


def test_the_studio_refuses_an_emptied_store(tmp_path: Path, finished: Path) -> None:
    from preflab.errors import PrefLabError
    from preflab.studio.bootstrap import open_store

    run = _lost(finished, tmp_path, "emptied")
    with pytest.raises(PrefLabError, match="no PrefLab store"):
        open_store(run, None)
    assert (run / "feedback.db").read_bytes() == b""
