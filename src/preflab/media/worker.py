"""A render worker process: ``python -m preflab.media.worker``.

Speaks JSON lines: one job per line on stdin, one result per line on the protocol stream
(the original stdout; fd 1 itself is pointed at stderr so that stray prints of C libraries
cannot corrupt the protocol). The first line it writes is ``{"ready": true, ...}``.

Job: ``{"job": key, "out": path, "fmt": "mp4", "size": 256, "fps": 125.0, "still_frames": 0,
"items": [{"id", "env_id", "npz", "frames"}]}`` (``fps`` null: the first item's env's real time,
:func:`preflab.media.timing.clip_timing`; ``still_frames``: copies of the first and last frame
added at both ends). Result: ``{"job", "status": "ready"|"failed"|"unavailable", "error",
"n_frames" (all encoded frames), "n_steps", "still_frames", "fps", "width", "height", "setup_s",
"render_s", "encode_s", "cpu_s" (this process, GL threads included), "encoder_cpu_s" (ffmpeg),
"total_s"}``.
A job never kills the worker: any error becomes a 'failed' result.

Environments and replayers are built once per env id and reused for every later job.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import resource
import sys
import time
import traceback
import zipfile
from pathlib import Path
from typing import IO, Any

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

import numpy as np

from preflab.media.cache import commit, temp_path
from preflab.media.encode import ClipWriter
from preflab.media.pixels import image_segment_clip
from preflab.media.replay import (
    Replayer,
    env_fps,
    make_replay_env,
    replayer_for,
)
from preflab.media.timing import clip_timing


class UnavailableError(Exception):
    """The segment cannot be rendered: no replayer and no stored frames."""


class Renderer:
    """Per-process cache of (env, replayer, fps) by (env id, size)."""

    def __init__(self) -> None:
        self._envs: dict[tuple[str, int], tuple[Any, Replayer | None, int]] = {}

    def get(self, env_id: str, size: int) -> tuple[Replayer | None, int]:
        k = (env_id, size)
        if k not in self._envs:
            if not env_id:
                raise UnavailableError("the segment has no env_id, so no replayer can be chosen")
            try:
                env = make_replay_env(env_id, size)
            except Exception as exc:
                raise UnavailableError(f"cannot build environment {env_id!r}: {exc}") from exc
            self._envs[k] = (env, replayer_for(env, size), env_fps(env))
        _, rp, fps = self._envs[k]
        return rp, fps

    def warm(self, env_id: str, size: int) -> None:
        """Build the env and replayer, and draw one frame (initialises the GL context)."""
        rp, _ = self.get(env_id, size)
        if rp is not None:
            from preflab.media.capture import capture_state

            env = self._envs[(env_id, size)][0]
            state = capture_state(env)
            if state is not None:
                rp.frame(state)


def _load(item: dict[str, Any], size: int = 256) -> tuple[str, np.ndarray]:
    """('frames', uint8 frames) when stored frames exist or the segment's observations are
    images (pixels: shown from the frames themselves), else ('states', states)."""
    frames_path = item.get("frames")
    if frames_path and Path(frames_path).is_file():
        try:
            with np.load(frames_path, allow_pickle=False) as z:
                return "frames", z["frames"]
        except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
            raise RuntimeError(f"stored frames {frames_path} are corrupt: {exc}") from exc
    p = item["npz"]
    clip = image_segment_clip(p, size)  # pixels (issue #13): image observations are the video
    if clip is not None:
        return "frames", clip
    try:
        with np.load(p, allow_pickle=False) as z:
            if "states" not in z.files:
                raise UnavailableError(
                    f"segment {item['id']} has no stored simulator states or frames "
                    "(recorded before state capture, or its env has no capture function)"
                )
            states, n = z["states"], int(z["obs"].shape[0])
    except UnavailableError:
        raise
    except (OSError, KeyError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise RuntimeError(f"segment arrays {p} are missing or corrupt: {exc}") from exc
    if states.ndim != 2 or states.shape[0] != n:
        raise RuntimeError(f"segment {item['id']}: states {states.shape} do not match T = {n}")
    return "states", states


def _children_cpu() -> float:
    """CPU seconds of finished child processes (the ffmpeg encoders)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_job(job: dict[str, Any], renderer: Renderer) -> dict[str, Any]:
    out = Path(job["out"])
    size, fmt = int(job["size"]), job["fmt"]
    res: dict[str, Any] = {"job": job["job"], "status": "failed", "error": None, "n_frames": 0}
    t0, cpu0, child0 = time.perf_counter(), time.process_time(), _children_cpu()
    render_s = encode_s = 0.0
    tmp = temp_path(out)
    try:
        loaded = [(item, *_load(item, size)) for item in job["items"]]
        sources: list[tuple[np.ndarray, Replayer | None]] = []  # no replayer: frames
        for item, kind, arr in loaded:
            if kind == "frames":
                sources.append((arr, None))
                continue
            rp, _ = renderer.get(item["env_id"], size)
            if rp is None:
                raise UnavailableError(
                    f"no replayer is registered for environment {item['env_id']!r}"
                )
            sources.append((arr, rp))
        fps = job.get("fps")
        if not fps:  # the service always says; a bare job gets the first env's real time
            first = job["items"][0].get("env_id", "") if job["items"] else ""
            fps = clip_timing(first).fps
        fps = float(fps)
        still = max(0, int(job.get("still_frames") or 0))
        setup_s = time.perf_counter() - t0
        out.parent.mkdir(parents=True, exist_ok=True)
        n_steps = 0
        last: np.ndarray | None = None
        with ClipWriter(tmp, fps=fps, fmt=fmt) as w:
            for arr, rp in sources:
                for row in arr:
                    t = time.perf_counter()
                    frame = row if rp is None else rp.frame(row)
                    t2 = time.perf_counter()
                    w.write(frame, repeat=1 + (still if n_steps == 0 else 0))
                    n_steps += 1
                    last = frame if rp is None else np.array(frame, copy=True)
                    render_s += t2 - t
                    encode_s += time.perf_counter() - t2
            t = time.perf_counter()
            if last is not None and still:
                w.write(last, repeat=still)
        encode_s += time.perf_counter() - t
        if n_steps == 0:
            raise RuntimeError("no frames to encode (empty segments)")
        commit(tmp, out)
        assert w.size is not None
        res.update(
            status="ready",
            n_frames=w.n_frames,
            n_steps=n_steps,
            still_frames=still,
            fps=fps,
            width=w.size[0],
            height=w.size[1],
            setup_s=setup_s,
            render_s=render_s,
            encode_s=encode_s,
            cpu_s=time.process_time() - cpu0,
            encoder_cpu_s=_children_cpu() - child0,
        )
    except UnavailableError as exc:
        res.update(status="unavailable", error=str(exc))
    except Exception as exc:
        res.update(error=f"{type(exc).__name__}: {exc}")
        traceback.print_exc(file=sys.stderr)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    res["total_s"] = time.perf_counter() - t0
    return res


