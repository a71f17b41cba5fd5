"""Each person's question queue (issue #25): no pair asked twice to the same person, across query
ids and rounds; skip moves a query to the end of its round; "can't tell" retires a pair; an
optional share of answered pairs comes back once as a consistency check."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from preflab.errors import DataError
from preflab.records import Annotator, Judgement, Query, Rating
from preflab.store import FeedbackStore
from preflab.testing.factories import make_segments
from tests.store.reads import count_query_reads


@pytest.fixture
def store(store_url: str, tmp_path) -> FeedbackStore:
    s = FeedbackStore(store_url, array_dir=tmp_path / "segments")
    segs = make_segments(6, rng=np.random.default_rng(3), env_id="Toy-v0", episode=range(6))
    s.segments.add(segs)
    for who in ("ann", "ben"):
        s.annotators.add(Annotator(id=who, source="human", name=who))
    s.seg = [x.id for x in segs]  # type: ignore[attr-defined]
    yield s
    s.close()


def pair(qid: str, a: str, b: str, round: int = 0) -> Query:
    return Query(id=qid, kind="pair", a=(a,), b=(b,), round=round)


def answer(store: FeedbackStore, who: str, qid: str, p: float | None) -> Judgement:
    j = Judgement(id=f"j-{who}-{qid}-{p}", query_id=qid, annotator_id=who, source="human", p=p)
    store.answers.add([j])
    return j


def ids(qs: list[Query]) -> list[str]:
    return [q.id for q in qs]


def test_the_same_pair_is_asked_once_per_person_across_query_ids_and_rounds(
    store: FeedbackStore,
) -> None:
    s = store.seg  # type: ignore[attr-defined]
    # round 0 asks (s0, s1) three times (once the other way round) and (s2, s3) once
    store.queries.add(
        [
            pair("q0", s[0], s[1]),
            pair("q1", s[1], s[0]),
            pair("q2", s[0], s[1]),
            pair("q3", s[2], s[3]),
        ]
    )
    assert ids(store.people.queue("ann")) == ["q0", "q3"]  # each pair once
    answer(store, "ann", "q0", 1.0)
    assert ids(store.people.queue("ann")) == ["q3"]
    assert ids(store.people.queue("ben")) == ["q0", "q3"]  # per person
    # a later round asks the answered pair again: not to ann
    store.queries.add([pair("q4", s[1], s[0], round=1), pair("q5", s[4], s[5], round=1)])
    assert ids(store.people.queue("ann")) == ["q5", "q3"]
    assert ids(store.people.queue("ann", limit=1)) == ["q5"]
    assert ids(store.people.queue("ben")) == ["q4", "q5", "q3"]
    # undoing the answer brings the pair back (once)
    store.answers.retract("j-ann-q0-1.0", "ann")
    assert ids(store.people.queue("ann")) == ["q4", "q5", "q3"]


def test_cant_tell_retires_the_pair_for_that_person(store: FeedbackStore) -> None:
    s = store.seg  # type: ignore[attr-defined]
    store.queries.add([pair("q0", s[0], s[1]), pair("q1", s[2], s[3]), pair("q2", s[1], s[0])])
    answer(store, "ann", "q0", None)
    assert ids(store.people.queue("ann")) == ["q1"]
    assert ids(store.people.queue("ben")) == ["q0", "q1"]


def test_skip_moves_a_query_to_the_end_of_its_round(store: FeedbackStore) -> None:
    s = store.seg  # type: ignore[attr-defined]
    store.queries.add(
        [
            pair("a", s[0], s[1]),
            pair("b", s[2], s[3]),
            pair("c", s[4], s[5]),
            pair("old", s[0], s[2], round=-1),
        ]
    )
    assert ids(store.people.queue("ann")) == ["a", "b", "c", "old"]
    store.people.skip("ann", "a")
    assert ids(store.people.queue("ann")) == ["b", "c", "a", "old"]
    store.people.skip("ann", "b")
    assert ids(store.people.queue("ann")) == ["c", "a", "b", "old"]
    store.people.skip("ann", "a")  # skipped again: last again
    assert ids(store.people.queue("ann")) == ["c", "b", "a", "old"]
    assert store.people.state("ann", "a")["skips"] == 2  # type: ignore[index]
    assert ids(store.people.queue("ben")) == ["a", "b", "c", "old"]  # ann's skips are hers
    assert ids(store.people.queue("ann", exclude=["c"])) == ["b", "a", "old"]


def test_served_time_is_kept_per_person(store: FeedbackStore) -> None:
    s = store.seg  # type: ignore[attr-defined]
    store.queries.add([pair("q0", s[0], s[1])])
    assert store.people.state("ann", "q0") is None
    store.people.mark_served("ann", "q0")
    first = store.people.state("ann", "q0")
    assert first is not None and first["served_at"] is not None and first["skips"] == 0
    store.people.skip("ann", "q0")
    after = store.people.state("ann", "q0")
    assert after is not None and after["served_at"] == first["served_at"]
    assert after["skipped_at"] is not None and store.people.state("ben", "q0") is None
    store.people.mark_served("ann", "q0")  # served again: the first time counts
    assert store.people.state("ann", "q0")["served_at"] == first["served_at"]  # type: ignore[index]


def test_repeat_share_re_asks_answered_pairs_once_and_reports_agreement(
    store: FeedbackStore,
) -> None:
    s = store.seg  # type: ignore[attr-defined]
    qs = [pair(f"q{k}", s[k], s[k + 1]) for k in range(5)]
    store.queries.add(qs)
    for q in qs:
        answer(store, "ann", q.id, 1.0)
    assert store.people.queue("ann") == []
    assert store.people.queue("ann", repeat_share=0.0) == []
    again = ids(store.people.queue("ann", repeat_share=1.0))
    assert again == [q.id for q in qs]  # every answered pair, each once
    with pytest.raises(DataError, match="repeat_share"):
        store.people.queue("ann", repeat_share=1.5)
    # answered a second time: not asked a third time; agreement per annotator
    store.answers.add(
        [
            Judgement(id="j2-q0", query_id="q0", annotator_id="ann", source="human", p=1.0),
            Judgement(id="j2-q1", query_id="q1", annotator_id="ann", source="human", p=0.0),
        ]
    )
    assert "q0" not in ids(store.people.queue("ann", repeat_share=1.0))
    assert store.people.consistency() == {"ann": (2, 1)}
    # a can't-tell answer is never re-asked
    store.queries.add([pair("q9", s[0], s[5])])
    answer(store, "ben", "q9", None)
    assert "q9" not in ids(store.people.queue("ben", repeat_share=1.0))


def test_a_repeat_shown_the_other_way_round_is_compared_by_behaviour(
    store: FeedbackStore,
) -> None:
    s = store.seg  # type: ignore[attr-defined]
    store.queries.add([pair("x", s[0], s[1]), pair("y", s[1], s[0], round=1)])
    answer(store, "ann", "x", 1.0)  # s0 preferred
    answer(store, "ann", "y", 0.0)  # s0 (now on the right) preferred again: agrees
    answer(store, "ben", "x", 1.0)
    answer(store, "ben", "y", 1.0)  # s1 preferred: disagrees
    assert store.people.consistency() == {"ann": (1, 1), "ben": (1, 0)}


def test_a_skip_alone_never_counts_as_served(store: FeedbackStore) -> None:
    s = store.seg  # type: ignore[attr-defined]
    store.queries.add([pair("q0", s[0], s[1])])
    store.people.skip("ann", "q0")
    store.people.skip("ann", "q0")  # skipped again, never shown: still not served
    state = store.people.state("ann", "q0")
    assert state is not None and state["skips"] == 2 and state["served_at"] is None
    assert not store.people.served("ann", "q0")
    store.people.mark_served("ann", "q0")
    assert store.people.served("ann", "q0") and not store.people.served("ben", "q0")


def test_reasked_is_the_queues_consistency_check(store: FeedbackStore) -> None:
    s = store.seg  # type: ignore[attr-defined]
    qs = [pair(f"q{k}", s[k], s[k + 1]) for k in range(3)]
    store.queries.add(qs)
    answer(store, "ann", "q0", 1.0)
    answer(store, "ann", "q1", None)  # can't tell: never asked again
    assert not store.people.reasked("ann", qs[0], 0.0)
    assert store.people.reasked("ann", qs[0], 1.0)
    assert not store.people.reasked("ann", qs[1], 1.0)
    assert not store.people.reasked("ann", qs[2], 1.0)  # not answered: no re-ask
    again = set(ids(store.people.queue("ann", repeat_share=1.0)))
    assert {q.id for q in qs if store.people.reasked("ann", q, 1.0)} == again - {"q2"}
    answer(store, "ann", "q0", 0.0)  # answered twice: not a third time
    assert not store.people.reasked("ann", qs[0], 1.0)


# ----- a long queue: the database picks the first few (no read of every open query) ----------


def long_run(store: FeedbackStore, *, rounds: int = 6, per_round: int = 500) -> list[Query]:
    """``rounds`` × ``per_round`` pair queries over 400 segment ids (pairs asked again, in
    either order), ann's answers to every tenth, her skips of a few in the newest round."""
    rng = np.random.default_rng(7)
    qs = [
        Query(id=f"r{r}-{k}", kind="pair", a=(f"s{x}",), b=(f"s{y}",), round=r)
        for r in range(rounds)
        for k, (x, y) in enumerate(rng.choice(400, size=(per_round, 2), replace=True))
        if x != y
    ]
    store.queries.add(qs)
    store.answers.add(
        Judgement(id=f"j-{q.id}", query_id=q.id, annotator_id="ann", source="human", p=1.0)
        for q in qs[::10]
    )
    for q in [q for q in qs if q.round == rounds - 1][1:6:2]:
        store.people.skip("ann", q.id)
    return qs


