"""PEBBLE's unsupervised pre-training: the k-NN state-entropy reward against a brute-force
derivation, its running normalisation, the replay buffer's sampler swapped and restored, the
critic reset, and a run that pre-trains before its first query."""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.spatial.distance import cdist

from preflab.config import TrainConfig
from preflab.envs import make_vec_env
from preflab.errors import ConfigError
from preflab.policy.agents import make_agent
from preflab.policy.exploration import (
    RunningStd,
    buffer_state_entropy,
    buffer_transitions,
    knn_distances,
    reset_critic,
    state_entropy_rewards,
)
from preflab.runs import train


def test_knn_distance_is_the_kth_nearest_other_point() -> None:
    rng = np.random.default_rng(0)
    pool = rng.normal(size=(300, 4)).astype(np.float32)
    obs = pool[:17]  # points of the pool: each is its own nearest neighbour (distance 0)
    got = knn_distances(torch.as_tensor(obs), torch.as_tensor(pool), k=5).numpy()
    want = np.sort(cdist(obs, pool), axis=1)[:, 5]  # column 0 is the point itself
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("chunk", [4, 7, 4096])
def test_knn_distance_over_chunks_equals_the_sort_of_all_distances(
    chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pool is compared a chunk at a time (chunks smaller than k + 1 too): the result is the
    k-th nearest of the whole pool, checked against scipy's distances sorted in full."""
    import preflab.policy.exploration as exploration

    monkeypatch.setattr(exploration, "CHUNK", chunk)
    rng = np.random.default_rng(3)
    pool = rng.normal(scale=3.0, size=(4099, 6)).astype(np.float32)
    obs = np.vstack([pool[::500], rng.normal(size=(4, 6))]).astype(np.float32)
    got = knn_distances(torch.as_tensor(obs), torch.as_tensor(pool), k=5).numpy()
    want = np.sort(cdist(obs, pool), axis=1)[:, 5]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_an_isolated_state_earns_the_most_novelty() -> None:
    rng = np.random.default_rng(1)
    crowd = rng.normal(scale=0.01, size=(50, 2))
    pool = np.vstack([crowd, [[5.0, 5.0]], rng.normal(loc=5.0, scale=2.0, size=(5, 2))])
    d = knn_distances(torch.as_tensor(pool), torch.as_tensor(pool), k=5).numpy()
    assert d[:50].max() < d[50]


def _bpref_std(parts: list[np.ndarray]) -> float:
    """B-Pref's running std in closed form: its parallel-variance update with each batch's
    unbiased variance sums to (SS of all values + Σ SS_i / (b_i − 1)) / N, SS a sum of squared
    deviations from the mean (a batch of one value adds nothing of its own)."""
    every = np.concatenate(parts)
    ss = np.sum((every - every.mean()) ** 2)
    extra = sum(np.sum((p - p.mean()) ** 2) / (p.size - 1) for p in parts if p.size > 1)
    return float(np.sqrt((ss + extra) / every.size))


def test_running_std_of_two_batches_is_bprefs_combination_by_hand() -> None:
    """B-Pref's TorchRunningMeanStd: var ← (var·n + var_b·b + δ²·n·b / (n + b)) / (n + b) with
    var_b = torch.var of the batch (ddof 1). Batches (1, 2, 3, 4) and (10, 12): means 2.5 and
    11, unbiased variances 5/3 and 2, δ = 8.5; after the first the std is √(5/3); after both
    M2 = (5/3)·4 + 2·2 + 8.5²·4·2/6 = 20/3 + 4 + 289/3 = 107, var = 107/6 (the population
    variance of all six values, ddof 0, is 155/9 = 17.22…, not 17.83…)."""
    first, second = np.array([1.0, 2.0, 3.0, 4.0]), np.array([10.0, 12.0])
    stats = RunningStd()
    stats.update(torch.as_tensor(first))
    assert stats.std == pytest.approx(np.sqrt(5 / 3), rel=1e-12)
    assert stats.std == pytest.approx(np.std(first, ddof=1), rel=1e-12)
    stats.update(torch.as_tensor(second))
    assert stats.std == pytest.approx(np.sqrt(107 / 6), rel=1e-12)
    by_numpy = (
        np.var(first, ddof=1) * 4 + np.var(second, ddof=1) * 2 + (11 - 2.5) ** 2 * 4 * 2 / 6
    ) / 6
    assert stats.std == pytest.approx(np.sqrt(by_numpy), rel=1e-12)


def test_running_std_is_bprefs_over_batches_of_any_size() -> None:
    rng = np.random.default_rng(2)
    parts = [rng.normal(loc=i, scale=1 + i, size=n) for i, n in enumerate((7, 64, 1, 300))]
    stats = RunningStd()
    for p in parts:
        stats.update(torch.as_tensor(p))
    assert stats.std == pytest.approx(_bpref_std(parts), rel=1e-9)
    assert stats.std > np.std(np.concatenate(parts))  # above the population std


def _sac() -> object:
    venv = make_vec_env("Pendulum-v1", 1, seed=0)
    agent = make_agent("sac", venv, seed=0, net_arch=[16, 16])
    agent.learn(300)  # fills the buffer (SB3's own learning_starts: random actions)
    return agent


@pytest.fixture(scope="module")
def filled_sac() -> object:
    """One :func:`_sac` for the tests that only read its replay buffer (~1 s of CPU each to
    train again); the critic-reset test, which changes its agents, trains its own."""
    return _sac()


def test_batches_carry_the_entropy_reward_only_while_pretraining(filled_sac: object) -> None:
    """The reward is the k-NN distance (k = 5, the point itself the nearest) divided by B-Pref's
    running std of every distance handed out so far: after one batch raw₁ / std(raw₁, ddof 1);
    after a second, raw₂ / the two batches' combination (:func:`_bpref_std`). Distances from
    scipy, the std from NumPy, none read from the object under test."""
    agent = filled_sac
    buf = agent.replay_buffer  # type: ignore[attr-defined]
    pool = buf.observations[: buf.pos].reshape(buf.pos, -1)
    with state_entropy_rewards(agent):
        first = buf.sample(64)
        raw1 = np.sort(cdist(first.observations.numpy(), pool), axis=1)[:, 5]
        np.testing.assert_allclose(
            first.rewards.numpy().ravel(), raw1 / np.std(raw1, ddof=1), rtol=1e-4
        )
        second = buf.sample(32)
        raw2 = np.sort(cdist(second.observations.numpy(), pool), axis=1)[:, 5]
        both = _bpref_std([raw1, raw2])
        assert abs(both / np.std(raw2) - 1) > 1e-3  # the two normalisers differ
        np.testing.assert_allclose(second.rewards.numpy().ravel(), raw2 / both, rtol=1e-4)
    after = buf.sample(64)  # the class's own sampler again: the stored (env) rewards
    assert "sample" not in vars(buf)
    stored = {float(r) for r in buf.rewards[: buf.pos].ravel()}
    assert all(float(r) in stored for r in after.rewards.numpy().ravel())


def test_rimes_pretraining_reward_is_centred_scaled_and_clipped(filled_sac: object) -> None:
    """RIME's (agent/sac_RIME.py): (d − running mean) / (3 · running std), clipped to [−1, 1];
    after one batch the running mean and std are the batch's (std with ddof 1, as B-Pref's).
    Distances from scipy, statistics from NumPy."""
    agent = filled_sac
    buf = agent.replay_buffer  # type: ignore[attr-defined]
    pool = buf.observations[: buf.pos].reshape(buf.pos, -1)
    with state_entropy_rewards(agent, centred=True):
        got = buf.sample(64)
    raw = np.sort(cdist(got.observations.numpy(), pool), axis=1)[:, 5]
    want = np.clip((raw - raw.mean()) / (3 * np.std(raw, ddof=1)), -1.0, 1.0)
    np.testing.assert_allclose(got.rewards.numpy().ravel(), want, rtol=1e-4, atol=1e-6)
    assert want.min() < 0 < want.max()  # centred: novelty below the mean is a cost


def test_buffer_state_entropy_is_every_transition_with_its_brute_force_distance(
    filled_sac: object,
) -> None:
    """RIME's warm-start data: every stored observation, its action in the env's scale
    (Pendulum: the policy's [−1, 1] times 2) and the distance to its 5th nearest other stored
    observation (itself counted as the nearest), against scipy's distances of all pairs."""
    agent = filled_sac
    buf = agent.replay_buffer  # type: ignore[attr-defined]
    obs, acts, dist = buffer_state_entropy(agent)
    pool = buf.observations[: buf.pos].reshape(buf.pos, -1)
    np.testing.assert_array_equal(obs, pool)
    np.testing.assert_allclose(acts, 2.0 * buf.actions[: buf.pos].reshape(buf.pos, -1), rtol=1e-6)
    want = np.sort(cdist(pool, pool), axis=1)[:, 5]
    np.testing.assert_allclose(dist, want, rtol=1e-4, atol=1e-5)


def test_buffer_transitions_continue_each_episode(filled_sac: object) -> None:
    """REED's data: 300 Pendulum steps (episodes of 200) give 300 transitions whose next
    observation is the following step's observation, except at the episode's end (step 199,
    whose next observation is the last of its episode, not the reset's); actions in the env's
    scale (2 × the policy's [−1, 1])."""
    agent = filled_sac
    buf = agent.replay_buffer  # type: ignore[attr-defined]
    obs, acts, nxt = buffer_transitions(agent)
    assert obs.shape == nxt.shape == (300, 3) and acts.shape == (300, 1)
    same = np.all(np.isclose(nxt[:-1], obs[1:]), axis=1)
    assert not same[199] and same[:199].all() and same[200:].all()
    np.testing.assert_allclose(acts, 2.0 * buf.actions[:300].reshape(300, -1), rtol=1e-6)


def test_critic_reset_is_fresh_reproducible_and_leaves_the_actor() -> None:
    agent, twin = _sac(), _sac()
    before = [p.detach().clone() for p in agent.critic.parameters()]  # type: ignore[attr-defined]
    actor = [p.detach().clone() for p in agent.actor.parameters()]  # type: ignore[attr-defined]
    reset_critic(agent, seed=3)
    reset_critic(twin, seed=3)
    after = list(agent.critic.parameters())  # type: ignore[attr-defined]
    assert all(not torch.equal(a, b) for a, b in zip(after, before, strict=True) if a.dim() > 1)
    for a, b in zip(after, twin.critic.parameters(), strict=True):  # type: ignore[attr-defined]
        assert torch.equal(a, b)
    target = agent.critic_target.state_dict()  # type: ignore[attr-defined]
    for name, value in agent.critic.state_dict().items():  # type: ignore[attr-defined]
        assert torch.equal(target[name], value)
    assert agent.critic.optimizer.state == {}  # type: ignore[attr-defined]
    for a, b in zip(agent.actor.parameters(), actor, strict=True):  # type: ignore[attr-defined]
        assert torch.equal(a, b)


@pytest.mark.parametrize("warm_start_steps", [0, 20])
def test_the_first_fit_resets_the_critic_unless_rime_warm_started(
    tmp_path: Path, warm_start_steps: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PEBBLE resets the critic at the first fit; RIME's authors (train_RIME.py) do not, and
    their pre-training reward is the centred one."""
    import preflab.loop.fitting as fitting
    import preflab.loop.rollouts as rollouts

    resets: list[int] = []
    centred: list[bool] = []
    real_rewards = rollouts.state_entropy_rewards
    monkeypatch.setattr(fitting, "reset_critic", lambda agent, seed: resets.append(seed))
    monkeypatch.setattr(
        rollouts,
        "state_entropy_rewards",
        lambda agent, **kw: centred.append(kw.get("centred", False)) or real_rewards(agent, **kw),
    )
    fit = dataclasses.replace(
        TrainConfig.smoke().fit,
        rime=dataclasses.replace(TrainConfig.smoke().fit.rime, warm_start_steps=warm_start_steps),
    )
    c = dataclasses.replace(TrainConfig.smoke(), algo="sac", unsup_steps=300, fit=fit)
    train(c, run_dir=tmp_path / "run")
    assert centred == [bool(warm_start_steps)]
    assert resets == ([] if warm_start_steps else [c.seed])


def test_the_critic_reset_is_followed_by_reset_updates_gradient_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """B-Pref's ``update_after_reset`` (train_PEBBLE.py): right after the critic reset the agent
    takes ``reset_updates`` gradient steps of its own batch size, once, before it acts again."""
    from stable_baselines3 import SAC

    import preflab.loop.fitting as fitting

    events: list[tuple[str, int, int]] = []
    real_reset, real_train = fitting.reset_critic, SAC.train

    def reset(agent: object, seed: int) -> None:
        events.append(("reset", 0, 0))
        real_reset(agent, seed)

    def train_(self: SAC, gradient_steps: int, batch_size: int = 64) -> None:
        events.append(("train", gradient_steps, batch_size))
        real_train(self, gradient_steps, batch_size)

    monkeypatch.setattr(fitting, "reset_critic", reset)
    monkeypatch.setattr(SAC, "train", train_)
    c = dataclasses.replace(TrainConfig.smoke(), algo="sac", unsup_steps=300, reset_updates=7)
    train(c, run_dir=tmp_path / "run")
    k = events.index(("reset", 0, 0))
    assert events[k + 1] == ("train", 7, 50)  # the smoke config's batch_size
    assert [e for e in events if e[0] == "reset" or e[1] == 7] == events[k : k + 2]
    assert all(e[1] == 1 for e in events[:k] + events[k + 2 :])  # the agent's own steps


def test_reset_updates_need_a_critic_reset() -> None:
    with pytest.raises(ConfigError, match="reset_updates must be ≥ 0"):
        TrainConfig(algo="sac", unsup_steps=1000, reset_updates=-1)
    with pytest.raises(ConfigError, match="follows PEBBLE's critic reset"):
        TrainConfig(algo="sac", reset_updates=100)
    rime = dataclasses.replace(
        TrainConfig().fit, rime=dataclasses.replace(TrainConfig().fit.rime, warm_start_steps=10)
    )
    with pytest.raises(ConfigError, match="keeps the critic"):
        TrainConfig(algo="sac", unsup_steps=1000, fit=rime, reset_updates=100)
    assert TrainConfig(algo="sac", unsup_steps=1000, reset_updates=100).reset_updates == 100


def test_pretraining_needs_an_off_policy_actor_critic() -> None:
    with pytest.raises(ConfigError, match="off-policy actor-critic"):
        TrainConfig(algo="ppo", unsup_steps=1000)
    with pytest.raises(ConfigError, match="initial_steps \\+ unsup_steps"):
        TrainConfig(total_steps=2000, initial_steps=1000, unsup_steps=1000)


def test_a_run_pretrains_before_its_first_query(tmp_path: Path) -> None:
    c = dataclasses.replace(TrainConfig.smoke(), algo="sac", unsup_steps=300)
    result = train(c, run_dir=tmp_path / "run")
    assert result.env_steps == c.total_steps and result.n_labels == c.total_labels
    with (tmp_path / "run" / "metrics.csv").open() as f:
        first = next(csv.DictReader(f))
    # round 0 (the first queries and fit) comes after the random and the pre-training steps
    assert int(first["env_steps"]) == c.initial_steps + c.unsup_steps
