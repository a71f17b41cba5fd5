"""Queries about consecutive state pairs (paper 004 §4.3 step 1) for the one loop.

:class:`TransitionSelector` samples ``n_pairs`` random consecutive state pairs (s_{t−1}, s_t)
with :func:`preflab.llm.sample_transitions` (grid worlds: a random layout, stage and pose, then
one random action, so every stage of the task is covered; ``at_target`` puts a share of them
in front of the stage's key, door or goal), turns each state into a one-step
segment (:func:`preflab.llm.state_segments`) and asks them as pair queries a = s_{t−1},
b = s_t. The pairs are fixed up front, as in the paper: the first call makes all of them and
every call hands out the next ones not asked yet (a run with ``initial_label_frac=1`` asks them
all in round 0). Pairs whose two states are identical (e.g. turning into a wall with a
position-only observation) carry no ranking and are replaced by fresh samples. Query ids
derive from the two states' content ids, so the same seed gives the same queries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from preflab.errors import ConfigError
from preflab.kinds import PAIR
from preflab.llm.sampling import sample_transitions, state_segments
from preflab.records import Query, Segment
from preflab.reward.protocol import RewardModel


class TransitionSelector:
    """Selector (and :class:`preflab.sources.synthetic_queries.SegmentMaker`) of sampled state pairs."""

    def __init__(
        self,
        env_id: str,
        n_pairs: int,
        *,
        layout_seed: int | None = None,
        at_target: float = 0.0,
        max_tries: int = 20,
        seed: int | None = None,
    ) -> None:
        if n_pairs < 1:
            raise ConfigError(f"n_pairs must be ≥ 1, got {n_pairs}")
        if not 0.0 <= at_target <= 1.0:
            raise ConfigError(f"at_target is a share of the pairs in [0, 1], got {at_target}")
        self.env_id = env_id
        self.n_pairs = n_pairs
        self.layout_seed = layout_seed
        self.at_target = at_target
        """Share of pairs starting in front of their stage's target (grid worlds; see
        :func:`preflab.llm.sample_transitions`)."""
        self.max_tries = max_tries
        self.seed = seed
        """Draw the pairs from their own generator with this seed (the same pairs after a
        resume); None: from the RNG of the first :meth:`select` call."""
        self._queries: list[Query] = []
        self._segments: dict[str, Segment] = {}
        self._next = 0

    def _make(self, rng: np.random.Generator) -> None:
        seen: set[str] = set()
        for _ in range(self.max_tries):
            need = self.n_pairs - len(self._queries)
            if need <= 0:
                return
            before, after = sample_transitions(
                self.env_id, need, rng, layout_seed=self.layout_seed, at_target=self.at_target
            )
            sa = state_segments(before, self.env_id)
            sb = state_segments(after, self.env_id)
            for a, b in zip(sa, sb, strict=True):
                qid = f"q-{a.id[2:]}-{b.id[2:]}"
                if a.id == b.id or qid in seen:
                    continue
                seen.add(qid)
                self._segments[a.id] = a
                self._segments[b.id] = b
                self._queries.append(
                    Query(id=qid, kind=PAIR.name, a=(a.id,), b=(b.id,), meta={"transition": True})
                )
        if len(self._queries) < self.n_pairs:
            raise ConfigError(
                f"could sample only {len(self._queries)} distinct state pairs of {self.env_id} "
                f"(asked for {self.n_pairs}); ask for fewer pairs"
            )

    def select(
        self,
        candidates: Sequence[Segment],
        ensemble: RewardModel | None,
        n_queries: int,
        rng: np.random.Generator,
        *,
        round: int = 0,
    ) -> list[Query]:
        """The next ``n_queries`` pairs not asked yet (the candidates are not used)."""
        if not self._queries:
            self._make(rng if self.seed is None else np.random.default_rng(self.seed))
        out = self._queries[self._next : self._next + max(0, n_queries)]
        self._next += len(out)
        return [Query(id=q.id, kind=PAIR.name, a=q.a, b=q.b, round=round, meta=q.meta) for q in out]

    def state(self) -> dict[str, int]:
        """How many pairs were handed out (JSON; the pairs themselves come from ``seed``)."""
        return {"next": self._next}

    def load_state(self, state: Mapping[str, int]) -> None:
        self._next = int(state["next"])

    def made_segments(self) -> Mapping[str, Segment]:
        """The one-state segments of every sampled pair, by id."""
        return self._segments
