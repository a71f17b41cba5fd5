"""benchmarks/queue.toml against the plan it serves, and benchmarks/run_queue.py: every queued
command is one of its entry's planned runs and is done exactly when its row is in the run log;
two queue processes never take one run; a frozen commit is exported once."""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from preflab_bench._plan import load_plan

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("bench_queue", ROOT / "benchmarks" / "run_queue.py")
assert _spec and _spec.loader
queue = importlib.util.module_from_spec(_spec)
sys.modules["bench_queue"] = queue
_spec.loader.exec_module(queue)


def _flag(words: list[str], name: str) -> list[str]:
    """The values after ``--name`` up to the next flag."""
    i = words.index(name)
    rest = words[i + 1 :]
    end = next((k for k, w in enumerate(rest) if w.startswith("--")), len(rest))
    return rest[:end]


def _arms(words: list[str], bench: str, planned: list[str]) -> list[str]:
    """The arms a queued command runs, from the flag its bench names them with."""
    if "--arms" in words:
        tag = _flag(words, "--arm-tag") if "--arm-tag" in words else []
        # --arm-tag T logs every preference arm as ARM@T (benchmarks/preflab_bench/efficiency.py)
        return [
            a if a == "sac_true_reward" or not tag else f"{a}@{tag[0]}"
            for a in _flag(words, "--arms")
        ]
    if bench == "llm_fig7" and "--modes" in words:
        return _flag(words, "--modes")
    if bench == "mujoco" and "--baselines" in words:
        only = _flag(words, "--baselines") == ["only"]
        return ["ppo_true_reward"] if only else [f"preflab_{v}" for v in _flag(words, "--variants")]
    return planned


def test_every_queued_command_is_one_of_its_entrys_planned_runs() -> None:
    plan = load_plan(ROOT / "benchmarks" / "plan.toml")
    runs = queue.load_queue()
    assert runs and len({r.command for r in runs}) == len(runs)  # nothing queued twice
    for run in runs:
        words = shlex.split(run.command)
        entry = plan.entry(run.plan)
        assert words[:3] == ["preflab", "bench", entry.bench], run.command
        assert _flag(words, "--plan") == [run.plan], run.command
        seeds = [int(s) for s in _flag(words, "--seeds")]
        assert seeds and set(seeds) <= set(entry.eval_seeds), run.command
        arms = _arms(words, entry.bench, list(entry.arms))
        assert set(arms) <= set(entry.arms) - set(entry.reuse), run.command
        if "threads" in entry.budget:  # benches without --threads run one torch thread
            assert _flag(words, "--threads") == [str(entry.budget["threads"])], run.command
        assert run.log.is_relative_to(ROOT / "benchmarks" / "results"), run.command


def test_every_run_done_of_an_entry_still_queued_has_its_start_record() -> None:
    """A verdict needs the record to show its runs began after the entry
    (``preflab_bench._registration``), and a row's time less its wall time does not: a queued
    run's row is committed with its start record (``benchmarks/results/queue_starts.jsonl``).
    Entries whose runs are all done before the queue wrote records are left as they were read."""
    from preflab_bench._registration import STARTS, load_starts

    runs = queue.load_queue()
    starts = load_starts(queue.QUEUE.parent / STARTS)
    left = {r.plan for r in runs if not queue.done(r)}
    missing = [
        r.command for r in runs if r.plan in left and queue.done(r) and r.command not in starts
    ]
    assert not missing, (
        f"rows without a start record (commit queue_starts.jsonl with them): {missing[:3]}"
    )


