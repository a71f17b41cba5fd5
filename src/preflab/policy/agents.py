"""Policy learners by name and backend (Stable-Baselines3 or SBX), and replay-buffer relabelling
for off-policy agents. SBX's agents are SB3 algorithms underneath (the same replay and rollout
buffers, callbacks and ``learn``), with their networks in JAX."""

from __future__ import annotations

from typing import Any, TypeGuard

import numpy as np
import torch
from stable_baselines3 import A2C, DDPG, DQN, PPO, SAC, TD3
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.vec_env import VecEnv

from preflab.envs import flatten_actions, model_obs
from preflab.errors import ConfigError
from preflab.pixels.spaces import is_image_space
from preflab.policy.algos import ALGOS, SBX_ALGOS
from preflab.policy.jax_cache import enable_compilation_cache
from preflab.policy.reward_wrapper import RewardFn

__all__ = ["ALGOS", "RunDQN", "is_off_policy", "make_agent", "relabel_replay_buffer"]


class RunDQN(DQN):
    """SB3's DQN whose exploration schedule spans the whole run, not one ``learn`` call.

    PrefLab calls ``learn`` once per feedback round; SB3 measures progress (and so ε's decay
    over ``exploration_fraction``) within each call, which would end exploration early in the
    first round. With ``run_steps`` set, progress is the agent's env steps over ``run_steps``.
    """

    run_steps: int | None = None
    """Env steps the agent trains for in the whole run (None: SB3's per-call progress)."""

    def _update_current_progress_remaining(self, num_timesteps: int, total_timesteps: int) -> None:
        if self.run_steps:
            total_timesteps = max(self.run_steps, num_timesteps, 1)
        super()._update_current_progress_remaining(num_timesteps, total_timesteps)


_CLASS_NAMES = {"crossq": "CrossQ"}
"""Class names that are not the algorithm's name in capitals (in sb3-contrib and SBX alike)."""


def _class_name(algo: str) -> str:
    return _CLASS_NAMES.get(algo, algo.upper())


def _sbx_class(algo: str) -> type[BaseAlgorithm]:
    if algo not in SBX_ALGOS:
        raise ConfigError(f"the sbx backend has no {algo!r}; it runs {', '.join(SBX_ALGOS)}")
    try:
        import sbx
    except ImportError as exc:
        raise ConfigError(
            "--backend sbx needs SBX and JAX (CPU): pip install 'preflab[fast]' "
            "(or use --backend sb3)"
        ) from exc
    enable_compilation_cache()
    cls: type[BaseAlgorithm] = getattr(sbx, _class_name(algo))
    return cls


def _algo_class(algo: str, backend: str = "sb3") -> type[BaseAlgorithm]:
    if backend == "sbx":
        return _sbx_class(algo)
    if algo in ("trpo", "tqc", "crossq"):
        import sb3_contrib

        cls: type[BaseAlgorithm] = getattr(sb3_contrib, _class_name(algo))
        return cls
    classes: dict[str, type[BaseAlgorithm]] = {
        "ppo": PPO,
        "sac": SAC,
        "td3": TD3,
        "ddpg": DDPG,
        "a2c": A2C,
        "dqn": RunDQN,
    }
    if algo not in classes:
        raise ConfigError(f"unknown algorithm {algo!r}; expected one of {ALGOS}")
    return classes[algo]