def test_the_first_few_of_a_long_queue_are_picked_by_the_database(
    store: FeedbackStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The studio asks for the next few (GET /api/queries/next, /ahead) and how many are left
    (GET /api/status) on every page poll: the store reads those few rows, and counts in SQL,
    whatever the number of open queries (it read all 3,000 here, and decoded each)."""
    qs = long_run(store)
    read = count_query_reads(monkeypatch)
    first = store.people.queue("ann", limit=5)
    assert read == ids(first)  # those five rows, nothing else
    del read[:]
    ahead = store.people.queue("ann", limit=8, repeat_share=0.5, exclude=[first[0].id])
    assert read == ids(ahead) and len(ahead) == 8
    del read[:]
    left = store.people.counts("ann")
    assert read == []  # counted in the database
    # the same as the whole queue read and cut
    whole = store.people.queue("ann")
    assert ids(first) == ids(whole[:5]) and left == {"pair": len(whole)}
    assert ids(ahead) == ids(store.people.queue("ann", repeat_share=0.5, exclude=[first[0].id])[:8])
    assert 1000 < len(whole) < len(qs)  # answered pairs and pairs asked twice left out
    assert whole[0].round == 5 and [q.id for q in whole if q.round == 5][-3:] == [
        "r5-1",
        "r5-3",
        "r5-5",
    ]  # her skips: last in their round, the last skipped last


def test_a_negative_limit_is_refused(store: FeedbackStore) -> None:
    with pytest.raises(DataError, match=r"limit must be a count ≥ 0"):
        store.people.queue("ann", limit=-1)
    assert store.people.queue("ann", limit=0) == []


# ----- the queue against a plain reading of its rules, on random small stores ----------------

SEGS = ("s0", "s1", "s2", "s3")
WHO = ("ann", "ben")


def _side(ids: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(sorted(ids))


def _same_question(q: Query) -> frozenset[tuple[str, ...]]:
    """Its two sides, each a set of segments, in either order."""
    return frozenset({_side(q.a), _side(q.b)})


def _drawn(who: str, q: Query, share: float) -> bool:
    """The studio's draw of (person, pair) for a consistency check: SHA-256 of the person and
    the pair's two sides (ids sorted and joined by U+001F, the sides sorted), below ``share``."""
    import hashlib

    x, y = sorted("\x1f".join(_side(s)) for s in (q.a, q.b))
    digest = hashlib.sha256("\x00".join((who, x, y)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64 < share


def reference_queue(
    world: dict, who: str, *, kind: str | None, exclude: set[str], share: float
) -> list[Query]:
    """The queue as its rules say, read off the example's own records (not the store)."""
    qs: list[Query] = world["queries"]
    seq = {q.id: k for k, q in enumerate(qs)}
    counted = [(w, q, p) for jid, w, q, p in world["answers"] if jid not in world["undone"]]
    answered = {q.id for w, q, _p in counted if w == who}
    per_pair: dict[frozenset, list[int]] = {}
    for w, q, p in counted:
        if w == who and q.kind != "rating":
            n = per_pair.setdefault(_same_question(q), [0, 0])
            n[0] += 1
            n[1] += p is not None
    open_qs = sorted(
        (
            q
            for q in qs
            if (kind is None or q.kind == kind)
            and q.id not in world["withdrawn"]
            and q.meta.get("created_by") != "studio"
            and q.id not in answered
            and (who, q.id) not in world["rated"]
        ),
        key=lambda q: (-q.round, seq[q.id]),
    )
    last_skip = {qid: k for k, (w, qid) in enumerate(world["skips"]) if w == who}
    gone_pairs = {_same_question(q) for q in open_qs if q.id in exclude}
    fresh: list[Query] = []
    seen: set[frozenset] = set()
    for q in open_qs:
        if q.id in exclude:
            continue
        if q.kind == "rating":  # streams: every one, no pairs
            fresh.append(q)
            continue
        key = _same_question(q)
        if key in per_pair or key in seen or key in gone_pairs:
            continue
        seen.add(key)
        fresh.append(q)
    fresh.sort(key=lambda q: (-q.round, q.id in last_skip, last_skip.get(q.id, -1), seq[q.id]))
    again = [
        q
        for q in sorted(qs, key=lambda q: (-q.round, seq[q.id]))
        if q.id in answered
        and q.kind == "pair"
        and per_pair.get(_same_question(q)) == [1, 1]
        and _drawn(who, q, share)
        and q.id not in exclude
    ]
    return fresh + again


def draw_queries(
    draw: st.DrawFn,
    *,
    pairs: st.SearchStrategy[str],
    others: st.SearchStrategy[str],
    n: tuple[int, int],
    pair_share: int,
) -> list[Query]:
    """Queries q0, q1, ... of every kind over rounds 0-2 (``pair_share`` pairs to each group,
    ranking and rating; pairs' segments from ``pairs``, the others' from ``others``), some groups
    composed in the studio."""
    qs: list[Query] = []
    for k in range(draw(st.integers(*n))):
        kind = draw(st.sampled_from(["pair"] * pair_share + ["group", "ranking", "rating"]))
        picked = draw(
            st.lists(pairs if kind == "pair" else others, min_size=2, max_size=4, unique=True)
        )
        cut = draw(st.integers(1, len(picked) - 1))
        a, b = (picked[:1], picked[1:2]) if kind == "pair" else (picked[:cut], picked[cut:])
        if kind in ("ranking", "rating"):
            a, b = picked, []
        meta = {"created_by": "studio"} if kind == "group" and draw(st.booleans()) else {}
        qs.append(
            Query(
                id=f"q{k}",
                kind=kind,
                a=tuple(a),
                b=tuple(b),
                round=draw(st.integers(0, 2)),
                meta=meta,
            )
        )
    return qs


@st.composite
def worlds(draw: st.DrawFn) -> dict:
    """A small run: queries of every kind (the same pairs in either order, across rounds and
    kinds, some withdrawn, some composed in the studio), answers, undos, skips and ratings."""
    segs = st.sampled_from(SEGS)
    qs = draw_queries(draw, pairs=segs, others=segs, n=(1, 12), pair_share=3)
    ids_ = [q.id for q in qs]
    world: dict = {
        "queries": qs,
        "withdrawn": set(draw(st.lists(st.sampled_from(ids_), max_size=2))),
        "answers": [],
        "undone": set(),
        "skips": [],
        "rated": set(),
    }
    for n in range(draw(st.integers(0, 14))):
        act = draw(st.sampled_from(["answer", "answer", "answer", "undo", "skip", "skip", "rate"]))
        who = draw(st.sampled_from(WHO))
        q = draw(st.sampled_from(qs))
        if act == "answer" and q.kind != "rating":
            p = None if q.kind == "ranking" else draw(st.sampled_from([None, 0.0, 0.5, 1.0]))
            world["answers"].append((f"j{n}", who, q, p))
        elif act == "undo" and world["answers"]:
            world["undone"].add(draw(st.sampled_from(world["answers"]))[0])
        elif act == "skip":
            world["skips"].append((who, q.id))
        elif act == "rate" and q.kind == "rating":
            world["rated"].add((who, q.id))
    return world


def _clear(store: FeedbackStore) -> None:
    from preflab.store import schema as S

    with store.engine.begin() as c:
        for t in (S.retractions, S.judgements, S.ratings, S.queue_states, S.withdrawals, S.queries):
            c.execute(t.delete())


def _write(store: FeedbackStore, world: dict) -> None:
    """The example into the store, in the order it happened."""
    store.queries.add(world["queries"], withdrawn=world["withdrawn"])
    for jid, who, q, p in world["answers"]:
        store.answers.add([Judgement(id=jid, query_id=q.id, annotator_id=who, source="human", p=p)])
    for jid, who, _q, _p in world["answers"]:
        if jid in world["undone"]:
            store.answers.retract(jid, who)
    for who, qid in world["skips"]:
        store.people.skip(who, qid)
    for t, (who, qid) in enumerate(sorted(world["rated"])):
        store.ratings.add([Rating(annotator_id=who, stream_id=qid, step=0, t=float(t), value=0.5)])


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(world=worlds(), data=st.data())
def test_the_queue_is_its_rules_on_random_stores(
    store: FeedbackStore, world: dict, data: st.DataObject
) -> None:
    """The queue picked in SQL against a plain Python reading of its rules: each pair once
    (either order, across ids, rounds and kinds), answered pairs left out (undone answers
    not), streams each, skips last in their round, exclusions and their pairs, re-asks last;
    limits, per-kind counts and re-asks agree."""
    _clear(store)
    _write(store, world)
    ids_ = [q.id for q in world["queries"]]
    for _ in range(3):
        who = data.draw(st.sampled_from(WHO))
        kind = data.draw(st.sampled_from([None, None, "pair", "group", "ranking", "rating"]))
        exclude = data.draw(st.lists(st.sampled_from([*ids_, "unknown"]), max_size=3))
        share = data.draw(st.sampled_from([0.0, 0.5, 1.0]))
        limit = data.draw(st.sampled_from([None, None, 0, 1, 2, 3, 5]))
        want = reference_queue(world, who, kind=kind, exclude=set(exclude), share=share)
        got = store.people.queue(who, kind=kind, limit=limit, repeat_share=share, exclude=exclude)
        assert ids(got) == ids(want if limit is None else want[:limit])
        counts = store.people.counts(who, kind=kind, repeat_share=share, exclude=exclude)
        assert counts == dict(Counter(q.kind for q in want))
    for who in WHO:  # the re-ask of one query (an answer's check): the same rule
        for q in world["queries"]:
            mine = [
                p
                for jid, w, x, p in world["answers"]
                if w == who and jid not in world["undone"] and x.kind != "rating"
                if _same_question(x) == _same_question(q)
            ]
            due = q.kind == "pair" and len(mine) == 1 and mine[0] is not None
            assert store.people.reasked(who, q, 0.5) == (due and _drawn(who, q, 0.5))
