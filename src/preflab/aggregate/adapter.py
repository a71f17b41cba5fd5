"""Crowd aggregation: judgements in, one label per query out, by majority vote or SML.

:class:`MajorityAggregator` and :class:`SMLAggregator` (both :class:`CrowdAggregator`) group
judgements by query item (:meth:`preflab.kinds.FeedbackKind.items`: the query itself for a pair
or group, each pair of clips for a ranking) and build the votes matrix (p > 0.5 → +1,
p < 0.5 → −1, p = 0.5 or skip → 0) from the answers that count (the latest per annotator and query, see
:mod:`preflab.aggregate.protocol`). They aggregate it by majority or SML and return labels
with p = 1 (first preferred), 0 (second) or 0.5 (a majority tie among actual answers). A
query with no ±1 answer gives no label; a query SML cannot decide (only annotators with
weight 0 answered it) takes the majority label. Every label keeps the ids of all judgements
of its query (superseded ones and skips included). SML on fewer than 3 annotators falls back
to majority (logged) unless ``strict=True``, in which case the DataError propagates. Each
item's label is made by its kind's label rule (group queries: max(m, n) pairs).
``preflab crowd aggregate`` runs the same objects on a file.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from preflab.aggregate.majority import majority
from preflab.aggregate.protocol import Feedback, check_known, latest
from preflab.aggregate.sml import SMLResult, sml
from preflab.errors import ConfigError, DataError
from preflab.kinds import kind_of
from preflab.records import Judgement, Label, Query

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class VotesTable:
    """A votes matrix with the ids its rows and columns stand for. A column is one item of a
    query (:meth:`preflab.kinds.FeedbackKind.items`): the query itself for a pair or a group
    comparison, one pair of its clips for a ranking."""

    votes: sp.csr_matrix
    """(annotators × items) sparse matrix of ±1 answers."""
    annotator_ids: tuple[str, ...]
    """Row ids (sorted)."""
    query_ids: tuple[str, ...]
    """Per column: its query's id (queries in order of first appearance, each with its items
    in the kind's order)."""
    items: tuple[str, ...]
    """Per column: the item of its query ('' for a pair or group query)."""
    judgement_ids: tuple[tuple[str, ...], ...]
    """Per column: ids of every judgement about its query (skips included)."""


def votes_table(judgements: Sequence[Judgement], queries: Mapping[str, Query]) -> VotesTable:
    """Build the sparse votes matrix from judgements: the latest answer per annotator and query
    counts (equal times: the later one in ``judgements``), see :func:`latest`; each answer votes
    on its query's items as its kind says (p > 0.5 → +1, p < 0.5 → −1, 0.5 or skip → none)."""
    columns: dict[tuple[str, str], int] = {}
    by_query: dict[str, list[str]] = {}
    for j in judgements:
        if j.query_id not in by_query:
            by_query[j.query_id] = []
            q = queries[j.query_id]
            for item in kind_of(q).items(q):
                columns.setdefault((q.id, item), len(columns))
        by_query[j.query_id].append(j.id)
    annotators = sorted({j.annotator_id for j in judgements})
    a_index = {a: i for i, a in enumerate(annotators)}
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    for i in latest(judgements):
        j = judgements[i]
        q = queries[j.query_id]
        for item, p in kind_of(q).votes(q, j):
            if p != 0.5:
                rows.append(a_index[j.annotator_id])
                cols.append(columns[(j.query_id, item)])
                vals.append(1.0 if p > 0.5 else -1.0)
    m = sp.csr_matrix((vals, (rows, cols)), shape=(len(annotators), len(columns)))
    m.sum_duplicates()
    keys = list(columns)
    return VotesTable(
        votes=m,
        annotator_ids=tuple(annotators),
        query_ids=tuple(qid for qid, _ in keys),
        items=tuple(item for _, item in keys),
        judgement_ids=tuple(tuple(by_query[qid]) for qid, _ in keys),
    )


