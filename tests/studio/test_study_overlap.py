"""A study's promise that each pair is answered by ``overlap`` people, held through a real studio
on SQLite and PostgreSQL (issue #61): people asking at the same moment (with the page's ``after``
cursor, through two workers) never both take a pair's last place, a hold starts again on every
showing and ends with a skip, a late answer to a pair others filled is refused, a pair asked
again under a new id is the same pair, attention checks are decided once against every pair
before them, and the page is never handed a pair the study does not hold for the person.

The races are made certain with a meeting point: whoever is about to take a place (the store's
``reserve``, or marking a pair served) waits there until the other one is too. When counting
and taking are not one locked step, both have counted before either took the place."""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import numpy as np
import pytest
from sqlalchemy import inspect, text

from preflab.records import Annotator, Judgement, Query
from preflab.store import FeedbackStore
from preflab.store.annotators import hash_token
from preflab.studio import study as S
from preflab.studio.config import StudioConfig
from preflab.studio.study_assign import GOLD_QUANTILE, Assigner, draw
from preflab.studio.study_config import StudyConfig
from preflab.testing.factories import make_segments
from tests.studio.api_server import Studio, start_studio


@pytest.fixture
def studio(tmp_path, store_url) -> Iterator[Studio]:
    s = start_studio(tmp_path, config=StudioConfig(min_answer_s=0.0), store_url=store_url)
    yield s
    s.stop()


def only_pairs(store: FeedbackStore, n: int, *, seed: int = 11) -> list[Query]:
    """The seeded queries withdrawn; ``n`` fresh pair queries instead (round 3)."""
    store.queries.withdraw([q.id for q in store.queries.all()])
    segs = make_segments(2 * n, rng=np.random.default_rng(seed), obs_dim=3, env_id="Toy-v0")
    store.segments.add(segs)
    qs = [
        Query(id=f"p{seed}-{i:03d}", kind="pair", a=(segs[2 * i].id,), b=(segs[2 * i + 1].id,))
        for i in range(n)
    ]
    qs = [Query(id=q.id, kind=q.kind, a=q.a, b=q.b, round=3) for q in qs]
    store.queries.add(qs)
    return qs


def make_study(store: FeedbackStore, **kw: Any) -> str:
    base = {"practice_pairs": 0, "quota_answers": 0, "gold_rate": 0.0, "completion_code": "C0DE42"}
    return S.create(store, StudyConfig(**{**base, **kw}))


def person(studio: Studio, secret: str, pid: str) -> httpx.Client:
    """A participant's browser: joined by the study link, consent given."""
    c = studio.client(follow_redirects=False)
    assert c.get(f"/s/{secret}", params={"pid": pid}).status_code == 303
    assert c.post("/study/consent", data={"decision": "accept"}).status_code == 303
    return c


def next_id(c: httpx.Client, **params: str) -> str | None:
    r = c.get("/api/queries/next", params={"kind": "pair", **params})
    assert r.status_code == 200, r.text
    q = r.json()["query"]
    return q and q["id"]


def answer(c: httpx.Client, qid: str) -> httpx.Response:
    return c.post(
        "/api/judgements",
        json={"query_id": qid, "p": 1.0, "client_key": uuid.uuid4().hex, "response_time_s": 2.0},
    )


def answers_on(store: FeedbackStore, qid: str) -> int:
    return sum(j.query_id == qid for _s, j in store.answers.judgements())


def at_once(fns: list[Callable[[], Any]]) -> list[Any]:
    """Run the callables in threads started together; their results in order."""
    out: list[Any] = [None] * len(fns)

    def run(i: int) -> None:
        out[i] = fns[i]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def meet_before_taking_a_place(stores: list[FeedbackStore], parties: int = 2) -> None:
    """Whoever is about to take a place in a pair (``studies.reserve`` where the store has it,
    or ``people.mark_served``) waits until ``parties`` are about to (or 30 s have passed); once
    they have met, later calls (an answer renewing its hold) go straight through."""
    meeting = threading.Barrier(parties, timeout=30)
    met = threading.Event()

    def meet(fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*a: Any, **kw: Any) -> Any:
            if not met.is_set():
                with contextlib.suppress(threading.BrokenBarrierError):
                    meeting.wait()
                met.set()
            return fn(*a, **kw)

        return wrapped

    for store in stores:
        store.people.mark_served = meet(store.people.mark_served)  # type: ignore[method-assign]
        if hasattr(store.studies, "reserve"):
            store.studies.reserve = meet(store.studies.reserve)  # type: ignore[method-assign]


