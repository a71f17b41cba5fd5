"""B-Pref's own network sizes (github.com/rll-research/BPref: config/agent/sac.yaml gives the SAC
actor and critic ``hidden_dim: 1024``, ``hidden_depth: 2`` and ``batch_size: 1024``;
reward_model.py builds each of ``ensemble_size: 3`` reward nets with ``gen_net(..., H=256,
n_layers=3)``) in ``bpref/*-pebble``, and the CPU-sized ``bpref/*-pebble-256`` that differs in
the agent's networks and batch only."""

from __future__ import annotations

import dataclasses
import json

import pytest
from torch import nn

from preflab.assemble import agent_hyper
from preflab.config.file import load_config
from preflab.env_families import register_family
from preflab.envs import make_vec_env
from preflab.policy.agents import make_agent
from preflab.presets import preset_path
from preflab.reward.models import make_reward_model

DMC = ("walker_walk", "cheetah_run", "quadruped_walk")


def _widths(module: nn.Module) -> list[int]:
    return [m.out_features for m in module.modules() if isinstance(m, nn.Linear)]


@pytest.mark.parametrize("env", DMC)
def test_the_pebble_presets_carry_the_papers_sizes(env: str) -> None:
    config = load_config(preset_path(f"bpref/{env}-pebble"))
    assert config.net_arch == (1024, 1024)
    assert json.loads(config.agent_kwargs)["batch_size"] == 1024
    assert config.reward.members == 3 and config.reward.hidden == (256, 256, 256)


@pytest.mark.parametrize("env", DMC)
def test_the_256_variant_differs_in_the_agents_networks_and_batch_only(env: str) -> None:
    paper = load_config(preset_path(f"bpref/{env}-pebble"))
    small = load_config(preset_path(f"bpref/{env}-pebble-256"))
    assert small.net_arch == (256, 256)
    kwargs = json.loads(small.agent_kwargs)
    assert kwargs == json.loads(paper.agent_kwargs) | {"batch_size": 256}
    same = dataclasses.replace(small, net_arch=paper.net_arch, agent_kwargs=paper.agent_kwargs)
    assert same == paper


def test_the_walker_preset_builds_b_prefs_networks() -> None:
    config = load_config(preset_path("bpref/walker_walk-pebble"))
    register_family(config.env_id)
    venv = make_vec_env(config.env_id, 1, seed=0)
    try:
        hyper = agent_hyper(config) | {"buffer_size": 100}  # no 1M-step buffer for a size check
        agent = make_agent(
            config.algo, venv, seed=0, net_arch=list(config.net_arch), device="cpu", **hyper
        )
        model = make_reward_model(venv.observation_space, venv.action_space, config.reward)
    finally:
        venv.close()
    act_dim = venv.action_space.shape[0]
    assert _widths(agent.policy.actor.latent_pi) == [1024, 1024]
    for q in agent.policy.critic.q_networks:  # SAC's two Q-networks
        assert _widths(q) == [1024, 1024, 1]
    assert agent.batch_size == 1024
    assert [w.shape[-1] for w in model.weights] == [256, 256, 256, 1]  # 3 × 256, then a scalar
    assert model.n_members == 3
    assert _widths(agent.policy.actor.mu) == [act_dim]
