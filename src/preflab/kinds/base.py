"""The contract of a kind of feedback: one part that owns its queries' shape, its answers and
its label rule.

A kind is an object with the class attributes and methods of :class:`FeedbackKind`. The store,
the aggregators, the exporter, the simulated answerers and the studio ask the kind of a query
(:func:`preflab.kinds.kind_of`) what they need to know; none of them tests a kind's name.

**From an answer to labels (the label rule), in two steps.** An answer (a judgement) votes on
the query's *items* (:meth:`FeedbackKind.votes`): a pair or a group comparison has one item,
the query itself; a ranking of k clips has one item per pair of its clips. An aggregator
combines the votes of one item (one answer's vote, the mean of several samples, a crowd's
majority or SML label) into one p, and :meth:`FeedbackKind.item_labels` turns that item and p
into training labels ``(a, b, p)``. A kind whose answers arrive as a stream of ratings
(``answered_by = "ratings"``) has no items; its labels come from the window and voting
aggregators (Pref-GUIDE).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, Literal, Protocol

from preflab.errors import DataError
from preflab.records import Judgement, Label, Query, Segment, check_probability

Item = str
"""The key of one thing an answer votes on, unique within its query ('' for the query itself)."""


class Comparer(Protocol):
    """A simulated annotator's verbs, as the kinds call them (:class:`preflab.sources.teacher.
    SyntheticTeacher` has all three): compare two behaviours, two groups, or rank several."""

    def judge(self, a: Segment, b: Segment) -> float | None:
        """P(a ≻ b): 1, 0, 0.5, or None to skip."""
        ...

    def judge_groups(self, a: Sequence[Segment], b: Sequence[Segment]) -> float | None:
        """P(group a ≻ group b): 1, 0, 0.5, or None to skip."""
        ...

    def rank(self, segments: Sequence[Segment]) -> tuple[int, ...] | None:
        """The rank of each segment (0 = best; equal ranks are ties), or None to skip."""
        ...


class FeedbackKind(ABC):
    """One kind of feedback. Subclasses set the class attributes and implement the methods."""

    name: ClassVar[str]
    """The kind's id, stored in ``queries.kind`` (at most 8 characters) and exported."""
    title: ClassVar[str]
    """What a person calls it, for messages and docs ('pairwise comparison', …)."""
    answered_by: ClassVar[Literal["judgement", "ratings"]] = "judgement"
    """'judgement': one answer per annotator and query (a :class:`Judgement`); 'ratings': a
    stream of real-time ratings about the query's segments (:class:`preflab.records.Rating`)."""
    studio_view: ClassVar[str]
    """The studio view that shows a query of this kind ('compare', 'groups', 'rate', 'rank')."""
    answer_field: ClassVar[str] = "p"
    """The field of an answer as a person gives it (the studio's ``POST /api/judgements``
    body): ``p`` = P(a ≻ b), or ``ranks`` for a ranking; ``null`` is can't tell."""
    consistency_checks: ClassVar[bool] = False
    """True when the studio may ask a person a query of this kind a second time on purpose
    (its ``repeat_share`` consistency checks); pairs only, today."""

    @abstractmethod
    def check(self, query: Query) -> None:
        """Raise a DataError, saying what was expected, unless ``query`` has this kind's shape."""

    def segment_ids(self, query: Query) -> tuple[str, ...]:
        """Every segment the query shows, in its order (side a, then side b)."""
        return (*query.a, *query.b)

    def clip_sides(self, query: Query) -> tuple[tuple[str, ...], ...]:
        """The clips the studio shows, as tiles: one tuple per tile (a stream's tile holds its
        consecutive segments, played as one clip)."""
        return tuple((sid,) for sid in self.segment_ids(query))

    def as_pair(self, query: Query) -> tuple[str, str] | None:
        """``(a, b)`` when the query is one behaviour against one other (answerers that only
        compare two behaviours, such as the text LLM judge, ask this); None otherwise."""
        return None

    @property
    def streams(self) -> bool:
        """True when answers arrive as rating streams (no judgements, no items)."""
        return self.answered_by == "ratings"

    @abstractmethod
    def items(self, query: Query) -> tuple[Item, ...]:
        """The items an answer to ``query`` votes on (empty for a stream)."""

    @abstractmethod
    def votes(self, query: Query, judgement: Judgement) -> tuple[tuple[Item, float], ...]:
        """The answer's vote p = P(first ≻ second) on each item; empty for a skip."""

    @abstractmethod
    def item_labels(
        self, query: Query, item: Item, p: float, judgement_ids: tuple[str, ...]
    ) -> list[Label]:
        """The training labels of ``item`` of ``query`` aggregated to ``p``."""

    def labels(self, query: Query, judgement: Judgement) -> list[Label]:
        """The labels one answer gives on its own (identity aggregation)."""
        out: list[Label] = []
        for item, p in self.votes(query, judgement):
            out.extend(self.item_labels(query, item, p, (judgement.id,)))
        return out

    def is_equal(self, query: Query, judgement: Judgement) -> bool:
        """True when the answer says all it shows is equally good (every vote 0.5)."""
        votes = self.votes(query, judgement)
        return bool(votes) and all(p == 0.5 for _, p in votes)

    def answer_help(self, query: Query) -> str:
        """How a person answers ``query``, for error messages."""
        return "p (1 = a/left preferred, 0 = b/right, 0.5 = equally good, null = can't tell)"

    def answer_from(self, query: Query, value: Any) -> tuple[float | None, dict[str, object]]:
        """``(p, meta)`` of a person's answer given as ``value`` of :attr:`answer_field`
        (None: can't tell); a DataError saying what was expected when it is malformed."""
        if value is None:
            return None, {}
        return check_probability(value, f"the answer to query {query.id}"), {}

    def answer_value(self, query: Query, judgement: Judgement) -> Any:
        """A stored answer as the person gave it (the value of :attr:`answer_field`)."""
        return judgement.p

    def check_answer(self, query: Query, judgement: Judgement) -> None:
        """Raise a DataError unless ``judgement`` is a well-formed answer to ``query`` (by
        default every judgement is: its p is checked by the record itself)."""
        return None

    @abstractmethod
    def simulate(
        self, comparer: Comparer, query: Query, segments: Sequence[Segment]
    ) -> tuple[float | None, dict[str, object]]:
        """A simulated annotator's answer to ``query`` about ``segments`` (in
        :meth:`segment_ids` order): ``(p, meta)``, p None to skip."""


class OneAnswerKind(FeedbackKind):
    """A kind whose answer is one p about the query as a whole (a pair, a group comparison):
    the query is its only item."""

    def items(self, query: Query) -> tuple[Item, ...]:
        return ("",)

    def votes(self, query: Query, judgement: Judgement) -> tuple[tuple[Item, float], ...]:
        return () if judgement.p is None else (("", judgement.p),)


def refuse_streams(kind: FeedbackKind, query: Query) -> DataError:
    """The error for asking a stream kind for a judgement's votes."""
    return DataError(
        f"query {query.id} is a {kind.title} (kind {kind.name!r}): its answers are rating "
        "streams, aggregated by the window or voting aggregator, not judgements"
    )
