"""A crowd study on a real run (issue #61, "Measure and report").

The README's ``preflab train --env-id Hopper-v5 --algo ppo --studio`` runs as a subprocess, paced
by people; once its studio is up, ``preflab studio study RUN_DIR`` creates the study (k = 3
overlap, 10 % attention checks, a quota of answers, practice pairs, a completion code). Twelve
scripted people (:mod:`preflab_bench._crowd_people`) join through the study link with Prolific
ids, accept the consent, do the practice and label at a person's pace: 8 careful (a
Bradley–Terry person on the true return difference erring on 5–15 % of pairs), 2 careless
(random, fast), 1 adversary (flips), 1 who leaves after half their quota and comes back with
the same id in a new browser. Four of them use headless Chromium at the same time; the others
make the page's HTTP calls.

Then the same config with the synthetic oracle (``--source teacher``) at the labels the crowd
run fitted, same seed (:func:`preflab_bench.studio_session.run_oracle`).

Reports: who was flagged at their 30th answer and at the end; the crowd's label error (SML and
majority) against the oracle next to the mean careful person's; Krippendorff's α with its
interval; the returns; answers stored once; the leaver's identity; p95 latency of the API
people's requests; the studio (trainer) process's peak memory; the payments table.

Usage::

    preflab bench crowd_study [--env-id Hopper-v5] [--quota 30] [--total-steps 12000]
        [--max-minutes 12] [--seed 0] [--out PATH] [--runs PATH]

Writes benchmarks/results/crowd_study.md and appends one row (with the command) to
benchmarks/results/crowd_study_runs.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from preflab.aggregate import majority, sml
from preflab.errors import DataError
from preflab.rundir.reporting import append_jsonl
from preflab.store import FeedbackStore
from preflab.studio.study_quality import Answer, crowd_stats, side
from preflab.studio.study_report import answers_of, payments, report
from preflab_bench._crowd_people import (
    BROWSER,
    KINDS,
    ApiPerson,
    Behaviour,
    BrowserPerson,
    PersonLog,
    Truth,
)
from preflab_bench._report import RESULTS, command, header, write_report
from preflab_bench.studio_session import Trainer, _env, _free_port, _shown, run_oracle

CODE = "CRWD2026"
"""The completion code the study shows."""


def peak_rss_mb(pid: int) -> float:
    """VmHWM of a running process (MB), 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def flags_at(
    answers: list[Answer],
    gold: dict[str, float],
    config: Any,
    clip_s: float,
    people: list[str],
    who: str,
    n: int,
) -> tuple[str, ...]:
    """``who``'s flags computed on everyone's answers up to ``who``'s ``n``-th answer."""
    mine = sorted((a for a in answers if a.annotator_id == who), key=lambda a: a.created_at)
    if not mine:
        return ()
    cut = mine[min(n, len(mine)) - 1].created_at
    st = crowd_stats(
        [a for a in answers if a.created_at <= cut],
        gold=gold,
        config=config,
        clip_s=clip_s,
        people=people,
        rng=np.random.default_rng(0),
        n_boot=10,
    )
    return next(p.flags for p in st.people if p.annotator_id == who)


def _sml_labels(votes: np.ndarray) -> np.ndarray:
    """SML's labels, or none (zeros) when too few people share pairs for SML to weigh them:
    fewer than 3 people with answers, or no two sharing 2 pairs. ``sml`` refuses both with a
    DataError; the votes here are ±1 / 0 by construction, so that is the only DataError it
    can raise on them."""
    try:
        return np.asarray(sml(votes).labels)
    except DataError:
        return np.zeros(votes.shape[1])


