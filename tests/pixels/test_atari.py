"""Atari end to end: ALE frames through SB3's wrappers, A2C with CnnPolicy on the learned reward
of the convolutional ensemble, the synthetic teacher, the CLI defaults for ALE ids."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("ale_py")
pytest.importorskip("cv2")

from preflab.config import TrainConfig
from preflab.envs import make_vec_env
from preflab.reward.cnn import ConvRewardEnsemble
from preflab.reward.ensemble import RewardConfig
from preflab.reward.trainer import FitConfig
from preflab.runs import start_loop


def test_pong_vec_env_gives_stacked_84x84_frames() -> None:
    venv = make_vec_env("ALE/Pong-v5", 2, seed=0)
    obs = venv.reset()
    assert obs.shape == (2, 84, 84, 4) and obs.dtype == np.uint8
    venv.close()


def test_atari_smoke_run(tmp_path) -> None:
    config = TrainConfig.atari(
        "ALE/Pong-v5",
        n_envs=2,
        total_steps=300,
        initial_steps=100,
        steps_per_round=100,
        total_labels=8,
        pool_size=20,
        eval_episodes=1,
        first_fit_epochs=1,
        reward=RewardConfig(kind="auto", members=2, use_actions=False),
        fit=FitConfig(epochs=1, batch_size=4, min_steps=2, max_steps=3),
    )
    loop = start_loop(config, tmp_path / "run")
    assert isinstance(loop.ensemble, ConvRewardEnsemble)
    assert loop.agent.policy.__class__.__name__ == "ActorCriticCnnPolicy"
    calls: list[tuple[tuple[int, ...], np.dtype]] = []
    predict = loop.ensemble.predict

    def spy(obs, acts=None, **kw):  # type: ignore[no-untyped-def]
        calls.append((tuple(np.shape(obs)), np.asarray(obs).dtype))
        return predict(obs, acts, **kw)

    loop.ensemble.predict = spy  # type: ignore[method-assign]
    result = loop.run()
    assert result.env_steps >= 300 and result.n_labels > 0
    assert all(s.length == 25 and s.obs.shape[1:] == (4, 84, 84) for s in loop.pool)
    # one batched reward call per A2C rollout (5 steps × 2 envs), on uint8 frame stacks
    rollout_calls = [c for c in calls if c[0] == (10, 4, 84, 84)]
    assert rollout_calls and all(dt == np.uint8 for _, dt in rollout_calls)
    assert np.isfinite(result.true_return)
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["reward"]["kind"] == "auto" and saved["segment_length"] == 25


def test_cli_defaults_for_ale_ids() -> None:
    from preflab.cli.train import _env_defaults

    cfg = _env_defaults(["--env-id", "ALE/Pong-v5", "--algo", "a2c"], studio=False)
    assert cfg is not None and cfg.segment_length == 25 and cfg.reward.kind == "cnn"
    assert cfg.teacher.equal_if_no_reward and cfg.algo == "a2c"
    assert _env_defaults(["--env-id", "Pendulum-v1"], studio=False) is None


def test_a_new_run_accepts_atari_frames() -> None:
    """The start-up check lets uint8 image spaces through (it once demanded a flat space, which
    refused every ``preflab train --env-id ALE/...``)."""
    from preflab.config.checks import check_run

    check_run(TrainConfig.atari("ALE/Pong-v5"))  # raises a ConfigError if refused
