"""How long one env step lasts in real time, and how a clip of steps plays it back truthfully.

One function of the env decides a clip's speed (:func:`step_seconds`); the encoder, the media
key, the studio's captions and the browser's player all read it from here:

- MuJoCo, classic control and other gymnasium envs: ``1 / metadata['render_fps']`` (gymnasium
  sets a MuJoCo env's ``render_fps`` to ``1 / dt`` with ``dt = frame_skip × timestep``, so the
  env's own frame skip is already in it: Hopper-v5 → 125 steps per second).
- DeepMind Control (through Shimmy): the task's control timestep (walker 25 ms, cheetah 10 ms).
  Shimmy's ``render_fps`` is that timestep × 1000 (25 for walker, which runs at 40 steps per
  second), so it is not read.
- Atari (ALE): an agent step lasts (emulator frames per step) / 60 Hz. The frames per step are
  the ALE's own ``frameskip`` times the skip of frame-skipping wrappers (Stable-Baselines3's
  ``MaxAndSkipEnv``). PrefLab trains ALE ids with the ALE's skip off and SB3's ``AtariWrapper``
  skipping 4 frames (:func:`preflab.env_families.atari.make_atari_vec_env`): 4/60 s, 15 steps
  per second.

Each family states its own (:meth:`preflab.env_families.EnvFamily.step_timing`); this module
turns them into clip timings.

A clip holds one frame per step, so it is encoded at ``steps_per_s`` frames per second and plays
at the env's real time at ``playbackRate`` 1 (above :data:`MAX_CLIP_FPS`, or when the media
config fixes another fps, the player's base rate makes up the difference). Clips of short
segments can hold their first and last frame still for a moment at both ends
(:attr:`ClipTiming.still_frames`), so a person sees where a behaviour starts and ends.

This module imports gymnasium only (no stable-baselines3, no torch), so the studio can call it.
"""

from __future__ import annotations

import contextlib
import functools
import math
from dataclasses import dataclass
from typing import Any, Literal, cast

from preflab.env_families import family_of, family_of_env, register_family
from preflab.env_families.atari import ATARI_HZ, SB3_ATARI_FRAME_SKIP
from preflab.env_families.atari import frames_per_step as _ale_frames_per_step

__all__ = [
    "ATARI_HZ",
    "DEFAULT_STEPS_PER_S",
    "DEFAULT_STILL_S",
    "MAX_CLIP_FPS",
    "SB3_ATARI_FRAME_SKIP",
    "ClipTiming",
    "StepTiming",
    "TimingSource",
    "clip_timing",
    "frames_per_step",
    "step_seconds",
    "step_seconds_of",
    "timing",
    "timing_of",
]
DEFAULT_STEPS_PER_S = 30.0
"""Steps per second assumed when the env cannot be built or states no ``render_fps``."""
MAX_CLIP_FPS = 240.0
"""Highest frame rate a clip is encoded at; faster envs play back with a base rate above 1."""
DEFAULT_STILL_S = 0.3
"""Seconds the first and last frame of a padded clip are held still."""

TimingSource = Literal["render_fps", "control_timestep", "atari", "default"]


@dataclass(frozen=True, kw_only=True)
class StepTiming:
    """The real-time length of one env step."""

    step_seconds: float
    """Seconds of real time one env step lasts."""
    source: TimingSource
    """Where it came from: the env's ``render_fps``, DeepMind Control's control timestep, the
    ALE's frames per step, or the default."""

    @property
    def steps_per_s(self) -> float:
        """Env steps per second of real time."""
        return 1.0 / self.step_seconds


@dataclass(frozen=True, kw_only=True)
class ClipTiming:
    """How a clip of env steps (one frame per step) is encoded and played in real time."""

    step_seconds: float
    """Seconds of real time one env step lasts (:func:`step_seconds`)."""
    steps_per_s: float
    """Env steps per second of real time (``1 / step_seconds``)."""
    fps: float
    """Frames per second the clip is encoded at (one frame per step)."""
    playback_rate: float
    """The player's base ``playbackRate`` for real time: ``steps_per_s / fps`` (1 unless the
    env is faster than :data:`MAX_CLIP_FPS` or the media config fixes another fps)."""
    still_frames: int
    """Frames that repeat the first step before it and the last step after it (0: no padding)."""
    source: TimingSource
    """Where the step length came from (see :class:`StepTiming`)."""

    def seconds(self, n_steps: int) -> float:
        """Real-time seconds of ``n_steps`` env steps."""
        return n_steps * self.step_seconds

    def clip_seconds(self, n_steps: int) -> float:
        """The encoded clip's duration: its steps plus the still frames at both ends."""
        return (n_steps + 2 * self.still_frames) / self.fps

    def as_dict(self) -> dict[str, Any]:
        """The JSON the studio sends with each clip."""
        return {
            "step_seconds": self.step_seconds,
            "steps_per_s": self.steps_per_s,
            "fps": self.fps,
            "playback_rate": self.playback_rate,
            "still_frames": self.still_frames,
            "source": self.source,
        }


