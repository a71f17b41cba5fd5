"""``preflab studio`` and ``preflab studio add-annotator``; the launch helper."""

from __future__ import annotations

import os
import socket
import stat
import sys
from pathlib import Path

import httpx
import pytest

from preflab.cli.main import main
from preflab.errors import ConfigError
from preflab.store import FeedbackStore
from preflab.studio.bootstrap import OWNER_TOKEN_FILE, owner_token
from preflab.studio.launch import start_studio_process
from tests import warm_python
from tests.studio.api_server import free_port, seed_run

SRC = str(Path(__file__).resolve().parents[2] / "src")


@pytest.fixture
def run_dir(tmp_path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    seed_run(store)
    store.close()
    return run


def _one_line_error(capsys, argv: list[str]) -> str:
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    assert err.startswith("preflab studio: error: ")
    return err


def test_bad_input_is_one_line_error(capsys, tmp_path, run_dir) -> None:
    assert "not a directory" in _one_line_error(capsys, ["studio", str(tmp_path / "missing")])
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no feedback.db" in _one_line_error(capsys, ["studio", str(empty)])
    err = _one_line_error(
        capsys, ["studio", str(run_dir), "--store-url", "postgresql+psycopg://u@127.0.0.1:1/x"]
    )
    assert "cannot reach the store" in err  # an unreachable server is named as such
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        err = _one_line_error(capsys, ["studio", str(run_dir), "--port", str(port)])
    assert "in use" in err and "--port" in err
    assert "--workers" in _one_line_error(capsys, ["studio", str(run_dir), "--workers", "0"])
    assert "run directory" in _one_line_error(capsys, ["studio", "add-annotator", "Bob"])
    err = _one_line_error(
        capsys, ["studio", str(run_dir), "--repeat-share", "2", "--undo-s", "-1"]
    )  # every bad queue flag in one message
    assert "--repeat-share must be in [0, 1], got 2.0" in err and "--undo-s must be in" in err


def test_bad_input_from_the_console_has_no_traceback(tmp_path) -> None:
    env = {**os.environ, "PYTHONPATH": SRC}
    # a real process forked from the warm interpreter (tests/warm_python.py): its stderr is
    # what a person sees; a fresh one spent ~1.5 s of CPU importing first
    r = warm_python.run(
        [sys.executable, "-m", "preflab.cli.main", "studio", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0 and "no feedback.db" in r.stderr


def test_add_annotator_prints_a_personal_link(capsys, run_dir) -> None:
    assert main(["studio", "add-annotator", "<b>Dana</b>", str(run_dir), "--port", "9001"]) == 0
    out = capsys.readouterr().out.strip()
    assert "http://127.0.0.1:9001/#token=" in out
    token = out.rsplit("#token=", 1)[1]
    assert len(token) == 32  # secrets.token_urlsafe(24)
    url = f"sqlite:///{run_dir / 'feedback.db'}"
    assert main(["studio", "add-annotator", "Eve", "--store-url", url, "--owner"]) == 0
    eve_token = capsys.readouterr().out.strip().rsplit("#token=", 1)[1]
    store = FeedbackStore(run_dir / "feedback.db", array_dir=run_dir / "segments")
    dana = store.annotators.by_token(token)
    assert dana is not None and dana.name == "<b>Dana</b>" and dana.meta["role"] == "annotator"
    assert store.annotators.by_token(eve_token).meta["role"] == "owner"  # type: ignore[union-attr]
    # the owner token is created once, kept with mode 0600 and reused
    t1 = owner_token(store, run_dir)
    t2 = owner_token(store, run_dir)
    assert t1 == t2 and store.annotators.by_token(t1).meta["role"] == "owner"  # type: ignore[union-attr]
    assert stat.S_IMODE((run_dir / OWNER_TOKEN_FILE).stat().st_mode) == 0o600


@pytest.mark.parametrize(("content", "words"), [(b"a\n", "1 characters"), (b"\xff\xfe", "UTF-8")])
def test_a_weak_or_unreadable_owner_token_file_is_refused(
    run_dir, content: bytes, words: str
) -> None:
    """The owner token signs the owner in: a hand-edited one that could be guessed (or that is
    not text) is refused with how to get a new one, and nobody's token changes."""
    store = FeedbackStore(run_dir / "feedback.db", array_dir=run_dir / "segments")
    good = owner_token(store, run_dir)
    (run_dir / OWNER_TOKEN_FILE).write_bytes(content)
    with pytest.raises(ConfigError, match=f"{words}.*Delete the file"):
        owner_token(store, run_dir)
    assert store.annotators.by_token(good) is not None  # the owner's token is unchanged
    assert store.annotators.by_token("a") is None
    store.close()


def test_start_studio_process_serves_the_run(run_dir) -> None:
    port = free_port()
    rules = ("--min-plays", "2", "--min-answer-s", "5", "--undo-s", "30")
    proc = start_studio_process(run_dir, "127.0.0.1", port, extra_args=("--no-media", *rules))
    try:
        token = (run_dir / OWNER_TOKEN_FILE).read_text().strip()
        assert stat.S_IMODE((run_dir / OWNER_TOKEN_FILE).stat().st_mode) == 0o600
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", trust_env=False) as c:
            assert c.get("/api/health").json()["ok"] is True
            me = c.get("/api/me", headers={"Authorization": f"Bearer {token}"}).json()
            assert me["role"] == "owner"
            assert c.get("/api/me").status_code == 401
            ahead = c.get(
                "/api/queries/ahead",
                params={"kind": "pair", "k": 1},
                headers={"Authorization": f"Bearer {token}"},
            )  # the page is told the rules the flags set
            assert ahead.json()["rules"] == {
                "min_plays": 2,
                "min_answer_s": 5.0,
                "undo_grace_s": 30.0,
            }
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    log = (run_dir / "studio.log").read_text()
    assert f"http://127.0.0.1:{port}/#token=***" in log  # the link, its token masked
    assert token not in log
    assert stat.S_IMODE((run_dir / "studio.log").stat().st_mode) == 0o600
