"""``preflab studio study RUN_DIR`` (issue #61): creates the study and prints its link with
Prolific's placeholders, keeps the link on later calls (changing only the settings given),
closes enrolment, writes the payments table, and refuses bad settings with one clear line; a
link file the store does not match (a renewal cut off) is replaced by a new working link, and a
failed write of the file keeps the old link working."""

from __future__ import annotations

import errno
import os
import re
import socket
import stat

import pytest

from preflab.cli.studio import main
from preflab.errors import ConfigError
from preflab.store import FeedbackStore
from preflab.store.annotators import hash_token
from preflab.studio import study as S


def test_create_update_close_and_export(tmp_path, capsys) -> None:
    run = tmp_path / "run"
    FeedbackStore(run / "feedback.db").close()
    consent = tmp_path / "consent.md"
    consent.write_text("# Consent\n\nOur lab's text.\n")
    assert (
        main(
            [
                "study",
                str(run),
                "--cap",
                "20",
                "--completion-code",
                "CODE7",
                "--consent",
                str(consent),
                "--url",
                "https://lab.example/studio",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    secret = (run / "study_link").read_text().strip()
    assert stat.S_IMODE((run / "study_link").stat().st_mode) == 0o600
    assert f"https://lab.example/studio/s/{secret}" in out
    assert (
        "PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}" in out
    )
    assert main(["study", str(run), "--overlap", "5", "--close"]) == 0
    out = capsys.readouterr().out
    assert "study updated" in out and "enrolment closed" in out and secret in out
    store = FeedbackStore(run / "feedback.db")
    try:
        loaded = S.load(store)
        assert loaded is not None
        study, config = loaded
        assert (config.cap, config.overlap, config.completion_code) == (20, 5, "CODE7")
        assert config.consent_md.startswith("# Consent") and study.closed_at is not None
        assert store.studies.by_link(hash_token(secret)) == study
    finally:
        store.close()
    assert main(["study", str(run), "--open", "--export", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "study_payments.csv").read_text().startswith("annotator_id,")


def test_bad_settings_are_refused_with_a_clear_message(tmp_path) -> None:
    run = tmp_path / "run"
    FeedbackStore(run / "feedback.db").close()
    with pytest.raises(ConfigError, match="redirect_url must be an http"):
        main(["study", str(run), "--redirect-url", "javascript:alert(1)"])
    with pytest.raises(ConfigError, match="gold_rate"):
        main(["study", str(run), "--gold-rate", "0.9"])
    with pytest.raises(ConfigError, match="cannot read"):
        main(["study", str(run), "--consent", str(tmp_path / "missing.md")])


@pytest.mark.parametrize(
    "left", ["old", "empty", "garbage"], ids=["old-secret", "empty", "not-a-link"]
)
def test_a_link_file_the_store_does_not_match_gets_a_new_working_link(
    tmp_path, capsys, caplog, left: str
) -> None:
    """A renewal cut off after storing the new hash (or while writing the file) left
    RUN_DIR/study_link holding the old secret, nothing, or junk: the next call does not print
    that dead link but makes a new one, says so, and the store opens it."""
    run = tmp_path / "run"
    FeedbackStore(run / "feedback.db").close()
    assert main(["study", str(run)]) == 0
    old = (run / "study_link").read_text().strip()
    store = FeedbackStore(run / "feedback.db")
    try:  # the store moved on to a link whose file was never written
        store.studies.put(S.STUDY_ID, link_hash=hash_token(S.new_secret()), config={})
    finally:
        store.close()
    (run / "study_link").write_text({"old": old, "empty": "", "garbage": "x" * 30}[left])
    capsys.readouterr()
    with caplog.at_level("WARNING", logger="preflab.studio"):
        assert main(["study", str(run), "--url", "https://lab.example"]) == 0
    out = capsys.readouterr().out
    secret = (run / "study_link").read_text().strip()
    assert secret and secret != old and "study link renewed" in out
    assert f"https://lab.example/s/{secret}" in out and old not in out
    assert any("making a new study link" in m for m in caplog.messages)
    assert stat.S_IMODE((run / "study_link").stat().st_mode) == 0o600
    assert [p.name for p in run.iterdir() if "study_link" in p.name] == ["study_link"]
    store = FeedbackStore(run / "feedback.db")
    try:
        study, _config = S.by_secret(store, secret)  # the printed link opens the study
        assert study.id == S.STUDY_ID
    finally:
        store.close()
    # the next call keeps this link, silently
    caplog.clear()
    assert main(["study", str(run)]) == 0
    assert "study unchanged" in capsys.readouterr().out
    assert (run / "study_link").read_text().strip() == secret and not caplog.messages


def test_a_renewal_whose_file_write_fails_keeps_the_old_link_working(
    tmp_path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--new-link on a full disk: one clear error, the store and RUN_DIR/study_link keep the
    old link (not a new hash with an emptied file), and the next call prints a working link."""
    run = tmp_path / "run"
    FeedbackStore(run / "feedback.db").close()
    assert main(["study", str(run)]) == 0
    old = (run / "study_link").read_text().strip()
    real_fdopen = os.fdopen

    class FullDisk:
        def __init__(self, f) -> None:
            self.f = f

        def __enter__(self) -> FullDisk:
            return self

        def __exit__(self, *exc: object) -> None:
            self.f.close()

        def write(self, _text: str) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fdopen", lambda fd, *a, **k: FullDisk(real_fdopen(fd, *a, **k)))
    with pytest.raises(ConfigError, match=r"cannot write .*study_link: No space left"):
        main(["study", str(run), "--new-link"])
    monkeypatch.setattr(os, "fdopen", real_fdopen)
    assert (run / "study_link").read_text().strip() == old
    assert [p.name for p in run.iterdir() if "study_link" in p.name] == ["study_link"]
    capsys.readouterr()
    assert main(["study", str(run)]) == 0
    out = capsys.readouterr().out
    secret = (run / "study_link").read_text().strip()
    assert f"/s/{secret}" in out
    store = FeedbackStore(run / "feedback.db")
    try:
        S.by_secret(store, secret)  # the printed link opens the study
    finally:
        store.close()


@pytest.mark.parametrize("flag", ["--consent", "--instructions"])
def test_a_text_file_that_is_not_utf8_is_named(tmp_path, flag: str) -> None:
    run = tmp_path / "run"
    FeedbackStore(run / "feedback.db").close()
    text = tmp_path / "text.md"
    text.write_bytes("# Einwilligung\n\nIch stimme zu (Prüfung).\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=re.escape(f"{flag} {text} is not UTF-8 text")) as err:
        main(["study", str(run), flag, str(text)])
    assert "must be UTF-8 text" in str(err.value)
    assert not (run / "study_link").exists()  # nothing made


@pytest.mark.parametrize(
    "content", [b"", b"  \n\n", b"\xef\xbb\xbf\n"], ids=["empty", "blank", "bom"]
)
@pytest.mark.parametrize(
    ("flag", "field"), [("--consent", "consent_md"), ("--instructions", "instructions_md")]
)
def test_an_empty_text_file_is_refused_naming_the_file(
    tmp_path, content: bytes, flag: str, field: str
) -> None:
    """An empty or whitespace-only --consent or --instructions file: one error naming the
    option and the file; no study with a blank page is made, and a stored study keeps its
    text."""
    run = tmp_path / "run"
    FeedbackStore(run / "feedback.db").close()
    text = tmp_path / "text.md"
    text.write_bytes(content)
    expected = re.escape(f"{flag} {text}: {field} is empty or only whitespace; a study needs")
    with pytest.raises(ConfigError, match=expected):
        main(["study", str(run), flag, str(text)])
    store = FeedbackStore(run / "feedback.db")
    try:
        assert S.load(store) is None  # no study with a blank page
    finally:
        store.close()
    assert main(["study", str(run)]) == 0
    with pytest.raises(ConfigError, match=expected):
        main(["study", str(run), flag, str(text)])
    store = FeedbackStore(run / "feedback.db")
    try:
        loaded = S.load(store)
        assert loaded is not None
        assert getattr(loaded[1], field).strip()  # the stored text is kept
    finally:
        store.close()


def test_a_stored_blank_instructions_text_is_named_and_can_be_replaced(tmp_path, capsys) -> None:
    """A study an older PrefLab stored with blank instructions (its CLI accepted an empty
    file): a change that leaves them blank is refused naming instructions_md, and
    --instructions FILE replaces them, keeping the study's link."""
    run = tmp_path / "run"
    FeedbackStore(run / "feedback.db").close()
    assert main(["study", str(run), "--cap", "20"]) == 0
    secret = (run / "study_link").read_text().strip()
    store = FeedbackStore(run / "feedback.db")
    try:
        study = store.studies.get(S.STUDY_ID)
        assert study is not None
        store.studies.put(
            S.STUDY_ID, link_hash=None, config={**study.config, "instructions_md": "  \n"}
        )
    finally:
        store.close()
    with pytest.raises(ConfigError, match="instructions_md is empty or only whitespace"):
        main(["study", str(run), "--overlap", "5"])
    with socket.socket() as taken:  # were the study not checked first, the port would be named
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        with pytest.raises(ConfigError, match=r"cannot be served: instructions_md is empty"):
            main([str(run), "--port", port])  # the studio refuses before it serves
    instructions = tmp_path / "instructions.md"
    instructions.write_text("# Instructions\n\nPick the clip that reaches the goal.\n")
    capsys.readouterr()
    assert main(["study", str(run), "--instructions", str(instructions)]) == 0
    assert "study updated" in capsys.readouterr().out
    store = FeedbackStore(run / "feedback.db")
    try:
        _study, config = S.by_secret(store, secret)  # the same link
        assert config.instructions_md.startswith("# Instructions") and config.cap == 20
    finally:
        store.close()
