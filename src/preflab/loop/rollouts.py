"""Rollouts into segments: the agent (or random actions) steps the run's envs, the recorder cuts
what happened into segments, and the newest of them form the run's segment pool, from which
queries are asked (:class:`Rollouts`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from preflab.config import TrainConfig
from preflab.loop.results import RunParts
from preflab.policy.agents import is_off_policy
from preflab.policy.exploration import state_entropy_rewards
from preflab.policy.rollout import sample_action
from preflab.records import Segment

POOL_KEEP_FACTOR, POOL_KEEP_MIN = 4, 1000
"""Segments kept in the pool: the newest max(pool_size × factor, minimum); queries are drawn
from the newest ``pool_size`` of them."""


class Rollouts:
    """Owns the segment pool (and which of its segments the array store holds); steps the envs
    with random actions, PEBBLE's unsupervised pre-training, or the agent's own training."""

    def __init__(self, config: TrainConfig, parts: RunParts) -> None:
        self.config = config
        self.parts = parts
        self.pool: list[Segment] = []
        """The newest segments recorded, oldest first."""
        self._stored: set[str] = set()
        """Pool segment ids already in the array store (checkpoints write only the new ones)."""

    def candidates(self) -> list[Segment]:
        """The most recent ``pool_size`` segments: what queries are asked about."""
        return self.pool[-self.config.pool_size :]

    def random_steps(self, n_steps: int) -> None:
        """Random actions through the recorder (drawn from the loop's generator); off-policy
        agents keep them in their buffer."""
        venv, agent = self.parts.venv, self.parts.agent
        obs = venv.reset()
        space = venv.action_space
        off = agent if is_off_policy(agent) else None  # the agent, when off-policy
        for _ in range(math.ceil(n_steps / venv.num_envs)):
            acts = np.stack([sample_action(space, self.parts.rng) for _ in range(venv.num_envs)])
            nxt, rew, dones, infos = venv.step(acts)
            assert isinstance(nxt, np.ndarray)  # the learned-reward env's observations are arrays
            if off is not None:
                buf_act = (
                    off.policy.scale_action(acts)
                    if hasattr(off.policy, "scale_action") and space.__class__.__name__ == "Box"
                    else acts
                )
                real_next = nxt.copy()
                for i in np.flatnonzero(dones):
                    if infos[i].get("terminal_observation") is not None:
                        real_next[i] = infos[i]["terminal_observation"]
                assert off.replay_buffer is not None  # made with the agent (SB3's setup_model)
                off.replay_buffer.add(obs, real_next, buf_act, rew, dones, infos)
            obs = nxt
        self.pool.extend(self.parts.recorder.pop_segments())

    def pretrain(self, n_steps: int) -> None:
        """PEBBLE's unsupervised pre-training: ``n_steps`` of the agent trained on the k-NN
        state-entropy reward (:mod:`preflab.policy.exploration`); the critic is reset at the
        first reward fit (:class:`preflab.loop.fitting.RewardFit`)."""
        with state_entropy_rewards(self.parts.agent):
            self.train_agent(n_steps)

    def train_agent(self, n_steps: int) -> None:
        """``n_steps`` of the agent's own training on the policy reward; its segments join the
        pool."""
        agent = self.parts.agent
        first = agent._last_obs is None  # first call (or an inexact resume): reset the envs
        agent.learn(
            total_timesteps=n_steps,
            reset_num_timesteps=first,
            progress_bar=False,
            callback=self.parts.callback,
        )
        self.take_segments()

    def take_segments(self) -> None:
        """The segments the recorder cut since the last call join the pool (the newest kept)."""
        self.pool.extend(self.parts.recorder.pop_segments())
        self.pool = self.pool[-max(self.config.pool_size * POOL_KEEP_FACTOR, POOL_KEEP_MIN) :]

    def state(self) -> list[dict[str, Any]]:
        """Its share of the loop's checkpoint state: each pool segment's fields but its arrays,
        which go to the array store by content id (only those not written yet)."""
        for s in self.pool:  # pool segments not asked about yet: arrays only, by content id
            if s.id not in self._stored:
                self.parts.store.arrays.write(s)
        self._stored = {s.id for s in self.pool}
        return [
            {
                "id": s.id,
                "env_id": s.env_id,
                "episode": s.episode,
                "start": s.start,
                "round": s.round,
            }
            for s in self.pool
        ]

    def load_state(self, pool: list[dict[str, Any]]) -> None:
        """Back to :meth:`state`: the pool's segments, their arrays read from the store."""
        self.pool = [self._stored_segment(meta) for meta in pool]
        self._stored = {s.id for s in self.pool}

    def _stored_segment(self, meta: dict[str, Any]) -> Segment:
        """A pool segment of a checkpoint: its saved fields and its arrays from the store."""
        arrays: dict[str, Any] = self.parts.store.arrays.read(meta["id"])
        return Segment(**meta, **arrays)
