"""An agent trained on its env's own reward, in chunks with a checkpoint after each, so that a
run stopped between them (Ctrl-C, ``timeout -s INT``, a lost machine) continues exactly from
the last one: the B-Pref-style benches' SAC-on-the-true-reward arm, which must fit invocations of
at most an hour like their PrefLab arm.

The checkpoint is the loop's own (:mod:`preflab.runstate`): the agent with its replay buffer,
optimiser states and RNG keys, the envs' simulator and RNG states, and the process-wide RNGs.
Chunked training is the same computation as one ``learn`` call (SB3's ``learn`` continues
without a reset when ``reset_num_timesteps=False``; tests/bench/test_resumable_learn.py checks
both, bit for bit).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from stable_baselines3.common.vec_env import VecEnv

from preflab.errors import ConfigError
from preflab.runstate.agentstate import capture_agent, restore_agent
from preflab.runstate.checkpointer import (
    Checkpoint,
    Checkpointer,
    global_rng_state,
    set_global_rng_state,
)
from preflab.runstate.envstate import capture_vec_env, restore_vec_env

CHUNK_STEPS = 5_000
"""Env steps between checkpoints (a checkpoint with a 100k-step replay buffer takes a few
seconds)."""


def learn_resumably(
    agent: Any, venv: VecEnv, run_dir: Path, total_steps: int, *, chunk_steps: int = CHUNK_STEPS
) -> float:
    """Train ``agent`` (built on ``venv`` exactly as the first time) to ``total_steps`` env
    steps, continuing from ``run_dir``'s checkpoint when there is one; returns the training
    wall seconds over every invocation."""
    if chunk_steps < 1:
        raise ConfigError(f"chunk_steps must be ≥ 1, got {chunk_steps}")
    checkpointer = Checkpointer(run_dir)
    wall = 0.0
    index = 0
    if (checkpointer.root / "LATEST").is_file():
        ckpt = checkpointer.load()
        st = ckpt.state
        if st.get("total_steps") != total_steps:
            raise ConfigError(
                f"{run_dir} holds a run of {st.get('total_steps')} env steps, not "
                f"{total_steps}; continue it with its own budget, or remove the directory"
            )
        restore_agent(agent, st["agent"], ckpt.tensors["agent"], ckpt.arrays)
        restore_vec_env(venv, st["env"], ckpt.arrays)
        set_global_rng_state(st["globals"], ckpt.tensors["torch_rng"])
        wall, index = float(st["wall_s"]), int(st["index"])
    while agent.num_timesteps < total_steps:
        t0 = time.perf_counter()
        steps = min(chunk_steps, total_steps - agent.num_timesteps)
        agent.learn(total_timesteps=steps, reset_num_timesteps=False)
        wall += time.perf_counter() - t0
        index += 1
        arrays: dict[str, Any] = {}
        agent_meta, agent_tensors = capture_agent(agent, arrays, replay_buffer=True)
        rng_state, torch_rng = global_rng_state()
        state = {
            "total_steps": total_steps,
            "index": index,
            "wall_s": wall,
            "agent": agent_meta,
            "env": capture_vec_env(venv, arrays),
            "globals": rng_state,
        }
        tensors = {"agent": agent_tensors, "torch_rng": torch_rng}
        checkpointer.save(index, Checkpoint(state, tensors, arrays))
    return wall
