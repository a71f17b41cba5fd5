"""Aggregators of real-time scalar ratings (Pref-GUIDE): windowed labels (Algorithm 1) and
voting (Algorithm 2).

A rating stream is a query of kind 'rating' whose ``a`` lists consecutive item segments; the
clip shows them one after another, so step k of the stream lies in item i when
L_0 + … + L_{i−1} ≤ k < L_0 + … + L_i (L = item lengths, from ``feedback.segments``). The
value of an item for one annotator is the mean of that annotator's ratings whose step falls
in the item (every rating of the stream counts, also from a second viewing); items the
annotator did not rate are skipped, i.e. the window slides over the rated items in stream
order. Windows never cross streams. Pairs of two items with the same segment id (identical
content) are dropped.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from preflab.aggregate.protocol import Feedback
from preflab.errors import ConfigError, DataError
from preflab.kinds import kind_of
from preflab.kinds.rating_windows import DEFAULT_DELTA, PairLabels, window_labels, window_pairs
from preflab.records import Label, Rating
from preflab.reward.batch import SegmentBatch
from preflab.reward.scalar import ScalarModelConfig, VoteScale, fit_preferences, voting_labels


@dataclass(frozen=True)
class ItemValues:
    """One annotator's item values on one rating stream."""

    query_id: str
    """The rating query (stream)."""
    annotator_id: str
    """Who rated."""
    items: tuple[str, ...]
    """Every item segment id of the stream, in order."""
    rated: np.ndarray
    """(R,) int64 positions in ``items`` of the rated items, increasing."""
    values: np.ndarray
    """(R,) float64 mean rating of each rated item."""

    @property
    def provenance(self) -> str:
        """The pseudo judgement id labels from these ratings carry."""
        return f"ratings:{self.query_id}:{self.annotator_id}"


def item_values(feedback: Feedback, annotators: tuple[str, ...] | None = None) -> list[ItemValues]:
    """Per (rating stream, annotator): the mean rating of every rated item (module docstring).

    Streams come in the order of ``feedback.queries``, annotators sorted by id. Raises
    DataError for a rating of an unknown or non-rating query, a stream item missing from
    ``feedback.segments`` and a step beyond the end of the stream.
    """
    by_stream: dict[str, list[Rating]] = defaultdict(list)
    wanted = None if annotators is None else set(annotators)
    for r in feedback.ratings:
        q = feedback.queries.get(r.stream_id)
        if q is None or not kind_of(q).streams:
            raise DataError(
                f"rating by {r.annotator_id} names stream {r.stream_id!r}, which is not a rating "
                "stream in Feedback.queries; pass the rating queries with the ratings"
            )
        if wanted is None or r.annotator_id in wanted:
            by_stream[r.stream_id].append(r)
    out: list[ItemValues] = []
    for qid, q in feedback.queries.items():
        rs = by_stream.get(qid)
        if not rs:
            continue
        missing = [s for s in q.a if s not in feedback.segments]
        if missing:
            raise DataError(
                f"rating stream {qid} names item segment(s) {missing[:3]} that are not in "
                "Feedback.segments; pass the stream's segments (their lengths place the steps)"
            )
        ends = np.cumsum([feedback.segments[s].length for s in q.a])
        steps = np.array([r.step for r in rs], dtype=np.int64)
        if steps.max() >= ends[-1]:
            raise DataError(
                f"rating stream {qid} has {int(ends[-1])} steps but a rating names step "
                f"{int(steps.max())}; ratings must refer to steps of the stream's items"
            )
        item = np.searchsorted(ends, steps, side="right")
        vals = np.array([r.value for r in rs], dtype=np.float64)
        who = np.array([r.annotator_id for r in rs])
        for ann in sorted(set(who.tolist())):
            mine = who == ann
            n = np.bincount(item[mine], minlength=len(q.a))
            total = np.bincount(item[mine], weights=vals[mine], minlength=len(q.a))
            rated = np.flatnonzero(n > 0)
            out.append(
                ItemValues(
                    query_id=qid,
                    annotator_id=ann,
                    items=q.a,
                    rated=rated,
                    values=total[rated] / n[rated],
                )
            )
    return out


def _check_window(window: int, delta: float) -> None:
    if window < 2:
        raise ConfigError(f"window must be ≥ 2 (a window needs a pair), got {window}")
    if not (np.isfinite(delta) and delta >= 0):
        raise ConfigError(f"delta must be finite and ≥ 0, got {delta}")


def _stream_labels(iv: ItemValues, window: int, delta: float) -> PairLabels:
    """Algorithm 1 on one annotator's stream; pairs are positions in ``iv.items``."""
    lab = window_labels(iv.values, window=window, delta=delta)
    pairs = iv.rated[lab.pairs] if len(lab) else np.zeros((0, 2), np.int64)
    items = np.asarray(iv.items)
    keep = items[pairs[:, 0]] != items[pairs[:, 1]] if len(lab) else np.zeros(0, bool)
    return PairLabels(pairs=pairs[keep], p=lab.p[keep])


