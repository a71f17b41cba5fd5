"""Judge throughput against a local OpenAI-compatible server, and a warm-cache rerun.

Starts :class:`preflab.testing.llmserver.ScriptedServer` on 127.0.0.1 with a fixed per-request
latency, asks the :class:`preflab.llm.LLMJudge` about Lock state pairs with 8 concurrent
requests, and reports requests/s; then reruns the same queries on the warm cache (memory and
the SQLite FeedbackStore) and counts the HTTP requests the server saw.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from preflab.llm import (
    ChatClient,
    ClientConfig,
    LLMJudge,
    MemoryCache,
    ResponseCache,
    transition_queries,
)
from preflab.records import Query
from preflab.rundir.reporting import md_table
from preflab.testing.llmserver import Reply, ScriptedServer
from preflab_bench._report import RESULTS, header, write_report

ENV = "PrefLab/Lock-v0"


def _queries(n: int, rng: np.random.Generator) -> tuple[list[Query], dict]:
    queries, segs, _, _ = transition_queries(ENV, n, rng)
    return queries, segs


def run(
    latency_s: float,
    n_pairs: int,
    n_queries: int,
    concurrency: int,
    cache_kind: str,
    rng: np.random.Generator,
) -> dict[str, float]:
    queries, segs = _queries(n_pairs, rng)
    answers = ["Therefore, the answer is yes.", "Therefore, the answer is no."]
    script = lambda req, n: Reply(content=answers[n % 2], delay_s=latency_s)  # noqa: E731
    with tempfile.TemporaryDirectory() as tmp:
        cache: ResponseCache
        if cache_kind == "store":
            from preflab.store import FeedbackStore

            cache = FeedbackStore(Path(tmp) / "run.sqlite").llm_cache
        else:
            cache = MemoryCache()
        with ScriptedServer(script) as srv:
            cfg = ClientConfig(base_url=srv.base_url, model="scripted", concurrency=concurrency)
            with ChatClient(cfg, cache=cache) as client:
                judge = LLMJudge(client, ENV, n_queries=n_queries)
                t0 = time.perf_counter()
                judge.submit(queries, segs)
                cold = time.perf_counter() - t0
                js = judge.collect()
                before = srv.requests
                t0 = time.perf_counter()
                judge.submit(queries, segs)
                warm = time.perf_counter() - t0
                judge.collect()
                after = srv.requests
    n_req = len(js)
    return {
        "requests": n_req,
        "cold_s": cold,
        "rps": n_req / cold,
        "warm_s": warm,
        "warm_http": after - before,
        "answered": sum(j.p is not None for j in js),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="preflab_bench.llm_throughput", description=__doc__)
    ap.add_argument("--pairs", type=int, default=100)
    ap.add_argument("--queries", type=int, default=3, help="queries per pair")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument(
        "--latencies",
        type=float,
        nargs="+",
        default=[0.0, 0.1, 0.3],
        help="server-side seconds per request",
    )
    ap.add_argument("--out", type=Path, default=RESULTS / "llm_throughput.md")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = []
    for lat in args.latencies:
        for kind in ("memory", "store"):
            r = run(lat, args.pairs, args.queries, args.concurrency, kind, rng)
            rows.append(
                [
                    f"{lat * 1000:.0f}",
                    kind,
                    int(r["requests"]),
                    int(r["answered"]),
                    r["cold_s"],
                    r["rps"],
                    r["warm_s"],
                    int(r["warm_http"]),
                ]
            )
    md = header(
        "LLM judge throughput (local OpenAI-compatible server)",
        "preflab_bench.llm_throughput",
        argv,
        f"{args.pairs} Lock state pairs × {args.queries} queries, concurrency "
        f"{args.concurrency}, 1 run per row, ThreadingHTTPServer on 127.0.0.1",
    )
    md += md_table(
        [
            "server latency (ms)",
            "cache",
            "requests",
            "parsed",
            "cold run (s)",
            "requests/s",
            "warm rerun (s)",
            "HTTP requests on rerun",
        ],
        rows,
    )
    md += (
        "\nTarget: ≥ 20 requests/s with 8 concurrent requests, and 0 HTTP requests on the "
        "warm-cache rerun. With server latency L and concurrency c the ceiling is c / L.\n"
    )
    write_report(md, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
