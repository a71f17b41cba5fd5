"""The SBX backend: every SBX learner's JAX state survives capture and restore bit for bit, a
restored agent acts like the original, PEBBLE's critic reset leaves the actor alone, the replay
buffer is relabelled, and what the backend cannot run is refused with a way out."""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np
import pytest
import torch

from preflab.config import TrainConfig
from preflab.envs import make_vec_env
from preflab.errors import ConfigError
from preflab.policy.agents import make_agent, relabel_replay_buffer
from preflab.policy.exploration import reset_critic
from preflab.runstate.agentstate import capture_agent, restore_agent, restore_policy
from preflab.runstate.jaxstate import capture_jax, is_jax_agent

# a mark, not importorskip: importing sbx (JAX, Flax, Optax) at collection costs every test worker
# seconds of CPU, and only the worker that runs this module needs it
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("sbx") is None, reason="the sbx extra (SBX, JAX) is not installed"
)


def _agent(algo: str, steps: int = 0, seed: int = 0) -> Any:
    venv = make_vec_env("Pendulum-v1", 1, seed=seed)
    kw: dict[str, Any] = {"n_steps": 64, "batch_size": 32} if algo == "ppo" else {}
    if algo != "ppo":
        kw |= {"learning_starts": 50, "batch_size": 32}
    agent = make_agent(algo, venv, seed=seed, net_arch=[8, 8], backend="sbx", **kw)
    if steps:
        agent.learn(steps)
    return agent


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("algo", ["sac", "td3", "ppo", "tqc", "crossq"])
def test_capture_and_restore_gives_back_the_whole_jax_state(algo: str) -> None:
    """One learner per kind of JAX state: SAC's entropy coefficient, TD3's actor target (DDPG
    keeps the same), PPO's on-policy states, TQC's two critic states, CrossQ's batch norms."""
    trained = _agent(algo, steps=130)
    assert is_jax_agent(trained)
    arrays: dict[str, np.ndarray] = {}
    meta, tensors = capture_agent(trained, arrays)
    assert any(k.startswith("policy.") and "opt_state" in k for k in tensors["jax"])
    fresh = _agent(algo, seed=1)  # other weights and keys until restored
    assert not _same(capture_jax(fresh), tensors["jax"])
    restore_agent(fresh, meta, tensors, arrays)
    assert _same(capture_jax(fresh), tensors["jax"])
    obs = np.linspace(-1, 1, 3 * 5, dtype=np.float32).reshape(5, 3)
    want, _ = trained.predict(obs, deterministic=True)
    got, _ = fresh.predict(obs, deterministic=True)
    np.testing.assert_array_equal(got, want)


def test_an_sb3_checkpoint_is_refused_by_an_sbx_agent() -> None:
    venv = make_vec_env("Pendulum-v1", 1, seed=0)
    sb3 = make_agent("sac", venv, seed=0, net_arch=[8, 8])
    _meta, tensors = capture_agent(sb3, {})
    with pytest.raises(ValueError, match="different backends"):
        restore_policy(_agent("sac"), tensors)


def test_critic_reset_renews_the_critics_and_keeps_the_actor() -> None:
    agent = _agent("sac", steps=120)
    before = capture_jax(agent)
    reset_critic(agent, seed=3)
    after = capture_jax(agent)
    actor = [k for k in before if k.startswith(("policy.actor_state", "policy.key"))]
    critic = [k for k in before if k.startswith("policy.qf_state.params")]
    assert actor and critic
    assert all(torch.equal(before[k], after[k]) for k in actor)
    assert not any(torch.equal(before[k], after[k]) for k in critic)
    again = _agent("sac", steps=120)
    reset_critic(again, seed=3)
    assert _same(capture_jax(again), after)  # the new critic depends on the seed alone
    agent.learn(40, reset_num_timesteps=False)  # and it trains


def test_relabelling_an_sbx_replay_buffer() -> None:
    agent = _agent("sac", steps=100)
    n = relabel_replay_buffer(agent, lambda o, a, nx: a[:, 0] * 0 + 2.5)
    assert n == 100 and np.all(agent.replay_buffer.rewards[:100] == 2.5)


def test_what_sbx_cannot_run_is_refused_with_a_way_out() -> None:
    with pytest.raises(ConfigError, match="--backend sb3"):
        TrainConfig(algo="dqn", backend="sbx", env_id="CartPole-v1")
    with pytest.raises(ConfigError, match="backend must be one of"):
        TrainConfig(backend="jax")  # type: ignore[arg-type]


def test_agent_kwargs_are_checked_against_the_backends_own_class() -> None:
    from preflab.config.checks import check_agent_kwargs

    sbx_only = '{"qf_learning_rate": 0.001}'  # SBX's SAC has it, SB3's has not
    check_agent_kwargs(TrainConfig(backend="sbx", agent_kwargs=sbx_only))
    with pytest.raises(ConfigError, match="no argument 'qf_learning_rate'"):
        check_agent_kwargs(TrainConfig(agent_kwargs=sbx_only))


def test_image_observations_are_refused_before_the_run_with_a_way_out() -> None:
    from preflab.config.checks import check_run

    pytest.importorskip("ale_py")
    with pytest.raises(ConfigError, match=r"image observations.*--backend sb3"):
        check_run(TrainConfig(env_id="ALE/Pong-v5", algo="ppo", backend="sbx"))