def age_holds(store: FeedbackStore, who: str, seconds: float) -> None:
    """Move ``who``'s showings (and holds) ``seconds`` into the past: their holds lapse."""
    cols = {c["name"] for c in inspect(store.engine).get_columns("queue_states")}
    sets = ", ".join(f"{c} = {c} - :s" for c in ("served_at", "reserved_at") if c in cols)
    with store.engine.begin() as c:
        c.execute(
            text(f"UPDATE queue_states SET {sets} WHERE annotator_id = :a"),
            {"s": seconds, "a": who},
        )


def me(c: httpx.Client) -> str:
    return str(c.get("/api/me").json()["id"])


# ----- F1: the page's ``after`` cursor -----------------------------------------------------------
def test_next_with_the_pages_cursor_holds_the_last_place_for_one_person(studio: Studio) -> None:
    """The page asks GET /next?after=<the answer still in its outbox>: that request too counts
    and takes the place in one locked step, so two people asking at once get one pair."""
    (q,) = only_pairs(studio.store, 1)
    secret = make_study(studio.store, overlap=1)
    a, b = person(studio, secret, "a"), person(studio, secret, "b")
    meet_before_taking_a_place([studio.store])
    got = at_once([lambda c=c: next_id(c, after="x-not-in-queue") for c in (a, b)])
    assert Counter(got) == Counter([q.id, None])
    codes = [answer(c, g).status_code for c, g in zip((a, b), got, strict=True) if g]
    assert codes == [201] and answers_on(studio.store, q.id) == 1


def test_next_with_a_cursor_turns_past_it_and_holds_what_it_shows(studio: Studio) -> None:
    qs = only_pairs(studio.store, 3)
    secret = make_study(studio.store, overlap=1)
    a, b = person(studio, secret, "a"), person(studio, secret, "b")
    assert next_id(a) == qs[0].id
    assert next_id(a, after=qs[0].id) == qs[1].id  # past the one whose answer is on its way
    # both are held for a: b is given the third, then nothing
    assert next_id(b) == qs[2].id and next_id(b, after=qs[2].id) == qs[2].id


# ----- F2: two studio workers over one store --------------------------------------------------------
def enrolled(store: FeedbackStore, aid: str) -> Annotator:
    """A participant with a fixed id, consent given and practice done."""
    store.studies.enrol(
        S.STUDY_ID, aid, key_hash=hash_token(aid), platform={"pid": aid}, platform_pid=aid, cap=99
    )
    store.studies.consent(aid, consent_sha256="x", token_hash=hash_token(aid + "-token"))
    store.studies.practice_done(aid)
    who = store.annotators.get(aid)
    assert who is not None
    return who


def test_two_workers_assigners_cannot_both_hold_the_last_place(store_url, tmp_path) -> None:
    """``preflab studio --workers 2``: each worker has its own app, so its own Assigner and
    store; the count and the hold are one store transaction under the study's lock (on
    PostgreSQL an advisory lock, on SQLite its one writer), so only one takes the place."""
    store = FeedbackStore(store_url, array_dir=tmp_path / "segments")
    (q,) = only_pairs(store, 1)
    make_study(store, overlap=1)
    config = StudyConfig(overlap=1, gold_rate=0.0)
    people = [enrolled(store, f"person-{k}") for k in range(2)]
    stores = [store, FeedbackStore(store_url, array_dir=tmp_path / "segments")]
    meet_before_taking_a_place(stores)
    workers = [Assigner(), Assigner()]
    got = at_once(
        [
            lambda k=k: workers[k].queue(stores[k], people[k], config, kind="pair", serve=True)
            for k in range(2)
        ]
    )
    assert sorted(len(g) for g in got) == [0, 1]
    assert store.studies.overlap_counts(reserved_since=0.0) == {q.id: 1}
    for s in stores:
        s.close()


