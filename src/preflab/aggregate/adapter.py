"""Crowd aggregation for the training loop: judgements in, one label per query out.

``CrowdAggregator(method)`` is a callable ``(queries, judgements) -> list[Label]`` that the
core loop accepts as ``aggregator``. It groups judgements by query, builds the votes matrix
(p > 0.5 → +1, p < 0.5 → −1, p = 0.5 or skip → 0; when one annotator answered a query more
than once, the latest judgement counts), aggregates by majority or SML and returns labels
with p = 1 (first preferred), 0 (second) or 0.5 (a majority tie among actual answers). A
query with no ±1 answer gives no label; a query SML cannot decide (only annotators
with weight 0 answered it) takes the majority label. Every label keeps the ids of all
judgements of its query. SML on fewer than 3 annotators falls back to majority (logged) unless
``strict=True``, in which case the DataError propagates.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from preflab.aggregate.majority import majority
from preflab.aggregate.sml import SMLResult, sml
from preflab.errors import ConfigError, DataError
from preflab.records import Judgement, Label, Query

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class VotesTable:
    """A votes matrix with the ids its rows and columns stand for."""

    votes: sp.csr_matrix
    """(annotators × queries) sparse matrix of ±1 answers."""
    annotator_ids: tuple[str, ...]
    """Row ids (sorted)."""
    query_ids: tuple[str, ...]
    """Column ids (in order of first appearance)."""
    judgement_ids: tuple[tuple[str, ...], ...]
    """Per query: ids of every judgement about it (skips included)."""


def votes_table(judgements: Sequence[Judgement]) -> VotesTable:
    """Build the sparse votes matrix from judgements (latest answer per annotator and query)."""
    q_index: dict[str, int] = {}
    jids: list[list[str]] = []
    latest: dict[tuple[str, str], Judgement] = {}
    for j in judgements:
        if j.query_id not in q_index:
            q_index[j.query_id] = len(jids)
            jids.append([])
        jids[q_index[j.query_id]].append(j.id)
        key = (j.annotator_id, j.query_id)
        prev = latest.get(key)
        if prev is None or j.created_at >= prev.created_at:
            latest[key] = j
    annotators = sorted({a for a, _ in latest})
    a_index = {a: i for i, a in enumerate(annotators)}
    rows, cols, vals = [], [], []
    for (a, q), j in latest.items():
        if j.p is None or j.p == 0.5:
            continue
        rows.append(a_index[a])
        cols.append(q_index[q])
        vals.append(1.0 if j.p > 0.5 else -1.0)
    m = sp.csr_matrix(
        (np.array(vals, np.float64), (np.array(rows, np.int64), np.array(cols, np.int64))),
        shape=(len(annotators), len(jids)),
    )
    return VotesTable(
        votes=m,
        annotator_ids=tuple(annotators),
        query_ids=tuple(q_index),
        judgement_ids=tuple(tuple(x) for x in jids),
    )


class CrowdAggregator:
    """Majority or SML aggregation of crowd judgements into labels (see module docstring)."""

    def __init__(self, method: str = "sml", *, strict: bool = False, min_overlap: int = 2) -> None:
        if method not in ("majority", "sml"):
            raise ConfigError(f"method must be 'majority' or 'sml', got {method!r}")
        self.method = method
        self.strict = strict
        self.min_overlap = min_overlap
        self.last_table: VotesTable | None = None
        """The votes table of the last call (for inspection / benchmarks)."""
        self.last_sml: SMLResult | None = None
        """The SML result of the last call (None with majority or after a fallback)."""
        self.last_answered: np.ndarray | None = None
        """Row indices of ``last_table`` that had at least one answer (the rows SML weighed)."""

    def aggregate(self, table: VotesTable) -> np.ndarray:
        """Labels (+1 / −1 / 0) per column of ``table``."""
        m = table.votes
        answered = np.flatnonzero(np.diff(m.indptr) > 0)
        self.last_answered = answered
        self.last_sml = None
        if m.shape[1] == 0 or answered.size == 0:
            return np.zeros(m.shape[1], np.int8)
        if self.method == "majority":
            return majority(m)
        sub = m[answered]
        try:
            res = sml(sub, min_overlap=self.min_overlap)
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

    def __call__(
        self, queries: Mapping[str, Query], judgements: Sequence[Judgement]
    ) -> list[Label]:
        for j in judgements:
            if j.query_id not in queries:
                raise DataError(
                    f"judgement {j.id} answers unknown query {j.query_id}; pass every asked query"
                )
        table = votes_table(judgements)
        self.last_table = table
        labels_pm = self.aggregate(table)
        has_answer = np.diff(table.votes.tocsc().indptr) > 0
        out: list[Label] = []
        for k, qid in enumerate(table.query_ids):
            if not has_answer[k]:
                continue
            p = 0.5 if labels_pm[k] == 0 else (1.0 if labels_pm[k] > 0 else 0.0)
            q = queries[qid]
            ids = table.judgement_ids[k]
            if q.kind == "pair":
                out.append(Label(a=q.a[0], b=q.b[0], p=p, judgement_ids=ids))
            elif q.kind == "group":
                from preflab.groupwise import expand  # sibling module; imported lazily

                seed = int.from_bytes(hashlib.sha256(qid.encode()).digest()[:8], "little")
                for lab in expand(q.a, q.b, p, np.random.default_rng(seed), judgement_id=ids[0]):
                    out.append(dataclasses.replace(lab, judgement_ids=ids))
            else:
                raise DataError(
                    f"query {qid} is a {q.kind!r} query; crowds aggregate pair or group queries"
                )
        return out
