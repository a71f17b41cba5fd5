"""The kinds of feedback a run can use, by name: the built-in ones and any a user registers.

Registration is the one place that lists the built-in kinds. A new kind is a
:class:`preflab.kinds.base.FeedbackKind` passed to :func:`register`; from then on the store,
the aggregators, the exporter and the simulated answerers handle its queries.
"""

from __future__ import annotations

from preflab.errors import DataError
from preflab.kinds.base import FeedbackKind
from preflab.kinds.group import GROUP
from preflab.kinds.pair import PAIR
from preflab.kinds.ranking import RANKING
from preflab.kinds.rating import RATING
from preflab.records import Judgement, Label, Query

_KINDS: dict[str, FeedbackKind] = {k.name: k for k in (PAIR, GROUP, RATING, RANKING)}

NAME_LENGTH = 8
"""The longest kind name the store's ``queries.kind`` column holds."""


def register(kind: FeedbackKind) -> FeedbackKind:
    """Add ``kind`` (a new name, at most :data:`NAME_LENGTH` characters) and return it."""
    if not kind.name or len(kind.name) > NAME_LENGTH:
        raise DataError(f"a kind's name must have 1 to {NAME_LENGTH} characters, got {kind.name!r}")
    if kind.name in _KINDS and _KINDS[kind.name] is not kind:
        raise DataError(f"a kind named {kind.name!r} is registered already; choose another name")
    _KINDS[kind.name] = kind
    return kind


def kind_names() -> tuple[str, ...]:
    """The registered kinds' names, built-in ones first."""
    return tuple(_KINDS)


def stream_kind_names() -> tuple[str, ...]:
    """Names of the kinds answered by rating streams (no judgements)."""
    return tuple(n for n, k in _KINDS.items() if k.streams)


def repeatable_kind_names() -> tuple[str, ...]:
    """Names of the kinds whose queries the studio may ask again as consistency checks."""
    return tuple(n for n, k in _KINDS.items() if k.consistency_checks)


def get_kind(name: str) -> FeedbackKind:
    """The kind called ``name``; a DataError naming the known kinds otherwise."""
    kind = _KINDS.get(name)
    if kind is None:
        raise DataError(
            f"unknown query kind {name!r}; expected one of {', '.join(map(repr, _KINDS))} "
            "(a new kind is added with preflab.kinds.register)"
        )
    return kind


def kind_of(query: Query) -> FeedbackKind:
    """The kind of ``query``, its shape checked."""
    kind = get_kind(query.kind)
    kind.check(query)
    return kind


def check_query(query: Query) -> Query:
    """``query`` when its kind is registered and it has that kind's shape (DataError else)."""
    kind_of(query)
    return query


def check_judgement(query: Query, judgement: Judgement) -> Judgement:
    """``judgement`` when it is a well-formed answer to ``query`` (DataError else)."""
    get_kind(query.kind).check_answer(query, judgement)
    return judgement


def pair_of(query: Query, answerer: str) -> tuple[str, str]:
    """The two segment ids of a query of one behaviour against one other, for answerers that
    compare two behaviours only; a DataError naming ``answerer`` and the query's kind else."""
    kind = kind_of(query)
    pair = kind.as_pair(query)
    if pair is None:
        raise DataError(
            f"{answerer} answers pairwise comparisons only; query {query.id} is a {kind.title} "
            f"(kind {query.kind!r}). Ask it pair queries (e.g. --selector disagreement)"
        )
    return pair


def answer_labels(query: Query, p: float, judgement_ids: tuple[str, ...]) -> list[Label]:
    """The labels of one answer ``p`` to a query of one item (a pair: one label; a group
    comparison: its max(m, n) pairs), by the query's kind's label rule."""
    kind = kind_of(query)
    if kind.items(query) != ("",):
        raise DataError(
            f"query {query.id} is a {kind.title} (kind {query.kind!r}); only answers to pair and "
            "group queries are one p (a ranking's labels come from its judgement: "
            "kind_of(query).labels(query, judgement); rating streams go through "
            "WindowAggregator or VotingAggregator)"
        )
    return kind.item_labels(query, "", p, judgement_ids)
