"""Aggregators that cap or reshape another aggregator's labels (Pref-GUIDE's set-up).

* :class:`SampledWindows` — Algorithm 1 with at most ``max_labels`` labels, drawn before any
  Label is built (a long rating stream gives millions of window pairs; a fit uses far fewer);
* :class:`CappedLabels` — at most ``max_labels`` of any aggregator's labels;
* :class:`BinaryVoting` — the binary-majority baseline of Algorithm 2's votes;
* :class:`NoLabels` — no labels at all (a run that keeps a fixed reward model).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from preflab.aggregate.protocol import Aggregator, Feedback
from preflab.aggregate.scalar import VotingAggregator, item_values
from preflab.kinds.rating_windows import DEFAULT_DELTA, binary_majority, capped_draw, window_labels
from preflab.records import Label


@dataclass(frozen=True, kw_only=True)
class BinaryVoting:
    """The binary-majority baseline: Algorithm 2's votes, label = 1 / 0 by majority (0.5 tie)."""

    voting: VotingAggregator
    """The voting aggregator whose mean votes are rounded."""
    name: str = "majority"
    """Aggregator name."""

    def labels(self, feedback: Feedback) -> list[Label]:
        out = self.voting.labels(feedback)
        if not out:
            return out
        p = binary_majority(np.array([lab.p for lab in out]))
        return [replace(lab, p=float(x)) for lab, x in zip(out, p, strict=True)]


@dataclass(frozen=True, kw_only=True)
class CappedLabels:
    """At most ``max_labels`` of another aggregator's labels, drawn uniformly without
    replacement (deterministic: seeded by ``seed`` and the number of labels)."""

    inner: Aggregator
    """The aggregator whose labels are capped."""
    max_labels: int
    """Cap on labels per call."""
    seed: int = 0
    """Seed of the draw."""

    @property
    def name(self) -> str:
        return self.inner.name

    def labels(self, feedback: Feedback) -> list[Label]:
        out = self.inner.labels(feedback)
        keep = capped_draw(len(out), self.max_labels, np.random.default_rng([self.seed, len(out)]))
        return out if keep is None else [out[i] for i in keep]


@dataclass(frozen=True, kw_only=True)
class SampledWindows:
    """Algorithm 1 (:class:`preflab.aggregate.WindowAggregator`) with at most ``max_labels``
    labels, drawn uniformly without replacement before any Label is built: a long live phase
    gives (N − n + 1)·C(n, 2) pairs per stream and evaluator, millions of labels, while a fit
    uses ``max_pairs`` of them. Below the cap the labels are WindowAggregator's, in its order."""

    window: int = 10
    """Window n (items)."""
    delta: float = DEFAULT_DELTA
    """No-preference range δ in rating units."""
    annotators: tuple[str, ...] | None = None
    """Only these annotators' ratings (None: everyone's)."""
    max_labels: int = 40_000
    """Cap on labels per call."""
    seed: int = 0
    """Seed of the draw (with the number of labels: deterministic)."""
    short_streams: bool = False
    """Label a stream with fewer rated items than ``window`` (but at least 2) as one window of
    all of them (people rate whole episodes, which early in a run are short); False: such a
    stream gives no labels, as in the paper."""
    name: str = "window"
    """Aggregator name."""

    def labels(self, feedback: Feedback) -> list[Label]:
        streams = item_values(feedback, self.annotators)
        parts = []
        for k, iv in enumerate(streams):
            window = self.window
            if self.short_streams and 2 <= len(iv.values) < window:
                window = len(iv.values)
            lab = window_labels(iv.values, window=window, delta=self.delta)
            pairs = iv.rated[lab.pairs] if len(lab) else np.zeros((0, 2), np.int64)
            items = np.asarray(iv.items)
            keep = items[pairs[:, 0]] != items[pairs[:, 1]]
            n = int(keep.sum())
            parts.append(np.column_stack([np.full(n, k), pairs[keep], lab.p[keep]]))
        if not parts:
            return []
        rows = np.concatenate(parts)
        keep = capped_draw(
            len(rows), self.max_labels, np.random.default_rng([self.seed, len(rows)])
        )
        if keep is not None:
            rows = rows[keep]
        return [
            Label(
                a=streams[int(k)].items[int(i)],
                b=streams[int(k)].items[int(j)],
                p=float(p),
                judgement_ids=(streams[int(k)].provenance,),
            )
            for k, i, j, p in rows.tolist()
        ]


@dataclass(frozen=True, kw_only=True)
class NoLabels:
    """An aggregator that makes no labels: the loop never refits its reward model (the human
    phase of a per-evaluator run, and the post-human phase on a fixed reward model)."""

    name: str = "none"
    """Aggregator name."""

    def labels(self, feedback: Feedback) -> list[Label]:
        return []
