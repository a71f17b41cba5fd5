"""``--source vlm`` from the config to a finished run, against the stand-in server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from preflab.config import TrainConfig, VLMOptions
from preflab.errors import ConfigError
from preflab.store import FeedbackStore
from preflab.testing.vlmserver import FrameJudgeServer, upright
from tests import warm_python

TINY = [
    "--env-id", "Pendulum-v1", "--algo", "ppo", "--total-steps", "600", "--initial-steps",
    "200", "--steps-per-round", "200", "--total-labels", "6", "--segment-length", "20",
    "--eval-episodes", "1", "--pool-size", "40",
]  # fmt: skip
TASK = "swing the pendulum up and keep it upright"


def test_config_needs_a_task_and_pair_queries() -> None:
    with pytest.raises(ConfigError, match="--task"):
        TrainConfig(source="vlm")
    with pytest.raises(ConfigError, match="pair queries"):
        TrainConfig(source="vlm", task=TASK, selector="groupwise")
    with pytest.raises(ConfigError, match=r"vlm\.samples"):
        VLMOptions(samples=0)
    c = TrainConfig(source="vlm", task=TASK)
    assert c.selector_in_use == "disagreement"
    assert json.loads(c.to_json())["vlm"]["prompt"] == "two-stage"


def test_train_with_the_vlm_judge_finishes_and_reports_its_usage(tmp_path: Path) -> None:
    with FrameJudgeServer(upright) as srv:
        cmd = [
            sys.executable, "-m", "preflab.cli.main", "train", *TINY, "--run-dir", "run",
            "--source", "vlm", "--task", TASK, "--vlm.base-url", srv.base_url,
            "--vlm.model", "stand-in", "--vlm.frames", "2", "--vlm.image-size", "64",
            "--vlm.samples", "2",
        ]  # fmt: skip
        r = warm_python.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        requests = srv.requests
    run = tmp_path / "run"
    summary = json.loads((run / "summary.json").read_text())
    judge = summary["ai_judge"]
    assert judge["source"] == "vlm" and judge["model"] == "stand-in"
    # two stages, two samples, six pairs; a stage-2 prompt that repeats an earlier one (two
    # clips described alike) is answered from the cache
    assert judge["requests"] == requests and judge["requests"] + judge["cached"] == 2 * 2 * 6
    assert judge["prompt_tokens"] > 0 and judge["failed"] == 0
    assert summary["n_labels"] == 6 and summary["n_judgements"] == 12
    assert "ai_judge" in r.stdout
    store = FeedbackStore(run / "feedback.db")
    try:
        judgements = [j for _s, j in store.answers.judgements()]
    finally:
        store.close()
    assert {j.source for j in judgements} == {"vlm"}
    assert all(j.meta["description"].startswith("Clip 1 scores") for j in judgements)


def test_no_server_is_refused_before_the_run_naming_the_vlm_flags() -> None:
    import socket

    from preflab.config.checks import check_judge_server

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = TrainConfig(
        source="vlm", task=TASK, vlm=VLMOptions(base_url=f"http://127.0.0.1:{port}/v1")
    )
    with pytest.raises(ConfigError, match=r"--vlm\.base-url") as err:
        check_judge_server(config)
    assert "--llm." not in str(err.value)


def test_a_run_killed_mid_round_resumes_without_asking_anything_twice(tmp_path: Path) -> None:
    """kill -9 after a round's judgements are stored, then --resume: the answers given before
    the kill come from the store's cache, so both processes together ask the server exactly
    what one uninterrupted run asks, and end with the same labels."""
    import os

    vlm = ["--source", "vlm", "--task", TASK, "--vlm.frames", "2", "--vlm.image-size", "64"]
    vlm += ["--vlm.samples", "2", "--vlm.temperature", "0"]

    def train(*args: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
        cmd = [sys.executable, "-m", "preflab.cli.main", "train", *args]
        return warm_python.run(
            cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env
        )

    with FrameJudgeServer(upright) as srv:
        whole = train(*TINY, *vlm, "--vlm.base-url", srv.base_url, "--run-dir", "whole")
        assert whole.returncode == 0, whole.stderr[-2000:]
        once = srv.requests
    with FrameJudgeServer(upright) as srv:
        env = {**os.environ, "PREFLAB_FAILPOINT": "judgements_stored:2"}
        killed = train(*TINY, *vlm, "--vlm.base-url", srv.base_url, "--run-dir", "run", env=env)
        assert killed.returncode != 0 and not (tmp_path / "run" / "summary.json").exists()
        before = srv.requests
        resumed = train("--resume", "run")
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        after = srv.requests - before
    assert before > 0 and before + after == once
    a = json.loads((tmp_path / "whole" / "summary.json").read_text())
    b = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert (a["n_labels"], a["n_judgements"]) == (b["n_labels"], b["n_judgements"])
    assert b["ai_judge"]["cached"] > a["ai_judge"]["cached"]  # the answers before the kill