def make_agent(
    algo: str,
    venv: VecEnv,
    *,
    seed: int | None,
    net_arch: list[int] | None = None,
    run_steps: int | None = None,
    backend: str = "sb3",
    device: str = "cpu",
    **hyper: Any,
) -> BaseAlgorithm:
    """An SB3 (or sb3-contrib, or SBX) agent on ``venv``; ``hyper`` goes to its constructor,
    except ``action_noise_std`` (a preset's Gaussian exploration noise σ, in the policy's
    [-1, 1] action scale). ``run_steps``: env steps the agent trains for in the run (DQN's ε
    schedule). ``backend``: 'sb3' or 'sbx' (see :data:`preflab.policy.algos.Backend`).
    ``device``: torch's device for SB3's networks ('cpu', 'cuda', 'cuda:N'; see
    :func:`preflab.device.agent_device`)."""
    cls = _algo_class(algo, backend)
    image = is_image_space(venv.observation_space)
    if image and backend == "sbx":
        raise ConfigError(
            "the sbx backend has no convolutional policy for image observations: use --backend sb3"
        )
    if image:  # pixels: CnnPolicy and the Atari hyperparameters, overridable by ``hyper``
        hyper = _image_preset(algo) | hyper
    hyper = dict(hyper)
    noise_std = hyper.pop("action_noise_std", None)
    if noise_std is not None and hyper.get("action_noise") is None:
        from stable_baselines3.common.noise import NormalActionNoise

        shape = venv.action_space.shape or (1,)
        hyper["action_noise"] = NormalActionNoise(
            mean=np.zeros(shape), sigma=float(noise_std) * np.ones(shape)
        )
    policy_kwargs = dict(hyper.pop("policy_kwargs", {}) or {})
    if net_arch is not None:
        policy_kwargs["net_arch"] = list(net_arch)
    try:
        agent = cls(
            "CnnPolicy" if image else "MlpPolicy",
            venv,
            seed=seed,
            verbose=0,
            device=device,
            policy_kwargs=policy_kwargs or None,
            **hyper,
        )
    except TypeError as exc:
        raise ConfigError(
            f"bad hyperparameter for {algo}: {exc}. Check the names against the SB3 docs"
        ) from exc
    # SB3's default logger makes an empty /tmp/SB3-<time> folder on every learn(); PrefLab
    # keeps its own metrics, so the agent logs nowhere
    agent.set_logger(Logger(folder=None, output_formats=[]))
    if isinstance(agent, RunDQN):
        agent.run_steps = run_steps
    return agent


def is_off_policy(agent: BaseAlgorithm) -> TypeGuard[OffPolicyAlgorithm]:
    """True for replay-buffer agents (SAC, TD3, DDPG, DQN), whose buffers need relabelling."""
    return isinstance(agent, OffPolicyAlgorithm)


@torch.no_grad()
def relabel_replay_buffer(agent: BaseAlgorithm, reward_fn: RewardFn, chunk: int = 65_536) -> int:
    """Recompute every stored reward with ``reward_fn`` in large batches (as PEBBLE does).

    Stored actions are in the policy's [-1, 1] scale for Box spaces; they are unscaled to the
    env's action space before the reward model sees them. Returns the number relabelled.
    """
    if not is_off_policy(agent):
        return 0
    buf = agent.replay_buffer
    assert buf is not None, "an off-policy agent has its replay buffer once set up"
    n = buf.buffer_size if buf.full else buf.pos
    if n == 0:
        return 0
    obs_space, act_space = agent.observation_space, agent.action_space
    n_envs = buf.n_envs
    obs_shape = obs_space.shape
    assert obs_shape is not None, "SB3 buffers hold observations of a fixed shape"
    obs = buf.observations[:n].reshape(n * n_envs, *obs_shape)
    nxt_src = (
        buf.next_observations
        if not buf.optimize_memory_usage
        else np.roll(buf.observations, -1, axis=0)
    )
    nxt = nxt_src[:n].reshape(n * n_envs, *obs_shape)
    acts = buf.actions[:n].reshape(n * n_envs, -1)
    from gymnasium import spaces

    if isinstance(act_space, spaces.Box):
        acts = agent.policy.unscale_action(acts)
    acts = flatten_actions(acts, act_space)
    out = np.empty(n * n_envs, np.float32)
    for s in range(0, n * n_envs, chunk):
        out[s : s + chunk] = reward_fn(
            model_obs(obs[s : s + chunk], obs_space),
            acts[s : s + chunk],
            model_obs(nxt[s : s + chunk], obs_space),
        )
    buf.rewards[:n] = out.reshape(n, n_envs)
    return n * n_envs


def _image_preset(algo: str) -> dict[str, Any]:
    """Hyperparameters of ``algo`` for image observations: the Atari family's preset (zoo) and,
    for A2C, the zoo's RMSprop (TF-like) optimiser."""
    from preflab.policy.presets import family_preset

    p = family_preset(algo, "atari")
    if algo == "a2c":
        from stable_baselines3.common.sb2_compat.rmsprop_tf_like import RMSpropTFLike

        p["policy_kwargs"] = {"optimizer_class": RMSpropTFLike, "optimizer_kwargs": {"eps": 1e-5}}
    return p
