"""Rollouts into segments: the agent (or random actions) steps the run's envs, the recorder cuts
what happened into segments, and the newest of them form the run's segment pool, from which
queries are asked (:class:`Rollouts`)."""

from __future__ import annotations

import math
from collections import deque
from typing import Any

import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm

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
        agents keep them in their buffer. The episodes they finish join the agent's record of
        finished episodes (:func:`record_episodes`), as B-Pref counts its seed steps' episodes."""
        venv, agent = self.parts.venv, self.parts.agent
        obs = venv.reset()
        space = venv.action_space
        off = agent if is_off_policy(agent) else None  # the agent, when off-policy
        for _ in range(math.ceil(n_steps / venv.num_envs)):
            acts = np.stack([sample_action(space, self.parts.rng) for _ in range(venv.num_envs)])
            nxt, rew, dones, infos = venv.step(acts)
            assert isinstance(nxt, np.ndarray)  # the learned-reward env's observations are arrays
            record_episodes(agent, infos, dones)
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
        first reward fit (:class:`preflab.loop.fitting.RewardFit`). With RIME's warm start the
        reward is RIME's centred one (and the critic is kept)."""
        rime = bool(self.config.fit.rime.warm_start_steps)
        with state_entropy_rewards(self.parts.agent, centred=rime):
            self.train_agent(n_steps)

    def train_agent(self, n_steps: int) -> None:
        """``n_steps`` of the agent's own training on the policy reward; its segments join the
        pool."""
        agent = self.parts.agent
        first = agent._last_obs is None  # first call (or an inexact resume): reset the envs
        before = _episode_record(agent)
        agent.learn(
            total_timesteps=n_steps,
            reset_num_timesteps=first,
            progress_bar=False,
            callback=self.parts.callback,
        )
        if first:  # SB3 emptied its record of finished episodes: those before it still count
            _keep_earlier_episodes(agent, *before)
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


def record_episodes(agent: BaseAlgorithm, infos: list[dict[str, Any]], dones: np.ndarray) -> None:
    """The episodes that ended at a step the agent did not take (random actions) join its
    record of finished episodes as ``learn`` records its own: SB3's ``ep_info_buffer`` (the
    Monitor's ``info['episode']``, whose ``r`` is the true return under the learned reward) and
    ``ep_success_buffer``, which B-Pref's margin and ``train_true_return`` read and the agent's
    checkpoint holds."""
    if agent.ep_info_buffer is None or agent.ep_success_buffer is None:  # before any learn()
        agent.ep_info_buffer = deque(maxlen=agent._stats_window_size)
        agent.ep_success_buffer = deque(maxlen=agent._stats_window_size)
    agent._update_info_buffer(infos, dones)


def _episode_record(agent: BaseAlgorithm) -> tuple[list[Any], list[Any]]:
    """The agent's finished episodes and successes so far (oldest first)."""
    return list(agent.ep_info_buffer or []), list(agent.ep_success_buffer or [])


def _keep_earlier_episodes(agent: BaseAlgorithm, infos: list[Any], successes: list[Any]) -> None:
    """After a ``learn`` that reset the step counters (and so emptied the record of finished
    episodes): the episodes recorded before it go back in front of those it finished, in the
    order they ended (B-Pref's last ten episodes do not start again when training does)."""
    n = agent._stats_window_size
    agent.ep_info_buffer = deque([*infos, *(agent.ep_info_buffer or [])], maxlen=n)
    agent.ep_success_buffer = deque([*successes, *(agent.ep_success_buffer or [])], maxlen=n)
