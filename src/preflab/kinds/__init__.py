"""Kinds of feedback as parts: pair, group, rating stream and ranking, each one object that
owns its queries' shape, its answers and its label rule (:mod:`preflab.kinds.base`), found by
name in one registry (:mod:`preflab.kinds.registry`)."""

from preflab.kinds.base import Comparer, FeedbackKind, Item, OneAnswerKind
from preflab.kinds.group import GROUP, GROUP_LIMIT, GroupKind, check_groups, expand, query_rng
from preflab.kinds.pair import PAIR, PairKind
from preflab.kinds.ranking import DEFAULT_RANK_SIZE, RANK_SIZES, RANKING, RankingKind
from preflab.kinds.rating import RATING, RatingKind
from preflab.kinds.registry import (
    answer_labels,
    check_judgement,
    check_query,
    get_kind,
    kind_names,
    kind_of,
    pair_of,
    register,
    repeatable_kind_names,
    stream_kind_names,
)

__all__ = [
    "DEFAULT_RANK_SIZE",
    "GROUP",
    "GROUP_LIMIT",
    "PAIR",
    "RANKING",
    "RANK_SIZES",
    "RATING",
    "Comparer",
    "FeedbackKind",
    "GroupKind",
    "Item",
    "OneAnswerKind",
    "PairKind",
    "RankingKind",
    "RatingKind",
    "answer_labels",
    "check_groups",
    "check_judgement",
    "check_query",
    "expand",
    "get_kind",
    "kind_names",
    "kind_of",
    "pair_of",
    "query_rng",
    "register",
    "repeatable_kind_names",
    "stream_kind_names",
]
