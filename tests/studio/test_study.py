"""A study with real people through a real studio server (issue #61): enrolment by the study
link with and without platform ids, the same identity on reload, consent stored, practice with
feedback, the quota and the completion code, the payments table, and every refusal as a clear
page (closed, full, forged link, bad platform id, declined consent, over quota, cookies
blocked) — never a 5xx."""

from __future__ import annotations

import csv
import io
import json
import time
import zipfile
from collections.abc import Iterator

import httpx
import pytest

from preflab.store.annotators import hash_token
from preflab.studio import study as S
from preflab.studio.config import StudioConfig
from preflab.studio.study_config import StudyConfig
from tests.studio.api_server import Studio, start_studio

PROLIFIC = {"PROLIFIC_PID": "5f3c1e2d9a8b7c6d5e4f3a2b", "STUDY_ID": "st-1", "SESSION_ID": "se-9"}


@pytest.fixture
def studio(tmp_path) -> Iterator[Studio]:
    s = start_studio(tmp_path, config=StudioConfig(min_answer_s=0.0))
    yield s
    s.stop()


def make_study(studio: Studio, **kw) -> str:
    base = {"practice_pairs": 0, "quota_answers": 2, "completion_code": "C0DE42"}
    return S.create(studio.store, StudyConfig(**{**base, **kw}))


def browser(studio: Studio) -> httpx.Client:
    """A client that keeps cookies and does not follow redirects (we look at each step)."""
    return studio.client(follow_redirects=False)


def join(c: httpx.Client, secret: str, **params: str) -> httpx.Response:
    r = c.get(f"/s/{secret}", params=params)
    assert r.status_code == 303, r.text
    return r


def test_enrolment_with_prolific_ids_keeps_one_identity(studio: Studio) -> None:
    secret = make_study(studio)
    c = browser(studio)
    r = join(c, secret, **PROLIFIC)
    assert r.headers["location"] == "../study/consent?joined=1"
    (p,) = studio.store.studies.participants(S.STUDY_ID)
    assert dict(p.platform) == PROLIFIC and p.platform_pid == PROLIFIC["PROLIFIC_PID"]
    a = studio.store.annotators.get(p.annotator_id)
    assert a is not None and a.name == p.annotator_id and a.meta["study"] == S.STUDY_ID
    assert c.get("/study/consent").status_code == 200
    # a reload of the link keeps the identity (and the cookie)
    join(c, secret, **PROLIFIC)
    assert len(studio.store.studies.participants(S.STUDY_ID)) == 1
    # another browser with the same platform id: the same person, a new key; the old one ends
    other = browser(studio)
    join(other, secret, **PROLIFIC)
    assert [x.annotator_id for x in studio.store.studies.participants(S.STUDY_ID)] == [
        p.annotator_id
    ]
    assert other.get("/study/consent").status_code == 200
    c.cookies.clear()
    assert c.get("/study/consent").status_code == 401


def test_enrolment_without_platform_ids_and_with_a_generic_pid(studio: Studio) -> None:
    secret = make_study(studio)
    a, b = browser(studio), browser(studio)
    join(a, secret)
    join(b, secret)
    join(a, secret)  # a reload: the cookie resumes
    people = studio.store.studies.participants(S.STUDY_ID)
    assert len(people) == 2 and all(p.platform_pid is None for p in people)
    g = browser(studio)
    join(g, secret, pid="lab-017")
    join(browser(studio), secret, pid="lab-017")
    people = studio.store.studies.participants(S.STUDY_ID)
    assert len(people) == 3 and people[-1].platform == {"pid": "lab-017"}


def test_consent_is_stored_and_unlocks_the_studio(studio: Studio) -> None:
    secret = make_study(studio)
    c = browser(studio)
    join(c, secret, **PROLIFIC)
    assert c.get("/api/me").status_code == 401  # no consent yet: the studio refuses the key
    page = c.get("/study/consent").text
    assert "Consent" in page and "I agree" in page
    r = c.post("/study/consent", data={"decision": "accept"})
    assert r.status_code == 303 and r.headers["location"] == "instructions"
    (p,) = studio.store.studies.participants(S.STUDY_ID)
    assert p.consent_at is not None and p.consent_sha256 == S.consent_sha256(
        StudyConfig(practice_pairs=0)
    )
    assert c.get("/api/me").json()["role"] == "annotator"
    assert c.get("/api/study/me").json()["participant"] is True


