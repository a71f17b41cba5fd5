"""Was a plan entry registered before its runs? (issue 63: only pre-registered entries give
verdicts.)

An entry of ``benchmarks/plan.toml`` records the date it was ``committed``; the repository's
history records the commit that first holds it. When a run began is recorded in three ways:

- ``invocation`` (``20261128T145410-pid``) in the row: the start of the process that made the
  run, taken before the run; only benches whose runs cannot resume write it (``pendulum``,
  ``overhead``), so it is the run's start;
- a start record in the queue's ``results/queue_starts.jsonl`` (:data:`STARTS`), written by
  ``benchmarks/run_queue.py`` before a command's first invocation: the run's start;
- a time field (``time``, ``date``, ``finished_at``), written with the row at the run's end,
  and ``wall_s``: the run began at the latest ``wall_s`` before it. Not at the earliest: a
  resumed run's ``wall_s`` leaves out the time between its invocations (and the work lost to
  the stop), and a bench writes its row after work its ``wall_s`` does not count (the final
  evaluation), so these fields bound the start from above only.

The history also records the commit that first added a row (the run began at the latest
``wall_s`` before it). The evidence, each one-sided:

- a run that began before the entry's commit (by its latest start, from its fields or the
  commit that first added its row) proves the entry was **recorded after its runs**;
- the frozen code of the entry's queue job (``code`` of its ``[[job]]`` in
  ``benchmarks/queue.toml``, read only; or a "frozen commit X" its note names) holding the entry
  in its plan proves the queued runs came after it (a run of a commit starts after the commit
  exists); so does a recorded start (``invocation`` or a start record) of every run after the
  entry's commit. Either makes the entry **pre-registered**;
- otherwise the order is not on record, and the entry counts as exploratory.

Without the history (no git, or a plan outside a repository) the dates decide: a run that began
on a later day than ``committed`` came after it, one that began on an earlier day before it. A
row's identity across rewrites (rows that got their ``command`` or ``plan`` later) is the row
without those fields, so a rewritten row still dates from the commit that first added its run.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import re
import subprocess
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from preflab_bench._plan import Experiment

Status = Literal["pre-registered", "after", "undetermined"]
"""Whether an entry was committed before its first run, after it, or the record cannot say."""

TIME_FIELDS = ("time", "date", "finished_at")
"""Row fields that say when the row was written (at its run's end)."""
LATER_FIELDS = frozenset({"command", "command_source", "plan"})
"""Fields some rows got after they were first written; a row's identity leaves them out."""
UTC = dt.UTC


@dataclass(frozen=True, kw_only=True)
class Registration:
    """When an entry was registered against when its runs ran."""

    entry: str
    """The plan id."""
    committed: dt.date
    """The entry's ``committed`` date."""
    registered_at: dt.datetime | None
    """Time of the first commit whose plan file holds the entry; None without the history."""
    rows: int
    """Run-log rows of the entry that were looked at."""
    status: Status
    """The verdict on the order (see the module docstring)."""
    evidence: str
    """What decided it, in words."""

    def wording(self) -> str:
        """The sentence a report prints about the entry's registration."""
        if self.status == "pre-registered":
            when = (
                f"{self.registered_at:%Y-%m-%d %H:%M} UTC"
                if self.registered_at is not None
                else str(self.committed)
            )
            return f"pre-registered (committed {when}, before its first run): {self.evidence}"
        if self.status == "after":
            return (
                f"recorded after its runs: exploratory (committed {self.committed}; "
                f"{self.evidence})"
            )
        return (
            f"committed {self.committed}; whether before its first run is not on record "
            f"({self.evidence}): exploratory"
        )


def _git(repo: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout


def repo_of(path: Path) -> Path | None:
    """The top of the git checkout holding ``path``, or None."""
    top = _git(path.resolve().parent, "rev-parse", "--show-toplevel")
    return Path(top.strip()) if top else None


def _parse_time(value: Any) -> tuple[dt.datetime, float] | None:
    """A time field's value and its resolution in seconds (60 when it has no seconds)."""
    if not isinstance(value, str):
        return None
    text = value.strip().removesuffix("UTC").strip()
    try:
        t = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    t = t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
    return t, (60.0 if re.fullmatch(r"[^:]*\d\d:\d\d", text) else 1.0)


def _wall(row: Mapping[str, Any]) -> float | None:
    """The row's ``wall_s`` when it is a positive number."""
    w = row.get("wall_s")
    return float(w) if isinstance(w, int | float) and not isinstance(w, bool) and w > 0 else None


def row_start(
    row: Mapping[str, Any], recorded: dt.datetime | None = None
) -> tuple[dt.datetime | None, dt.datetime | None]:
    """Bounds (earliest, latest) of when the row's run began; None where nothing bounds it.
    ``recorded`` (the run's start record, :func:`load_starts`) and ``invocation``
    (``20261128T145410[-pid]``) are the start itself; a time field (:data:`TIME_FIELDS`) is the
    row's writing at the run's end, so the run began at the latest ``wall_s`` before it (at the
    latest at the end without ``wall_s``) and at no known earliest time (the module docstring
    says why)."""
    if recorded is not None:
        return recorded, recorded
    inv = row.get("invocation")
    if isinstance(inv, str):
        try:
            t = dt.datetime.strptime(inv[:15], "%Y%m%dT%H%M%S").replace(tzinfo=UTC)
        except ValueError:
            pass
        else:
            return t, t
    for key in TIME_FIELDS:
        parsed = _parse_time(row.get(key))
        if parsed is not None:
            end, res = parsed
            return None, end + dt.timedelta(seconds=res - (_wall(row) or 0.0))
    return None, None


STARTS = Path("results") / "queue_starts.jsonl"
"""Start records, beside the queue file (``benchmarks/results/queue_starts.jsonl``): one JSON
row per queued command, written before its first invocation: ``plan``, ``code``,
``command``, ``started`` (ISO 8601 UTC) and ``source`` (``queue``, or the queue log a record
was transcribed from)."""


def load_starts(path: Path) -> dict[str, dt.datetime]:
    """Command → the earliest start its records in ``path`` give (none when it is missing);
    a line that is not a record with a ``command`` and a ``started`` time stops, named."""
    if not path.is_file():
        return {}
    out: dict[str, dt.datetime] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            t = dt.datetime.fromisoformat(str(rec["started"])).astimezone(UTC)
            command = str(rec["command"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(
                f"{path}, line {n}: expected a JSON start record with 'command' and 'started' "
                f"(ISO 8601 with its zone), got {line[:80]!r} ({exc}); mend or remove the line"
            ) from None
        out[command] = min(t, out.get(command, t))
    return out


def identity(row: Mapping[str, Any]) -> str:
    """The row without the fields rows got later (:data:`LATER_FIELDS`), as canonical JSON."""
    return json.dumps(
        {k: v for k, v in row.items() if k not in LATER_FIELDS}, sort_keys=True, default=str
    )


def first_added(repo: Path, log: Path) -> dict[str, dt.datetime]:
    """Row identity → time of the first commit that added the row to ``log`` (by its
    :func:`identity`, so a rewritten row keeps its first date). Empty without the history."""
    rel = log.resolve().relative_to(repo.resolve()).as_posix()
    head = (_git(repo, "rev-parse", "HEAD") or "").strip()
    return dict(_first_added(str(repo), rel, head))


@functools.lru_cache(maxsize=32)
def _first_added(repo: str, rel: str, head: str) -> tuple[tuple[str, dt.datetime], ...]:
    """:func:`first_added` for one commit of the history (cached: a log's history at a given
    HEAD does not change)."""
    out = _git(Path(repo), "log", "--reverse", "--unified=0", "--format=@@@ %cI", "-p", "--", rel)
    found: dict[str, dt.datetime] = {}
    when: dt.datetime | None = None
    for line in (out or "").splitlines():
        if line.startswith("@@@ "):
            when = dt.datetime.fromisoformat(line[4:].strip()).astimezone(UTC)
        elif when is not None and line.startswith("+{"):
            try:
                row = json.loads(line[1:])
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict):
                found.setdefault(identity(row), when)
    return tuple(found.items())


def registered_at(repo: Path, plan_file: Path, entry: str) -> dt.datetime | None:
    """Time of the first commit whose ``plan_file`` holds ``id = "<entry>"``."""
    rel = plan_file.resolve().relative_to(repo.resolve()).as_posix()
    out = _git(repo, "log", "--reverse", "--format=%cI", f'-Sid = "{entry}"', "--", rel)
    first = (out or "").split()
    return dt.datetime.fromisoformat(first[0]).astimezone(UTC) if first else None


def frozen_codes(queue: Path | None, entry: str) -> list[str]:
    """The ``code`` commits of ``queue``'s jobs for ``entry`` (read only)."""
    if queue is None or not queue.is_file():
        return []
    jobs = tomllib.loads(queue.read_text(encoding="utf-8")).get("job", [])
    return [str(j["code"]) for j in jobs if j.get("plan") == entry and j.get("code")]


FROZEN_IN_NOTE = re.compile(r"frozen (?:commit|code)[ :(]*([0-9a-f]{7,40})\b")
"""A frozen commit an entry's note (or its budget's) names: "frozen commit 638235b"."""


def named_codes(entry: Experiment) -> list[str]:
    """The frozen commits the entry's own notes name (:data:`FROZEN_IN_NOTE`)."""
    text = f"{entry.note} {entry.budget.get('note', '')}"
    return FROZEN_IN_NOTE.findall(text)


def _holds(repo: Path, commit: str, plan_rel: str, entry: str) -> tuple[bool, dt.datetime | None]:
    text = _git(repo, "show", f"{commit}:{plan_rel}")
    when = _git(repo, "log", "-1", "--format=%cI", commit)
    t = dt.datetime.fromisoformat(when.strip()).astimezone(UTC) if when else None
    return (text is not None and f'id = "{entry}"' in text), t


def registration(
    entry: Experiment,
    rows: Sequence[Mapping[str, Any]],
    *,
    plan_file: Path,
    logs: Iterable[Path] = (),
    queue: Path | None = None,
    starts: Mapping[str, dt.datetime] | None = None,
    history: bool = True,
) -> Registration:
    """Whether ``entry`` was committed before the runs of ``rows`` (its run-log rows, from the
    files ``logs``); see the module docstring for the evidence. ``starts`` maps a command to
    its recorded start (default: the records of :data:`STARTS` beside ``queue``).
    ``history=False`` decides by the dates alone."""
    if starts is None:
        starts = load_starts(queue.parent / STARTS) if queue is not None else {}
    repo = repo_of(plan_file) if history else None
    at = registered_at(repo, plan_file, entry.id) if repo else None
    added: dict[str, dt.datetime] = {}
    if repo:
        for log in logs:
            if log.is_file():
                for k, v in first_added(repo, log).items():
                    added[k] = min(v, added.get(k, v))
    frozen: list[tuple[str, dt.datetime | None]] = []
    if repo:
        plan_rel = plan_file.resolve().relative_to(repo.resolve()).as_posix()
        for code in dict.fromkeys([*frozen_codes(queue, entry.id), *named_codes(entry)]):
            holds, t = _holds(repo, code, plan_rel, entry.id)
            if holds:
                frozen.append((code, t))
    day_start = dt.datetime.combine(entry.committed, dt.time(), UTC)
    day_end = day_start + dt.timedelta(days=1)

    def make(status: Status, evidence: str) -> Registration:
        return Registration(
            entry=entry.id,
            committed=entry.committed,
            registered_at=at,
            rows=len(rows),
            status=status,
            evidence=evidence,
        )

    if not rows:
        return make("pre-registered", "no run-log row names it yet")
    bounds = [row_start(r, starts.get(str(r.get("command")))) for r in rows]
    # before the entry: a run that began (by its fields) or was committed before it
    latest: list[tuple[dt.datetime, str]] = []
    for r, (_, hi) in zip(rows, bounds, strict=True):
        if hi is not None:
            latest.append((hi, "its run-log fields"))
        if identity(r) in added:
            t = added[identity(r)] - dt.timedelta(seconds=_wall(r) or 0.0)
            latest.append((t, "the commit that first added its row"))
    if latest:
        first, how = min(latest)
        if (at is not None and first < at) or (at is None and first < day_start):
            return make("after", f"a run began by {first:%Y-%m-%d %H:%M} UTC, by {how}")
    # after the entry: the runs ran from frozen code holding it, or all began after it
    if frozen:
        code, t = frozen[0]
        return make(
            "pre-registered",
            f"its queue job ran frozen code {code[:7]}"
            + (f" ({t:%Y-%m-%d %H:%M} UTC)" if t else "")
            + ", whose plan already holds the entry",
        )
    bound = at if at is not None else day_end
    lows = [lo for lo, _ in bounds]
    if all(lo is not None for lo in lows):
        first_lo = min(lo for lo in lows if lo is not None)
        if first_lo >= bound:
            return make(
                "pre-registered",
                f"its first run began at {first_lo:%Y-%m-%d %H:%M} UTC or later, by its "
                "recorded starts (rows' invocation, queue start records)",
            )
    return make(
        "undetermined",
        "no recorded start (a row's invocation or a queue start record) shows that every run "
        "began after it, and no frozen code named for it (queue job or note) holds the entry",
    )