def test_every_frozen_commit_is_in_the_history() -> None:
    for code in {r.code for r in queue.load_queue()}:
        assert re.fullmatch(r"[0-9a-f]{40}", code), code
        kind = subprocess.run(
            ["git", "-C", str(ROOT), "cat-file", "-t", code], capture_output=True, text=True
        )
        if kind.returncode and "Not a valid object" in kind.stderr + kind.stdout:
            # a shallow clone has no history to check against; a full one must hold it
            shallow = subprocess.run(
                ["git", "-C", str(ROOT), "rev-parse", "--is-shallow-repository"],
                capture_output=True,
                text=True,
            )
            assert shallow.stdout.strip() == "true", f"commit {code} is not in the history"
            continue
        assert kind.stdout.strip() == "commit", code


def test_a_command_is_done_exactly_when_its_row_is_in_the_run_log(tmp_path: Path) -> None:
    log = tmp_path / "runs.jsonl"
    run = queue.Run(plan="p", code="0" * 40, log=log, command="preflab bench x --seeds 1")
    assert not queue.done(run)  # no log yet
    rows = [{"command": "preflab bench x --seeds 10"}, {"command": run.command + " --more"}]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert not queue.done(run)  # only another command's rows
    log.write_text(log.read_text() + "\n" + json.dumps({"command": run.command}) + "\n")
    assert queue.done(run)


def test_the_grid_expands_in_order_with_the_last_key_fastest(tmp_path: Path) -> None:
    toml = tmp_path / "queue.toml"
    toml.write_text(
        '[[job]]\nplan = "p"\ncode = "c"\nlog = "l.jsonl"\n'
        'command = "preflab bench b --seeds {seed} --arms {arm}"\n'
        'grid = { seed = [1, 2], arm = ["a", "b"] }\n'
    )
    got = [r.command.split(" --seeds ")[1] for r in queue.load_queue(toml)]
    assert got == ["1 --arms a", "1 --arms b", "2 --arms a", "2 --arms b"]


def test_the_forecast_counts_done_runs_and_their_mean_wall_times_the_runs_left(
    tmp_path: Path,
) -> None:
    """Entry p: 4 runs, 2 done, one timed by one row (7,200 s) and one by two rows (1,800 s
    each, as a bench that logs a row per part of its run), so 1.5 h each and 3 run-hours for the
    2 left; entry q: nothing done, not timed."""
    log = tmp_path / "runs.jsonl"
    p = [queue.Run(plan="p", code="c", log=log, command=f"b --seeds {s}") for s in range(4)]
    q = [
        queue.Run(plan="q", code="c", log=tmp_path / "q.jsonl", command=f"b --seeds {s}")
        for s in range(2)
    ]
    rows = [
        {"command": "b --seeds 0", "wall_s": 7200.0},
        {"command": "b --seeds 1", "wall_s": 1800.0},
        {"command": "b --seeds 1", "wall_s": 1800.0},
        {"command": "b --seeds 9", "wall_s": 99999.0},  # another command's row
    ]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    lines = queue.forecast(p + q, workers=2).splitlines()
    assert lines[0] == (
        "p: 2 of 4 done; its 2 timed runs took 1.50 h of wall each on average, so about 3.0 "
        "run-hours are left"
    )
    assert lines[1] == "q: 0 of 2 done; no run timed yet"
    assert lines[2] == (
        "left in all: 4 runs; about 3.0 run-hours in the entries with a timed run, 1.5 h with "
        "--workers 2; not timed yet: q (2) runs"
    )


def test_the_grid_values_but_the_seed_mark_runs_of_like_length(tmp_path: Path) -> None:
    toml = tmp_path / "queue.toml"
    toml.write_text(
        '[[job]]\nplan = "p"\ncode = "c"\nlog = "l.jsonl"\n'
        'command = "preflab bench b --envs {env} --seeds {seed} --arms {arm}"\n'
        'grid = { env = ["H"], seed = [1, 2], arm = ["a", 3] }\n'
    )
    got = [r.like for r in queue.load_queue(toml)]
    assert got == [(("env", "H"), ("arm", "a")), (("env", "H"), ("arm", "3"))] * 2