def test_the_old_browsers_studio_token_stops_at_once_when_the_person_moves(
    studio: Studio,
) -> None:
    """A person who consented opens the link again on another browser (same platform id):
    a new key, and the first browser's studio token stops working at once, even though the
    studio had just remembered it in its token cache."""
    secret = make_study(studio)
    first = browser(studio)
    join(first, secret, **PROLIFIC)
    first.post("/study/consent", data={"decision": "accept"})
    assert first.get("/api/me").status_code == 200  # now in the token cache
    second = browser(studio)
    join(second, secret, **PROLIFIC)
    assert first.get("/api/me").status_code == 401
    assert second.get("/api/me").status_code == 200


def test_a_declined_consent_ends_politely_and_stores_nothing_else(studio: Studio) -> None:
    secret = make_study(studio)
    c = browser(studio)
    join(c, secret)
    r = c.post("/study/consent", data={"decision": "decline"})
    assert r.headers["location"] == "declined"
    page = c.get("/study/declined")
    assert page.status_code == 200 and "You declined" in page.text
    assert c.get("/api/me").status_code == 401
    assert c.get("/study/consent").headers["location"] == "declined"
    assert studio.store.answers.count() == 0


def test_practice_gives_feedback_from_the_oracle_and_does_not_count(studio: Studio) -> None:
    secret = make_study(studio, practice_pairs=2)
    c = browser(studio)
    join(c, secret)
    c.post("/study/consent", data={"decision": "accept"})
    instructions = c.get("/study/instructions").text
    assert "Start the practice (2 pairs)" in instructions
    assert "An example pair" in instructions and instructions.count("<video") == 2
    assert c.get("/api/queries/next").status_code == 403  # practice first
    assert c.get("/api/study/me").json()["step"] == "instructions"  # the page goes there
    top, low = studio.store.studies.extremes(2)
    page = c.get("/study/practice").text
    assert "Practice pair 1 of 2" in page and "<video" in page
    # pair 1: the best segment on the left (the oracle says left)
    ok = c.post("/study/practice", data={"index": "0", "answer": "1"})
    assert "Correct" in ok.text
    # pair 2: sides swapped, the best on the right; answering left is wrong
    bad = c.post("/study/practice", data={"index": "1", "answer": "1"})
    assert "Not quite" in bad.text and "right clip" in bad.text
    (p,) = studio.store.studies.participants(S.STUDY_ID)
    assert [x["left"] for x in p.practice] == [top[0][0], low[1][0]]
    assert p.practice_done_at is not None and studio.store.answers.count() == 0
    assert c.get("/study/start").headers["location"] == "../"
    assert c.get("/api/queries/next").status_code == 200


def test_practice_is_checked_against_the_pair_shown_and_counted_once(studio: Studio) -> None:
    """The practice pairs are the store's best and worst segments, which the trainer moves
    as it stores more: an answer is checked against the pair its page showed, and the same
    form sent twice stores one answer."""
    import dataclasses
    import re

    import numpy as np

    from preflab.testing.factories import make_segments

    secret = make_study(studio, practice_pairs=2)
    c = browser(studio)
    join(c, secret)
    c.post("/study/consent", data={"decision": "accept"})
    page = c.get("/study/practice").text
    shown = dict(re.findall(r'name="(left|right)" value="([^"]+)"', page))
    top, low = studio.store.studies.extremes(1)
    assert shown == {"left": top[0][0], "right": low[0][0]}
    # the trainer stores a new best (and a new worst) segment while the person watches
    new = make_segments(2, rng=np.random.default_rng(99), obs_dim=3, env_id="Toy-v0")
    steps = len(new[0].true_rewards)
    studio.store.segments.add(
        [
            dataclasses.replace(
                new[0], id="s-new-best", true_rewards=np.full(steps, top[0][1] + 100.0)
            ),
            dataclasses.replace(
                new[1], id="s-new-worst", true_rewards=np.full(steps, low[0][1] - 100.0)
            ),
        ]
    )
    assert studio.store.studies.extremes(1)[0][0][0] == "s-new-best"
    form = {"index": "0", "answer": "1", **shown}
    assert "Correct" in c.post("/study/practice", data=form).text  # left was the better shown
    assert "Correct" not in c.post("/study/practice", data=form).text  # sent again: not stored
    (p,) = studio.store.studies.participants(S.STUDY_ID)
    assert list(p.practice) == [{"left": shown["left"], "right": shown["right"], "p": 1.0}]
    assert studio.store.studies.add_practice(p.annotator_id, {"p": 1.0}, index=0) is False


