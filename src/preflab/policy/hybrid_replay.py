"""QPA's hybrid experience replay (Hu et al., ICLR 2024) as an SB3 replay buffer.

QPA trains the critic and actor of SAC on batches of which a share ω (``her_ratio = 0.5`` in the
authors' ``run_QPA.sh``) is drawn uniformly from the newest transitions, the last N episodes'
worth (N × the episode limit: ``replay_buffer.sample_onpolicy``, N = 10), and the rest uniformly
from the whole buffer (``agent/sac.py``, ``update_onpolicy_sample``). Their training loop does
so from the first feedback session on while labels are still being asked, and samples plain
uniform batches before it (PEBBLE's unsupervised pre-training) and once the label budget is spent
(``train_QPA.py``: ``if total_feedback < max_feedback``). The loop says how many labels it has
asked after every ask (:func:`note_labels_asked`); the buffer follows.

:class:`HybridReplayBuffer` is SB3's :class:`~stable_baselines3.common.buffers.ReplayBuffer`
with that ``sample``; it plugs into any off-policy agent of SB3 or SBX through the
``replay_buffer_class`` argument, so the agents' training loops are unchanged. SBX draws one
sample for all of a call's gradient steps and cuts it into batches; the recent and uniform rows
are therefore interleaved by a fixed pattern (:func:`recent_slots`), which gives every
contiguous batch of B rows exactly ⌊B·ω⌋ recent ones whenever B·ω is a whole number.

Its row draws come from its own generator (seeded from the run's seed), whose state and the
on/off switch go into every checkpoint (:meth:`HybridReplayBuffer.sampler_state`), so a resumed
run draws the same batches. Which env's column a row is read from stays SB3's draw (numpy's
global generator, which checkpoints also hold).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.type_aliases import ReplayBufferSamples
from stable_baselines3.common.vec_env import VecNormalize

from preflab.errors import ConfigError
from preflab.policy.replay_config import QPA_RECENT_RATIO, ReplayConfig

_SEED_SALT = 0x51A
"""Mixed into the run's seed for the buffer's generator (its own stream, not the run's)."""


def recent_slots(n: int, ratio: float) -> np.ndarray:
    """Which of ``n`` batch positions hold recent rows: position k does when
    ⌊(k+1)·ω⌋ > ⌊k·ω⌋ (ω as a fraction of small integers), so any B consecutive positions hold
    ⌊B·ω⌋ or ⌈B·ω⌉ of them, and exactly B·ω when that is whole; n positions hold ⌊n·ω⌋."""
    frac = Fraction(ratio).limit_denominator(10_000)
    k = np.arange(n + 1, dtype=np.int64)
    counts = (k * frac.numerator) // frac.denominator
    return np.asarray(np.diff(counts) > 0)


def hybrid_rows(
    rng: np.random.Generator,
    n: int,
    *,
    pos: int,
    full: bool,
    buffer_size: int,
    window: int,
    ratio: float,
) -> np.ndarray:
    """``n`` buffer rows: those at :func:`recent_slots` uniform over the last ``window`` rows
    written (at most every filled row), the others uniform over every filled row."""
    filled = buffer_size if full else pos
    if filled < 1:
        raise ValueError("cannot sample from an empty replay buffer")
    w = max(1, min(window, filled))
    rows = rng.integers(0, filled, size=n)
    recent = (pos - 1 - rng.integers(0, w, size=n)) % buffer_size
    slots = recent_slots(n, ratio)
    rows[slots] = recent[slots]
    return np.asarray(rows, np.int64)


class HybridReplayBuffer(ReplayBuffer):
    """SB3's replay buffer with QPA's hybrid ``sample`` (see the module docstring).

    ``recent_rows``: rows of the recent window (transitions ÷ envs); ``recent_ratio``: ω;
    ``seed``: seeds the buffer's own generator; ``until_labels_spent``: uniform batches once
    :func:`note_labels_asked` says the label budget is spent; ``active``: hybrid batches from
    the start (the loop's buffer starts inactive and follows :func:`note_labels_asked`)."""

    def __init__(
        self,
        buffer_size: int,
        observation_space: Any,
        action_space: Any,
        device: Any = "auto",
        n_envs: int = 1,
        optimize_memory_usage: bool = False,
        handle_timeout_termination: bool = True,
        *,
        recent_rows: int,
        recent_ratio: float = QPA_RECENT_RATIO,
        seed: int = 0,
        until_labels_spent: bool = True,
        active: bool = True,
    ) -> None:
        if optimize_memory_usage:
            raise ConfigError(
                "hybrid replay (--replay.hybrid) keeps next observations apart; set "
                'optimize_memory_usage to false in --agent-kwargs (e.g. \'{"optimize_memory_usage": '
                "false}') or turn hybrid replay off"
            )
        super().__init__(
            buffer_size,
            observation_space,
            action_space,
            device=device,
            n_envs=n_envs,
            optimize_memory_usage=False,
            handle_timeout_termination=handle_timeout_termination,
        )
        if recent_rows < 1:
            raise ConfigError(f"the recent window must hold ≥ 1 row, got {recent_rows}")
        self.recent_rows = int(recent_rows)
        self.recent_ratio = float(recent_ratio)
        self.until_labels_spent = bool(until_labels_spent)
        self.active = bool(active)
        """Hybrid batches now (else uniform): in a run, from the first ask until the label
        budget is spent (:func:`note_labels_asked`)."""
        self.rng = np.random.default_rng([int(seed), _SEED_SALT])

    def sample(self, batch_size: int, env: VecNormalize | None = None) -> ReplayBufferSamples:
        """``batch_size`` transitions: hybrid while :attr:`active`, else uniform; rows from the
        buffer's own generator."""
        rows = hybrid_rows(
            self.rng,
            batch_size,
            pos=self.pos,
            full=self.full,
            buffer_size=self.buffer_size,
            window=self.recent_rows,
            ratio=self.recent_ratio if self.active else 0.0,
        )
        return self._get_samples(rows, env=env)

    def sampler_state(self) -> dict[str, Any]:
        """What a checkpoint keeps of the sampler: its generator's state and the switch."""
        return {"bit_generator": self.rng.bit_generator.state, "active": self.active}

    def load_sampler_state(self, state: dict[str, Any]) -> None:
        """Back to :meth:`sampler_state`."""
        self.rng.bit_generator.state = state["bit_generator"]
        self.active = bool(state["active"])


def hybrid_buffer_kwargs(
    config: ReplayConfig, *, horizon: int, n_envs: int, seed: int
) -> dict[str, Any]:
    """The SB3 constructor arguments that give an off-policy agent QPA's hybrid replay:
    ``replay_buffer_class`` and ``replay_buffer_kwargs``, the window N × ``horizon``
    transitions over ``n_envs`` envs."""
    rows = math.ceil(config.recent_episodes * horizon / max(1, n_envs))
    return {
        "replay_buffer_class": HybridReplayBuffer,
        "replay_buffer_kwargs": {
            "recent_rows": rows,
            "recent_ratio": config.recent_ratio,
            "seed": seed,
            "until_labels_spent": config.until_labels_spent,
            "active": False,  # uniform until the loop asks its first labels
        },
    }


def note_labels_asked(agent: BaseAlgorithm, *, asked: int, budget: int) -> None:
    """The loop's hook after every ask, with the labels asked so far and the budget: a hybrid
    buffer samples hybrid batches once a label has been asked, and uniform ones again once the
    budget is spent (with ``until_labels_spent``), as QPA does. Any other agent: nothing."""
    buf = getattr(agent, "replay_buffer", None)
    if isinstance(buf, HybridReplayBuffer):
        buf.active = asked > 0 and (asked < budget or not buf.until_labels_spent)
