"""A study's assignment on a real store (issue #61): each pair goes to k people, nobody gets a
pair twice, the pair with the fewest answers comes first, and attention checks (the oracle's
clearest pairs) are mixed in at the study's rate."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from preflab.records import Annotator, Judgement, Query
from preflab.store import FeedbackStore
from preflab.studio import study as S
from preflab.studio.study_assign import Assigner, draw
from preflab.studio.study_config import StudyConfig
from preflab.testing.factories import make_segments


def setup(
    tmp_path, n_queries: int, config: StudyConfig, *, oracle: bool = True
) -> tuple[FeedbackStore, list[Annotator]]:
    store = FeedbackStore(tmp_path / "feedback.db", array_dir=tmp_path / "segments")
    segs = make_segments(
        2 * n_queries,
        rng=np.random.default_rng(1),
        obs_dim=2,
        env_id="Toy-v0",
        random_rewards=oracle,
    )
    store.segments.add(segs)
    store.queries.add(
        [
            Query(
                id=f"q{i:03d}", kind="pair", a=(segs[2 * i].id,), b=(segs[2 * i + 1].id,), round=1
            )
            for i in range(n_queries)
        ]
    )
    S.create(store, config)
    study = store.studies.get(S.STUDY_ID)
    assert study is not None
    people = []
    for k in range(5):
        j = S.join(store, study, config, {"pid": f"person-{k}"}, cookie_key=None)
        store.studies.consent(j.participant.annotator_id, consent_sha256="x", token_hash=f"t{k}")
        store.studies.practice_done(j.participant.annotator_id)
        a = store.annotators.get(j.participant.annotator_id)
        assert a is not None
        people.append(a)
    return store, people


def answer(store: FeedbackStore, who: Annotator, q: Query, n: int) -> None:
    store.people.mark_served(who.id, q.id)
    store.answers.add(
        [Judgement(id=f"j-{who.id}-{n}", query_id=q.id, annotator_id=who.id, source="human", p=1.0)]
    )


def test_each_pair_goes_to_k_people_never_twice_fewest_answers_first(tmp_path) -> None:
    config = StudyConfig(overlap=2, gold_rate=0.0)
    store, people = setup(tmp_path, 6, config)
    assigner = Assigner()
    first = assigner.queue(store, people[0], config, kind="pair")
    assert [q.id for q in first][:2] == ["q000", "q001"]  # the selector's order when all equal
    answer(store, people[0], first[0], 0)
    # the next person gets a pair nobody answered before the one answered once
    second = assigner.queue(store, people[1], config, kind="pair")
    assert second[0].id == "q001" and second[-1].id == "q000"
    n = 1
    for _round in range(10):
        for who in people:
            qs = assigner.queue(store, who, config, kind="pair")
            if qs:
                answer(store, who, qs[0], n)
                n += 1
    by_query: dict[str, list[str]] = {}
    for _s, j in store.answers.judgements():
        by_query.setdefault(j.query_id, []).append(j.annotator_id)
    assert sorted(by_query) == [f"q{i:03d}" for i in range(6)]
    for who in by_query.values():
        assert len(who) == 2 and len(set(who)) == 2  # k people, each once
    assert all(assigner.queue(store, p, config, kind="pair") == [] for p in people)


def test_a_pair_served_to_someone_stays_reserved_for_them(tmp_path) -> None:
    config = StudyConfig(overlap=1, gold_rate=0.0, reserve_s=600)
    store, people = setup(tmp_path, 2, config)
    assigner = Assigner()
    q = assigner.queue(store, people[0], config, kind="pair", serve=True)[0]  # held for them
    assert [x.id for x in assigner.queue(store, people[1], config, kind="pair")] == ["q001"]
    assert assigner.queue(store, people[0], config, kind="pair")[0].id == q.id  # still theirs
    store.people.mark_served(people[2].id, "q001")  # shown without a hold: holds nothing
    assert [x.id for x in assigner.queue(store, people[1], config, kind="pair")] == ["q001"]
    store.people.skip(people[0].id, q.id)  # a skip gives the place up
    assert [x.id for x in assigner.queue(store, people[1], config, kind="pair")] == ["q000", "q001"]


def test_attention_checks_are_mixed_in_at_the_set_rate(tmp_path) -> None:
    config = StudyConfig(overlap=5, gold_rate=0.2)
    store, people = setup(tmp_path, 160, config)
    assigner = Assigner()
    who = people[0]
    served_gold = 0
    n_answers = 100
    for n in range(n_answers):
        q = assigner.queue(store, who, config, kind="pair")[0]
        gold = store.studies.gold()
        served_gold += q.id in gold
        answer(store, who, q, n)
    gold = store.studies.gold()
    # the oracle's clearest quarter of the pairs became checks, with the oracle's answer
    assert len(gold) == 40
    rets = store.studies.true_returns([s for q in store.queries.all() for s in (*q.a, *q.b)])
    for qid, p in gold.items():
        q = store.queries.get(qid)
        assert q is not None and p == (1.0 if rets[q.a[0]] > rets[q.b[0]] else 0.0)
    # the rate: the draws decide (the same on every reload); binomial(100, 0.2) within 3 sd
    expected = sum(draw(who.id, n) < 0.2 for n in range(n_answers))
    assert served_gold == expected
    assert 20 - 12 <= served_gold <= 20 + 12
    assert np.mean([draw("someone", n) < 0.2 for n in range(5000)]) == pytest.approx(0.2, abs=0.02)


def test_without_a_true_reward_the_owners_answers_are_the_checks(tmp_path) -> None:
    config = StudyConfig(overlap=3, gold_rate=0.5)
    store, people = setup(tmp_path, 8, config, oracle=False)
    assigner = Assigner()
    assigner.queue(store, people[0], config, kind="pair")
    assert store.studies.gold() == {}  # every return equal: no oracle
    store.annotators.add(Annotator(id="boss", source="human", meta={"role": "owner"}))
    store.answers.add(
        [
            Judgement(id="o1", query_id="q003", annotator_id="boss", source="human", p=0.0),
            Judgement(id="o2", query_id="q004", annotator_id="boss", source="human", p=0.5),
        ]
    )
    qs = Assigner().queue(store, people[1], config, kind="pair")  # (it looks every 10 s)
    assert store.studies.gold() == {"q003": 0.0}  # an "equal" is no check
    # the draws that say "check" put q003 first
    assert (qs[0].id == "q003") == (draw(people[1].id, 0) < 0.5)


def test_people_asking_at_once_get_different_pairs(tmp_path) -> None:
    config = StudyConfig(overlap=1, gold_rate=0.0)
    store, people = setup(tmp_path, 10, config)
    assigner = Assigner()
    got: dict[str, str] = {}
    start = threading.Barrier(len(people))

    def ask(who: Annotator) -> None:
        start.wait()
        got[who.id] = assigner.queue(store, who, config, kind="pair", serve=True)[0].id

    threads = [threading.Thread(target=ask, args=(p,)) for p in people]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got.values()) == [f"q{i:03d}" for i in range(len(people))]


def test_pairs_whose_checks_were_not_stored_are_considered_again(tmp_path) -> None:
    """The assigner remembers which pairs it considered as attention checks only once their
    checks are stored: a write that failed (a locked or lost database) is tried again on the
    next assignment, so those pairs still become checks."""
    config = StudyConfig(overlap=5, gold_rate=0.2)
    store, _people = setup(tmp_path, 40, config)
    assigner = Assigner()
    real = store.studies.consider_checks
    calls = {"n": 0}

    def failing_once(gaps, *, quantile):  # the oracle's checks fail to store once
        if not calls["n"]:
            calls["n"] += 1
            raise OSError("disk I/O error")
        return real(gaps, quantile=quantile)

    store.studies.consider_checks = failing_once  # type: ignore[method-assign]
    with pytest.raises(OSError):
        assigner.refresh_gold(store, store.queries.all())
    assert store.studies.gold() == {}
    assigner.refresh_gold(store, store.queries.all())
    assert len(store.studies.gold()) == 10  # the clearest quarter of 40 pairs
