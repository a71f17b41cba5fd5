"""MediaService: behaviour clips for the studio, rendered lazily in priority order and cached.

>>> media = MediaService(store, run_dir / "media", config=MediaConfig())
>>> key = media.request([segment_id], priority=0)   # returns at once
>>> media.status(key)                               # 'pending' → 'ready'
>>> media.path(key)                                 # Path of the .mp4, or None

A key names the clip's content (segment ids, size, fps, still padding, format and renderer
version), never a path; the file lives at ``cache_dir/<key[:2]>/<key>.<format>``. Several ids render one after
another into one clip (rating streams): frame k of the clip is step k of the concatenation.
Clips play at the env's real time (:mod:`preflab.media.timing`, :meth:`MediaService.timing`);
a clip requested with ``still=True`` (a short segment shown to a person) holds its first and
last frame for ``MediaConfig.still_s`` seconds at both ends: frame k is then step
``k - still_frames``.
A segment whose env has no replayer (and no stored frames) is 'unavailable'; a render error is
'failed' with its message (:meth:`MediaService.clip_info`) and logged, never raised.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from preflab.errors import ConfigError, DataError
from preflab.media.cache import ClipCache, valid_key
from preflab.media.encode import FORMATS, MIME, VideoFormat
from preflab.media.pool import WorkerPool
from preflab.media.replay import MAX_FPS, RENDERER_VERSION
from preflab.media.timing import DEFAULT_STILL_S, ClipTiming, clip_timing
from preflab.store.feedback_store import FeedbackStore

log = logging.getLogger("preflab.media")

Status = Literal["ready", "pending", "failed", "unavailable"]


@dataclass(frozen=True, kw_only=True)
class MediaConfig:
    """How clips are rendered and by how many workers."""

    size: int = 256
    """Longer side of the clip in pixels (240–320 suits the studio); even."""
    fps: int | None = None
    """Frames per second; None = the env's real time (one frame per step at
    :func:`preflab.media.timing.step_seconds`: Hopper-v5 125, Pendulum-v1 30, Pong 15). A fixed
    fps is made up for by the player's base playback rate (:attr:`ClipTiming.playback_rate`)."""
    still_s: float = DEFAULT_STILL_S
    """Seconds the first and last frame are held at both ends of clips requested with
    ``still=True`` (so a person sees where a short behaviour starts and ends); 0 = none."""
    format: VideoFormat = "mp4"
    """'mp4' (H.264, yuv420p, faststart) or 'webm' (VP9). Both play in Chromium and Firefox."""
    workers: int = 2
    """Render worker processes (each renders one clip at a time, MuJoCo via EGL)."""
    job_timeout_s: float = 300.0
    """A clip that takes longer is failed and its worker restarted."""
    max_attempts: int = 2
    """A failed clip is rendered again on a later request until it failed this many times."""
    warm_env_ids: tuple[str, ...] = ()
    """Envs each worker builds (and draws one frame of) at start, so the first clip is quick."""
    plugins: tuple[str, ...] = ()
    """Modules each worker imports at start (to register replayers of other envs)."""

    def __post_init__(self) -> None:
        if not 16 <= self.size <= 2048 or self.size % 2:
            raise ConfigError(f"media size must be an even number in [16, 2048], got {self.size}")
        if self.fps is not None and not 1 <= self.fps <= MAX_FPS:
            raise ConfigError(f"media fps must lie in [1, {MAX_FPS}] or be None, got {self.fps}")
        if not 0.0 <= self.still_s <= 5.0:
            raise ConfigError(f"media still_s must lie in [0, 5] seconds, got {self.still_s}")
        if self.format not in FORMATS:
            raise ConfigError(f"media format must be one of {FORMATS}, got {self.format!r}")
        if self.workers < 1:
            raise ConfigError(f"media workers must be ≥ 1, got {self.workers}")
        if self.max_attempts < 1:
            raise ConfigError(f"max_attempts must be ≥ 1, got {self.max_attempts}")


@dataclass
class ClipInfo:
    """What is known about one clip."""

    key: str
    """The media key."""
    status: Status
    """'ready', 'pending', 'failed' or 'unavailable'."""
    segment_ids: tuple[str, ...] = ()
    """Segments in the clip, in order (empty when only the file is known)."""
    error: str | None = None
    """Why it failed or is unavailable."""
    n_frames: int | None = None
    """Frames in the clip (steps plus still frames) once rendered in this process."""
    fps: float | None = None
    """Frames per second once rendered in this process."""
    width: int | None = None
    """Frame width in pixels once rendered in this process."""
    height: int | None = None
    """Frame height in pixels once rendered in this process."""
    attempts: int = 0
    """Renders started for it in this process."""
    timings: dict[str, float] = field(default_factory=dict)
    """Worker-side seconds: setup_s, render_s, encode_s, total_s (wall) and cpu_s (worker
    process), encoder_cpu_s (its ffmpeg)."""
    requested_at: float | None = None
    """time.monotonic() of the request that scheduled the last render."""
    finished_at: float | None = None
    """time.monotonic() when it stopped being pending."""
    n_steps: int | None = None
    """Env steps in the clip once rendered in this process."""
    still_frames: int | None = None
    """Still frames at each end once rendered in this process."""


