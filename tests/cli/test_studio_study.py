"""``preflab studio study RUN_DIR`` (issue #61): creates the study and prints its link with
Prolific's placeholders, keeps the link on later calls (changing only the settings given),
closes enrolment, writes the payments table, and refuses bad settings with one clear line."""

from __future__ import annotations

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
