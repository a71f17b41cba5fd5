"""The vision-language judge against a real local HTTP server that checks every request (image
parts decode, content types, sizes) and answers from the pixels it received."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import numpy as np
import pytest

from preflab.errors import SourceError
from preflab.llm import ChatClient, ClientConfig, MemoryCache
from preflab.llm.judge import confidence
from preflab.llm.usage import Prices
from preflab.records import Segment
from preflab.rundir.runwarnings import RunWarnings
from preflab.testing.llmserver import Reply, ScriptedServer
from preflab.testing.vlmserver import FrameJudgeServer, upright
from preflab.vlm import FrameSpec, SegmentFrames, VLMJudge, VLMTemplate
from tests.vlm.helpers import image_segment, pairs, pendulum_segment

TASK = "make the picture as bright as possible"


def _client(url: str, cache: MemoryCache | None = None, **kw: object) -> ChatClient:
    base: dict[str, object] = {
        "base_url": url,
        "model": "stand-in",
        "max_retries": 1,
        "backoff_s": 0.01,
        "backoff_max_s": 0.02,
        "timeout_s": 5.0,
    }
    return ChatClient(ClientConfig(**{**base, **kw}), cache=cache)  # type: ignore[arg-type]


def _judge(client: ChatClient, shape: str = "two-stage", **kw: object) -> VLMJudge:
    kw.setdefault("frames", FrameSpec(count=3, size=32, format="png"))
    return VLMJudge(
        client,
        task=kw.pop("task", TASK),  # type: ignore[arg-type]
        template=VLMTemplate.load(shape),  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )


def _brightness_pairs(seed: int = 0):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    bright, dark, mid = (image_segment(v, rng) for v in (200, 40, 120))
    twin = image_segment(120, rng)
    return pairs([(bright, dark), (dark, bright), (mid, twin)])


@pytest.mark.parametrize("shape", ["two-stage", "one-stage"])
def test_answers_follow_the_frames_sent(shape: str) -> None:
    queries, segs = _brightness_pairs()
    with FrameJudgeServer(tie=0.05) as srv, _client(srv.base_url) as client:
        judge = _judge(client, shape)
        judge.submit(queries, segs)
        got = judge.collect()
    per_sample = 2 if shape == "two-stage" else 1
    assert srv.requests == per_sample * len(queries)
    assert [j.p for j in got] == [1.0, 0.0, 0.5]  # brighter first, brighter second, a tie
    assert all(j.source == "vlm" and j.annotator_id == "vlm:stand-in" for j in got)
    # every image the server decoded is exactly a frame the judge rendered (PNG: lossless)
    frames = SegmentFrames(FrameSpec(count=3, size=32, format="png"))
    with_images = [imgs for imgs in srv.images if imgs]
    assert len(with_images) == len(queries)
    wanted = [frames.images(segs[q.a[0]]) + frames.images(segs[q.b[0]]) for q in queries]
    seen: set[int] = set()
    for imgs in with_images:  # requests arrive in any order (concurrency)
        assert len(imgs) == 6 and all(i.shape == (32, 32, 3) for i in imgs)
        matches = [
            k
            for k, want in enumerate(wanted)
            if all(np.array_equal(a, b) for a, b in zip(imgs, want, strict=True))
        ]
        assert len(matches) == 1
        seen.update(matches)
    assert seen == set(range(len(queries)))
    assert {m for ms in srv.mimes for m in ms} == {"image/png"}
    meta = got[0].meta
    assert meta["prompt_shape"] == shape and meta["verdict"] == "first"
    assert len(meta["frames"]["a"]) == 3 and "base64" not in json.dumps(meta["prompt"])
    if shape == "two-stage":  # the model's reasoning is kept: stage 1's description
        assert meta["description"].startswith("Clip 1 scores")
        assert meta["description"] in meta["compare_prompt"][1]["content"]
    assert "Answer: 1" in meta["response"]


def test_jpeg_strips_arrive_as_one_image_per_clip() -> None:
    queries, segs = _brightness_pairs()
    spec = FrameSpec(count=4, size=48, format="jpeg", layout="strip")
    with FrameJudgeServer(tie=0.05) as srv, _client(srv.base_url) as client:
        judge = _judge(client, "one-stage", frames=spec)
        judge.submit(queries[:1], segs)
        (j,) = judge.collect()
    (imgs,) = srv.images
    assert srv.mimes == [["image/jpeg", "image/jpeg"]]
    assert [i.shape for i in imgs] == [(48, 4 * 48 + 3 * 4, 3)] * 2
    want = SegmentFrames(spec).images(segs[queries[0].a[0]])[0]
    assert np.abs(imgs[0].astype(int) - want.astype(int)).mean() < 3  # JPEG: close, not equal
    assert j.p == 1.0


def test_pendulum_clips_rendered_from_states_are_judged_by_what_they_show() -> None:
    """The rule reads the rendered rod: upright beats hanging, as Pendulum's reward says."""
    up, side, down = (pendulum_segment(t) for t in (0.1, np.pi / 2, np.pi - 0.1))
    queries, segs = pairs([(up, down), (down, side), (side, up)])
    with FrameJudgeServer(upright) as srv, _client(srv.base_url) as client:
        judge = _judge(client, frames=FrameSpec(count=2, size=64))
        judge.submit(queries, segs)
        got = [j.p for j in judge.collect()]
        judge.close()
    truth = [
        float(segs[q.a[0]].true_rewards.sum() > segs[q.b[0]].true_rewards.sum()) for q in queries
    ]
    assert got == truth == [1.0, 0.0, 0.0]