def answer_next(c: httpx.Client, key: str) -> str:
    q = c.get("/api/queries/next", params={"kind": "pair"}).json()["query"]
    assert q is not None
    r = c.post(
        "/api/judgements",
        json={"query_id": q["id"], "p": 1.0, "client_key": key, "response_time_s": 2.0},
    )
    assert r.status_code == 201, r.text
    return q["id"]


def test_quota_then_the_completion_code_and_the_payments_table(studio: Studio) -> None:
    secret = make_study(
        studio, redirect_url="https://app.prolific.com/submissions/complete?cc=C0DE42"
    )
    c = browser(studio)
    join(c, secret, **PROLIFIC)
    c.post("/study/consent", data={"decision": "accept"})
    not_yet = c.get("/study/done")
    assert "Not finished yet" in not_yet.text and "C0DE42" not in not_yet.text
    answer_next(c, "key-quota-0001")
    answer_next(c, "key-quota-0002")
    assert c.get("/api/study/me").json()["done"] is True
    over = c.get("/api/queries/next")
    assert over.status_code == 403 and "completion code" in over.json()["detail"]
    page = c.get("/study/done")
    assert page.status_code == 200 and "C0DE42" in page.text
    assert "app.prolific.com/submissions/complete?cc=C0DE42" in page.text
    owner = studio.client("owner")
    rows = owner.get("/api/owner/study/payments").json()["rows"]
    assert len(rows) == 1
    row = rows[0]
    assert row["PROLIFIC_PID"] == PROLIFIC["PROLIFIC_PID"] and row["SESSION_ID"] == "se-9"
    assert row["answers_counted"] == 2 and row["completed"] is True
    assert row["completion_code_shown"] == "C0DE42"
    # the owner's export holds the payments table and the agreement statistics
    z = zipfile.ZipFile(io.BytesIO(owner.get("/api/owner/export").content))
    table = list(csv.DictReader(io.StringIO(z.read("preflab-export/study_payments.csv").decode())))
    assert table[0]["PROLIFIC_PID"] == PROLIFIC["PROLIFIC_PID"]
    assert table[0]["completion_code_shown"] == "C0DE42" and table[0]["answers_counted"] == "2"
    stats = json.loads(z.read("preflab-export/study_agreement.json"))
    assert stats["people"][0]["answers"] == 2 and stats["aggregator"] == "majority"


def test_a_participant_is_asked_only_the_studys_pairs(studio: Studio) -> None:
    """Group comparisons and ratings are not part of a study (its overlap, checks and quota
    are over the pairs it assigns): a participant's are refused with a 403 saying so, and no
    episode waits for them on the Rate tab."""
    secret = make_study(studio)
    c = browser(studio)
    join(c, secret, **PROLIFIC)
    c.post("/study/consent", data={"decision": "accept"})
    group = {"round": 0, "a": ["s-x"], "b": ["s-y"], "p": 1.0, "client_key": "group-key-01"}
    r = c.post("/api/groupwise/judgements", json=group)
    assert r.status_code == 403 and "group comparisons are not part of this study" in r.text
    ratings = {"query_id": "r-1", "ratings": [{"step": 0, "t": 0.5, "value": 0.5}]}
    r = c.post("/api/ratings", json=ratings)
    assert r.status_code == 403 and "ratings are not part of this study" in r.text
    assert c.get("/api/streams/next").json() == {"stream": None}
    assert c.get("/api/status").json()["to_rate"] == 0
    assert studio.store.answers.count() == 0


def test_a_participants_waiting_count_is_their_assignment(studio: Studio) -> None:
    """The count of pairs waiting shown to a participant is what their study would still ask
    them: a pair the overlap has filled is not theirs to answer, so it is not counted."""
    secret = make_study(studio, overlap=1, gold_rate=0.0, quota_answers=0)
    first, second = browser(studio), browser(studio)
    for c, pid in ((first, "pid-first"), (second, "pid-second")):
        join(c, secret, pid=pid)
        c.post("/study/consent", data={"decision": "accept"})
    waiting = second.get("/api/status").json()["waiting"]
    assert waiting >= 2
    answer_next(first, "key-wait-0001")  # overlap 1: that pair is done
    assert second.get("/api/status").json()["waiting"] == waiting - 1


