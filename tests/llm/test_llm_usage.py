"""The text judge counts what its server was asked (tokens from ``usage``, requests, cache
hits), keeps the totals in its state and reports them (summary.json's ``ai_judge``)."""

from __future__ import annotations

import json

import numpy as np

from preflab.llm import ChatClient, ClientConfig, LLMJudge, MemoryCache, transition_queries
from preflab.llm.usage import Prices
from preflab.sources.base import ReportsUsage
from preflab.testing.llmserver import Reply, ScriptedServer

ENV = "PrefLab/NoLock-v0"


def _reply(req: dict, n: int) -> Reply:
    body = {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Yes."}}],
        "usage": {"prompt_tokens": 100 + n, "completion_tokens": 2, "total_tokens": 102 + n},
    }
    return Reply(body=json.dumps(body))


def test_the_text_judge_reports_tokens_requests_and_cache_hits() -> None:
    queries, segs, _a, _b = transition_queries(ENV, 3, np.random.default_rng(0))
    cache = MemoryCache()
    with ScriptedServer(_reply) as srv:
        cfg = ClientConfig(base_url=srv.base_url, model="m", max_retries=0)
        with ChatClient(cfg, cache=cache) as client:
            judge = LLMJudge(client, ENV, n_queries=2, prices=Prices(prompt=1.0, completion=2.0))
            judge.submit(queries, segs)
            assert isinstance(judge, ReportsUsage)
            r = judge.usage_report()
            state = json.loads(json.dumps(judge.state()))
        n = srv.requests
        assert r["requests"] == n == 6 and r["cached"] == 0 and r["failed"] == 0
        assert r["prompt_tokens"] == sum(100 + k for k in range(1, n + 1))
        assert r["completion_tokens"] == 2 * n
        assert r["cost_usd"] == (r["prompt_tokens"] * 1.0 + r["completion_tokens"] * 2.0) / 1e6
        with ChatClient(cfg, cache=cache) as client:
            again = LLMJudge(client, ENV, n_queries=2)
            again.load_state(state)
            again.submit(queries, segs)
            r2 = again.usage_report()
        assert srv.requests == n and r2["cached"] == 6 and r2["requests"] == 6  # carried over


def test_the_answer_counts_survive_a_state_round_trip() -> None:
    """summary.json's ``answers`` and ``unreadable`` count the whole run: a judge resumed from
    the state of one that answered carries its counts on; a state saved before the counts were
    kept (no "answers") still loads, counting from zero."""
    queries, segs, _a, _b = transition_queries(ENV, 3, np.random.default_rng(0))

    def script(req: dict, n: int) -> Reply:  # every third answer has no verdict
        return Reply(content="Hmm, hard to say." if n % 3 == 0 else "Yes.")

    with ScriptedServer(script) as srv:
        cfg = ClientConfig(base_url=srv.base_url, model="m", max_retries=0, concurrency=1)
        with ChatClient(cfg, cache=MemoryCache()) as client:
            judge = LLMJudge(client, ENV, n_queries=2)
            judge.submit(queries, segs)
            state = json.loads(json.dumps(judge.state()))
            again = LLMJudge(client, ENV, n_queries=2)
            again.load_state(state)
            old = {k: v for k, v in state.items() if k != "answers"}
            older = LLMJudge(client, ENV, n_queries=2)
            older.load_state(old)
    counts = {k: judge.usage_report()[k] for k in ("answers", "unreadable")}
    assert counts == {"answers": 6, "unreadable": 2}
    assert {k: again.usage_report()[k] for k in counts} == counts
    assert (older.n_answers, older.n_unreadable) == (0, 0)
    assert older.usage_report()["requests"] == judge.usage_report()["requests"]
