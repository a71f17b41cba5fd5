"""Clips for the browser: segment ids → media keys, render status and URLs (never true rewards).

The media service (``preflab.media.MediaService``, Contract B) is optional: without it every
clip is 'unavailable' and the studio still works for judging from other cues.

Every clip and stream carries its ``timing`` (:class:`preflab.media.timing.ClipTiming` as JSON:
the env's real-time step length, the encoded fps, the player's base rate and the still frames
at both ends), so the page plays it at the env's real time and says so. Pair and group clips
of one segment hold their first and last frame still for a moment; rating streams do not (their
frame k is step k).
"""

from __future__ import annotations

import inspect
import logging
import re
import threading
from collections.abc import Sequence
from typing import Any, Protocol

from preflab.kinds import kind_of
from preflab.records import Query
from preflab.store import FeedbackStore

log = logging.getLogger(__name__)
KEY_RE = re.compile(r"^[0-9a-f]{32}$")


class MediaLike(Protocol):
    """What the studio uses of :class:`preflab.media.MediaService`."""

    def key_for(self, segment_ids: Sequence[str]) -> str: ...
    def request(self, segment_ids: Sequence[str], priority: int) -> str: ...
    def status(self, key: str) -> str: ...
    def path(self, key: str) -> Any: ...


def media_url(key: str) -> str:
    return f"/media/{key}.mp4"


def fps_of(media: MediaLike | None, default: int) -> int:
    """The media config's fixed fps, else ``default``: only a fallback now; each clip's real
    frame rate comes from :func:`clip_timing` (the env's real time)."""
    cfg = getattr(media, "config", None)
    fps = getattr(cfg, "fps", None)
    return int(fps) if isinstance(fps, int | float) and fps > 0 else default


def _takes_still(media: MediaLike) -> bool:
    """Whether ``media.request`` accepts ``still=`` (MediaService does; older stand-ins not)."""
    try:
        return "still" in inspect.signature(media.request).parameters
    except (TypeError, ValueError):
        return False


def clip_timing(media: MediaLike | None, env_id: str | None, *, still: bool) -> dict[str, Any]:
    """The clip's timing as JSON (:class:`preflab.media.timing.ClipTiming`): from the media
    service when it has one (its fixed fps and still seconds), else the env's real time."""
    from preflab.media.timing import clip_timing as env_timing

    timing = getattr(media, "timing", None)
    try:
        if callable(timing) and _takes_still(media):  # type: ignore[arg-type]
            return dict(timing(env_id or "", still=still).as_dict())
        return env_timing(env_id or "").as_dict()
    except Exception:  # a broken env must not break judging
        log.exception("clip timing failed for %r", env_id)
        return env_timing("").as_dict()


def request_clip(
    media: MediaLike | None, segment_ids: Sequence[str], priority: int, *, still: bool = False
) -> dict:
    """Schedule rendering and return {media_key, media_url, status}. ``still``: the clip holds
    its first and last frame at both ends (when the media service supports it)."""
    if media is None:
        return {"media_key": None, "media_url": None, "status": "unavailable"}
    try:
        if still and _takes_still(media):
            key = media.request(list(segment_ids), priority, still=True)  # type: ignore[call-arg]
        else:
            key = media.request(list(segment_ids), priority)
        status = media.status(key)
    except Exception:  # a broken renderer must not break judging
        log.exception("media request failed for %s", list(segment_ids))
        return {"media_key": None, "media_url": None, "status": "failed"}
    return {"media_key": key, "media_url": media_url(key), "status": status}


def media_status(media: MediaLike | None, key: str) -> str:
    if media is None:
        return "unavailable"
    try:
        return str(media.status(key))
    except Exception:
        log.exception("media status failed for %s", key)
        return "failed"


