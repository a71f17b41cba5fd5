"""Labels per minority viewpoint from a run's feedback (Crowd-PrefRL §5.2, DESIGN.md: "aggregate
each cluster separately, and learn a reward per cluster"): SML weighs the annotators, 1-D
Gaussian mixtures on the weights find the viewpoints (:func:`~preflab.aggregate.viewpoints.
find_viewpoints`), and each viewpoint's own answers are aggregated on their own
(:func:`~preflab.aggregate.viewpoints.aggregate_groups`) into that viewpoint's labels. The
reward per viewpoint is :func:`preflab.runs.viewpoint_fit.fit_viewpoints`."""

from __future__ import annotations

from dataclasses import dataclass

from preflab.aggregate.adapter import SMLAggregator
from preflab.aggregate.protocol import Feedback
from preflab.aggregate.viewpoints import Viewpoints, aggregate_groups, find_viewpoints
from preflab.errors import DataError
from preflab.kinds import kind_of
from preflab.records import Label


@dataclass(frozen=True)
class ViewpointLabels:
    """The viewpoints of a run's annotators and each one's labels."""

    viewpoints: Viewpoints
    """The groups SML's weights fall into (group 0 the largest)."""
    members: tuple[tuple[str, ...], ...]
    """Per group: its annotators' ids."""
    labels: tuple[tuple[Label, ...], ...]
    """Per group: the labels of its members' answers alone (each naming their judgements)."""


def viewpoint_labels(feedback: Feedback, *, max_groups: int = 3) -> ViewpointLabels:
    """Each viewpoint's labels from ``feedback``: SML over every annotator (at least three who
    answered overlapping queries, else a DataError saying so), the annotators SML could place
    grouped by their weights, then per group SML inside it (majority for a group SML cannot
    weigh); a query no member answered, or whose members tie, gives that group no label."""
    agg = SMLAggregator(strict=True)
    try:
        agg.labels(feedback)
    except DataError as exc:
        raise DataError(
            f"viewpoints need SML's weights of the annotators, and SML cannot weigh these "
            f"answers: {exc}"
        ) from exc
    table, res, answered = agg.last_table, agg.last_sml, agg.last_answered
    assert table is not None and res is not None and answered is not None  # strict SML ran
    placed = answered[~res.isolated]  # rows of the table SML could place
    vp = find_viewpoints(res.weights[~res.isolated], max_groups=max_groups)
    per_group = aggregate_groups(table.votes[placed], vp)
    author = {j.id: j.annotator_id for j in feedback.judgements}
    members, labels = [], []
    for g, signs in enumerate(per_group):
        mine = tuple(table.annotator_ids[placed[i]] for i in vp.members(g))
        chosen = set(mine)
        out: list[Label] = []
        for k, (qid, item) in enumerate(zip(table.query_ids, table.items, strict=True)):
            if signs[k] == 0:
                continue
            ids = tuple(j for j in table.judgement_ids[k] if author.get(j) in chosen)
            q = feedback.queries[qid]
            out.extend(kind_of(q).item_labels(q, item, 1.0 if signs[k] > 0 else 0.0, ids))
        members.append(mine)
        labels.append(tuple(out))
    return ViewpointLabels(viewpoints=vp, members=tuple(members), labels=tuple(labels))
