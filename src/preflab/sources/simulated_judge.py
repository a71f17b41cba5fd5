"""A simulated AI judge: a stand-in for a vision-language or text judge, with a stated error model.

A real AI judge is wrong more often on behaviours that look alike. This judge answers a pair
query from the segments' true returns R(a), R(b) and then flips its answer with a probability
that rises as the pair gets harder:

- d = |R(a) − R(b)|, and r ∈ (0, 1) its mid-rank among the differences of the last ``window``
  pairs the judge was asked (the current batch included): r = (#{d' < d} + ½·#{d' = d}) / n.
- ``concentration = "similar"``: flip probability ε(d) = 2 ε̄ (1 − r): the most similar pair of
  the window flips with probability ≈ 2 ε̄ (0.5 at ε̄ = 0.25: a coin), the most different almost
  never. Mid-ranks average ½, so over the window the mean flip probability is exactly ε̄
  (``flip_rate``). ``concentration = "uniform"``: ε(d) = ε̄ for every pair.
- Equal returns (d = 0 between two identical returns): the true answer is a tie; the judge
  picks a side by a coin (it never answers "equal").

**Confidence** (what a router thresholds): like a language model asked ``samples`` times, the
judge draws that many independent answers, each correct with probability 1 − ε(d); its answer is
the first, and its confidence is the share of the samples that agree with it (1/``samples`` to
1). A wrong answer on an easy pair therefore tends to come with low agreement, as a real
judge's self-consistency does. The judgement's ``meta`` keeps ``confidence``, ``flip_prob``,
``flipped`` and the samples; a :class:`preflab.sources.routing.RoutingSource` reads
``confidence``.

Only queries of one behaviour against one other (``kind.as_pair``) are answered; any other
kind is a clear error. Everything is drawn from the judge's own generator (``state()`` saves it
with the window of differences), so a resumed run answers exactly as the uninterrupted one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from preflab.errors import ConfigError, DataError
from preflab.kinds import kind_of
from preflab.kinds.registry import pair_of
from preflab.records import Judgement, Query, Segment, new_id, now
from preflab.sources.immediate import PendingJudgements


@dataclass(frozen=True, kw_only=True)
class SimulatedJudgeConfig:
    """The simulated AI judge's error model (module docstring)."""

    flip_rate: float = 0.25
    """ε̄: the mean probability that an answer is flipped (wrong), over the window of pairs."""
    concentration: Literal["similar", "uniform"] = "similar"
    """'similar': flips concentrated on pairs with close true returns, ε(d) = 2 ε̄ (1 − r);
    'uniform': every answer flipped with probability ε̄."""
    samples: int = 5
    """Independent answers drawn per pair; the confidence is the share agreeing with the first."""
    window: int = 200
    """How many recent pairs' return differences the rank r of a difference is taken among."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.flip_rate <= 0.5:
            raise ConfigError(
                f"the simulated judge's flip_rate must be in [0, 0.5] (0.25: a quarter of its "
                f"answers wrong), got {self.flip_rate}"
            )
        if self.concentration not in ("similar", "uniform"):
            raise ConfigError(
                f"the simulated judge's concentration must be 'similar' or 'uniform', got "
                f"{self.concentration!r}"
            )
        if self.samples < 1:
            raise ConfigError(f"the simulated judge's samples must be ≥ 1, got {self.samples}")
        if self.window < 1:
            raise ConfigError(f"the simulated judge's window must be ≥ 1, got {self.window}")


def mid_ranks(values: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Each value's mid-rank share among ``reference``: (#{ref < v} + ½ #{ref = v}) / len(ref)."""
    ref = np.sort(np.asarray(reference, np.float64))
    v = np.asarray(values, np.float64)
    below = np.searchsorted(ref, v, side="left")
    upto = np.searchsorted(ref, v, side="right")
    return (below + 0.5 * (upto - below)) / len(ref)


class SimulatedJudge:
    """A FeedbackSource answering pair queries at once, wrong as the module docstring states."""

    persists = False
    """Judgements are only in memory until the loop (or a router) stores them."""

    def __init__(
        self,
        config: SimulatedJudgeConfig | None = None,
        rng: np.random.Generator | None = None,
        *,
        annotator_id: str = "simulated-judge",
    ) -> None:
        self.config = config or SimulatedJudgeConfig()
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self.annotator_id = annotator_id
        self._recent: deque[float] = deque(maxlen=self.config.window)
        self._pending = PendingJudgements("simulated_judge")
        self.answered = 0
        """Pairs answered so far."""
        self.wrong = 0
        """Of those, answered against the true returns (ties excluded: no side is wrong)."""

    def flip_probs(self, diffs: np.ndarray) -> np.ndarray:
        """ε(d) of each |R(a) − R(b)| in ``diffs`` (added to the window first)."""
        self._recent.extend(float(d) for d in diffs)
        eps = self.config.flip_rate
        if self.config.concentration == "uniform":
            return np.full(len(diffs), eps)
        r = mid_ranks(diffs, np.asarray(self._recent))
        return 2.0 * eps * (1.0 - r)

    @property
    def true_accuracy(self) -> float | None:
        """Share of its answers that agree with the true returns (None before any)."""
        return None if self.answered == 0 else 1.0 - self.wrong / self.answered

    def submit(self, queries: Sequence[Query], segments: Mapping[str, Segment]) -> None:
        if not queries:
            return
        pairs = [pair_of(q, "the simulated AI judge") for q in queries]
        for q in queries:
            kind_of(q)  # a query of an unknown kind is refused before anything is drawn
        missing = sorted({s for ab in pairs for s in ab if s not in segments})
        if missing:
            raise DataError(f"the simulated judge was not given segment(s) {missing[:3]}")
        ra = np.array([segments[a].true_return for a, _ in pairs])
        rb = np.array([segments[b].true_return for _, b in pairs])
        eps = self.flip_probs(np.abs(ra - rb))
        k = self.config.samples
        for q, x, y, e in zip(queries, ra, rb, eps, strict=True):
            t0 = now()
            truth = 1.0 if x > y else 0.0 if y > x else float(self.rng.random() < 0.5)
            correct = self.rng.random(k) >= e  # each sample right with probability 1 − ε(d)
            said = np.where(correct, truth, 1.0 - truth)
            answer = float(said[0])
            confidence = float(np.mean(said == answer))
            tie = x == y
            self.answered += 1
            self.wrong += int(not tie and answer != truth)
            self._pending.add(
                Judgement(
                    id=new_id("j"),
                    query_id=q.id,
                    annotator_id=self.annotator_id,
                    source="synthetic",
                    p=answer,
                    created_at=t0,
                    response_time_s=0.0,
                    meta={
                        "confidence": confidence,
                        "flip_prob": float(e),
                        "flipped": bool(not tie and answer != truth),
                        "samples": [float(s) for s in said],
                        "judge": "simulated",
                    },
                )
            )

    def collect(self) -> list[Judgement]:
        return self._pending.collect()

    def state(self) -> dict[str, Any]:
        """Generator, window of differences, counts and uncollected judgements (JSON)."""
        return self._pending.state(
            self.rng,
            recent=list(self._recent),
            answered=self.answered,
            wrong=self.wrong,
        )

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Continue from :meth:`state` (of a judge built with the same config)."""
        self._pending.load_state(state, self.rng, ("recent", "answered", "wrong"))
        self._recent = deque((float(d) for d in state["recent"]), maxlen=self.config.window)
        self.answered = int(state["answered"])
        self.wrong = int(state["wrong"])
