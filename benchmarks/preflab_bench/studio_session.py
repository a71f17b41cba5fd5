"""A person teaches the agent through the studio (issue #25, "Measure and report").

A scripted person in headless Chromium drives the README's command
``preflab train --env-id Hopper-v5 --algo ppo --studio`` (a subprocess, unpaused) from the owner
link it prints to the end of the run: watches each pair until both clips have played once,
thinks 1.5–4 s, skips 5% and undoes 3% of answers, answers by the env's true return of the two
segments (read from the run's store by the query id on screen; the page never gets rewards)
with a 5% error rate, and rates one episode per round when the Rate view offers one
(:mod:`preflab_bench._studio_person`). ``--prefer backwards`` judges by a target the env's
reward does not hold instead (negative x velocity). ``--view groups`` answers in the Groups view
(:mod:`preflab_bench._studio_groups_person`); ``--view rank`` ranks ``--rank-size`` clips in the
Rank view, the trainer started with ``--selector ranking`` (:mod:`preflab_bench._studio_rank_person`).

Then the same config with the synthetic oracle (``--source teacher``) at the labels the studio
run collected, same seed and budgets (``--no-oracle`` leaves it out).

Usage::

    preflab bench studio_session [--env-id Hopper-v5] [--labels 40] [--total-steps 12000]
        [--max-minutes 12] [--seeds 0] [--prefer true|backwards] [--out PATH] [--runs PATH]

Writes benchmarks/results/studio_session.md and appends one row per run (with the command) to
benchmarks/results/studio_session_runs.jsonl.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import shlex
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import IO, Any

import numpy as np

from preflab.rundir.reporting import append_jsonl
from preflab.store import FeedbackStore
from preflab.store.person_queue import pair_key
from preflab.store.rounds import TRAINER
from preflab_bench import _paths
from preflab_bench._report import RESULTS, command, write_report
from preflab_bench._studio_groups_person import GroupsPerson, analyse_groups
from preflab_bench._studio_person import (
    MONITOR,
    Person,
    PersonConfig,
    SessionLog,
    label_errors,
)
from preflab_bench._studio_rank_person import RankPerson, analyse_rank
from preflab_bench._studio_session_report import PLAN, _with_label_errors, report

LINK = re.compile(r"studio: (http://\S+/#token=\S+)")
TOKEN = re.compile(r"#token=\S+")


ARM = {"pairs": "studio", "groups": "groups", "rank": "rank"}
"""The arm (and run directory prefix) of each view."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = _paths.pythonpath(env)
    env.setdefault("MUJOCO_GL", "egl")
    env["OMP_NUM_THREADS"] = "1"
    return env


def _shown(cmd: list[str]) -> str:
    """A trainer command as a person types it (``preflab train ...``)."""
    i = cmd.index("preflab.cli.main")
    return "preflab " + shlex.join(cmd[i + 1 :])


