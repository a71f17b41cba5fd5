"""Aggregators that keep every answer: identity (one label per answer) and multi-query
confidence (one soft label per query: the share of answers preferring a).

Both follow the latest-answer rule of :mod:`preflab.aggregate.protocol` and expand group
queries with :func:`preflab.aggregate.expand_group` (max(m, n) pairs, the same pairs for
every answer to one query).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from preflab.aggregate.protocol import Feedback, check_known, latest
from preflab.groupwise.labels import expand_group
from preflab.records import Judgement, Label


def _answers(feedback: Feedback) -> list[Judgement]:
    """The judgements that count (latest per answer key), skips dropped, arrival order."""
    check_known(feedback)
    js = feedback.judgements
    return [js[i] for i in latest(js) if js[i].p is not None]


@dataclass(frozen=True, kw_only=True)
class IdentityAggregator:
    """One label per answer: a pair answer p gives (a, b, p); a group answer gives the
    max(m, n) pairs of its query, each with p. Skips (p = None) give no label. Each label
    keeps the id of its judgement. The loop's default."""

    name: str = "identity"
    """Aggregator name."""

    def labels(self, feedback: Feedback) -> list[Label]:
        out: list[Label] = []
        for j in _answers(feedback):
            assert j.p is not None
            out.extend(expand_group(feedback.queries[j.query_id], j.p, (j.id,)))
        return out


@dataclass(frozen=True, kw_only=True)
class ConfidenceAggregator:
    """Multi-query confidence (paper 004): per query, p = the mean of its answers' p, i.e. the
    share of "yes, a is better" among the parseable answers of every annotator and sample.

    Unparseable / failed answers (p = None) are ignored; a query without a parseable answer
    gives no label. By the paper's Lemma 1 one soft label with this p is the same loss as its
    N hard labels. Group queries are expanded with the soft p. Each label keeps the ids of the
    judgements it averaged.
    """

    name: str = "confidence"
    """Aggregator name."""

    def labels(self, feedback: Feedback) -> list[Label]:
        by_query: dict[str, list[Judgement]] = defaultdict(list)
        for j in _answers(feedback):
            by_query[j.query_id].append(j)
        out: list[Label] = []
        for qid, js in by_query.items():
            p = sum(j.p for j in js if j.p is not None) / len(js)
            out.extend(expand_group(feedback.queries[qid], p, tuple(j.id for j in js)))
        return out
