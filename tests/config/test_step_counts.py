"""Step counts and the label budget have an upper bound: an absurd budget (10**26 steps) is
refused when the config is made, naming the field and the accepted range, instead of a run that
starts, writes its folder and never gets through planning its rounds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from preflab.cli.main import main
from preflab.config import MAX_ROUNDS, MAX_STEPS, STEP_COUNTS, TrainConfig
from preflab.errors import ConfigError

HUGE = 10**26


@pytest.mark.parametrize("field", STEP_COUNTS)
def test_a_count_past_2_to_the_53_is_refused_naming_the_field(field: str) -> None:
    assert set(STEP_COUNTS) >= {"total_steps", "steps_per_round", "total_labels"}
    with pytest.raises(ConfigError) as info:
        TrainConfig(algo="sac", **{field: HUGE})
    assert str(info.value) == (
        f"{field} must be at most 9,007,199,254,740,992 (2**53: the largest count the run's "
        "float64 and int64 counters hold exactly), got 100,000,000,000,000,000,000,000,000; "
        "lower it"
    )
    with pytest.raises(ConfigError, match=rf"{field} must be at most .* got 1\.000e\+400"):
        TrainConfig(algo="sac", **{field: 10**400})  # no float overflow in the message


def test_the_largest_count_is_accepted() -> None:
    config = TrainConfig(total_steps=MAX_STEPS, steps_per_round=2**40, total_labels=MAX_STEPS)
    assert config.total_steps == MAX_STEPS == 2**53
    with pytest.raises(ConfigError, match="total_steps must be at most"):
        TrainConfig(total_steps=MAX_STEPS + 1, steps_per_round=2**40)


def test_more_rounds_than_can_be_planned_are_refused() -> None:
    """Below 2**53 steps, a budget may still ask for more feedback rounds than the label
    schedule can list: 10**15 steps of 1,000-step rounds."""
    with pytest.raises(ConfigError) as info:
        TrainConfig(total_steps=10**15)
    assert str(info.value) == (
        "total_steps 1,000,000,000,000,000 with steps_per_round 1,000 gives 999,999,999,999 "
        "feedback rounds after the initial steps; a run may have at most 1,000,000 (its label "
        "schedule plans every round when it starts): raise steps_per_round or lower total_steps"
    )
    most = 1_000 + 1_000 * MAX_ROUNDS  # initial_steps, then MAX_ROUNDS rounds of 1,000 steps
    assert TrainConfig(total_steps=most).n_rounds == MAX_ROUNDS
    with pytest.raises(ConfigError, match="gives 1,000,001 feedback rounds"):
        TrainConfig(total_steps=most + 1)
    assert TrainConfig(total_steps=10**15, steps_per_round=10**10).n_rounds == 100_000


def test_a_config_json_with_an_absurd_budget_is_refused(tmp_path: Path) -> None:
    data = json.loads(TrainConfig().to_json())
    data["total_steps"] = HUGE
    with pytest.raises(ConfigError, match="total_steps must be at most 9,007,199,254,740,992"):
        TrainConfig.from_json(json.dumps(data))


@pytest.mark.parametrize("flag", ["--total-steps", "--total-labels"])
def test_train_refuses_an_absurd_budget_and_writes_nothing(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    flag: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:  # tyro's usage error: a message, no traceback
        main(["train", flag, str(HUGE), "--run-dir", "run"])
    assert exc.value.code == 2
    err = " ".join(capsys.readouterr().err.replace("│", " ").split())
    assert f"{flag[2:].replace('-', '_')} must be at most 9,007,199,254,740,992" in err
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_a_seed_past_2_to_the_32_is_refused_when_the_config_is_made(tmp_path: Path) -> None:
    """SB3 seeds NumPy's legacy generator with the run's seed (0..2**32 − 1): a larger one was
    accepted by the config and failed later with NumPy's 'Overflow when unpacking long long'."""
    assert TrainConfig(algo="sac", seed=2**32 - 1).seed == 2**32 - 1
    for seed in (2**32, HUGE):
        with pytest.raises(
            ConfigError, match=rf"seed must be ≥ 0 and at most 4294967295 .* {seed}"
        ):
            TrainConfig(algo="sac", seed=seed)
