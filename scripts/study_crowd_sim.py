# ruff: noqa: T201 (a measurement script prints its results)
"""An exploratory check of a study's assignment and trust statistics (issue #61), not the
pre-registered ``bench crowd_study``: 12 scripted people join a real studio server (loopback,
real SQLite store) through the study link with Prolific ids and answer over its HTTP API, as
the page does, with k = 3 overlap and 10 % attention checks, on 240 pairs of toy segments whose
true return is the oracle. 8 careful (error 5-15 %), 2 careless (random, fast), 1 adversary
(flips), 1 who leaves after 30 answers and comes back in a new browser.

Prints: answers stored once per (person, pair), each person's flags at their 30th answer and
at the end, the crowd's label error (SML and majority) against the oracle next to the mean
careful person's, Krippendorff's α with its interval, and request latencies.

    .venv/bin/python scripts/study_crowd_sim.py /tmp/study-sim
"""

from __future__ import annotations

import resource
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.studio.api_server import start_studio  # noqa: E402

from preflab.aggregate import majority, sml  # noqa: E402
from preflab.records import Query  # noqa: E402
from preflab.studio import study as S  # noqa: E402
from preflab.studio.config import StudioConfig  # noqa: E402
from preflab.studio.study_config import StudyConfig  # noqa: E402
from preflab.studio.study_quality import crowd_stats, side  # noqa: E402
from preflab.studio.study_report import answers_of  # noqa: E402
from preflab.testing.factories import make_segments  # noqa: E402

KINDS = ["careful"] * 8 + ["careless"] * 2 + ["adversary", "leaver"]
QUOTA = 60


