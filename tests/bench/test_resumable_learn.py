"""The B-Pref benches' SAC on the true reward, trained in checkpointed chunks: the same run as one
``learn`` call, and a run stopped mid-way continues to the very same agent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from preflab.envs import make_vec_env
from preflab.errors import ConfigError
from preflab.policy.agents import make_agent
from preflab.runstate.agentstate import capture_agent
from preflab_bench._resumable_learn import learn_resumably

STEPS = 150
CHUNK = 50


def _agent(backend: str) -> tuple[Any, Any]:
    venv = make_vec_env("Pendulum-v1", 1, seed=3)
    agent = make_agent(
        "sac",
        venv,
        seed=3,
        net_arch=[16, 16],
        backend=backend,
        learning_starts=25,
        batch_size=32,
        buffer_size=STEPS,
    )
    return agent, venv


def _state(agent: Any) -> dict[str, Any]:
    """The agent's weights and optimiser states (JAX trees for SBX) and its replay buffer."""
    arrays: dict[str, np.ndarray] = {}
    _meta, tensors = capture_agent(agent, arrays, replay_buffer=True)
    flat: dict[str, Any] = {}

    def walk(prefix: str, obj: Any) -> None:
        if isinstance(obj, dict):
            for k, v in obj.items():
                walk(f"{prefix}/{k}", v)
        elif isinstance(obj, torch.Tensor):
            flat[prefix] = obj.detach().clone()

    walk("", tensors)
    return flat | {f"array/{k}": v for k, v in arrays.items() if "replay" in k or "buffer" in k}


def _equal(a: dict[str, Any], b: dict[str, Any]) -> bool:
    assert a.keys() == b.keys()
    for k in a:
        x, y = a[k], b[k]
        same = torch.equal(x, y) if isinstance(x, torch.Tensor) else np.array_equal(x, y)
        if not same:
            return False
    return True


@pytest.mark.parametrize("backend", ["sbx", "sb3"])
def test_chunks_and_a_stop_give_the_agent_of_one_learn_call(backend: str, tmp_path: Path) -> None:
    torch.manual_seed(0)
    once, _ = _agent(backend)
    once.learn(total_timesteps=STEPS)
    want = _state(once)

    torch.manual_seed(0)
    chunked, venv = _agent(backend)
    learn_resumably(chunked, venv, tmp_path / "chunked", STEPS, chunk_steps=CHUNK)
    assert chunked.num_timesteps == STEPS
    assert _equal(_state(chunked), want)

    # stopped (Ctrl-C) in the third chunk: a new process builds the agent again and continues
    torch.manual_seed(0)
    stopped, venv = _agent(backend)
    learn = stopped.learn
    calls = []

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return learn(*args, **kwargs)

    stopped.learn = interrupted
    with pytest.raises(KeyboardInterrupt):
        learn_resumably(stopped, venv, tmp_path / "stopped", STEPS, chunk_steps=CHUNK)
    assert stopped.num_timesteps == 2 * CHUNK
    assert not _equal(_state(stopped), want)  # the comparison sees a shorter run

    torch.manual_seed(123)  # whatever the new process's global RNGs are: the checkpoint's count
    np.random.seed(123)
    again, venv = _agent(backend)
    wall = learn_resumably(again, venv, tmp_path / "stopped", STEPS, chunk_steps=CHUNK)
    assert again.num_timesteps == STEPS and wall > 0
    assert _equal(_state(again), want)


def test_a_run_continues_only_with_its_own_budget(tmp_path: Path) -> None:
    agent, venv = _agent("sb3")
    learn_resumably(agent, venv, tmp_path, 60, chunk_steps=60)
    agent, venv = _agent("sb3")
    with pytest.raises(ConfigError, match="60 env steps, not 120"):
        learn_resumably(agent, venv, tmp_path, 120, chunk_steps=60)
    with pytest.raises(ConfigError, match="chunk_steps"):
        learn_resumably(agent, venv, tmp_path / "other", 120, chunk_steps=0)