def test_a_rerun_asks_nothing_twice_and_usage_is_summed(tmp_path: Path) -> None:
    queries, segs = _brightness_pairs()
    cache = MemoryCache()
    with FrameJudgeServer(tie=0.05) as srv:
        with _client(srv.base_url, cache) as client:
            judge = _judge(client, samples=2, prices=Prices(prompt=1.0, completion=4.0))
            judge.submit(queries, segs)
            first = judge.collect()
            report = judge.usage_report()
        n = srv.requests
        assert n == 2 * 2 * len(queries) and report["requests"] == n and report["cached"] == 0
        sent = srv.usage_sent
        assert report["prompt_tokens"] == sum(u["prompt_tokens"] for u in sent) > 0
        assert report["completion_tokens"] == sum(u["completion_tokens"] for u in sent) > 0
        assert report["cost_usd"] == pytest.approx(
            (report["prompt_tokens"] * 1.0 + report["completion_tokens"] * 4.0) / 1e6
        )
        assert sum(j.meta["prompt_tokens"] for j in first) == report["prompt_tokens"]
        # the cache holds hashes of the images, not the images
        assert len(cache) == n
        # a resumed judge (fresh renderer, same cache) sends nothing and gives the same answers
        state = json.loads(json.dumps(judge.state()))
        with _client(srv.base_url, cache) as client:
            again = _judge(client, samples=2)
            again.load_state(state)
            again.submit(queries, segs)
            second = again.collect()
        assert srv.requests == n
        assert [j.p for j in second] == [j.p for j in first]
        assert all(j.meta["cached"] for j in second)
        assert again.usage_report()["cached"] == 2 * 2 * len(queries)
        assert again.usage_report()["prompt_tokens"] == report["prompt_tokens"]  # carried over


def test_samples_give_a_soft_label() -> None:
    answers = ["Answer: 1", "Answer: 2", "Answer: 1", "no idea"]
    queries, segs = _brightness_pairs()
    with (
        ScriptedServer(lambda req, n: Reply(content=answers[(n - 1) % 4])) as srv,
        _client(srv.base_url) as client,
    ):
        judge = _judge(client, "one-stage", samples=4)
        judge.submit(queries[:1], segs)
        got = judge.collect()
    assert sorted(j.meta["sample"] for j in got) == [0, 1, 2, 3]
    assert confidence([j.p for j in got]) == pytest.approx(2 / 3)  # the unreadable one: no vote
    assert sum(j.p is None for j in got) == 1


# ----- servers that go wrong: a clear error or a warning, never an invented label ---------------
def test_a_text_only_server_is_a_clear_error() -> None:
    queries, segs = _brightness_pairs()
    with FrameJudgeServer(accept_images=False) as srv, _client(srv.base_url) as client:
        judge = _judge(client)
        with pytest.raises(SourceError, match="does not take image input"):
            judge.submit(queries, segs)
        assert srv.requests == len(queries)  # a 400 is not retried
        assert all(j.p is None for j in judge.collect())


def test_a_mistyped_model_or_a_rate_limit_is_not_taken_for_a_text_only_model() -> None:
    """Only a 400/415/422 whose body speaks of images is a refusal of images: a 404 for a
    mistyped vision model's name is the 'check --vlm.model' error, and one request limited by
    a 429 about image inputs is a warning, not the end of the run."""
    queries, segs = _brightness_pairs()
    missing = Reply(
        status=404,
        body='{"error": "The model `meta-llama/Llama-3.2-11B-Vision-Instruc` does not exist."}',
    )
    with (
        ScriptedServer(lambda req, n: missing) as srv,
        _client(srv.base_url) as client,
        pytest.raises(SourceError) as err,
    ):
        _judge(client).submit(queries, segs)
    assert "does not take image input" not in str(err.value)
    assert "--vlm.model" in str(err.value)

    def limited(req, n):  # type: ignore[no-untyped-def]
        if n == 1:
            return Reply(status=429, body='{"error": "Rate limit: 10 image inputs per minute"}')
        return Reply(content="Answer: 1")

    with (
        ScriptedServer(limited) as srv,
        _client(srv.base_url, max_retries=0) as client,
    ):
        judge = _judge(client)
        judge.warnings = RunWarnings()
        judge.submit(queries, segs)
        got = judge.collect()
    assert len(got) == len(queries) and sum(j.p is None for j in got) == 1


