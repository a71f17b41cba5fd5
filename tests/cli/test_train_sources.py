"""`preflab train --source ...`: every kind of feedback drives a run from the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from preflab.store import FeedbackStore
from preflab.testing.llmserver import Reply, ScriptedServer
from tests import warm_python

TINY = [
    "--algo", "ppo", "--total-steps", "600", "--initial-steps", "200", "--steps-per-round",
    "200", "--total-labels", "12", "--segment-length", "20", "--eval-episodes", "1",
    "--pool-size", "40",
]  # fmt: skip


def _train(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "preflab.cli.main", "train", *TINY, "--run-dir", "run", *args]
    return warm_python.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)


def _sources(run: Path) -> set[str]:
    store = FeedbackStore(run / "feedback.db")
    try:
        return {j.source for _s, j in store.answers.judgements()}
    finally:
        store.close()


def test_crowd_source_with_sml(tmp_path: Path) -> None:
    r = _train(tmp_path, "--source", "crowd", "--crowd.n-users", "5")
    assert r.returncode == 0, r.stderr[-2000:]
    assert _sources(tmp_path / "run") == {"crowd"}
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["source"] == "crowd" and config["crowd"]["n_users"] == 5
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["n_labels"] > 0


def test_llm_source_against_a_local_server(tmp_path: Path) -> None:
    with ScriptedServer(lambda req, n: Reply(content="Yes." if n % 3 else "No.")) as srv:
        r = _train(
            tmp_path,
            "--env-id", "PrefLab/NoLock-v0", "--segment-length", "1",
            "--source", "llm", "--llm.base-url", srv.base_url, "--llm.n-queries", "3",
            "--reward.no-use-actions",
        )  # fmt: skip
        assert r.returncode == 0, r.stderr[-2000:]
        assert srv.requests >= 12 * 3
    assert _sources(tmp_path / "run") == {"llm"}
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["n_labels"] == 12 and summary["n_judgements"] == 36


def test_store_source_without_people_waits_then_says_how_it_ended(tmp_path: Path) -> None:
    """People set the clock: with nobody answering, the trainer waits (it publishes its queries
    for people) until --max-minutes, then ends saying so; it never trains on past its answers."""
    r = _train(tmp_path, "--source", "store", "--max-minutes", "0.05")
    assert r.returncode == 0, r.stderr[-2000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["n_judgements"] == 0 and summary["ended_by"] == "deadline"
    assert summary["env_steps"] < 600  # the trainer did not run ahead of the (absent) people
    assert "waiting for you" in r.stderr and "0 labels" in r.stderr
    store = FeedbackStore(tmp_path / "run" / "feedback.db")
    assert store.queries.count() > 0  # published for people to answer


def test_store_source_with_the_steps_clock_never_blocks(tmp_path: Path) -> None:
    r = _train(tmp_path, "--source", "store", "--clock", "steps")
    assert r.returncode == 0, r.stderr[-2000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["n_judgements"] == 0 and summary["env_steps"] == 600


def test_unknown_source_is_a_clear_error(tmp_path: Path) -> None:
    r = _train(tmp_path, "--source", "oracle")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "teacher" in r.stderr and "crowd" in r.stderr


def test_scalar_raters_drive_a_run(tmp_path: Path) -> None:
    r = _train(
        tmp_path,
        "--source", "scalar", "--policy-reward.live-steps", "400", "--segment-length", "1",
        "--scalar.n-evaluators", "3", "--scalar.max-labels", "500", "--total-steps", "800",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    store = FeedbackStore(tmp_path / "run" / "feedback.db")
    ratings = store.ratings.all()
    assert {x.annotator_id for x in ratings} == {f"evaluator-{k}" for k in range(3)}
    assert len(ratings) >= 3 * 400  # every live step rated by every evaluator
    assert {q.kind for q in store.queries.all()} == {"rating"}
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["n_labels"] == 500


def test_scalar_source_needs_a_live_phase(tmp_path: Path) -> None:
    r = _train(tmp_path, "--source", "scalar")
    assert r.returncode != 0 and "policy-reward.live-steps" in r.stdout + r.stderr
    assert "Traceback" not in r.stderr


def test_the_final_table_counts_ties_and_unanswered_pairs_when_there_are_some(
    tmp_path: Path,
) -> None:
    """A teacher that answers some pairs 0.5 and skips some: the table shows both counts (as
    summary.json holds them), so a run whose answers were mostly ties or skips says so."""
    r = _train(tmp_path, "--teacher.skip-threshold", "-100", "--teacher.equal-threshold", "40")
    assert r.returncode == 0, r.stderr[-2000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["n_equal"] > 0 and summary["n_skipped"] > 0
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in r.stdout.splitlines() if line.count("│") == 3}  # fmt: skip
    assert rows["n_equal"] == str(summary["n_equal"])
    assert rows["n_skipped"] == str(summary["n_skipped"])
    plain = _train(tmp_path, "--run-dir", "oracle")  # the oracle: every pair answered, no tie
    assert plain.returncode == 0, plain.stderr[-2000:]
    assert "n_equal" not in plain.stdout and "n_skipped" not in plain.stdout