def _timed(tmp_path: Path) -> tuple[list[Any], Path]:
    """Entry p: arm a's seed 0 took 2 h and seed 1 1 h; arm b's seed 0 4 h; four runs left."""
    log = tmp_path / "runs.jsonl"

    def run(seed: int, arm: str, plan: str = "p") -> Any:
        return queue.Run(
            plan=plan,
            code="c",
            log=log,
            command=f"{plan} --seeds {seed} --arms {arm}",
            like=(("arm", arm),),
        )

    runs = [run(s, a) for s in range(3) for a in ("a", "b", "c")] + [run(0, "a", "q")]
    runs.append(queue.Run(plan="r", code="c", log=tmp_path / "r.jsonl", command="r --seeds 0"))
    rows = [("p --seeds 0 --arms a", 7200), ("p --seeds 1 --arms a", 3600)]
    rows += [("p --seeds 0 --arms b", 14400), ("p --seeds 1 --arms b", None)]
    log.write_text("".join(json.dumps({"command": c, "wall_s": w}) + "\n" for c, w in rows))
    return runs, log


def test_a_runs_expected_time_is_its_arms_done_runs_else_its_entrys(tmp_path: Path) -> None:
    runs, _log = _timed(tmp_path)
    by = {r.command: r for r in runs}
    assert queue.expected_hours(by["p --seeds 2 --arms a"], runs) == pytest.approx(1.5)
    assert queue.expected_hours(by["p --seeds 2 --arms b"], runs) == pytest.approx(4.0)
    # arm c has no done run: the entry's timed runs, (2 + 1 + 4) / 3 h
    assert queue.expected_hours(by["p --seeds 2 --arms c"], runs) == pytest.approx(7 / 3)
    # a done run is not its own estimate: seed 0 of arm a from seed 1's hour
    assert queue.expected_hours(by["p --seeds 0 --arms a"], runs) == pytest.approx(1.0)
    # q has no timed run: p's runs of arm a in the same run log, (2 + 1) / 2 h
    assert queue.expected_hours(by["q --seeds 0 --arms a"], runs) == pytest.approx(1.5)
    elsewhere = queue.Run(plan="q", code="c", log=tmp_path / "other.jsonl", command="q --seeds 1")
    assert queue.expected_hours(elsewhere, runs) is None  # nothing timed in its log


def test_until_starts_only_runs_expected_to_end_before_it(tmp_path: Path) -> None:
    """With 3 h left, arm b (4 h x the margin 1.25) is skipped; arm a (1.5 h x 1.25) and arm c
    (2.33 h x 1.25 = 2.92 h) start, and q's arm a (1.5 h from p's, x 1.25). With 2 h left arm c
    is skipped too; with 1.5 h left everything is, but a run nothing can time (r, in a log of
    its own); without --until every run left is taken, in order."""
    runs, _log = _timed(tmp_path)
    now = dt.datetime.now(dt.UTC)

    def taken(hours_left: float | None) -> list[str]:
        until = None if hours_left is None else now + dt.timedelta(hours=hours_left)
        state = tmp_path / f"state-{hours_left}"
        q = queue.Queue(runs, argparse.Namespace(state_dir=state, until=until))
        got = []
        while (r := q.take()) is not None:
            got.append(r.command)
        return got

    c = ["p --seeds 0 --arms c", "p --seeds 1 --arms c"]
    q, r = "q --seeds 0 --arms a", "r --seeds 0"
    assert taken(3) == [*c, "p --seeds 2 --arms a", "p --seeds 2 --arms c", q, r]
    assert taken(2) == ["p --seeds 2 --arms a", q, r]
    assert taken(1.5) == [r]
    assert taken(None) == [
        *c,
        "p --seeds 2 --arms a",
        "p --seeds 2 --arms b",
        "p --seeds 2 --arms c",
        q,
        r,
    ]
    log = (tmp_path / "state-2" / "log").read_text()
    assert "skip (about 4.00 h, would end after --until" in log
    assert log.count("--arms b\n") == 1  # said once, though asked at every take