@dataclass(frozen=True, kw_only=True)
class WindowAggregator:
    """Pref-GUIDE Algorithm 1 ("Individual"): for every annotator and stream, a window of
    ``window`` consecutive rated items slides over the stream and every pair (A before B)
    inside it is labelled 0.5 when |f_A − f_B| < δ, else 1 (A higher) or 0. A pair appears
    once per window containing it, as in the paper. Labels carry the pseudo judgement id
    ``ratings:{query_id}:{annotator_id}``. One reward model per evaluator = one
    ``WindowAggregator(annotators=(that_id,))`` per evaluator."""

    window: int = 10
    """Window n (items)."""
    delta: float = DEFAULT_DELTA
    """No-preference range δ in rating units (5% of [−1, 1] = 0.1)."""
    annotators: tuple[str, ...] | None = None
    """Only these annotators' ratings (None: everyone's)."""
    name: str = "window"
    """Aggregator name."""

    def __post_init__(self) -> None:
        _check_window(self.window, self.delta)

    def labels(self, feedback: Feedback) -> list[Label]:
        out: list[Label] = []
        for iv in item_values(feedback, self.annotators):
            lab = _stream_labels(iv, self.window, self.delta)
            prov = (iv.provenance,)
            out.extend(
                Label(a=iv.items[i], b=iv.items[k], p=float(p), judgement_ids=prov)
                for (i, k), p in zip(lab.pairs.tolist(), lab.p.tolist(), strict=True)
            )
        return out


@dataclass(frozen=True, kw_only=True)
class VotingAggregator:
    """Pref-GUIDE Algorithm 2 ("Voting"): one Bradley–Terry model per evaluator is fit on that
    evaluator's Algorithm 1 labels (:func:`preflab.reward.scalar.fit_preferences` on the item
    segments); then every model votes on every window pair of every stream (all items, rated
    or not): 1 when its score of A exceeds B's by ≥ ``vote_delta``, 0.5 when |Δ| <
    ``vote_delta``, else 0, each model's scores mapped onto the feedback range [−1, 1] so that
    δ is 5 % of that range as in the paper (``vote_scale``). The label is the mean vote. Evaluators whose streams are
    shorter than a window have no model and do not vote. Labels carry the pseudo judgement ids
    of the voting evaluators' ratings of that stream. Deterministic given ``seed``.
    """

    window: int = 10
    """Window n (items), for the evaluators' labels and for the pairs voted on."""
    delta: float = DEFAULT_DELTA
    """δ of Algorithm 1 in rating units."""
    vote_delta: float = DEFAULT_DELTA
    """δ of the vote in ``vote_scale`` units (default 5 % of the feedback range, the paper's)."""
    vote_scale: VoteScale = "feedback"
    """'feedback': each model's item scores mapped onto [−1, 1] (the paper's δ); 'std':
    standardised, δ in standard deviations (PrefLab before issue #27)."""
    seed: int = 0
    """Seed of the generator that fits the evaluators' models (a fresh one every call)."""
    model: ScalarModelConfig = field(default_factory=ScalarModelConfig)
    """Architecture and fitting of the evaluators' models."""
    annotators: tuple[str, ...] | None = None
    """Only these evaluators (None: everyone who rated)."""
    name: str = "voting"
    """Aggregator name."""

    def __post_init__(self) -> None:
        _check_window(self.window, self.delta)
        _check_window(self.window, self.vote_delta)

    def labels(self, feedback: Feedback) -> list[Label]:
        values = item_values(feedback, self.annotators)
        if not values:
            return []
        streams = list(dict.fromkeys(iv.query_id for iv in values))
        ids = list(dict.fromkeys(s for qid in streams for s in feedback.queries[qid].a))
        row = {s: i for i, s in enumerate(ids)}
        items = SegmentBatch.from_segments([feedback.segments[s] for s in ids])
        per_evaluator: dict[str, list[PairLabels]] = defaultdict(list)
        for iv in values:
            lab = _stream_labels(iv, self.window, self.delta)
            rows = np.array([row[s] for s in iv.items], dtype=np.int64)
            per_evaluator[iv.annotator_id].append(PairLabels(pairs=rows[lab.pairs], p=lab.p))
        rng = np.random.default_rng(self.seed)
        voters: list[str] = []
        models = []
        for ann in sorted(per_evaluator):
            parts = per_evaluator[ann]
            data = PairLabels(
                pairs=np.concatenate([d.pairs for d in parts]),
                p=np.concatenate([d.p for d in parts]),
            )
            if len(data):
                voters.append(ann)
                models.append(fit_preferences(items, data, rng, self.model))
        if not models:
            return []
        chunks: list[np.ndarray] = []
        for qid in streams:
            rows = np.array([row[s] for s in feedback.queries[qid].a], dtype=np.int64)
            pairs = rows[window_pairs(len(rows), self.window)]
            chunks.append(pairs[pairs[:, 0] != pairs[:, 1]])
        voted = voting_labels(
            models, items, np.concatenate(chunks), self.vote_delta, scale=self.vote_scale
        ).p
        rated_by = {(iv.query_id, iv.annotator_id) for iv in values}
        out: list[Label] = []
        at = 0
        for qid, pairs in zip(streams, chunks, strict=True):
            prov = tuple(f"ratings:{qid}:{a}" for a in voters if (qid, a) in rated_by)
            p = voted[at : at + len(pairs)]
            at += len(pairs)
            out.extend(
                Label(a=ids[i], b=ids[k], p=float(x), judgement_ids=prov)
                for (i, k), x in zip(pairs.tolist(), p.tolist(), strict=True)
            )
        return out
