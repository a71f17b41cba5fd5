"""Segments the vision-language judge's tests render: image segments of a chosen brightness
(shown from their own pixels) and Pendulum segments (replayed from simulator states)."""

from __future__ import annotations

import numpy as np

from preflab.kinds import PAIR
from preflab.records import Query, Segment


def image_segment(
    level: int, rng: np.random.Generator, *, steps: int = 6, side: int = 16
) -> Segment:
    """An RGB image segment (T, 3, side, side) of about ``level`` brightness (± 3 noise)."""
    noise = rng.integers(-3, 4, size=(steps, 3, side, side))
    obs = np.clip(level + noise, 0, 255).astype(np.uint8)
    acts = np.zeros((steps, 1), np.float32)
    return Segment(
        id=Segment.content_id(obs, acts),
        obs=obs,
        acts=acts,
        true_rewards=np.full(steps, level / 255.0, np.float32),
        env_id="",
    )


def pendulum_segment(theta: float, *, steps: int = 5) -> Segment:
    """A Pendulum-v1 segment held at angle ``theta`` (0 = upright), with simulator states."""
    th = np.full(steps, theta)
    states = np.stack([th, np.zeros(steps)], axis=1)
    obs = np.stack([np.cos(th), np.sin(th), np.zeros(steps)], axis=1).astype(np.float32)
    acts = np.zeros((steps, 1), np.float32)
    reward = -(((theta + np.pi) % (2 * np.pi) - np.pi) ** 2)
    return Segment(
        id=Segment.content_id(obs, acts),
        obs=obs,
        acts=acts,
        true_rewards=np.full(steps, reward, np.float32),
        env_id="Pendulum-v1",
        states=states,
    )


def pairs(segments: list[tuple[Segment, Segment]]) -> tuple[list[Query], dict[str, Segment]]:
    """Pair queries of (a, b) and the segments by id."""
    queries = [PAIR.query(a.id, b.id) for a, b in segments]
    by_id = {s.id: s for ab in segments for s in ab}
    return queries, by_id
