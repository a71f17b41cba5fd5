"""Store throughput with many writers: N processes write judgements to one store while a
collector (StoreSource) reads; then bulk reads (100k judgements, labels of 10k queries).

``preflab bench store_throughput [--writers 8] [--per-writer 1000] [--batch 1] [--backends
sqlite,postgres]`` writes ``benchmarks/results/store_throughput.md``. PostgreSQL runs on a
throwaway cluster on loopback (PostgreSQL 15 binaries; as the ``postgres`` user when root).
Targets: ≥ 2,000 judgements/s in total, p95 commit latency < 20 ms, 0 lost or duplicated;
reads < 2 s.
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing as mp
import os
import shutil
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import Any

import numpy as np

from preflab.records import Annotator, Judgement, Query, Segment


def setup_store(url: str, array_dir: str, n_queries: int = 50) -> list[str]:
    """Two segments and ``n_queries`` pair queries between them; returns the query ids."""
    from preflab.store import FeedbackStore

    store = FeedbackStore(url, array_dir=array_dir)
    rng = np.random.default_rng(0)
    segs = []
    for i in range(2):
        o, a = rng.normal(size=(5, 2)), rng.normal(size=(5, 1))
        segs.append(
            Segment(id=Segment.content_id(o, a), obs=o, acts=a, true_rewards=np.zeros(5), episode=i)
        )
    store.segments.add(segs)
    qs = [
        Query(id=f"q{k:05d}", kind="pair", a=(segs[0].id,), b=(segs[1].id,), created_at=1.0)
        for k in range(n_queries)
    ]
    store.queries.add(qs)
    store.close()
    return [q.id for q in qs]


def _barrier(ready_dir: str, name: str, n: int, timeout_s: float = 300.0) -> None:
    """Wait until ``n`` processes have reached this point (one file each in ``ready_dir``)."""
    Path(ready_dir, name).touch()
    deadline = time.time() + timeout_s
    while len(list(Path(ready_dir).iterdir())) < n and time.time() < deadline:
        time.sleep(0.005)


def writer(
    url: str,
    array_dir: str,
    wid: int,
    n: int,
    batch: int,
    qids: list[str],
    ready: str,
    parties: int,
) -> dict[str, Any]:
    """Write ``n`` judgements in calls of ``batch``; returns per-call commit latencies."""
    from preflab.store import FeedbackStore

    store = FeedbackStore(url, array_dir=array_dir)
    store.annotators.add(Annotator(id="shared", source="human", name="everyone"))  # concurrent
    store.annotators.add(Annotator(id=f"w{wid}", source="human", name=f"writer {wid}"))
    _barrier(ready, f"w{wid}", parties)
    start = time.time()
    lat = []
    t0 = time.perf_counter()
    for k in range(0, n, batch):
        js = [
            Judgement(
                id=f"w{wid}-{i}",
                query_id=qids[i % len(qids)],
                annotator_id=f"w{wid}",
                source="human",
                p=float(i % 2),
                created_at=time.time(),
            )
            for i in range(k, min(n, k + batch))
        ]
        t = time.perf_counter()
        store.answers.add(js)
        lat.append(time.perf_counter() - t)
    end = time.time()
    store.close()
    return {"latencies": lat, "start": start, "end": end, "wall": time.perf_counter() - t0}


def collector(
    url: str, array_dir: str, expected: int, timeout_s: float, ready: str, parties: int
) -> dict[str, Any]:
    """A StoreSource and a raw seq reader running while the writers write; it stops when it
    has read every judgement, or ``timeout_s`` after the writers said they are done (a file
    ``done`` in ``ready``), so a slow machine's long writes do not cut it short."""
    from preflab.sources import StoreSource
    from preflab.store import FeedbackStore

    store = FeedbackStore(url, array_dir=array_dir)
    source = StoreSource(store)
    _barrier(ready, "collector", parties)
    ids: list[str] = []
    seqs: list[int] = []
    after = 0
    deadline = float("inf")
    reads = 0
    while len(ids) < expected and time.time() < deadline:
        if deadline == float("inf") and os.path.exists(os.path.join(ready, "done")):
            deadline = time.time() + timeout_s
        ids += [j.id for j in source.collect()]
        for seq, _j in store.answers.judgements(after_seq=after):  # the naive reader: seq > cursor
            seqs.append(seq)
            after = seq
        reads += 1
        time.sleep(0.01)
    store.close()
    return {"ids": ids, "seqs": seqs, "reads": reads}


