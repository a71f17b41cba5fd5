"""Default SB3 hyperparameters per env family and algorithm: the layer under ``--agent-kwargs``.

A run's agent gets, from the bottom up: SB3's own defaults, the preset of its env family and
algorithm (:data:`FAMILY_PRESETS`, falling back to :data:`PRESETS`), then the user's
``--agent-kwargs``. The values come from rl-baselines3-zoo's tuned ``hyperparams/<algo>.yml``
(github.com/DLR-RM/rl-baselines3-zoo, read at commit 22e3ff2) where they exist; each entry names
the file and the entry it was taken from. What PrefLab sets itself, whatever the zoo says:

* ``learning_starts`` is 0 for off-policy agents: PrefLab's ``--initial-steps`` random steps
  fill the replay buffer before the agent learns (they play the zoo's learning_starts role).
* network widths come from ``--net-arch`` (the zoo's ``policy_kwargs.net_arch`` is not used);
  the zoo's observation normalisation (``normalize: true``) and learning-rate schedules
  (``lin_…``) are not applied (constant rates).
* on-policy rollouts (``n_steps`` per env) are cut to fit a feedback round, and PPO's
  ``batch_size`` to divide the rollout (see :func:`preset`); DQN's ``train_freq`` divides a
  round too, so that rounds end where SB3 stops collecting.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any, Literal

from preflab.errors import ConfigError
from preflab.policy.algos import is_on_policy

log = logging.getLogger(__name__)

Family = Literal["mujoco", "dmc", "classic", "atari", "grid", "other"]
"""An env family: MuJoCo (gymnasium's ``mujoco`` envs), DeepMind Control (``dm_control/…``
ids), classic control (gymnasium's classic_control and box2d), Atari (ALE ids), grid worlds
(``MiniGrid-…``, ``BabyAI-…``, PrefLab's ``PrefLab/…`` grids), or anything else."""

ROLLOUT_CAP = 2048
"""Most env steps (all envs together) in one on-policy rollout (SB3's PPO default, 2048 × 1)."""

PRESETS: dict[str, dict[str, Any]] = {
    # PrefLab's defaults for envs of no known family, and for classic control (see below)
    "ppo": {"n_steps": 2048, "batch_size": 64},  # SB3's defaults (= the zoo's default: entry)
    # PrefLab's long-standing Pendulum SAC values (the main job); the zoo's ``sac.yml``
    # Pendulum-v1 sets only learning_rate 1e-3 over SB3's defaults (γ 0.99, τ 0.005, 1e6
    # buffer). On the main job (seed 0) the two ended level (eval −109.5 ± 64.9 here, −108.0 ±
    # 63.5 with the zoo's), so these stay and the main job's metrics do not change
    "sac": {
        "learning_rate": 1e-3,
        "buffer_size": 200_000,
        "batch_size": 256,
        "learning_starts": 0,
        "train_freq": 1,
        "gradient_steps": 1,
        "gamma": 0.98,
        "tau": 0.02,
    },
    # zoo td3.yml Pendulum-v1 (learning_starts 10000 → --initial-steps; no net_arch [400, 300])
    "td3": {
        "learning_rate": 1e-3,
        "learning_starts": 0,
        "gamma": 0.98,
        "buffer_size": 200_000,
        "train_freq": 1,
        "gradient_steps": 1,
        "action_noise_std": 0.1,
    },
    "ddpg": {"learning_rate": 1e-3, "learning_starts": 0, "gamma": 0.98},
    # CrossQ (sb3-contrib's and SBX's defaults: lr 1e-3, batch 256, policy delay 3; no target
    # networks, so no tau), with the replay buffer and γ of PrefLab's SAC preset
    "crossq": {"learning_starts": 0, "buffer_size": 200_000, "gamma": 0.98},
    "a2c": {},
    "trpo": {"n_steps": 1024, "gamma": 0.99},
    # zoo dqn.yml CartPole-v1 ("almost tuned"); net_arch [256, 256] left to --net-arch
    "dqn": {
        "learning_rate": 2.3e-3,
        "batch_size": 64,
        "buffer_size": 100_000,
        "learning_starts": 0,
        "gamma": 0.99,
        "target_update_interval": 10,
        "train_freq": 256,
        "gradient_steps": 128,
        "exploration_fraction": 0.16,
        "exploration_final_eps": 0.04,
    },
}
"""Presets for envs of no known family (``other``)."""

_MUJOCO: dict[str, dict[str, Any]] = {
    # zoo sac.yml HalfCheetah-v4 (&mujoco-defaults): SB3's SAC defaults, learning_starts 10000
    "sac": {
        "learning_rate": 3e-4,
        "buffer_size": 1_000_000,
        "batch_size": 256,
        "learning_starts": 0,
        "train_freq": 1,
        "gradient_steps": 1,
        "gamma": 0.99,
        "tau": 0.005,
    },
    # zoo td3.yml HalfCheetah-v4 (&mujoco-defaults): normal action noise σ 0.1
    "td3": {
        "learning_rate": 1e-3,
        "batch_size": 256,
        "learning_starts": 0,
        "train_freq": 1,
        "gradient_steps": 1,
        "action_noise_std": 0.1,
    },
    "ddpg": PRESETS["ddpg"],
    "crossq": {"learning_starts": 0, "buffer_size": 1_000_000, "gamma": 0.99},
    # zoo ppo.yml Ant-v4 (&mujoco-defaults; the tuned per-env entries differ env by env):
    # SB3's defaults
    "ppo": {"n_steps": 2048, "batch_size": 64},
    "a2c": {},  # zoo a2c.yml HalfCheetah-v4 (&mujoco-defaults): SB3's defaults
    "trpo": PRESETS["trpo"],
}

FAMILY_PRESETS: dict[Family, dict[str, dict[str, Any]]] = {
    "mujoco": _MUJOCO,
    # the zoo has no DeepMind Control entries; the same MuJoCo physics and continuous control,
    # so the MuJoCo presets (DMC envs come with issue #27)
    "dmc": _MUJOCO,
    # the zoo's classic-control entries are per env and disagree (ppo.yml Pendulum-v1 γ 0.9 with
    # gSDE, CartPole-v1 γ 0.98 with n_steps 32 × 8 envs), so no family-wide tuned value exists:
    # PrefLab's defaults (the main job's Pendulum SAC) and dqn.yml CartPole-v1 for DQN
    "classic": PRESETS,
    "atari": {
        # zoo a2c.yml atari (RMSprop is added for image observations by preflab.pixels.atari)
        "a2c": {"ent_coef": 0.01, "vf_coef": 0.25},
        # zoo ppo.yml atari (lin_ schedules as constants)
        "ppo": {
            "n_steps": 128,
            "n_epochs": 4,
            "batch_size": 256,
            "learning_rate": 2.5e-4,
            "clip_range": 0.1,
            "vf_coef": 0.5,
            "ent_coef": 0.01,
        },
        # zoo dqn.yml atari (learning_starts 100000 → PrefLab's --initial-steps)
        "dqn": {
            "buffer_size": 100_000,
            "learning_rate": 1e-4,
            "batch_size": 32,
            "learning_starts": 0,
            "target_update_interval": 1000,
            "train_freq": 4,
            "gradient_steps": 1,
            "exploration_fraction": 0.1,
            "exploration_final_eps": 0.01,
        },
        "trpo": PRESETS["trpo"],
    },
    "grid": {
        # zoo ppo.yml MiniGrid-Empty-Random-5x5-v0 (&minigrid-defaults)
        "ppo": {
            "n_steps": 128,
            "batch_size": 64,
            "gae_lambda": 0.95,
            "gamma": 0.99,
            "n_epochs": 10,
            "ent_coef": 0.0,
            "learning_rate": 2.5e-4,
            "clip_range": 0.2,
        },
        "a2c": {},
        "trpo": PRESETS["trpo"],
        "dqn": PRESETS["dqn"],  # the zoo has no MiniGrid DQN: dqn.yml CartPole-v1
    },
    "other": PRESETS,
}
"""Presets per env family and algorithm (``other``: :data:`PRESETS`)."""

PRESET_SOURCES: dict[Family, str] = {
    "mujoco": "rl-baselines3-zoo hyperparams/{algo}.yml, MuJoCo (&mujoco-defaults) entries",
    "dmc": "the MuJoCo presets (rl-baselines3-zoo has no DeepMind Control entries)",
    "classic": "PrefLab's defaults (rl-baselines3-zoo dqn.yml CartPole-v1 for DQN)",
    "atari": "rl-baselines3-zoo hyperparams/{algo}.yml, atari entry",
    "grid": "rl-baselines3-zoo ppo.yml MiniGrid (&minigrid-defaults); dqn.yml CartPole-v1",
    "other": "PrefLab's defaults",
}
"""Where each family's values come from (written to ``hyperparams.json``)."""

IMITATION_PENDULUM_PPO: dict[str, Any] = {
    "clip_range": 0.1,
    "ent_coef": 0.01,
    "gae_lambda": 0.95,
    "n_epochs": 10,
    "gamma": 0.97,
    "learning_rate": 2e-3,
    "batch_size": 64,
}
"""imitation's documented Pendulum-v1 PPO settings (n_steps = 2048 // n_envs), for like-for-like runs."""


def env_family(env_id: str) -> Family:
    """The preset family of a gymnasium id: its env family's
    :attr:`~preflab.env_families.EnvFamily.preset` (``other`` for unknown ids and families
    without presets)."""
    from preflab.env_families import family_of

    name = family_of(env_id).preset
    return name if name in FAMILY_PRESETS else "other"


SAME_PRESET_AS = {"tqc": "sac"}
"""Learners that take another's preset: TQC has SAC's arguments (and drops 2 of 25 quantiles
per critic, its own default)."""


def family_preset(algo: str, family: Family) -> dict[str, Any]:
    """A copy of the table's entry for ``algo`` in ``family`` (falling back to :data:`PRESETS`)."""
    algo = SAME_PRESET_AS.get(algo, algo)
    table = FAMILY_PRESETS.get(family, PRESETS)
    return dict(table[algo] if algo in table else PRESETS.get(algo, {}))


def _closest_divisor(n: int, target: int) -> int:
    """The divisor of ``n`` closest to ``target`` on a log scale (the smaller one on a tie)."""
    divs = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    divs += [n // d for d in divs]
    return min(sorted(set(divs)), key=lambda d: abs(math.log(d / target)))


def preset(
    algo: str,
    n_envs: int,
    steps_per_round: int | None = None,
    *,
    overrides: Mapping[str, Any] | None = None,
    env_id: str | None = None,
) -> dict[str, Any]:
    """The SB3 constructor arguments of a run: the preset of ``env_id``'s family (PrefLab's
    defaults without an id) under ``overrides`` (the user's ``--agent-kwargs``).

    On-policy rollouts (n_steps per env) are ``ROLLOUT_CAP`` steps in all, or one feedback round
    when rounds are shorter, so that every round ends on a rollout boundary; a preset's PPO
    ``batch_size`` becomes the divisor of the rollout closest to it (no truncated mini-batch);
    a user's own ``batch_size`` is kept (:func:`check_rollout` refuses one that does not divide).
    DQN's ``train_freq`` (and ``gradient_steps`` in proportion) likewise divides a round."""
    user = dict(overrides or {})
    family: Family = env_family(env_id) if env_id else "other"
    p = family_preset(algo, family) | user
    if is_on_policy(algo) and "n_steps" in p:
        total = min(ROLLOUT_CAP, steps_per_round or ROLLOUT_CAP)
        p["n_steps"] = max(8, total // n_envs)
        rollout = p["n_steps"] * n_envs
        if "batch_size" in p:
            p["batch_size"] = min(p["batch_size"], rollout)
            if algo == "ppo" and "batch_size" not in user:
                p["batch_size"] = _closest_divisor(rollout, p["batch_size"])
    if algo == "dqn" and steps_per_round and "train_freq" not in user:
        per_env = max(1, steps_per_round // n_envs)
        freq = int(p.get("train_freq", 4))
        new = _closest_divisor(per_env, freq)
        if new != freq:
            p["train_freq"] = new
            grad = int(p.get("gradient_steps", 1))
            if grad > 0:
                p["gradient_steps"] = max(1, round(grad * new / freq))
    return p


def rollout_steps(algo: str, hyper: dict[str, Any], n_envs: int) -> int:
    """Env steps (all envs together) SB3 collects between two stops of ``learn``: a rollout for
    on-policy agents, ``train_freq`` steps per env for off-policy ones."""
    if is_on_policy(algo):
        return int(hyper.get("n_steps", 2048 if algo == "ppo" else 5)) * n_envs
    freq = hyper.get("train_freq", 1)
    if isinstance(freq, list | tuple):
        freq = freq[0] if len(freq) < 2 or freq[1] == "step" else 1
    return int(freq) * n_envs


def planned_env_steps(
    *, total_steps: int, initial_steps: int, steps_per_round: int, n_envs: int, unit: int
) -> int:
    """Env steps a run takes: SB3 collects ``unit`` steps at a time, so a round of K steps takes
    ⌈K / unit⌉ · unit of them (the loop's own accounting, round by round)."""
    steps = math.ceil(initial_steps / n_envs) * n_envs
    while steps < total_steps:
        n = min(steps_per_round, total_steps - steps)
        steps += math.ceil(n / unit) * unit
    return steps


def check_rollout(algo: str, hyper: dict[str, Any], user: Mapping[str, Any], n_envs: int) -> None:
    """Refuse a user's PPO ``batch_size`` that does not divide the rollout (SB3 would train on a
    truncated mini-batch every epoch and warn on every update)."""
    if algo != "ppo" or "batch_size" not in user:
        return
    rollout = int(hyper["n_steps"]) * n_envs
    batch = int(user["batch_size"])
    if rollout % batch:
        near = sorted({_closest_divisor(rollout, batch), _closest_divisor(rollout, 2 * batch)})
        raise ConfigError(
            f"--agent-kwargs batch_size={batch} does not divide PPO's rollout of {rollout:,} env "
            f"steps ({hyper['n_steps']} per env × {n_envs} env(s); a rollout is "
            f"--steps-per-round, at most {ROLLOUT_CAP:,}), so every epoch would end on a "
            f"truncated mini-batch. Use a batch_size that divides {rollout:,} (e.g. "
            f"{' or '.join(str(d) for d in near)}), or change --steps-per-round / --n-envs"
        )


def budget_note(
    algo: str,
    hyper: dict[str, Any],
    *,
    total_steps: int,
    initial_steps: int,
    steps_per_round: int,
    n_envs: int,
) -> str | None:
    """A sentence for the terminal when the run will take more env steps than ``total_steps``
    (SB3 collects whole rollouts / train_freq blocks), else None."""
    unit = rollout_steps(algo, hyper, n_envs)
    planned = planned_env_steps(
        total_steps=total_steps,
        initial_steps=initial_steps,
        steps_per_round=steps_per_round,
        n_envs=n_envs,
        unit=unit,
    )
    if planned == total_steps:
        return None
    per_env = unit // n_envs
    what = "steps per update" if is_on_policy(algo) else "steps between trainings"
    return (
        f"{algo.upper()} collects {n_envs} × {per_env} = {unit:,} {what}: the run will take "
        f"{planned:,} env steps, not --total-steps {total_steps:,} (make --steps-per-round and "
        f"--total-steps − --initial-steps multiples of {unit:,} to match)"
    )
