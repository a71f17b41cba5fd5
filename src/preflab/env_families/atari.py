"""Atari through gymnasium + ale-py (the ROMs ship with ale-py; nothing is downloaded).

- ids: ``ALE/<Game>-v5`` and ``<Game>NoFrameskip-v4``, registered by ``ale_py`` (the
  ``atari`` extra).
- construction (:func:`make_atari_vec_env`), as in paper 002: Stable-Baselines3's Atari
  wrappers (no-op starts, frame skip 4 with a max over the last two frames, 84×84 grey frames,
  end of a life = end of a training episode) and a 4-frame stack, the ALE's own frame skip off.
  Rewards are *not* clipped: the env reward is the true game score, which only the synthetic
  teacher and the evaluation see. Observations are images, so segments are shown from their
  stored frames (no replayer).
- frame timing: an agent step lasts (emulator frames per step) / 60 Hz. The frames per step
  are the ALE's own ``frameskip`` times the skip of frame-skipping wrappers (SB3's
  ``MaxAndSkipEnv``): 4/60 s as PrefLab trains, 15 steps per second.
- exact resume: the emulator state with its RNG (``ALEState.serialize``).
- evaluation: whole games (all lives) with the training wrappers (:func:`evaluate_atari`).

Stable-Baselines3 is imported inside the functions that build envs (the studio imports this
module for frame timing).
- presets: rl-baselines3-zoo's atari entries; runs start from ``TrainConfig.atari``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from preflab.env_families.base import EnvFamily
from preflab.errors import ConfigError

FRAME_STACK = 4
"""Frames per observation (paper 002: the reward model sees 4 stacked 84×84 frames)."""
ATARI_HZ = 60.0
"""Frames per second of the Atari 2600's NTSC video (the ALE's emulator clock)."""
SB3_ATARI_FRAME_SKIP = 4
"""Frames per agent step of SB3's ``AtariWrapper`` (its ``frame_skip`` default), which
:func:`make_atari_vec_env` applies over an ALE env with its own skip off."""


def is_atari_id(env_id: str) -> bool:
    """True for ALE ids (``ALE/Pong-v5``, ``PongNoFrameskip-v4``)."""
    return env_id.startswith("ALE/") or "NoFrameskip" in env_id


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


def is_ale(env: Any) -> bool:
    """True when ``env`` (an unwrapped env) is the Arcade Learning Environment's."""
    return type(env).__module__.split(".")[0] == "ale_py"


def frames_per_step(chain: list[Any]) -> float:
    """Emulator frames per agent step of an ALE env with wrapper chain ``chain`` (outermost
    first): its own ``frameskip`` (the mean of a stochastic (low, high) range) times the
    ``_skip`` of frame-skipping wrappers around it."""
    total = 1.0
    for w in chain[:-1]:
        skip = w.__dict__.get("_skip")
        if isinstance(skip, int) and skip > 0:
            total *= skip
    raw: Any = getattr(chain[-1], "_frameskip", 1) if chain else 1
    if isinstance(raw, tuple | list) and len(raw) == 2:
        own = (float(raw[0]) + float(raw[1]) - 1.0) / 2.0  # ALE draws from [low, high)
    else:
        own = float(raw)
    return total * own


def make_atari_vec_env(
    env_id: str,
    n_envs: int,
    seed: int,
    *,
    clip_reward: bool = False,
    terminal_on_life_loss: bool = True,
    frame_stack: int = FRAME_STACK,
    **env_kwargs: Any,
) -> Any:
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
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import DummyVecEnv, VecFrameStack

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
    return SB3_ATARI_FRAME_SKIP * agent_steps


def agent_steps(n_frames: int) -> int:
    """Agent steps for a budget of ``n_frames`` emulator frames."""
    return math.ceil(n_frames / SB3_ATARI_FRAME_SKIP)


NOT_YET = {
    "record": "preflab record does not record Atari runs yet ({env_id}); the studio "
    "(`preflab studio {run_dir}`) shows the run's clips",
    "eval": "preflab eval does not evaluate Atari runs yet ({env_id}); the run's summary.json "
    "holds the evaluation made at its end",
    "clips": "--log-clip-every: clips of Atari policies are not recorded yet ({env_id}); drop "
    "--log-clip-every (the studio shows the run's clips)",
    "eval_target": "an evaluation target (--eval-target or --teacher.score) is not supported on "
    "Atari: its episodes are not recorded as segments; leave it out",
}
"""What does not work for Atari yet, and what to do instead."""


class AtariFamily(EnvFamily):
    """ALE games (see the module docstring)."""

    name = "atari"
    preset = "atari"
    studio_labels = 200
    config_preset = "atari"

    def matches(self, env_id: str) -> bool:
        return is_atari_id(env_id)

    def ensure_registered(self, env_id: str) -> None:
        register_ale()

    def make_vec_env(self, env_id: str, n_envs: int, seed: int, **kwargs: Any) -> Any | None:
        return make_atari_vec_env(env_id, n_envs, seed, **kwargs)

    def light_make_kwargs(self, env_id: str) -> dict[str, Any]:
        # as make_atari_vec_env: SB3's wrapper skips instead of the ALE
        return {"frameskip": 1} if env_id.startswith("ALE/") else {}

    def owns(self, env: Any) -> bool:
        return is_ale(env)

    def owns_for_resume(self, env: Any) -> bool:
        return getattr(env, "ale", None) is not None

    def step_timing(self, chain: list[Any]) -> tuple[float, str] | None:
        return frames_per_step(chain) / ATARI_HZ, "atari"

    def training_timing(self, hint: tuple[float, str]) -> tuple[float, str]:
        # the training stack adds SB3's frame skip over the ALE's own
        return hint[0] * SB3_ATARI_FRAME_SKIP, hint[1]

    def capture_resume(self, env: Any, arrays: dict[str, np.ndarray], key: str) -> dict[str, Any]:
        # the emulator, including the sticky-action RNG
        blob = env.ale.cloneState(include_rng=True).serialize()
        arrays[f"{key}.ale"] = np.frombuffer(blob, np.uint8).copy()
        return {"ale": f"{key}.ale"}

    def restore_resume(
        self, env: Any, state: Mapping[str, Any], arrays: Mapping[str, np.ndarray]
    ) -> None:
        if "ale" not in state:
            return
        from ale_py import ALEState

        env.ale.restoreState(ALEState(np.asarray(arrays[state["ale"]], np.uint8).tobytes()))

    def evaluator(self) -> Any | None:
        return evaluate_atari

    def unsupported(self, feature: str, env_id: str, run_dir: str = "RUN_DIR") -> str | None:
        text = NOT_YET.get(feature)
        return None if text is None else text.format(env_id=env_id, run_dir=run_dir)