def label_errors(
    answers: list[Answer], truth: dict[str, int], gold: set[str], people: list[str], k: int
) -> dict[str, Any]:
    """Label error against the oracle of SML and majority over the non-check pairs with at
    least ``k`` decisive answers, and each person's own error over their answers. With no such
    pair (too few answers yet) neither aggregate labels anything: ``pairs`` 0, their errors NaN
    and 0 labelled, as for SML on a crowd too small to weigh (the report shows NaN as –)."""
    count = Counter(a.query_id for a in answers if side(a.p) != 0)
    qs = sorted(q for q, n in count.items() if n >= k and q not in gold and truth.get(q))
    ri = {a: i for i, a in enumerate(people)}
    qi = {q: i for i, q in enumerate(qs)}
    votes = np.zeros((len(people), len(qs)))
    for a in answers:
        if a.query_id in qi:
            votes[ri[a.annotator_id], qi[a.query_id]] = side(a.p)
    votes = votes[np.any(votes != 0, axis=1)]  # people without such answers
    want = np.array([truth[q] for q in qs])
    out: dict[str, Any] = {"pairs": len(qs)}
    for name, lab in (
        ("sml", _sml_labels(votes) if qs else np.zeros(0)),
        ("majority", majority(votes) if qs else np.zeros(0)),  # it refuses a (0, 0) matrix
    ):
        ok = lab != 0
        out[f"{name}_error"] = float(np.mean(lab[ok] != want[ok])) if ok.any() else float("nan")
        out[f"{name}_labelled"] = int(ok.sum())
    own = {}
    for aid in people:
        mine = [
            a
            for a in answers
            if a.annotator_id == aid
            and truth.get(a.query_id)
            and a.query_id not in gold
            and side(a.p) != 0
        ]
        own[aid] = (
            float(np.mean([side(a.p) != truth[a.query_id] for a in mine])) if mine else float("nan")
        )
    out["person_error"] = own
    return out