def test_until_counts_a_run_nothing_times_as_one_invocation(tmp_path: Path) -> None:
    """r has no timed run anywhere: with invocations of 55 minutes it starts only when one of
    them (x the margin 1.25, 68.75 min) ends before --until."""
    runs, _log = _timed(tmp_path)
    now = dt.datetime.now(dt.UTC)

    def takes_r(minutes_left: float) -> bool:
        until = now + dt.timedelta(minutes=minutes_left)
        state = tmp_path / f"state-{minutes_left}"
        q = queue.Queue(runs, argparse.Namespace(state_dir=state, until=until, minutes=55))
        got = []
        while (r := q.take()) is not None:
            got.append(r.command)
        return "r --seeds 0" in got

    assert takes_r(70) and not takes_r(60)
    assert (
        "skip (about 0.92 h, would end after --until" in (tmp_path / "state-60" / "log").read_text()
    )


def test_until_reads_a_utc_time_or_says_what_it_expects() -> None:
    now = dt.datetime(2026, 12, 7, 1, 30, tzinfo=dt.UTC)
    assert queue.parse_until("04:10", now) == dt.datetime(2026, 12, 7, 4, 10, tzinfo=dt.UTC)
    assert queue.parse_until("01:00", now) == dt.datetime(2026, 12, 8, 1, 0, tzinfo=dt.UTC)
    assert queue.parse_until("2026-12-07T03:00", now) == dt.datetime(
        2026, 12, 7, 3, 0, tzinfo=dt.UTC
    )
    with pytest.raises(SystemExit, match=r"--until '4pm': expected the UTC time .* as HH:MM"):
        queue.parse_until("4pm", now)


def test_a_broken_run_log_line_or_grid_is_named_not_a_traceback(tmp_path: Path) -> None:
    log = tmp_path / "runs.jsonl"
    log.write_text('{"command": "a"}\n{"command": "b", "ret\n')
    run = queue.Run(plan="p", code="0" * 40, log=log, command="c")
    with pytest.raises(SystemExit, match=r"runs.jsonl, line 2: not a JSON row"):
        queue.done(run)
    toml = tmp_path / "queue.toml"
    toml.write_text(
        '[[job]]\nplan = "p"\ncode = "c"\nlog = "l.jsonl"\n'
        'command = "preflab bench b --seeds {seed} --arms {arm}"\ngrid = { seed = [1] }\n'
    )
    with pytest.raises(SystemExit, match=r"job 1's command names \{arm\}; add it to its grid"):
        queue.load_queue(toml)