def _wrapper_chain(env: Any) -> list[Any]:
    """``env`` and every env it wraps (gymnasium wrappers; a VecEnv's first env), outermost first."""
    envs = getattr(env, "envs", None)  # an SB3 DummyVecEnv (or a VecEnvWrapper around one)
    inner = env
    while envs is None and hasattr(inner, "venv"):
        inner = inner.venv
        envs = getattr(inner, "envs", None)
    if envs:
        env = envs[0]
    chain, seen = [], set()
    while env is not None and id(env) not in seen:
        seen.add(id(env))
        chain.append(env)
        env = getattr(env, "env", None)
    return chain


def frames_per_step(env: Any) -> float:
    """Emulator frames per agent step of an ALE env: its own ``frameskip`` (the mean of a
    stochastic (low, high) range) times the ``_skip`` of frame-skipping wrappers around it."""
    return _ale_frames_per_step(_wrapper_chain(env))


def timing_of(env: Any) -> StepTiming:
    """The real-time length of one step of ``env`` (a gymnasium env, wrapped or not, or an SB3
    VecEnv of them): its family's (:meth:`~preflab.env_families.EnvFamily.step_timing`), else
    ``1 / metadata['render_fps']``, else the default."""
    chain = _wrapper_chain(env)
    inner = chain[-1] if chain else env
    family = family_of_env(inner) if chain else None
    hint = family.step_timing(chain) if family is not None else None
    if hint is not None:
        return _step(hint)
    for e in (inner, env):
        meta = getattr(e, "metadata", None) or {}
        with contextlib.suppress(TypeError, ValueError):
            fps = float(meta.get("render_fps") or 0)
            if math.isfinite(fps) and fps > 0:
                return StepTiming(step_seconds=1.0 / fps, source="render_fps")
    return StepTiming(step_seconds=1.0 / DEFAULT_STEPS_PER_S, source="default")


def _step(hint: tuple[float, str]) -> StepTiming:
    seconds, source = hint
    return StepTiming(step_seconds=seconds, source=cast(TimingSource, source))


def step_seconds_of(env: Any) -> float:
    """Seconds of real time one step of ``env`` lasts (:func:`timing_of`)."""
    return timing_of(env).step_seconds


def _make_light(env_id: str) -> Any:
    """``env_id`` built with gymnasium alone, as PrefLab trains it (its family's
    :meth:`~preflab.env_families.EnvFamily.light_make_kwargs`: Atari's own skip off),
    registering its family's ids on demand."""
    import gymnasium as gym

    register_family(env_id)
    return gym.make(env_id, **family_of(env_id).light_make_kwargs(env_id))


@functools.lru_cache(maxsize=256)
def timing(env_id: str) -> StepTiming:
    """The real-time length of one agent step of ``env_id`` as PrefLab trains it (built once per
    id; an id that cannot be built gets the default of :data:`DEFAULT_STEPS_PER_S`)."""
    if not env_id:
        return StepTiming(step_seconds=1.0 / DEFAULT_STEPS_PER_S, source="default")
    family = family_of(env_id)
    known = family.step_timing_of_id(env_id)  # PrefLab's grids: without loading preflab.envs
    if known is not None:
        return _step(known)
    try:
        env = _make_light(env_id)
    except Exception:
        return StepTiming(step_seconds=1.0 / DEFAULT_STEPS_PER_S, source="default")
    try:
        t = timing_of(env)
        if t.source != "default" and family_of_env(env) is family:
            t = _step(family.training_timing((t.step_seconds, t.source)))
        return t
    finally:
        with contextlib.suppress(Exception):
            env.close()


def step_seconds(env_id: str) -> float:
    """Seconds of real time one agent step of ``env_id`` lasts (see the module docstring)."""
    return timing(env_id).step_seconds


def clip_timing(env_id: str, *, fps: float | None = None, still_s: float = 0.0) -> ClipTiming:
    """How a clip of ``env_id``'s steps is encoded and played: at ``fps`` frames per second when
    given (the media config's fixed rate), else at the env's steps per second (at most
    :data:`MAX_CLIP_FPS`), with ``still_s`` seconds of still frames at both ends."""
    t = timing(env_id)
    rate = float(fps) if fps else min(t.steps_per_s, MAX_CLIP_FPS)
    still = max(1, round(still_s * rate)) if still_s > 0 else 0
    return ClipTiming(
        step_seconds=t.step_seconds,
        steps_per_s=t.steps_per_s,
        fps=rate,
        playback_rate=t.steps_per_s / rate,
        still_frames=still,
        source=t.source,
    )
