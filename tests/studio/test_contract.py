"""The studio's contract (issue #24): /openapi.json declares every response (status, content
type, body), the real responses conform to it, and the committed copy the front end's types
are generated from (studio/web/openapi.json) is the app's current schema."""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from preflab.records import Annotator
from preflab.store import FeedbackStore
from preflab.studio.app import create_app
from preflab.studio.config import StudioConfig
from preflab.studio.openapi import REFRESH, render, studio_schema
from tests.studio.api_server import Studio, start_studio
from tests.studio.openapi_check import check, problems

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "studio" / "web" / "openapi.json"
ERROR_REFS = {"#/components/schemas/ErrorBody", "#/components/schemas/ValidationErrorBody"}


@pytest.fixture(scope="module")
def schema() -> dict:
    return studio_schema()


@pytest.fixture
def studio(tmp_path) -> Iterator[Studio]:
    s = start_studio(tmp_path)
    yield s
    s.stop()


def test_committed_schema_is_the_apps_schema(schema: dict) -> None:
    assert COMMITTED.is_file(), f"{COMMITTED} is missing; write it with: {REFRESH}"
    assert COMMITTED.read_text(encoding="utf-8") == render(schema), (
        f"studio/web/openapi.json is stale (the studio's API changed); refresh it and the "
        f"generated TypeScript types with: {REFRESH}"
    )


def test_every_operation_declares_its_responses(schema: dict) -> None:
    assert "HTTPValidationError" not in json.dumps(schema)  # the studio never sends it
    n_ops = 0
    for path, ops in schema["paths"].items():
        for method, op in ops.items():
            n_ops += 1
            where = f"{method.upper()} {path}"
            responses = op["responses"]
            ok = [c for c in responses if c.startswith("2")]
            assert ok, f"{where} declares no success response"
            for code in ok:
                for ctype, body in responses[code].get("content", {}).items():
                    assert body["schema"], f"{where} {code} {ctype} has an empty schema"
                    if ctype == "application/json":
                        assert "$ref" in body["schema"], f"{where} {code} has no response model"
            for code, r in responses.items():
                if code.startswith("4"):
                    ref = r["content"]["application/json"]["schema"]["$ref"]
                    assert ref in ERROR_REFS, f"{where} {code} uses {ref}"
            has_query = any(p["in"] == "query" for p in op.get("parameters", []))
            if "requestBody" in op or has_query:
                assert "422" in responses, f"{where} validates its input but declares no 422"
            if "requestBody" in op:
                assert "413" in responses, f"{where} takes a body but declares no 413"
            if any(p["in"] == "header" for p in op.get("parameters", [])):
                pytest.fail(f"{where}: header parameters are not expected")
    assert n_ops >= 24


