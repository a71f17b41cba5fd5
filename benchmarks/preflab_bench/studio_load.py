"""Studio under load: many annotators judging while a trainer-like process writes the store.

One studio process (``preflab studio``, uvicorn, SQLite WAL store) on 127.0.0.1; a writer
process that behaves like the trainer (publishes a round of new queries every few seconds,
collects new judgements and moves the "trainer" cursor); and N simulated annotators (asyncio +
httpx, one keep-alive connection each) in this process.

Phase 1 (paced): every annotator asks for its next query and submits one judgement per period
(default 1 s) for ``--duration`` seconds. Reported: submission latency p50/p95/max, errors,
and lost judgements = acknowledged (201) by the server but not in the store afterwards.
Phase 2 (saturation): the same annotators submit back to back without think time for
``--saturation-duration`` seconds: judgements/s and latency p95.
At the end the writer's collected count is compared with the store (each committed judgement
collected exactly once).

    preflab bench studio_load [--annotators 50] [--duration 60] [--saturation-duration 20]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import multiprocessing as mp
import os
import platform
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from preflab.kinds import PAIR
from preflab.rundir.reporting import md_table
from preflab_bench._report import RESULTS


@dataclass
class PhaseStats:
    """What one load phase measured."""

    latencies: list[float] = field(default_factory=list)
    next_latencies: list[float] = field(default_factory=list)
    acknowledged: set[str] = field(default_factory=set)
    errors: dict[str, int] = field(default_factory=dict)
    starved: int = 0
    seconds: float = 0.0
    cpu_s: float = float("nan")

    def error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1


def _seed(run: Path, n_annotators: int, n_segments: int, n_queries: int, seed: int) -> list[str]:
    from preflab.records import Annotator, Segment
    from preflab.store import FeedbackStore

    rng = np.random.default_rng(seed)
    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    segs = []
    for i in range(n_segments):
        o, a = rng.normal(size=(50, 11)), rng.normal(size=(50, 3))
        segs.append(
            Segment(
                id=Segment.content_id(o, a),
                obs=o,
                acts=a,
                true_rewards=rng.normal(size=50),
                env_id="Hopper-v5",
                episode=i,
            )
        )
    store.segments.add(segs)
    store.queries.add(_pairs([s.id for s in segs], n_queries, 0, rng))
    tokens = []
    for k in range(n_annotators):
        tok = f"bench-{k}-{uuid.uuid4().hex}"
        store.annotators.add(
            Annotator(id=f"ann-{k:03d}", source="human", name=f"annotator {k}", meta={}),
            token=tok,
        )
        tokens.append(tok)
    store.close()
    return tokens


def _pairs(ids: list[str], n: int, round_: int, rng: np.random.Generator) -> list:

    out = []
    for _ in range(n):
        a, b = rng.choice(len(ids), size=2, replace=False)
        out.append(PAIR.query(ids[a], ids[b], round=round_))
    return out


def _trainer(run: str, stop: Any, out: Any, round_s: float, per_round: int, seed: int) -> None:
    """Trainer-like writer: every ``round_s`` publish queries + a round, collect judgements."""
    from preflab.store import FeedbackStore

    rng = np.random.default_rng(seed)
    store = FeedbackStore(Path(run) / "feedback.db", array_dir=Path(run) / "segments")
    ids = sorted({sid for q in store.queries.all() for sid in (*q.a, *q.b)})
    seen: set[str] = set()
    dup = 0
    after = 0
    rounds = 0
    write_s: list[float] = []
    while True:
        stopping = stop.wait(round_s)
        rounds += 1
        t0 = time.perf_counter()
        store.queries.add(_pairs(ids, per_round, rounds, rng))
        for seq, j in store.answers.judgements(after_seq=after):
            after = max(after, seq)
            dup += j.id in seen
            seen.add(j.id)
        store.rounds.set_cursor("trainer", after)
        store.rounds.publish(
            rounds,
            env_id="Hopper-v5",
            env_steps=rounds * 1000,
            total_steps=10**6,
            metrics={"n_labels": len(seen)},
        )
        write_s.append(time.perf_counter() - t0)
        if stopping:
            break
    store.close()
    out.put({"collected": len(seen), "duplicates": dup, "rounds": rounds, "write_s": write_s})


async def _annotator(
    client: Any, token: str, stats: PhaseStats, until: float, period: float, rng: Any
) -> None:
    import httpx

    headers = {"Authorization": f"Bearer {token}"}
    next_at = time.perf_counter() + (rng.uniform(0, period) if period else 0)
    while True:
        if period:
            delay = next_at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            next_at += period
        if time.perf_counter() >= until:
            return
        try:
            t0 = time.perf_counter()
            r = await client.get("/api/queries/next", params={"kind": "pair"}, headers=headers)
            stats.next_latencies.append(time.perf_counter() - t0)
            if r.status_code != 200:
                stats.error(f"next {r.status_code}")
                continue
            q = r.json()["query"]
            if q is None:
                stats.starved += 1
                continue
            body = {
                "query_id": q["id"],
                "p": float(rng.choice([0.0, 0.5, 1.0])),
                "response_time_s": 1.0,
                "client_key": uuid.uuid4().hex,
            }
            t0 = time.perf_counter()
            r = await client.post("/api/judgements", json=body, headers=headers)
            stats.latencies.append(time.perf_counter() - t0)
            if r.status_code == 201:
                stats.acknowledged.add(r.json()["judgement_id"])
            else:
                stats.error(f"post {r.status_code}")
        except httpx.HTTPError as exc:
            stats.error(type(exc).__name__)


async def _phase(
    url: str, tokens: list[str], seconds: float, period: float, seed: int
) -> PhaseStats:
    import httpx

    stats = PhaseStats()
    limits = httpx.Limits(max_connections=len(tokens), max_keepalive_connections=len(tokens))
    async with httpx.AsyncClient(
        base_url=url, limits=limits, timeout=60, trust_env=False
    ) as client:
        t0 = time.perf_counter()
        until = t0 + seconds
        rngs = [np.random.default_rng(seed + k) for k in range(len(tokens))]
        await asyncio.gather(
            *(
                _annotator(client, tok, stats, until, period, rngs[k])
                for k, tok in enumerate(tokens)
            )
        )
        stats.seconds = time.perf_counter() - t0
    return stats


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process and its descendants (Linux /proc; NaN elsewhere)."""
    tick = os.sysconf("SC_CLK_TCK")
    total, todo = 0.0, [pid]
    try:
        while todo:
            p = todo.pop()
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            for task in Path(f"/proc/{p}/task").iterdir():
                kids = (task / "children").read_text().split()
                todo.extend(int(k) for k in kids)
    except (OSError, ValueError, IndexError):
        return float("nan")
    return total


