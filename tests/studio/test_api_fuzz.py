"""Property test: no request body or path makes the studio answer 5xx."""

from __future__ import annotations

import json
import string
from collections.abc import Iterator

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from preflab.records import Query
from tests.studio.api_server import Studio, start_studio

FUZZ = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([0, 0.5, 1, -1, 1e308, -0.0, 2000, 2001])
    | st.text(max_size=40)
    | st.sampled_from(["q1", "q3", "g1", "r1", "nope", "", "../etc/passwd", "<script>"])
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=20,
)
rating = st.fixed_dictionaries(
    {
        "step": json_values | st.integers(-2, 12),
        "t": json_values | st.floats(-5, 5),
        "value": json_values | st.floats(-1.5, 1.5),
    }
)
judgement_body = (
    st.fixed_dictionaries(
        {
            "query_id": json_values,
            "p": json_values | st.sampled_from([0, 0.5, 1, None]),
            "client_key": json_values
            | st.text(string.ascii_letters + "-", min_size=8, max_size=20),
        },
        optional={"response_time_s": json_values},
    )
    | json_values
)
ratings_body = (
    st.fixed_dictionaries(
        {
            "query_id": json_values | st.just("r1"),
            "ratings": st.lists(rating, max_size=8) | json_values,
        }
    )
    | json_values
)
paths = st.text(
    alphabet=string.ascii_letters + string.digits + "/._-%~?&=#:@!$'()*+,;", max_size=60
).map(lambda s: "/" + s)


@pytest.fixture(scope="module")
def studio(tmp_path_factory) -> Iterator[Studio]:
    s = start_studio(tmp_path_factory.mktemp("fuzz"))
    yield s
    s.stop()


def _raw_json(value) -> bytes:
    return json.dumps(value, allow_nan=False).encode()


@FUZZ
@given(body=judgement_body)
def test_judgement_bodies_never_5xx(studio: Studio, body) -> None:
    r = studio.cached("alice").post(
        "/api/judgements", content=_raw_json(body), headers={"content-type": "application/json"}
    )
    assert r.status_code < 500, (body, r.text)
    assert r.status_code in (201, 404, 409, 422), (body, r.text)


ranking_body = st.fixed_dictionaries(
    {
        "query_id": st.sampled_from(["rk", "q3", "r1", "nope"]) | json_values,
        "client_key": st.text(string.ascii_letters + "-", min_size=8, max_size=20),
    },
    optional={
        "ranks": st.lists(st.integers(-2, 9) | json_values, max_size=10) | json_values,
        "p": json_values | st.sampled_from([0, 0.5, 1, None]),
        "response_time_s": json_values,
    },
)


@FUZZ
@given(body=ranking_body)
def test_ranking_bodies_never_5xx(studio: Studio, body) -> None:
    """Answers with ranks (issue 57), to a ranking query of 4 clips and to other kinds."""
    if studio.store.queries.get("rk") is None:
        studio.store.queries.add(
            [Query(id="rk", kind="ranking", a=tuple(s.id for s in studio.store.segments.all())[:4])]
        )
    r = studio.cached("alice").post(
        "/api/judgements", content=_raw_json(body), headers={"content-type": "application/json"}
    )
    assert r.status_code < 500, (body, r.text)
    assert r.status_code in (201, 404, 409, 422), (body, r.text)
    assert isinstance(r.json()["detail" if r.status_code >= 400 else "judgement_id"], str)


@FUZZ
@given(body=ratings_body)
def test_rating_bodies_never_5xx(studio: Studio, body) -> None:
    r = studio.cached("bob").post(
        "/api/ratings", content=_raw_json(body), headers={"content-type": "application/json"}
    )
    assert r.status_code < 500, (body, r.text)
    assert r.status_code in (201, 404, 409, 422), (body, r.text)


@FUZZ
@given(
    path=paths,
    method=st.sampled_from(["GET", "POST", "DELETE", "PUT"]),
    who=st.sampled_from([None, "alice", "owner"]),
)
def test_random_paths_never_5xx(studio: Studio, path, method, who) -> None:
    try:
        r = studio.cached(who).request(method, path)
    except httpx.InvalidURL:
        return  # the client refuses to send it at all
    assert r.status_code < 500, (method, path, r.text)
