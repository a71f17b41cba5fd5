"""Atari through gymnasium + ale-py (the ROMs ship with ale-py; nothing is downloaded at run
time), with Stable-Baselines3's Atari wrappers as in paper 002: no-op starts, frame skip 4
(max over the last two frames), 84×84 grey frames, a 4-frame stack (``VecFrameStack``), end of
a life = end of a training episode. Rewards are *not* clipped here: the env reward is the true
game score, which only the synthetic teacher and the evaluation see (the preference agent is
trained on the learned reward); the true-reward baseline clips as usual.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from stable_baselines3.common.env_util import make_atari_env
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv, VecFrameStack

from preflab.errors import ConfigError

FRAME_STACK = 4
"""Frames per observation (paper 002: the reward model sees 4 stacked 84×84 frames)."""


def register_ale() -> None:
    """Register the ALE ids with gymnasium (a ConfigError naming the extra when ale-py is absent)."""
    try:
        import ale_py
    except ImportError as exc:
        raise ConfigError(
            "Atari environments need ale-py (it ships the ROMs) and OpenCV: "
            "pip install 'preflab[atari]' (ale-py, opencv-python-headless)"
        ) from exc
    import gymnasium as gym

    gym.register_envs(ale_py)


def make_atari_vec_env(
    env_id: str,
    n_envs: int,
    seed: int,
    *,
    clip_reward: bool = False,
    terminal_on_life_loss: bool = True,
    frame_stack: int = FRAME_STACK,
    **env_kwargs: Any,
) -> VecEnv:
    """``n_envs`` Atari games in a DummyVecEnv with SB3's AtariWrapper and a frame stack:
    observations (n, 84, 84, frame_stack) uint8. For ``ALE/*-v5`` ids the ALE's own frame skip is
    turned off (the wrapper skips 4 frames and max-pools the last two); sticky actions stay."""
    register_ale()
    try:
        import cv2  # noqa: F401  (SB3's WarpFrame resizes with OpenCV)
    except ImportError as exc:
        raise ConfigError(
            "SB3's Atari wrappers need OpenCV: pip install 'preflab[atari]' "
            "(opencv-python-headless)"
        ) from exc
    kwargs = dict(env_kwargs)
    if env_id.startswith("ALE/"):
        kwargs.setdefault("frameskip", 1)
    venv = make_atari_env(
        env_id,
        n_envs=n_envs,
        seed=seed,
        vec_env_cls=DummyVecEnv,
        env_kwargs=kwargs,
        wrapper_kwargs={"clip_reward": clip_reward, "terminal_on_life_loss": terminal_on_life_loss},
    )
    return VecFrameStack(venv, frame_stack) if frame_stack > 1 else venv


def evaluate_atari(
    agent: Any,
    env_id: str,
    *,
    n_episodes: int,
    seed: int,
    deterministic: bool = True,
    max_steps: int = 27_000,
) -> tuple[float, float]:
    """Mean and std of the true game score over ``n_episodes`` whole games (all lives), with the
    same wrappers and frame stack as training; a game is cut after ``max_steps`` agent steps
    (108k frames, the usual limit)."""
    venv = make_atari_vec_env(env_id, 1, seed, terminal_on_life_loss=False)
    returns: list[float] = []
    obs = venv.reset()
    total, steps = 0.0, 0
    while len(returns) < n_episodes:
        act, _ = agent.predict(obs, deterministic=deterministic)
        obs, rew, dones, infos = venv.step(act)
        total += float(rew[0])
        steps += 1
        if dones[0] or steps >= max_steps:
            ep = infos[0].get("episode")
            returns.append(float(ep["r"]) if ep is not None and dones[0] else total)
            total, steps = 0.0, 0
            if not dones[0]:
                obs = venv.reset()
    venv.close()
    return float(np.mean(returns)), float(np.std(returns))


def frames(agent_steps: int) -> int:
    """Emulator frames behind ``agent_steps`` agent steps (frame skip 4)."""
    return 4 * agent_steps


def agent_steps(n_frames: int) -> int:
    """Agent steps for a budget of ``n_frames`` emulator frames."""
    return math.ceil(n_frames / 4)