def main(tmp: Path) -> None:
    tmp.mkdir(parents=True, exist_ok=True)
    st = start_studio(tmp, config=StudioConfig(min_answer_s=0.0, rate_per_s=1000))
    segs = make_segments(60, rng=np.random.default_rng(3), obs_dim=3, env_id="Toy-v0", length=50)
    st.store.segments.add(segs)
    every = [(a.id, b.id) for i, a in enumerate(segs) for b in segs[i + 1 :]]
    pick = np.random.default_rng(9).choice(len(every), 240, replace=False)
    st.store.queries.add(
        [
            Query(id=f"L{k:03d}", kind="pair", a=(every[i][0],), b=(every[i][1],), round=3)
            for k, i in enumerate(pick)
        ]
    )
    rets = st.store.studies.true_returns([s.id for s in st.store.segments.all()])
    truth = {
        q.id: 1.0 if rets[q.a[0]] > rets[q.b[0]] else 0.0
        for q in st.store.queries.all()
        if q.kind == "pair"
    }
    cfg = StudyConfig(
        practice_pairs=0, quota_answers=QUOTA, overlap=3, gold_rate=0.1, clip_s=50 / 30
    )
    secret = S.create(st.store, cfg)
    refused: list[tuple[int, int, int]] = []
    lat: list[float] = []
    lock = threading.Lock()

    def person(n: int, kind: str, start: int, stop: int) -> None:
        c = httpx.Client(base_url=st.url, trust_env=False, follow_redirects=False, timeout=60)
        ids = {"PROLIFIC_PID": f"pp{n:02d}", "STUDY_ID": "s1", "SESSION_ID": f"se{n}"}
        c.get(f"/s/{secret}", params=ids)
        if start == 0:
            c.post("/study/consent", data={"decision": "accept"})
        rng = np.random.default_rng(100 + n + start)
        err = rng.uniform(0.05, 0.15)
        for k in range(start, stop):
            t0 = time.perf_counter()
            r = c.get("/api/queries/next", params={"kind": "pair"})
            t1 = time.perf_counter()
            q = r.json().get("query") if r.status_code == 200 else None
            if q is None:  # every pair has its k answers (or the quota is reached)
                break
            t = truth[q["id"]]
            if kind in ("careful", "leaver"):
                p, rt = (t if rng.random() > err else 1 - t), rng.uniform(2.5, 6)
            elif kind == "careless":
                p, rt = float(rng.integers(0, 2)), rng.uniform(0.3, 0.8)
            else:
                p, rt = 1 - t, rng.uniform(2.5, 6)
            t2 = time.perf_counter()
            r = c.post(
                "/api/judgements",
                json={
                    "query_id": q["id"],
                    "p": p,
                    "client_key": f"k-{n}-{k}-sim",
                    "response_time_s": rt,
                },
            )
            t3 = time.perf_counter()
            if r.status_code != 201:
                refused.append((n, k, r.status_code))
            with lock:
                lat.extend([t1 - t0, t3 - t2])

    threads = [
        threading.Thread(target=person, args=(n, kind, 0, 30 if kind == "leaver" else QUOTA))
        for n, kind in enumerate(KINDS)
    ]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    leaver = st.store.studies.by_pid(S.STUDY_ID, "pp11")
    assert leaver is not None
    person(11, "leaver", 30, QUOTA)  # back in a new browser with the same PROLIFIC_PID
    again = st.store.studies.by_pid(S.STUDY_ID, "pp11")
    print(
        "the leaver resumed as the same participant:",
        again is not None and again.annotator_id == leaver.annotator_id,
    )
    people = st.store.studies.participants(S.STUDY_ID)
    kinds = {p.annotator_id: KINDS[int((p.platform_pid or "pp0")[2:])] for p in people}
    answers, _qs = answers_of(st.store, set(kinds))
    gold = st.store.studies.gold()
    keys = [(a.annotator_id, a.query_id) for a in answers]
    print(
        f"answers {len(answers)}, stored twice {len(keys) - len(set(keys))}, refused {refused[:3]}"
    )

    def stats(rows: list) -> object:
        return crowd_stats(
            rows,
            gold=gold,
            config=cfg,
            clip_s=cfg.clip_s,
            people=list(kinds),
            rng=np.random.default_rng(0),
            n_boot=10,
        )

    end = {p.annotator_id: p for p in stats(answers).people}  # type: ignore[attr-defined]
    for aid, kind in sorted(kinds.items(), key=lambda x: x[1]):
        mine = sorted((a for a in answers if a.annotator_id == aid), key=lambda a: a.created_at)
        cut = mine[min(29, len(mine) - 1)].created_at
        at30 = {
            p.annotator_id: p for p in stats([a for a in answers if a.created_at <= cut]).people
        }  # type: ignore[attr-defined]
        e = end[aid]
        print(
            f"{kind:9s} answers {len(mine):3d}  flags at 30th {list(at30[aid].flags)}  at end "
            f"{list(e.flags)}  checks {e.gold_correct}/{e.gold_answered}  agrees {e.agreement:.2f}"
        )
    qs = sorted({a.query_id for a in answers if a.query_id not in gold})
    ri = {a: i for i, a in enumerate(sorted(kinds))}
    qi = {q: i for i, q in enumerate(qs)}
    votes = np.zeros((len(ri), len(qs)))
    for a in answers:
        if a.query_id in qi:
            votes[ri[a.annotator_id], qi[a.query_id]] = side(a.p)
    want = np.array([1 if truth[q] == 1.0 else -1 for q in qs])
    for name, lab in (("SML", sml(votes).labels), ("majority", majority(votes))):
        ok = lab != 0
        print(f"{name}: label error {np.mean(lab[ok] != want[ok]):.3f} over {int(ok.sum())} pairs")
    careful = [
        np.mean(
            [
                side(a.p) != (1 if truth[a.query_id] == 1.0 else -1)
                for a in answers
                if a.annotator_id == aid
            ]
        )
        for aid, k in kinds.items()
        if k == "careful"
    ]
    print(f"mean careful person's error {np.mean(careful):.3f}")
    full = crowd_stats(
        answers,
        gold=gold,
        config=cfg,
        clip_s=cfg.clip_s,
        people=list(kinds),
        rng=np.random.default_rng(0),
        n_boot=500,
    )
    print(
        f"Krippendorff's alpha {full.alpha:.3f} [{full.alpha_low:.3f}, {full.alpha_high:.3f}] over {full.alpha_units} pairs"
    )
    ms = np.array(lat) * 1000
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"requests {len(ms)}: p50 {np.percentile(ms, 50):.0f} ms, p95 {np.percentile(ms, 95):.0f} ms; "
        f"max RSS {rss:.0f} MB (studio and people in one process)"
    )
    st.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/study-sim"))
