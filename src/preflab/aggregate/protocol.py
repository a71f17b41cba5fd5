"""The aggregator protocol: everything collected so far in, training labels out.

An aggregator is an object with a ``name`` and one verb, ``labels(feedback)``. The loop, the
``preflab crowd aggregate`` command, the exporter and the benchmarks all call it the same way,
once per round, on a :class:`Feedback` value.

**Repeated answers (one rule everywhere).** When an annotator answers the same query more than
once, the LATEST judgement counts: the one with the largest ``created_at``; equal times → the
one later in ``feedback.judgements`` (arrival order). Earlier answers stay in the store as
history (nothing is overwritten; a correction is a new judgement) and stay in the provenance
of crowd labels, but they cast no vote. Repeated *samples* are not repeated answers: a source
that asks the same annotator several times on purpose (the LLM judge's and the noisy ranker's
``n_queries``) numbers them in ``judgement.meta["sample"]``, and the key of an answer is
(annotator, query, sample). A skip (p = None) that is the latest answer withdraws that
annotator's vote. Retracted judgements are removed by the caller before aggregating.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from preflab.errors import DataError
from preflab.records import Judgement, Label, Query, Rating, Segment


@dataclass(frozen=True, kw_only=True)
class Feedback:
    """Everything an aggregator may use, as plain records."""

    queries: Mapping[str, Query]
    """Every asked query, by id (judgements and ratings must name one of these)."""
    judgements: Sequence[Judgement]
    """Judgements in arrival order (store sequence order), retracted ones already removed."""
    ratings: Sequence[Rating] = ()
    """Real-time ratings; ``rating.stream_id`` is the id of a query of kind 'rating'."""
    segments: Mapping[str, Segment] = field(default_factory=dict)
    """Segments by id, for aggregators that need lengths or observations (window, voting)."""


@runtime_checkable
class Aggregator(Protocol):
    """Turns feedback into labels; implementations are in :mod:`preflab.aggregate`."""

    @property
    def name(self) -> str:
        """Short name ('identity', 'confidence', 'majority', 'sml', 'window', 'voting');
        read-only (the aggregators are frozen dataclasses)."""
        ...

    def labels(self, feedback: Feedback) -> list[Label]:
        """Training labels p = P(a ≻ b), each with the ids of the judgements it came from."""
        ...


def answer_key(j: Judgement) -> tuple[str, str, int]:
    """(annotator, query, sample): judgements with the same key are one answer repeated."""
    sample = j.meta.get("sample", 0) if j.meta else 0
    return j.annotator_id, j.query_id, int(sample) if isinstance(sample, int | float) else 0


def latest(judgements: Sequence[Judgement]) -> np.ndarray:
    """Indices (ascending, i.e. arrival order) of the judgements that count: the latest per
    :func:`answer_key` (largest ``created_at``; equal times → later in ``judgements``)."""
    n = len(judgements)
    if n == 0:
        return np.zeros(0, np.int64)
    codes: dict[tuple[str, str, int], int] = {}
    key = np.fromiter(
        (codes.setdefault(answer_key(j), len(codes)) for j in judgements), np.int64, n
    )
    if len(codes) == n:
        return np.arange(n)
    times = np.fromiter((j.created_at for j in judgements), np.float64, n)
    order = np.lexsort((np.arange(n), times, key))
    last = np.ones(n, dtype=bool)
    last[:-1] = key[order][1:] != key[order][:-1]
    return np.sort(order[last])


def check_known(feedback: Feedback) -> None:
    """Raise a DataError when a judgement answers a query that ``feedback.queries`` lacks."""
    for j in feedback.judgements:
        if j.query_id not in feedback.queries:
            raise DataError(
                f"judgement {j.id} answers unknown query {j.query_id}; pass every asked query "
                "in Feedback.queries"
            )
