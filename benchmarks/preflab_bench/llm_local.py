"""A real small model as the judge: PrefLab's LLM judge on the three grid worlds against
SmolLM2-135M-Instruct (Q4_1), served on this machine by ``preflab llm serve-local``.

Per env: sample transitions that change the state and whose ground truth is strict (the two
states' progress differs; ties excluded), ask :class:`preflab.llm.LLMJudge` ``--queries`` times
about each at the client's defaults (temperature 0.7, max_tokens 256), one request at a time
(the server answers one at a time), and report:

- requests/s (wall clock), prompt and generated tokens, generated tokens per second of model
  time (the server's ``/v1/stats``);
- the unparseable share of the answers (no yes/no verdict: no label);
- single-answer accuracy against the ground truth (readable answers), and the accuracy of the
  multi-query confidence labels (pairs whose mean answer is not 0.5), with 95% bootstrap
  intervals resampling pairs within each env (stratified), since one pair's answers share a
  prompt;
- a warm-cache rerun of the same queries through the run's SQLite store: HTTP requests made.

The plan is ``llm-local-smollm2`` in ``benchmarks/plan.toml``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from preflab.aggregate import ConfidenceAggregator, Feedback
from preflab.llm import ChatClient, ClientConfig, LLMJudge, transition_queries, true_preference
from preflab.llm.localmodel import LocalModel, default_model_path
from preflab.llm.localserver import serving
from preflab.records import Judgement
from preflab.rundir.reporting import append_jsonl, md_table
from preflab.store import FeedbackStore
from preflab_bench._report import RESULTS, command, header, write_report

ENVS = ("PrefLab/NoLock-v0", "PrefLab/Lock-v0", "PrefLab/MultiLock-v0")


def strict_queries(env_id: str, n: int, seed: int) -> tuple[list, dict, np.ndarray]:
    """``n`` transition queries with a strict ground truth, and that truth (P(a ≻ b))."""
    queries, segs, a, b = transition_queries(env_id, 4 * n, np.random.default_rng(seed))
    truth = true_preference(a, b, env_id)
    keep = np.flatnonzero(truth != 0.5)[:n]
    kept = [queries[i] for i in keep]
    ids = {s for q in kept for s in (*q.a, *q.b)}
    return kept, {k: v for k, v in segs.items() if k in ids}, truth[keep]


def _stats(base_url: str) -> dict[str, Any]:
    return httpx.get(f"{base_url}/stats", timeout=10, trust_env=False).json()


def per_pair(
    queries: list, truth: np.ndarray, judgements: list[Judgement]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per pair: (readable answers, correct answers, confidence label correct: 1/0, or -1 when
    the pair got no label or a 0.5 one)."""
    by_q: dict[str, list[float]] = {}
    for j in judgements:
        if j.p is not None:
            by_q.setdefault(j.query_id, []).append(j.p)
    readable, correct, label = [], [], []
    for q, t in zip(queries, truth, strict=True):
        ps = by_q.get(q.id, [])
        readable.append(len(ps))
        correct.append(sum(p == t for p in ps))
        m = float(np.mean(ps)) if ps else 0.5
        label.append(-1 if m == 0.5 else int((m > 0.5) == (t > 0.5)))
    return np.array(readable), np.array(correct), np.array(label)


def stratified_ci(
    groups: list[tuple[np.ndarray, np.ndarray]], rng: np.random.Generator, n_boot: int = 10_000
) -> tuple[float, float, float]:
    """Pooled ratio sum(num) / sum(den) and its 95% percentile interval, resampling pairs with
    replacement within each group."""
    num = sum(float(g[0].sum()) for g in groups)
    den = sum(float(g[1].sum()) for g in groups)
    tot_n, tot_d = np.zeros(n_boot), np.zeros(n_boot)
    for x, d in groups:
        idx = rng.integers(0, len(x), size=(n_boot, len(x)))
        tot_n += x[idx].sum(axis=1)
        tot_d += d[idx].sum(axis=1)
    boots = np.divide(tot_n, tot_d, out=np.full(n_boot, np.nan), where=tot_d > 0)
    lo, hi = np.nanpercentile(boots, [2.5, 97.5])
    return (num / den if den else float("nan")), float(lo), float(hi)


def run_env(
    env_id: str,
    base_url: str,
    n_pairs: int,
    n_queries: int,
    seed: int,
    work: Path,
    max_tokens: int = 256,
) -> dict[str, Any]:
    queries, segs, truth = strict_queries(env_id, n_pairs, seed)
    store = FeedbackStore(work / f"{env_id.split('/')[-1]}.sqlite")
    cfg = ClientConfig(
        base_url=base_url,
        model="smollm2",
        concurrency=1,
        deadline_s=600,
        max_tokens=max_tokens,
    )
    try:
        s0, t0 = _stats(base_url), time.perf_counter()
        with ChatClient(cfg, cache=store.llm_cache) as client:
            judge = LLMJudge(client, env_id, n_queries=n_queries)
            judge.submit(queries, segs)
            judgements = judge.collect()
        wall = time.perf_counter() - t0
        s1 = _stats(base_url)
        with ChatClient(cfg, cache=store.llm_cache) as client:
            rerun = LLMJudge(client, env_id, n_queries=n_queries)
            rerun.submit(queries, segs)
            rerun.collect()
            warm_http = client.http_requests
        labels = ConfidenceAggregator().labels(
            Feedback(queries={q.id: q for q in queries}, judgements=judgements)
        )
    finally:
        store.close()
    readable, correct, label = per_pair(queries, truth, judgements)
    answered = s1["answered"] - s0["answered"]
    gen = s1["completion_tokens"] - s0["completion_tokens"]
    model_s = s1["model_seconds"] - s0["model_seconds"]
    return {
        "env": env_id,
        "pairs": len(queries),
        "queries": n_queries,
        "max_tokens": max_tokens,
        "requests": answered,
        "wall_s": wall,
        "requests_per_s": answered / wall,
        "prompt_tokens": s1["prompt_tokens"] - s0["prompt_tokens"],
        "completion_tokens": gen,
        "truncated": s1["truncated"] - s0["truncated"],
        "gen_tokens_per_model_s": gen / model_s if model_s else float("nan"),
        "answers": judge.n_answers,
        "unreadable": judge.n_unreadable,
        "labels": len(labels),
        "readable": readable.tolist(),
        "correct": correct.tolist(),
        "label_correct": label.tolist(),
        "warm_http_requests": warm_http,
    }


