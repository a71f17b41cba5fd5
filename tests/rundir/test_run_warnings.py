"""Runs that fail and would look fine say so: once per kind in the terminal (logging), in
RunResult.warnings and in summary.json (preflab.rundir.runwarnings through the loop)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from preflab.config import LLMSourceConfig, TrainConfig
from preflab.reward import RewardConfig
from preflab.rundir.runwarnings import RunWarnings
from preflab.runs import train
from preflab.testing.llmserver import Reply, ScriptedServer


def test_each_kind_is_logged_once_and_survives_a_checkpoint(caplog) -> None:
    w = RunWarnings()
    with caplog.at_level(logging.WARNING, logger="preflab"):
        assert w.warn("ties", "all ties") and not w.warn("ties", "all ties again")
        w.warn("nan", "nan metrics")
    assert [r.getMessage() for r in caplog.records] == ["all ties", "nan metrics"]
    assert w.messages == ["all ties", "nan metrics"] and w.count("ties") == 2
    again = RunWarnings(w.state())
    assert again.messages == w.messages and not again.warn("ties", "x")


def _summary(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())


def test_acrobot_gives_only_ties_and_says_why(tmp_path: Path, caplog) -> None:
    # Acrobot pays -1 every step until the goal: every 20-step segment a random policy records
    # returns -20, so the oracle can only answer ties
    with caplog.at_level(logging.WARNING, logger="preflab"):
        result = train(TrainConfig.smoke(env_id="Acrobot-v1"), run_dir=tmp_path / "run")
    ties = [w for w in result.warnings if "labels are ties (p = 0.5)" in w]
    assert len(ties) == 1 and "--termination.absorbing" in ties[0]
    assert any(w.startswith("reward_accuracy and reward_corr are nan") for w in result.warnings)
    logged = [r.getMessage() for r in caplog.records if "ties (p = 0.5)" in r.getMessage()]
    assert len(logged) == 1  # once per kind, not once per round
    assert _summary(tmp_path / "run")["warnings"] == list(result.warnings)


def test_a_healthy_run_has_no_warnings(tmp_path: Path) -> None:
    result = train(TrainConfig.smoke(), run_dir=tmp_path / "run")
    assert result.n_labels > 0 and result.warnings == ()
    assert _summary(tmp_path / "run")["warnings"] == []


def test_store_run_that_never_waits_says_who_should_answer(tmp_path: Path) -> None:
    result = train(TrainConfig.smoke(source="store", clock="steps"), run_dir=tmp_path / "run")
    assert result.n_labels == 0
    hint = f"`preflab studio {tmp_path / 'run'}`"
    (round_0,) = [w for w in result.warnings if w.startswith("round 0 ended with 0 labels")]
    assert "nobody answered" in round_0 and hint in round_0
    assert any(w.startswith("the run ended (steps) with 0 labels") for w in result.warnings)


@pytest.mark.parametrize("answer", ["", "I cannot tell from these descriptions."])
def test_llm_judge_that_gives_no_readable_answer_is_loud(tmp_path: Path, answer: str) -> None:
    with ScriptedServer(lambda req, n: Reply(content=answer)) as srv:
        config = TrainConfig.smoke(
            env_id="PrefLab/NoLock-v0",
            segment_length=1,
            source="llm",
            reward=RewardConfig(use_actions=False),
            llm=LLMSourceConfig(base_url=srv.base_url, model="tiny"),
        )
        result = train(config, run_dir=tmp_path / "run")
    assert result.n_labels == 0 and result.n_judgements == 12
    (llm,) = [w for w in result.warnings if w.startswith("the language model's answers")]
    assert srv.base_url in llm and "model 'tiny'" in llm
    if answer:
        assert (
            "3 of 3 answers this round were empty (0) or had no yes/no verdict (3)" in llm
            and "e.g. 'I cannot tell" in llm
        )
    else:
        assert (
            "3 of 3 answers this round were empty (3) or had no yes/no verdict (0)" in llm
            and "e.g. ''" in llm
        )
