"""The chat client against a real OpenAI-compatible server on 127.0.0.1 (scripted answers)."""

from __future__ import annotations

import time

import pytest

from preflab.errors import ConfigError, SourceError
from preflab.llm import ChatClient, ClientConfig, MemoryCache
from preflab.testing.llmserver import Reply, ScriptedServer

MSGS = [{"role": "system", "content": "You rank states."}, {"role": "user", "content": "Good?"}]


def _cfg(srv: ScriptedServer, **kw) -> ClientConfig:
    base = {
        "base_url": srv.base_url,
        "model": "test-model",
        "max_retries": 2,
        "backoff_s": 0.01,
        "backoff_max_s": 0.05,
        "timeout_s": 2.0,
    }
    return ClientConfig(**{**base, **kw})


def test_normal_answer_and_request_body() -> None:
    with (
        ScriptedServer(lambda req, n: Reply(content="Therefore, the answer is yes.")) as srv,
        ChatClient(_cfg(srv, temperature=0.3)) as client,
    ):
        res = client.chat(MSGS)
        assert res.text == "Therefore, the answer is yes." and not res.cached and res.attempts == 1
        body = srv.bodies[0]
        assert (
            body["model"] == "test-model"
            and body["messages"] == MSGS
            and body["temperature"] == 0.3
        )


def test_retries_on_500_and_429_then_succeeds() -> None:
    def script(req, n):
        if n == 1:
            return Reply(status=500, body='{"error": "boom"}')
        if n == 2:
            return Reply(status=429, body='{"error": "slow down"}', headers={"Retry-After": "0"})
        return Reply(content="No")

    with ScriptedServer(script) as srv, ChatClient(_cfg(srv)) as client:
        res = client.chat(MSGS)
        assert res.text == "No" and res.attempts == 3 and srv.requests == 3


def test_retries_are_bounded() -> None:
    with (
        ScriptedServer(lambda req, n: Reply(status=503, body="down")) as srv,
        ChatClient(_cfg(srv)) as c,
    ):
        with pytest.raises(SourceError, match=r"gave up after 3 attempts.*HTTP 503"):
            c.chat(MSGS)
        assert srv.requests == 3  # 1 + max_retries, no more


def test_timeout_is_retried_then_reported() -> None:
    with (
        ScriptedServer(lambda req, n: Reply(content="Yes", delay_s=0.6)) as srv,
        ChatClient(_cfg(srv, timeout_s=0.15, max_retries=1)) as client,
    ):
        t0 = time.perf_counter()
        res = client.chat_many([(MSGS, 0)])[0]
        assert res.text is None and "timeout" in res.error and res.attempts == 2
        assert time.perf_counter() - t0 < 1.5


def test_slow_first_then_fast_recovers() -> None:
    script = lambda req, n: Reply(content="Yes", delay_s=0.6 if n == 1 else 0.0)  # noqa: E731
    with ScriptedServer(script) as srv, ChatClient(_cfg(srv, timeout_s=0.2)) as client:
        assert client.chat(MSGS).text == "Yes"


def test_client_errors_are_not_retried_and_malformed_bodies_fail_clearly() -> None:
    with ScriptedServer(lambda req, n: Reply(status=401, body='{"error": "bad key"}')) as srv:
        with ChatClient(_cfg(srv)) as client, pytest.raises(SourceError, match="HTTP 401"):
            client.chat(MSGS)
        assert srv.requests == 1
    with (
        ScriptedServer(lambda req, n: Reply(body="<html>not json</html>")) as srv,
        ChatClient(_cfg(srv)) as client,
        pytest.raises(SourceError, match="malformed chat-completions response"),
    ):
        client.chat(MSGS)
    with (
        ScriptedServer(lambda req, n: Reply(body='{"choices": []}')) as srv,
        ChatClient(_cfg(srv)) as c,
    ):
        assert "malformed" in c.chat_many([(MSGS, 0)])[0].error


def test_unreachable_server() -> None:
    with ScriptedServer(lambda req, n: Reply()) as srv:
        url = srv.base_url
    # the server is gone: connection refused on every attempt
    cfg = ClientConfig(base_url=url, max_retries=1, backoff_s=0.01, connect_timeout_s=0.5)
    with ChatClient(cfg) as client, pytest.raises(SourceError, match="cannot reach"):
        client.chat(MSGS)


def test_cache_makes_rerun_free_and_keys_separate_samples() -> None:
    cache = MemoryCache()
    with (
        ScriptedServer(lambda req, n: Reply(content=f"answer {n}")) as srv,
        ChatClient(_cfg(srv), cache=cache) as client,
    ):
        first = client.chat_many([(MSGS, 0), (MSGS, 1), (MSGS, 2)])
        assert srv.requests == 3 and len(cache) == 3
        assert len({r.key for r in first}) == 3
        again = client.chat_many([(MSGS, 0), (MSGS, 1), (MSGS, 2)])
        assert srv.requests == 3  # no HTTP request on a warm cache
        assert [r.text for r in again] == [r.text for r in first]
        assert all(r.cached and r.attempts == 0 for r in again)


def test_failed_requests_are_not_cached() -> None:
    cache = MemoryCache()
    with (
        ScriptedServer(lambda req, n: Reply(status=500, body="x")) as srv,
        ChatClient(_cfg(srv, max_retries=0), cache=cache) as client,
    ):
        assert client.chat_many([(MSGS, 0)])[0].text is None
    assert len(cache) == 0