def run_study(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    seed = args.seed
    run_dir = root / f"studio-s{seed}"
    port = _free_port()
    quota = args.quota
    cmd = [
        sys.executable, "-m", "preflab.cli.main", "train",
        "--env-id", args.env_id, "--algo", "ppo", "--studio",
        "--run-dir", str(run_dir), "--studio-port", str(port), "--seed", str(seed),
        "--total-labels", str(len(KINDS) * quota),
        "--total-steps", str(args.total_steps),
        "--steps-per-round", str(args.steps_per_round),
        "--max-minutes", str(args.max_minutes),
        "--eval-episodes", str(args.eval_episodes),
        "--aggregator", "sml",
        *(["--segment-length", str(args.segment_length)] if args.segment_length else []),
        *(["--n-envs", str(args.n_envs)] if args.n_envs else []),
        *(["--initial-steps", str(args.initial_steps)] if args.initial_steps else []),
    ]  # fmt: skip
    trainer = Trainer(cmd, root / f"trainer-s{seed}.log")
    store: FeedbackStore | None = None
    logs = [PersonLog(i, k) for i, k in enumerate(KINDS)]
    mem = [0.0]
    load: list[float] = []
    try:
        link = trainer.wait_link(600)
        base = link.split("/#token=")[0].rstrip("/")
        (root / "consent.md").write_text("You will compare short clips of a robot. Agree?\n")
        (root / "instructions.md").write_text("Pick the clip that hops forward better.\n")
        study_cmd = [
            sys.executable, "-m", "preflab.cli.main", "studio", "study", str(run_dir),
            "--title", "Which clip hops better?", "--cap", str(len(KINDS)),
            "--overlap", "3", "--gold-rate", "0.1", "--quota-answers", str(quota),
            "--practice-pairs", str(args.practice), "--completion-code", CODE,
            "--redirect-url", f"https://app.prolific.com/submissions/complete?cc={CODE}",
            "--consent", str(root / "consent.md"),
            "--instructions", str(root / "instructions.md"), "--url", base,
        ]  # fmt: skip
        made = subprocess.run(study_cmd, capture_output=True, text=True, env=_env())
        if made.returncode != 0:
            raise RuntimeError(f"preflab studio study failed: {made.stdout}{made.stderr}")
        secret = (run_dir / "study_link").read_text().strip().rsplit("/s/", 1)[-1]
        store = FeedbackStore(run_dir / "feedback.db", array_dir=run_dir / "segments")
        truth = Truth(store)
        over = threading.Event()

        def stop() -> bool:
            return over.is_set() or trainer.proc.poll() is not None

        def watch_mem() -> None:
            while not over.is_set() and trainer.proc.poll() is None:
                mem[0] = max(mem[0], peak_rss_mb(trainer.proc.pid))
                load.append(os.getloadavg()[0])
                over.wait(2.0)

        def person(i: int) -> None:
            kind = KINDS[i]
            cls = BrowserPerson if i in BROWSER else ApiPerson
            b = Behaviour.of(kind, 1000 * seed + i)
            try:
                if kind != "leaver":
                    cls(base, secret, i, b, truth, logs[i], stop).run(quota)
                    return
                cls(base, secret, i, b, truth, logs[i], stop).run(quota // 2)
                time.sleep(args.away_s)  # gone for a while, then back in a new browser
                cls(base, secret, i, b, truth, logs[i], stop).run(
                    quota - logs[i].answers, consent=False
                )
            except Exception as exc:  # a person's failure is reported, not fatal
                logs[i].errors.append(f"{type(exc).__name__}: {exc}"[:300])

        threads = [
            threading.Thread(target=person, args=(i,), daemon=True) for i in range(len(KINDS))
        ]
        threading.Thread(target=watch_mem, daemon=True).start()
        for th in threads:
            th.start()
            time.sleep(0.5)
        for th in threads:
            th.join(timeout=60 * (args.max_minutes + 5))
        over.set()
        rc = trainer.close(timeout=60 * (args.max_minutes + 10))
        row = analyse(args, store, run_dir, logs, mem[0], rc, _shown(cmd))
        return row | {"load_avg_1min": float(np.mean(load)) if load else None}
    finally:
        if trainer.proc.poll() is None:
            trainer.proc.terminate()
            trainer.close(timeout=60)
        if store is not None:
            store.close()


def analyse(
    args: argparse.Namespace,
    store: FeedbackStore,
    run_dir: Path,
    logs: list[PersonLog],
    rss_mb: float,
    rc: int,
    trainer_command: str,
) -> dict[str, Any]:
    rep = report(store, n_boot=500)
    assert rep is not None, "the run has no study"
    people = rep.participants
    kind_of = {p.annotator_id: KINDS[int(str(p.platform_pid)[5:])] for p in people}
    pid_of = {p.annotator_id: str(p.platform_pid) for p in people}
    ids = list(kind_of)
    answers, qs = answers_of(store, set(ids))
    gold = store.studies.gold()
    rets = store.studies.true_returns(sorted({s for q in qs.values() for s in (*q.a, *q.b)}))
    truth = {
        q.id: int(np.sign(rets[q.a[0]] - rets[q.b[0]])) for q in qs.values() if q.kind == "pair"
    }
    stored = [j for _s, j in store.answers.judgements(include_retracted=True, source="human")]
    keys = Counter((j.annotator_id, j.query_id) for j in stored)
    per: dict[str, dict[str, Any]] = {}
    stats = {p.annotator_id: p for p in rep.stats.people}
    for aid in ids:
        s = stats.get(aid)
        per[aid] = {
            "pid": pid_of[aid],
            "kind": kind_of[aid],
            "answers": s.answers if s else 0,
            "flags_at_30": list(
                flags_at(answers, gold, rep.config, rep.clip_s, ids, aid, args.flag_by)
            ),
            "flags_end": list(s.flags) if s else [],
            "gold": f"{s.gold_correct}/{s.gold_answered}" if s else "",
            "agreement": s.agreement if s else None,
            "median_rt": s.median_response_s if s else None,
        }
    err = label_errors(answers, truth, set(gold), ids, 3)
    for aid, e in err.pop("person_error").items():
        per[aid]["error"] = e
    careful = [per[a]["error"] for a in ids if kind_of[a] == "careful"]
    leaver = next(p for p in people if kind_of[p.annotator_id] == "leaver")
    leaver_log = logs[KINDS.index("leaver")]
    lat = np.array([x for lg in logs for x in lg.latencies_s]) * 1000
    ans = np.array([x for lg in logs for x in lg.answer_latencies_s]) * 1000
    summary_path = run_dir / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    return {
        "arm": "crowd",
        "seed": args.seed,
        "trainer_command": trainer_command,
        "trainer_rc": rc,
        "true_return": summary.get("true_return"),
        "n_labels": summary.get("n_labels"),
        "n_judgements": summary.get("n_judgements"),
        "env_steps": summary.get("env_steps"),
        "ended_by": summary.get("ended_by"),
        "people": per,
        "answers": len(stored),
        "stored_twice": sum(1 for n in keys.values() if n > 1),
        "refused": [r for lg in logs for r in lg.refused][:10],
        "person_errors": {lg.index: lg.errors[:3] for lg in logs if lg.errors},
        "given_by_people": sum(lg.answers for lg in logs),
        "leaver_same_identity": len(
            {p.annotator_id for p in people if p.platform_pid == leaver.platform_pid}
        )
        == 1
        and leaver_log.answers > args.quota // 2,
        "leaver_answers": leaver_log.answers,
        "completion_codes": {lg.index: lg.completion_code for lg in logs},
        "mean_careful_error": float(np.nanmean(careful)),
        **err,
        "alpha": rep.stats.alpha,
        "alpha_low": rep.stats.alpha_low,
        "alpha_high": rep.stats.alpha_high,
        "alpha_units": rep.stats.alpha_units,
        "requests": int(lat.size),
        "p50_ms": float(np.percentile(lat, 50)) if lat.size else None,
        "p95_ms": float(np.percentile(lat, 95)) if lat.size else None,
        "answer_p50_ms": float(np.percentile(ans, 50)) if ans.size else None,
        "answer_p95_ms": float(np.percentile(ans, 95)) if ans.size else None,
        "trainer_peak_rss_mb": rss_mb,
        "payments": payments(rep),
        "clip_s": rep.clip_s,
        "run_dir": str(run_dir),
    }


def _f(x: Any, fmt: str = ".3f") -> str:
    return "–" if x is None or (isinstance(x, float) and np.isnan(x)) else format(x, fmt)


def render(
    args: argparse.Namespace, argv: list[str], row: dict[str, Any], oracle: dict[str, Any] | None
) -> str:
    budgets = (
        f"{args.env_id}, {len(KINDS)} people × quota {args.quota} answers "
        f"(= --total-labels {len(KINDS) * args.quota}), {args.total_steps} env steps, "
        f"--max-minutes {args.max_minutes}, seed {args.seed}"
    )
    md = header(
        "Crowd study: 12 scripted people teach a Hopper run (issue #61)",
        "crowd_study",
        argv,
        budgets,
    )
    md += (
        "Exploratory: not a plan entry (no registered targets were checked against a frozen "
        "plan). The machine (2 cores) was shared with a benchmark queue and other work, so the "
        "latency numbers are an upper bound.\n\n"
    )
    people = row["people"]
    bad = [a for a, p in people.items() if p["kind"] in ("careless", "adversary")]
    good = [a for a, p in people.items() if p["kind"] == "careful"]
    caught = sum(bool(people[a]["flags_at_30"]) for a in bad)
    false = sum(bool(people[a]["flags_at_30"]) for a in good)
    false_end = sum(bool(people[a]["flags_end"]) for a in good)
    ret_o = oracle.get("true_return") if oracle else None
    md += "| measure | value | target |\n|---|---|---|\n"
    md += f"| careless + adversary flagged by their {args.flag_by}th answer | {caught} of {len(bad)} | 3 of 3 |\n"
    md += f"| careful people flagged by their {args.flag_by}th answer (at the end) | {false} of {len(good)} ({false_end}) | 0 |\n"
    md += (
        f"| crowd label error vs oracle: SML / majority ({row['pairs']} pairs with k ≥ 3) | "
        f"{_f(row['sml_error'])} / {_f(row['majority_error'])} | SML ≤ majority < careful |\n"
    )
    md += (
        f"| mean careful person's error | {_f(row['mean_careful_error'])} | 0.05–0.15 by design |\n"
    )
    md += (
        f"| Krippendorff's α [95 % bootstrap] | {_f(row['alpha'])} "
        f"[{_f(row['alpha_low'])}, {_f(row['alpha_high'])}] over {row['alpha_units']} pairs | – |\n"
    )
    md += (
        f"| true return: crowd run ({row['n_judgements']} answers, {row['n_labels']} labels) / "
        f"oracle at {row['n_labels']} labels | {_f(row['true_return'], '.1f')} / "
        f"{_f(ret_o, '.1f')} | – |\n"
    )
    md += f"| answers stored / given by people / stored twice | {row['answers']} / {row['given_by_people']} / {row['stored_twice']} | once each |\n"
    md += f"| the leaver resumed as the same participant ({row['leaver_answers']} answers) | {row['leaver_same_identity']} | yes |\n"
    md += (
        f"| API request latency p50 / p95, the 8 API people's requests ({row['requests']}) | "
        f"{_f(row['p50_ms'], '.0f')} / {_f(row['p95_ms'], '.0f')} ms | p95 < 200 ms |\n"
    )
    md += (
        f"| answer latency (POST /api/judgements) p50 / p95 | {_f(row.get('answer_p50_ms'), '.0f')} / "
        f"{_f(row.get('answer_p95_ms'), '.0f')} ms | p95 < 200 ms |\n"
    )
    md += f"| machine load (1-min load average, mean over the run; 2 cores) | {_f(row.get('load_avg_1min'), '.1f')} | – |\n"
    md += f"| peak memory of the trainer + studio process | {_f(row['trainer_peak_rss_mb'], '.0f')} MB | – |\n"
    md += f"| trainer ended by / exit status | {row['ended_by']} / {row['trainer_rc']} | – |\n\n"
    md += f"## People\n\n| pid | kind | answers | own error | checks | agreement | median s | flags at {args.flag_by} | flags at end | code shown |\n|---|---|---|---|---|---|---|---|---|---|\n"
    for _a, p in sorted(people.items(), key=lambda x: x[1]["pid"]):
        i = int(p["pid"][5:])
        code = row["completion_codes"].get(i, row["completion_codes"].get(str(i), ""))
        md += (
            f"| {p['pid']}{' (browser)' if i in BROWSER else ''} | {p['kind']} | {p['answers']} | "
            f"{_f(p.get('error'))} | {p['gold']} | {_f(p['agreement'], '.2f')} | {_f(p['median_rt'], '.1f')} | "
            f"{' '.join(p['flags_at_30']) or '–'} | {' '.join(p['flags_end']) or '–'} | {code or '–'} |\n"
        )
    md += "\n## Payments table (as the owner's export has it)\n\n"
    cols = [
        "PROLIFIC_PID",
        "minutes_on_task",
        "answers_counted",
        "completed",
        "completion_code_shown",
        "flags",
    ]
    md += "| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n"
    for r in sorted(row["payments"], key=lambda r: r["PROLIFIC_PID"]):
        md += "| " + " | ".join(str(r[c]) if str(r[c]) != "" else "–" for c in cols) + " |\n"
    md += f"\nTrainer: `{row['trainer_command']}`  \n"
    if oracle:
        md += f"Oracle: `{oracle['trainer_command']}` (exit {oracle['trainer_rc']})  \n"
    if row["refused"]:
        md += f"Refused answers (first 10): {row['refused']}  \n"
    if row["person_errors"]:
        md += f"Person failures: {row['person_errors']}  \n"
    return md


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="preflab bench crowd_study", description=__doc__)
    p.add_argument("--env-id", default="Hopper-v5")
    p.add_argument("--quota", type=int, default=36, help="answers per person (checks included)")
    p.add_argument("--total-steps", type=int, default=12_000)
    p.add_argument("--steps-per-round", type=int, default=2048)
    p.add_argument("--segment-length", type=int, default=0, help="0: the --studio default")
    p.add_argument("--initial-steps", type=int, default=0, help="0: the --studio default")
    p.add_argument("--n-envs", type=int, default=0, help="0: the --studio default")
    p.add_argument("--max-minutes", type=float, default=12.0)
    p.add_argument("--eval-episodes", type=int, default=5)
    p.add_argument("--practice", type=int, default=2, help="practice pairs")
    p.add_argument("--away-s", type=float, default=20.0, help="how long the leaver is gone")
    p.add_argument("--flag-by", type=int, default=30, help="flags are read at this answer")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--oracle", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--train-args", default="", help="more `preflab train` flags for the oracle arm")
    p.add_argument("--run-root", default="", help="where the runs go (default: a temp dir)")
    p.add_argument("--out", default=str(RESULTS / "crowd_study.md"))
    p.add_argument("--runs", default=str(RESULTS / "crowd_study_runs.jsonl"))
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse(argv)
    root = Path(args.run_root or tempfile.mkdtemp(prefix="crowd-study-"))
    root.mkdir(parents=True, exist_ok=True)
    cmd = command(__name__, argv)
    row = run_study(args, root)
    append_jsonl(Path(args.runs), {"command": cmd, **row}, default=float)
    oracle = None
    if args.oracle and row.get("n_labels"):
        oracle = run_oracle(args, args.seed, root, int(row["n_labels"]))
        append_jsonl(Path(args.runs), {"command": cmd, **oracle}, default=float)
    write_report(render(args, argv, row, oracle), Path(args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
