"""Security of the studio API (issue #25): bounded integers (422, never a 500), per-token rate
limits and wrong-token throttling (429 with Retry-After), and the CSP's base-uri / form-action."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from preflab.studio import StudioConfig
from preflab.studio.auth import mask_tokens
from tests.studio.api_server import Studio, start_studio

HUGE = 2**63


@pytest.fixture
def studio(tmp_path: Path) -> Iterator[Studio]:
    s = start_studio(tmp_path, media=False)
    yield s
    s.stop()


def test_out_of_range_rounds_get_422_on_the_groupwise_endpoints(studio: Studio) -> None:
    bob = studio.client("bob")
    answer = {"round": HUGE, "a": ["x"], "b": ["y"], "p": 1.0, "client_key": "key-00000001"}
    for r in (
        bob.get(f"/api/groupwise/round?round={HUGE}"),
        bob.get(f"/api/groupwise/round?round={2**31}"),
        bob.post("/api/groupwise/spread", json={"round": HUGE, "a": [], "b": []}),
        bob.post("/api/groupwise/judgements", json=answer),
        bob.post("/api/groupwise/judgements", json={**answer, "round": 0, "suggestion_rank": HUGE}),
    ):
        assert r.status_code == 422, (r.request.url, r.text)
        assert "less than or equal to 2147483647" in r.text
    for r in (
        bob.get(f"/api/judgements/mine?limit={HUGE}"),
        bob.post(
            "/api/ratings",
            json={"query_id": "r1", "ratings": [{"step": HUGE, "t": 0, "value": 0}]},
        ),
    ):
        assert r.status_code == 422, (r.request.url, r.text)


def test_a_wrong_token_flood_gets_429_with_retry_after(studio: Studio) -> None:
    alice = studio.client("alice")
    assert alice.get("/api/me").status_code == 200  # signed in before the flood
    anon = studio.client()
    limit = StudioConfig().auth_failures
    codes = [
        anon.get("/api/me", headers={"Authorization": f"Bearer wrong-{k:04d}"}).status_code
        for k in range(limit + 20)
    ]
    assert codes[:limit] == [401] * limit
    assert set(codes[limit:]) == {429}
    r = anon.get("/api/status", headers={"Authorization": "Bearer wrong-token-again"})
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
    assert "too many wrong tokens" in r.json()["detail"]
    r = anon.post("/api/login", json={"token": "another-wrong-token"})
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
    assert alice.get("/api/me").status_code == 200  # a signed-in person is not locked out


def test_a_token_over_its_rate_gets_429_with_retry_after(tmp_path: Path) -> None:
    studio = start_studio(tmp_path, media=False, config=StudioConfig(rate_per_s=0.5, rate_burst=5))
    try:
        bob, alice = studio.client("bob"), studio.client("alice")
        codes = [bob.get("/api/me").status_code for _ in range(8)]
        assert codes[:5] == [200] * 5 and set(codes[5:]) == {429}
        r = bob.get("/api/status")
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
        assert alice.get("/api/me").status_code == 200  # per token: others are not affected
    finally:
        studio.stop()


def test_csp_forbids_base_and_foreign_form_targets(studio: Studio) -> None:
    for path in ("/", "/api/health"):
        csp = studio.client().get(path).headers["content-security-policy"]
        assert "base-uri 'none'" in csp and "form-action 'self'" in csp
        assert "frame-ancestors 'none'" in csp


def test_tokens_are_masked_in_log_text() -> None:
    tok = "Abc_123-xyz456789012345678901234"
    for text in (
        f"owner link: http://127.0.0.1:8765/#token={tok} (keep it)",
        f"Authorization: Bearer {tok}",
        f'{{"token": "{tok}"}}',
    ):
        masked = mask_tokens(text)
        assert tok not in masked and "***" in masked
