"""Settings that cannot give labels are refused before anything is written, all at once and in
CLI terms (preflab.config.constraints through preflab.config.checks.check_run)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from preflab.config import LLMSourceConfig, ScalarSourceConfig, TrainConfig
from preflab.config.checks import check_run
from preflab.config.constraints import start_notes, unused_settings
from preflab.crowd.users import CrowdConfig
from preflab.errors import ConfigError
from preflab.policy.shaping import PolicyRewardConfig
from preflab.reward import RewardConfig
from preflab.runs import train
from preflab.sources.teacher import TeacherConfig


def _refusal(config: TrainConfig) -> str:
    with pytest.raises(ConfigError) as e:
        check_run(config)
    return str(e.value)


def test_scalar_with_the_default_segment_length_is_refused_with_every_fix() -> None:
    # the issue: default --segment-length 50 stored 15,000 ratings and made 0 labels (Pendulum
    # episodes of 200 steps hold 4 segments of 50, a window needs 10)
    msg = _refusal(
        TrainConfig(source="scalar", policy_reward=PolicyRewardConfig(live_steps=10_000))
    )
    assert msg.startswith("2 settings cannot work: (1) ")
    assert "--no-relabel" in msg  # SAC's relabelling would overwrite the live ratings
    assert "an episode is 200 steps, only 4 segment(s) of --segment-length 50" in msg
    assert "Use --segment-length 20 or --scalar.window 4" in msg


def test_scalar_without_a_live_phase_says_so_with_the_other_problems() -> None:
    msg = _refusal(TrainConfig(source="scalar"))
    assert "--policy-reward.live-steps" in msg and "--no-relabel" in msg
    assert "--segment-length 20" in msg


def test_scalar_settings_that_make_labels_pass() -> None:
    live = PolicyRewardConfig(live_steps=400)
    check_run(TrainConfig.smoke(source="scalar", policy_reward=live, segment_length=1))
    check_run(TrainConfig.smoke(source="scalar", policy_reward=live, segment_length=20))
    # a round of 200 steps per env holds 8 segments of 25: fewer than a window
    msg = _refusal(TrainConfig.smoke(source="scalar", policy_reward=live, segment_length=25))
    assert "a round per env is 200 steps" in msg or "an episode is 200 steps" in msg


def test_budgets_and_ignored_flags_are_reported_in_one_error() -> None:
    msg = _refusal(
        TrainConfig.smoke(
            pool_size=1,
            eval_episodes=0,
            aggregator="window",
            crowd=CrowdConfig(n_users=5),
            llm=LLMSourceConfig(model="foo"),
        )
    )
    assert msg.startswith("4 settings cannot work")
    assert "--pool-size 1" in msg and "--eval-episodes 0" in msg
    assert "--aggregator window makes labels from rating streams" in msg
    assert "--crowd.n-users 5, --llm.model foo would be ignored: --source teacher" in msg


def test_teacher_flags_with_the_llm_source_are_refused() -> None:
    msg = _refusal(
        TrainConfig.smoke(
            env_id="PrefLab/NoLock-v0",
            segment_length=1,
            source="llm",
            reward=RewardConfig(use_actions=False),
            teacher=TeacherConfig(beta=1.0),
        )
    )
    assert msg == (
        "--teacher.beta 1.0 would be ignored: --source llm does not read --teacher.*; add "
        "--source teacher, or drop it"
    )


def test_llm_source_needs_a_describer_for_the_env() -> None:
    msg = _refusal(TrainConfig.smoke(source="llm"))
    assert "no describer for --env-id Pendulum-v1" in msg and "PrefLab/NoLock-v0" in msg


def test_unused_settings_know_who_reads_what() -> None:
    # Atari's preset teacher is a default, not a user's choice
    assert unused_settings(TrainConfig.atari(source="crowd")) == []
    # people's ratings use the window settings, not the simulated raters'
    store = TrainConfig.smoke(source="store", scalar=ScalarSourceConfig(window=5, n_evaluators=3))
    assert unused_settings(store) == ["--scalar.n-evaluators 3"]
    crowd = TrainConfig.smoke(source="crowd", crowd=CrowdConfig(beta_range=(1.0, 2.0)))
    assert unused_settings(crowd) == []
    teacher = dataclasses.replace(crowd, source="teacher")
    assert unused_settings(teacher) == ["--crowd.beta-range 1.0 2.0"]


def test_a_refused_run_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--pool-size 1"):
        train(TrainConfig.smoke(pool_size=1), run_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_store_runs_say_how_people_answer() -> None:
    assert start_notes(TrainConfig.smoke(), "r", studio=False) == []
    assert start_notes(TrainConfig.smoke(source="store"), "r", studio=True) == []
    (paced,) = start_notes(TrainConfig.smoke(source="store"), "r", studio=False)
    assert "`preflab studio r`" in paced and "--studio" in paced
    (steps,) = start_notes(TrainConfig.smoke(source="store", clock="steps"), "r", studio=False)
    assert "never waits" in steps and "0 labels" in steps and "`preflab studio r`" in steps
