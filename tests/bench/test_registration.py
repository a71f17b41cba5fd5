"""Was a plan entry committed before its runs? (preflab_bench._registration, and the wording
``preflab bench restate`` prints from it.) Two small plans, one registered before its rows and
one after them, by the dates alone and by a real git history."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
from pathlib import Path

import pytest

from preflab_bench._plan import parse_plan
from preflab_bench._registration import (
    load_starts,
    named_codes,
    registration,
    row_start,
)
from tests.bench.test_plan import entry

ROWS = [
    {"env": "A-v0", "seed": s, "kind": k, "ret": 1.0 + s, "wall_s": 600.0, "tag": "t"}
    for s in (10, 11, 12)
    for k in ("p", "b")
]
"""Six runs of two arms; with a ``time`` each (added per test)."""


def _timed(day: str) -> list[dict[str, object]]:
    return [{**r, "time": f"{day} 12:{10 + i:02d} UTC"} for i, r in enumerate(ROWS)]


def _invoked(day: str) -> list[dict[str, object]]:
    """The rows of :func:`_timed` with the start of the process that made each run."""
    return [
        {**r, "invocation": f"{day.replace('-', '')}T1200{i:02d}-7"}
        for i, r in enumerate(_timed(day))
    ]


def test_an_entry_committed_the_day_before_its_rows_is_pre_registered(tmp_path: Path) -> None:
    plan = parse_plan(entry("before", committed="2026-12-01"))
    reg = registration(
        plan.entry("before"), _invoked("2026-12-02"), plan_file=tmp_path / "p", history=False
    )
    assert reg.status == "pre-registered"
    assert reg.wording().startswith("pre-registered (committed 2026-12-01, before its first run)")


def test_a_rows_end_less_its_wall_does_not_show_when_its_run_began(tmp_path: Path) -> None:
    """A resumed run's ``wall_s`` leaves out the time between its invocations: a row written on
    the day after the entry, whose wall time starts it after the entry too, may come from a run
    begun before the entry. Its recorded start (``invocation``, a queue start record) decides:
    after the entry, pre-registered; before it, recorded after its runs."""
    plan = parse_plan(entry("e", committed="2026-12-01"))
    rows = _timed("2026-12-02")  # each ended 12:10-12:15 with 600 s of wall: "began 12:00"
    reg = registration(plan.entry("e"), rows, plan_file=tmp_path / "p", history=False)
    assert reg.status == "undetermined", reg
    assert "no recorded start" in reg.evidence
    commands = [{**r, "command": f"preflab bench x --seeds {i}"} for i, r in enumerate(rows)]
    late = {str(r["command"]): dt.datetime(2026, 12, 2, 9, tzinfo=dt.UTC) for r in commands}
    reg = registration(
        plan.entry("e"), commands, plan_file=tmp_path / "p", history=False, starts=late
    )
    assert reg.status == "pre-registered" and "queue start records" in reg.evidence
    early = {**late, str(commands[3]["command"]): dt.datetime(2026, 11, 30, 23, tzinfo=dt.UTC)}
    reg = registration(
        plan.entry("e"), commands, plan_file=tmp_path / "p", history=False, starts=early
    )
    assert reg.status == "after" and "2026-11-30 23:00 UTC" in reg.evidence, reg
    del late[str(commands[0]["command"])]  # one run without a record: not on record
    reg = registration(
        plan.entry("e"), commands, plan_file=tmp_path / "p", history=False, starts=late
    )
    assert reg.status == "undetermined", reg


def test_start_records_give_each_commands_earliest_start_and_refuse_a_bad_line(
    tmp_path: Path,
) -> None:
    f = tmp_path / "queue_starts.jsonl"
    assert load_starts(f) == {}  # no file yet
    recs = [
        {"command": "a", "started": "2026-12-06T21:56:15+00:00"},
        {"command": "b", "started": "2026-12-06T20:00:00+01:00"},
        {"command": "a", "started": "2026-12-06T20:43:00+00:00"},
    ]
    f.write_text("".join(json.dumps(r) + "\n" for r in recs) + "\n")
    got = {k: f"{v:%H:%M:%S}" for k, v in load_starts(f).items()}
    assert got == {"a": "20:43:00", "b": "19:00:00"}  # the earliest; zones to UTC
    f.write_text(f.read_text() + '{"command": "c", "started": "yesterday"}\n')
    with pytest.raises(ValueError, match="line 5: expected a JSON start record"):
        load_starts(f)


def test_an_entry_committed_after_its_rows_is_exploratory(tmp_path: Path) -> None:
    plan = parse_plan(entry("after", committed="2026-12-05"))
    reg = registration(
        plan.entry("after"), _timed("2026-12-02"), plan_file=tmp_path / "p", history=False
    )
    assert reg.status == "after"
    assert reg.wording().startswith("recorded after its runs: exploratory (committed 2026-12-05")
    # written in the minute 12:10, less the run's 600 s: it began by 12:01
    assert "2026-12-02 12:01 UTC" in reg.wording()


def test_the_same_day_without_history_is_not_on_record(tmp_path: Path) -> None:
    plan = parse_plan(entry("same", committed="2026-12-02"))
    reg = registration(
        plan.entry("same"), _timed("2026-12-02"), plan_file=tmp_path / "p", history=False
    )
    assert reg.status == "undetermined" and reg.wording().endswith(": exploratory")


def test_row_start_bounds() -> None:
    lo, hi = row_start({"time": "2026-12-02 12:10 UTC", "wall_s": 60.0})
    assert lo is None and f"{hi:%H:%M:%S}" == "12:10:00"  # written by 12:10:59, less 60 s
    t = dt.datetime(2026, 12, 2, 11, 0, tzinfo=dt.UTC)
    assert row_start({"time": "2026-12-02 12:10 UTC", "wall_s": 60.0}, t) == (t, t)
    lo, hi = row_start({"invocation": "20261128T145410-77"})
    assert lo == hi and f"{lo:%Y-%m-%d %H:%M:%S}" == "2026-11-28 14:54:10"
    assert row_start({"time": "2026-12-02 12:10 UTC"})[0] is None  # no wall: no earliest start
    assert row_start({"seed": 1}) == (None, None)


def test_a_frozen_commit_an_entry_names_is_found() -> None:
    plan = parse_plan(
        entry("n", budget='{ note = "run from the frozen commit 638235b: preflab bench x" }')
        + entry("m", eval_seeds="[20]", note='"its frozen code (642f7e6) did not implement it"')
    )
    assert named_codes(plan.entry("n")) == ["638235b"]
    assert named_codes(plan.entry("m")) == ["642f7e6"]


def _git(repo: Path, *args: str, when: str) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_DATE": when,
        "GIT_COMMITTER_DATE": when,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
    }
    subprocess.run(["git", "-C", str(repo), *args], check=True, env=env, capture_output=True)


def _commit(repo: Path, files: dict[str, str], when: str) -> None:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    _git(repo, "add", *files, when=when)
    _git(repo, "commit", "-q", "-m", f"at {when}", when=when)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    _git(tmp_path, "init", "-q", when="2026-12-01T00:00:00Z")
    return tmp_path


def _log(rows: list[dict[str, object]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def test_history_orders_an_entry_and_rows_of_one_day(repo: Path) -> None:
    """The rows carry no time; the commits order them: rows first added before the entry (and
    rewritten later to name it) make it exploratory; a queue job's frozen code that holds an
    entry makes its later rows pre-registered."""
    plan_text = entry("late", committed="2026-12-02")
    _commit(repo, {"runs.jsonl": _log(ROWS)}, "2026-12-02T09:00:00Z")
    _commit(repo, {"plan.toml": plan_text}, "2026-12-02T10:00:00Z")
    renamed = [{**r, "plan": "late", "command": "x"} for r in ROWS]
    _commit(repo, {"runs.jsonl": _log(renamed)}, "2026-12-02T11:00:00Z")
    plan = parse_plan(plan_text)
    reg = registration(
        plan.entry("late"), renamed, plan_file=repo / "plan.toml", logs=[repo / "runs.jsonl"]
    )
    assert reg.status == "after", reg
    assert "08:50 UTC" in reg.evidence and "first added its row" in reg.evidence

    both = plan_text + entry("early", committed="2026-12-02", eval_seeds="[20]")
    _commit(repo, {"plan.toml": both}, "2026-12-02T12:00:00Z")
    code = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    queue = f'[[job]]\nplan = "early"\ncode = "{code}"\nlog = "runs.jsonl"\n'
    new = [{**r, "seed": 20, "plan": "early"} for r in ROWS[:2]]
    _commit(repo, {"queue.toml": queue, "runs.jsonl": _log(renamed + new)}, "2026-12-02T13:00Z")
    reg = registration(
        parse_plan(both).entry("early"),
        new,
        plan_file=repo / "plan.toml",
        logs=[repo / "runs.jsonl"],
        queue=repo / "queue.toml",
    )
    assert reg.status == "pre-registered", reg
    assert reg.wording().startswith("pre-registered (committed 2026-12-02 12:00 UTC, before")
    assert f"frozen code {code[:7]}" in reg.wording()


def test_restate_words_the_registration_from_the_plan(tmp_path: Path) -> None:
    """``preflab bench restate``'s section says what the entry's record says, not a fixed
    'not pre-registered'."""
    from preflab_bench.restate import Restatement, registered_before, restate, section

    spec = Restatement(
        plan_id="e",
        runs=tmp_path / "runs.jsonl",
        report=tmp_path / "r.md",
        tag="t",
        arms={"ours": {"kind": "p"}, "base": {"kind": "b"}},
        score="ret",
        original_variant="v",
    )
    text = entry("e", env='"A-v0"', arms='["ours", "base"]', committed="2026-12-01")
    plan = parse_plan(text)
    texts = {}
    for name, day in (("before", "2026-12-02"), ("after", "2026-11-30")):
        rows = _invoked(day) if name == "before" else _timed(day)
        reg = registered_before(spec, plan, rows, tmp_path / "plan.toml", spec.runs, history=False)
        results = restate(spec, plan, rows, original={}, reps=50, check_seeds=0)
        texts[name] = section(
            spec,
            plan,
            results,
            rows,
            command="c",
            confidence=0.95,
            reps=50,
            seed=0,
            check_seeds=0,
            rliable_version="x",
            registered=reg,
        )
    assert "`e` is **pre-registered (committed 2026-12-01, before its first run)" in texts["before"]
    assert "`e` is **recorded after its runs: exploratory" in texts["after"]
    for t in texts.values():
        assert "not pre-registered" not in t and "before the protocol existed" not in t