# ----- F3: holds renew on every showing, end with a skip; a late answer is refused --------------
def test_a_late_answer_to_a_pair_others_filled_is_refused(studio: Studio) -> None:
    (q,) = only_pairs(studio.store, 1)
    secret = make_study(studio.store, overlap=1, reserve_s=600)
    a, b = person(studio, secret, "a"), person(studio, secret, "b")
    assert next_id(a) == q.id
    assert next_id(b) is None  # held for a
    age_holds(studio.store, me(a), 601)  # a watches the clips for longer than the hold
    assert next_id(b) == q.id
    assert answer(b, q.id).status_code == 201
    late = answer(a, q.id)
    assert late.status_code == 409
    assert late.json()["detail"].startswith("this pair already has its answers")
    assert answers_on(studio.store, q.id) == 1


def test_a_late_answer_is_taken_while_the_pair_still_has_a_place(studio: Studio) -> None:
    (q,) = only_pairs(studio.store, 1)
    secret = make_study(studio.store, overlap=1, reserve_s=600)
    a, b = person(studio, secret, "a"), person(studio, secret, "b")
    assert next_id(a) == q.id
    age_holds(studio.store, me(a), 601)
    assert answer(a, q.id).status_code == 201  # nobody took it meanwhile: it counts
    assert next_id(b) is None


def test_a_pair_shown_again_after_a_skip_is_held_again(studio: Studio) -> None:
    (q,) = only_pairs(studio.store, 1)
    secret = make_study(studio.store, overlap=1, reserve_s=600)
    a, b = person(studio, secret, "a"), person(studio, secret, "b")
    assert next_id(a) == q.id
    assert a.post(f"/api/queries/{q.id}/skip").status_code == 200
    assert next_id(b) == q.id  # a skip gives the place up at once
    assert b.post(f"/api/queries/{q.id}/skip").status_code == 200
    age_holds(studio.store, me(a), 601)  # long after a first saw it
    assert next_id(a) == q.id  # on a's screen again: held for a from now
    assert next_id(b) is None
    assert answer(a, q.id).status_code == 201
    assert answers_on(studio.store, q.id) == 1


def test_showing_a_pair_again_by_id_renews_the_hold(studio: Studio) -> None:
    (q,) = only_pairs(studio.store, 1)
    secret = make_study(studio.store, overlap=1, reserve_s=600)
    a, b = person(studio, secret, "a"), person(studio, secret, "b")
    assert next_id(a) == q.id
    age_holds(studio.store, me(a), 601)
    assert a.get(f"/api/queries/{q.id}").status_code == 200  # a reload shows it again
    assert next_id(b) is None


# ----- F5: a pair withdrawn and asked again under a new id ------------------------------------------
def test_a_pair_asked_again_under_a_new_id_counts_its_earlier_answers(studio: Studio) -> None:
    (q,) = only_pairs(studio.store, 1)
    secret = make_study(studio.store, overlap=1)
    a, b = person(studio, secret, "a"), person(studio, secret, "b")
    assert next_id(a) == q.id and answer(a, q.id).status_code == 201
    studio.store.queries.withdraw([q.id])  # the trainer takes it back, then asks it again
    again = Query(id="again-1", kind="pair", a=q.b, b=q.a, round=4)
    studio.store.queries.add([again])
    assert next_id(b) is None  # the pair has its one answer
    assert studio.store.studies.overlap_counts(reserved_since=0.0)[again.id] == 1