class CrowdAggregator:
    """Majority or SML aggregation of crowd judgements into labels (see module docstring).

    The shared implementation of :class:`MajorityAggregator` and :class:`SMLAggregator`;
    ``last_table`` / ``last_sml`` / ``last_answered`` describe the last call (for the CLI's
    annotator table and for benchmarks).
    """

    def __init__(
        self,
        method: str = "sml",
        *,
        strict: bool = False,
        min_overlap: int = 2,
        diagonal: str = "fit",
    ) -> None:
        if method not in ("majority", "sml"):
            raise ConfigError(f"method must be 'majority' or 'sml', got {method!r}")
        self.name = method
        self.strict = strict
        self.min_overlap = min_overlap
        self.diagonal = diagonal
        """SML's covariance treatment (:func:`preflab.aggregate.sml.sml`): 'fit' (the default,
        Parisi's rank-one fit), 'auto' (paper 003's lead eigenvector for dense crowds, the
        rank-one fit for sparse ones) or 'empirical'."""
        self.last_table: VotesTable | None = None
        """The votes table of the last call (for inspection / benchmarks)."""
        self.last_sml: SMLResult | None = None
        """The SML result of the last call (None with majority or after a fallback)."""
        self.last_answered: np.ndarray | None = None
        """Row indices of ``last_table`` that had at least one answer (the rows SML weighed)."""

    @property
    def method(self) -> str:
        """'majority' or 'sml' (same as ``name``)."""
        return self.name

    def aggregate(self, table: VotesTable) -> np.ndarray:
        """Labels (+1 / −1 / 0) per column of ``table``."""
        m = table.votes
        answered = np.flatnonzero(np.diff(m.indptr) > 0)
        self.last_answered = answered
        self.last_sml = None
        if m.shape[1] == 0 or answered.size == 0:
            return np.zeros(m.shape[1], np.int8)
        if self.name == "majority":
            return majority(m)
        sub = m[answered]
        try:
            res = sml(sub, min_overlap=self.min_overlap, diagonal=self.diagonal)
        except DataError as exc:
            if self.strict:
                raise
            log.warning("SML not possible (%s); falling back to majority vote", exc)
            return majority(m)
        self.last_sml = res
        labels = res.labels.copy()
        undecided = labels == 0  # only voters with weight 0 (isolated) or an exact tie
        if undecided.any():
            labels[undecided] = majority(m)[undecided]
        return labels

    def labels(self, feedback: Feedback) -> list[Label]:
        """One label per query item with at least one ±1 answer (group queries: max(m, n)
        labels; rankings: one label per pair of clips)."""
        check_known(feedback)
        table = votes_table(feedback.judgements, feedback.queries)
        self.last_table = table
        labels_pm = self.aggregate(table)
        has_answer = np.diff(table.votes.tocsc().indptr) > 0
        out: list[Label] = []
        for k, (qid, item) in enumerate(zip(table.query_ids, table.items, strict=True)):
            if not has_answer[k]:
                continue
            p = 0.5 if labels_pm[k] == 0 else (1.0 if labels_pm[k] > 0 else 0.0)
            q = feedback.queries[qid]
            out.extend(kind_of(q).item_labels(q, item, p, table.judgement_ids[k]))
        return out


class MajorityAggregator(CrowdAggregator):
    """Majority vote per query (ties among answers → p = 0.5)."""

    def __init__(self) -> None:
        super().__init__("majority")


class SMLAggregator(CrowdAggregator):
    """Spectral Meta-Learner labels per query (Crowd-PrefRL); majority for undecided queries
    and, unless ``strict``, for crowds SML cannot weigh (fewer than 3 annotators, no overlap).
    ``min_overlap`` = co-answered queries two annotators need for their covariance;
    ``diagonal`` as :func:`preflab.aggregate.sml.sml` (default 'fit', the rank-one fit; 'auto'
    is paper 003's lead eigenvector of the empirical covariance for dense crowds)."""

    def __init__(
        self, *, strict: bool = False, min_overlap: int = 2, diagonal: str = "fit"
    ) -> None:
        super().__init__("sml", strict=strict, min_overlap=min_overlap, diagonal=diagonal)
