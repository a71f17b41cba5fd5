"""Free text and ids in requests (preflab.studio.schemas): a NUL byte or another control
character is a 422 naming the field, never a 500 (PostgreSQL cannot store NUL), on SQLite and
PostgreSQL alike; nothing is stored."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from preflab.studio import study as S
from preflab.studio.config import StudioConfig
from preflab.studio.study_config import StudyConfig
from tests.studio.api_server import Studio, counts, start_studio


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def studio(request: pytest.FixtureRequest, tmp_path) -> Iterator[Studio]:
    url = name = None
    if request.param == "postgres":
        from tests.store.conftest import fresh_pg_database

        url, name = fresh_pg_database(request.getfixturevalue("postgres_url"))
    s = start_studio(tmp_path, media=False, store_url=url, config=StudioConfig(min_answer_s=0.0))
    yield s
    s.stop()
    if name is not None:
        from tests.store.conftest import drop_pg_database

        drop_pg_database(request.getfixturevalue("postgres_url"), name)


def invalid(r, field: str) -> None:
    assert r.status_code == 422, (r.status_code, r.text)
    body = r.json()
    assert field in [e["field"] for e in body["errors"]], body
    assert "control character U+" in body["detail"] and "remove it" in body["detail"]


def test_control_characters_in_free_text_are_422_naming_the_field(studio: Studio) -> None:
    owner = studio.client("owner")
    secret = S.create(studio.store, StudyConfig(practice_pairs=1, quota_answers=3, gold_rate=0.0))
    person = studio.client(follow_redirects=False)
    person.get(f"/s/{secret}", params={"pid": "pp1"})
    person.post("/study/consent", data={"decision": "accept"})
    (p,) = studio.store.studies.participants(S.STUDY_ID)
    before = counts(studio.store)
    invalid(owner.post("/api/owner/annotators", json={"name": "nul\x00x"}), "name")
    invalid(owner.post("/api/owner/annotators", json={"name": "bell\x07"}), "name")
    invalid(owner.put("/api/owner/task", json={"text": "esc \x1b[31m red"}), "text")
    exclusion = f"/api/owner/study/people/{p.annotator_id}/exclusion"
    invalid(owner.post(exclusion, json={"excluded": True, "reason": "r\x00"}), "reason")
    assert counts(studio.store) == before
    assert studio.store.studies.excluded_ids() == set()
    assert studio.client("alice").get("/api/task").json()["text"] == ""
    # tabs and line breaks are plain text
    task = owner.put("/api/owner/task", json={"text": "walk\tforward\nthen stop"})
    assert task.status_code == 200 and task.json()["text"] == "walk\tforward\nthen stop"
    assert owner.post(exclusion, json={"excluded": True, "reason": "a\nb"}).status_code == 200


def test_nul_in_ids_and_forms_is_refused_before_the_store(studio: Studio) -> None:
    owner, alice = studio.client("owner"), studio.client("alice")
    secret = S.create(studio.store, StudyConfig(practice_pairs=1, quota_answers=3, gold_rate=0.0))
    person = studio.client(follow_redirects=False)
    person.get(f"/s/{secret}", params={"pid": "pp1"})
    person.post("/study/consent", data={"decision": "accept"})
    r = alice.get("/api/groupwise/clips?ids=%00")
    assert r.status_code == 422 and "segment ids" in r.json()["detail"]
    r = owner.post("/api/owner/study/people/%00/exclusion", json={"excluded": True})
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "path.annotator_id"
    # a practice form naming no stored segment is checked against the pair shown now
    form = {"content-type": "application/x-www-form-urlencoded"}
    r = person.post("/study/practice", content="index=0&answer=1&left=%00&right=x", headers=form)
    assert r.status_code == 200 and "Practice" in r.text
    (p,) = studio.store.studies.participants(S.STUDY_ID)
    assert len(p.practice) == 1 and "\x00" not in p.practice[0]["left"]


def test_plain_text_allows_tab_and_line_breaks_only() -> None:
    from preflab.studio.schemas import plain_text

    assert plain_text("a\tb\r\nc é ✓") == "a\tb\r\nc é ✓"
    for bad in ("\x00", "\x08", "\x0b", "\x1f", "\x7f", "\x85", "\x9f"):
        with pytest.raises(ValueError, match=f"U\\+{ord(bad):04X} at position 1"):
            plain_text("a" + bad)
