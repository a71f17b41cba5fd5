"""Screenshots of the built site for docs/screenshots/site-*.png (1280×800), taken with Debian's
Chromium through Playwright, as the studio's are (preflab.testing.browser).

    .venv/bin/mkdocs build --strict && .venv/bin/python docs/screenshots.py

It serves site/ on a free local port (nothing else is fetched) and writes one PNG per page.
"""

from __future__ import annotations

import functools
import http.server
import threading
from pathlib import Path

from playwright.sync_api import sync_playwright

from preflab.testing.browser import launch_chromium

ROOT = Path(__file__).resolve().parents[1]
SHOTS = {
    "site-home.png": "",
    "site-tutorial.png": "tutorials/preference-function/",
    "site-api.png": "api/#preflab.runs.train",
    "site-results.png": "results/paper-bpref/",
}
"""File name → page (relative to the site's root)."""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    handler = functools.partial(_Quiet, directory=str(ROOT / "site"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        with sync_playwright() as p:
            browser = launch_chromium(p)
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            outside: list[str] = []
            page.on(
                "request",
                lambda r: outside.append(r.url) if not r.url.startswith(base) else None,
            )
            for name, path in SHOTS.items():
                page.goto(base + path, wait_until="networkidle")
                page.screenshot(path=str(ROOT / "docs" / "screenshots" / name))
            browser.close()
        if [u for u in outside if not u.startswith("data:")]:
            raise SystemExit(f"the site requested other hosts: {sorted(set(outside))}")
    finally:
        server.shutdown()


if __name__ == "__main__":
    main()