def run_writers(
    url: str,
    array_dir: str,
    *,
    writers: int = 8,
    per_writer: int = 1000,
    batch: int = 1,
    timeout_s: float = 60.0,
    mp_context: BaseContext | None = None,
) -> dict[str, Any]:
    """Run the many-writers scenario; returns throughput, latencies and the checks.

    The writers and the collector are separate processes of ``mp_context`` (default: spawn,
    fresh interpreters; the tests pass their warm forkserver's, tests/warm_python.py)."""
    qids = setup_store(url, array_dir)
    ctx = mp_context if mp_context is not None else mp.get_context("spawn")
    ready = tempfile.mkdtemp(prefix="preflab-barrier-")
    with ProcessPoolExecutor(max_workers=writers + 1, mp_context=ctx) as ex:
        coll = ex.submit(
            collector, url, array_dir, writers * per_writer, timeout_s, ready, writers + 1
        )
        futs = [
            ex.submit(writer, url, array_dir, w, per_writer, batch, qids, ready, writers + 1)
            for w in range(writers)
        ]
        try:
            outs = [f.result() for f in futs]
        finally:  # a failed writer must not leave the collector waiting
            Path(ready, "done").touch()
        seen = coll.result()
    shutil.rmtree(ready, ignore_errors=True)
    from preflab.store import FeedbackStore

    store = FeedbackStore(url, array_dir=array_dir)
    rows = store.answers.judgements()
    annotators = {a.id for a in store.annotators.all()}
    store.close()
    lat = np.concatenate([o["latencies"] for o in outs]) * 1000
    total = writers * per_writer
    stored_ids = [j.id for _s, j in rows]
    expected = {f"w{w}-{i}" for w in range(writers) for i in range(per_writer)}
    seqs = seen["seqs"]
    return {
        "total": total,
        "throughput": total / (max(o["end"] for o in outs) - min(o["start"] for o in outs)),
        "p50_ms": float(np.percentile(lat, 50)),
        "p95_ms": float(np.percentile(lat, 95)),
        "max_ms": float(lat.max()),
        "lost": len(expected - set(stored_ids)),
        "duplicated": len(stored_ids) - len(set(stored_ids)),
        "collector_missed": len(expected - set(seen["ids"])),
        "collector_twice": len(seen["ids"]) - len(set(seen["ids"])),
        "seq_strictly_increasing": all(a < b for a, b in itertools.pairwise(seqs)),
        "naive_missed": total - len(set(seqs)),
        "seq_unique": len({s for s, _j in rows}) == len(rows),
        "annotators": len(annotators),
        "reads": seen["reads"],
    }


