"""Aggregators that keep every answer: identity (one label per answer) and multi-query
confidence (one soft label per query: the share of answers preferring a).

Both follow the latest-answer rule of :mod:`preflab.aggregate.protocol` and ask the query's kind
for its label rule (:mod:`preflab.kinds`): a group answer gives max(m, n) pairs (the same pairs
for every answer to one query), a ranking gives all pairs of its clips.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from preflab.aggregate.protocol import Feedback, check_known, latest
from preflab.kinds import kind_of
from preflab.records import Judgement, Label


def _answers(feedback: Feedback) -> list[Judgement]:
    """The judgements that count (latest per answer key), skips dropped, arrival order."""
    check_known(feedback)
    js = feedback.judgements
    return [js[i] for i in latest(js) if js[i].p is not None]


@dataclass(frozen=True, kw_only=True)
class IdentityAggregator:
    """The labels of each answer on its own, by its kind's label rule: a pair answer p gives
    (a, b, p); a group answer the max(m, n) pairs of its query, each with p; a ranking the
    pairs of its clips. Skips (p = None) give no label. Each label keeps the id of its
    judgement. The loop's default."""

    name: str = "identity"
    """Aggregator name."""

    def labels(self, feedback: Feedback) -> list[Label]:
        out: list[Label] = []
        for j in _answers(feedback):
            q = feedback.queries[j.query_id]
            out.extend(kind_of(q).labels(q, j))
        return out


@dataclass(frozen=True, kw_only=True)
class ConfidenceAggregator:
    """Multi-query confidence (paper 004): per query item (the query itself for a pair or
    group; each pair of clips of a ranking), p = the mean of its answers' votes, i.e. the share
    of answers for a (p = P(a ≻ b)) among the parseable answers of every annotator and sample.
    (The LLM judge's "yes" says the later state b is better, so for it p is the share of "no":
    :mod:`preflab.llm.parse`.)

    Unparseable / failed answers (p = None) are ignored; a query without a parseable answer
    gives no label. By the paper's Lemma 1 one soft label with this p is the same loss as its
    N hard labels. Group queries are expanded with the soft p. Each label keeps the ids of the
    judgements it averaged.
    """

    name: str = "confidence"
    """Aggregator name."""

    def labels(self, feedback: Feedback) -> list[Label]:
        by_item: dict[tuple[str, str], list[tuple[float, str]]] = defaultdict(list)
        for j in _answers(feedback):
            q = feedback.queries[j.query_id]
            for item, p in kind_of(q).votes(q, j):
                by_item[(j.query_id, item)].append((p, j.id))
        out: list[Label] = []
        for (qid, item), votes in by_item.items():
            q = feedback.queries[qid]
            p = sum(v for v, _ in votes) / len(votes)
            out.extend(kind_of(q).item_labels(q, item, p, tuple(jid for _, jid in votes)))
        return out
