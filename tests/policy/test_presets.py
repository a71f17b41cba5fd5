"""Presets per env family: which preset an env gets, PPO's batch dividing its rollout, the
run's real env steps stated when SB3's collection blocks overshoot, and hyperparams.json."""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path

import pytest

from preflab.config import TrainConfig
from preflab.envs import make_vec_env
from preflab.errors import ConfigError
from preflab.policy.agents import make_agent
from preflab.policy.presets import (
    FAMILY_PRESETS,
    PRESETS,
    env_family,
    planned_env_steps,
    preset,
)
from preflab.runs import train


@pytest.mark.parametrize(
    ("env_id", "family"),
    [
        ("HalfCheetah-v5", "mujoco"),
        ("Hopper-v5", "mujoco"),
        ("dm_control/cheetah-run-v0", "dmc"),  # selected by its id; DMC itself is issue #27
        ("Pendulum-v1", "classic"),
        ("CartPole-v1", "classic"),
        ("LunarLander-v3", "classic"),
        ("ALE/Pong-v5", "atari"),
        ("PongNoFrameskip-v4", "atari"),
        ("MiniGrid-Empty-5x5-v0", "grid"),
        ("PrefLab/Lock-v0", "grid"),
        ("NoSuchEnv-v0", "other"),
    ],
)
def test_env_family(env_id: str, family: str) -> None:
    assert env_family(env_id) == family


def test_family_presets_are_selected_and_explicit_flags_win() -> None:
    mujoco = preset("sac", 1, 1000, env_id="HalfCheetah-v5")
    assert (mujoco["gamma"], mujoco["tau"], mujoco["learning_rate"]) == (0.99, 0.005, 3e-4)
    # the main job (Pendulum SAC) keeps PrefLab's values
    assert preset("sac", 1, 1000, env_id="Pendulum-v1") == PRESETS["sac"]
    assert preset("sac", 1, 1000) == PRESETS["sac"]
    grid = preset("ppo", 1, 1000, env_id="MiniGrid-Empty-5x5-v0")
    assert grid["learning_rate"] == FAMILY_PRESETS["grid"]["ppo"]["learning_rate"]
    dmc = preset("td3", 1, 1000, env_id="dm_control/walker-walk-v0")
    assert dmc["action_noise_std"] == 0.1
    user = preset("sac", 1, 1000, env_id="HalfCheetah-v5", overrides={"gamma": 0.9})
    assert user["gamma"] == 0.9 and user["tau"] == 0.005
    assert preset("dqn", 1, 1000, env_id="ALE/Pong-v5")["target_update_interval"] == 1000


@pytest.mark.parametrize("n_envs", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("steps_per_round", [200, 500, 997, 1000, 1024, 3000, 4096])
@pytest.mark.parametrize("env_id", ["Pendulum-v1", "HalfCheetah-v5", "MiniGrid-Empty-5x5-v0"])
def test_ppo_preset_batch_divides_the_rollout(n_envs: int, steps_per_round: int, env_id: str):
    p = preset("ppo", n_envs, steps_per_round, env_id=env_id)
    rollout = p["n_steps"] * n_envs
    assert rollout <= max(steps_per_round, 8 * n_envs)
    assert rollout % p["batch_size"] == 0
    if rollout % 64 == 0:  # the preset's own batch is kept whenever it divides
        assert p["batch_size"] == 64


def test_default_ppo_agent_gives_no_truncated_minibatch_warning() -> None:
    venv = make_vec_env("Pendulum-v1", 1, seed=0)
    hyper = preset("ppo", 1, TrainConfig().steps_per_round, env_id="Pendulum-v1")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        agent = make_agent("ppo", venv, seed=0, net_arch=[8], **hyper)
    assert not [w for w in caught if "mini-batch" in str(w.message)]
    assert agent.n_steps * agent.n_envs % agent.batch_size == 0
    venv.close()


def test_users_batch_that_does_not_divide_the_rollout_is_refused(tmp_path: Path) -> None:
    config = TrainConfig.smoke(agent_kwargs='{"batch_size": 64}')  # rollout 200 = 200 × 1
    run = tmp_path / "run"
    with pytest.raises(ConfigError) as err:
        train(config, run_dir=run)
    msg = str(err.value)
    assert "batch_size=64 does not divide PPO's rollout of 200 env steps" in msg
    assert "e.g. 50 or 100" in msg and "--steps-per-round" in msg
    assert not run.exists()  # nothing left behind


def test_planned_env_steps_matches_the_issue_cases() -> None:
    # PPO, 4 envs × 512 steps per update, one round for the whole budget (issue #26)
    kw = dict(initial_steps=1000, n_envs=4, unit=2048)
    assert planned_env_steps(total_steps=5000, steps_per_round=5000, **kw) == 5096
    assert planned_env_steps(total_steps=6000, steps_per_round=6000, **kw) == 7144
    assert planned_env_steps(total_steps=5000, steps_per_round=1000, **kw | {"unit": 1000}) == 5000


def test_a_run_longer_than_its_budget_says_so_and_reports_the_truth(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # 200 random steps, then rounds of 400 (= one rollout of 2 × 200); the last round has only
    # 100 steps of budget left but collects a whole rollout: 200 + 400 + 400 = 1000 env steps
    config = TrainConfig.smoke(n_envs=2, total_steps=700, steps_per_round=400)
    with caplog.at_level(logging.WARNING, logger="preflab"):
        result = train(config, run_dir=tmp_path / "run")
    expected = planned_env_steps(
        total_steps=700, initial_steps=200, steps_per_round=400, n_envs=2, unit=400
    )
    assert expected == 1000
    assert result.env_steps == expected
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["env_steps"] == expected
    assert (
        "PPO collects 2 × 200 = 400 steps per update: the run will take 1,000 env steps, "
        "not --total-steps 700" in caplog.text
    )


def test_hyperparams_json_is_strict_and_holds_the_effective_values(tmp_path: Path) -> None:
    config = TrainConfig.smoke(agent_kwargs='{"batch_size": 50, "gamma": 0.95}')
    train(config, run_dir=tmp_path / "run")

    def refuse(name: str) -> None:
        raise AssertionError(f"non-strict JSON constant {name}")

    record = json.loads((tmp_path / "run" / "hyperparams.json").read_text(), parse_constant=refuse)
    h = record["hyperparams"]
    assert record["algo"] == "ppo" and record["env_family"] == "classic"
    assert record["agent_kwargs"] == {"batch_size": 50, "gamma": 0.95}
    assert (h["gamma"], h["batch_size"], h["n_steps"]) == (0.95, 50, 200)
    assert h["clip_range"] == 0.2  # SB3's default, not its schedule function
    assert h["policy_kwargs"] == {"net_arch": [16, 16]}