def test_real_responses_conform_to_the_schema(studio: Studio, schema: dict) -> None:
    anon, bob, owner = studio.client(), studio.client("bob"), studio.client("owner")
    ok = studio.client()
    seen: set[tuple[str, str, int]] = set()

    def call(client, method: str, url: str, template: str | None = None, **kw):
        r = client.request(method, url, **kw)
        check(schema, r, method, template or url.split("?")[0])
        seen.add((method, template or url.split("?")[0], r.status_code))
        return r

    call(anon, "GET", "/api/health")
    call(anon, "GET", "/")
    call(anon, "GET", "/favicon.ico")
    call(ok, "POST", "/api/login", json={"token": studio.tokens["alice"]})
    call(anon, "POST", "/api/login", json={"token": "wrong"})
    call(ok, "GET", "/api/me")
    call(anon, "GET", "/api/me")
    call(bob, "GET", "/api/status")
    q = call(bob, "GET", "/api/queries/next?kind=pair").json()["query"]
    call(bob, "GET", "/api/queries/next?kind=nope")
    call(bob, "GET", f"/api/queries/{q['id']}", "/api/queries/{query_id}")
    call(bob, "GET", "/api/queries/nope", "/api/queries/{query_id}")
    key = q["a"][0]["media_key"]
    call(bob, "GET", f"/api/media/{key}", "/api/media/{key}")
    call(bob, "GET", "/api/media/nope", "/api/media/{key}")
    call(bob, "GET", f"/media/{key}.mp4", "/media/{name}")
    call(bob, "GET", f"/media/{key}.mp4", "/media/{name}", headers={"Range": "bytes=0-9"})
    call(anon, "GET", f"/media/{key}.mp4", "/media/{name}")
    call(bob, "GET", "/api/streams/next")
    body = {"query_id": q["id"], "p": 1.0, "client_key": "key-00000001"}
    time.sleep(StudioConfig().min_answer_s)  # answers sooner after serving are refused (409)
    jid = call(bob, "POST", "/api/judgements", json=body).json()["judgement_id"]
    call(bob, "POST", "/api/judgements", json={**body, "p": 0.3})  # schema 422
    call(
        bob,
        "POST",
        "/api/judgements",
        content=b"{not json",
        headers={"content-type": "application/json"},
    )
    call(
        bob,
        "POST",
        "/api/judgements",
        json={**body, "query_id": "r1", "client_key": "key-2-000000"},
    )
    call(bob, "POST", "/api/judgements", json={**body, "query_id": "gone"})
    call(bob, "POST", "/api/judgements", json={**body, "p": 0.0})  # same key, other answer: 409
    call(
        bob,
        "POST",
        "/api/judgements",
        content=b"x" * 70_000,
        headers={"content-type": "application/json"},
    )
    call(ok, "POST", "/api/judgements", json=body, headers={"Origin": "http://evil.example"})
    call(bob, "GET", "/api/judgements/mine?limit=5")
    call(bob, "GET", "/api/judgements/mine?limit=0")
    call(bob, "DELETE", f"/api/judgements/{jid}", "/api/judgements/{jid}")
    call(bob, "DELETE", f"/api/judgements/{jid}x", "/api/judgements/{jid}")
    ratings = {"query_id": "r1", "ratings": [{"step": 0, "t": 1.0, "value": 0.5}]}
    call(bob, "POST", "/api/ratings", json=ratings)
    call(bob, "POST", "/api/ratings", json=ratings)  # the same batch again: a duplicate
    call(
        bob,
        "POST",
        "/api/ratings",
        json={**ratings, "ratings": [{"step": 0, "t": 1.0, "value": 0.1}]},
    )
    call(
        bob,
        "POST",
        "/api/ratings",
        json={**ratings, "ratings": [{"step": 99, "t": 2.0, "value": 0}]},
    )
    call(bob, "GET", "/api/groupwise/round")
    call(bob, "GET", "/api/groupwise/round?round=4")
    call(bob, "GET", "/api/owner/overview")
    call(owner, "GET", "/api/owner/overview")
    call(owner, "POST", "/api/owner/annotators", json={"name": "carol"})
    call(owner, "POST", "/api/owner/annotators", json={"name": ""})
    call(owner, "GET", "/api/owner/export")
    statuses = {s for _m, _p, s in seen}
    assert statuses >= {200, 201, 206, 401, 403, 404, 409, 413, 422}, statuses


def test_the_422_body_is_the_declared_one(studio: Studio, schema: dict) -> None:
    """A bad body gets the studio's own 422 (detail + errors), as /openapi.json declares it."""
    r = studio.client("bob").post("/api/ratings", json={"query_id": "r1", "ratings": [{"t": "x"}]})
    assert r.status_code == 422
    declared = schema["paths"]["/api/ratings"]["post"]["responses"]["422"]
    body_schema = declared["content"]["application/json"]["schema"]
    assert body_schema == {"$ref": "#/components/schemas/ValidationErrorBody"}
    assert problems(r.json(), body_schema, schema) == []
    assert {e["field"] for e in r.json()["errors"]} >= {"ratings.0.step", "ratings.0.t"}
    # and a body that breaks it is caught (the check can fail)
    assert problems({"detail": 1, "errors": [{"loc": []}]}, body_schema, schema)


