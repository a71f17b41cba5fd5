import numpy as np
import pytest
import torch

from preflab.envs import make_vec_env
from preflab.reward import RewardConfig
from preflab.scalar import EvaluatorConfig, Rater, ScalarModelConfig
from preflab.scalar.guide import (
    GuideConfig,
    RatingVecEnv,
    human_phase,
    post_phase,
    reward_models,
    stream_window_labels,
)

torch.set_num_threads(1)


def test_rating_env_rewards_are_the_mean_rating_and_everything_is_recorded():
    rng = np.random.default_rng(0)
    venv = make_vec_env("Pendulum-v1", 2, seed=0)
    rater = Rater([EvaluatorConfig(), EvaluatorConfig(noise=0.3)], 2, rng, scale=2.0)
    env = RatingVecEnv(venv, rater)
    env.reset()
    for _ in range(30):
        _obs, rew, _dones, infos = env.step(rng.uniform(-2, 2, size=(2, 1)).astype(np.float32))
        np.testing.assert_allclose(rew, env.rating_log[-1].mean(0), rtol=1e-6)
        assert "true_reward" in infos[0]
    assert len(env.obs_log) == 30 and env.rating_log[-1].shape == (2, 2)
    assert all(np.all(np.abs(r) <= 1) for r in env.rating_log)


@pytest.mark.slow
def test_two_phase_run_end_to_end():
    rng = np.random.default_rng(1)
    cfg = GuideConfig(n_envs=2, human_steps=1024, post_steps=512, eval_episodes=1)
    phase = human_phase(cfg, [EvaluatorConfig(), EvaluatorConfig(noise=0.2)], rng)
    assert phase.ratings.shape == (2, len(phase.items))
    lab = stream_window_labels(phase, 0, cfg)
    per_stream = len(phase.items) // 2
    assert len(lab) == 2 * (per_stream - 9) * 45
    mcfg = ScalarModelConfig(reward=RewardConfig(members=1, hidden=(16,)), max_pairs=2000)
    models = reward_models(phase, cfg, rng, mcfg)
    assert len(models["individual"]) == 2 and len(models["voting"]) == 1
    assert np.isfinite(post_phase(phase, models["voting"][0], cfg, rng))
