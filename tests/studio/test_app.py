"""The studio app's error answers (preflab.studio.app): bodies FastAPI cannot read, bodies sent
without JSON's Content-Type and empty bodies are 422s in the studio's format that say what to
send; none is stored."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from preflab.studio.config import StudioConfig
from tests.studio.api_server import Studio, counts, start_studio

JSON = {"content-type": "application/json"}
ANSWER = b'{"query_id":"q3","p":1,"client_key":"key-app-000001"}'
KEY = {"client_key": "key-app-000002"}


@pytest.fixture
def studio(tmp_path) -> Iterator[Studio]:
    s = start_studio(tmp_path, media=False, config=StudioConfig(min_answer_s=0.0))
    yield s
    s.stop()


def body_error(r) -> str:
    """The message of a 422 about the body as a whole (the studio's format)."""
    assert r.status_code == 422, (r.status_code, r.text)
    body = r.json()
    assert set(body) == {"detail", "errors"} and body["errors"][0]["field"] == "body", body
    assert body["detail"].startswith("invalid request: body: ")
    return str(body["errors"][0]["message"])


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"[" * 30_000 + b"]" * 30_000, "nested too deeply"),
        (b"1" * 5000, "a number with too many digits"),
        (b'{"query_id":"q3","p":' + b"1" * 5000 + b',"client_key":"key-app-000001"}', "digits"),
    ],
)
def test_a_json_body_that_cannot_be_read_is_a_clear_422(studio: Studio, raw, why) -> None:
    before = counts(studio.store)
    message = body_error(studio.client("alice").post("/api/judgements", content=raw, headers=JSON))
    assert why in message and "POST /api/judgements takes a JSON object" in message
    assert counts(studio.store) == before


def test_a_body_without_json_content_type_says_to_send_it(studio: Studio) -> None:
    alice = studio.client("alice")
    plain = alice.post("/api/judgements", content=ANSWER, headers={"content-type": "text/plain"})
    message = body_error(plain)
    assert "Content-Type: application/json" in message and "'text/plain'" in message
    none = body_error(alice.post("/api/judgements", content=ANSWER))
    assert "Content-Type: application/json" in none and "no Content-Type" in none
    empty = body_error(alice.post("/api/judgements", content=b"", headers=JSON))
    assert "the body is empty" in empty and "JSON object" in empty
    array = body_error(alice.post("/api/judgements", content=b"[1]", headers=JSON))
    assert "takes a JSON object, not an array" in array
    owner = studio.client("owner")
    task = body_error(owner.put("/api/owner/task", content=b'{"text":"x"}'))
    assert "Content-Type: application/json" in task
    both = alice.post("/api/judgements", json={"query_id": "q3", "p": 1, "ranks": [0], **KEY})
    assert "not both" in body_error(both)  # a body's own check keeps its message
    assert counts(studio.store)["judgements"] == 0
    ok = alice.post("/api/judgements", content=ANSWER, headers={"content-type": "application/json"})
    assert ok.status_code == 201
    # these are 422s: every operation that takes a body declares one, in the studio's format
    spec = studio.client().get("/openapi.json").json()
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            if "requestBody" in op:
                r = op["responses"].get("422", {})
                ref = r.get("content", {}).get("application/json", {}).get("schema", {})
                assert ref.get("$ref", "").endswith("/ValidationErrorBody"), (method, path)