def save_frames(store: FeedbackStore, segment_id: str, frames: np.ndarray) -> Path:
    """Store pre-rendered frames (T, H, W, 3) uint8 for a segment whose env has no replayer.

    They go beside the segment's arrays as ``<id>.frames.npz`` (written atomically) and take
    precedence over replaying its states. Returns the file's path.
    """
    f = np.asarray(frames)
    if f.ndim != 4 or f.shape[3] != 3 or f.dtype != np.uint8 or f.shape[0] == 0:
        raise DataError(
            f"frames must be a (T, H, W, 3) uint8 array with T ≥ 1, got {f.shape} {f.dtype}"
        )
    path = store.arrays.path(segment_id)
    final = path.with_name(f"{segment_id}.frames.npz")
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            np.savez_compressed(fh, frames=f)
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            tmp.unlink()
    return final


class MediaService:
    """Schedules, tracks and caches clip renders for segments in a :class:`FeedbackStore`."""

    def __init__(
        self, store: FeedbackStore, cache_dir: str | Path, *, config: MediaConfig | None = None
    ) -> None:
        self.store = store
        self.config = c = config or MediaConfig()
        self.cache = ClipCache(cache_dir, c.format)
        self.cache.remove_stale_parts()
        self._lock = threading.Lock()
        self._info: dict[str, ClipInfo] = {}
        self._events: dict[str, threading.Event] = {}
        self.renders = 0
        """Render jobs handed to the pool by this service (cache hits do not count)."""
        env: dict[str, str] = {}
        if c.warm_env_ids:
            env["PREFLAB_MEDIA_WARM"] = ",".join(f"{e}@{c.size}" for e in c.warm_env_ids)
        if c.plugins:
            env["PREFLAB_MEDIA_PLUGINS"] = ",".join(c.plugins)
        self.pool = WorkerPool(
            c.workers,
            on_done=self._done,
            log_dir=self.cache.root / "logs",
            timeout_s=c.job_timeout_s,
            env=env,
        )

    # ----- keys -------------------------------------------------------------------------------
    def key_for(self, segment_ids: Sequence[str], *, still: bool = False) -> str:
        """32 hex chars: sha256 of the ids, size, fps, still padding, format and renderer
        version."""
        c = self.config
        blob = json.dumps(
            {
                "ids": list(segment_ids),
                "size": c.size,
                "fps": c.fps if c.fps is not None else "env",
                "still": c.still_s if still else 0,
                "format": c.format,
                "renderer": RENDERER_VERSION,
            },
            separators=(",", ":"),
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:32]

    @property
    def mime_type(self) -> str:
        """Content type of the clips ('video/mp4' or 'video/webm')."""
        return MIME[self.config.format]

    @property
    def suffix(self) -> str:
        """File suffix of the clips without the dot ('mp4' or 'webm')."""
        return self.config.format

    # ----- requests ---------------------------------------------------------------------------
    def request(self, segment_ids: Sequence[str], priority: int = 0, *, still: bool = False) -> str:
        """Schedule the clip of ``segment_ids`` (lower priority number = sooner); returns its
        key at once. A cached clip is not rendered again; a waiting one moves forward when
        asked for with a smaller number. ``still``: hold the first and last frame for
        ``config.still_s`` seconds at both ends (another clip, another key)."""
        ids = tuple(segment_ids)
        key = self.key_for(ids, still=still)
        with self._lock:
            info = self._info.get(key)
            if info is None:
                info = self._info[key] = ClipInfo(key=key, status="pending", segment_ids=ids)
                self._events[key] = threading.Event()
            elif info.status in ("ready", "unavailable"):
                if info.status == "unavailable" or self.cache.get(key) is not None:
                    return key
            elif info.status == "failed" and info.attempts >= self.config.max_attempts:
                return key
            if self.cache.get(key) is not None:
                info.status = "ready"
                self._events[key].set()
                return key
            if not ids:
                self._finish(info, "failed", "a clip needs at least one segment id")
                return key
            if info.status == "pending" and info.attempts > 0:
                self.pool.submit(key, priority, None)  # already queued/running: maybe move forward
                return key
            job = self._job(key, ids, still=still)
            if isinstance(job, str):
                self._finish(info, "failed", job)
                return key
            info.status, info.error = "pending", None
            info.attempts += 1
            info.requested_at, info.finished_at = time.monotonic(), None
            self._events[key].clear()
            self.renders += 1
            # under the lock, so a concurrent request for this key can only move it forward
            # (pool threads call back into this service without holding the pool's lock)
            self.pool.submit(key, priority, job)
        return key

    def _job(self, key: str, ids: tuple[str, ...], *, still: bool = False) -> dict[str, Any] | str:
        """The worker job for ``ids``, or an error message."""
        try:
            info = self.store.segments.info(sorted(set(ids)))
        except Exception as exc:
            return f"cannot read segment rows from the store: {exc}"
        env_of = {sid: row["env_id"] for sid, row in info.items()}
        missing = [i for i in ids if i not in env_of]
        if missing:
            return f"{len(missing)} segment id(s) are not in the store, e.g. {missing[:3]}"
        items = []
        for i in ids:
            try:
                npz = self.store.arrays.path(i)
            except Exception as exc:
                return str(exc)
            items.append(
                {
                    "id": i,
                    "env_id": env_of[i],
                    "npz": str(npz),
                    "frames": str(npz.with_name(f"{i}.frames.npz")),
                }
            )
        timing = self.timing(env_of[ids[0]], still=still)  # the first segment's env sets the pace
        return {
            "job": key,
            "out": str(self.cache.path_for(key)),
            "fmt": self.config.format,
            "size": self.config.size,
            "fps": timing.fps,
            "still_frames": timing.still_frames,
            "items": items,
        }

    def _finish(self, info: ClipInfo, status: Status, error: str | None) -> None:
        info.status, info.error = status, error
        info.finished_at = time.monotonic()
        if status == "failed":
            log.warning("clip %s failed: %s", info.key, error)
        self._events[info.key].set()

    def _done(self, key: str, res: dict[str, Any]) -> None:
        status = res.get("status")
        with self._lock:
            info = self._info.get(key)
            if info is None:
                return
            if status == "ready" and self.cache.get(key) is None:
                status, res = (
                    "failed",
                    {**res, "error": "the worker reported a clip it did not write"},
                )
            for k in ("n_frames", "n_steps", "still_frames", "width", "height"):
                if res.get(k) is not None:
                    setattr(info, k, int(res[k]))
            if res.get("fps") is not None:
                info.fps = float(res["fps"])
            info.timings = {
                k: float(res[k])
                for k in ("setup_s", "render_s", "encode_s", "cpu_s", "encoder_cpu_s", "total_s")
                if res.get(k) is not None
            }
            if status not in ("ready", "unavailable", "failed"):
                status = "failed"
            self._finish(info, status, res.get("error"))  # type: ignore[arg-type]

    # ----- queries ----------------------------------------------------------------------------
    def status(self, key: str) -> Status:
        """'ready', 'pending', 'failed' or 'unavailable'. A key never requested in this process is
        'ready' when its file is cached; otherwise KeyError (serve a 404)."""
        with self._lock:
            info = self._info.get(key)
            if info is not None:
                if info.status == "ready" and self.cache.get(key) is None:
                    return "failed"  # the file was deleted behind our back
                return info.status
        if self.cache.get(key) is not None:
            return "ready"
        raise KeyError(key)

    def path(self, key: str) -> Path | None:
        """The clip's file when it is ready, else None (also for malformed keys)."""
        return self.cache.get(key) if valid_key(key) else None

    def clip_info(self, key: str) -> ClipInfo | None:
        """Everything known about ``key`` (a copy), or None when unknown and not cached."""
        with self._lock:
            info = self._info.get(key)
            if info is not None:
                return ClipInfo(**{**info.__dict__, "timings": dict(info.timings)})
        if self.cache.get(key) is not None:
            return ClipInfo(key=key, status="ready")
        return None

    def wait(self, key: str, timeout: float | None = None) -> Status:
        """Block until ``key`` is no longer pending (or ``timeout`` seconds passed)."""
        with self._lock:
            ev = self._events.get(key)
        if ev is not None:
            ev.wait(timeout)
        return self.status(key)

    def timing(self, env_id: str, *, still: bool = False) -> ClipTiming:
        """How clips of ``env_id`` are encoded and played in real time (the config's fps when
        fixed, else one frame per env step at the env's real time; still frames when ``still``).
        Builds the env once per id, with gymnasium alone; 30 steps/s when it cannot be built."""
        c = self.config
        return clip_timing(env_id, fps=c.fps, still_s=c.still_s if still else 0.0)

    def fps(self, env_id: str) -> float:
        """Frames per second of clips of ``env_id`` (:meth:`timing`)."""
        return self.timing(env_id).fps

    def pending(self) -> int:
        """Clips waiting or rendering."""
        return self.pool.busy()

    def close(self) -> None:
        """Stop the workers (running renders finish first, up to a few seconds)."""
        self.pool.close()
        with self._lock:
            for info in self._info.values():
                if info.status == "pending":
                    self._finish(info, "failed", "the media service was closed before rendering")

    def __enter__(self) -> MediaService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