def test_groupwise_round_conforms(tmp_path, schema: dict) -> None:
    from preflab_bench._studio_groupwise_data import publish_pendulum_round

    token = "tok-ann-" + "b" * 24
    auth = {"Authorization": f"Bearer {token}"}
    store = FeedbackStore(tmp_path / "f.db", array_dir=tmp_path / "segments")
    store.annotators.add(
        Annotator(id="h-ann", source="human", name="ann", meta={"role": "annotator"}), token=token
    )
    app = create_app(store)
    app.state.groupwise.close()
    try:
        with TestClient(app) as c:
            publish_pendulum_round(store, 12, 0)
            r = c.get("/api/groupwise/round", headers=auth)
            check(schema, r, "GET", "/api/groupwise/round")
            view = r.json()["view"]
            ids = view["leaf_order"]
            g = view["group_suggestions"][0]
            answer = {"round": 0, "a": g["a"], "b": g["b"], "p": 1.0, "client_key": "key-g-0001"}
            r = c.post("/api/groupwise/judgements", headers=auth, json=answer)
            assert r.status_code == 201
            check(schema, r, "POST", "/api/groupwise/judgements")
            r = c.get("/api/groupwise/round", headers=auth)
            check(schema, r, "GET", "/api/groupwise/round")
            assert r.json()["view"]["history"] and "from" in r.json()["view"]["history"][0]
            spread = {"round": 0, "a": ids[:3], "b": ids[3:4]}
            check(
                schema,
                c.post("/api/groupwise/spread", headers=auth, json=spread),
                "POST",
                "/api/groupwise/spread",
            )
            clips = c.get("/api/groupwise/clips?ids=" + ",".join(ids[:2]), headers=auth)
            check(schema, clips, "GET", "/api/groupwise/clips")
            r = c.post("/api/groupwise/judgements", headers=auth, json={**answer, "round": 7})
            check(schema, r, "POST", "/api/groupwise/judgements")
    finally:
        store.close()


# ----- the committed bundle is a build of the committed sources -----------------------------
WEB = ROOT / "studio" / "web"
BUNDLE = ROOT / "src" / "preflab" / "studio" / "static"
SOURCES = (
    "src",
    "index.html",
    "package.json",
    "package-lock.json",
    "vite.config.ts",
    "tsconfig.json",
)


def sources_sha256(web: Path = WEB) -> str:
    """The hash scripts/build_studio.sh records: sha256 of the `sha256sum` lines ("HEX  PATH",
    paths relative to studio/web, sorted bytewise) of the front end's source files."""
    files: list[str] = []
    for name in SOURCES:
        p = web / name
        files += (
            [str(f.relative_to(web)) for f in p.rglob("*") if f.is_file()] if p.is_dir() else [name]
        )
    lines = "".join(
        f"{hashlib.sha256((web / f).read_bytes()).hexdigest()}  {f}\n"
        for f in sorted(files, key=lambda s: s.encode())
    )
    return hashlib.sha256(lines.encode()).hexdigest()


def test_committed_bundle_was_built_from_the_current_sources() -> None:
    record = json.loads((BUNDLE / "bundle.json").read_text())
    assert record["sources_sha256"] == sources_sha256(), (
        "the committed studio bundle (src/preflab/studio/static) was built from other front-end "
        "sources than those in studio/web; run `bash scripts/build_studio.sh --force` and commit "
        "src/preflab/studio/static"
    )
    page = (BUNDLE / "index.html").read_text()
    assets = {f.name for f in (BUNDLE / "assets").iterdir()}
    linked = set(re.findall(r'/assets/([^"]+)"', page))
    assert linked <= assets, f"index.html links missing assets {linked - assets}"
    stale = {a for a in assets if a.endswith((".js", ".css")) and a not in linked}
    assert not stale, f"stale files in the bundle: {stale}; rebuild with --force"


def test_the_source_hash_sees_a_change(tmp_path) -> None:
    import shutil

    copy = tmp_path / "web"
    for name in SOURCES:
        src = WEB / name
        if src.is_dir():
            shutil.copytree(src, copy / name)
        else:
            copy.mkdir(exist_ok=True)
            shutil.copy(src, copy / name)
    assert sources_sha256(copy) == sources_sha256()
    (copy / "src" / "dom.ts").write_text((copy / "src" / "dom.ts").read_text() + "// edit\n")
    assert sources_sha256(copy) != sources_sha256()