def test_concurrency_limit_is_respected() -> None:
    import threading

    active, peak, lock = [0], [0], threading.Lock()

    def script(req, n):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.05)
        with lock:
            active[0] -= 1
        return Reply(content="yes")

    with ScriptedServer(script) as srv, ChatClient(_cfg(srv, concurrency=3)) as client:
        client.chat_many([(MSGS, k) for k in range(12)])
    assert peak[0] <= 3 and peak[0] >= 2


def test_config_errors(monkeypatch) -> None:
    monkeypatch.delenv("PREFLAB_TEST_KEY", raising=False)
    with pytest.raises(ConfigError, match="set the environment variable PREFLAB_TEST_KEY"):
        ChatClient(
            ClientConfig(base_url="https://api.example.com/v1", api_key_env="PREFLAB_TEST_KEY")
        )
    monkeypatch.setenv("PREFLAB_TEST_KEY", "sk-test")
    ChatClient(
        ClientConfig(base_url="https://api.example.com/v1", api_key_env="PREFLAB_TEST_KEY")
    ).close()
    with pytest.raises(ConfigError, match="base_url"):
        ClientConfig(base_url="api.example.com")
    with pytest.raises(ConfigError, match="concurrency"):
        ClientConfig(concurrency=0)
    with pytest.raises(ConfigError, match="temperature"):
        ClientConfig(temperature=-1)


def test_api_key_is_sent(monkeypatch) -> None:
    monkeypatch.setenv("PREFLAB_TEST_KEY", "sk-abc")
    seen = []

    with ScriptedServer(lambda req, n: Reply(content="yes")) as srv:
        orig = srv._httpd.RequestHandlerClass.do_POST

        def spy(self):  # record the header, then answer normally
            seen.append(self.headers.get("Authorization"))
            orig(self)

        srv._httpd.RequestHandlerClass.do_POST = spy
        with ChatClient(_cfg(srv, api_key_env="PREFLAB_TEST_KEY")) as client:
            client.chat(MSGS)
    assert seen == ["Bearer sk-abc"]


def test_feedback_store_as_cache(tmp_path) -> None:
    import preflab.store as store_mod

    store = store_mod.FeedbackStore(tmp_path / "run.sqlite")
    with (
        ScriptedServer(lambda req, n: Reply(content="yes")) as srv,
        ChatClient(_cfg(srv), cache=store.llm_cache) as client,
    ):
        client.chat_many([(MSGS, k) for k in range(5)])
        assert srv.requests == 5
        reopened = store_mod.FeedbackStore(tmp_path / "run.sqlite")
        with ChatClient(_cfg(srv), cache=reopened.llm_cache) as client:
            res = client.chat_many([(MSGS, k) for k in range(5)])
        assert srv.requests == 5 and all(r.cached for r in res)


def test_odd_but_valid_answers_are_read_and_stored(tmp_path) -> None:
    """Content as a list of text parts (a valid OpenAI shape) is joined; an unpaired surrogate
    (valid JSON, not encodable as UTF-8) is replaced, so the answer can be cached in the store;
    a token count no accounting could mean is left out."""
    import preflab.store as store_mod

    parts_msgs = [{"role": "user", "content": "parts?"}]
    odd_msgs = [{"role": "user", "content": "odd?"}]
    bodies = {
        "parts?": '{"choices": [{"message": {"content": [{"type": "text", "text": "Ye"}, '
        '{"type": "text", "text": "s."}]}}]}',
        "odd?": '{"choices": [{"message": {"content": "Yes \\ud800"}}], '
        '"usage": {"prompt_tokens": ' + "9" * 400 + ', "completion_tokens": 3}}',
    }
    store = store_mod.FeedbackStore(tmp_path / "run.sqlite")
    with (
        ScriptedServer(lambda req, n: Reply(body=bodies[req["messages"][0]["content"]])) as srv,
        ChatClient(_cfg(srv), cache=store.llm_cache) as client,
    ):
        parts, odd = client.chat_many([(parts_msgs, 0), (odd_msgs, 0)])
    assert parts.text == "Yes." and odd.text == "Yes \ufffd"
    assert odd.prompt_tokens is None and odd.completion_tokens == 3
    assert store.llm_cache.get(client.key_for(odd_msgs, 0)) == "Yes \ufffd"  # stored


def test_an_error_response_is_read_only_as_far_as_its_message(tmp_path) -> None:
    """A 503 with a body over max_response_bytes is still a retryable 5xx (not 'too large');
    a redirect says where to point base_url."""
    big = "x" * 2_000_000

    def script(req, n):
        return Reply(status=503, body=big) if n == 1 else Reply(content="Yes")

    with ScriptedServer(script) as srv, ChatClient(_cfg(srv)) as client:
        res = client.chat(MSGS)
        assert res.text == "Yes" and res.attempts == 2
    moved = Reply(status=301, body="", headers={"Location": "https://example.org/v1"})
    with (
        ScriptedServer(lambda req, n: moved) as srv,
        ChatClient(_cfg(srv)) as client,
        pytest.raises(SourceError, match=r"redirects to https://example\.org/v1"),
    ):
        client.chat(MSGS)
