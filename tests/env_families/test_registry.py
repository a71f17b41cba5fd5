"""Environment families: ids and built envs find their family, a registered family plugs into
capture, replay, timing and resume without other changes, and the package stays light."""

from __future__ import annotations

import subprocess
import sys
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import pytest

from preflab.env_families import (
    OTHER,
    EnvFamily,
    episode_limit,
    families,
    family_of,
    family_of_env,
    register,
)
from preflab.env_families import registry as registry_module


@pytest.mark.parametrize(
    ("env_id", "name", "preset"),
    [
        ("ALE/Pong-v5", "atari", "atari"),
        ("PongNoFrameskip-v4", "atari", "atari"),
        ("dm_control/walker-walk-v0", "dmc", "dmc"),
        ("metaworld/button-press-v3", "metaworld", "other"),
        ("Hopper-v5", "mujoco", "mujoco"),
        ("Pendulum-v1", "classic", "classic"),
        ("LunarLander-v3", "classic", "classic"),
        ("MiniGrid-Empty-5x5-v0", "grid", "grid"),
        ("BabyAI-GoToLocal-v0", "grid", "grid"),
        ("PrefLab/Lock-v0", "preflab-grid", "grid"),
        ("FrozenLake-v1", "other", "other"),
        ("NoSuchEnv-v0", "other", "other"),
    ],
)
def test_ids_find_their_family(env_id: str, name: str, preset: str) -> None:
    fam = family_of(env_id)
    assert fam.name == name and fam.preset == preset


@pytest.mark.parametrize(
    ("env_id", "name"),
    [("Hopper-v5", "mujoco"), ("Pendulum-v1", "classic"), ("FrozenLake-v1", None)],
)
def test_built_envs_find_their_family(env_id: str, name: str | None) -> None:
    env = gym.make(env_id)
    try:
        fam = family_of_env(env)  # wrappers looked through
        assert (fam.name if fam is not None else None) == name
    finally:
        env.close()


def test_every_family_is_listed_once_and_named_once() -> None:
    names = [f.name for f in families()]
    assert len(names) == len(set(names)) and OTHER not in families()


def test_episode_limit_is_the_spec_s_or_the_family_s() -> None:
    class Spec:
        id = "dm_control/walker-walk-v0"
        max_episode_steps = None

    assert episode_limit(Spec()) == 1000  # DeepMind Control counts its own 1,000 steps
    assert episode_limit(gym.spec("Pendulum-v1")) == 200
    assert episode_limit(None) is None


class _Toy(gym.Env[np.ndarray, int]):
    """A suite PrefLab does not know: one number that counts steps."""

    metadata: ClassVar[dict[str, Any]] = {"render_fps": 4, "render_modes": ["rgb_array"]}

    def __init__(self, render_mode: str | None = None) -> None:
        self.observation_space = gym.spaces.Box(-1e9, 1e9, (1,), np.float64)
        self.action_space = gym.spaces.Discrete(2)
        self.render_mode = render_mode
        self.count = 0.0

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.count = 0.0
        return np.array([self.count]), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.count += 1.0
        return np.array([self.count]), 0.0, False, False, {"success": self.count >= 3}


class _ToyReplayer:
    def __init__(self, size: int) -> None:
        self.size = size

    def frame(self, state: np.ndarray) -> np.ndarray:
        return np.full((self.size, self.size, 3), int(state[0]) % 256, np.uint8)

    def close(self) -> None:
        pass


class _ToyFamily(EnvFamily):
    name = "toy"

    def matches(self, env_id: str) -> bool:
        return env_id.startswith("Toy/")

    def ensure_registered(self, env_id: str) -> None:
        if "Toy/Count-v0" not in gym.registry:
            gym.register("Toy/Count-v0", entry_point=_Toy, max_episode_steps=7)

    def owns(self, env: Any) -> bool:
        return isinstance(env, _Toy)

    def capture(self, env: Any) -> np.ndarray | None:
        return np.array([env.count])

    def replayer(self, env: Any, size: int) -> Any:
        return _ToyReplayer(size)

    def step_timing(self, chain: list[Any]) -> tuple[float, str] | None:
        return 0.5, "control_timestep"

    def capture_resume(self, env: Any, arrays: dict[str, np.ndarray], key: str) -> dict:
        return {"toy": float(env.count)}

    def restore_resume(self, env: Any, state: Any, arrays: Any) -> None:
        env.count = float(state["toy"])


@pytest.fixture
def toy() -> Any:
    fam = _ToyFamily()
    register(fam)
    try:
        yield fam
    finally:
        registry_module._USER.remove(fam)
        gym.registry.pop("Toy/Count-v0", None)


def test_a_registered_family_plugs_in_everywhere(toy: _ToyFamily) -> None:
    from preflab.envs import make_env, make_vec_env
    from preflab.media.capture import capture_state
    from preflab.media.replay import replayer_for
    from preflab.media.timing import timing_of
    from preflab.runstate.envstate import capture_vec_env, restore_vec_env

    env = make_env("Toy/Count-v0", seed=0)  # registered through the family
    assert family_of("Toy/Count-v0") is toy and family_of_env(env) is toy
    env.step(1)
    np.testing.assert_array_equal(capture_state(env), [1.0])
    rp = replayer_for(env, 8)
    assert rp is not None and rp.frame(np.array([5.0]))[0, 0, 0] == 5
    assert timing_of(env).step_seconds == 0.5
    assert episode_limit(gym.spec("Toy/Count-v0")) == 7

    venv = make_vec_env("Toy/Count-v0", 1, seed=0)
    venv.reset()
    venv.step(np.array([1]))
    arrays: dict[str, np.ndarray] = {}
    state = capture_vec_env(venv, arrays)
    assert state["envs"][0]["family"] == "toy" and state["envs"][0]["toy"] == 1.0
    fresh = make_vec_env("Toy/Count-v0", 1, seed=0)
    fresh.reset()
    restore_vec_env(fresh, state, arrays)
    assert fresh.envs[0].unwrapped.count == 1.0  # type: ignore[attr-defined]


def test_a_checkpoint_of_another_family_is_refused(toy: _ToyFamily) -> None:
    from preflab.envs import make_vec_env
    from preflab.runstate.envstate import capture_vec_env, restore_vec_env

    arrays: dict[str, np.ndarray] = {}
    venv = make_vec_env("Toy/Count-v0", 1, seed=0)
    venv.reset()
    state = capture_vec_env(venv, arrays)
    state["envs"][0]["family"] = "mujoco"
    with pytest.raises(ValueError, match="state of a mujoco env; this env is toy"):
        restore_vec_env(make_vec_env("Toy/Count-v0", 1, seed=0), state, arrays)


def test_success_comes_from_the_family(toy: _ToyFamily) -> None:
    from preflab.policy.evaluate import evaluate_episodes

    class Stepper:
        def predict(self, obs: Any, deterministic: bool = True) -> tuple[int, None]:
            return 1, None

    ev = evaluate_episodes(Stepper(), "Toy/Count-v0", n_episodes=2, seed=0)
    assert ev.success_rate == 1.0  # solved from the third of its seven steps


def test_the_package_loads_gymnasium_only() -> None:
    code = (
        "import preflab.env_families as f, sys\n"
        "for i in ('Hopper-v5', 'ALE/Pong-v5', 'dm_control/walker-walk-v0', 'PrefLab/Lock-v0'):\n"
        "    f.family_of(i)\n"
        "print(' '.join(sys.modules))"
    )
    loaded = set(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
        ).stdout.split()
    )
    assert not loaded & {"torch", "stable_baselines3", "mujoco", "ale_py", "preflab.envs"}
