"""The chat client against hostile servers (real sockets, preflab.testing.llmserver): a server
that drips bytes forever, pathological or undecodable bodies, huge answers — one bad answer is
one failed request, never a lost batch — and a verdict parser that is linear in the text."""

from __future__ import annotations

import pytest

from preflab.llm import ChatClient, ClientConfig, MemoryCache
from preflab.llm.parse import parse_answer
from preflab.testing.llmserver import Reply, ScriptedServer


def _msgs(k: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"question {k}"}]


def _cfg(srv: ScriptedServer, **kw) -> ClientConfig:
    base = {
        "base_url": srv.base_url,
        "max_retries": 1,
        "backoff_s": 0.01,
        "backoff_max_s": 0.02,
        "timeout_s": 2.0,
    }
    return ClientConfig(**{**base, **kw})


@pytest.mark.timeout(60)  # the drip would take ~7 minutes; the 2 s deadline ends it
def test_dripping_server_is_cut_at_the_deadline() -> None:
    with (
        ScriptedServer(lambda req, n: Reply(content="Yes " * 200, drip_s=0.5)) as srv,
        ChatClient(_cfg(srv, deadline_s=2.0)) as client,
    ):
        (res,) = client.chat_many([(_msgs(0), 0)])
    # each byte arrives well within the read timeout; only the overall deadline cuts it
    assert res.text is None and "deadline" in (res.error or "")


def test_bad_bodies_fail_alone_and_the_batch_survives() -> None:
    bad = {
        1: Reply(body="[" * 100_000 + "]" * 100_000),  # nesting deeper than json's recursion
        2: Reply(raw=b"\xff\xfe{\x00 not utf-8 \x80\x81"),
        3: Reply(body='{"choices": [{"message": {"content": {"nested": 1}}}]}'),
        4: Reply(body='{"choices": [{"message": {"content": "' + "1" * 5000 + '"}}]}'),
        5: Reply(body="x" * 2_000_000),  # larger than max_response_bytes
        6: Reply(body='{"choices": 1e999999}'),
    }

    def script(req, n):
        k = int(req["messages"][0]["content"].split()[-1])
        return bad.get(k, Reply(content="The answer is yes."))

    cache = MemoryCache()
    with ScriptedServer(script) as srv, ChatClient(_cfg(srv, concurrency=3), cache=cache) as c:
        res = c.chat_many([(_msgs(k), 0) for k in range(10)])
    assert [r.text is None for r in res] == [
        False,
        True,
        True,
        True,
        False,
        True,
        True,
        False,
        False,
        False,
    ]
    assert all(r.error for r in res if r.text is None)
    assert parse_answer(res[0].text) == "yes" and len(cache) == 5


def test_long_answers_are_capped_keeping_both_ends() -> None:
    long = "Let me think. " + "blah " * 100_000 + "Final answer: no"
    with ScriptedServer(lambda req, n: Reply(content=long)) as srv:
        cache = MemoryCache()
        with ChatClient(_cfg(srv, max_text_chars=1000), cache=cache) as c:
            (res,) = c.chat_many([(_msgs(0), 0)])
    assert res.text is not None and len(res.text) < 1100
    assert res.text.startswith("Let me think.") and parse_answer(res.text) == "no"
    assert cache.get_cached_response(res.key) == res.text


@pytest.mark.timeout(60)  # the old regex took minutes on the first text
def test_parser_is_linear_on_whitespace_runs() -> None:
    for text in (
        "answer" + " " * 1_000_000 + "x",
        ("final " + " " * 10_000) * 50 + "answer: yes",
        "Answer:" + "\n\t " * 300_000 + "No",
    ):
        assert parse_answer(text) in (None, "yes", "no")
    assert parse_answer("answer" + " " * 1000 + "is yes") == "yes"


@pytest.mark.timeout(30)  # without a per-attempt limit the drip runs to the 180 s deadline
@pytest.mark.parametrize("drip_headers", [False, True])
def test_trickling_server_times_out_each_attempt(drip_headers: bool) -> None:
    # one byte every 0.05 s: every read arrives well within timeout_s, but the answer (~1 kB)
    # would take ~50 s; each attempt must end after timeout_s and be retried, then reported
    reply = Reply(content="Yes " * 200, drip_s=0.05, drip_headers=drip_headers)
    with (
        ScriptedServer(lambda req, n: reply) as srv,
        ChatClient(_cfg(srv, timeout_s=0.5, max_retries=2)) as client,
    ):
        (res,) = client.chat_many([(_msgs(0), 0)])
        assert srv.requests == 3
    assert res.text is None and res.attempts == 3
    assert res.error is not None
    assert res.error.startswith("gave up after 3 attempts: timeout after 0.5 s (ReadTimeout)")


@pytest.mark.timeout(30)
def test_trickling_first_attempt_then_a_normal_answer_recovers() -> None:
    def script(req: dict, n: int) -> Reply:
        return Reply(content="Yes " * 200, drip_s=0.05) if n == 1 else Reply(content="No.")

    with ScriptedServer(script) as srv, ChatClient(_cfg(srv, timeout_s=0.5)) as client:
        res = client.chat(_msgs(0))
    assert res.text == "No." and res.attempts == 2
