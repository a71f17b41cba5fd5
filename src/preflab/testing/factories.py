"""Small builders of records for tests and benchmark smoke tests.

Every builder is deterministic: arrays it invents are zeros, or draws from the
``np.random.Generator`` the caller passes (in a documented order, so a test that needs particular
values can rely on them). Pass an array explicitly whenever a test depends on its values.

- :func:`make_segment`: one segment from the arrays you give; what you leave out is zeros.
- :func:`random_segment`: one segment whose observations (and, by default, actions and true
  rewards) are standard-normal draws from ``rng``.
- :func:`make_segments`: ``n`` of those, drawn one after another from one ``rng``.
- :func:`make_query`, :func:`make_judgement`: a query and a judgement with fixed ids.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from preflab.errors import DataError
from preflab.kinds import GROUP, PAIR, check_query
from preflab.records import Judgement, Query, Segment, SourceKind

DEFAULT_LENGTH = 4
"""Steps T of a segment when neither arrays nor ``length`` say otherwise."""


def make_segment(
    id: str | None = None,
    *,
    obs: ArrayLike | None = None,
    acts: ArrayLike | None = None,
    true_rewards: ArrayLike | None = None,
    length: int | None = None,
    obs_dim: int = 3,
    act_dim: int = 1,
    env_id: str = "",
    episode: int = -1,
    start: int = 0,
    round: int = 0,
    states: np.ndarray | None = None,
) -> Segment:
    """A segment from the arrays given; the ones left out are zeros.

    The length T is taken from ``obs``, else ``acts``, else ``true_rewards``, else ``length``
    (:data:`DEFAULT_LENGTH` when that is None too). Missing observations are zeros of shape
    (T, ``obs_dim``), missing actions zeros of shape (T, ``act_dim``), missing true rewards zeros
    of shape (T,). Without an ``id`` the segment gets its content id
    (:meth:`Segment.content_id` of its observations and actions).
    """
    given = next((np.asarray(x) for x in (obs, acts, true_rewards) if x is not None), None)
    t = int(given.shape[0]) if given is not None else (DEFAULT_LENGTH if length is None else length)
    o = np.zeros((t, obs_dim), np.float32) if obs is None else np.asarray(obs)
    a = np.zeros((t, act_dim), np.float32) if acts is None else np.asarray(acts)
    r = np.zeros(t, np.float32) if true_rewards is None else np.asarray(true_rewards)
    return Segment(
        id=Segment.content_id(o, a) if id is None else id,
        obs=o,
        acts=a,
        true_rewards=r,
        env_id=env_id,
        episode=episode,
        start=start,
        round=round,
        states=states,
    )


def random_segment(
    rng: np.random.Generator,
    *,
    id: str | None = None,
    length: int = 5,
    obs_dim: int = 2,
    act_dim: int = 1,
    random_acts: bool = True,
    random_rewards: bool = True,
    env_id: str = "",
    episode: int = -1,
    start: int = 0,
    round: int = 0,
) -> Segment:
    """A segment of standard-normal draws from ``rng``, in this order:

    observations (``length``, ``obs_dim``); then actions (``length``, ``act_dim``) if
    ``random_acts`` (else zeros); then true rewards (``length``,) if ``random_rewards`` (else
    zeros). Without an ``id`` the segment gets its content id.
    """
    obs = rng.normal(size=(length, obs_dim))
    acts = rng.normal(size=(length, act_dim)) if random_acts else np.zeros((length, act_dim))
    rewards = rng.normal(size=length) if random_rewards else np.zeros(length)
    return make_segment(
        id,
        obs=obs,
        acts=acts,
        true_rewards=rewards,
        env_id=env_id,
        episode=episode,
        start=start,
        round=round,
    )


def make_segments(
    n: int,
    *,
    rng: np.random.Generator,
    length: int = 5,
    obs_dim: int = 2,
    act_dim: int = 1,
    random_acts: bool = True,
    random_rewards: bool = True,
    id_prefix: str | None = None,
    env_id: str = "",
    episode: int | Sequence[int] = -1,
    start: int = 0,
    round: int | Sequence[int] = 0,
) -> list[Segment]:
    """``n`` segments made by :func:`random_segment`, drawn one after another from ``rng``.

    Ids are content ids, or ``f"{id_prefix}{i}"`` for i = 0 … n − 1 when ``id_prefix`` is given.
    ``episode`` and ``round`` are one value for all segments or one value per segment (e.g.
    ``episode=range(n)``).
    """
    episodes = _per_segment("episode", episode, n)
    rounds = _per_segment("round", round, n)
    return [
        random_segment(
            rng,
            id=None if id_prefix is None else f"{id_prefix}{i}",
            length=length,
            obs_dim=obs_dim,
            act_dim=act_dim,
            random_acts=random_acts,
            random_rewards=random_rewards,
            env_id=env_id,
            episode=episodes[i],
            start=start,
            round=rounds[i],
        )
        for i in range(n)
    ]


def make_query(
    id: str,
    a: str | Sequence[str] = "a",
    b: str | Sequence[str] = "b",
    *,
    kind: str | None = None,
    round: int = 0,
    meta: Mapping[str, Any] | None = None,
) -> Query:
    """A query with a fixed id, its shape checked by its kind: a pair of two segment ids, or
    groups when a side is a sequence.

    ``kind`` defaults to the pair kind when both sides are single ids and to the group kind
    otherwise; pass ``kind="rating"`` with ``b=()`` for a rating stream, ``kind="ranking"``
    with the clips in ``a`` and ``b=()`` for a ranking.
    """
    side_a = (a,) if isinstance(a, str) else tuple(a)
    side_b = (b,) if isinstance(b, str) else tuple(b)
    if kind is None:
        kind = PAIR.name if isinstance(a, str) and isinstance(b, str) else GROUP.name
    return check_query(
        Query(id=id, kind=kind, a=side_a, b=side_b, round=round, meta=dict(meta or {}))
    )


def make_judgement(
    id: str,
    query_id: str,
    annotator_id: str,
    p: float | None,
    *,
    source: SourceKind = "human",
    created_at: float = 0.0,
    response_time_s: float | None = None,
    meta: Mapping[str, Any] | None = None,
) -> Judgement:
    """A judgement with a fixed id and time (``created_at`` = 0 unless given)."""
    return Judgement(
        id=id,
        query_id=query_id,
        annotator_id=annotator_id,
        source=source,
        p=p,
        created_at=created_at,
        response_time_s=response_time_s,
        meta=dict(meta or {}),
    )


def _per_segment(name: str, value: int | Sequence[int], n: int) -> list[int]:
    if isinstance(value, int):
        return [value] * n
    values = [int(v) for v in value]
    if len(values) != n:
        raise DataError(f"{name} has {len(values)} values for {n} segments; give one per segment")
    return values