def report(rows: list[dict[str, Any]], argv: list[str] | None, model: str) -> str:
    rng = np.random.default_rng(0)
    table = []
    for r in rows:
        rd, co, lab = (np.array(r[k]) for k in ("readable", "correct", "label_correct"))
        has = lab >= 0
        table.append(
            [
                r["env"],
                r["pairs"],
                r["requests"],
                r["requests_per_s"],
                r["gen_tokens_per_model_s"],
                r["completion_tokens"] / max(r["requests"], 1),
                r["truncated"],
                f"{100 * r['unreadable'] / max(r['answers'], 1):.1f}",
                f"{co.sum()}/{rd.sum()} ({100 * co.sum() / max(rd.sum(), 1):.1f}%)",
                f"{int(lab[has].sum())}/{int(has.sum())}",
                r["warm_http_requests"],
            ]
        )
    single = stratified_ci([(np.array(r["correct"]), np.array(r["readable"])) for r in rows], rng)
    lab_groups = []
    for r in rows:
        lab = np.array(r["label_correct"])
        lab_groups.append(((lab == 1).astype(float), (lab >= 0).astype(float)))
    labelled = stratified_ci(lab_groups, rng)
    answers = sum(r["answers"] for r in rows)
    unreadable = sum(r["unreadable"] for r in rows)
    verdict = "shown" if single[1] > 0.5 else "not shown"
    md = header(
        f"A real small model as the judge: {model}",
        "preflab_bench.llm_local",
        argv,
        f"{rows[0]['pairs']} strict transition pairs per grid world × {rows[0]['queries']} "
        f"queries, temperature 0.7, max_tokens {rows[0].get('max_tokens', 256)}, one request "
        "at a time, "
        "`preflab llm serve-local` on 127.0.0.1 (llama.cpp through cyllama, CPU)",
    )
    md += md_table(
        [
            "env",
            "pairs",
            "requests",
            "requests/s",
            "generated tokens/s (model time)",
            "tokens per answer",
            "cut at max_tokens",
            "unparseable %",
            "single answers right",
            "confidence labels right",
            "HTTP requests on warm rerun",
        ],
        table,
    )
    md += (
        "\n## Pooled over the three grid worlds\n\n"
        f"- Unparseable answers: {unreadable} of {answers} ({100 * unreadable / answers:.1f}%).\n"
        f"- Single-answer accuracy: {100 * single[0]:.1f}% (95% CI {100 * single[1]:.1f}–"
        f"{100 * single[2]:.1f}%, pairs resampled within each env).\n"
        f"- Confidence-label accuracy: {100 * labelled[0]:.1f}% (95% CI {100 * labelled[1]:.1f}–"
        f"{100 * labelled[2]:.1f}%).\n"
        f"- Above chance (the single-answer interval clears 50%): **{verdict}**.\n"
    )
    return md


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="preflab bench llm_local", description=__doc__)
    ap.add_argument("--envs", nargs="+", default=list(ENVS))
    ap.add_argument("--pairs", type=int, default=50, help="strict pairs per env (50)")
    ap.add_argument("--queries", type=int, default=3, help="answers per pair (3)")
    ap.add_argument(
        "--max-tokens", type=int, default=256, help="cap on generated tokens per answer (256)"
    )
    ap.add_argument("--seed", type=int, default=100, help="sampling seed of the pairs (100)")
    ap.add_argument("--model", type=Path, default=None, help="a .gguf (default: SmolLM2-135M)")
    ap.add_argument("--port", type=int, default=0, help="server port (0: a free one)")
    ap.add_argument("--plan", default="llm-local-smollm2", help="plan entry named in the log")
    ap.add_argument("--out", type=Path, default=RESULTS / "llm_local.md")
    ap.add_argument("--jsonl", type=Path, default=RESULTS / "llm_local_runs.jsonl")
    args = ap.parse_args(argv)
    model = LocalModel(args.model or default_model_path())
    rows = []
    try:
        with (
            serving(model, port=args.port, seed=args.seed) as url,
            tempfile.TemporaryDirectory(prefix="preflab-llm-local-") as tmp,
        ):
            for env_id in args.envs:
                row = run_env(
                    env_id, url, args.pairs, args.queries, args.seed, Path(tmp), args.max_tokens
                )
                row.update(
                    plan=args.plan or None,
                    command=command("preflab_bench.llm_local", argv),
                    model=model.name,
                    seed=args.seed,
                )
                append_jsonl(args.jsonl, row, default=float)
                rows.append(row)
    finally:
        model.close()
    write_report(report(rows, argv, model.name), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
