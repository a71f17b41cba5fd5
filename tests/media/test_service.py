"""MediaService with real worker processes, real MuJoCo (EGL) rendering and real ffmpeg."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from preflab.envs import make_vec_env
from preflab.errors import ConfigError, DataError
from preflab.media import MediaConfig, MediaService
from preflab.media.service import save_frames
from preflab.policy.reward_wrapper import SegmentRecorder
from preflab.records import Segment
from preflab.store.feedback_store import FeedbackStore
from preflab.testing.factories import make_segment

SIZE = 128
T = 12


def recorded(env_id: str, n: int, seed: int) -> list[Segment]:
    venv = make_vec_env(env_id, 1, seed=seed)
    rec = SegmentRecorder(venv, T, env_id=env_id)
    rec.reset()
    rng = np.random.default_rng(seed)
    space = venv.action_space
    while True:
        rec.step(rng.uniform(space.low, space.high, (1, *space.shape)).astype(np.float32))
        segs = rec._done
        if len(segs) >= n:
            return rec.pop_segments()[:n]


def frames_of(path: Path) -> np.ndarray:
    import imageio_ffmpeg

    gen = imageio_ffmpeg.read_frames(str(path))
    w, h = next(gen)["size"]
    return np.stack([np.frombuffer(b, np.uint8).reshape(h, w, 3) for b in gen])


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    root = tmp_path_factory.mktemp("media")
    store = FeedbackStore(root / "feedback.db")
    hop = recorded("Hopper-v5", 3, seed=0)
    pend = recorded("Pendulum-v1", 2, seed=1)
    no_replayer = make_segment(
        obs=np.full((T, 3), 1), env_id="FrozenLake-v1", states=np.zeros((T, 1))
    )
    no_states = make_segment(obs=np.full((T, 3), 2), env_id="Pendulum-v1")
    corrupt = make_segment(obs=np.full((T, 3), 3), env_id="Pendulum-v1", states=np.zeros((T, 2)))
    missing = make_segment(obs=np.full((T, 3), 4), env_id="Pendulum-v1", states=np.zeros((T, 2)))
    framed = make_segment(obs=np.full((T, 3), 5), env_id="")
    store.segments.add([*hop, *pend, no_replayer, no_states, corrupt, missing, framed])
    store.arrays.path(corrupt.id).write_bytes(b"not a zip file")
    store.arrays.path(missing.id).unlink()
    save_frames(store, framed.id, np.full((T, 40, 60, 3), 200, np.uint8))
    media = MediaService(store, root / "cache", config=MediaConfig(size=SIZE, workers=2))
    yield {
        "store": store,
        "media": media,
        "root": root,
        "hop": hop,
        "pend": pend,
        "no_replayer": no_replayer,
        "no_states": no_states,
        "corrupt": corrupt,
        "missing": missing,
        "framed": framed,
    }
    media.close()
    store.close()


def test_hopper_clip_is_valid_mp4(world: dict) -> None:
    media: MediaService = world["media"]
    seg = world["hop"][0]
    key = media.request([seg.id], priority=0)
    assert len(key) == 32 and all(c in "0123456789abcdef" for c in key)
    assert media.wait(key, 120) == "ready", media.clip_info(key)
    path = media.path(key)
    assert path is not None and path.suffix == ".mp4" and key in path.name
    assert path.read_bytes()[4:8] == b"ftyp"
    fr = frames_of(path)
    assert fr.shape == (T, SIZE, SIZE, 3)
    assert fr.std() > 5  # a picture, not a blank frame
    info = media.clip_info(key)
    assert info is not None and info.n_frames == T
    # one frame per step at the env's real time (gymnasium: render_fps = 1 / dt = 125 for Hopper)
    assert info.fps == pytest.approx(
        make_vec_env("Hopper-v5", 1, 0).get_attr("metadata")[0]["render_fps"]
    )


def test_list_of_ids_concatenates_into_one_clip(world: dict) -> None:
    media: MediaService = world["media"]
    ids = [s.id for s in world["pend"]] + [world["hop"][1].id]
    key = media.request(ids, priority=1)
    assert media.wait(key, 120) == "ready", media.clip_info(key)
    fr = frames_of(media.path(key))  # type: ignore[arg-type]
    assert fr.shape[0] == 3 * T
    assert media.key_for(ids) == key != media.key_for(ids[::-1])


def test_cache_hit_does_not_render_again(world: dict) -> None:
    media: MediaService = world["media"]
    seg = world["hop"][2]
    key = media.request([seg.id], priority=0)
    assert media.wait(key, 120) == "ready"
    path = media.path(key)
    assert path is not None
    renders, mtime = media.renders, path.stat().st_mtime_ns
    assert media.request([seg.id], priority=0) == key
    assert media.status(key) == "ready" and media.renders == renders
    # a new service on the same cache directory finds the file without rendering
    other = MediaService(world["store"], world["root"] / "cache", config=media.config)
    try:
        assert other.status(key) == "ready"
        assert other.request([seg.id], priority=0) == key
        assert other.renders == 0 and other.status(key) == "ready"
    finally:
        other.close()
    assert path.stat().st_mtime_ns == mtime
    # another size is another clip
    assert other.key_for([seg.id]) == key


def test_unavailable_without_replayer_or_states(world: dict) -> None:
    media: MediaService = world["media"]
    for name, why in [("no_replayer", "no replayer"), ("no_states", "no stored simulator states")]:
        key = media.request([world[name].id], priority=0)
        assert media.wait(key, 120) == "unavailable"
        info = media.clip_info(key)
        assert info is not None and why in (info.error or "")
        assert media.path(key) is None


def test_stored_frames_render_without_an_env(world: dict) -> None:
    media: MediaService = world["media"]
    key = media.request([world["framed"].id], priority=0)
    assert media.wait(key, 120) == "ready", media.clip_info(key)
    fr = frames_of(media.path(key))  # type: ignore[arg-type]
    assert fr.shape == (T, 40, 60, 3) and abs(float(fr.mean()) - 200) < 5
    with pytest.raises(DataError, match="uint8"):
        save_frames(world["store"], world["framed"].id, np.zeros((T, 4, 4, 3)))


def test_corrupt_or_missing_arrays_fail_with_a_message(world: dict) -> None:
    media: MediaService = world["media"]
    for name in ("corrupt", "missing"):
        key = media.request([world[name].id], priority=0)
        assert media.wait(key, 120) == "failed"
        info = media.clip_info(key)
        assert info is not None and "missing or corrupt" in (info.error or ""), info
        assert media.path(key) is None
    key = media.request(["s-not-in-the-store"], priority=0)
    assert media.status(key) == "failed"
    assert "not in the store" in (media.clip_info(key).error or "")  # type: ignore[union-attr]
    # the workers survived: a good clip still renders
    ok = media.request([world["pend"][0].id], priority=0)
    assert media.wait(ok, 120) == "ready"


def test_keys_never_name_paths(world: dict) -> None:
    media: MediaService = world["media"]
    for bad in ("../../etc/passwd", "A" * 32, "0" * 31, "", "0" * 32 + "/x"):
        assert media.path(bad) is None
        with pytest.raises(KeyError):
            media.status(bad)


def test_priority_order_with_one_worker(world: dict, tmp_path: Path) -> None:
    store: FeedbackStore = world["store"]
    ids = [s.id for s in world["hop"]] + [s.id for s in world["pend"]]
    media = MediaService(store, tmp_path / "cache", config=MediaConfig(size=SIZE, workers=1))
    try:
        lows = [media.request([i], priority=5) for i in ids[:4]]
        high = media.request([ids[4]], priority=0)
        for k in [*lows, high]:
            assert media.wait(k, 120) == "ready", media.clip_info(k)
        done = {k: media.clip_info(k).finished_at for k in [*lows, high]}  # type: ignore[union-attr]
        order = sorted(done, key=lambda k: done[k])  # type: ignore[arg-type, return-value]
        # at most the first low job had started before the high one arrived
        assert order.index(high) <= 1, order
        assert [k for k in order if k != high] == lows  # equal priorities: first come first
    finally:
        media.close()


def test_config_validation() -> None:
    with pytest.raises(ConfigError, match="even"):
        MediaConfig(size=255)
    with pytest.raises(ConfigError, match="format"):
        MediaConfig(format="avi")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="fps"):
        MediaConfig(fps=240)


def test_worker_failures_become_failed_clips(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A raising replayer, a dying worker and a hanging worker each give 'failed' with a
    message; the pool restarts workers and later clips still render."""
    repo = Path(__file__).resolve().parents[2]
    monkeypatch.setenv("PYTHONPATH", str(repo))  # so workers can import tests.media._plugin
    store = FeedbackStore(tmp_path / "feedback.db")
    segs = {
        m: make_segment(
            obs=np.full((T, 3), 10 + m), env_id="FrozenLake-v1", states=np.full((T, 1), float(m))
        )
        for m in range(4)
    }
    fine = [
        make_segment(obs=np.full((T, 3), 20 + k), env_id="FrozenLake-v1", states=np.zeros((T, 1)))
        for k in range(3)
    ]
    store.segments.add([*segs.values(), *fine])
    cfg = MediaConfig(size=64, workers=1, job_timeout_s=8.0, plugins=("tests.media._plugin",))
    media = MediaService(store, tmp_path / "cache", config=cfg)
    try:
        expect = {1: "exploded on purpose", 2: "exited with code 3", 3: "timed out"}
        for (mode, why), good in zip(expect.items(), fine, strict=True):
            key = media.request([segs[mode].id], priority=0)
            assert media.wait(key, 60) == "failed"
            assert why in (media.clip_info(key).error or ""), media.clip_info(key)  # type: ignore[union-attr]
            ok = media.request([good.id], priority=0)  # the pool still works
            assert media.wait(ok, 60) == "ready", media.clip_info(ok)
        assert media.pool.started == 3  # first start + 2 restarts
        # a failed clip is tried again on request, up to max_attempts
        key = media.key_for([segs[1].id])
        assert media.request([segs[1].id]) == key and media.wait(key, 60) == "failed"
        assert media.clip_info(key).attempts == 2  # type: ignore[union-attr]
        media.request([segs[1].id])
        assert media.clip_info(key).attempts == 2  # type: ignore[union-attr]
    finally:
        media.close()
        store.close()