# ----- F6: attention checks decided once, against every pair before them ----------------------------
def test_pairs_asked_one_at_a_time_are_cut_against_every_pair_before_them(tmp_path) -> None:
    """A round stored at once gives its clearest quarter as checks; pairs the trainer then asks
    one at a time are each cut against all the gaps considered so far (not against itself
    alone), decided once, the same through another worker's Assigner and after a restart."""
    store = FeedbackStore(tmp_path / "feedback.db", array_dir=tmp_path / "segments")
    only_pairs(store, 8)
    make_study(store, overlap=1, gold_rate=0.1)
    config = StudyConfig(overlap=1, gold_rate=0.1)
    who = [enrolled(store, f"person-{k}") for k in range(3)]
    workers = [Assigner(), Assigner()]
    workers[0].queue(store, who[0], config, kind="pair")
    assert len(store.studies.gold()) == 2
    segs = make_segments(12, rng=np.random.default_rng(99), obs_dim=3, env_id="Toy-v0")
    store.segments.add(segs)
    rets = {s.id: s.true_return for s in segs} | store.studies.true_returns(
        [s for q in store.queries.all() for s in (*q.a, *q.b)]
    )
    sizes = [
        abs(rets[q.a[0]] - rets[q.b[0]]) for q in store.queries.all() if q.id.startswith("p11")
    ]
    expected = set()
    extra = []
    for i in range(6):  # one extra pair at a time, a participant looks in between
        q = Query(
            id=f"extra-{i}", kind="pair", a=(segs[2 * i].id,), b=(segs[2 * i + 1].id,), round=3
        )
        store.queries.add([q])
        extra.append(q.id)
        gap = abs(rets[q.a[0]] - rets[q.b[0]])
        sizes.append(gap)
        if gap > 0 and gap >= float(np.quantile(sizes, GOLD_QUANTILE)):
            expected.add(q.id)
        workers[i % 2].queue(store, who[1 + i % 2], config, kind="pair")
    gold = store.studies.gold()
    assert {q for q in extra if q in gold} == expected
    assert len(expected) == 3  # not every lone pair (each cut against itself alone: all 6)
    Assigner().queue(store, who[0], config, kind="pair")  # a restart decides nothing anew
    assert store.studies.gold() == gold
    store.close()


def test_a_due_check_is_served_when_no_regular_pair_is_left(tmp_path) -> None:
    store = FeedbackStore(tmp_path / "feedback.db", array_dir=tmp_path / "segments")
    qs = only_pairs(store, 8)
    make_study(store, overlap=1, gold_rate=0.5)
    config = StudyConfig(overlap=1, gold_rate=0.5)
    ids = [f"person-{k}" for k in range(40)]
    due = next(a for a in ids if draw(a, 0) < 0.5)  # their first question is a check
    not_due = next(a for a in ids if draw(a, 0) >= 0.5)
    filler = enrolled(store, "filler")
    assigner = Assigner()
    assigner.queue(store, filler, config, kind="pair")
    gold = store.studies.gold()
    assert len(gold) == 2
    store.answers.add(  # every regular pair has its one answer
        [
            Judgement(id=f"f-{q.id}", query_id=q.id, annotator_id="filler", source="human", p=1.0)
            for q in qs
            if q.id not in gold
        ]
    )
    got = assigner.queue(store, enrolled(store, due), config, kind="pair", serve=True)
    assert [q.id for q in got] and got[0].id in gold
    assert assigner.queue(store, enrolled(store, not_due), config, kind="pair", serve=True) == []
    store.close()


# ----- F9: no pair reaches a participant's screen without a hold ------------------------------------
def test_a_participant_is_listed_no_pairs_ahead_but_their_clips_are_rendered(
    studio: Studio,
) -> None:
    qs = only_pairs(studio.store, 4)
    secret = make_study(studio.store, overlap=3)
    a = person(studio, secret, "a")
    cur = next_id(a)
    assert cur == qs[0].id
    media = studio.media
    assert media is not None
    media.requests.clear()
    r = a.get("/api/queries/ahead", params={"kind": "pair", "k": 3, "exclude": [cur]})
    assert r.status_code == 200 and r.json()["queries"] == []
    assert r.json()["rules"]["min_answer_s"] == 0.0
    asked = {sid for ids, _priority in media.requests for sid in ids}
    for q in qs[1:4]:  # rendered all the same, for when GET /next shows them
        assert {*q.a, *q.b} <= asked
    # someone who is not a participant still gets them listed
    bob = studio.client("bob")
    assert bob.get("/api/queries/ahead", params={"kind": "pair"}).json()["queries"]
