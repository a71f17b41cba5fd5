"""Support for the studio API tests: a real uvicorn server on a free loopback port, a real
SQLite store with a small run in it, and a stand-in media service that writes real MP4s."""

from __future__ import annotations

import hashlib
import shutil
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np
import uvicorn
from sqlalchemy import func, select

from preflab.records import Annotator, Query
from preflab.store import FeedbackStore
from preflab.store import schema as S
from preflab.studio import StudioConfig, create_app
from preflab.testing.factories import make_segments

TABLES = ("annotators", "segments", "queries", "judgements", "ratings", "retractions", "rounds")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_mp4(path: Path, n_frames: int = 8, size: int = 32) -> None:
    """A real (tiny) H.264 MP4 via imageio-ffmpeg."""
    import imageio_ffmpeg

    gen = imageio_ffmpeg.write_frames(
        str(path), (size, size), fps=10, codec="libx264", pix_fmt_out="yuv420p", quality=5
    )
    gen.send(None)
    for k in range(n_frames):
        frame = np.full((size, size, 3), (k * 30) % 255, np.uint8)
        gen.send(frame.tobytes())
    gen.close()


class StandInMedia:
    """Contract B's MediaService interface, rendering every request at once by copying one real
    MP4; segment ids listed in ``pending`` stay 'pending'."""

    def __init__(self, cache_dir: Path, template: Path) -> None:
        self.cache_dir = cache_dir
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.template = template
        self.pending: set[str] = set()
        self.requests: list[tuple[tuple[str, ...], int]] = []
        self.lock = threading.Lock()

    def key_for(self, segment_ids: Sequence[str]) -> str:
        return hashlib.sha256("|".join(segment_ids).encode()).hexdigest()[:32]

    def request(self, segment_ids: Sequence[str], priority: int) -> str:
        key = self.key_for(segment_ids)
        with self.lock:
            self.requests.append((tuple(segment_ids), priority))
        if not set(segment_ids) & self.pending:
            target = self.cache_dir / f"{key}.mp4"
            if not target.exists():
                shutil.copyfile(self.template, target)
        return key

    def status(self, key: str) -> str:
        return "ready" if (self.cache_dir / f"{key}.mp4").exists() else "pending"

    def path(self, key: str) -> Path | None:
        p = self.cache_dir / f"{key}.mp4"
        return p if p.exists() else None

    def close(self) -> None:
        pass


def seed_run(store: FeedbackStore) -> dict[str, str]:
    """Segments, queries (two rounds, every kind) and three people; returns their tokens."""
    s = make_segments(8, rng=np.random.default_rng(7), obs_dim=3, env_id="Toy-v0", episode=range(8))
    store.segments.add(s)
    store.queries.add(
        [
            Query(id="q1", kind="pair", a=(s[0].id,), b=(s[1].id,), round=1),
            Query(id="q2", kind="pair", a=(s[2].id,), b=(s[3].id,), round=1),
            Query(id="q3", kind="pair", a=(s[4].id,), b=(s[5].id,), round=2),
            Query(id="g1", kind="group", a=(s[0].id, s[6].id), b=(s[7].id,), round=2),
            Query(id="r1", kind="rating", a=(s[6].id, s[7].id), round=2),
        ]
    )
    tokens = {
        "owner": "owner-token-123456",
        "alice": "alice-token-123456",
        "bob": "bob-token-12345",
    }
    for who, tok in tokens.items():
        role = "owner" if who == "owner" else "annotator"
        name = "<script>alert(1)</script> Ann" if who == "alice" else who
        store.annotators.add(
            Annotator(id=who, source="human", name=name, meta={"role": role}), token=tok
        )
    return tokens


def counts(store: FeedbackStore) -> dict[str, int]:
    with store.engine.connect() as c:
        return {
            t: int(c.execute(select(func.count()).select_from(S.metadata.tables[t])).scalar_one())
            for t in TABLES
        }


@dataclass
class Studio:
    """A running studio: base URL, its store, tokens and the stand-in media service."""

    url: str
    store: FeedbackStore
    tokens: dict[str, str]
    media: StandInMedia | None
    server: uvicorn.Server
    thread: threading.Thread
    clients: list[httpx.Client] = field(default_factory=list)

    def client(self, who: str | None = None, **kw) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.tokens[who]}"} if who else {}
        c = httpx.Client(base_url=self.url, headers=headers, trust_env=False, timeout=30, **kw)
        self.clients.append(c)
        return c

    def cached(self, who: str | None = None) -> httpx.Client:
        """One shared client per identity (for many requests in a row)."""
        if not hasattr(self, "_cache"):
            self._cache: dict[str | None, httpx.Client] = {}
        if who not in self._cache:
            self._cache[who] = self.client(who)
        return self._cache[who]

    def stop(self) -> None:
        for c in self.clients:
            c.close()
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.store.close()


def start_studio(
    tmp: Path,
    *,
    media: bool = True,
    static_dir: Path | None = None,
    config: StudioConfig | None = None,
    store_url: str | None = None,
) -> Studio:
    store = FeedbackStore(store_url or tmp / "feedback.db", array_dir=tmp / "segments")
    tokens = seed_run(store)
    svc = None
    if media:
        template = tmp / "template.mp4"
        write_mp4(template)
        svc = StandInMedia(tmp / "media", template)
    app = create_app(
        store,
        media=svc,  # type: ignore[arg-type]
        static_dir=static_dir or tmp / "static",
        config=config or StudioConfig(),
    )
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("studio server did not start")
        time.sleep(0.02)
    return Studio(
        url=f"http://127.0.0.1:{port}",
        store=store,
        tokens=tokens,
        media=svc,
        server=server,
        thread=thread,
    )