class Trainer:
    """``preflab train ... --studio`` as a subprocess; its output goes to a log with the token
    blanked, and the owner link is kept in memory only."""

    def __init__(self, cmd: list[str], log: Path) -> None:
        self.cmd = cmd
        self.link: str | None = None
        self.t_link: float | None = None
        self.t0 = time.monotonic()
        self._log: IO[str] = log.open("w")
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=_env(),
            text=True,
            bufsize=1,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            m = LINK.search(line)
            if m and self.link is None:
                self.link = m.group(1)
                self.t_link = time.monotonic()
            self._log.write(TOKEN.sub("#token=…", line))
            self._log.flush()

    def wait_link(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while self.link is None:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the trainer exited ({self.proc.returncode}) before its link")
            if time.monotonic() > deadline:
                raise TimeoutError(f"no owner link after {timeout:.0f} s")
            time.sleep(0.2)
        return self.link

    def close(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            return self.proc.wait(timeout=60)
        finally:
            self._reader.join(timeout=10)
            self._log.close()


class RoundWatch:
    """Polls ``store.rounds.all()`` every 0.5 s: how long the trainer published status 'waiting'."""

    def __init__(self, store: FeedbackStore) -> None:
        self.store = store
        self.samples: list[tuple[float, str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                rounds = self.store.rounds.all()
            except Exception:  # the trainer holds the writer lock a moment: poll again
                rounds = None
            if rounds:
                self.samples.append((time.monotonic(), str(rounds[-1]["status"])))
            self._stop.wait(0.5)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def waiting_s(self, t0: float, t1: float) -> float:
        """Seconds between monotonic times t0 and t1 with status 'waiting'."""
        total = 0.0
        for (ta, status), (tb, _s) in zip(self.samples, self.samples[1:], strict=False):
            a, b = max(ta, t0), min(tb, t1)
            if status == "waiting" and b > a:
                total += b - a
        return total


def _intervals(
    monitor: list[dict[str, Any]], field: str, t_end: float
) -> list[tuple[float, float, Any]]:
    """(start, end, q) page-time intervals during which ``field`` was true."""
    out = []
    for k, ev in enumerate(monitor):
        if ev.get(field):
            end = monitor[k + 1]["t"] if k + 1 < len(monitor) else t_end
            out.append((float(ev["t"]), float(end), ev.get("q")))
    return out


def analyse(
    log: SessionLog, store: FeedbackStore, min_answer_s: float, prefer: str, env_id: str
) -> dict[str, Any]:
    """The person's side of a session from the page log and the store."""
    session_s = max(1e-9, (log.t_end - log.t_open) / 1000)
    mon = log.monitor
    first_q = next((ev["q"] for ev in mon if ev.get("q")), None)
    spins = _intervals(mon, "spin", log.t_end)
    spin_late = [s for s in spins if s[2] != first_q]
    empty_s = sum(b - a for a, b, _q in _intervals(mon, "empty", log.t_end)) / 1000
    # keys blocked beyond the clips' own playing time, per pair on screen
    seen: set[str] = set()
    blocked = 0.0
    for v in log.visits:
        if v["t_ready"] is None:
            continue
        need = min_answer_s if v["q"] in seen else max([min_answer_s, *v["durations"]])
        seen.add(v["q"])
        blocked += max(0.0, (v["t_ready"] - v["t_show"]) / 1000 - need)
    # after a key: until the next pair (or the empty state) is on screen
    transit = 0.0
    for a in [*log.answers, *log.skips]:
        after = [ev for ev in mon if ev["t"] >= a["t"] and ev.get("q") != a["q"]]
        if after:
            transit += min(5.0, (after[0]["t"] - a["t"]) / 1000)
    ui_wait = blocked + transit
    # what the store says
    human = [(s, j) for s, j in store.answers.judgements(include_retracted=True, source="human")]
    gone = store.answers.retracted_ids()
    collected_to = store.rounds.cursor(TRAINER)
    counted = [j for s, j in human if j.id not in gone and s <= collected_to]
    kept = [j for _s, j in human if j.id not in gone]
    queries = {q.id: q for q in store.queries.all()}
    keys = Counter(pair_key(queries[j.query_id]) for j in kept if j.query_id in queries)
    answered_twice = sum(1 for n in keys.values() if n > 1)
    allowed = Counter(
        pair_key(queries[x["q"]])
        for x in [*log.skips, *[u for u in log.undos if u["ok"]]]
        if x["q"] in queries
    )
    shows = Counter(pair_key(queries[v["q"]]) for v in log.visits if v["q"] in queries)
    shown_again = sum(max(0, n - 1 - allowed[k]) for k, n in shows.items())
    n_undone = sum(u["ok"] for u in log.undos)
    judged = {j.query_id for _s, j in human}
    undone_q = {u["q"] for u in log.undos if u["ok"]}
    lost = [a for a in log.answers if a["q"] not in judged and a["q"] not in undone_q]
    wrong, n_labels = label_errors(store, prefer, env_id, "pair")
    return {
        "view": "pairs",
        "answers_kept": n_labels,
        "label_errors": wrong,
        "label_error": wrong / max(1, n_labels),
        "session_s": session_s,
        "answers_given": len(log.answers),
        "skips": len(log.skips),
        "undos": len(log.undos),
        "undos_ok": n_undone,
        "mistakes": sum(a["mistake"] for a in log.answers),
        "answers_expected": len(log.answers) - n_undone,
        "answers_lost": len(lost),
        "lost_query_ids": sorted({a["q"] for a in lost})[:10],
        "judgements_stored": len(kept),
        "judgements_collected": len(counted),
        "labels_per_min": (len(log.answers) - n_undone) / (session_s / 60),
        "pairs_answered_twice": answered_twice,
        "pairs_shown_again": shown_again,
        "spinner_s": sum(b - a for a, b, _q in spins) / 1000,
        "spinner_after_first": len(spin_late),
        "spin_detail": [(q, round((b - a) / 1000, 3)) for a, b, q in spins][:20],
        "ui_wait_s": ui_wait,
        "ui_wait_share": ui_wait / session_s,
        "blocked_s": blocked,
        "transit_s": transit,
        "empty_s": empty_s,
        "ratings": len(log.ratings),
        "page_errors": log.errors[:5],
        "mean_visible_clip_s": float(
            np.mean([max(v["durations"]) for v in log.visits if v["durations"]] or [math.nan])
        ),
    }


def run_session(args: argparse.Namespace, seed: int, root: Path) -> dict[str, Any]:
    run_dir = root / f"{ARM[args.view]}-s{seed}"
    port = _free_port()
    cmd = [
        sys.executable,
        "-m",
        "preflab.cli.main",
        "train",
        "--env-id",
        args.env_id,
        "--algo",
        "ppo",
        "--studio",
        "--run-dir",
        str(run_dir),
        "--studio-port",
        str(port),
        "--seed",
        str(seed),
        "--total-labels",
        str(args.labels),
        "--total-steps",
        str(args.total_steps),
        "--steps-per-round",
        str(args.steps_per_round),
        "--max-minutes",
        str(args.max_minutes),
        "--eval-episodes",
        str(args.eval_episodes),
        *(["--segment-length", str(args.segment_length)] if args.segment_length else []),
        *(["--initial-steps", str(args.initial_steps)] if args.initial_steps else []),
        *(["--n-envs", str(args.n_envs)] if args.n_envs else []),
        *(["--steps-per-label", str(args.steps_per_label)] if args.steps_per_label else []),
        *(
            ["--selector", "ranking", "--rank-size", str(args.rank_size)]
            if args.view == "rank"
            else []
        ),
        *shlex.split(args.train_args),
    ]
    from playwright import sync_api as playwright_sync

    from preflab.testing.browser import launch_chromium

    trainer = Trainer(cmd, root / f"trainer-s{seed}.log")
    store: FeedbackStore | None = None
    watch: RoundWatch | None = None
    pw = playwright_sync.sync_playwright().start()
    browser = None
    try:
        link = trainer.wait_link(600)
        store = FeedbackStore(run_dir / "feedback.db", array_dir=run_dir / "segments")
        watch = RoundWatch(store)
        browser = launch_chromium(pw)
        ctx = browser.new_context(viewport={"width": 1280, "height": 800})
        ctx.add_init_script(MONITOR)
        page = ctx.new_page()
        page.set_default_timeout(60_000)
        limit = time.monotonic() + 60 * (args.max_minutes + 2)
        last = [0.0, False]

        def done() -> bool:
            now = time.monotonic()
            if now - last[0] < 1.0:
                return bool(last[1])
            last[0] = now
            assert store is not None
            kept = len(store.answers.judgements(source="human"))
            last[1] = trainer.proc.poll() is not None or now > limit or kept >= args.labels
            return bool(last[1])

        groups = args.view == "groups"
        plain = args.view == "pairs"
        person = (GroupsPerson if groups else RankPerson if args.view == "rank" else Person)(
            page,
            store,
            env_id=args.env_id,
            config=PersonConfig(
                skip_p=args.skip if plain else 0.0,
                undo_p=0.0 if groups else args.undo,
                error_p=args.error,
                prefer=args.prefer,
                rate=args.rate and plain,
            ),
            rng=np.random.default_rng(seed),
            done=done,
            **({"link": link} if groups else {}),
        )
        t_open = time.monotonic()
        log = person.run(link)
        t_end = time.monotonic()
        ctx.close()
        rc = trainer.close(timeout=60 * (args.max_minutes + 20))
        watch.stop()
        if groups:
            row = analyse_groups(log, store, args.prefer, args.env_id) | {"view": "groups"}
        elif args.view == "rank":
            row = analyse_rank(log, store, args.prefer, args.env_id) | {"rank_size": args.rank_size}
        else:
            row = analyse(log, store, 1.0, args.prefer, args.env_id)
        row["trainer_wait_s"] = watch.waiting_s(t_open, t_end)
        row["trainer_wait_share"] = row["trainer_wait_s"] / max(1e-9, t_end - t_open)
        row["link_after_s"] = (trainer.t_link or t_open) - trainer.t0
        row["trainer_rc"] = rc
        summary_path = run_dir / "summary.json"
        summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
        row |= {
            "arm": ARM[args.view],
            "prefer": args.prefer,
            "seed": seed,
            "trainer_command": _shown(cmd),
            "ended_by": summary.get("ended_by"),
            "true_return": summary.get("true_return"),
            "n_labels": summary.get("n_labels"),
            "n_judgements": summary.get("n_judgements"),
            "env_steps": summary.get("env_steps"),
            "wall_s": summary.get("wall_s"),
            "run_dir": str(run_dir),
            "undo_detail": log.undos,
            "rating_detail": log.ratings,
        }
        return row
    finally:
        if browser is not None:
            browser.close()
        pw.stop()
        if watch is not None:
            watch.stop()
        if trainer.proc.poll() is None:
            trainer.proc.terminate()
            trainer.close(timeout=60)
        if store is not None:
            store.close()


def run_oracle(
    args: argparse.Namespace, seed: int, root: Path, labels: int, *, name: str = "oracle"
) -> dict[str, Any]:
    """The studio run's whole config (its --studio defaults included, e.g. MuJoCo's fixed
    horizon) with the synthetic oracle as the source, at ``labels`` labels; run directory
    ``root/NAME-sSEED``."""
    from preflab.config import TrainConfig
    from preflab.config.file import config_to_toml

    studio_cfg = TrainConfig.load(root / f"studio-s{seed}" / "config.json")
    oracle_cfg = dataclasses.replace(
        studio_cfg, source="teacher", total_labels=labels, store_url="", task=""
    )
    toml_path = root / f"{name}-s{seed}.toml"
    toml_path.write_text(config_to_toml(oracle_cfg))
    run_dir = root / f"{name}-s{seed}"
    cmd = [sys.executable, "-m", "preflab.cli.main", "train", "--config", str(toml_path)]
    cmd += [*shlex.split(args.train_args), "--run-dir", str(run_dir)]
    with (root / f"{name}-s{seed}.log").open("w") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=_env()).returncode
    summary_path = run_dir / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    return {
        "arm": "oracle",
        "seed": seed,
        "trainer_command": _shown(cmd),
        "trainer_rc": rc,
        "true_return": summary.get("true_return"),
        "n_labels": summary.get("n_labels"),
        "env_steps": summary.get("env_steps"),
        "wall_s": summary.get("wall_s"),
        "ended_by": summary.get("ended_by"),
        "run_dir": str(run_dir),
    }


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="preflab bench studio_session", description=__doc__)
    p.add_argument("--env-id", default="Hopper-v5")
    p.add_argument("--labels", type=int, default=40)
    p.add_argument("--total-steps", type=int, default=12_000)
    p.add_argument("--steps-per-round", type=int, default=2048)
    p.add_argument("--segment-length", type=int, default=0, help="0: the --studio default")
    p.add_argument("--initial-steps", type=int, default=0, help="0: the --studio default")
    p.add_argument("--n-envs", type=int, default=0, help="0: the --studio default")
    p.add_argument(
        "--steps-per-label",
        type=int,
        default=0,
        help="0: the trainer's default; larger keeps the trainer from asking 'extra' queries",
    )
    p.add_argument(
        "--train-args",
        default="",
        help="more `preflab train` flags for both arms, e.g. '--termination.fixed-horizon'",
    )
    p.add_argument("--max-minutes", type=float, default=12.0)
    p.add_argument("--eval-episodes", type=int, default=5)
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--skip", type=float, default=0.05)
    p.add_argument("--undo", type=float, default=0.03)
    p.add_argument("--error", type=float, default=0.05)
    p.add_argument("--prefer", choices=["true", "backwards"], default="true")
    p.add_argument(
        "--view",
        choices=["pairs", "groups", "rank"],
        default="pairs",
        help="the person answers in the Compare view (pairs), the Groups view, or the Rank view "
        "(the trainer asks rankings: --selector ranking --rank-size K)",
    )
    p.add_argument("--rank-size", type=int, default=4, help="clips per ranking (--view rank)")
    p.add_argument("--rate", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--oracle", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--run-root", default="", help="where the runs go (default: a temp dir)")
    p.add_argument("--out", default=str(RESULTS / "studio_session.md"))
    p.add_argument("--runs", default=str(RESULTS / "studio_session_runs.jsonl"))
    p.add_argument(
        "--looks",
        type=int,
        default=1,
        help="looks the plan has taken at the return target (its interval is corrected for them)",
    )
    p.add_argument(
        "--oracle-only",
        default="",
        metavar="NAME",
        help="run only the oracle arm, beside the sessions in --run-root, into NAME-sSEED",
    )
    p.add_argument(
        "--report",
        default="",
        metavar="TEXT",
        help="run nothing: rebuild --out from the --runs rows whose command contains TEXT "
        "(e.g. the --run-root of a plan entry's invocations)",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse(argv)
    root = Path(args.run_root or tempfile.mkdtemp(prefix="studio-session-"))
    root.mkdir(parents=True, exist_ok=True)
    cmd = command(__name__, argv)
    rows: list[dict[str, Any]] = []
    if args.oracle_only:  # the oracle arm again, next to sessions already run in --run-root
        for seed in args.seeds:
            done = json.loads((root / f"studio-s{seed}" / "summary.json").read_text())
            o = run_oracle(args, seed, root, int(done["n_labels"]), name=args.oracle_only)
            append_jsonl(Path(args.runs), {"command": cmd, "plan": PLAN, **o}, default=float)
        return 0
    if args.report:
        with Path(args.runs).open() as f:
            logged = [json.loads(line) for line in f if line.strip()]
        picked = [r for r in logged if args.report in r.get("command", "")]
        if not picked:
            raise SystemExit(f"no row of {args.runs} has {args.report!r} in its command")
        last = {(r["arm"], r["seed"]): r for r in picked}  # a rerun arm replaces the earlier
        rows = [_with_label_errors(r) for r in last.values()]
        args.seeds = sorted({int(r["seed"]) for r in rows})
        write_report(report(args, argv, rows), Path(args.out))
        return 0
    for seed in args.seeds:
        row = run_session(args, seed, root)
        rows.append(row)
        append_jsonl(Path(args.runs), {"command": cmd, "plan": PLAN, **row}, default=float)
        if args.prefer == "backwards" and row.get("env_steps"):
            from preflab_bench._studio_target import direct_arms

            config = json.loads((Path(row["run_dir"]) / "config.json").read_text())
            d = direct_arms(
                Path(row["run_dir"]),
                seed=seed,
                steps=int(row["env_steps"]),
                n_envs=int(config["n_envs"]),
                episodes=args.eval_episodes,
            )
            o = {"arm": "direct", "seed": seed, **d}
            rows.append(o)
            append_jsonl(Path(args.runs), {"command": cmd, "plan": PLAN, **o}, default=float)
        elif args.oracle and row.get("n_labels") and args.view == "pairs":
            o = run_oracle(args, seed, root, int(row["n_labels"]))
            rows.append(o)
            append_jsonl(Path(args.runs), {"command": cmd, "plan": PLAN, **o}, default=float)
    write_report(report(args, argv, rows), Path(args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
