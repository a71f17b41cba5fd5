"""The complete state of a Stable-Baselines3 agent as state_dicts, arrays and JSON (no pickle).

``get_parameters`` alone misses SAC's entropy coefficient, the step counters, the last
observation and the replay buffer; all of them are captured here.
"""

from __future__ import annotations

import collections
from typing import Any

import numpy as np
import torch
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm

from preflab.runstate.codec import decode, encode
from preflab.runstate.jaxstate import capture_jax, is_jax_agent, restore_jax

_COUNTERS = ("num_timesteps", "_n_updates", "_episode_num", "_num_timesteps_at_start")
_SCHEDULE_STATE = ("_n_calls", "exploration_rate", "_current_progress_remaining")
"""DQN's target-update counter and ε (and every agent's schedule progress), when present."""
_BUFFER_ARRAYS = ("observations", "next_observations", "actions", "rewards", "dones", "timeouts")


def memory_order(a: Any) -> list[int] | None:
    """The axes of array ``a`` from the largest stride to the smallest (None for non-arrays).

    SB3 feeds image observations to the policy as a transposed view (``VecTransposeImage``); a
    convolution on a contiguous copy rounds differently (~1e-7), which is enough to make a
    resumed run drift from an uninterrupted one, so the last observation keeps its layout."""
    if not isinstance(a, np.ndarray) or a.ndim < 2:
        return None
    return [int(i) for i in np.argsort([-s for s in a.strides], kind="stable")]


def with_memory_order(a: Any, order: list[int] | None) -> Any:
    """A copy of ``a`` laid out in memory with its axes in ``order`` (see :func:`memory_order`)."""
    if order is None or not isinstance(a, np.ndarray) or len(order) != a.ndim:
        return a
    buf = np.empty([a.shape[i] for i in order], a.dtype)
    view = buf.transpose(np.argsort(order))
    view[...] = a
    return view


def capture_agent(
    agent: BaseAlgorithm, arrays: dict[str, np.ndarray], *, replay_buffer: bool = True
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(JSON part, tensors part) of ``agent``'s state; arrays go into ``arrays``."""
    tensors: dict[str, Any] = {"params": agent.get_parameters()}
    _names, variables = agent._get_torch_save_params()
    tensors["variables"] = {n: getattr(agent, n).detach().clone() for n in variables}
    if is_jax_agent(agent):  # SBX: networks, optimiser states and PRNG keys live in JAX
        tensors["jax"] = capture_jax(agent)
    meta: dict[str, Any] = {"algo": type(agent).__name__}
    meta["counters"] = {n: int(getattr(agent, n, 0)) for n in _COUNTERS}
    meta["schedule"] = {
        n: int(getattr(agent, n)) if n == "_n_calls" else float(getattr(agent, n))
        for n in _SCHEDULE_STATE
        if hasattr(agent, n)
    }
    meta["last_obs"] = encode(agent._last_obs, arrays, "agent.last_obs")
    meta["last_obs_order"] = memory_order(agent._last_obs)
    meta["last_episode_starts"] = encode(
        getattr(agent, "_last_episode_starts", None), arrays, "agent.last_episode_starts"
    )
    meta["ep_info_buffer"] = encode(list(agent.ep_info_buffer or []), arrays, "agent.ep_info")
    meta["ep_success_buffer"] = encode(
        list(agent.ep_success_buffer or []), arrays, "agent.ep_success"
    )
    meta["replay_buffer"] = None
    if replay_buffer and isinstance(agent, OffPolicyAlgorithm) and agent.replay_buffer is not None:
        buf = agent.replay_buffer
        n = buf.buffer_size if buf.full else buf.pos
        for name in _BUFFER_ARRAYS:
            value = getattr(buf, name, None)
            if isinstance(value, np.ndarray):
                arrays[f"replay.{name}"] = value[:n]
        meta["replay_buffer"] = {"pos": int(buf.pos), "full": bool(buf.full), "n": int(n)}
        if hasattr(buf, "sampler_state"):  # a buffer that draws its own rows (hybrid replay)
            meta["replay_buffer"]["sampler"] = buf.sampler_state()
    return meta, tensors


def restore_agent(
    agent: BaseAlgorithm,
    meta: dict[str, Any],
    tensors: dict[str, Any],
    arrays: dict[str, np.ndarray],
) -> None:
    """Put a captured state back into a freshly built agent of the same algorithm and sizes."""
    if meta["algo"] != type(agent).__name__:
        raise ValueError(
            f"the checkpoint is for {meta['algo']}, this run uses {type(agent).__name__}"
        )
    restore_policy(agent, tensors)
    for name, value in meta["counters"].items():
        setattr(agent, name, value)
    for name, value in meta.get("schedule", {}).items():
        setattr(agent, name, value)
    agent._last_obs = with_memory_order(
        decode(meta["last_obs"], arrays), meta.get("last_obs_order")
    )
    if meta["last_episode_starts"] is not None:
        agent._last_episode_starts = decode(meta["last_episode_starts"], arrays)
    maxlen = agent._stats_window_size
    agent.ep_info_buffer = collections.deque(decode(meta["ep_info_buffer"], arrays), maxlen=maxlen)
    agent.ep_success_buffer = collections.deque(
        decode(meta["ep_success_buffer"], arrays), maxlen=maxlen
    )
    rb = meta.get("replay_buffer")
    if rb is not None and isinstance(agent, OffPolicyAlgorithm):
        buf = agent.replay_buffer
        assert buf is not None, "an off-policy agent has its replay buffer once set up"
        n = rb["n"]
        for name in _BUFFER_ARRAYS:
            key = f"replay.{name}"
            if key in arrays:
                getattr(buf, name)[:n] = arrays[key]
        buf.pos, buf.full = rb["pos"], rb["full"]
        if "sampler" in rb and hasattr(buf, "load_sampler_state"):
            buf.load_sampler_state(rb["sampler"])


def restore_policy(agent: BaseAlgorithm, tensors: dict[str, Any]) -> None:
    """Put only the trained networks (and SAC's entropy coefficient) of a captured state into
    ``agent``: what inference needs, without counters, observations or a replay buffer. For an
    SBX agent that is its whole JAX state (networks, optimiser states, PRNG keys)."""
    if ("jax" in tensors) != is_jax_agent(agent):
        raise ValueError(
            "the checkpoint's agent and this run's use different backends (sb3 / sbx): "
            "use the backend the run was trained with"
        )
    agent.set_parameters(tensors["params"], exact_match=True)
    for name, value in tensors["variables"].items():
        with torch.no_grad():
            getattr(agent, name).copy_(value)
    if "jax" in tensors:
        restore_jax(agent, tensors["jax"])