def test_closed_full_forged_and_bad_links_get_clear_pages(studio: Studio) -> None:
    secret = make_study(studio, cap=1)
    forged = browser(studio).get("/s/" + "x" * 24)
    assert forged.status_code == 404 and "not valid" in forged.text
    short = browser(studio).get("/s/abc")
    assert short.status_code == 404
    bad = browser(studio).get(f"/s/{secret}", params={"PROLIFIC_PID": "<script>"})
    assert bad.status_code == 400 and "PROLIFIC_PID" in bad.text and "<script>" not in bad.text
    join(browser(studio), secret, pid="first")
    full = browser(studio).get(f"/s/{secret}", params={"pid": "second"})
    assert full.status_code == 403 and "full" in full.text
    join(browser(studio), secret, pid="first")  # who joined may come back
    owner = studio.client("owner")
    assert owner.post("/api/owner/study/enrolment", json={"open": False}).json() == {"closed": True}
    closed = browser(studio).get(f"/s/{secret}", params={"pid": "third"})
    assert closed.status_code == 403 and "closed" in closed.text


def test_a_browser_that_blocks_cookies_is_told_so(studio: Studio) -> None:
    secret = make_study(studio)
    c = browser(studio)
    r = join(c, secret)
    c.cookies.clear()  # what a browser that refuses cookies sends next
    page = c.get("/study/" + r.headers["location"].removeprefix("../study/"))
    assert page.status_code == 400 and "blocks cookies" in page.text
    assert c.post("/study/consent", data={"decision": "accept"}).status_code == 401


def test_the_owner_sees_and_excludes_participants(studio: Studio) -> None:
    secret = make_study(studio, quota_answers=10)
    c = browser(studio)
    join(c, secret, **PROLIFIC)
    c.post("/study/consent", data={"decision": "accept"})
    answer_next(c, "key-owner-0001")
    owner = studio.client("owner")
    view = owner.get("/api/owner/study").json()
    assert view["exists"] and view["joined"] == 1 and view["consented"] == 1
    (person,) = view["people"]
    assert person["answers"] == 1 and person["platform"]["PROLIFIC_PID"] == PROLIFIC["PROLIFIC_PID"]
    r = owner.post(
        f"/api/owner/study/people/{person['id']}/exclusion",
        json={"excluded": True, "reason": "random answers"},
    )
    assert r.json() == {"id": person["id"], "excluded": True}
    assert studio.store.studies.excluded_ids() == {person["id"]}
    assert owner.get("/api/owner/study").json()["people"][0]["excluded"] is True
    missing = owner.post("/api/owner/study/people/nobody/exclusion", json={"excluded": True})
    assert missing.status_code == 404
    assert studio.client("alice").get("/api/owner/study").status_code == 403
    assert c.get("/api/owner/study").status_code == 403


def test_no_study_is_a_clear_answer(studio: Studio) -> None:
    owner = studio.client("owner")
    assert owner.get("/api/owner/study").json()["exists"] is False
    r = owner.post("/api/owner/study/enrolment", json={"open": False})
    assert r.status_code == 404 and "preflab studio study" in r.json()["detail"]
    assert studio.client("alice").get("/api/study/me").json() == {
        "participant": False,
        "answers": 0,
        "quota_answers": 0,
        "minutes": 0.0,
        "quota_minutes": 0.0,
        "done": False,
        "done_url": "study/done",
        "step": "",
    }


def test_the_study_link_secret_is_stored_only_as_its_hash(studio: Studio) -> None:
    secret = make_study(studio)
    study = studio.store.studies.get(S.STUDY_ID)
    assert study is not None and studio.store.studies.by_link(hash_token(secret)) == study
    assert secret not in str(study.config)
    assert time.time() - study.created_at < 60


def test_odd_forms_and_pages_never_give_a_server_error(studio: Studio) -> None:
    secret = make_study(studio, practice_pairs=2)
    c = browser(studio)
    join(c, secret)
    odd = [
        ("post", "/study/consent", {"decision": "maybe"}),
        ("post", "/study/consent", {}),
        ("get", "/study/practice", None),  # before consent: sent to the consent page
        ("get", "/study/done", None),
        ("get", "/study/start", None),
        ("get", "/study/declined", None),
    ]
    for method, path, data in odd:
        r = c.request(method, path, data=data)
        assert r.status_code < 500, (path, r.status_code)
    assert c.post("/study/consent", data={"decision": "maybe"}).status_code == 422
    c.post("/study/consent", data={"decision": "accept"})
    for data in ({"index": "x", "answer": "1"}, {"index": "0", "answer": "7"}, {"index": "5"}):
        r = c.post("/study/practice", data=data)
        assert r.status_code in (303, 422), (data, r.status_code)
    r = c.post("/study/practice", content=b"\xff\xfe%%%", headers={"content-type": "text/plain"})
    assert r.status_code < 500
    (p,) = studio.store.studies.participants(S.STUDY_ID)
    assert p.practice == ()  # none of those was a practice answer
    for path in ("/s/" + secret + "/../x", "/s/%00", "/study/nothing", "/study/done?joined=1"):
        assert browser(studio).get(path).status_code < 500, path