def _prewarm() -> None:
    """Load gymnasium and every family's renderer (MuJoCo's env module and the GL driver)
    before saying ready, for a worker that is not told its run's env (a worker is started ahead
    of its first job, so the first clip does not pay for these)."""
    from preflab.env_families import families

    for family in families():
        with contextlib.suppress(Exception):
            family.prewarm()


def _protocol_stream() -> IO[str]:
    """The original stdout as a private stream; fd 1 then goes to stderr."""
    sys.stdout.flush()
    fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(fd, "w", buffering=1, encoding="utf-8")


def main() -> None:
    proto = _protocol_stream()
    for mod in filter(None, os.environ.get("PREFLAB_MEDIA_PLUGINS", "").split(",")):
        importlib.import_module(mod.strip())
    warm = [spec for spec in os.environ.get("PREFLAB_MEDIA_WARM", "").split(",") if spec]
    if not warm:  # with the run's env named, warming it (below) loads its family's renderer
        _prewarm()  # and no other (a Pendulum run's workers need no GL driver: ~0.4 s CPU each)
    renderer = Renderer()
    for spec in warm:
        env_id, _, size = spec.rpartition("@")
        with contextlib.suppress(Exception):
            renderer.warm(env_id, int(size))
    proto.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            job = json.loads(line)
            res = run_job(job, renderer)
        except Exception as exc:  # a malformed job line
            res = {"job": None, "status": "failed", "error": f"bad job: {exc}"}
        proto.write(json.dumps(res) + "\n")


if __name__ == "__main__":
    main()
