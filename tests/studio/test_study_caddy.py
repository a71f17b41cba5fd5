"""The hosting recipe of docs/guide/study.md on loopback (issue #61; slow): Caddy (Debian's
package) serves the studio over HTTPS with its own certificate authority (``tls internal``)
under /lab, stripping the prefix; the studio runs with --root-path /lab, trusts the proxy's
X-Forwarded-* headers and marks cookies Secure."""

from __future__ import annotations

import os
import shutil
import subprocess
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
from preflab.studio.study_config import StudyConfig
from tests.studio.api_server import free_port, seed_run

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("caddy") is None, reason="apt-get install caddy"),
]

CADDYFILE = """\
{{
    admin off
    skip_install_trust
}}
https://127.0.0.1:{https_port} {{
    tls internal
    handle_path /lab/* {{
        reverse_proxy 127.0.0.1:{studio_port} {{
            header_up X-Forwarded-For 198.51.100.7
        }}
    }}
}}
"""


@pytest.fixture
def behind_caddy(tmp_path: Path) -> Iterator[tuple[str, FeedbackStore, int]]:
    store = FeedbackStore(tmp_path / "feedback.db", array_dir=tmp_path / "segments")
    seed_run(store)
    app = create_app(
        store,
        static_dir=STATIC_DIR,
        config=StudioConfig(cookie_secure=True, auth_failures=3, auth_failure_window_s=600),
    )
    studio_port, https_port = free_port(), free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host="127.0.0.1",
            port=studio_port,
            log_level="warning",
            root_path="/lab",
            proxy_headers=True,
            forwarded_allow_ips="127.0.0.1",
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    conf = tmp_path / "Caddyfile"
    conf.write_text(CADDYFILE.format(https_port=https_port, studio_port=studio_port))
    env = {
        **os.environ,
        "HOME": str(tmp_path),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    caddy = subprocess.Popen(
        ["caddy", "run", "--config", str(conf), "--adapter", "caddyfile"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "caddy.log").open("w"),
    )
    base = f"https://127.0.0.1:{https_port}/lab"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{base}/api/health", verify=False, trust_env=False).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert caddy.poll() is None, (tmp_path / "caddy.log").read_text()[-2000:]
        assert time.monotonic() < deadline, "caddy did not come up"
        time.sleep(0.2)
    yield base, store, studio_port
    caddy.terminate()
    caddy.wait(timeout=10)
    server.should_exit = True
    thread.join(timeout=10)
    store.close()


def test_the_studio_behind_caddy_with_tls_and_a_path_prefix(behind_caddy) -> None:
    base, store, studio_port = behind_caddy
    secret = S.create(store, StudyConfig(practice_pairs=0))
    with httpx.Client(verify=False, trust_env=False, follow_redirects=False) as c:
        page = c.get(f"{base}/").text
        assert '<meta name="preflab-root" content="/lab">' in page and 'src="/lab/assets/' in page
        r = c.get(f"{base}/s/{secret}", params={"PROLIFIC_PID": "abc123"})
        assert r.status_code == 303 and "secure" in r.headers["set-cookie"].lower()
        consent = c.get(httpx.URL(f"{base}/s/{secret}").join(r.headers["location"]))
        assert consent.status_code == 200 and "I agree" in consent.text
        assert c.get(f"{base}/study/study.css").status_code == 200
        # the throttle counts the address the proxy forwards (198.51.100.7), not the proxy's
        for _ in range(3):
            assert (
                c.get(f"{base}/api/me", headers={"Authorization": "Bearer nope-nope"}).status_code
                == 401
            )
        assert (
            c.get(f"{base}/api/me", headers={"Authorization": "Bearer nope-nope"}).status_code
            == 429
        )
    # the proxy's own address (127.0.0.1, asking directly) was never counted
    direct = httpx.get(
        f"http://127.0.0.1:{studio_port}/api/me",
        headers={"Authorization": "Bearer nope-nope"},
        trust_env=False,
    )
    assert direct.status_code == 401
    # the cookie reached the study pages through the proxy
    (p,) = store.studies.participants(S.STUDY_ID)
    assert p.platform == {"PROLIFIC_PID": "abc123"}
