"""A rendered clip plays in headless Chromium (Debian's build), served with range requests."""

from __future__ import annotations

import functools
import http.server
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

from preflab.media.encode import ClipWriter

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

PLAY = """async (src) => {
  const v = document.createElement('video');
  v.muted = true; v.preload = 'auto'; v.src = src; document.body.appendChild(v);
  const how = await new Promise((ok) => {
    v.onloadeddata = () => ok('loaded');
    v.onerror = () => ok('error ' + (v.error && v.error.code));
    setTimeout(() => ok('timeout'), 10000);
  });
  let t = null;
  if (how === 'loaded') { await v.play(); await new Promise((r) => setTimeout(r, 400)); t = v.currentTime; }
  return {how, readyState: v.readyState, duration: v.duration, w: v.videoWidth, h: v.videoHeight, t};
}"""


class RangeHandler(http.server.SimpleHTTPRequestHandler):
    """Static files with single byte-range support (as Starlette's FileResponse serves them)."""

    def log_message(self, *args: object) -> None:
        pass

    def send_head(self):  # type: ignore[no-untyped-def]
        rng = self.headers.get("Range")
        path = Path(self.translate_path(self.path))
        if not rng or not path.is_file():
            return super().send_head()
        size = path.stat().st_size
        start_s, _, end_s = rng.removeprefix("bytes=").partition("-")
        start = int(start_s or 0)
        end = min(int(end_s) if end_s else size - 1, size - 1)
        f = open(path, "rb")  # noqa: SIM115 (closed by copyfile's caller)
        f.seek(start)
        self.send_response(206)
        self.send_header("Content-Type", self.guess_type(str(path)))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        return f


@pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason="chromium is not installed")
@pytest.mark.parametrize("fmt", ["mp4", "webm"])
def test_clip_plays_in_chromium(tmp_path: Path, fmt: str) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    with ClipWriter(tmp_path / f"clip.{fmt}", fps=30, fmt=fmt) as w:  # type: ignore[arg-type]
        for k in range(45):
            f = np.zeros((128, 160, 3), np.uint8)
            f[:, k * 3 : k * 3 + 20] = (255, 128, 0)
            w.write(f)
    (tmp_path / "index.html").write_text("<!doctype html><title>t</title><body></body>")
    handler = functools.partial(RangeHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{server.server_address[1]}/index.html")
            r = page.evaluate(PLAY, f"/clip.{fmt}")
            browser.close()
    finally:
        server.shutdown()
    assert r["how"] == "loaded", r
    assert r["readyState"] >= 2 and r["w"] == 160 and r["h"] == 128
    assert abs(r["duration"] - 1.5) < 0.1
    assert r["t"] > 0  # it actually played
