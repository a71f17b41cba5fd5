"""On a CUDA GPU (``pytest -m gpu``; skipped without one, and outside the default run's marker
set only by the skip): the reward ensemble, its fit, the convolutional model and the SB3 agent
run there and agree with the CPU; what a GPU run saves holds CPU tensors and loads on the CPU.
scripts/device_check.sh runs these on a GPU machine."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch

from preflab.config import TrainConfig
from preflab.device import cpu_tensors, resolve_device
from preflab.envs import make_vec_env
from preflab.policy.agents import make_agent
from preflab.reward.batch import LabelBatch, SegmentBatch
from preflab.reward.cnn import ConvRewardEnsemble
from preflab.reward.ensemble import RewardConfig, RewardEnsemble
from preflab.reward.trainer import FitConfig, RewardTrainer

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU torch can use"),
]
CUDA = torch.device("cuda", 0)


def _data(rng: np.random.Generator) -> tuple[SegmentBatch, LabelBatch]:
    segs = SegmentBatch.from_arrays(rng.normal(size=(40, 10, 3)), rng.normal(size=(40, 10, 2)))
    a = rng.integers(0, 40, 60)
    labels = LabelBatch.from_arrays(a, (a + 1 + rng.integers(0, 39, 60)) % 40, rng.random(60))
    return segs, labels


def test_auto_and_cuda_resolve_to_the_gpu() -> None:
    assert resolve_device("auto") == CUDA and resolve_device("cuda") == CUDA


def test_the_ensemble_on_the_gpu_predicts_as_on_the_cpu() -> None:
    segs, _ = _data(np.random.default_rng(0))
    cpu = RewardEnsemble(3, 2, RewardConfig(hidden=(32, 32)), seed=1)
    cpu.fit_input_stats(segs)
    gpu = copy.deepcopy(cpu).to(CUDA)
    obs, acts = segs.obs.reshape(-1, 3).numpy(), segs.acts.reshape(-1, 2).numpy()
    np.testing.assert_allclose(gpu.predict(obs, acts), cpu.predict(obs, acts), atol=1e-5)
    np.testing.assert_array_equal(gpu.reward(obs[:1], acts[:1]), cpu.reward(obs[:1], acts[:1]))
    np.testing.assert_allclose(gpu.segment_returns(segs), cpu.segment_returns(segs), atol=1e-4)


def test_a_fit_on_the_gpu_stays_there_and_saves_cpu_tensors(tmp_path: Path) -> None:
    segs, labels = _data(np.random.default_rng(1))
    cfg = FitConfig(epochs=3, semi_ratio=1, crop=2)  # SURF's draws move to the GPU too
    model = RewardEnsemble(3, 2, RewardConfig(hidden=(32,)), seed=2).to(CUDA)
    report = RewardTrainer(model, cfg).fit(segs, labels, np.random.default_rng(3), unlabelled=segs)
    assert np.isfinite(report.train_loss).all() and report.steps > 0
    assert all(p.device == CUDA for p in model.parameters())
    assert all(t.device.type == "cpu" for t in cpu_tensors(model.state_dict()).values())
    model.save(tmp_path / "rm")
    from preflab.reward.models import load_reward_model

    assert load_reward_model(tmp_path / "rm").device.type == "cpu"


def test_the_convolutional_model_on_the_gpu_agrees_and_fits() -> None:
    rng = np.random.default_rng(4)
    frames = rng.integers(0, 256, size=(6, 5, 4, 84, 84), dtype=np.uint8)
    segs = SegmentBatch.from_arrays(frames)
    cpu = ConvRewardEnsemble((4, 84, 84), 0, RewardConfig(kind="cnn", members=2), seed=0)
    gpu = copy.deepcopy(cpu).to(CUDA)
    np.testing.assert_allclose(gpu.segment_returns(segs), cpu.segment_returns(segs), atol=1e-3)
    labels = LabelBatch.from_arrays(np.array([0, 2, 4]), np.array([1, 3, 5]), np.ones(3))
    report = RewardTrainer(gpu, FitConfig(epochs=1, min_steps=0)).fit(
        segs, labels, np.random.default_rng(5)
    )
    assert report.steps == 1 and np.isfinite(report.train_loss).all()


def test_the_sb3_agent_is_built_on_the_gpu() -> None:
    venv = make_vec_env("Pendulum-v1", 1, seed=0)
    try:
        agent = make_agent("sac", venv, seed=0, device="cuda")
    finally:
        venv.close()
    assert all(p.device == CUDA for p in agent.policy.parameters())


def test_a_gpu_run_loads_on_the_cpu(tmp_path: Path) -> None:
    from preflab.runs import load_run, train

    config = TrainConfig.smoke(algo="sac", device="cuda", total_steps=500, steps_per_round=150)
    train(config, run_dir=tmp_path / "run")
    run = load_run(tmp_path / "run", device="cpu")
    assert run.reward_model.device.type == "cpu"
    assert all(p.device.type == "cpu" for p in run.agent.policy.parameters())


def test_pebbles_pretraining_reward_is_computed_on_the_agents_device() -> None:
    from preflab.policy.exploration import state_entropy_rewards

    venv = make_vec_env("Pendulum-v1", 1, seed=0)
    try:
        agent = make_agent("sac", venv, seed=0, device="cuda", learning_starts=50)
        agent.learn(80)  # fills the replay buffer (and takes a few gradient steps)
        with state_entropy_rewards(agent):
            batch = agent.replay_buffer.sample(16)
    finally:
        venv.close()
    assert batch.rewards.device == CUDA and batch.rewards.shape == (16, 1)
