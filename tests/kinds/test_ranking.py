"""The ranking kind: its shape, its answers, its label rule (full rank-breaking), every
aggregator over it, the store, the simulated teacher and the ranking selector. Expected values
are worked out by hand or from the Plackett–Luce formula, not from the code under test."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace
from itertools import permutations

import numpy as np
import pytest

from preflab.aggregate import (
    ConfidenceAggregator,
    Feedback,
    IdentityAggregator,
    MajorityAggregator,
)
from preflab.errors import ConfigError, DataError
from preflab.kinds import RANKING, answer_labels, check_query, kind_of
from preflab.records import Judgement, Query
from preflab.selection.selectors import RankingSelector
from preflab.sources.teacher import SyntheticTeacher, TeacherConfig
from preflab.store import FeedbackStore
from preflab.testing.factories import make_query, make_segment

Q4 = Query(id="r", kind="ranking", a=("w", "x", "y", "z"))


def _answer(jid: str, ranks: list[int], *, who: str = "u", query: Query = Q4) -> Judgement:
    p, meta = RANKING.answer(ranks, len(query.a))
    return Judgement(id=jid, query_id=query.id, annotator_id=who, source="human", p=p, meta=meta)


def test_a_ranking_query_has_two_to_eight_different_clips_and_no_side_b() -> None:
    check_query(Q4)
    for bad, match in (
        (Query(id="q", kind="ranking", a=("x",)), "2 to 8"),
        (Query(id="q", kind="ranking", a=tuple("abcdefghi")), "2 to 8"),
        (Query(id="q", kind="ranking", a=("x", "x", "y")), "different"),
        (Query(id="q", kind="ranking", a=("x", "y"), b=("z",)), "side b must be empty"),
    ):
        with pytest.raises(DataError, match=match):
            check_query(bad)


def test_the_other_kinds_check_their_shapes_and_unknown_kinds_are_named() -> None:
    with pytest.raises(DataError, match="exactly one"):
        check_query(Query(id="q", kind="pair", a=("x", "y"), b=("z",)))
    with pytest.raises(DataError, match="side b is empty"):
        check_query(Query(id="q", kind="group", a=("x", "y")))
    with pytest.raises(DataError, match="side b must be empty"):
        check_query(Query(id="q", kind="rating", a=("x",), b=("y",)))
    with pytest.raises(DataError, match=r"unknown query kind 'triple'.*'ranking'"):
        check_query(Query(id="q", kind="triple", a=("x",), b=("z",)))


def test_an_answers_p_is_its_agreement_with_the_query_order() -> None:
    # ranks w=1, x=0, y=2, z=0: pairs (w,x) 0, (w,y) 1, (w,z) 0, (x,y) 1, (x,z) ½, (y,z) 0
    p, meta = RANKING.answer([1, 0, 2, 0], 4)
    assert p == pytest.approx(2.5 / 6) and meta == {"ranks": [1, 0, 2, 0]}
    # two clips: exactly the pairwise answer
    assert [RANKING.answer(r, 2)[0] for r in ([0, 1], [1, 0], [0, 0])] == [1.0, 0.0, 0.5]


@pytest.mark.parametrize(
    ("ranks", "match"),
    [
        ([0, 2, 1, 3, 4], "one rank for each"),
        ([0, 2, 2, 3], "dense"),
        ([0, 1, 1, -1], "dense"),
        ([0, 1, True, 2], "whole numbers"),
        ([0.0, 1, 2, 3], "whole numbers"),
        ("0123", "list of 4"),
    ],
)
def test_malformed_ranks_are_refused_with_what_was_expected(ranks: object, match: str) -> None:
    with pytest.raises(DataError, match=match):
        RANKING.answer(ranks, 4)  # type: ignore[arg-type]


def test_full_rank_breaking_gives_every_pair_once_with_ties_at_one_half() -> None:
    labels = kind_of(Q4).labels(Q4, _answer("j", [1, 0, 2, 0]))
    got = {(lab.a, lab.b): lab.p for lab in labels}
    assert got == {
        ("w", "x"): 0.0,
        ("w", "y"): 1.0,
        ("w", "z"): 0.0,
        ("x", "y"): 1.0,
        ("x", "z"): 0.5,
        ("y", "z"): 0.0,
    }
    assert all(lab.judgement_ids == ("j",) for lab in labels)
    skipped = Judgement(id="s", query_id="r", annotator_id="u", source="human", p=None)
    assert kind_of(Q4).labels(Q4, skipped) == []
    with pytest.raises(DataError, match="only answers to pair and group"):
        answer_labels(Q4, 1.0, ("j",))


def test_identity_and_confidence_aggregate_a_ranking_by_its_pairs() -> None:
    js = [  # two samples of one annotator (as the LLM judges number theirs)
        replace(_answer("j1", [0, 1, 2, 3]), meta={"ranks": [0, 1, 2, 3], "sample": 0}),
        replace(_answer("j2", [1, 0, 2, 3]), meta={"ranks": [1, 0, 2, 3], "sample": 1}),
    ]
    fb = Feedback(queries={"r": Q4}, judgements=js)
    assert len(IdentityAggregator().labels(fb)) == 12  # 6 pairs × 2 samples
    conf = {(lab.a, lab.b): lab.p for lab in ConfidenceAggregator().labels(fb)}
    # the samples disagree on (w, x) only: mean 0.5; every other pair 1.0
    assert conf == {pair: (0.5 if pair == ("w", "x") else 1.0) for pair in conf}
    assert len(conf) == 6


def test_majority_votes_on_each_pair_of_a_ranking_separately() -> None:
    q3 = Query(id="r3", kind="ranking", a=("x", "y", "z"))
    js = [
        _answer("j1", [0, 1, 2], who="u1", query=q3),  # x > y > z
        _answer("j2", [1, 0, 2], who="u2", query=q3),  # y > x > z
        _answer("j3", [2, 1, 0], who="u3", query=q3),  # z > y > x
    ]
    agg = MajorityAggregator()
    got = {(lab.a, lab.b): lab.p for lab in agg.labels(Feedback(queries={"r3": q3}, judgements=js))}
    # (x, y): +1 −1 −1 → y; (x, z): +1 +1 −1 → x; (y, z): +1 +1 −1 → y
    assert got == {("x", "y"): 0.0, ("x", "z"): 1.0, ("y", "z"): 1.0}
    assert agg.last_table is not None and agg.last_table.items == ("0>1", "0>2", "1>2")


def test_the_store_keeps_rankings_and_refuses_a_ranking_without_ranks(tmp_path) -> None:
    store = FeedbackStore(tmp_path / "f.db")
    segs = [make_segment(s, true_rewards=[float(k)], obs_dim=1) for k, s in enumerate("wxyz")]
    store.segments.add(segs)
    store.queries.add([Q4])
    (back,) = store.queries.all()
    assert back == Q4 and kind_of(back) is RANKING
    bad = Judgement(id="b", query_id="r", annotator_id="u", source="human", p=0.5)
    with pytest.raises(DataError, match=r"no meta\['ranks'\].*nothing was written"):
        store.answers.add([bad])
    wrong_p = replace(_answer("c", [0, 1, 2, 3]), p=0.0)
    with pytest.raises(DataError, match="agreement"):
        store.answers.add([wrong_p])
    assert store.answers.judgements() == []
    store.answers.add([_answer("j", [3, 2, 1, 0])])
    ((_seq, j),) = store.answers.judgements()
    assert j.meta["ranks"] == [3, 2, 1, 0] and j.p == 0.0
    store.close()


def _segs(returns: list[float]) -> list:
    return [make_segment(f"s{k}", true_rewards=[r], obs_dim=1) for k, r in enumerate(returns)]


def test_the_oracle_ranks_by_return_with_exact_ties() -> None:
    t = SyntheticTeacher()
    assert t.rank(_segs([0.5, 2.0, -1.0, 2.0])) == (1, 0, 2, 0)
    # two segments: the same answer as judge
    a, b = _segs([1.0, 0.0])
    assert RANKING.answer(t.rank([a, b]), 2)[0] == t.judge(a, b) == 1.0  # type: ignore[arg-type]


def test_the_teachers_equal_and_skip_rules_apply_to_rankings() -> None:
    assert SyntheticTeacher(TeacherConfig(equal_threshold=0.6)).rank(_segs([1.0, 0.5, 0.0])) == (
        0,
        0,
        0,
    )  # 1.0 ~ 0.5 and 0.5 ~ 0.0, chained along the order
    assert SyntheticTeacher(TeacherConfig(skip_threshold=2.0)).rank(_segs([1.0, 0.5])) is None


def test_finite_beta_rankings_follow_plackett_luce() -> None:
    beta, r = 1.0, [1.0, 0.0, -0.5]
    t = SyntheticTeacher(TeacherConfig(beta=beta), np.random.default_rng(3))
    n = 20_000
    seen = Counter(t.rank(_segs(r)) for _ in range(n))
    w = [math.exp(beta * x) for x in r]
    for order in permutations(range(3)):
        # Plackett–Luce: P(order) = Π_k w[o_k] / Σ_{m ≥ k} w[o_m]
        prob = 1.0
        for k in range(3):
            prob *= w[order[k]] / sum(w[o] for o in order[k:])
        ranks = tuple(order.index(i) for i in range(3))
        share = seen[ranks] / n
        assert abs(share - prob) < 4 * math.sqrt(prob * (1 - prob) / n), (order, share, prob)


def test_a_mistake_reverses_the_whole_order() -> None:
    t = SyntheticTeacher(TeacherConfig(epsilon=1.0), np.random.default_rng(0))
    assert t.rank(_segs([3.0, 1.0, 2.0])) == (2, 0, 1)


def test_the_teacher_answers_ranking_queries_as_a_source() -> None:
    segs = _segs([0.0, 3.0, 1.0, 2.0])
    q = RANKING.query([s.id for s in segs])
    t = SyntheticTeacher(annotator_id="oracle")
    t.submit([q], {s.id: s for s in segs})
    (j,) = t.collect()
    assert j.meta["ranks"] == [3, 0, 2, 1] and j.query_id == q.id
    # pairs i < j ranked i above j: (0,1) 0, (0,2) 0, (0,3) 0, (1,2) 1, (1,3) 1, (2,3) 0
    assert j.p == pytest.approx(2 / 6)


class _Returns:
    """A reward model stand-in with fixed per-member segment returns (M, N)."""

    def __init__(self, returns: np.ndarray) -> None:
        self.returns = returns

    def segment_returns(self, batch: object) -> np.ndarray:
        return self.returns


def test_the_selector_asks_the_set_the_members_disagree_on() -> None:
    segs = _segs([0.0] * 6)
    r = np.random.default_rng(7).normal(0, 2, size=(3, 6))  # 3 members' returns of 6 segments

    def score(members: np.ndarray, ids: tuple[int, ...]) -> float:  # by plain loops
        out = []
        for i, j in [(i, j) for i in ids for j in ids if i < j]:
            ps = [1 / (1 + math.exp(-(m[i] - m[j]))) for m in members]
            mean = sum(ps) / len(ps)
            out.append(sum((p - mean) ** 2 for p in ps) / len(ps))
        return sum(out) / len(out)

    best = max(
        ((i, j, k) for i in range(6) for j in range(i + 1, 6) for k in range(j + 1, 6)),
        key=lambda ids: score(r, ids),
    )
    sel = RankingSelector(k=3, oversample=200)  # every one of the 20 sets is sampled
    (q,) = sel.select(segs, _Returns(r), 1, np.random.default_rng(0))  # type: ignore[arg-type]
    assert set(q.a) == {f"s{i}" for i in best} and q.kind == "ranking" and not q.b
    assert q.meta["selector"] == "ranking-variance"
    assert q.meta["score"] == pytest.approx(score(r, best))
    random_qs = sel.select(segs, None, 4, np.random.default_rng(1))
    assert len(random_qs) == 4 and all(len(set(x.a)) == 3 for x in random_qs)
    assert len({frozenset(x.a) for x in random_qs}) == 4  # no set asked twice
    with pytest.raises(DataError, match="at least 3 different"):
        sel.select(segs[:2], None, 1, np.random.default_rng(0))
    with pytest.raises(ConfigError, match="2 to 8"):
        RankingSelector(k=9)


def test_make_query_builds_rankings_and_checks_them() -> None:
    assert kind_of(make_query("q", ("a", "b", "c"), (), kind="ranking")) is RANKING
    with pytest.raises(DataError):
        make_query("q", ("a",), (), kind="ranking")


def test_an_export_keeps_rankings_and_refuses_a_tampered_answer(tmp_path) -> None:
    import json

    import pyarrow.parquet as pq

    from preflab.export.feedback import export_run, read_export

    store = FeedbackStore(tmp_path / "f.db")
    segs = [make_segment(s, true_rewards=[float(k)], obs_dim=1) for k, s in enumerate("wxyz")]
    store.segments.add(segs)
    store.queries.add([Q4])
    store.answers.add([_answer("j", [1, 0, 2, 0])])
    export_run(store, tmp_path / "out")
    store.close()
    data = read_export(tmp_path / "out")
    (q,) = data.queries
    (j,) = data.judgements
    assert q == Q4 and j.meta["ranks"] == [1, 0, 2, 0]
    assert {(lab.a, lab.b, lab.p) for lab in data.answers} == {
        ("w", "x", 0.0),
        ("w", "y", 1.0),
        ("w", "z", 0.0),
        ("x", "y", 1.0),
        ("x", "z", 0.5),
        ("y", "z", 0.0),
    }
    # an answer edited by hand is refused on reading (its digest; and its ranks no longer match p)
    path = tmp_path / "out" / "judgements.parquet"
    rows = pq.read_table(path).to_pylist()
    rows[0]["meta"] = json.dumps({"ranks": [0, 1, 2, 3]})
    import pyarrow as pa

    pq.write_table(pa.Table.from_pylist(rows), path)
    with pytest.raises(DataError):
        read_export(tmp_path / "out")


def test_each_kind_says_how_a_person_answers_it() -> None:
    pair = Query(id="q", kind="pair", a=("x",), b=("y",))
    assert kind_of(pair).answer_field == "p" and kind_of(Q4).answer_field == "ranks"
    assert kind_of(pair).answer_from(pair, None) == (None, {})
    assert kind_of(pair).answer_from(pair, 0.5) == (0.5, {})
    with pytest.raises(DataError, match=r"\[0, 1\]"):
        kind_of(pair).answer_from(pair, 2.0)
    p, meta = kind_of(Q4).answer_from(Q4, [1, 0, 2, 0])
    assert (p, meta) == (pytest.approx(2.5 / 6), {"ranks": [1, 0, 2, 0]})
    assert kind_of(Q4).answer_from(Q4, None) == (None, {})
    j = _answer("j", [1, 0, 2, 0])
    assert kind_of(Q4).answer_value(Q4, j) == [1, 0, 2, 0]
    assert "e.g. [0, 1, 2, 3]" in kind_of(Q4).answer_help(Q4)