@pytest.mark.parametrize("content", ["", "lorem ipsum dolor", "Answer: maybe"])
def test_empty_or_garbage_answers_warn_and_give_no_label(content: str) -> None:
    queries, segs = _brightness_pairs()
    with (
        ScriptedServer(lambda req, n: Reply(content=content)) as srv,
        _client(srv.base_url) as client,
    ):
        judge = _judge(client)
        judge.warnings = RunWarnings()
        judge.submit(queries, segs)
        got = judge.collect()
    assert len(got) == len(queries) and all(j.p is None for j in got)
    assert "vlm_unreadable" in judge.warnings
    assert "Answer: 1" in judge.warnings.messages[0]
    assert judge.usage_report()["unreadable"] == len(queries)


def test_a_model_that_never_answers_in_time_is_a_clear_error() -> None:
    queries, segs = _brightness_pairs()
    with (
        ScriptedServer(lambda req, n: Reply(content="Answer: 1", delay_s=1.0)) as srv,
        _client(srv.base_url, timeout_s=0.2, max_retries=0) as client,
    ):
        judge = _judge(client)
        with pytest.raises(SourceError, match="all 3 vision-language requests"):
            judge.submit(queries, segs)
        got = judge.collect()
    assert all(j.p is None and "timeout" in j.meta["error"] for j in got)
    assert judge.usage_report()["failed"] == 3


def test_no_server_at_the_address_is_a_clear_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    queries, segs = _brightness_pairs()
    with _client(f"http://127.0.0.1:{port}/v1") as client:
        judge = _judge(client)
        with pytest.raises(SourceError, match="cannot reach"):
            judge.submit(queries, segs)


def test_dropped_connections_are_retried_and_some_failures_warn() -> None:
    def script(req: dict, n: int) -> Reply:
        if n == 1:
            return Reply(status=502, body="bad gateway")  # retried
        if n == 3:
            return Reply(status=500, body="boom")  # its retry fails too
        if n == 4:
            return Reply(status=503, body="boom")
        return Reply(content="Answer: 2")

    queries, segs = _brightness_pairs()
    # one request at a time, so the scripted failures meet the requests in order
    with ScriptedServer(script) as srv, _client(srv.base_url, concurrency=1) as client:
        judge = _judge(client, "one-stage")
        judge.warnings = RunWarnings()
        judge.submit(queries, segs)
        got = judge.collect()
    assert sorted(str(j.p) for j in got) == ["0.0", "0.0", "None"]
    assert "vlm_failed" in judge.warnings and "vlm_unreadable" not in judge.warnings
    assert judge.usage_report()["failed"] == 1


def test_only_pair_queries_are_answered() -> None:
    from preflab.errors import DataError
    from preflab.records import Query

    _, segs = _brightness_pairs()
    ids = list(segs)
    q = Query(id="q-group", kind="group", a=(ids[0], ids[1]), b=(ids[2],))
    with (
        _client("http://127.0.0.1:9/v1") as client,
        pytest.raises(DataError, match="pairwise comparisons only"),
    ):
        _judge(client).submit([q], segs)


# ----- a text-only model: the clips' key states in words (--vlm.view states) -------------------
def _inverted_pendulum(angle: float, steps: int = 4) -> Segment:
    obs = np.tile(np.array([0.0, angle, 0.0, 0.0], np.float32), (steps, 1))
    acts = np.zeros((steps, 1), np.float32)
    return Segment(
        id=Segment.content_id(obs, acts),
        obs=obs,
        acts=acts,
        true_rewards=np.full(steps, -abs(angle), np.float32),
        env_id="InvertedPendulum-v5",
    )


def test_states_in_words_reach_a_text_only_model_and_decide_its_answer() -> None:
    """The stand-in reads the described angles: the clip whose pole leans less wins."""
    lean = re.compile(r"leans to the \w+ by ([0-9.]+) radians|stands vertically")

    def script(req: dict, n: int) -> Reply:
        user = req["messages"][1]["content"]
        assert all(isinstance(m["content"], str) for m in req["messages"])  # no image parts
        clip_1, clip_2 = user.split("Clip 2:")[0], user.split("Clip 2:")[1]
        s1, s2 = (np.mean([float(g or 0) for g in lean.findall(c)]) for c in (clip_1, clip_2))
        return Reply(content="Answer: 1" if s1 < s2 else "Answer: 2")

    upright, leaning = _inverted_pendulum(0.01), _inverted_pendulum(0.15)
    queries, segs = pairs([(upright, leaning), (leaning, upright)])
    with ScriptedServer(script) as srv, _client(srv.base_url) as client:
        judge = _judge(client, "one-stage", view="states")
        judge.submit(queries, segs)
        got = judge.collect()
    assert srv.requests == 2 and [j.p for j in got] == [1.0, 0.0]
    text = srv.bodies[0]["messages"][1]["content"]
    assert "Step 1 of 4: The pole stands vertically" in text and "image_url" not in text
    assert got[0].meta["frames"]["view"] == "states"


def test_states_in_words_need_a_describer() -> None:
    from preflab.config import TrainConfig, VLMOptions
    from preflab.config.constraints import constraint_problems

    config = TrainConfig(
        env_id="Pendulum-v1", source="vlm", task="keep it up", vlm=VLMOptions(view="states")
    )
    (problem,) = constraint_problems(config, 200)
    assert "no state describer" in problem and "--vlm.view frames" in problem
