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
    """Build the sparse votes matrix from judgements (latest answer per annotator and query;
    equal times: the later one in ``judgements``)."""
    n = len(judgements)
    qids = [j.query_id for j in judgements]
    aids = [j.annotator_id for j in judgements]
    q_index = {q: k for k, q in enumerate(dict.fromkeys(qids))}
    annotators = sorted(set(aids))
    a_index = {a: i for i, a in enumerate(annotators)}
    q_codes = np.fromiter((q_index[q] for q in qids), np.int64, n)
    a_codes = np.fromiter((a_index[a] for a in aids), np.int64, n)
    times = np.fromiter((j.created_at for j in judgements), np.float64, n)
    p = np.fromiter((np.nan if j.p is None else j.p for j in judgements), np.float64, n)
    key = a_codes * max(len(q_index), 1) + q_codes
    order = np.lexsort((np.arange(n), times, key))
    last = np.ones(n, dtype=bool)
    if n > 1:
        last[:-1] = key[order][1:] != key[order][:-1]
    sel = order[last]
    vote = np.zeros(sel.size)
    with np.errstate(invalid="ignore"):
        vote[p[sel] > 0.5] = 1.0
        vote[p[sel] < 0.5] = -1.0
    keep = vote != 0
    m = sp.csr_matrix(
        (vote[keep], (a_codes[sel][keep], q_codes[sel][keep])),
        shape=(len(annotators), len(q_index)),
    )
    by_query = np.argsort(q_codes, kind="stable")
    bounds = np.searchsorted(q_codes[by_query], np.arange(len(q_index) + 1))
    ids = [j.id for j in judgements]
    jids = tuple(
        tuple(ids[i] for i in by_query[bounds[k] : bounds[k + 1]]) for k in range(len(q_index))
    )
    return VotesTable(
        votes=m, annotator_ids=tuple(annotators), query_ids=tuple(q_index), judgement_ids=jids
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