def test_a_revoked_participant_is_never_admitted_again_by_the_study_link(studio: Studio) -> None:
    """The owner revokes a participant: neither their cookie, nor the study link on another
    browser with their platform id, nor a token hash stored again lets them back in; they
    read why on every study page, and the owner's activity page keeps them revoked."""
    secret = make_study(studio, quota_answers=10)
    c = browser(studio)
    join(c, secret, **PROLIFIC)
    c.post("/study/consent", data={"decision": "accept"})
    answer_next(c, "key-revoke-0001")
    (p,) = studio.store.studies.participants(S.STUDY_ID)
    owner = studio.client("owner")
    assert owner.post(f"/api/owner/annotators/{p.annotator_id}/revoke").status_code == 200
    assert c.get("/api/me").status_code == 401
    for who in (browser(studio), c):  # a new browser with the platform id, or the old cookie
        page = who.get(f"/s/{secret}", params=PROLIFIC)
        assert page.status_code == 403, page.text
        assert "ended by the researcher" in page.text and "contact them" in page.text
        assert "set-cookie" not in page.headers
        assert who.get("/api/me").status_code == 401
    for path in ("/study/consent", "/study/instructions", "/study/practice", "/study/done"):
        assert c.get(path).status_code == 403, path
    assert c.post("/study/consent", data={"decision": "accept"}).status_code == 403
    rows = {a["id"]: a for a in owner.get("/api/owner/activity").json()["annotators"]}
    assert rows[p.annotator_id]["revoked"] is True and rows[p.annotator_id]["n_answers"] == 1
    # a re-key that lands after the revoke (two requests at once) stores a hash: still refused
    studio.store.studies.rekey(p.annotator_id, hash_token("k2"), token_hash=hash_token("t" * 24))
    again = studio.client().get("/api/me", headers={"authorization": "Bearer " + "t" * 24})
    assert again.status_code == 401
    assert len(studio.store.studies.participants(S.STUDY_ID)) == 1
    # the owner's new link lifts the revocation
    studio.store.annotators.set_token(p.annotator_id, "participant-new-token-1")
    back = studio.client().get(
        "/api/me", headers={"authorization": "Bearer participant-new-token-1"}
    )
    assert back.status_code == 200
    join(browser(studio), secret, **PROLIFIC)


def test_a_form_with_too_many_fields_is_a_clear_page(studio: Studio) -> None:
    secret = make_study(studio, practice_pairs=2)
    many = "&".join(["decision=accept", *(f"f{k}=1" for k in range(25))])
    form = {"content-type": "application/x-www-form-urlencoded"}
    c = browser(studio)
    for joined in (False, True):  # signed out, then a participant
        for path in ("/study/consent", "/study/practice"):
            r = c.post(path, content=many, headers=form)
            assert r.status_code == 400, (joined, path, r.status_code)
            assert "at most 20 fields" in r.text
            assert r.headers["content-type"].startswith("text/html")
        if not joined:
            join(c, secret)
    (p,) = studio.store.studies.participants(S.STUDY_ID)
    assert p.consent_at is None and p.practice == ()


def test_a_practice_index_that_is_not_plain_digits_is_refused(studio: Studio) -> None:
    secret = make_study(studio, practice_pairs=2)
    c = browser(studio)
    join(c, secret)
    c.post("/study/consent", data={"decision": "accept"})
    for index in ("\u00b2", "\u0661", "9" * 5000, "", "-1", " 0"):
        r = c.post("/study/practice", data={"index": index, "answer": "1"})
        assert r.status_code == 422, (index[:8], r.status_code)
        assert "digits 0-9 only" in r.text
    (p,) = studio.store.studies.participants(S.STUDY_ID)
    assert p.practice == ()
    assert "Correct" in c.post("/study/practice", data={"index": "0", "answer": "1"}).text