def test_workers_exporting_one_commit_at_once_share_one_copy(tmp_path: Path) -> None:
    code = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    got: list[Path] = []
    threads = [
        threading.Thread(target=lambda: got.append(queue.frozen_src(code, tmp_path)))
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [tmp_path / code / "src"] * 3
    assert (tmp_path / code / "src" / "preflab" / "__init__.py").is_file()
    assert [p.name for p in tmp_path.iterdir()] == [code]  # no half-made copy left


def test_a_claim_holds_while_its_process_lives_and_not_for_a_reused_pid(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        claim = queue._identity(proc.pid)
        assert queue._alive(claim)
        pid, *boot_start = claim.split()
        if boot_start:  # Linux: the same pid started at another time is another process
            boot, start = boot_start
            assert not queue._alive(f"{pid} {boot} {int(start) + 1}")
            assert not queue._alive(f"{pid} another-boot {start}")
    finally:
        proc.kill()
        proc.wait()
    assert not queue._alive(claim)


def test_a_run_claimed_by_a_live_queue_is_not_taken_by_another(tmp_path: Path) -> None:

    args = argparse.Namespace(state_dir=tmp_path)
    runs = [
        queue.Run(plan="p", code="c", log=tmp_path / "l.jsonl", command=f"x {k}") for k in (1, 2)
    ]
    first, second = queue.Queue(runs, args), queue.Queue(runs, args)
    assert first.take() == runs[0]
    assert second.take() == runs[1]  # runs[0] is the first queue's while it lives
    assert first.take() is None and second.take() is None
    first.claim_file(runs[0]).write_text("999999999")  # a claim whose process is gone
    assert queue.Queue(runs, args).take() == runs[0]


def test_a_drained_queue_starts_no_further_run_until_the_next_run(tmp_path: Path) -> None:
    args = argparse.Namespace(state_dir=tmp_path, workers=1)
    runs = [
        queue.Run(plan="p", code="c", log=tmp_path / "l.jsonl", command=f"x {k}") for k in (1, 2)
    ]
    q = queue.Queue(runs, args)
    assert q.take() == runs[0]
    queue.main(["drain", "--state-dir", str(tmp_path)])
    assert q.take() is None  # runs[1] stays queued
    made: list[object] = []
    q.make = lambda run, worker: made.append(run)  # type: ignore[method-assign]
    q.run()  # a new run clears the drain and makes what is left
    assert made == [runs[1]] and not (tmp_path / queue.DRAIN).exists()


def test_a_run_stopped_by_its_time_limit_goes_on_only_before_until_and_undrained(
    tmp_path: Path,
) -> None:
    """A run whose invocation hit ``--minutes`` continues in a next invocation only while the
    queue is not drained and ``--until`` has not passed, and no invocation runs past ``--until``
    (on 2026-12-07 two runs started their second invocation after both)."""
    now = dt.datetime.now(dt.UTC)

    def limits(until: dt.datetime | None, drain_after: int | None) -> tuple[list[float], str]:
        state = tmp_path / f"state-{len(list(tmp_path.iterdir()))}"
        args = argparse.Namespace(
            state_dir=state, starts=state / "s.jsonl", max_invocations=3, minutes=55, until=until
        )
        run = queue.Run(plan="p", code="c", log=state / "l.jsonl", command="x --seeds 1")
        q = queue.Queue([run], args)
        seen: list[float] = []

        def invoke(r: object, worker: int, minutes: float) -> int | None:
            seen.append(minutes)
            if q.until is not None:  # the invocation's minutes pass
                q.until -= dt.timedelta(minutes=minutes)
            if len(seen) == drain_after:
                queue.main(["drain", "--state-dir", str(state)])
            return None  # every invocation stopped by its time limit

        q.invoke = invoke  # type: ignore[method-assign]
        q.make(run, 1)
        return seen, (state / "log").read_text()

    seen, log = limits(None, None)
    assert seen == [55, 55, 55] and "left unfinished after 3 invocations" in log
    seen, log = limits(None, 1)  # drained during the first invocation
    assert seen == [55] and "left at its last checkpoint (drained)" in log
    seen, log = limits(now + dt.timedelta(minutes=80), None)  # 25 minutes left for the second
    assert seen[0] == 55 and 24 < seen[1] <= 25 and len(seen) == 2
    seen, log = limits(now - dt.timedelta(minutes=1), None)  # --until already passed
    assert seen == [] and "left at its last checkpoint (--until reached)" in log


def test_a_runs_first_invocation_records_its_start_and_a_resume_does_not(tmp_path: Path) -> None:
    """The start record is written before the first invocation (so it is the run's start, not
    its end less its wall time); a second queue run of the same command (a resume) keeps it."""
    from preflab_bench._registration import load_starts

    starts = tmp_path / "results" / "queue_starts.jsonl"
    args = argparse.Namespace(state_dir=tmp_path, starts=starts, max_invocations=2, minutes=55)
    run = queue.Run(plan="p", code="c" * 40, log=tmp_path / "l.jsonl", command="x --seeds 1")
    seen: list[dict[str, dt.datetime]] = []

    def invoke(r: object, worker: int, minutes: float) -> int | None:
        seen.append(load_starts(starts).copy())
        if len(seen) == 1:
            return None  # the time limit: the next queue run resumes it
        run.log.write_text(json.dumps({"command": run.command}) + "\n")
        return 0

    q = queue.Queue([run], args)
    q.invoke = invoke  # type: ignore[method-assign]
    q.make(run, 1)
    assert len(seen) == 2 and run.command in seen[0]  # recorded before invocation 1
    first = starts.read_text()
    run.log.unlink()
    q.make(run, 1)  # again, as after a session's end
    assert starts.read_text() == first  # one record, the first start
    (rec,) = [json.loads(line) for line in first.splitlines()]
    assert rec["plan"] == "p" and rec["code"] == "c" * 40 and rec["source"] == "queue"


def test_transcribe_takes_each_commands_first_start_from_a_queue_log(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.write_text(
        "2026-12-06T02:00:26Z 30 runs to make, 2 at a time\n"
        "2026-12-06T02:00:26Z w1 start x --seeds 1\n"
        "2026-12-06T02:55:29Z w1 invocation 1 time limit\n"
        "2026-12-06T03:00:00Z w2 start x --seeds 2\n"
        "2026-12-06T09:00:00Z w1 start x --seeds 1\n"  # a resume, later
    )
    starts = tmp_path / "results" / "queue_starts.jsonl"
    starts.parent.mkdir()
    starts.write_text(json.dumps({"command": "x --seeds 2", "started": "2026-12-06T02:59:00Z"}))
    starts.write_text(starts.read_text() + "\n")
    runs = [
        queue.Run(plan="p", code="c", log=tmp_path / "l.jsonl", command=f"x --seeds {k}")
        for k in (1, 2, 3)
    ]
    assert queue.transcribe(runs, log, starts) == 1  # seeds 2 had a record, 3 never started
    recs = [json.loads(line) for line in starts.read_text().splitlines()]
    assert recs[-1]["command"] == "x --seeds 1"
    assert recs[-1]["started"] == "2026-12-06T02:00:26+00:00"
    assert recs[-1]["source"].startswith(f"queue log {log}, transcribed ")
    assert queue.transcribe(runs, log, starts) == 0
    log.write_text(log.read_text() + "yesterday w1 start x --seeds 3\n")
    with pytest.raises(SystemExit, match="line 6: expected '<YYYY-MM-DDTHH:MM:SSZ> w<N> start"):
        queue.transcribe(runs, log, starts)


def test_the_frozen_code_of_every_run_left_reads_todays_plan(tmp_path: Path) -> None:
    """A queued run loads benchmarks/plan.toml with its own commit's parser: a key that commit
    does not know would stop every run left before it starts."""
    codes = sorted({r.code for r in queue.load_queue() if not queue.done(r)})
    for code in codes:
        src = queue.frozen_src(code, tmp_path)
        bench = src.parent / "benchmarks"  # commits since the benchmarks left src/preflab/bench
        new = (bench / "preflab_bench").is_dir()
        module = "preflab_bench._plan" if new else "preflab.bench._plan"
        read = subprocess.run(
            [sys.executable, "-c", f"from {module} import load_plan; load_plan()"],
            cwd=ROOT,
            env={"PYTHONPATH": os.pathsep.join([str(src), str(bench)]), "PATH": ""},
            capture_output=True,
            text=True,
        )
        assert read.returncode == 0, f"{code}: {read.stderr.strip().splitlines()[-1:]}"


def test_nothing_in_benchmarks_shadows_the_standard_library() -> None:
    """Bench subprocesses get ``benchmarks/`` on PYTHONPATH (``preflab_bench._paths``), ahead
    of the standard library: a ``benchmarks/queue.py`` made ``import queue`` load the bench
    queue in them."""
    import sys

    names = {p.stem for p in (ROOT / "benchmarks").iterdir() if p.suffix == ".py" or p.is_dir()}
    assert not names & set(sys.stdlib_module_names)