def _ms(x: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(x) * 1000, q)) if x else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="preflab bench studio_load", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--annotators", type=int, default=50)
    ap.add_argument("--duration", type=float, default=60.0, help="paced phase, seconds")
    ap.add_argument("--period", type=float, default=1.0, help="seconds between judgements")
    ap.add_argument("--saturation-duration", type=float, default=20.0)
    ap.add_argument("--workers", type=int, default=1, help="uvicorn workers of the studio")
    ap.add_argument("--round-s", type=float, default=5.0, help="trainer round period")
    ap.add_argument("--per-round", type=int, default=100, help="queries the trainer adds")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=RESULTS / "studio_load.md")
    ap.add_argument("--note", default="", help="free text added to the report")
    args = ap.parse_args(argv)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    argv_shown = sys.argv[1:] if argv is None else argv

    from preflab.studio.launch import start_studio_process

    tmp = Path(tempfile.mkdtemp(prefix="preflab-studio-load-"))
    run = tmp / "run"
    run.mkdir()
    tokens = _seed(run, args.annotators, 60, 400, args.seed)
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    load_before = os.getloadavg()
    extra = ("--no-media", "--workers", str(args.workers))
    proc = start_studio_process(run, "127.0.0.1", port, extra_args=extra)
    ctx = mp.get_context("spawn")
    stop, out = ctx.Event(), ctx.Queue()
    trainer = ctx.Process(
        target=_trainer, args=(str(run), stop, out, args.round_s, args.per_round, args.seed)
    )
    trainer.start()
    url = f"http://127.0.0.1:{port}"
    try:
        print(f"paced phase: {args.annotators} annotators x {args.duration:.0f} s ...", flush=True)
        cpu0 = _cpu_s(proc.pid)
        paced = asyncio.run(_phase(url, tokens, args.duration, args.period, args.seed))
        cpu1 = _cpu_s(proc.pid)
        print(f"saturation phase: {args.saturation_duration:.0f} s ...", flush=True)
        sat = asyncio.run(_phase(url, tokens, args.saturation_duration, 0.0, args.seed + 999))
        cpu2 = _cpu_s(proc.pid)
        paced.cpu_s, sat.cpu_s = cpu1 - cpu0, cpu2 - cpu1
    finally:
        stop.set()
        trainer_result = out.get(timeout=120)
        trainer.join(timeout=60)
        proc.terminate()
        proc.wait(timeout=30)
    from preflab.store import FeedbackStore

    store = FeedbackStore(run / "feedback.db", array_dir=run / "segments")
    stored = {j.id for _s, j in store.answers.judgements()}
    store.close()
    load_after = os.getloadavg()
    rows = []
    for name, st in (("paced (1 per period)", paced), ("saturation (no think time)", sat)):
        n = len(st.latencies)
        lost = len(st.acknowledged - stored)
        rows.append(
            [
                name,
                n,
                f"{len(st.acknowledged) / st.seconds:.1f}",
                f"{_ms(st.latencies, 50):.1f}",
                f"{_ms(st.latencies, 95):.1f}",
                f"{max(st.latencies) * 1000 if n else float('nan'):.1f}",
                f"{_ms(st.next_latencies, 95):.1f}",
                sum(st.errors.values()),
                lost,
                st.starved,
                f"{st.cpu_s * 1000 / max(len(st.latencies), 1):.1f}",
            ]
        )
    acked = paced.acknowledged | sat.acknowledged
    head = [
        "phase",
        "submissions",
        "judgements/s",
        "p50 ms",
        "p95 ms",
        "max ms",
        "next-query p95 ms",
        "errors",
        "lost",
        "no open query",
        "studio CPU ms / cycle",
    ]
    lines = [
        "# Studio load: simulated annotators against one studio (SQLite WAL)",
        "",
        f"Command: `preflab bench studio_load {' '.join(argv_shown)}`  ",
        f"Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"load average before {load_before[0]:.1f}, after {load_after[0]:.1f} "
        "(the machine is shared with other jobs)  ",
        f"Setup: {args.annotators} annotators (asyncio + httpx, one keep-alive connection each) in "
        f"the bench process; the studio in its own process (`preflab studio --no-media "
        f"--workers {args.workers}`); a trainer-like writer process adds {args.per_round} "
        f"queries, collects judgements and moves the trainer cursor every {args.round_s:g} s. "
        f"Paced phase {args.duration:g} s (one GET next + one POST judgement per annotator every "
        f"{args.period:g} s), saturation phase {args.saturation_duration:g} s (back to back).",
        "",
        md_table(head, rows).rstrip("\n"),  # cells are strings and ints: written as they are
        "",
        "Latency = one POST /api/judgements, measured by the client on loopback. "
        "Lost = acknowledged with 201 but not in the store afterwards. Studio CPU per cycle = "
        "CPU time of the studio process(es) during the phase / submissions (one cycle = GET "
        "next query + POST judgement); it does not depend on how busy the machine is.",
        "",
        f"- Acknowledged judgements: {len(acked)}; stored: {len(stored)}; acknowledged but "
        f"missing: {len(acked - stored)}.",
        f"- Trainer-like reader: {trainer_result['rounds']} rounds, collected "
        f"{trainer_result['collected']} judgements ({trainer_result['duplicates']} seen twice), "
        f"store holds {len(stored)}; write+collect per round p95 "
        f"{_ms(trainer_result['write_s'], 95):.0f} ms.",
        f"- Errors by kind: paced {paced.errors or 'none'}, saturation {sat.errors or 'none'}.",
    ]
    if args.note:
        lines += ["", args.note]
    text = "\n".join(lines) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
