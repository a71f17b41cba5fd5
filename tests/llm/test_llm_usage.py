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