def query_view(
    store: FeedbackStore, media: MediaLike | None, q: Query, *, priority: int, fps: int
) -> dict[str, Any]:
    """{id, kind, round, a: [Clip], b: [Clip]} with one clip per segment, each with its timing
    (the env's real time; still frames at both ends). ``fps`` is only a fallback."""
    info = store.segments.info([*q.a, *q.b])

    def clip(sid: str) -> dict[str, Any]:
        row = info.get(sid, {})
        timing = clip_timing(media, row.get("env_id"), still=True)
        return {
            "segment_id": sid,
            **request_clip(media, [sid], priority, still=True),
            "length": row.get("length"),
            "fps": round(timing["fps"]) if row else fps,
            "timing": timing,
        }

    return {
        "id": q.id,
        "kind": q.kind,
        "round": q.round,
        "a": [clip(s) for s in q.a],
        "b": [clip(s) for s in q.b],
    }


def prefetch(media: MediaLike | None, queries: Sequence[Query]) -> None:
    """Render the clips of the queries likely to come next (priority 1)."""
    if media is None:
        return
    for q in queries:
        kind = kind_of(q)
        for tile in kind.clip_sides(q):
            request_clip(media, list(tile), 1, still=not kind.streams)


def stream_view(
    store: FeedbackStore, media: MediaLike | None, q: Query, *, fps: int
) -> dict[str, Any]:
    """{query_id, media_key, media_url, status, n_steps, fps, timing}: one clip of all of
    ``q.a`` (no still frames: frame k is step k), at the first segment's env's real time."""
    info = store.segments.info(q.a)
    n_steps = sum(info.get(s, {}).get("length", 0) for s in q.a)
    first = info.get(q.a[0], {}) if q.a else {}
    timing = clip_timing(media, first.get("env_id"), still=False)
    return {
        "query_id": q.id,
        **request_clip(media, q.a, 0),
        "n_steps": n_steps,
        "fps": round(timing["fps"]) if first else fps,
        "timing": timing,
    }


def ready_first(media: MediaLike | None, queries: Sequence[Query], window: int) -> list[Query]:
    """``queries`` with those among the first ``window`` whose clips are all rendered moved
    ahead of those still rendering (each group in its order): a person is not shown a
    spinner while a rendered pair waits behind it, e.g. when a new round's pairs arrive.
    Asks the media service to render the clips it looks at (priority 1)."""
    if media is None or window <= 1:
        return list(queries)
    head, tail = list(queries[:window]), list(queries[window:])

    def ready(q: Query) -> bool:
        kind = kind_of(q)
        return all(
            request_clip(media, list(tile), 1, still=not kind.streams)["status"] == "ready"
            for tile in kind.clip_sides(q)
        )

    flags = [ready(q) for q in head]
    return (
        [q for q, r in zip(head, flags, strict=True) if r]
        + [q for q, r in zip(head, flags, strict=True) if not r]
        + tail
    )


class Prerenderer:
    """Renders the clips of every query the trainer publishes as soon as it is stored, so the
    first pair of a new round is ready when a person reaches it (no spinner). A daemon thread
    looks for new open queries every ``every_s`` seconds and schedules their clips behind the
    person's own prefetch (priority 2); each query once: it reads on from the highest query seq
    it has read (:meth:`preflab.store.queries.Queries.unanswered_after`), so each look costs
    what is new, not the run's size."""

    def __init__(self, store: FeedbackStore, media: MediaLike | None, every_s: float = 1.0):
        self.store, self.media, self.every_s = store, media, every_s
        self._after = 0  # the highest query seq read: every query at or below it was looked at
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self.media is not None and self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="prerender", daemon=True)
            self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def render_new(self) -> int:
        """Schedule the clips of open queries not seen before, in a person's queue order (newest
        round first, the selector's order within a round; withdrawn ones not at all); how many."""
        stored, self._after = self.store.queries.unanswered_after(self._after)
        new = sorted(stored, key=lambda q: -q.round)  # stable: seq order within a round
        for q in new:
            kind = kind_of(q)
            for tile in kind.clip_sides(q):
                request_clip(self.media, list(tile), 2, still=not kind.streams)
        return len(new)

    def _watch(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.render_new()
            except Exception:  # a store hiccup must not end the watcher
                log.exception("pre-rendering new queries failed; retrying")
