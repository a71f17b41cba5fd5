"""What an environment family declares: the hooks the rest of PrefLab asks instead of testing ids.

An *environment family* (MuJoCo, DeepMind Control, Meta-World, Atari, grid worlds, classic
control) is one object, :class:`EnvFamily`, in one module of this package. Training, the render
workers, the studio's clip timing, checkpoints and evaluation call
``family_of(env_id).<hook>(...)`` (or :func:`~preflab.env_families.registry.family_of_env` for a
built env) and never look at an id's prefix themselves. Every hook has a default that means
"nothing special about this family", so a family overrides only what it knows.

Family modules import gymnasium and numpy only at module level (the studio imports this
package); simulators (MuJoCo, dm_control, ale-py, MiniGrid) are imported inside the hooks.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Protocol

import numpy as np

from preflab.errors import ConfigError


class Replayer(Protocol):
    """Renders stored states of one environment (built once per env and size)."""

    def frame(self, state: np.ndarray) -> np.ndarray:
        """The (H, W, 3) uint8 frame of ``state`` (one row of ``Segment.states``)."""
        ...

    def close(self) -> None:
        """Free rendering resources."""
        ...


StepTimingHint = tuple[float, str]
"""(seconds of real time per env step, where that came from: a ``TimingSource`` of
:mod:`preflab.media.timing`)."""


class EnvFamily:
    """One environment family: which ids and envs are its own, and what is special about them.

    Subclasses override the hooks their family needs; the defaults suit a plain gymnasium env.
    """

    name: str = "other"
    """Short name (``mujoco``, ``dmc``, ``metaworld``, ``atari``, ``grid``, ``classic``, …)."""
    preset: str = "other"
    """The key of the family's SB3 hyperparameters in :mod:`preflab.policy.presets`
    (``other``: PrefLab's defaults)."""

    # ----- id patterns and registration -----------------------------------------------------
    def matches(self, env_id: str) -> bool:
        """Whether ``env_id`` belongs to this family (its id patterns; checked in registry
        order, so a family may rely on earlier ones having said no)."""
        return False

    def ensure_registered(self, env_id: str) -> None:
        """Make the family's ids known to gymnasium (the lazy import that registers them); raise
        a ConfigError with the install command when the family's package is missing."""

    def register_for_suggestions(self) -> None:
        """Register the family's ids if that is cheap and cannot fail, so that an unknown id
        gets suggestions from them too (called for ids no family claims)."""

    def episode_limit(self, spec: Any) -> int | None:
        """Steps per episode of an env with gymnasium ``spec`` (its ``max_episode_steps``), or
        None without one."""
        limit = getattr(spec, "max_episode_steps", None)
        return int(limit) if limit else None

    # ----- construction -----------------------------------------------------------------------
    def make_vec_env(self, env_id: str, n_envs: int, seed: int, **kwargs: Any) -> Any | None:
        """A vec env of ``n_envs`` copies built the family's own way (Atari: SB3's Atari
        wrappers and a frame stack), or None for the default: a DummyVecEnv whose Dict
        observations (DeepMind Control's) are flattened with their layout kept
        (:func:`preflab.envs.flat_dict`), as :func:`preflab.envs.make_env` does for one env."""
        return None

    def light_make_kwargs(self, env_id: str) -> dict[str, Any]:
        """``gym.make`` arguments that build ``env_id`` as training sees it, with gymnasium
        alone (Atari: the ALE's own frame skip off)."""
        return {}

    # ----- simulator state: rendering ----------------------------------------------------------
    def owns(self, env: Any) -> bool:
        """Whether the unwrapped env ``env`` is one of this family's (checked in registry order;
        looks classes up only in modules already loaded)."""
        return False

    def capture(self, env: Any) -> np.ndarray | None:
        """The unwrapped env's state right now as a 1-D float64 vector of constant length, from
        which :meth:`replayer` redraws it (called before every step: keep it cheap); None when
        the family keeps no such state."""
        return None

    def has_capture(self) -> bool:
        """Whether :meth:`capture` is overridden (the family records rendering states)."""
        return type(self).capture is not EnvFamily.capture

    def replayer(self, env: Any, size: int) -> Replayer | None:
        """A replayer for ``env`` (built with ``render_mode='rgb_array'``) drawing
        ``size``-pixel frames of captured states: the family's renderer and camera."""
        return None

    def prewarm(self) -> None:
        """Load the family's renderer ahead of a render worker's first job (may raise; the
        worker ignores failures)."""

    # ----- frame timing -------------------------------------------------------------------------
    def step_timing(self, chain: list[Any]) -> StepTimingHint | None:
        """Seconds of real time one step lasts, from the env's wrapper chain (outermost first,
        the family's env last), or None to read gymnasium's ``render_fps``."""
        return None

    def step_timing_of_id(self, env_id: str) -> StepTimingHint | None:
        """The step length of ``env_id`` without building it (for families whose registration
        would load heavy modules), or None to build it."""
        return None

    def training_timing(self, hint: StepTimingHint) -> StepTimingHint:
        """The step length as training steps the env (Atari: SB3's frame skip on top)."""
        return hint

    # ----- state capture for exact resume -----------------------------------------------------
    def owns_for_resume(self, env: Any) -> bool:
        """Whether :meth:`capture_resume` applies to the unwrapped ``env`` (by default: the
        family :meth:`owns` it)."""
        return self.owns(env)

    def skip_attrs(self, layer: Any) -> frozenset[str]:
        """Attributes of wrapper layer ``layer`` that :meth:`capture_resume` saves itself (the
        generic capture leaves them out)."""
        return frozenset()

    def capture_resume(self, env: Any, arrays: dict[str, np.ndarray], key: str) -> dict[str, Any]:
        """What an exact resume needs beyond the env's plain attributes (the simulator's
        integration state, emulator state, task RNGs), as JSON-ready entries whose arrays go
        into ``arrays`` under names starting with ``key``; ``env`` is the unwrapped env."""
        return {}

    def restore_resume(
        self, env: Any, state: Mapping[str, Any], arrays: Mapping[str, np.ndarray]
    ) -> None:
        """Put :meth:`capture_resume`'s entries of ``state`` back into the freshly built
        unwrapped ``env``."""

    # ----- evaluation extras --------------------------------------------------------------------
    def step_success(self, info: Mapping[str, Any]) -> bool | None:
        """Whether the task is solved on a step with ``info`` (``info['success']``, as
        Meta-World reports it), or None when the env reports no success."""
        return bool(info["success"]) if "success" in info else None

    def evaluator(self) -> Any | None:
        """A function ``(agent, env_id, *, n_episodes, seed, deterministic) -> (mean, std)``
        that evaluates the family's envs its own way (Atari: with the training wrappers), or
        None for the default episode loop."""
        return None

    studio_labels: int = 150
    """The label budget of a ``--studio`` run: about 20–40 minutes of a person's time at 5–10 s
    per answer (watching both clips included)."""
    studio_run: Mapping[str, Any] = MappingProxyType({"total_steps": 50_000})
    """``TrainConfig`` fields a ``--studio`` run of this family sets (every flag still overrides
    them)."""
    studio_fixed_horizon_on_falls: bool = False
    """Whether a ``--studio`` run turns early termination off for envs that end episodes on a
    fall (a one-second segment needs episodes longer than an early policy's falls)."""
    config_preset: str | None = None
    """The ``TrainConfig`` constructor a run on this family starts from (``atari``:
    ``TrainConfig.atari``, Christiano et al. 2017's set-up), or None for the defaults."""

    def unsupported(self, feature: str, env_id: str, run_dir: str = "RUN_DIR") -> str | None:
        """Why ``feature`` (``record``, ``eval``, ``clips``, ``eval_target``) does not work for
        ``env_id`` (of run directory ``run_dir``) yet and what to do instead, or None when it
        works."""
        return None

    def __repr__(self) -> str:
        return f"<env family {self.name}>"


# ----- helpers shared by family modules -------------------------------------------------------
def loaded_class(module: str, name: str) -> type | None:
    """``module.name`` when ``module`` is already imported (no import is triggered), else None."""
    import sys

    mod = sys.modules.get(module)
    cls = getattr(mod, name, None) if mod is not None else None
    return cls if isinstance(cls, type) else None


def spec_entry_point(env_id: str) -> str:
    """The registered entry point of ``env_id`` as a string ('' for an unknown id)."""
    import gymnasium as gym

    try:
        return str(gym.spec(env_id).entry_point)
    except Exception:  # an unknown id: the run's checks report it with suggestions
        return ""


def fit_frame(img: np.ndarray, size: int) -> np.ndarray:
    """``img`` scaled so that its longer side is ``size`` (aspect kept), both sides even."""
    h, w = img.shape[:2]
    scale = size / max(h, w)
    nh, nw = max(2, round(h * scale) // 2 * 2), max(2, round(w * scale) // 2 * 2)
    if (nh, nw) == (h, w):
        return np.ascontiguousarray(img[..., :3], dtype=np.uint8)
    from PIL import Image

    out = Image.fromarray(np.ascontiguousarray(img[..., :3], dtype=np.uint8)).resize(
        (nw, nh), Image.Resampling.BILINEAR
    )
    return np.asarray(out)


def missing_extra(env_id: str, what: str, hint: str) -> ConfigError:
    """The error for an id whose family's package is not installed."""
    return ConfigError(f"{env_id!r} is a {what} env; {hint}")