def bulk_reads(url: str, array_dir: str, n_judgements: int, n_queries: int) -> dict[str, float]:
    """Load ``n_judgements`` judgements, then the labels of ``n_queries`` queries."""
    from preflab.aggregate import Feedback, IdentityAggregator
    from preflab.store import FeedbackStore

    qids = setup_store(url, array_dir, n_queries)
    store = FeedbackStore(url, array_dir=array_dir)
    per_q = n_judgements // n_queries
    for k in range(0, n_judgements, 10_000):
        store.answers.add(
            Judgement(
                id=f"j{i}",
                query_id=qids[i // per_q % n_queries],
                annotator_id=f"a{i % per_q}",
                source="human",
                p=float(i % 2),
                created_at=1.0,
            )
            for i in range(k, min(n_judgements, k + 10_000))
        )
    t = time.perf_counter()
    js = [j for _s, j in store.answers.judgements()]
    t_load = time.perf_counter() - t
    t = time.perf_counter()
    queries = {q.id: q for q in store.queries.all()}
    labels = IdentityAggregator().labels(Feedback(queries=queries, judgements=js))
    t_labels = time.perf_counter() - t
    store.close()
    assert len(js) == n_judgements and len(labels) == n_judgements
    return {"load_s": t_load, "labels_s": t_labels, "total_s": t_load + t_labels}


def _another(cluster: Any, tmp: str, k: int) -> str:
    return cluster.new_database() if cluster is not None else str(Path(tmp) / f"w{k}.db")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="preflab bench store_throughput", description=__doc__)
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--per-writer", type=int, default=1000)
    ap.add_argument("--batch", default="1,10", help="judgements per commit (comma list)")
    ap.add_argument("--backends", default="sqlite,postgres")
    ap.add_argument("--read-judgements", type=int, default=100_000)
    ap.add_argument("--read-queries", type=int, default=10_000)
    ap.add_argument("--out", default="", help="default benchmarks/results/store_throughput.md")
    args = ap.parse_args(argv)
    from preflab.rundir.reporting import md_table
    from preflab.testing.pgcluster import PostgresCluster
    from preflab_bench._report import header

    rows, read_rows = [], []
    for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
        with tempfile.TemporaryDirectory(prefix="preflab-bench-") as tmp:
            if backend == "sqlite":
                urls = [str(Path(tmp) / "w.db"), str(Path(tmp) / "r.db")]
                cluster = None
            else:
                cluster = PostgresCluster.start()
                urls = [cluster.new_database(), cluster.new_database()]
            try:
                for k, batch in enumerate(int(x) for x in args.batch.split(",")):
                    url = urls[0] if k == 0 else _another(cluster, tmp, k)
                    r = run_writers(
                        url,
                        tmp + f"/seg{k}",
                        writers=args.writers,
                        per_writer=args.per_writer,
                        batch=batch,
                    )
                    print(backend, batch, r, flush=True)
                    rows.append(
                        [
                            backend,
                            args.writers,
                            batch,
                            r["total"],
                            r["throughput"],
                            r["p50_ms"],
                            r["p95_ms"],
                            r["max_ms"],
                            r["lost"],
                            r["duplicated"],
                            r["collector_missed"],
                            r["collector_twice"],
                            r["naive_missed"],
                            "yes" if r["seq_strictly_increasing"] and r["seq_unique"] else "NO",
                        ]
                    )
                b = bulk_reads(urls[1], tmp + "/seg2", args.read_judgements, args.read_queries)
                print(backend, b)
                read_rows.append(
                    [
                        backend,
                        args.read_judgements,
                        args.read_queries,
                        b["load_s"],
                        b["labels_s"],
                        b["total_s"],
                    ]
                )
            finally:
                if cluster is not None:
                    cluster.stop()
    text = header(
        "Feedback store: many writers, one collector, bulk reads",
        "store_throughput",
        argv,
        f"{args.writers} writer processes × {args.per_writer} judgements, {args.batch} per "
        "commit, a StoreSource collecting at the same time; 2 cores shared with other jobs "
        f"(load average {os.getloadavg()[0]:.1f} at the end)",
    )
    text += md_table(
        [
            "backend",
            "writers",
            "per commit",
            "judgements",
            "judgements/s",
            "p50 ms",
            "p95 ms",
            "max ms",
            "lost",
            "duplicated",
            "collector missed",
            "collector twice",
            "naive reader missed",
            "seq in order",
        ],
        rows,
    )
    text += "\n## Reads\n\n" + md_table(
        ["backend", "judgements", "queries", "load judgements s", "labels s", "total s"], read_rows
    )
    text += (
        "\nTargets: ≥ 2,000 judgements/s in total, p95 commit latency < 20 ms, 0 lost; reads "
        "< 2 s. SQLite: WAL, synchronous=NORMAL; PostgreSQL 15: default settings (fsync on), "
        "a throwaway cluster on loopback.\n"
    )
    if not args.out:
        from preflab_bench._report import RESULTS

        args.out = str(RESULTS / "store_throughput.md")
    Path(args.out).write_text(text)
    print(f"wrote {args.out}")
    return 0
