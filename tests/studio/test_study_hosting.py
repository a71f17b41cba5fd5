"""Serving the studio on the internet (issue #61): under a path prefix (uvicorn's root_path, as
behind a proxy that strips the prefix), the client address from a trusted proxy's
X-Forwarded-For for the sign-in throttle, and Secure cookies."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from preflab.store import FeedbackStore
from preflab.studio import StudioConfig, create_app
from preflab.studio import study as S
from preflab.studio.app import STATIC_DIR
from preflab.studio.routes_static import rooted_page
from preflab.studio.study_config import StudyConfig
from tests.studio.api_server import free_port, seed_run


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, FeedbackStore]]:
    store = FeedbackStore(tmp_path / "feedback.db", array_dir=tmp_path / "segments")
    seed_run(store)
    app = create_app(
        store,
        static_dir=STATIC_DIR,
        config=StudioConfig(cookie_secure=True, auth_failures=3, auth_failure_window_s=600),
    )
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host="127.0.0.1",
            port=port,
            log_level="warning",
            root_path="/lab",
            proxy_headers=True,
            forwarded_allow_ips="127.0.0.1",
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive()
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}", store
    server.should_exit = True
    thread.join(timeout=10)
    store.close()


def test_the_page_and_api_work_under_a_root_path(served) -> None:
    url, _store = served
    with httpx.Client(base_url=url, trust_env=False) as c:
        page = c.get("/").text  # the proxy stripped /lab
        assert '<meta name="preflab-root" content="/lab">' in page
        assert 'src="/lab/assets/' in page and 'src="/assets/' not in page
        asset = page.split('src="/lab', 1)[1].split('"', 1)[0]
        assert c.get(asset).status_code == 200
        assert c.get("/api/health").json() == {"ok": True, "app": "preflab-studio"}


def test_the_throttle_counts_the_forwarded_client_address(served) -> None:
    url, _store = served
    with httpx.Client(base_url=url, trust_env=False) as c:
        bad = {"Authorization": "Bearer wrong-token-123"}
        for _ in range(3):
            r = c.get("/api/me", headers={**bad, "X-Forwarded-For": "203.0.113.5"})
            assert r.status_code == 401
        r = c.get("/api/me", headers={**bad, "X-Forwarded-For": "203.0.113.5"})
        assert r.status_code == 429
        # another person behind the same proxy is not throttled
        r = c.get("/api/me", headers={**bad, "X-Forwarded-For": "203.0.113.6"})
        assert r.status_code == 401


def test_study_cookies_are_secure_and_links_stay_under_the_root(served) -> None:
    url, store = served
    secret = S.create(store, StudyConfig(practice_pairs=0))
    with httpx.Client(base_url=url, trust_env=False, follow_redirects=False) as c:
        r = c.get(f"/s/{secret}", params={"pid": "lab-1"})
        assert r.status_code == 303
        assert r.headers["location"] == "../study/consent?joined=1"  # relative: keeps /lab
        cookie = r.headers["set-cookie"].lower()
        assert "secure" in cookie and "httponly" in cookie and "samesite=lax" in cookie


def test_rooted_page_escapes_and_leaves_the_root_page_alone() -> None:
    page = '<html><head><script src="/assets/a.js"></script></head></html>'
    assert rooted_page(page, "") == page.replace(
        "<head>", '<head><meta name="preflab-root" content="">'
    )
    assert 'src="/x&quot;y/assets/a.js"' in rooted_page(page, '/x"y')
