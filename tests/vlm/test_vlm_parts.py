"""Frames, images, prompts, verdicts and usage of the vision-language judge (no server)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from preflab.errors import ConfigError, DataError
from preflab.llm.client import ChatResult
from preflab.vlm import (
    FrameSpec,
    SegmentFrames,
    UsageMeter,
    VLMTemplate,
    encode,
    key_frame_steps,
    load_prices,
    parse_verdict,
    verdict_to_p,
)
from tests.vlm.helpers import image_segment, pendulum_segment


def test_key_frames_are_evenly_spaced_first_and_last_included() -> None:
    assert key_frame_steps(50, 4) == [0, 16, 33, 49]
    assert key_frame_steps(3, 8) == [0, 1, 2]
    assert key_frame_steps(10, 1) == [9]


def test_state_segments_render_as_the_studio_replays_them() -> None:
    from preflab.media.replay import fit_frame, make_replay_env, replayer_for

    seg = pendulum_segment(0.3, steps=7)
    frames = SegmentFrames(FrameSpec(count=3, size=64))
    try:
        got = frames.key_frames(seg)
    finally:
        frames.close()
    env = make_replay_env("Pendulum-v1", 64)
    rp = replayer_for(env, 64)
    assert rp is not None
    want = [fit_frame(rp.frame(seg.states[t]), 64) for t in (0, 3, 6)]  # type: ignore[index]
    env.close()
    assert len(got) == 3 and all(g.shape == (64, 64, 3) and g.dtype == np.uint8 for g in got)
    assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))


def test_image_segments_show_their_own_pixels_and_strips_join_frames() -> None:
    seg = image_segment(200, np.random.default_rng(0), steps=6, side=16)
    frames = SegmentFrames(FrameSpec(count=3, size=64, layout="strip"))
    (strip,) = frames.images(seg)
    keys = frames.key_frames(seg)
    assert keys[0].shape == (64, 64, 3)  # 16 px upscaled by 4
    assert np.array_equal(keys[0][::4, ::4], np.moveaxis(seg.obs[0], 0, -1))
    assert strip.shape == (64, 3 * 64 + 2 * 4, 3)


def test_a_segment_without_states_or_images_is_refused() -> None:
    seg = pendulum_segment(0.0)
    bare = type(seg)(id=seg.id, obs=seg.obs, acts=seg.acts, true_rewards=seg.true_rewards)
    with pytest.raises(DataError, match="no simulator states"):
        SegmentFrames(FrameSpec()).key_frames(bare)


@pytest.mark.parametrize("fmt", ["png", "jpeg"])
def test_encoding_round_trips(fmt: str) -> None:
    frame = np.random.default_rng(1).integers(0, 256, (32, 48, 3), dtype=np.uint8)
    frame[:, :24] = 30  # flat areas keep JPEG close
    img = encode(frame, fmt)  # type: ignore[arg-type]
    back = np.asarray(Image.open(io.BytesIO(img.data)).convert("RGB"))
    assert img.mime == f"image/{fmt}" and (img.width, img.height) == (48, 32)
    assert img.data_url.startswith(f"data:image/{fmt};base64,")
    if fmt == "png":
        assert np.array_equal(back, frame)
    else:
        assert np.abs(back[:, :8].astype(int) - 30).mean() < 1.5  # flat blocks stay flat


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("Clip 1 looks steadier.\nAnswer: 1", "first"),
        ("**Answer:** Clip 2", "second"),
        ("Answer: 0", "equal"),
        ("final answer - no difference", "equal"),
        ("Answer: 1. On reflection, Answer: 2", "second"),
        ("2", "second"),
        ("Clip 1.", "first"),
        ("", None),
        ("   ", None),
        ("I think clip 1 is better", None),
        ("Answer: 3", None),
        ("Answer: 12", None),
        ("Answer: 1 or 2, I cannot tell", None),  # read as clip 1 before
        ("Answer: clip 1 and clip 2 are both bad", None),
        ("Answer: 2 (it stays upright)", "second"),
        ("lorem ipsum " * 1000, None),
    ],
)
def test_verdicts(text: str, verdict: str | None) -> None:
    assert parse_verdict(text) == verdict


def test_verdicts_map_to_p_and_never_guess() -> None:
    assert [verdict_to_p(v) for v in ("first", "second", "equal", None)] == [1.0, 0.0, 0.5, None]


def test_packaged_templates_and_a_users_own(tmp_path: Path) -> None:
    two, one = VLMTemplate.load("two-stage"), VLMTemplate.load("one-stage")
    assert two.shape == "two-stage" and one.shape == "one-stage"
    img = encode(np.zeros((8, 8, 3), np.uint8), "png")
    msgs = two.frames_messages("keep it upright", [img, img], [img])
    parts = msgs[1]["content"]
    kinds = [p["type"] for p in parts]
    assert kinds.count("image_url") == 3 and kinds[0] == "text"
    assert "keep it upright" in " ".join(p.get("text", "") for p in parts)
    redacted = two.frames_messages("keep it upright", [img, img], [img], redact=True)
    assert img.sha256 in json.dumps(redacted) and "base64" not in json.dumps(redacted)
    assert "THE ANALYSIS" in two.compare_messages("t", "THE ANALYSIS")[1]["content"]
    mine = tmp_path / "mine.txt"
    mine.write_text(
        "[system]\nJudge.\n[ask]\nA:\n$clip_1\nB:\n$clip_2\nGoal $task. Answer: 1 or 2\n"
    )
    assert VLMTemplate.load("one-stage", mine).sections["system"] == "Judge."
    with pytest.raises(ConfigError, match="one-stage"):
        VLMTemplate.load("two-stage", mine)
    mine.write_text("[system]\nJudge.\n[ask]\nBoth: $clip_1 $clip_2 $oops\n")
    with pytest.raises(ConfigError, match=r"\$clip_1 once, on a line"):
        VLMTemplate.load("one-stage", mine)


def test_frame_spec_is_checked() -> None:
    with pytest.raises(ConfigError):
        FrameSpec(count=0)
    with pytest.raises(ConfigError):
        FrameSpec(size=8)
    with pytest.raises(ConfigError):
        FrameSpec(format="gif")  # type: ignore[arg-type]


def test_usage_sums_tokens_and_prices_them(tmp_path: Path) -> None:
    table = tmp_path / "prices.json"
    table.write_text(json.dumps({"m": {"prompt": 2.0, "completion": 10.0}}))
    meter = UsageMeter(load_prices(table, "m"))

    def res(**kw: object) -> ChatResult:
        base: dict[str, object] = {"key": "k", "text": "x", "cached": False, "attempts": 1}
        return ChatResult(**{**base, "latency_s": 0.5, **kw})  # type: ignore[arg-type]

    meter.add(res(prompt_tokens=1000, completion_tokens=100))
    meter.add(res(prompt_tokens=500, completion_tokens=50, attempts=2))
    meter.add(res(cached=True, attempts=0, latency_s=0.0))
    meter.add(res(text=None, error="boom"))
    meter.add(res())  # a server that reports no usage
    r = meter.report()
    assert (r["requests"], r["cached"], r["failed"], r["unreported"]) == (4, 1, 1, 1)
    assert (r["prompt_tokens"], r["completion_tokens"], r["http_attempts"]) == (1500, 150, 5)
    assert r["cost_usd"] == pytest.approx((1500 * 2.0 + 150 * 10.0) / 1e6)
    again = UsageMeter()
    again.load_state(json.loads(json.dumps(meter.state())))
    assert again.state() == meter.state() and again.report()["cost_usd"] is None
    with pytest.raises(ConfigError, match="no entry"):
        load_prices(table, "other")


def test_a_template_file_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    mine = tmp_path / "mine.txt"
    mine.write_bytes("[system]\nRichter: prüfe.\n[ask]\n$clip_1\n$clip_2\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=re.escape(f"vlm prompt template {mine} is not UTF-8")):
        VLMTemplate.load("one-stage", mine)
